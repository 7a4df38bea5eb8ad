"""grotool.Replay(...).statistics on every family the engine knows (issue 32 §4):
tunnel flows raised ValueError in the flow naming while iterating packets worked."""

import pytest

import breadth_frames as B
import tunnel_frames as T
from grotool import scenarios as S
from grotool.engine import Settings
from grotool.io.capture import PcapWriter
from grotool.replay import replay as cli_replay

import grotool


def _inner(i, family=4):
    return S.tcp_frame(family, seq=1000 + i * 1000, payload=1000, ip_id=i)


def _ip(i, family=4):
    return _inner(i, family)[14:]                   # the IP packet, for GRE and IP-in-IP


FAMILIES = {
    "tcp4": lambda: [_inner(i) for i in range(4)],
    "tcp6": lambda: [_inner(i, 6) for i in range(4)],
    "vlan": lambda: [S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i, vlan=[7, 8]) for i in range(4)],
    "udp": lambda: T.udp_flow(4),
    "ipip": lambda: [S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i, outer={"family": 4})
                     for i in range(4)],
    "ip4in6": lambda: [S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i, outer={"family": 6})
                       for i in range(4)],
    "sit": lambda: [S.tcp_frame(6, seq=1000 + i * 1000, payload=1000, outer={"family": 4}) for i in range(4)],
    "ip6ip6": lambda: [S.tcp_frame(6, seq=1000 + i * 1000, payload=1000, outer={"family": 6}) for i in range(4)],
    "gre": lambda: T.gre_tcp_flow(4),
    "gre-key": lambda: T.gre_tcp_flow(4, key=77, csum=True),
    "gre6-teb": lambda: T.gre_tcp_flow(4, family=6, teb=True, inner_family=6),
    "gre-mixed": B.gre_mixed,
    "vxlan": lambda: T.vxlan_tcp_flow(4),
    "vxlan6": lambda: T.vxlan_tcp_flow(4, family=6, inner_family=6),
    "vxlan-mixed": B.vxlan_mixed,
    "vxlan-vlan": lambda: [S.vxlan_frame(_inner(i), ip_id=i, vlan=[5]) for i in range(4)],
    "geneve": lambda: [S.geneve_frame(_inner(i), ip_id=i, options=b"\x01\x02\x03\x01abcd") for i in range(4)],
    "vxlan-in-gre": lambda: [S.gre_frame(S.vxlan_frame(_inner(i), ip_id=i)[14:], ip_id=i) for i in range(4)],
    "udp-mixed": B.udp_mixed,
    "fraglist": B.tcp_for_fraglist,
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_statistics_name_every_flow_as_the_command_line_does(tmp_path, family):
    frames = FAMILIES[family]()
    stamped = [(1_000_000_000 + k * 1000, fr) for k, fr in enumerate(frames)]
    path = tmp_path / "in.pcap"
    with PcapWriter(str(path)) as w:
        for ts, fr in stamped:
            w.write(ts, fr)
    settings = dict(device="veth", vxlan_ports=(4789,), geneve_ports=(6081,))
    expected = cli_replay(str(path), None, Settings(**settings))
    from grotool.report.flows import flow_label

    labels = [flow_label(fs.flow) for fs in expected.collector.sorted_flows()]
    for source in (path, stamped):
        run = grotool.Replay(source, **settings)
        packets = list(run)
        stats = run.statistics
        assert stats.frames_in == len(frames) == sum(p.segments for p in packets)
        assert stats.packets_out == len(packets) == expected.totals["packets_out"]
        assert sorted(f.flow for f in stats.flows) == sorted(labels)
        assert {p.flow for p in packets} == set(labels)
        assert sum(f.frames_in for f in stats.flows) == len(frames)


def test_tunnel_flow_names_carry_every_tunnel_field():
    frames = [S.gre_frame(S.vxlan_frame(_inner(i), vni=9, ip_id=i)[14:], key=5, ip_id=i) for i in range(3)]
    stats = grotool.Replay([(k, fr) for k, fr in enumerate(frames)], device="veth",
                           vxlan_ports=(4789,)).statistics
    (flow,) = stats.flows
    assert " via gre " in flow.flow and "key 5" in flow.flow
    assert " via vxlan " in flow.flow and "vni 9" in flow.flow
    assert flow.flow.index("via gre") < flow.flow.index("via vxlan")
