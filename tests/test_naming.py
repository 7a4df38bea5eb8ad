"""Naming a flow cheaply: address text exactly as ipaddress writes it, and the
record-free walk report/flows.py names flows with giving the same fields and
names as a full dissect()."""

import glob
import ipaddress
import os
import random
import struct

from scapy.all import GRE, IP, TCP, UDP, VXLAN, Dot1Q, Ether, IPv6, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, Raw
from scapy.contrib.geneve import GENEVE

from grotool.dissect import DEFAULT_GENEVE_PORTS, DEFAULT_VXLAN_PORTS, Dissection, _addr_format, addr_text, dissect, \
    ip_address_text, walk_frame
from grotool.io.capture import read_capture
from grotool.report.flows import FlowNamer, describe, flow_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}


def _ipv6_edge_cases():
    texts = ["::", "::1", "1::", "1::1", "0:1::", "::1:0", "1:0:1::", "1:0:0:1:0:0:1:0", "1:0:0:1:0:0:0:1",
             "0:0:1:0:0:1:0:0", "1:0:1:0:1:0:1:0", "0:1:0:1:0:1:0:1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
             "fe80::1", "fd00::2", "2001:db8::", "2001:db8:0:0:1::1", "::ffff:1.2.3.4", "::ffff:0.0.0.0",
             "::ffff:0:0", "::ffff:0:1.2.3.4", "::1.2.3.4", "::0.0.0.1", "64:ff9b::1.2.3.4", "2002:102:304::",
             "2001:0:4136:e378:8000:63bf:3fff:fdd2", "::ffff", "::fffe:1.2.3.4", "0:0:0:0:0:ffff::"]
    return [ipaddress.IPv6Address(t).packed for t in texts]


def _random_ipv6(rng):
    word = rng.choice([lambda: 0, lambda: 0, lambda: rng.randrange(1, 16), lambda: rng.randrange(0x10000),
                       lambda: 0xFFFF])
    return struct.pack("!8H", *[word() if rng.random() < 0.7 else rng.randrange(0x10000) for _ in range(8)])


def test_ipv6_text_is_ipaddress_text():
    rng = random.Random(11)
    addresses = _ipv6_edge_cases() + [_random_ipv6(rng) for _ in range(20000)]
    # every pattern of zero words, with the non-zero words random
    addresses += [struct.pack("!8H", *[0 if mask >> i & 1 else rng.randrange(1, 0x10000) for i in range(8)])
                  for mask in range(256)]
    for raw in addresses:
        expected = str(ipaddress.IPv6Address(raw))
        assert _addr_format(raw) == expected, raw.hex()
        assert addr_text(raw) == expected, raw.hex()
        assert addr_text(memoryview(raw)) == expected, raw.hex()


def test_ipv4_text_is_ipaddress_text():
    rng = random.Random(12)
    for raw in [bytes(4), b"\xff" * 4, b"\x0a\x00\x00\x01"] + [rng.randbytes(4) for _ in range(5000)]:
        assert _addr_format(raw) == addr_text(raw) == str(ipaddress.IPv4Address(raw))


def test_addresses_sharing_a_text_slot_keep_their_own_text():
    """The compiled build keeps address text in slots chosen by the last three
    bytes: addresses that share them, IPv4 or IPv6, still get their own."""
    last = bytes([7, 8, 9])
    sharing = [bytes([a]) + last for a in (10, 11, 192)] + [bytes([0x20, 1, 0xD, 0xB8] + [a] * 9) + last
                                                            for a in (0, 1)]
    for _round in range(2):
        for raw in sharing + sharing[::-1]:
            expected = str(ipaddress.ip_address(raw))
            assert addr_text(raw) == expected
            family = 4 if len(raw) == 4 else 6
            header = bytes(16 if family == 4 else 24) + raw         # raw as the destination of a header at 0
            assert ip_address_text(header, 0, family, True) == expected


