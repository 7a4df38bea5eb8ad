"""grotool check: goldens next to captures, exit codes, --update, --junit."""

import hashlib
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grotool.check import (GOLDEN_FORMAT, NO_REASON, Entry, Golden, args_to_settings, diff_entries,
                           kernel_entries, settings_to_args)
from grotool.engine.config import Settings
from grotool.errors import InputError
from grotool.io.capture import PcapWriter, read_capture
from kernel_support import needs_kernel

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "grotool", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})


def copy_case(tmp_path, name, with_golden=True):
    shutil.copy(CAPTURES / f"{name}.pcap", tmp_path / f"{name}.pcap")
    if with_golden:
        shutil.copy(CAPTURES / f"{name}.gro", tmp_path / f"{name}.gro")
    return tmp_path / f"{name}.pcap"


def rewrite_capture(path, change):
    """Rewrite a capture, frame k (0-based) replaced by change(k, frame)."""
    linktype, records = read_capture(str(path))
    with PcapWriter(str(path), linktype) as writer:
        for k, (ts, data, wirelen) in enumerate(records):
            writer.write(ts, change(k, data), wirelen)


def ipv4_checksum_fixed(frame: bytes) -> bytes:
    f = bytearray(frame)
    f[24:26] = b"\0\0"
    total = sum(struct.unpack("!10H", bytes(f[14:34])))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    f[24:26] = struct.pack("!H", ~total & 0xFFFF)
    return bytes(f)


def lower_ttl(index):
    def change(k, data):
        if k != index:
            return data
        d = bytearray(data)
        d[22] -= 1
        return ipv4_checksum_fixed(bytes(d))
    return change


# -- the bundled goldens ---------------------------------------------------------
def test_bundled_captures_pass():
    r = run("check", "captures/")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {line.split("│")[1].strip(): line for line in r.stdout.splitlines() if line.count("│") >= 5}
    assert sorted(rows) == ["captures/bulk-4flows.pcap", "captures/mixed.pcap", "captures/selftest-ipv4.pcap",
                            "captures/selftest-ipv6.pcap"]
    packets = {name: int(row.split("│")[3]) for name, row in rows.items()}
    assert packets == {"captures/bulk-4flows.pcap": 73, "captures/mixed.pcap": 271,
                       "captures/selftest-ipv4.pcap": 184, "captures/selftest-ipv6.pcap": 161}
    assert all(row.split("│")[4].strip() == "pass" for row in rows.values())
    assert r.stdout.strip().splitlines()[-1] == "4 captures: 4 passed, 0 failed, 0 unreadable or missing"


def test_bundled_goldens_cover_the_reason_families():
    reasons = set()
    origins = {}
    for golden in sorted(CAPTURES.glob("*.gro")):
        g = Golden.load(str(golden))
        origins[golden.name] = (g.origin, g.settings_args)
        reasons |= {e.reason for e in g.entries}
    assert origins == {
        "bulk-4flows.gro": ("grotool kernel", ["--device", "veth"]),
        "mixed.gro": ("grotool replay", []),
        "selftest-ipv4.gro": ("grotool replay", ["--device", "veth"]),
        "selftest-ipv6.gro": ("grotool replay", ["--device", "veth"]),
    }
    families = {
        "link": {"no_l2_handler"},
        "ipv4": {"ip_ttl_changed", "ip_tos_changed", "ip_df_changed", "ip_id_not_incrementing", "ip_id_not_fixed",
                 "ip_options_or_version", "ip_fragment", "ip_bad_hdr_csum", "ip_len_mismatch", "ip_no_l4_handler"},
        "ipv6": {"ipv6_tclass_changed", "ipv6_no_l4_handler"},
        "tcp": {"tcp_push", "tcp_fin", "tcp_syn", "tcp_rst", "tcp_urg", "tcp_cwr", "tcp_no_payload",
                "tcp_seq_mismatch", "tcp_flags_changed", "tcp_window_changed", "tcp_ack_changed", "tcp_ts_changed",
                "tcp_options_changed", "tcp_hdrlen_changed", "tcp_oversize", "tcp_short_segment", "tcp_csum_bad"},
        "merge": {"merge_max_size"},
        "list_and_poll": {"bucket_full_evict_oldest", "budget_exhausted_all", "napi_complete"},
    }
    missing = {family: sorted(names - reasons) for family, names in families.items() if names - reasons}
    # tcp_window_changed has no case in the bundled captures; everything else is there
    assert missing == {"tcp": ["tcp_window_changed"]}


