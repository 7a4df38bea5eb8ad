"""Kernel version profiles: each version-dependent row of engine/kernels.py,
shown by crafted traffic replayed under a profile with the row and one
without it (exact segments per delivered packet, reasons, header bytes)."""

import struct

import pytest

from grotool.engine import Engine, Settings, simulate
from grotool.engine.kernels import BY_ID, DEFAULT_KERNEL, MAINLINE, ROWS, SERIES, known_versions, profile

from kernel_support import ACK, V4_DST, V4_SRC, _l4_check, ether, payload_bytes, tcp, udp

CWR = 0x80


def run(frames, kernel, **kw):
    settings = Settings(device="veth", kernel=kernel, **kw)
    return list(simulate([(i * 1000, f, len(f)) for i, f in enumerate(frames)], 1, settings))


def segs(frames, kernel, **kw):
    return [d.segs for d in run(frames, kernel, **kw)]


def tcp4(i, *, df=True, ip_id=None, flags=ACK, mss=1000, ttl=64, sport=40000):
    """Segment i of one IPv4 TCP flow, with the DF bit and IP ID chosen."""
    seq = 1000 + i * mss
    payload = payload_bytes(mss, seq)
    l4 = struct.pack("!HHIIBBHHH", sport, 5201, seq, 5000, 5 << 4, flags, 512, 0, 0)
    l4 = _l4_check(l4 + payload, 16, V4_SRC, V4_DST, 6, None)
    ident = i if ip_id is None else ip_id
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), ident, 0x4000 if df else 0, ttl, 6, 0, V4_SRC, V4_DST)
    from kernel_support import csum
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    return ether(hdr + l4)


# -- the table and the profiles ------------------------------------------------------
def test_every_series_and_mainline_release_is_a_profile():
    names = known_versions()
    assert names[:6] == ("6.18", "6.12", "6.6", "6.1", "5.15", "5.10")
    assert "5.10.0" in names and "6.18.0" in names and "6.0.0" in names and len(names) == 6 + 29
    assert profile("6.1").release == "6.1.192" and profile("6.12").release == "6.12.118"
    assert profile(DEFAULT_KERNEL).release == SERIES["6.18"]


@pytest.mark.parametrize("bad", ["6.3", "7.0", "6.1.150", "latest", "", "6.18.1"])
def test_an_unknown_kernel_is_refused_naming_the_known_ones(bad):
    with pytest.raises(ValueError, match=r"known are 6\.18, 6\.12, 6\.6, 6\.1, 5\.15, 5\.10"):
        profile(bad)
    with pytest.raises(ValueError):
        Settings(kernel=bad).validate()


def test_mainline_releases_have_mainline_changes_only():
    # U1 reached 6.1.y as a backport: 6.1 has it, 6.1.0 does not; 6.9.0 is the first mainline one
    assert profile("6.1").holds("U1") and not profile("6.1.0").holds("U1")
    assert profile("6.9.0").holds("U1") and not profile("6.8.0").holds("U1")
    # the seed patch of 6.10: before and after
    assert not profile("6.9.0").holds("T2") and profile("6.10.0").holds("T2")
    assert not profile("6.14.0").holds("T1") and profile("6.15.0").holds("T1")


def test_rows_are_unique_and_each_names_its_commit_and_release():
    ids = [row.id for row in ROWS]
    assert len(ids) == len(set(ids))
    for row in ROWS:
        assert row.mainline in MAINLINE or row.mainline == (6, 19), row.id
        assert row.commit and row.older and row.newer and row.title, row.id
        for backport in row.stable:
            assert backport.split(".")[0:2] != [str(row.mainline[0]), str(row.mainline[1])], row.id
    assert BY_ID["T1"].label() == "row T1: CWR goes up alone (6.15+)"


# -- T1: CWR ---------------------------------------------------------------------------
def test_T1_cwr_goes_up_alone_from_6_15_and_heads_an_aggregate_before():
    frames = [tcp4(i, flags=ACK | (CWR if i == 2 else 0)) for i in range(6)]
    assert segs(frames, "6.18") == [2, 1, 3]
    assert segs(frames, "6.15.0") == [2, 1, 3]
    assert segs(frames, "6.14.0") == [2, 4]
    assert segs(frames, "6.1") == [2, 4]
    before = run(frames, "6.1")
    assert before[1].data[14 + 20 + 13] & CWR        # the super-packet carries CWR
    assert "tcp_ecn" in before[1].gso_type and "tcp_accecn" not in before[1].gso_type


