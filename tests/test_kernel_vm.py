"""grotool kernel --vm: the oracle inside a VM running Debian's 6.1 and 6.12
kernels (qemu; TCG here, about 20-30 s per boot).  One boot per image for the
whole module (the ``guest`` fixture), every replay through it.

Marked `kernel`: in CI (GROTOOL_REQUIRE_KERNEL=1) a skip is a failure.  The
first run downloads the two kernel packages (about 180 MB) into the VM cache.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernel_support as ks
from grotool import scenarios as S
from grotool.engine import Settings, simulate
from grotool.errors import EnvironmentProblem
from grotool.oracle import HostState, run_kernel_replay
from grotool.oracle import vm as V

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted((ROOT / "captures").glob("*.pcap"))
IMAGES = ["debian:6.1", "debian:6.12"]


def vm_skip_reason():
    for tool, pkg in (("qemu-system-x86_64", "qemu-system-x86"), ("busybox", "busybox-static"),
                      ("depmod", "kmod"), ("ethtool", "ethtool"), ("ip", "iproute2")):
        if V.shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}") \
                and not os.path.exists(f"/sbin/{tool}"):
            return f"needs {tool} ({pkg})"
    return None


_REASON = vm_skip_reason()
pytestmark = [pytest.mark.kernel, pytest.mark.skipif(_REASON is not None, reason=f"VM test skipped: {_REASON}")]
TIMINGS = {}


@pytest.fixture(scope="module", params=IMAGES)
def guest(request):
    """One booted guest per image for all the tests of this module."""
    with V.VmSession(request.param) as vm:
        TIMINGS[request.param] = {"boot_s": round(vm.boot_seconds, 1)}
        yield vm
    print(f"\n{request.param}: {TIMINGS[request.param]}")


def series(vm) -> str:
    return vm.image_spec.split(":")[1]


def segs(result):
    return [p.gso_segs for p in result.packets]


def sim(frames, **kw):
    return list(simulate([(i, f, len(f)) for i, f in enumerate(frames)], 1, Settings(device="veth", **kw)))


# -----------------------------------------------------------------------------
# the guest is the kernel it claims to be
# -----------------------------------------------------------------------------
def test_the_guest_runs_the_image_kernel_and_the_sidecar_says_so(guest, tmp_path):
    release = guest.guest["release"]
    want = {"6.1": "6.1.0-", "6.12": "6.12."}[series(guest)]
    assert release.startswith(want) and release.endswith("-amd64"), release
    assert release == guest.image.release
    pcap, sidecar = tmp_path / "in.pcap", tmp_path / "out.json"
    ks.write_pcap(pcap, ks.tcp_flow(100))
    t0 = time.monotonic()
    run = run_kernel_replay(str(pcap), str(tmp_path / "out.pcap"), str(sidecar), vm=guest)
    TIMINGS[guest.image_spec]["bulk100_s"] = round(time.monotonic() - t0, 2)
    doc = json.loads(sidecar.read_text())
    assert doc["schema"] == "grotool.kernel/1"
    assert doc["kernel"] == release and doc["settings"]["kernel"] == release
    assert doc["settings"]["vm"]["release"] == release
    assert doc["settings"]["vm"]["image"] == guest.image_spec
    assert doc["settings"]["vm"]["accel"] in ("kvm", "tcg")
    assert doc["settings"]["gro_flush_timeout_ns"] == V.GUEST_FLUSH_TIMEOUT_NS
    # veth GRO needed gro on (receiver) and tso off (sender): read back in the guest
    assert doc["settings"]["rx_features"]["generic-receive-offload"] == "on"
    assert doc["settings"]["tx_features"]["tcp-segmentation-offload"] == "off"
    # a bulk flow of 100 MSS segments: two full polls' worth, 45 segments = 65160 bytes max per packet
    assert run.reliable, run.warnings
    assert segs(run) == [45, 19, 36]
    assert [len(p.data) for p in run.packets] == [54 + 45 * 1448, 54 + 19 * 1448, 54 + 36 * 1448]
    assert all(p.gso_size == 1448 and p.gso_type == ["tcpv4"] for p in run.packets)
    _, out = ks.read_pcap(tmp_path / "out.pcap")
    assert [len(d) for _, d in out] == [len(p.data) for p in run.packets]


def test_bundled_captures_go_through_the_guest_and_lose_nothing(guest, tmp_path):
    for path in CAPTURES:
        t0 = time.monotonic()
        run = run_kernel_replay(str(path), str(tmp_path / "k.pcap"), str(tmp_path / "k.json"), vm=guest)
        TIMINGS[guest.image_spec][path.name + "_s"] = round(time.monotonic() - t0, 2)
        _, frames = ks.read_pcap(path)
        assert run.reliable, (path.name, run.warnings)
        assert sum(p.gso_segs for p in run.packets) == len(frames), path.name
        assert sorted(i for p in run.packets for i in p.covers) == list(range(len(frames))), path.name
        assert run.kernel == guest.guest["release"]


# -----------------------------------------------------------------------------
# what older kernels do differently (shared/spec/kernel-versions.md)
# -----------------------------------------------------------------------------
def test_cwr_segment_heads_an_aggregate_before_6_15(guest):
    """T1: up to 6.14 a CWR segment flushes the held packet, then later segments merge
    into it (tcp_gro_receive leaves CWR out of the flag-difference mask) and the
    super-packet carries CWR and SKB_GSO_TCP_ECN.  6.18 (this host) delivers it alone."""
    frames = ks.tcp_flow(10, flags_at=[(3, ks.ACK | ks.CWR)])
    run = guest.replay(frames)
    assert segs(run) == [3, 7]
    assert run.packets[1].data[14 + 20 + 13] & ks.CWR
    assert run.packets[1].gso_type == ["tcpv4", "tcp_ecn"]
    assert [p.covers for p in run.packets] == [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]]


def test_non_df_constant_ip_id_never_merges_before_6_18(guest):
    """L2: before 6.18 a fixed IPv4 ID is only allowed with DF (inet_gro_receive's
    flush_id); without DF every segment goes up alone.  6.18 merges them."""
    frames = [S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=7, df=False) for i in range(8)]
    run = guest.replay(frames)
    assert segs(run) == [1] * 8
    with_df = [S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=7, df=True) for i in range(8)]
    assert segs(guest.replay(with_df)) == [8]


# -----------------------------------------------------------------------------
# VLAN and GENEVE: absent from this host's kernel, built as modules in Debian's
# -----------------------------------------------------------------------------
@pytest.mark.parametrize("tags,tpids", [([100], None), ([100, 200], None), ([100, 200], [0x8100, 0x8100])],
                         ids=["8021q", "8021ad-qinq", "double-8021q"])
def test_vlan_tagged_flows_merge_in_the_guest_as_the_simulation_says(guest, tags, tpids):
    frames = [S.tcp_frame(seq=1000 + i * 1400, payload=1400, ip_id=i, vlan=tags, vlan_tpids=tpids)
              for i in range(12)]
    frames.insert(6, S.tcp_frame(seq=1000 + 6 * 1400, payload=1400, ip_id=6, vlan=[tags[0] + 1]))
    run = guest.replay(frames)
    assert run.reliable, run.warnings
    # the other tag is another flow, held beside the aggregate; the poll's end flushes the older first
    assert [p.covers for p in run.packets] == [list(range(6)) + list(range(7, 13)), [6]]
    assert [p.gso_segs for p in run.packets] == [12, 1]
    assert run.packets[0].data[12:14] == (b"\x88\xa8" if len(tags) == 2 and tpids is None else b"\x81\x00")
    got = [(p.covers, p.data) for p in run.packets]
    want = [(list(d.indices), d.data) for d in sim(frames, vlan_gro=True, kernel=series(guest))]
    assert got == want


def test_geneve_inner_tcp_merges_in_the_guest_as_the_simulation_says(guest):
    host = HostState.build(geneve_ports=(6081,))
    frames = [S.geneve_frame(S.tcp_frame(seq=1000 + i * 1300, payload=1300, ip_id=i), ip_id=i) for i in range(10)]
    frames.insert(4, S.geneve_frame(S.tcp_frame(seq=1000, payload=1300), vni=43))
    run = guest.replay(frames, host=host)
    assert run.reliable, run.warnings
    assert run.settings["host_realised"]["tunnels"][0]["kind"] == "geneve"
    assert [p.covers for p in run.packets] == [[0, 1, 2, 3, 5, 6, 7, 8, 9, 10], [4]]     # VNI 43: another flow
    assert run.packets[0].gso_segs == 10 and run.packets[0].gso_type == ["tcpv4"]
    want = [(list(d.indices), d.data) for d in sim(frames, geneve_ports=(6081,), kernel=series(guest))]
    assert [(p.covers, p.data) for p in run.packets] == want


def test_host_options_are_realised_in_the_guest(guest):
    """UDP_GRO socket, VXLAN device, rx-udp-gro-forwarding: the same HostState as on the host."""
    frames = [ks.udp(1000, salt=i, ip_id=i) for i in range(10)]
    plain = guest.replay(frames)
    assert segs(plain) == [1] * 10
    sock = guest.replay(frames, host=HostState.build(udp_gro_sockets=(5202,)))
    assert segs(sock) == [10] and sock.packets[0].gso_type == ["udp_l4"]
    fwd = guest.replay(frames, host=HostState.build(udp_gro_forwarding=True))
    assert segs(fwd) == [10] and fwd.packets[0].gso_size == 1000 and not fwd.packets[0].fraglist
    flist = guest.replay(frames, host=HostState.build(rx_gro_list=True))
    assert segs(flist) == [10] and flist.packets[0].fraglist and flist.packets[0].csum == "valid"
    # on 6.1 these UDP GSO packets came through the capture socket without vnet headers
    assert all(p.covers == list(range(10)) for p in (sock.packets[0], fwd.packets[0], flist.packets[0]))


# -----------------------------------------------------------------------------
# the command line, and failures: one line, exit 4, nothing left running
# -----------------------------------------------------------------------------
def grotool(*args, env=None, **kw):
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "grotool", *args], capture_output=True, text=True, env=full,
                          timeout=600, **kw)


def qemu_children(pid: int):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            comm, rest = stat.split("(", 1)[1].rsplit(")", 1)
            if comm.startswith("qemu-system") and int(rest.split()[1]) == pid:
                out.append(int(entry))
    return out


DOC = ROOT / "docs" / "kernel-vm.md"


def doc_blocks(lang: str):
    text = DOC.read_text()
    return [b.split("\n", 1)[1] for b in text.split("```")[1::2] if b.split("\n", 1)[0].strip() == lang]


def test_docs_command_writes_the_pcap_and_sidecar(tmp_path):
    """The first example of docs/kernel-vm.md, as written (21 frames: a flow of 20 and an ARP)."""
    command = doc_blocks("")[0].splitlines()[0]
    assert command.startswith("$ grotool kernel --vm debian:6.1 in.pcap out.pcap --json out.json")
    ks.write_pcap(tmp_path / "in.pcap", ks.tcp_flow(20) + [ks.arp_frame()])
    proc = grotool(*command.split()[2:], env={"TMPDIR": str(tmp_path)}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["kernel"].startswith("6.1.0-") and doc["settings"]["vm"]["image"] == "debian:6.1"
    assert [p["gso_segs"] for p in doc["packets"]] == [1, 20]     # the ARP goes up first
    assert "kernel 6.1.0-" in proc.stderr and "21 frames in, 2 packets out, 1 super-packets" in proc.stderr
    assert not list(tmp_path.glob("grotool-vm-*"))


def test_docs_python_example_runs(tmp_path):
    code = doc_blocks("python")[0]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == ["captures/mixed.pcap", "captures/bulk-4flows.pcap"]
    assert all(ln.split()[1].startswith("6.12.") for ln in lines)
    assert not list(tmp_path.glob("grotool-vm-*"))


def test_missing_qemu_is_one_line_and_exit_4(tmp_path):
    pcap = tmp_path / "in.pcap"
    ks.write_pcap(pcap, ks.tcp_flow(2))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    proc = grotool("kernel", "--vm", "debian:6.1", str(pcap), str(tmp_path / "out.pcap"),
                   env={"PATH": str(bindir), "TMPDIR": str(tmp_path)})
    assert proc.returncode == 4
    assert proc.stderr.strip().splitlines() == ["grotool: error: grotool kernel --vm needs 'qemu-system-x86_64' "
                                                "(qemu-system-x86)"]
    assert not (tmp_path / "out.pcap").exists()


def test_a_failed_download_is_one_line_and_exit_4_and_leaves_no_partial_cache(tmp_path):
    pcap = tmp_path / "in.pcap"
    ks.write_pcap(pcap, ks.tcp_flow(2))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "apt-get"
    fake.write_text("#!/bin/sh\necho 'E: Failed to fetch http://deb.debian.org/x.deb  404  Not Found' >&2\nexit 100\n")
    fake.chmod(0o755)
    cache = tmp_path / "cache"
    proc = grotool("kernel", "--vm", "debian:6.12", "-q", str(pcap), str(tmp_path / "out.pcap"),
                   env={"PATH": f"{bindir}:{os.environ['PATH']}", "GROTOOL_VM_CACHE": str(cache),
                        "TMPDIR": str(tmp_path)})
    assert proc.returncode == 4, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Failed to fetch" in lines[0] and lines[0].startswith("grotool: error: downloading ")
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []


def _module_subset(tmp_path, release_root: Path, release: str, keep) -> Path:
    """A lib/modules/RELEASE of only the modules under ``keep`` (symlinks), indexed by depmod."""
    src = release_root / "lib" / "modules" / release
    root = tmp_path / "root"
    dst = root / "lib" / "modules" / release
    for sub in keep:
        for f in (src / "kernel" / sub).rglob("*.ko*"):
            target = dst / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(f)
    for name in ("modules.builtin", "modules.builtin.modinfo", "modules.order"):
        if (src / name).exists():
            (dst / name).write_bytes((src / name).read_bytes())
    subprocess.run([V._need_tool("depmod", "kmod", ""), "-b", str(root), release], check=True)
    return dst


def test_a_kernel_without_9p_or_veth_is_exit_4_and_leaves_nothing(tmp_path):
    image = V.fetch_debian("debian:6.1")
    pcap = tmp_path / "in.pcap"
    ks.write_pcap(pcap, ks.tcp_flow(2))
    boot = ["drivers/virtio", "net/9p", "fs/netfs", "fs/fscache"]
    no9p = _module_subset(tmp_path / "a", image.modules_root, image.release, boot)
    proc = grotool("kernel", "--vm", str(image.vmlinuz), "--vm-modules", str(no9p), "-q", str(pcap),
                   str(tmp_path / "out.pcap"), env={"TMPDIR": str(tmp_path)})
    assert proc.returncode == 4
    assert proc.stderr.strip().splitlines() == [
        f"grotool: error: the kernel {image.vmlinuz} ({image.release}) lacks the 9p file system (CONFIG_9P_FS), "
        "which grotool kernel --vm needs to reach the host's files"]
    noveth = _module_subset(tmp_path / "b", image.modules_root, image.release, boot + ["fs/9p"])
    proc = grotool("kernel", "--vm", str(image.vmlinuz), "--vm-modules", str(noveth), "-q", str(pcap),
                   str(tmp_path / "out.pcap"), env={"TMPDIR": str(tmp_path)})
    assert proc.returncode == 4, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no veth (CONFIG_VETH)" in lines[0], lines
    assert not list(tmp_path.glob("grotool-vm-*"))


def test_a_guest_that_does_not_come_up_in_time_is_exit_4(tmp_path):
    pcap = tmp_path / "in.pcap"
    ks.write_pcap(pcap, ks.tcp_flow(2))
    t0 = time.monotonic()
    proc = grotool("kernel", "--vm", "debian:6.1", "--vm-boot-timeout", "5", str(pcap), str(tmp_path / "o.pcap"),
                   "-q", env={"TMPDIR": str(tmp_path)})
    assert proc.returncode == 4
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not come up within 5 s" in lines[0], lines
    assert time.monotonic() - t0 < 60
    assert not list(tmp_path.glob("grotool-vm-*"))


def test_sigterm_during_boot_stops_qemu_and_removes_the_job_directory(tmp_path):
    pcap = tmp_path / "in.pcap"
    ks.write_pcap(pcap, ks.tcp_flow(2))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "grotool", "kernel", "--vm", "debian:6.1", str(pcap),
                             str(tmp_path / "o.pcap")], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    qemu = []
    while not qemu and time.monotonic() < deadline:
        time.sleep(0.2)
        qemu = qemu_children(proc.pid)
    assert qemu, "qemu never started"
    time.sleep(2)                          # mid-boot
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM" in err
    for pid in qemu:
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()
    assert not list(tmp_path.glob("grotool-vm-*"))
    assert not (tmp_path / "o.pcap").exists()


def test_images_and_acceleration_are_chosen_as_documented():
    assert V.kvm_usable() == (os.access("/dev/kvm", os.R_OK | os.W_OK)
                              and any(f in open("/proc/cpuinfo").read().split() for f in ("vmx", "svm")))
    with pytest.raises(Exception, match="unknown VM image"):
        V.resolve_image("debian:5.10")
    with pytest.raises(Exception, match="--vm-modules"):
        V.resolve_image(sys.executable)
    assert V.newest_package("debian:6.1").startswith("linux-image-6.1.0-")
    with pytest.raises(EnvironmentProblem, match="guest did not come up|stopped"):
        with V.VmSession("debian:6.1", boot_timeout=0.5):
            pass


def test_the_xdp_setup_of_kernels_before_5_13_gives_the_same_merges(guest, monkeypatch):
    """Before 5.13 veth does GRO only with an XDP program on the receiving end; the
    oracle then attaches an XDP_PASS program and lowers the MTU to 3500
    (netns.gro_needs_xdp).  No such kernel is packaged here: the guest is told to
    use that setup anyway (GROTOOL_ORACLE_XDP=1 in a fresh namespace), and a 6.x veth
    with XDP must merge exactly as without it."""
    from grotool.oracle import netns

    assert netns.gro_needs_xdp("5.10.0-30-amd64") and netns.gro_needs_xdp("5.12.19")
    assert not netns.gro_needs_xdp("5.13.0") and not netns.gro_needs_xdp("6.1.0-57-amd64")
    frames = ks.tcp_flow(100) + ks.tcp_flow(10, flags_at=[(3, ks.ACK | ks.CWR)], sport=40001)
    plain = guest.replay(frames)
    xdp = guest.replay(frames, host=HostState.build(), guest_env={"GROTOOL_ORACLE_XDP": "1"})
    assert xdp.settings["xdp_pass_on_rx"] and xdp.settings["mtu"] == 3500
    assert not plain.settings["xdp_pass_on_rx"]
    assert [(p.covers, p.data) for p in xdp.packets] == [(p.covers, p.data) for p in plain.packets]
    with pytest.raises(Exception, match="MTU 3500"):
        guest.replay([S.tcp_frame(payload=4000)], guest_env={"GROTOOL_ORACLE_XDP": "1"})


def test_check_writes_a_kernel_origin_golden_from_the_guest_and_checks_it_under_its_profile(guest, tmp_path):
    """check --update --from-kernel --vm: the golden is what the guest's kernel
    delivered, records its release and its --kernel profile, and a check
    (grotool's replay under that profile) passes; under 6.18 it would not
    (the selftest capture has CWR and fixed-ID segments, rows T1 and L2)."""
    import shutil

    from grotool.check import PASS, Golden, check_target, diff_entries, find_targets, replay_entries

    capture = tmp_path / "selftest-ipv4.pcap"
    shutil.copy(Path(__file__).resolve().parent.parent / "captures" / "selftest-ipv4.pcap", capture)
    (target,) = find_targets([str(capture)])
    written = check_target(target, update=True, settings=Settings(device="veth"), from_kernel=True, vm=guest)
    assert written.status != "error", written.message
    golden = Golden.load(target.golden)
    assert golden.settings.kernel == series(guest)
    assert guest.image.release in golden.origin_text()
    assert check_target(target).status == PASS
    entries, _ = replay_entries(str(capture), Settings(device="veth"), None)
    assert diff_entries(golden.entries, entries)                 # 6.18's answer differs


def test_compare_with_the_guest_finds_grotool_identical_under_its_profile(guest):
    """compare --vm: the bundled captures through the guest's kernel and through
    grotool's replay under the guest's --kernel profile are identical."""
    from grotool.kernel_compare import compare_with_vm

    root = Path(__file__).resolve().parent.parent
    for name in ("bulk-4flows.pcap", "selftest-ipv4.pcap"):
        result = compare_with_vm(str(root / "captures" / name), guest, Settings(vlan_gro=True))
        assert result.identical, [f for f in result.to_json()["flows"] if f["status"] != "identical"][:2]
        assert f"--kernel {series(guest)}" in result.b.path