def test_golden_does_not_depend_on_the_working_directory(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    copy_case(tmp_path / "a", "mixed", with_golden=False)
    assert run("check", "--update", "a/mixed.pcap", cwd=tmp_path).returncode == 0
    copy_case(tmp_path / "b", "mixed", with_golden=False)
    assert run("check", "--update", str(tmp_path / "b"), cwd="/").returncode == 0
    one = (tmp_path / "a" / "mixed.gro").read_bytes()
    assert one == (tmp_path / "b" / "mixed.gro").read_bytes() == (CAPTURES / "mixed.gro").read_bytes()
    text = one.decode()
    assert str(tmp_path) not in text and "/" not in text.split("\n# one line")[0].replace(GOLDEN_FORMAT, "")
    digest = hashlib.sha256((CAPTURES / "mixed.pcap").read_bytes()).hexdigest()
    assert text.splitlines()[:7] == [f"# {GOLDEN_FORMAT}", "# grotool 0.1.0", "# capture: mixed.pcap (318 frames)",
                                     f"# capture-sha256: {digest}",
                                     "# origin: grotool replay", "# settings: (defaults)", "# packets: 271"]


def test_golden_lines():
    g = Golden.load(str(CAPTURES / "selftest-ipv4.gro"))
    assert len(g.entries) == 184 and g.frames == 263
    assert sum(e.segs for e in g.entries) == 263
    first = g.entries[0]
    assert first.line() == Entry.parse(first.line(), "x").line()
    # tcp_no_payload: the pure ACK goes up alone and completes the held packet of its flow
    no_payload = [e for e in g.entries if e.reason == "tcp_no_payload"]
    alone = [e for e in no_payload if e.length == 0]
    assert (len(no_payload), len(alone), sum(e.segs > 1 for e in no_payload)) == (19, 3, 7)
    assert all(e.segs == 1 and e.seq is not None for e in alone)
    arp_like = [e for e in g.entries if e.reason == "no_l2_handler"]
    assert len(arp_like) == 44 and all(e.seq is None and e.length == 60 for e in arp_like)


# -- failing checks --------------------------------------------------------------
def test_mutated_capture_fails_with_an_explanation(tmp_path):
    capture = copy_case(tmp_path, "selftest-ipv4")
    golden_before = (tmp_path / "selftest-ipv4.gro").read_bytes()
    # the first packet of 3+ segments (4 x 100 bytes); lower the TTL of its 3rd frame
    g = Golden.load(str(tmp_path / "selftest-ipv4.gro"))
    target = next(e for e in g.entries if e.segs >= 3)
    assert (target.length, target.segs) == (400, 4)
    rewrite_capture(capture, lower_ttl(target.frame + 1))         # 0-based index of its 3rd frame
    r = run("check", capture)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "fail (1 difference)" in r.stdout
    lines = r.stdout.splitlines()
    head = next(k for k, line in enumerate(lines) if line.startswith(f"  {target.flow}, packet #1 of the flow"))
    assert lines[head].endswith("golden has 1 packet (400 bytes, 4 segments), now 3 packets "
                                "(200 + 100 + 100 bytes, 4 segments)")
    assert lines[head + 1].strip() == f"golden: {target.short()}"
    now = [line.strip() for line in lines[head + 2:head + 5]]
    f = target.frame
    assert [n.split(" bytes ")[0] for n in now] == [
        f"now   : seq {target.seq} len 200 segs 2 frame {f} ip_ttl_changed",
        f": seq {target.seq + 200} len 100 segs 1 frame {f + 2} ip_ttl_changed",
        f": seq {target.seq + 300} len 100 segs 1 frame {f + 3} tcp_no_payload",
    ]
    assert lines[head + 5].strip() == f"why: grotool explain {capture} --frame {f}-{f + 3} --device veth"
    assert (tmp_path / "selftest-ipv4.gro").read_bytes() == golden_before


def test_header_only_change_is_caught(tmp_path):
    """Same packets, sizes, segments and reasons: only the bytes differ."""
    capture = copy_case(tmp_path, "mixed")
    _, records = read_capture(str(capture))
    arp_index = next(k for k, (_, d, _) in enumerate(records) if d[12:14] == b"\x08\x06")
    rewrite_capture(capture, lambda k, d: d[:-1] + bytes([d[-1] ^ 0xFF]) if k == arp_index else d)
    r = run("check", capture)
    assert r.returncode == 1
    assert "same seq, size, segments and reason, but the packet bytes differ" in r.stdout
    assert f"--frame {arp_index + 1}" in r.stdout


def test_changed_option_fails(tmp_path):
    capture = copy_case(tmp_path, "bulk-4flows")
    golden = tmp_path / "bulk-4flows.gro"
    golden.write_text(golden.read_text().replace("# settings: --device veth", "# settings: --device veth --budget 16"))
    r = run("check", capture)
    assert r.returncode == 1
    assert "fail (" in r.stdout and "--budget 16" in r.stdout


def test_reasons_are_compared(tmp_path):
    capture = copy_case(tmp_path, "mixed")
    golden = tmp_path / "mixed.gro"
    golden.write_text(golden.read_text().replace("  tcp_push  ", "  tcp_fin  "))
    r = run("check", capture)
    assert r.returncode == 1
    assert "fail (5 differences)" in r.stdout
    assert r.stdout.count("reason tcp_fin -> tcp_push") == 5


def test_order_difference():
    a = Entry("tcp a > b", 1, 10, 1, 1, "napi_complete", "0" * 12)
    b = Entry("udp c > d", None, 10, 1, 2, "ip_no_l4_handler", "1" * 12)
    diffs = diff_entries([a, b], [b, a])
    assert [(d.kind, d.what_changed()) for d in diffs] == [
        ("order", "same packets per flow, delivered in another order")]
    assert diff_entries([a, b], [a, b]) == []


def test_kernel_golden_ignores_reasons():
    a = Entry("tcp a > b", 1, 10, 1, 1, NO_REASON, "0" * 12)
    assert diff_entries([a], [Entry("tcp a > b", 1, 10, 1, 1, "tcp_push", "0" * 12)]) == []
    assert len(diff_entries([a], [Entry("tcp a > b", 1, 10, 1, 1, "tcp_push", "1" * 12)])) == 1


# -- update ----------------------------------------------------------------------
def test_update_records_the_options_then_passes(tmp_path):
    copy_case(tmp_path, "mixed", with_golden=False)
    copy_case(tmp_path, "bulk-4flows", with_golden=False)
    r = run("check", tmp_path)
    assert r.returncode == 3 and r.stdout.count("no golden") >= 2
    r = run("check", "--update", tmp_path, "--device", "veth", "--csum", "trust")
    assert r.returncode == 0 and r.stdout.count("written") == 2
    for name in ("mixed", "bulk-4flows"):
        g = Golden.load(str(tmp_path / f"{name}.gro"))
        assert g.settings_args == ["--device", "veth", "--csum", "trust"]
        assert g.origin == "grotool replay"
    assert run("check", tmp_path).returncode == 0
    # without options an update keeps each golden's settings
    before = (tmp_path / "mixed.gro").read_bytes()
    r = run("check", "--update", tmp_path / "mixed.pcap")
    assert r.returncode == 0 and "unchanged" in r.stdout
    assert (tmp_path / "mixed.gro").read_bytes() == before
    # after a reviewed change, --update rewrites and the check passes again
    rewrite_capture(tmp_path / "mixed.pcap", lower_ttl(0))
    assert run("check", tmp_path).returncode == 1
    r = run("check", "--update", tmp_path)
    assert r.returncode == 0 and "updated" in r.stdout
    assert run("check", tmp_path).returncode == 0


def test_update_keeps_a_kernel_origin_golden(tmp_path):
    capture = copy_case(tmp_path, "bulk-4flows")
    before = (tmp_path / "bulk-4flows.gro").read_bytes()
    r = run("check", "--update", capture)
    assert r.returncode == 0 and "unchanged" in r.stdout
    rewrite_capture(capture, lower_ttl(49))
    r = run("check", "--update", capture)
    assert r.returncode == 1 and "kept" in r.stdout
    assert "--from-kernel" in r.stdout
    assert (tmp_path / "bulk-4flows.gro").read_bytes() == before


def test_settings_round_trip():
    s = Settings(device="veth", budget=8, gro=False, hz=1000, rss_key=bytes(range(40)))
    args = settings_to_args(s)
    assert args[:7] == ["--device", "veth", "--budget", "8", "--no-gro", "--hz", "1000"]
    assert args_to_settings(args) == s
    assert settings_to_args(Settings()) == []
    with pytest.raises(InputError):
        args_to_settings(["--bogus", "1"])
    with pytest.raises(InputError):
        args_to_settings(["--budget", "0"])


# -- JUnit and unreadable inputs -------------------------------------------------
def test_junit_report(tmp_path):
    copy_case(tmp_path, "mixed")
    bad = copy_case(tmp_path, "bulk-4flows")
    rewrite_capture(bad, lower_ttl(49))
    (tmp_path / "selftest-ipv4.pcap").write_bytes(b"not a capture at all")
    shutil.copy(CAPTURES / "selftest-ipv4.gro", tmp_path / "selftest-ipv4.gro")
    report = tmp_path / "report.xml"
    r = run("check", tmp_path, "--junit", report)
    assert r.returncode == 3            # an unreadable capture outranks a failure
    root = ET.parse(report).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {Path(c.get("name")).name: c for c in suite.findall("testcase")}
    assert sorted(cases) == ["bulk-4flows.pcap", "mixed.pcap", "selftest-ipv4.pcap"]
    assert cases["mixed.pcap"].find("failure") is None and cases["mixed.pcap"].find("error") is None
    failure = cases["bulk-4flows.pcap"].find("failure")
    assert failure.get("message").startswith("1 difference(s) from ")
    assert "tcp 10.1.0.4:40003 > 10.0.0.1:5201, packet #1 of the flow" in failure.text
    assert "grotool explain" in failure.text
    error = cases["selftest-ipv4.pcap"].find("error")
    assert "not a pcap or pcapng file" in error.get("message")


def test_unreadable_inputs_exit_3(tmp_path):
    capture = copy_case(tmp_path, "mixed")
    golden = tmp_path / "mixed.gro"
    golden.write_text("hello\n")
    r = run("check", capture)
    assert r.returncode == 3 and "not a golden" in r.stdout
    golden.write_text((CAPTURES / "mixed.gro").read_text().replace("  seq 7000000  len 0", "  seq x  len 0", 1))
    r = run("check", capture)
    assert r.returncode == 3 and "not a golden packet line" in r.stdout
    golden.unlink()
    r = run("check", capture)
    assert r.returncode == 3 and "no golden" in r.stdout
    r = run("check", tmp_path / "nothing-here.pcap")
    assert r.returncode == 3 and "no such file or folder" in r.stdout
    assert "Traceback" not in r.stderr


def test_usage_errors():
    r = run("check", "captures/", "--device", "veth")
    assert r.returncode == 2 and "replay options are for --update" in r.stderr
    r = run("check", "captures/", "--from-kernel")
    assert r.returncode == 2


def test_quiet_prints_only_the_summary_and_no_progress(tmp_path):
    r = run("check", "-q", "captures/")
    assert r.returncode == 0
    assert r.stdout == ""
    assert r.stderr == "4 captures: 4 passed, 0 failed, 0 unreadable or missing\n"


# -- the real kernel ---------------------------------------------------------------
@needs_kernel
def test_kernel_origin_golden_is_what_the_kernel_delivers():
    golden = Golden.load(str(CAPTURES / "bulk-4flows.gro"))
    assert golden.origin == "grotool kernel" and golden.kernel.endswith("--csum auto --batch 64")
    entries, frames, detail = kernel_entries(str(CAPTURES / "bulk-4flows.pcap"), golden.settings)
    assert frames == golden.frames == 400
    assert detail.endswith("--csum auto --batch 64")
    assert entries == golden.entries
    # and grotool's own replay still matches the kernel's expectation
    assert run("check", "captures/bulk-4flows.pcap").returncode == 0


def test_from_kernel_without_root_exits_4(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from grotool.cli import main

    capture = copy_case(tmp_path, "bulk-4flows")
    before = (tmp_path / "bulk-4flows.gro").read_bytes()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = CliRunner().invoke(main, ["check", "--update", "--from-kernel", str(capture), "--device", "veth"])
    assert result.exit_code == 4
    assert "needs root" in result.output and "Traceback" not in result.output
    assert (tmp_path / "bulk-4flows.gro").read_bytes() == before


def test_from_kernel_needs_veth_settings():
    r = run("check", "--update", "--from-kernel", "captures/mixed.pcap", "--device", "nic", "--budget", "8")
    assert r.returncode == 2 and "needs --device veth" in r.stderr


def test_gzip_capture_and_golden_path_arguments(tmp_path):
    import gzip

    (tmp_path / "mixed.pcap.gz").write_bytes(gzip.compress((CAPTURES / "mixed.pcap").read_bytes()))
    shutil.copy(CAPTURES / "mixed.gro", tmp_path / "mixed.gro")
    r = run("check", tmp_path / "mixed.gro", tmp_path / "mixed.pcap.gz", tmp_path)
    assert r.returncode == 0, r.stdout
    assert r.stdout.strip().splitlines()[-1] == "1 capture: 1 passed, 0 failed, 0 unreadable or missing"
    (tmp_path / "lonely.gro").write_text((CAPTURES / "mixed.gro").read_text())
    r = run("check", tmp_path / "lonely.gro")
    assert r.returncode == 3 and "no capture next to this golden" in r.stdout


def test_host_state_settings_round_trip_through_golden_options():
    from grotool.check import args_to_settings, settings_to_args
    from grotool.engine import Settings

    s = Settings(device="veth", veth_rss=True, udp_gro_forwarding=True, vxlan_ports=(4789, 8472),
                 local_tcp=("10.0.0.1:80", "[fd00::1]:1>[fd00::2]:2"), layout="mlx5-copy256")
    args = settings_to_args(s)
    assert args == ["--device", "veth", "--rss", "--udp-gro-forwarding", "--vxlan-port", "4789", "--vxlan-port",
                    "8472", "--local-tcp", "10.0.0.1:80", "--local-tcp", "[fd00::1]:1>[fd00::2]:2",
                    "--layout", "mlx5-copy256"]
    assert args_to_settings(args) == s


# -- issue 32: a failure says whether the capture or grotool changed ------------------------
def test_failure_says_the_capture_changed(tmp_path):
    capture = copy_case(tmp_path, "selftest-ipv4")
    then = hashlib.sha256(capture.read_bytes()).hexdigest()
    assert f"# capture-sha256: {then}\n" in (tmp_path / "selftest-ipv4.gro").read_text()
    g = Golden.load(str(tmp_path / "selftest-ipv4.gro"))
    target = next(e for e in g.entries if e.segs >= 3)
    rewrite_capture(capture, lower_ttl(target.frame + 1))
    now = hashlib.sha256(capture.read_bytes()).hexdigest()
    r = run("check", capture, "--junit", tmp_path / "j.xml")
    assert r.returncode == 1
    line = (f"  the capture changed since the golden was written (sha256 {then[:12]} then, {now[:12]} now)")
    assert line in r.stdout.splitlines()
    assert line.strip() in (tmp_path / "j.xml").read_text()


def test_failure_says_grotool_changed_when_the_capture_is_the_same(tmp_path):
    capture = copy_case(tmp_path, "mixed")
    golden = tmp_path / "mixed.gro"
    golden.write_text(golden.read_text().replace("  tcp_push  ", "  tcp_fin  "))     # as if grotool changed
    r = run("check", capture)
    assert r.returncode == 1
    digest = hashlib.sha256(capture.read_bytes()).hexdigest()
    assert (f"  the capture is the one the golden was written for (sha256 {digest[:12]}): grotool's result "
            "changed (golden by grotool 0.1.0, now 0.1.0)") in r.stdout.splitlines()


def golden_v1(text: str) -> str:
    """The same golden as grotool.golden/1 wrote it: no digest line."""
    lines = [line for line in text.splitlines(keepends=True) if not line.startswith("# capture-sha256:")]
    return "".join(lines).replace("# grotool.golden/2\n", "# grotool.golden/1\n", 1)


def test_a_golden_1_without_a_digest_still_checks_and_says_it_cannot_tell(tmp_path):
    capture = copy_case(tmp_path, "mixed")
    golden = tmp_path / "mixed.gro"
    golden.write_text(golden_v1(golden.read_text()))
    assert golden.read_text().startswith("# grotool.golden/1\n") and "sha256:" not in golden.read_text()
    r = run("check", capture)
    assert r.returncode == 0, r.stdout + r.stderr
    assert Golden.load(str(golden)).capture_sha256 == ""
    golden.write_text(golden.read_text().replace("  tcp_push  ", "  tcp_fin  "))
    r = run("check", capture)
    assert r.returncode == 1
    assert ("  the golden records no digest of its capture (grotool.golden/1; --update adds one): it cannot "
            "tell whether the capture or grotool changed") in r.stdout.splitlines()
    # --update rewrites it as /2, with the digest
    golden.write_text(golden_v1((CAPTURES / "mixed.gro").read_text()))
    r = run("check", "--update", capture)
    assert r.returncode == 0 and "updated" in r.stdout
    assert golden.read_bytes() == (CAPTURES / "mixed.gro").read_bytes()


def test_a_bad_digest_line_is_bad_input(tmp_path):
    capture = copy_case(tmp_path, "mixed")
    golden = tmp_path / "mixed.gro"
    text = golden.read_text()
    golden.write_text(text.replace("# capture-sha256: ", "# capture-sha256: zz", 1))
    r = run("check", capture)
    assert r.returncode == 3 and "bad capture-sha256" in r.stdout