# -- L1, L2: the IP ID eras ------------------------------------------------------------
def test_L2_a_constant_id_without_df_merges_only_from_6_18():
    frames = [tcp4(i, df=False, ip_id=0) for i in range(6)]
    assert segs(frames, "6.18") == [6]
    assert segs(frames, "6.17.0") == [1] * 6
    assert segs(frames, "6.12") == [1] * 6
    assert segs(frames, "6.1") == [1] * 6
    assert [d.reason for d in run(frames, "6.1")][:5] == ["ip_id_not_incrementing"] * 5


def test_the_id_rules_agree_where_no_row_decides():
    for frames in ([tcp4(i, df=True, ip_id=7) for i in range(5)],        # DF, fixed
                   [tcp4(i, df=True) for i in range(5)],                 # DF, incrementing
                   [tcp4(i, df=False) for i in range(5)]):               # no DF, incrementing
        assert {tuple(segs(frames, k)) for k in ("6.18", "6.12", "6.1", "5.10")} == {(5,)}


def vxlan(i, *, outer_df, outer_id, inner_id, inner_df=True):
    """A VXLAN packet (port 4789) with inner TCP segment i."""
    inner = tcp4(i, df=inner_df, ip_id=inner_id)
    from kernel_support import csum
    vx = struct.pack("!II", 0x08000000, 42 << 8) + inner
    udp_hdr = struct.pack("!HHHH", 49152, 4789, 8 + len(vx), 0)
    body = udp_hdr + vx
    src, dst = bytes([192, 168, 0, 1]), bytes([192, 168, 0, 2])
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), outer_id, 0x4000 if outer_df else 0, 64, 17, 0,
                      src, dst)
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    return ether(hdr + body)


def test_L1_one_shared_fixed_id_bit_from_6_10_to_6_17():
    # outer without DF, incrementing; inner with DF and a fixed ID
    frames = [vxlan(i, outer_df=False, outer_id=100 + i, inner_id=9) for i in range(6)]
    assert segs(frames, "6.9.0", vxlan_ports=(4789,)) == [6]
    assert segs(frames, "6.1", vxlan_ports=(4789,)) == [6]
    assert segs(frames, "6.12", vxlan_ports=(4789,)) == [2, 2, 2]
    assert segs(frames, "6.18", vxlan_ports=(4789,)) == [6]


def test_L2_an_outer_id_with_df_is_checked_from_6_18():
    frames = [vxlan(i, outer_df=True, outer_id=(i * 7919) & 0xFFFF, inner_id=i) for i in range(4)]
    assert segs(frames, "6.12", vxlan_ports=(4789,)) == [4]
    assert segs(frames, "6.18", vxlan_ports=(4789,)) == [1, 1, 1, 1]


# -- U1, U2, U3: UDP --------------------------------------------------------------------
def udp_ttl(i, ttl):
    frame = bytearray(udp(1000, salt=0, ip_id=i))
    frame[14 + 8] = ttl
    frame[14 + 10:14 + 12] = b"\0\0"
    from kernel_support import csum
    frame[14 + 10:14 + 12] = struct.pack("!H", csum(bytes(frame[14:34])))
    return bytes(frame)


def test_U1_udp_gro_checks_l3_headers_in_fixed_kernels_only():
    frames = [udp_ttl(i, 64 if i < 2 else 63) for i in range(4)]
    assert segs(frames, "6.1", udp_gro_sockets=(5202,)) == [2, 2]
    assert segs(frames, "6.1.0", udp_gro_sockets=(5202,)) == [4]
    assert segs(frames, "6.6.0", udp_gro_sockets=(5202,)) == [4]
    assert segs(frames, "6.9.0", udp_gro_sockets=(5202,)) == [2, 2]


def test_U2_udp_forwarding_gro_exists_from_5_12():
    frames = [udp(1000, ip_id=i) for i in range(4)]
    assert segs(frames, "5.15", udp_gro_forwarding=True) == [4]
    assert segs(frames, "5.10", udp_gro_forwarding=True) == [1, 1, 1, 1]
    assert {d.reason for d in run(frames, "5.10", udp_gro_forwarding=True)} == {"udp_no_gro_path"}


