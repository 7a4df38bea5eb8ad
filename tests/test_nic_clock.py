"""The NIC model's clock is a 64-bit integer of nanoseconds (napi.py): which
timestamps and delays it takes, and the jiffies it derives, in both builds."""

import struct
import subprocess
import sys
from pathlib import Path

import pytest

import grotool
from grotool.engine import Engine, Settings
from grotool.engine.config import TIMESTAMP_LIMIT_NS
from grotool.engine.napi import jiffies_at

NS_PER_S = 10 ** 9
from grotool.errors import InputError

from test_safety_input import FRAMES, pcapng_block

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 1 << 62


def test_the_timestamp_limit_is_2_to_the_62():
    assert TIMESTAMP_LIMIT_NS == LIMIT


@pytest.mark.parametrize("hz", [100, 250, 300, 1000])
def test_jiffies_are_the_floor_of_now_times_hz(hz):
    edges = [0, 1, -1, NS_PER_S - 1, NS_PER_S, -NS_PER_S, -NS_PER_S - 1, 3_999_999, 4_000_000, 1_700_000_000_123_456_789,
             LIMIT - 1, -LIMIT, LIMIT + 10 ** 10 + 10 ** 6 * 1000]
    for now in edges:
        assert jiffies_at(now, hz) == (now * hz) // NS_PER_S, now


def _deliveries(stamps, **options):
    engine = Engine(1, Settings(csum="trust", **options))
    out = []
    for ts, frame in zip(stamps, FRAMES):
        out += engine.feed(ts, frame)
    out += engine.finish()
    return [(d.ts, d.segs, d.reason, d.indices) for d in out]


def test_timestamps_at_both_ends_of_the_clock():
    """The last nanoseconds the clock takes run as any others do: an IRQ 8 us
    after the first frame, a poll merging what arrived by then.  The clock
    starts at 0 and never goes back, so frames before 1970 all arrive at 0."""
    base = LIMIT - 20_000
    stamps = [base + i * 1000 for i in range(10)]
    assert _deliveries(stamps) == [(base, 9, "napi_complete", tuple(range(9))),
                                   (base + 9000, 1, "napi_complete", (9,))]
    stamps = [-LIMIT + i * 1000 for i in range(10)]
    assert _deliveries(stamps) == [(-LIMIT, 10, "napi_complete", tuple(range(10)))]
    # with the largest delays the settings allow, near the top of the clock
    stamps = [LIMIT - 1 - (9 - i) for i in range(10)]
    got = _deliveries(stamps, rx_usecs=1_000_000, gro_flush_timeout=10 ** 10, napi_defer_hard_irqs=3,
                      poll_ns_per_frame=10 ** 9)
    assert [segs for _, segs, _, _ in got] == [10] and got[0][3] == tuple(range(10))


@pytest.mark.parametrize("device", ["nic", "veth"])
@pytest.mark.parametrize("ts, error", [(LIMIT, OverflowError), (-LIMIT - 1, OverflowError),
                                       (1 << 63, OverflowError), (1 << 70, OverflowError),
                                       (1.5, TypeError), (True, TypeError)])
def test_the_engine_refuses_a_timestamp_its_clock_cannot_keep(device, ts, error):
    """One rule for every device: veth polls by count, but its frames carry the same clock."""
    engine = Engine(1, Settings(device=device))
    engine.feed(0, FRAMES[0])
    with pytest.raises(error, match="frame 2: timestamp"):
        engine.feed(ts, FRAMES[1])
    with pytest.raises(error, match="frame 2: timestamp"):
        engine.receive(ts, FRAMES[1])


def test_a_capture_reader_timestamp_goes_in_as_it_is():
    """receive_record (the replay loop's entry, for the readers' timestamps) takes
    the same frames as receive."""
    for device in ("nic", "veth"):
        engine = Engine(1, Settings(device=device, csum="trust"))
        out = []
        for i, frame in enumerate(FRAMES):
            out += engine.receive_record(LIMIT - 10 ** 6 + i, frame)
        out += engine.finish()
        assert [(d.ts, d.segs) for d in out] == [(LIMIT - 10 ** 6, 10)]


@pytest.mark.parametrize("name, limit", [("rx_usecs", 1_000_000), ("gro_flush_timeout", 10 ** 10),
                                         ("poll_ns_per_frame", 10 ** 9)])
def test_delays_are_bounded_so_the_clock_cannot_overflow(name, limit):
    Settings(**{name: limit}).validate()
    with pytest.raises(ValueError, match=f"{name} must be at most {limit:,}"):
        Settings(**{name: limit + 1}).validate()


def test_the_api_refuses_a_timestamp_outside_the_clock_with_an_input_error():
    with pytest.raises(InputError, match=f"frame 2: timestamp {LIMIT} ns is outside the years 1824 to 2116"):
        grotool.Replay([(0, FRAMES[0]), (LIMIT, FRAMES[1])]).packets()
    # an int subclass is taken as its value
    packets = grotool.Replay([(True, FRAMES[0]), (LIMIT - 1, FRAMES[1])], device="veth").packets()
    assert [p.timestamp_ns for p in packets] == [1]


def _pcapng_with_offset(seconds):
    """Two frames at 1.7e9 s plus an if_tsoffset of `seconds`."""
    opts = struct.pack("<HHq", 14, 8, seconds) + struct.pack("<HH", 0, 0)
    out = [pcapng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
           pcapng_block(1, struct.pack("<HHI", 1, 0, 262144) + opts)]
    for i, fr in enumerate(FRAMES[:2]):
        ts = 1_700_000_000 * 10 ** 6 + i
        out.append(pcapng_block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(fr), len(fr)) + fr))
    return b"".join(out)


def test_a_pcapng_timestamp_beyond_2116_is_read_with_the_previous_timestamp(tmp_path):
    """issue 32: such a capture was refused whole (exit 3); tcpdump reads it.  Each
    record takes the previous record's timestamp, the first one 0, and one warning names the first."""
    late = tmp_path / "late.pcapng"
    late.write_bytes(_pcapng_with_offset(3 * 10 ** 9))          # year 2120
    r = subprocess.run([sys.executable, "-m", "grotool", "replay", "-q", str(late)], capture_output=True,
                       cwd=ROOT, timeout=120)
    ts = (1_700_000_000 + 3 * 10 ** 9) * 10 ** 9
    assert r.returncode == 0
    assert r.stderr.decode().strip().splitlines() == [
        f"grotool: warning: {late}: 2 records with an invalid timestamp (first: record 1 at byte offset 64, "
        f"timestamp {ts} ns is outside the years 1824 to 2116 that grotool takes) read with the previous "
        "record's timestamp"]
    assert [p.timestamp_ns for p in grotool.Replay(late, device="veth").packets()] == [0]
    # an offset that stays in range is applied
    ok = tmp_path / "ok.pcapng"
    ok.write_bytes(_pcapng_with_offset(10 ** 9))
    assert [p.timestamp_ns for p in grotool.Replay(ok, device="veth").packets()] == [
        (1_700_000_000 + 10 ** 9) * 10 ** 9]
