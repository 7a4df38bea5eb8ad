"""Kernel history: every GRO behaviour that differs between Linux 5.10 and 6.18,
one row each, and the version profiles computed from them.

A row names one behaviour change: what older kernels do, what newer ones do,
the first mainline release with the newer behaviour, the stable releases it
was backported to, and the commit.  A profile is a kernel release; a row
holds for a release when the release has the newer behaviour.  The engine
reads a profile once, when a GroNode is made, into plain fields (gro.py); a
rule site branches on its row's field, never on a version number.  The docs
(docs/kernels.md), ``grotool kernels`` and ``explain`` read the same rows.

Profiles: the six long-term series (``5.10`` ... ``6.18``), each the stable
release named in SERIES, and the mainline releases ``X.Y.0`` from 5.10.0 to
6.18.0, which have the mainline changes only.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, NamedTuple, Tuple

DEFAULT_KERNEL = "6.18"

# The long-term series and the stable release each one's profile models:
# Debian 12's kernels (bookworm-security) for 6.1 and 6.12, the host kernel
# grotool is checked against for 6.18, the newest stable tags for the others.
SERIES: Dict[str, str] = {
    "5.10": "5.10.270",
    "5.15": "5.15.222",
    "6.1": "6.1.192",
    "6.6": "6.6.157",
    "6.12": "6.12.118",
    "6.18": "6.18.44",
}

# mainline releases from 5.10 to 6.18 (after 5.19 came 6.0)
MAINLINE: Tuple[Tuple[int, int], ...] = tuple(
    [(5, minor) for minor in range(10, 20)] + [(6, minor) for minor in range(0, 19)])


class Row(NamedTuple):
    id: str                   # "T1": area letter and number (C core, L IPv4, V IPv6, T TCP, U UDP)
    title: str                # the newer behaviour in a few words
    older: str                # what kernels without the change do
    newer: str                # what kernels with it do
    mainline: Tuple[int, int]  # the first mainline release with the newer behaviour
    stable: Tuple[str, ...]   # stable releases with it as a backport: "6.6.31" (from that release on)
                              # or "6.1.192" (found there; the first release with it not determined)
    commit: str               # the kernel commit (12 hex digits and its title)
    modelled: str             # "engine": a rule site reads it; otherwise why not

    @property
    def since(self) -> str:
        """The first mainline release, as "6.15"."""
        return f"{self.mainline[0]}.{self.mainline[1]}"

    def label(self) -> str:
        """How events and explain name the row: "row T1: CWR goes up alone (6.15+)"."""
        return f"row {self.id}: {self.title} ({self.since}+)"

    def holds(self, release: Tuple[int, int, int]) -> bool:
        """Whether ``release`` (major, minor, sublevel) has the newer behaviour:
        a mainline release from the row's on, or a stable release of a series
        the row was backported to, from the release named on."""
        major, minor, sublevel = release
        if (major, minor) >= self.mainline:
            return True
        for backport in self.stable:
            b_major, b_minor, b_sublevel = (int(x) for x in backport.split("."))
            if (b_major, b_minor) == (major, minor) and sublevel >= b_sublevel:
                return True
        return False


NOT_IN_A_REPLAY = "not modelled: a pcap replay cannot show it"

ROWS: Tuple[Row, ...] = (
    # -- core (net/core/gro.c, include/net/gro.h) ---------------------------------
    Row("C1", "rx_list counts segments",
        "gro_normal_one counts 1 per completed super-packet towards gro_normal_batch",
        "gro_normal_one counts the super-packet's segments, so the list goes up sooner",
        (5, 11), ("5.10.270",),
        "8dc1c444df19 net: gro: do not keep too many GRO packets in napi->rx_list",
        "engine"),
    Row("C2", "GSO packets enter GRO",
        "a GSO skb (HW-GRO, veth with TSO) is never aggregated",
        "TCP GSO skbs aggregate with count = gso_segs when gso_size equals the mss",
        (6, 1), (),
        "5eddb24901ee gro: add support of (hw)gro packets to gro stack",
        NOT_IN_A_REPLAY + " (a capture holds no GSO metadata)"),
    Row("C3", "DODGY GSO packets flushed",
        "GSO skbs marked SKB_GSO_DODGY (tun, packet vnet_hdr) are aggregated",
        "SKB_GSO_DODGY packets are flushed",
        (6, 2), ("6.1.192",),
        "7871f54e3dee gro: take care of DODGY packets",
        NOT_IN_A_REPLAY + " (GSO input)"),
    Row("C4", "socket owner compared",
        "gro_list_prepare compares dev, VLAN tag, metadata_dst and MAC header",
        "also conntrack, TC chain and p->sk != skb->sk (packets of different local sockets never merge)",
        (5, 15), (),
        "5e10da5385d2 skbuff: allow 'slow_gro' for skb carring sock reference",
        NOT_IN_A_REPLAY + " (socket, conntrack and TC state)"),
    Row("C5", "HW VLAN protocol compared",
        "a hardware-accelerated VLAN tag compares presence and TCI",
        "compares vlan_proto (802.1Q or 802.1ad) and TCI",
        (6, 2), (),
        "be3ed48683f0 net: gro: no longer use skb_vlan_tag_present()",
        NOT_IN_A_REPLAY + " (tags in a capture are in-band)"),
    Row("C6", "PSP association compared",
        "-", "packets of different PSP associations are different flows",
        (6, 18), (),
        "PSP series (__psp_skb_coalesce_diff)",
        NOT_IN_A_REPLAY + " (PSP state)"),
    Row("C7", "gro_max_size honoured",
        "aggregates stop below 65536 bytes whatever the device settings",
        "the device's gro_max_size sets the limit",
        (5, 17), (),
        "eac1b93c14d6 gro: add ability to control gro max packet size",
        "engine"),
    Row("C8", "IPv6 BIG TCP aggregates",
        "no aggregate passes 64 KiB",
        "an IPv6 aggregate whose next header is TCP may pass 64 KiB up to gro_max_size, with a Hop-by-Hop "
        "Jumbo header inserted and payload length 0",
        (5, 19), (),
        "0fe79f28bfaf net: allow gro_max_size to exceed 65536",
        "engine"),
    Row("C9", "page_pool and page frags kept apart",
        "page_pool and ordinary page skbs merge",
        "p->pp_recycle != skb->pp_recycle: not merged, p flushed",
        (6, 2), ("5.15.222", "6.1.192"),
        "7d2c89b32587 skb: Do mix page pool and page referenced frags in GRO",
        NOT_IN_A_REPLAY + " (driver memory model)"),
    Row("C11", "flagged fraglist segment refused",
        "skb_gro_receive_list chains a segment whatever its flush flag",
        "skb_gro_receive_list refuses a segment whose flush flag is set, as skb_gro_receive does",
        (6, 19), ("6.1.192", "6.12.118", "6.18.44"),
        "stable fix to skb_gro_receive_list (2026)",
        "engine"),
    Row("C12", "IPv4 BIG TCP aggregates",
        "one gro_max_size for every protocol, and no IPv4 aggregate passes 64 KiB",
        "gro_ipv4_max_size sets the IPv4 limit; a TCP aggregate of either family may pass 64 KiB "
        "(IPv4 total length 0)",
        (6, 3), (),
        "9eefedd58ae1 net: add gso_ipv4_max_size and gro_ipv4_max_size per device; b1a78b9b9886 net: add "
        "support for ipv4 big tcp",
        "engine"),
    Row("C13", "BIG TCP needs room before the MAC header",
        "an IPv6 aggregate may pass 64 KiB when 8 bytes of headroom precede its network header",
        "it needs 8 bytes before its Ethernet header (where the Jumbo header is made room for), the new "
        "packet must not be encapsulated and the protocol must be IPv4 or IPv6: a frame injected into veth "
        "by a packet socket has 2, so IPv6 aggregates stop at 64 KiB",
        (6, 19), ("6.1.192", "6.12.118", "6.18.44"),
        "stable fix to skb_gro_receive's BIG TCP check (2026)",
        "engine"),
    # -- IPv4 (inet_gro_receive, inet_gro_flush) ----------------------------------
    Row("L1", "one fixed-ID bit for both headers",
        "inet_gro_receive keeps flush_id/is_atomic per packet: a tunnel's outer and inner header each "
        "choose fixed or incrementing IDs",
        "inet_gro_flush runs from tcp_gro_receive/udp_gro_receive_segment with one ip_fixedid bit: an inner "
        "fixed ID (DF) makes a non-DF outer header's incrementing ID a flush from the third packet; the checks "
        "follow the header's version nibble, so an IPv6 header whose nibble is not 6 is checked as IPv4; a "
        "datagram's own IP header flags (length, reserved bit) no longer flush the held UDP packet",
        (6, 10), (),
        "4b0ebbca3e16 net: gro: move L3 flush checks to tcp_gro_receive and udp_gro_receive_segment",
        "engine"),
    Row("L2", "fixed IP ID without DF",
        "a constant IP ID is accepted only with DF set (else the ID must increment); "
        "an outer header with DF has its ID ignored",
        "a constant IP ID is accepted with or without DF, per header; the outer ID is always checked "
        "(fixed or incrementing)",
        (6, 18), (),
        "21f7484220ac net: gro: only merge packets with incrementing or fixed outer ids",
        "engine"),
    # -- IPv6 -------------------------------------------------------------------------
    Row("V1", "hop limit change flushes",
        "a hop-limit difference makes a different flow: both aggregates stay held side by side",
        "a hop-limit difference flushes the held packet",
        (5, 18), (),
        "6fc2f3832d36 ipv6: gro: flush instead of assuming different flows on hop_limit mismatch",
        "engine"),
    # -- TCP --------------------------------------------------------------------------
    Row("T1", "CWR goes up alone",
        "a CWR segment flushes the held packet and starts a new aggregate; later segments merge into it "
        "(CWR is not compared)",
        "CWR is compared like the other flags: a CWR segment never merges and goes up alone",
        (6, 15), (),
        "4e4f7cefb130 gro: prevent ACE field corruption & better AccECN handling",
        "engine"),
    Row("T2", "TCP fraglist GRO",
        "rx-gro-list affects UDP only",
        "with rx-gro-list, TCP flows no local socket terminates are chained as fraglist",
        (6, 10), (),
        "8d95dc474f85 net: add code for TCP fraglist GRO",
        "engine"),
    # -- UDP --------------------------------------------------------------------------
    Row("U1", "UDP GRO checks L3 headers",
        "udp_gro_receive_segment ignores TTL, TOS, DF, IP ID, hop limit and traffic class",
        "udp_gro_receive_segment flushes on them as TCP does (IP ID fixed or incrementing)",
        (6, 9), ("5.10.262", "5.15.215", "6.1.192", "6.6.31"),
        "5babae777c61 net: gro: add flush check in udp_gro_receive_segment",
        "engine"),
    Row("U2", "UDP forwarding GRO",
        "no GRO for UDP without a local socket: rx-udp-gro-forwarding has no effect",
        "with rx-udp-gro-forwarding, datagrams no socket takes are segment-aggregated",
        (5, 12), (),
        "36707061d6ba udp: allow forwarding of plain (non-fraglisted) UDP GRO packets",
        "engine"),
    Row("U3", "tunnel sockets skip L4 aggregation",
        "under rx-gro-list a packet to a UDP tunnel socket is fraglisted at L4 (no tunnel GRO)",
        "a packet to a UDP tunnel socket always takes the tunnel's gro_receive",
        (5, 13), (),
        "18f25dc39990 udp: skip L4 aggregation for UDP tunnel packets",
        "engine"),
    Row("U4", "local tunnel packets not GROed",
        "locally encapsulated UDP tunnel skbs may be L4-aggregated",
        "skb->encapsulation packets never take the non-tunnel path",
        (6, 9), ("5.15.215", "6.1.192", "6.6.26"),
        "64235eabc4b5 udp: prevent local UDP tunnel packets from being GROed",
        NOT_IN_A_REPLAY + " (locally encapsulated packets)"),
    Row("U5", "VXLAN-GPE inner protocol",
        "a VXLAN-GPE socket parses the inner packet as Ethernet",
        "VXLAN-GPE dispatches on the GPE next protocol",
        (6, 5), ("6.1.192",),
        "b0b672c4d095 vxlan: fix GRO with VXLAN-GPE",
        "not modelled: grotool has no VXLAN-GPE devices"),
    Row("U6", "tunnel checksum seed from the outer header",
        "udp4/6_gro_complete seed a tunnel super-packet's outer UDP checksum over the innermost IP header's "
        "address bytes",
        "they seed it over the outer IP header (napi_gro_cb network offsets)",
        (6, 9), ("6.6.31",),
        "5ef31ea5d053 net: gro: fix udp bad offset in socket lookup by adding {inner_}network_offset to "
        "napi_gro_cb",
        "engine"),
    Row("U9", "tunnel GRO with a zero outer checksum",
        "a VXLAN or GENEVE packet whose outer UDP checksum is zero (so never verified) gets no tunnel GRO",
        "a zero outer checksum needs no verification: the tunnel's gro_receive runs",
        (5, 12), ("5.10.24",),
        "89e5c58fc1e2 net: Fix gro aggregation for udp encaps with zero csum",
        "engine"),
)

BY_ID: Dict[str, Row] = {row.id: row for row in ROWS}

# The real kernels each modelled row was checked against by the differential
# tests, on the host (6.18.44) and in VMs (Debian's 6.1.192 and 6.12.118, .ci/run):
# tests/test_kernel_versions_host.py for T1, L2, V1, U1; the selftest, breadth,
# IPv6-version and local-checksum-offload suites for L1 (the version nibble, the
# flagged datagram), T2 (rx-gro-list TCP), U6 (VXLAN outer seeds) and C11 (flagged
# fraglist segments), and tests/test_differential_bigtcp.py for C7, C12 and C13
# (gro_max_size and gro_ipv4_max_size on the receiving veth).  A row absent here is
# modelled from the source alone.
CHECKED: Dict[str, Tuple[str, ...]] = {
    row: ("6.1.192", "6.12.118", "6.18.44")
    for row in ("C7", "C11", "C12", "C13", "L1", "L2", "V1", "T1", "T2", "U1", "U6")
}
MAINLINE_NAMES = frozenset(f"{a}.{b}.0" for a, b in MAINLINE)


def known_versions() -> Tuple[str, ...]:
    """The names --kernel takes, newest series first, then the mainline releases."""
    series = tuple(sorted(SERIES, key=lambda s: tuple(map(int, s.split("."))), reverse=True))
    return series + tuple(f"{a}.{b}.0" for a, b in MAINLINE)


class KernelProfile(NamedTuple):
    name: str                     # as asked: "6.1", "6.10.0"
    release: str                  # the release modelled: "6.1.192", "6.10.0"
    rows: FrozenSet[str]          # ids of the rows that hold

    def holds(self, row_id: str) -> bool:
        return row_id in self.rows

    @property
    def description(self) -> str:
        kind = "mainline" if self.release.endswith(".0") else "stable"
        return f"Linux {self.release}, {kind}"


def profile(name: str) -> KernelProfile:
    """The profile of a --kernel value; ValueError naming the known ones."""
    text = str(name).strip()
    release = SERIES.get(text)
    if release is None and text in MAINLINE_NAMES:
        release = text
    if release is None:
        series_names = ", ".join(known_versions()[:len(SERIES)])
        raise ValueError(f"unknown kernel {text!r}: known are {series_names} (their current stable "
                         f"releases) and the mainline releases 5.10.0 to 6.18.0")
    major, minor, sublevel = (int(p) for p in release.split("."))
    rows = frozenset(row.id for row in ROWS if row.holds((major, minor, sublevel)))
    return KernelProfile(text, release, rows)


def series_of(release: str) -> str:
    """The long-term series profile of a kernel release string (``uname -r``:
    "6.1.0-57-amd64", "6.18.44-fc-v1272"); ValueError when it is none of them."""
    parts = release.split(".")
    if len(parts) >= 2 and parts[0].isdigit():
        minor = "".join(c for c in parts[1].split("-")[0] if c.isdigit())
        series = f"{parts[0]}.{minor}"
        if series in SERIES:
            return series
    raise ValueError(f"kernel {release!r} is not of a long-term series grotool models ({', '.join(SERIES)})")


_cache: Dict[str, KernelProfile] = {}


def cached_profile(name: str) -> KernelProfile:
    """profile(), once per name in a process (every GroNode asks)."""
    found = _cache.get(name)
    if found is None:
        found = _cache[name] = profile(name)
    return found