def test_U3_before_5_13_a_tunnel_socket_under_rx_gro_list_means_l4_fraglist():
    frames = [vxlan(i, outer_df=True, outer_id=i, inner_id=i) for i in range(4)]
    # a zero outer UDP checksum: segment GRO needs one, so give the datagrams none and see them refused
    old = run(frames, "5.10", vxlan_ports=(4789,), rx_gro_list=True)
    assert [d.reason for d in old] == ["udp_zero_csum"] * 4
    new = run(frames, "5.15", vxlan_ports=(4789,), rx_gro_list=True)
    assert [d.segs for d in new] == [4] and "udp_tunnel" in new[0].gso_type


# -- V1: IPv6 hop limit --------------------------------------------------------------------
def test_V1_before_5_18_a_hop_limit_change_is_another_flow():
    frames = [tcp(1000, seq=1000 + i * 1000, family=6, ttl=64 if i < 3 else 63) for i in range(6)]
    new, old = run(frames, "6.1"), run(frames, "5.15")
    assert [d.segs for d in new] == [3, 3] and new[0].reason == "ipv6_hoplimit_changed"
    # 5.15: the hop-63 segments are held beside the hop-64 aggregate, which stays held
    assert [d.segs for d in old] == [3, 3] and {d.reason for d in old} == {"budget_exhausted_all"}
    assert [d.indices for d in old] == [(0, 1, 2), (3, 4, 5)]


# -- T2: TCP fraglist ---------------------------------------------------------------------
def test_T2_rx_gro_list_chains_forwarded_tcp_from_6_10():
    frames = [tcp4(i) for i in range(4)]
    assert run(frames, "6.10.0", rx_gro_list=True)[0].fraglist
    assert not run(frames, "6.9.0", rx_gro_list=True)[0].fraglist
    assert segs(frames, "6.9.0", rx_gro_list=True) == [4]


# -- C7, C8, C12, C13: sizes and BIG TCP ----------------------------------------------------
def bulk(n, family, mss=8000):
    return [tcp(mss, seq=1000 + i * mss, family=family, ip_id=i) for i in range(n)]


def test_C7_before_5_17_gro_max_size_is_ignored():
    frames = bulk(10, 4, mss=1000)
    assert segs(frames, "5.15", gro_max_size=4000, gro_ipv4_max_size=4000) == [10]
    assert segs(frames, "5.17.0", gro_max_size=4000, gro_ipv4_max_size=4000) == [3, 3, 3, 1]


def test_C8_C12_C13_big_tcp_by_family_and_release():
    big = dict(gro_max_size=185000, gro_ipv4_max_size=185000)
    v6, v4 = bulk(20, 6), bulk(20, 4)
    # mainline 5.19.0: IPv6 only; 6.3.0: IPv4 too
    assert max(segs(v6, "5.19.0", **big)) == 20 and max(segs(v4, "5.19.0", **big)) == 8
    assert max(segs(v4, "6.3.0", **big)) == 20
    assert max(segs(v4, "6.18.0", **big)) == 20 and max(segs(v6, "6.18.0", **big)) == 20
    # the stable fix (row C13): an IPv6 frame injected into veth has no room for the Jumbo header
    assert max(segs(v6, "6.18", **big)) == 8 and max(segs(v4, "6.18", **big)) == 20
    assert max(segs(v6, "6.12", **big)) == 8
    # 6.1.192: IPv6 only, and veth IPv6 capped by C13: nothing passes 64 KiB
    assert max(segs(v6, "6.1", **big)) == 8 and max(segs(v4, "6.1", **big)) == 8


def test_C13_a_nic_has_headroom_for_the_jumbo_header():
    big = dict(gro_max_size=185000, gro_ipv4_max_size=185000)
    frames = bulk(20, 6)
    settings = Settings(device="nic", kernel="6.18", rx_usecs=1000, rx_frames=0, budget=64, **big)
    out = list(simulate([(i * 1000, f, len(f)) for i, f in enumerate(frames)], 1, settings))
    assert max(d.segs for d in out) == 20
    top = max(out, key=lambda d: d.segs)
    assert top.data[14 + 6] == 0 and top.data[14 + 4:14 + 6] == b"\0\0"     # Hop-by-Hop, payload length 0


# -- U6: the tunnel checksum seed --------------------------------------------------------
def vxlan_csum(i):
    """VXLAN over IPv4 with a nonzero outer UDP checksum (filled in full)."""
    from kernel_support import csum
    inner = tcp4(i, ip_id=i)
    vx = struct.pack("!II", 0x08000000, 42 << 8) + inner
    src, dst = bytes([192, 168, 0, 1]), bytes([192, 168, 0, 2])
    l4 = _l4_check(struct.pack("!HHHH", 49152, 4789, 8 + len(vx), 0) + vx, 6, src, dst, 17, None)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), i, 0x4000, 64, 17, 0, src, dst)
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    return ether(hdr + l4)


