"""The host-state options on `grotool replay` and the hint line."""

import json
import subprocess
import sys
from pathlib import Path

import breadth_frames as F
from grotool.io.capture import PcapWriter

ROOT = Path(__file__).resolve().parent.parent


def write(path, frames):
    with PcapWriter(str(path)) as w:
        for i, f in enumerate(frames):
            w.write(i * 1000, f)
    return str(path)


def grotool(*args):
    return subprocess.run([sys.executable, "-m", "grotool", *args], capture_output=True, text=True, cwd=ROOT)


def test_vxlan_capture_hints_and_merges_with_the_port(tmp_path):
    cap = write(tmp_path / "vx.pcap", F.vxlan_mixed())
    plain = grotool("replay", "-q", "--device", "veth", cap, "--json", str(tmp_path / "a.json"))
    assert plain.returncode == 0
    assert plain.stderr.strip().splitlines() == [
        "grotool: hint: 36 UDP datagrams had no GRO path on this host: consider --vxlan-port 4789"]
    with_port = grotool("replay", "-q", "--device", "veth", cap, "--vxlan-port", "4789", "--json",
                        str(tmp_path / "b.json"))
    # the UDP datagrams inside the tunnel still have no GRO path of their own
    assert with_port.returncode == 0
    assert with_port.stderr == ("grotool: hint: 4 UDP datagrams had no GRO path on this host: consider "
                                "--udp-gro-socket 9, --udp-gro-forwarding or --rx-gro-list\n")
    a = json.loads((tmp_path / "a.json").read_text())["totals"]
    b = json.loads((tmp_path / "b.json").read_text())["totals"]
    assert (a["packets_out"], a["super_packets"]) == (36, 0)
    assert b["super_packets"] > 0 and b["packets_out"] < 36
    assert json.loads((tmp_path / "b.json").read_text())["settings"]["vxlan_ports"] == [4789]


def test_tcp_only_capture_has_no_hint(tmp_path):
    proc = grotool("replay", "-q", str(ROOT / "captures" / "bulk-4flows.pcap"))
    assert proc.returncode == 0 and proc.stderr == ""


def test_rx_gro_list_without_local_sockets_hints(tmp_path):
    cap = write(tmp_path / "t.pcap", F.tcp_for_fraglist())
    proc = grotool("replay", "-q", "--rx-gro-list", cap)
    assert "give --local-tcp" in proc.stderr
    proc = grotool("replay", "-q", "--rx-gro-list", "--local-tcp", "192.168.1.100:8000", cap)
    assert proc.stderr == ""


def test_bad_local_tcp_is_a_usage_error(tmp_path):
    cap = write(tmp_path / "t.pcap", F.tcp_for_fraglist())
    proc = grotool("replay", "-q", "--local-tcp", "fd00::1:80", cap)
    assert proc.returncode == 2
    assert "IPv6 in brackets" in proc.stderr and "Traceback" not in proc.stderr


# -- issue 32: the hint names the port the tunnel really uses --------------------------------
def test_vxlan_on_port_8472_hints_its_own_port_and_the_hint_works(tmp_path):
    """flannel's VXLAN (Linux's old default port 8472) was told to try UDP GRO options."""
    import tunnel_frames as T

    cap = write(tmp_path / "flannel.pcap", T.vxlan_tcp_flow(6, dport=8472) + T.udp_flow(3, dport=5300))
    plain = grotool("replay", "-q", "--device", "veth", cap, "--json", str(tmp_path / "a.json"))
    assert plain.stderr.strip().splitlines() == [
        "grotool: hint: 9 UDP datagrams had no GRO path on this host: consider --vxlan-port 8472; "
        "--udp-gro-socket 5300, --udp-gro-forwarding or --rx-gro-list"]
    followed = grotool("replay", "-q", "--device", "veth", cap, "--vxlan-port", "8472", "--json",
                       str(tmp_path / "b.json"))
    assert followed.stderr.strip().splitlines() == [
        "grotool: hint: 3 UDP datagrams had no GRO path on this host: consider --udp-gro-socket 5300, "
        "--udp-gro-forwarding or --rx-gro-list"]
    a = json.loads((tmp_path / "a.json").read_text())["totals"]
    b = json.loads((tmp_path / "b.json").read_text())["totals"]
    assert (a["packets_out"], a["super_packets"]) == (9, 0)
    assert (b["packets_out"], b["super_packets"]) == (4, 1)      # the 6 VXLAN segments merged


def test_geneve_on_another_port_and_plain_udp_on_8472(tmp_path):
    from grotool import scenarios as S
    import tunnel_frames as T

    geneve = [S.geneve_frame(S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i), dport=7000, ip_id=i)
              for i in range(4)]
    proc = grotool("replay", "-q", "--device", "veth", write(tmp_path / "g.pcap", geneve))
    assert proc.stderr == ("grotool: hint: 4 UDP datagrams had no GRO path on this host: consider "
                           "--geneve-port 7000\n")
    # plain datagrams to 8472 are not VXLAN: UDP GRO advice, no --vxlan-port
    proc = grotool("replay", "-q", "--device", "veth", write(tmp_path / "u.pcap", T.udp_flow(3, dport=8472)))
    assert proc.stderr == ("grotool: hint: 3 UDP datagrams had no GRO path on this host: consider "
                           "--udp-gro-socket 8472, --udp-gro-forwarding or --rx-gro-list\n")
