"""The capture link types grotool reads (LINKTYPE_ values of pcap/pcapng)."""

LINKTYPE_NULL = 0           # BSD loopback: 4-byte address family in the capturing host's byte order
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108         # OpenBSD loopback: 4-byte address family in network byte order
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
# DLT_RAW as some platforms wrote it into pcap files before LINKTYPE_RAW existed.
LINKTYPE_RAW_ALIASES = (12, 14)
RAW_LINKTYPES = (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6) + LINKTYPE_RAW_ALIASES
LOOPBACK_LINKTYPES = (LINKTYPE_NULL, LINKTYPE_LOOP)
COOKED_LINKTYPES = (LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2)

# link type -> bytes of link header in front of the network header (raw IP: none)
LINK_HEADER_BYTES = {LINKTYPE_ETHERNET: 14, LINKTYPE_LINUX_SLL: 16, LINKTYPE_LINUX_SLL2: 20,
                     LINKTYPE_NULL: 4, LINKTYPE_LOOP: 4}

# The address family values of a BSD loopback header: AF_INET is 2 everywhere;
# AF_INET6 is 24 (NetBSD, OpenBSD, BSD/OS), 28 (FreeBSD, DragonFly) or 30 (macOS).
AF_INET = 2
AF_INET6_VALUES = (24, 28, 30)

# SLL/SLL2 packet types (sll_pkttype): what the capturing host did with the packet.
PACKET_OUTGOING = 4


def loopback_family(linktype: int, header) -> int:
    """The address family of a NULL/LOOP header (its first 4 bytes): LOOP's is
    big-endian; NULL's is in the byte order of the host that captured, which the
    file does not record, so a value read either way is taken when it is one of
    the families above (else 0)."""
    big = (header[0] << 24) | (header[1] << 16) | (header[2] << 8) | header[3]
    if linktype == LINKTYPE_LOOP:
        return big
    little = (header[3] << 24) | (header[2] << 16) | (header[1] << 8) | header[0]
    if little == AF_INET or little in AF_INET6_VALUES:
        return little
    return big


def loopback_ethertype(linktype: int, header) -> int:
    """The ethertype a NULL/LOOP header stands for: IPv4, IPv6, or 0 (not IP)."""
    family = loopback_family(linktype, header)
    return 0x0800 if family == AF_INET else 0x86DD if family in AF_INET6_VALUES else 0


SUPPORTED_LINKTYPES = {
    LINKTYPE_ETHERNET: "Ethernet",
    LINKTYPE_RAW: "raw IP",
    LINKTYPE_LINUX_SLL: "Linux SLL",
    LINKTYPE_LINUX_SLL2: "Linux SLL2",
    LINKTYPE_IPV4: "raw IPv4",
    LINKTYPE_IPV6: "raw IPv6",
    LINKTYPE_NULL: "BSD loopback",
    LINKTYPE_LOOP: "OpenBSD loopback",
    12: "raw IP",
    14: "raw IP",
}


def is_outgoing(linktype: int, data) -> bool:
    """A cooked (SLL/SLL2) record of a packet the capturing host sent
    (sll_pkttype PACKET_OUTGOING).  Other link types do not say."""
    if linktype == LINKTYPE_LINUX_SLL:
        return len(data) >= 2 and data[0] == 0 and data[1] == PACKET_OUTGOING
    if linktype == LINKTYPE_LINUX_SLL2:
        return len(data) >= 11 and data[10] == PACKET_OUTGOING
    return False