def test_U6_before_6_9_the_outer_seed_reads_the_inner_addresses():
    from kernel_support import seed_value
    frames = [vxlan_csum(i) for i in range(4)]
    new, old = run(frames, "6.12", vxlan_ports=(4789,)), run(frames, "6.1", vxlan_ports=(4789,))
    assert [d.segs for d in new] == [4] and [d.segs for d in old] == [4]
    check_at = 14 + 20 + 6
    length = len(new[0].data) - 14 - 20
    outer = seed_value(bytes([192, 168, 0, 1]), bytes([192, 168, 0, 2]), 17, length)
    inner = seed_value(V4_SRC, V4_DST, 17, length)
    assert struct.unpack_from("!H", new[0].data, check_at)[0] == outer
    assert struct.unpack_from("!H", old[0].data, check_at)[0] == inner
    assert new[0].data[:check_at] == old[0].data[:check_at] and new[0].data[check_at + 2:] == old[0].data[check_at + 2:]


# -- the engine reads the profile once ----------------------------------------------------
def test_an_engine_per_profile_in_one_process():
    frames = [tcp4(i, df=False, ip_id=0) for i in range(4)]
    a, b = Engine(1, Settings(device="veth", kernel="6.1")), Engine(1, Settings(device="veth", kernel="6.18"))
    for i, f in enumerate(frames):
        a.feed(i, f)
        b.feed(i, f)
    assert [d.segs for d in a.finish()] != [d.segs for d in b.finish()]


# -- docs and the command ------------------------------------------------------------------
def test_docs_kernels_md_carries_the_table():
    from pathlib import Path

    from grotool.cli.kernels_cmd import markdown_table

    doc = (Path(__file__).resolve().parent.parent / "docs" / "kernels.md").read_text()
    assert markdown_table() in doc
    for name, release in SERIES.items():
        assert f"| `{name}` | {release}" in doc


def test_kernels_command_marks_the_rows_of_a_release():
    import json

    from click.testing import CliRunner

    from grotool.cli import main

    out = CliRunner().invoke(main, ["kernels", "--kernel", "6.1", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["kernel"]["release"] == "6.1.192"
    assert "U1" in doc["kernel"]["rows"] and "T1" not in doc["kernel"]["rows"]
    assert [r["id"] for r in doc["rows"]] == [r.id for r in ROWS]
    bad = CliRunner().invoke(main, ["kernels", "--kernel", "6.3"])
    assert bad.exit_code == 2 and "known are 6.18" in bad.output


def test_L1_from_6_10_the_version_nibble_picks_the_l3_checks():
    # IPv6 headers whose version nibble says 4: before 6.10 ipv6_gro_receive checks them as
    # IPv6 and they merge; 6.10 to 6.17 check them as IPv4 (the payload length taken for a
    # constant ID without DF: a flush); 6.18 lets that fixed ID be (row L2)
    frames = []
    for i in range(4):
        frame = bytearray(tcp(1000, seq=1000 + i * 1000, family=6))
        frame[14] = (frame[14] & 0x0F) | 0x40
        frames.append(bytes(frame))
    assert segs(frames, "6.1", csum="trust") == [4]
    assert segs(frames, "6.12", csum="trust") == [1, 1, 1, 1]
    assert segs(frames, "6.18", csum="trust") == [4]


def test_L1_before_6_10_a_datagrams_own_header_flags_flush_the_held_udp_packet():
    frames = [udp(800, ip_id=i) for i in range(6)]
    flagged = bytearray(frames[3])
    flagged[14 + 6] |= 0x80                              # the reserved fragment flag
    from kernel_support import csum
    flagged[14 + 10:14 + 12] = b"\0\0"
    flagged[14 + 10:14 + 12] = struct.pack("!H", csum(bytes(flagged[14:34])))
    frames[3] = bytes(flagged)
    # fraglist: from 6.10 the flagged datagram, its checksum state unlike the held one's, goes up alone
    old = run(frames, "6.1", rx_gro_list=True)
    new = run(frames, "6.12", rx_gro_list=True)
    assert [list(d.indices) for d in old][:2] == [[0, 1, 2], [3]]
    assert [list(d.indices) for d in new][:2] == [[3], [0, 1, 2]]
