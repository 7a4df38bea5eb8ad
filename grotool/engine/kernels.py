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
6.18.0, which have the mainline changes only.  A stable release of a
long-term series up to the one modelled (``6.1.150``) is known too.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, NamedTuple, Optional, Tuple

DEFAULT_KERNEL = "6.18"

# The long-term series and the stable release each one's profile models:
# Debian 12's kernels (bookworm-security) for 6.1 and 6.12, the host kernel
# grotool is checked against for 6.18, the newest stable tags for the others.
SERIES: Dict[str, str] = {
    "5.10": "5.10.247",
    "5.15": "5.15.196",
    "6.1": "6.1.192",
    "6.6": "6.6.119",
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
    stable: Tuple[Tuple[str, int], ...]  # (series, first stable sublevel with it) for backports
    commit: str               # the kernel commit (12 hex digits and its title)
    modelled: str             # "engine": a rule site reads it; otherwise why not (a replay cannot show it)
    checked: str = ""         # the real kernels it was checked against (grotool kernel, kernel --vm)

    @property
    def since(self) -> str:
        """The first mainline release, as "6.15"."""
        return f"{self.mainline[0]}.{self.mainline[1]}"

    def label(self) -> str:
        """How events and explain name the row: "row T1: CWR goes up alone (6.15+)"."""
        return f"row {self.id}: {self.title} ({self.since}+)"

    def holds(self, release: Tuple[int, int, int]) -> bool:
        """Whether ``release`` (major, minor, sublevel) has the newer behaviour."""
        major, minor, sublevel = release
        if (major, minor) >= self.mainline:
            return True
        if sublevel:
            for series, first in self.stable:
                if series == f"{major}.{minor}" and sublevel >= first:
                    return True
        return False


NOT_IN_A_REPLAY = "not modelled: a pcap replay cannot show it"

ROWS: Tuple[Row, ...] = (
    # -- core (net/core/gro.c, include/net/gro.h) ---------------------------------
    Row("C1", "rx_list counts segments",
        "gro_normal_one counts 1 per completed super-packet towards gro_normal_batch",
        "gro_normal_one counts the super-packet's segments, so the list goes up sooner",
        (5, 11), (("5.10", 1),),
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
        (6, 2), (("6.1", 2),),
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
        "gro_max_size (and from 6.3 gro_ipv4_max_size for IPv4) set the limit; above 64 KiB only plain TCP",
        (5, 17), (),
        "eac1b93c14d6 gro: add ability to control gro max packet size",
        "engine"),
    Row("C8", "IPv6 BIG TCP aggregates",
        "no IPv6 aggregate passes 65535 bytes of payload",
        "an IPv6 TCP aggregate may pass 64 KiB up to gro_max_size (Hop-by-Hop Jumbo header)",
        (5, 19), (),
        "0fe79f28bfaf net: allow gro_max_size to exceed 65536",
        "engine"),
    Row("C9", "IPv4 BIG TCP aggregates",
        "gro_max_size applies to IPv4 too, and no IPv4 aggregate passes 64 KiB",
        "gro_ipv4_max_size sets the IPv4 limit; an IPv4 TCP aggregate may pass 64 KiB (tot_len 0)",
        (6, 3), (),
        "9eefedd58ae1 net: add gso_ipv4_max_size and gro_ipv4_max_size per device",
        "engine"),
    Row("C10", "page_pool and page frags kept apart",
        "page_pool and ordinary page skbs merge",
        "p->pp_recycle != skb->pp_recycle: not merged, p flushed",
        (6, 2), (("6.1", 2), ("5.15", 80)),
        "7d2c89b32587 skb: Do mix page pool and page referenced frags in GRO",
        NOT_IN_A_REPLAY + " (driver memory model)"),
    Row("C11", "flagged fraglist segment refused",
        "skb_gro_receive_list chains a segment whatever its flush flag",
        "skb_gro_receive_list refuses a segment whose flush flag is set, as skb_gro_receive does",
        (6, 19), (("6.18", 10), ("6.12", 60), ("6.6", 100), ("6.1", 160)),
        "skb_gro_receive_list: honour NAPI_GRO_CB(skb)->flush (stable 2026)",
        "engine"),
    # -- IPv4 (inet_gro_receive, inet_gro_flush) ----------------------------------
    Row("L1", "one fixed-ID bit for both headers",
        "inet_gro_receive keeps flush_id/is_atomic per packet: a tunnel's outer and inner header each "
        "choose fixed or incrementing IDs",
        "inet_gro_flush runs from tcp_gro_receive/udp_gro_receive_segment with one ip_fixedid bit: an inner "
        "fixed ID (DF) makes a non-DF outer header's incrementing ID a flush from the third packet",
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
        (6, 9), (("5.10", 217), ("5.15", 159), ("6.1", 91), ("6.6", 31)),
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
        (6, 9), (("5.15", 155), ("6.1", 85), ("6.6", 26)),
        "64235eabc4b5 udp: prevent local UDP tunnel packets from being GROed",
        NOT_IN_A_REPLAY + " (locally encapsulated packets)"),
    Row("U5", "VXLAN-GPE inner protocol",
        "a VXLAN-GPE socket parses the inner packet as Ethernet",
        "VXLAN-GPE dispatches on the GPE next protocol",
        (6, 5), (("6.1", 39),),
        "b0b672c4d095 vxlan: fix GRO with VXLAN-GPE",
        "not modelled: grotool has no VXLAN-GPE devices"),
)

BY_ID: Dict[str, Row] = {row.id: row for row in ROWS}


def _parse(text: str) -> Optional[Tuple[int, int, int]]:
    parts = text.split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() and len(p) <= 4 for p in parts):
        return None
    numbers = [int(p) for p in parts]
    return numbers[0], numbers[1], numbers[2] if len(parts) == 3 else -1


def known_versions() -> Tuple[str, ...]:
    """The names --kernel takes, newest series first, then the mainline releases."""
    series = tuple(sorted(SERIES, key=lambda s: tuple(map(int, s.split("."))), reverse=True))
    return series + tuple(f"{a}.{b}.0" for a, b in MAINLINE)


class KernelProfile(NamedTuple):
    name: str                     # as asked: "6.1", "6.10.0", "6.1.150"
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
    parsed = _parse(text)
    release = None
    if parsed is not None:
        major, minor, sublevel = parsed
        series = f"{major}.{minor}"
        if sublevel < 0 and series in SERIES:
            release = SERIES[series]
        elif sublevel == 0 and (major, minor) in MAINLINE:
            release = f"{series}.0"
        elif sublevel > 0 and series in SERIES and sublevel <= int(SERIES[series].split(".")[2]):
            release = f"{series}.{sublevel}"
    if release is None:
        series_names = ", ".join(known_versions()[:len(SERIES)])
        raise ValueError(f"unknown kernel {text!r}: known are {series_names} (current stable releases), "
                         f"5.10.0 to 6.18.0 (mainline), and stable releases of the long-term series "
                         f"up to the one modelled")
    major, minor, sublevel = (int(p) for p in release.split("."))
    rows = frozenset(row.id for row in ROWS if row.holds((major, minor, sublevel)))
    return KernelProfile(text, release, rows)


_cache: Dict[str, KernelProfile] = {}


def cached_profile(name: str) -> KernelProfile:
    """profile(), once per name in a process (every GroNode asks)."""
    found = _cache.get(name)
    if found is None:
        found = _cache[name] = profile(name)
    return found
