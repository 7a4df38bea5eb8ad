"""grotool sweep: combinations, added latency, executors (this process, local
processes, a local Dask cluster) giving identical documents, usage errors."""

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from framebuild import tcp_frame
from grotool.engine.config import Settings
from grotool.executor import Executor, ProcessExecutor
from grotool.sweep import Axis, SweepTask, combinations, measure_capture, nearest_rank, run_sweep

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
# at a jiffy boundary at every CONFIG_HZ: all the hand-computed packets share one jiffy
T0 = 1_700_000_000_000_000_000


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "grotool", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})


def write_pcap(path, records):
    """Nanosecond pcap of (ns offset from T0, frame)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for offset, frame in records:
            sec, nsec = divmod(T0 + offset, 1_000_000_000)
            f.write(struct.pack("<IIII", sec, nsec, len(frame), len(frame)) + frame)


@pytest.fixture
def four_segments(tmp_path):
    """One TCP flow, four in-order 1000-byte segments (ACK only, valid checksums)
    arriving at 0, 1, 2 and 20 microseconds."""
    path = tmp_path / "four.pcap"
    write_pcap(path, [(at, tcp_frame(1000, seq=1000 + 1000 * k)) for k, at in enumerate((0, 1000, 2000, 20000))])
    return path


# The nic model with one queue, budget 64, rx-frames 32, HZ 250:
#  * defaults (rx-usecs 8, no flush timeout): frame 0 arms the IRQ for 8 us; the
#    poll at 8 us merges frames 0-2 and napi_complete delivers them (waits 8, 7,
#    6 us); frame 3 arms the IRQ for 28 us, its poll delivers it alone (8 us).
#  * gro-flush-timeout 50 us: the poll at 8 us holds the 3-segment aggregate
#    (napi_complete_done flushes only jiffy-old packets) and arms the timer for
#    58 us; frame 3's IRQ poll at 28 us merges it and re-arms the timer for 78
#    us; that timer poll finds no work and flushes: waits 78, 77, 76, 58 us.
#  * plus napi-defer-hard-irqs 2, gro-flush-timeout 20 us: the IRQ poll at 8 us
#    holds the aggregate, keeps the IRQ masked and arms the timer for 28 us;
#    frame 3 waits in the ring; timer poll at 28 us merges it (work resets the
#    defer count to 2, one used: timer 48 us); empty timer poll at 48 us uses the
#    last deferral (timer 68 us); the empty poll at 68 us flushes: waits 68, 67,
#    66, 48 us.
HAND_COMPUTED = [
    ([], 2, {"napi_complete": 2}, [6000, 7000, 8000, 8000]),
    (["--gro-flush-timeout", "50000"], 1, {"flush_timeout": 1}, [58000, 76000, 77000, 78000]),
    (["--gro-flush-timeout", "20000", "--napi-defer-hard-irqs", "2"], 1, {"flush_timeout": 1},
     [48000, 66000, 67000, 68000]),
]


@pytest.mark.parametrize("options, packets, reasons, waits", HAND_COMPUTED)
def test_added_latency_matches_hand_computation(four_segments, options, packets, reasons, waits):
    from grotool.check import args_to_settings

    m = measure_capture(SweepTask(0, 0, str(four_segments), args_to_settings(options)))
    assert m["error"] is None
    assert m["frames"] == 4 and m["packets_out"] == packets
    assert m["reasons"] == reasons
    assert m["latencies"] == waits
    assert m["unmeasured"] == 0


def test_latency_summary_in_the_document(four_segments):
    axes = [Axis("--gro-flush-timeout", "gro_flush_timeout", (0, 50000))]
    doc = run_sweep([str(four_segments)], Settings(), axes, Executor())
    first, second = doc["results"]
    assert first["setting"] == {"gro_flush_timeout": 0}
    # nearest rank over [6, 7, 8, 8] us: median is the 2nd value, p99 the 4th
    assert first["added_latency_ns"] == {"segments": 4, "mean": 7250.0, "median": 7000, "p90": 8000,
                                         "p99": 8000, "max": 8000, "unmeasured_segments": 0}
    assert second["added_latency_ns"]["median"] == 76000
    assert second["added_latency_ns"]["max"] == 78000
    assert first["segments_per_packet"] == {"mean": 2.0, "p50": 1, "p90": 3, "p99": 3, "max": 3}
    assert second["segments_per_packet"] == {"mean": 4.0, "p50": 4, "p90": 4, "p99": 4, "max": 4}
    assert first["coalescing_ratio"] == 2.0 and second["coalescing_ratio"] == 4.0
    # 14 + 20 + 20 header bytes; 3000 or 4000 payload bytes merged
    assert second["bytes_per_packet"]["max"] == 54 + 4000
    assert first["bytes_per_packet"] == {"mean": (54 + 3000 + 54 + 1000) / 2, "p50": 1054, "p90": 3054,
                                         "p99": 3054, "max": 3054}
    assert first["replay_args"] == [] and second["replay_args"] == ["--gro-flush-timeout", "50000"]


def test_veth_has_no_latency(four_segments):
    doc = run_sweep([str(four_segments)], Settings(device="veth"), [], Executor())
    (result,) = doc["results"]
    assert result["added_latency_ns"] is None
    assert result["packets_out"] == 1 and result["flush_reasons"] == {"budget_exhausted_all": 1}


def test_nearest_rank():
    values = list(range(1, 101))
    assert nearest_rank(values, 50) == 50 and nearest_rank(values, 99) == 99 and nearest_rank(values, 100) == 100
    assert nearest_rank([5], 1) == 5


def test_combinations_order_and_gro_max_size_rule():
    axes = [Axis("--rx-usecs", "rx_usecs", (8, 32)), Axis("--gro-max-size", "gro_max_size", (32768, 131072))]
    combos = combinations(Settings(), axes)
    assert [p for p, _ in combos] == [{"rx_usecs": 8, "gro_max_size": 32768}, {"rx_usecs": 8, "gro_max_size": 131072},
                                      {"rx_usecs": 32, "gro_max_size": 32768},
                                      {"rx_usecs": 32, "gro_max_size": 131072}]
    # netif_set_gro_max_size: the IPv4 limit follows up to 64 KiB, stays at 64 KiB above
    assert [s.gro_ipv4_max_size for _, s in combos] == [32768, 65536, 32768, 65536]
    assert [s.gro_ipv4_max_size for _, s in combinations(Settings(), axes, explicit_ipv4_max_size=20000)] == \
        [20000] * 4


CAPTURES = [str(DATA / "real-bulk-ipv4.pcap"), str(DATA / "real-parallel4-ipv4.pcap")]
SWEEP_ARGS = ["--set", "gro-flush-timeout=0,20000", "--set", "napi-defer-hard-irqs=0,2", "--set", "rx-usecs=8,32"]


def sweep_json(tmp_path, name, *extra):
    out = tmp_path / f"{name}.json"
    r = run("sweep", *CAPTURES, *SWEEP_ARGS, "-q", "--json", out, *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


def test_local_processes_give_the_same_document(tmp_path):
    serial = sweep_json(tmp_path, "serial", "--jobs", "1")
    parallel = sweep_json(tmp_path, "parallel", "--jobs", "2")
    assert parallel == serial
    assert [r["setting"] for r in serial["results"]][:3] == [
        {"gro_flush_timeout": 0, "napi_defer_hard_irqs": 0, "rx_usecs": 8},
        {"gro_flush_timeout": 0, "napi_defer_hard_irqs": 0, "rx_usecs": 32},
        {"gro_flush_timeout": 0, "napi_defer_hard_irqs": 2, "rx_usecs": 8}]
    assert len(serial["results"]) == 8
    # sweep counts what replay counts: the two captures replayed with one combination
    totals = [json.loads(run("replay", c, "-q", "--json", "-", "--rx-usecs", "32").stdout)["totals"]
              for c in CAPTURES]
    second = serial["results"][1]
    assert second["packets_in"] == sum(t["packets_in"] for t in totals) == 1007
    assert second["packets_out"] == sum(t["packets_out"] for t in totals)
    assert second["super_packets"] == sum(t["super_packets"] for t in totals)


def test_dask_local_cluster_gives_the_same_document(tmp_path):
    import distributed  # the test extra brings it: a missing Dask fails here, never skips
    serial = sweep_json(tmp_path, "serial")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  scheduler_port=0) as cluster:
        dask = sweep_json(tmp_path, "dask", "--scheduler", cluster.scheduler_address)
    assert dask == serial


def test_process_executor_keeps_item_order():
    with ProcessExecutor(2) as ex:
        assert ex.map(abs, [-3, 2, -1, 0, -7]) == [3, 2, 1, 0, 7]


@pytest.mark.parametrize("bad", ["rx-usecs", "rx-usecs=", "rx-usecs=8,,32", "no-such-knob=1", "rx-usecs=fast",
                                 "rx-usecs=8,8", "udp-gro-socket=1,2", "budget=0"])
def test_bad_set_is_a_one_line_usage_error(bad):
    r = run("sweep", CAPTURES[0], "--set", bad)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("grotool: usage error: --set")
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_swept_and_fixed_twice_are_usage_errors():
    r = run("sweep", CAPTURES[0], "--rx-usecs", "8", "--set", "rx-usecs=8,32")
    assert r.returncode == 2 and "also given as a fixed option" in r.stderr and r.stderr.count("\n") == 1
    r = run("sweep", CAPTURES[0], "--set", "rx-usecs=8", "--set", "--rx-usecs=32")
    assert r.returncode == 2 and "swept twice" in r.stderr


def test_fixed_options_and_flags(tmp_path):
    out = tmp_path / "s.json"
    r = run("sweep", CAPTURES[0], "--device", "veth", "--set", "gro=on,off", "--set", "hz=100,1000", "-q",
            "--json", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "grotool.sweep/1"
    assert doc["base_settings"]["device"] == "veth"
    assert [r["setting"] for r in doc["results"]] == [{"gro": True, "hz": 100}, {"gro": True, "hz": 1000},
                                                      {"gro": False, "hz": 100}, {"gro": False, "hz": 1000}]
    off = doc["results"][2]
    assert off["packets_out"] == off["packets_in"] == 695 and off["super_packets"] == 0
    assert all(r["added_latency_ns"] is None for r in doc["results"])


def test_unreadable_capture_exits_3(tmp_path):
    r = run("sweep", tmp_path / "missing.pcap", "--set", "rx-usecs=8,32", "--jobs", "2")
    assert r.returncode == 3 and r.stderr.startswith("grotool: error:") and r.stderr.count("\n") == 1


def test_table_and_plot(tmp_path, four_segments):
    png = tmp_path / "sweep.png"
    r = run("sweep", four_segments, "--set", "gro-flush-timeout=0,50000", "--plot", png)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if "│" in line]
    assert len(lines) == 2
    assert "7.0/8.0/8.0" in lines[0] and "napi_complete 100%" in lines[0]
    assert "76.0/78.0/78.0" in lines[1] and "flush_timeout 100%" in lines[1]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_check_jobs_gives_the_serial_report(tmp_path):
    import shutil

    for name in os.listdir(ROOT / "captures"):
        shutil.copy(ROOT / "captures" / name, tmp_path / name)
    # one capture without a golden: a broken result, exit 3 on every executor
    shutil.copy(DATA / "real-bulk-ipv4.pcap", tmp_path / "no-golden.pcap")
    serial = run("check", tmp_path)
    parallel = run("check", tmp_path, "--jobs", "2")
    assert serial.returncode == parallel.returncode == 3
    assert parallel.stdout == serial.stdout
    assert "no golden" in serial.stdout and "passed, 0 failed, 1 unreadable or missing" in serial.stdout


def test_standard_input_is_refused():
    r = run("sweep", "-", "--set", "rx-usecs=8,32")
    assert r.returncode == 2 and "not standard input" in r.stderr and r.stderr.count("\n") == 1


def test_truncated_capture_is_swept_with_a_warning(tmp_path, four_segments):
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(four_segments.read_bytes()[:-10])      # the fourth record loses its last bytes
    out = tmp_path / "s.json"
    r = run("sweep", cut, "--set", "rx-usecs=8,32", "-q", "--json", out)
    assert r.returncode == 0, r.stderr
    assert "last record cut short; the 3 complete records before it were replayed" in r.stderr
    doc = json.loads(out.read_text())
    assert doc["inputs"][0]["packets"] == 3 and doc["inputs"][0]["truncated"]
    # three segments merged by the poll 8 (or 32) us after the first arrived
    assert [r["added_latency_ns"]["max"] for r in doc["results"]] == [8000, 32000]
    assert [r["packets_out"] for r in doc["results"]] == [1, 1]


def test_delivered_ns_is_the_simulated_time_the_batch_reached_the_stack():
    from grotool.engine import Engine

    frames = [(T0 + at, tcp_frame(1000, seq=1000 + 1000 * k)) for k, at in enumerate((0, 1000, 2000, 20000))]
    # nic defaults: the IRQ poll at 8 us delivers frames 0-2, the one at 28 us frame 3
    engine = Engine(1, Settings())
    out = [d for ts, frame in frames for d in engine.feed(ts, frame)] + engine.finish()
    assert [(d.indices, d.delivered_ns) for d in out] == [((0, 1, 2), T0 + 8000), ((3,), T0 + 28000)]
    # gro_normal_batch 1: each packet is its own batch; the batch of a poll still gets that poll's time
    engine = Engine(1, Settings(gro_normal_batch=1, gro=False))
    out = [d for ts, frame in frames for d in engine.feed(ts, frame)] + engine.finish()
    assert [d.delivered_ns for d in out] == [T0 + 8000] * 3 + [T0 + 28000]
    # the veth device has no clock; a frame cut by the snaplen never reaches a device
    engine = Engine(1, Settings(device="veth"))
    out = [d for ts, frame in frames for d in engine.feed(ts, frame)] + engine.finish()
    assert [d.delivered_ns for d in out] == [None]
    engine = Engine(1, Settings())
    out = engine.feed(T0, frames[0][1][:60], wirelen=len(frames[0][1])) + engine.finish()
    assert [(d.reason, d.delivered_ns) for d in out] == [("capture_truncated", None)]