def test_other_address_lengths_raise_as_ipaddress_does():
    for raw in (b"", b"\x01\x02\x03", bytes(5), bytes(15), bytes(17)):
        try:
            ipaddress.IPv6Address(raw)
        except ipaddress.AddressValueError as exc:
            expected = str(exc)
        try:
            addr_text(raw)
        except ipaddress.AddressValueError as exc:
            assert str(exc) == expected
        else:
            raise AssertionError(f"{raw!r} formatted")


def _frames():
    """Frames of every kind the dissector names, whole, cut short and damaged."""
    tcp = TCP(sport=40000, dport=5201, flags="PA") / Raw(b"x" * 40)
    inner = Ether(src="02:00:00:00:01:01", dst="02:00:00:00:01:02") / Dot1Q(vlan=5) / IP(src="10.1.0.1",
                                                                                      dst="10.1.0.2") / tcp
    seeds = [
        bytes(Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2") / tcp),
        bytes(Ether(**MACS) / Dot1Q(vlan=7) / Dot1Q(vlan=8) / IPv6(src="fd00::1", dst="fd00::2") / UDP(dport=53)
              / Raw(b"q" * 20)),
        bytes(Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2", flags="MF") / UDP() / Raw(b"f" * 30)),
        bytes(Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2", frag=5) / Raw(b"f" * 30)),
        bytes(Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2", options=b"\x01" * 4) / tcp),
        bytes(Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2", proto=1) / Raw(b"\x08\x00" + bytes(30))),
        bytes(Ether(**MACS) / IPv6(src="::ffff:1.2.3.4", dst="2001:db8::1") / IPv6ExtHdrHopByHop()
              / IPv6ExtHdrFragment(m=1) / tcp),
        bytes(Ether(**MACS) / IP(src="192.168.1.1", dst="192.168.1.2") / UDP(sport=51000, dport=4789)
              / VXLAN(vni=4242) / inner),
        bytes(Ether(**MACS) / IPv6(src="fd01::1", dst="fd01::2") / UDP(dport=6081) / GENEVE(proto=0x0800)
              / IP(src="10.1.0.1", dst="10.1.0.2") / tcp),
        bytes(Ether(**MACS) / IP(src="192.168.1.1", dst="192.168.1.2") / GRE(key_present=1, key=9, proto=0x6558)
              / inner),
        bytes(Ether(**MACS) / IPv6(src="fd01::1", dst="fd01::2") / IP(src="10.1.0.1", dst="10.1.0.2") / tcp),
        bytes(Ether(**MACS, type=0x0806) / Raw(bytes(28))),
    ]
    rng = random.Random(5)
    frames = []
    for seed in seeds:
        frames.append(seed)
        frames += [seed[:cut] for cut in range(0, len(seed), 3)]
        for _ in range(100):
            frame = bytearray(seed)
            for _flip in range(rng.randint(1, 3)):
                frame[rng.randrange(min(len(frame), 90))] = rng.randrange(256)
            frames.append(bytes(frame))
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.pcap")))[:2]:
        frames += [data for _ts, data, _wirelen in read_capture(path)[1][:300]]
    return frames


def test_naming_walk_has_the_dissection_fields_without_the_records():
    for frame in _frames():
        for linktype, data in ((1, frame), (101, frame[14:])):
            for vxlan, geneve in ((DEFAULT_VXLAN_PORTS, DEFAULT_GENEVE_PORTS), (frozenset(), frozenset())):
                d = dissect(data, linktype, vxlan_ports=vxlan, geneve_ports=geneve)
                w = walk_frame(data, linktype, len(data), vxlan, geneve, False)
                assert w.layers is None and w.checksums is None
                walked = {name: getattr(w, name) for name in Dissection._fields
                          if name not in ("linktype", "caplen", "frame_len", "layers", "checksums", "tunnels")}
                assert len(walked) == len(Dissection._fields) - 6
                # the transport past its ports is left unread, as a packet with none has it
                unread = ("l4_proto", "payload_off", "payload_len", "check_at", "seq", "ack", "tcp_flags", "window")
                in_transport = d.l4_proto is not None or (d.ip_proto in (6, 17) and not d.fragment)
                expected = {name: getattr(d, name) for name in walked}
                for name in unread:
                    expected[name] = Dissection._field_defaults[name]
                if in_transport and d.ip_proto == 6:
                    expected["problem"] = w.problem     # TCP's own problems (past its ports) are not looked for
                # nor the innermost addresses' bytes: their text is written from the frame
                expected["src"] = expected["dst"] = None
                if d.src is not None:
                    assert ip_address_text(data, w.l3, w.family, False) == addr_text(d.src)
                    assert ip_address_text(data, w.l3, w.family, True) == addr_text(d.dst)
                assert walked == expected
                assert [type(value) for value in walked.values()] == [type(value) for value in expected.values()]
                if in_transport and d.ip_proto == 6 and w.problem != d.problem:
                    assert w.problem is None and d.problem.startswith(("truncated TCP", "TCP"))
                assert tuple(w.tunnels) == d.tunnels
                flow = describe(linktype, data, vxlan_ports=vxlan, geneve_ports=geneve)
                assert flow == flow_of(d)
                assert FlowNamer(linktype, vxlan_ports=vxlan, geneve_ports=geneve)(b"", data) == flow


def test_names_of_frames_of_each_kind():
    """The names the dissector gave before naming skipped the layer records."""
    tcp = TCP(sport=40000, dport=5201, flags="PA") / Raw(b"x" * 40)
    inner = Ether(src="02:00:00:00:01:01", dst="02:00:00:00:01:02") / Dot1Q(vlan=5) / IP(src="10.1.0.1",
                                                                                      dst="10.1.0.2") / tcp
    cases = [
        (Ether(**MACS) / IP(src="192.168.1.1", dst="192.168.1.2") / UDP(sport=51000, dport=4789) / VXLAN(vni=4242)
         / inner, ("tcp", "10.1.0.1", "10.1.0.2", 40000, 5201, (),
                   (("vxlan", "192.168.1.1", "192.168.1.2", 4242, 51000, 4789, (5,)),))),
        (Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2", frag=5) / Raw(b"f" * 30),
         ("ip-0", "10.0.0.1", "10.0.0.2", None, None, (), ())),
        (Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2", proto=1) / Raw(b"\x08\x00" + bytes(30)),
         ("icmp", "10.0.0.1", "10.0.0.2", None, None, (), ())),
        (Ether(**MACS) / IPv6(src="fd01::1", dst="fd01::2") / UDP(dport=6081) / GENEVE(proto=0x0800)
         / IP(src="10.1.0.1", dst="10.1.0.2") / tcp,
         ("tcp", "10.1.0.1", "10.1.0.2", 40000, 5201, (), (("geneve", "fd01::1", "fd01::2", 0, 53, 6081, ()),))),
        (Ether(**MACS) / IP(src="192.168.1.1", dst="192.168.1.2") / GRE(key_present=1, key=9, proto=0x6558) / inner,
         ("tcp", "10.1.0.1", "10.1.0.2", 40000, 5201, (),
          (("gretap", "192.168.1.1", "192.168.1.2", 9, None, None, (5,)),))),
        (Ether(**MACS, type=0x0806) / Raw(bytes(28)), ("arp", "", "", None, None, (), ())),
        (Ether(**MACS) / Dot1Q(vlan=7) / Dot1Q(vlan=8) / IPv6(src="fd00::1", dst="fd00::2") / UDP(dport=53)
         / Raw(b"q" * 20), ("udp", "fd00::1", "fd00::2", 53, 53, (7, 8), ())),
        (Ether(**MACS) / IPv6(src="::ffff:1.2.3.4", dst="2001:db8::1") / UDP(sport=1, dport=2),
         ("udp", str(ipaddress.IPv6Address("::ffff:1.2.3.4")), "2001:db8::1", 1, 2, (), ())),
    ]
    for packet, flow in cases:
        assert describe(1, bytes(packet)) == flow


def test_namer_caches_keyed_flows_and_names_keyless_packets_each_time():
    frames = _frames()
    namer = FlowNamer(1)
    first = namer(b"key", frames[0])
    assert namer(b"key", frames[1]) is first                  # the key, not the frame, names a known flow
    assert namer(b"", frames[1]) == describe(1, frames[1]) != first
