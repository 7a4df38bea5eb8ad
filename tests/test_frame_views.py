"""A replay reads each record where it lies in the capture reader's buffer
(engine: Skb.start/end, rebased only where needed); the engine API is given
each frame as its own bytes.  Both must deliver exactly the same packets,
bytes included, under settings that reach every use of a frame's offsets:
checksum verification and rebuilding (--l4-csum full), fraglist, UDP
forwarding, tunnels, several queues and timers, the layout model and the
decision events."""

import glob
import os

import pytest

from grotool.engine import Engine, Settings
from grotool.io.capture import CaptureReader
from grotool.replay import _checksum_fixer, replay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAPTURES = sorted(glob.glob(os.path.join(ROOT, "captures", "*.pcap")) +
                  [p for p in glob.glob(os.path.join(ROOT, "tests", "data", "*.pcap")) if "sll2" not in p])
SETTINGS = [
    Settings(device="nic"),
    Settings(device="veth"),
    Settings(device="veth", udp_gro_forwarding=True, rx_gro_list=True, udp_gro_sockets=(53, 443),
             vxlan_ports=(4789,), geneve_ports=(6081,), csum="verify", l4_csum="full"),
    Settings(device="nic", kernel="6.1", csum="auto"),
    Settings(device="nic", rx_queues=4, gro_flush_timeout=20000, napi_defer_hard_irqs=2, hz=1000),
    Settings(device="nic", poll_ns_per_frame=300, layout="frags"),
]


def _fields(d):
    return (d.ts, d.data, d.segs, d.reason, d.indices, d.key, d.gso_size, d.gso_type, d.payload, d.queue,
            d.poll, d.layer, d.header_len, d.first_len, d.merged_lens, d.fraglist, d.frame_len)


def _through_the_engine(path, settings, events, padding=0):
    """Each frame fed to the engine API: as bytes of its own (padding 0), or
    inside a larger string, as the compiled replay gives it the reader's
    buffer (the engine's in-place path, in either build)."""
    with CaptureReader(path, any_linktype=True, tolerate_truncation=True) as reader:
        engine = Engine(reader.linktype or 1, settings, events=events)
        out = []
        for ts, data, wirelen in reader:
            if padding:
                buf = b"\xee" * padding + bytes(data) + b"\xdd" * 7
                pending = engine.receive_record(ts, buf, wirelen, 0, padding, padding + len(data))
                out += pending
                pending.clear()
            else:
                out += engine.feed(ts, bytes(data), wirelen)
        out += engine.finish()
        if settings.l4_csum == "full":
            # as replay() does: packets sent up unchanged get valid checksums too
            fix = _checksum_fixer(reader.linktype or 1, settings, engine.interface_linktypes)
            for d in out:
                fix(d)
    return [_fields(d) for d in out]


def _through_a_replay(path, settings, events):
    out = []
    replay(path, None, settings, observers=[lambda d: out.append(_fields(d))], events=events)
    return out


@pytest.mark.parametrize("path", CAPTURES, ids=os.path.basename)
def test_frames_read_in_place_deliver_what_frames_of_their_own_do(path):
    assert CAPTURES
    for settings in SETTINGS:
        api = _through_the_engine(path, settings, None)
        assert api, path
        assert _through_a_replay(path, settings, None) == api, (path, settings)
        assert _through_the_engine(path, settings, None, padding=301) == api, (path, settings)


@pytest.mark.parametrize("path", CAPTURES[:4], ids=os.path.basename)
def test_decision_events_are_the_same_for_frames_read_in_place(path):
    for settings in SETTINGS[:3]:
        api_events, replay_events = [], []
        _through_the_engine(path, settings, api_events.append)
        _through_a_replay(path, settings, replay_events.append)
        assert replay_events and [repr(e) for e in replay_events] == [repr(e) for e in api_events]
        view_events = []
        _through_the_engine(path, settings, view_events.append, padding=301)
        assert [repr(e) for e in view_events] == [repr(e) for e in api_events]
