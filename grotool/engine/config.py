"""Every knob the simulation honours, with the kernel's defaults."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, asdict, dataclass, fields
from typing import Tuple

# The Toeplitz key most NIC drivers ship (Microsoft's RSS verification key),
# also netdev_rss_key's classic value in many datasheets.
DEFAULT_RSS_KEY = bytes.fromhex(
    "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa"
)
# the shortest key that hashes every input: a Toeplitz hash of n input bytes
# uses key bits up to n * 8 + 31, and an IPv6 4-tuple is 36 bytes
RSS_KEY_MIN = 40

GRO_LEGACY_MAX_SIZE = 65536          # netdevice.h
GRO_MAX_SIZE = 8 * 65535             # netdevice.h: the largest gro_max_size accepted
GRO_HASH_BUCKETS = 8                 # netdevice.h
MAX_GRO_SKBS = 8                     # gro.c: held packets per bucket
# frame timestamps (ns since 1970) the engine takes: the NIC model's clock is a
# 64-bit integer; 2**62 ns is 146 years either way
TIMESTAMP_LIMIT_NS = 1 << 62
TIMESTAMP_YEARS = "the years 1824 to 2116"


def timestamp_fits(ts: int) -> bool:
    """A timestamp (ns) the engine's clock takes: -2**62 <= ts < 2**62."""
    return -TIMESTAMP_LIMIT_NS <= ts < TIMESTAMP_LIMIT_NS


# upper bounds of the NIC model's delays (the CLI's option ranges): with frame
# timestamps below 2**62 ns, the 64-bit clock of napi.py cannot overflow
MAX_RX_USECS = 1_000_000
MAX_GRO_FLUSH_TIMEOUT_NS = 10 ** 10
MAX_POLL_NS_PER_FRAME = 10 ** 9
# what becomes of the frames a capture marks as sent by the capturing host (Settings.outgoing)
OUTGOING_MODES = ("pass", "receive")


class _WrittenOverFields:
    """__init__, __repr__, __eq__, __hash__ and the frozen guards of a dataclass
    whose fields all have defaults, written once over its fields: each method
    dataclass generates for a class is Python source it compiles at import,
    and Settings' 29 fields made its repr, eq and hash a sixth of the import
    time of a replay's start-up (4 M instructions), its __init__ 4.7 M and
    the guards of frozen=True 1.7 M.  Same results, and the same errors, as
    the generated ones (tests/test_settings_dataclass.py)."""

    __slots__ = ()

    def _frozen(self, name: str) -> bool:
        # frozen=True's guard: nothing is set on the dataclass itself, no field on a subclass
        return "__dataclass_fields__" in type(self).__dict__ or name in type(self).__dataclass_fields__

    def __setattr__(self, name, value):
        if self._frozen(name):
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if self._frozen(name):
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    def __init__(self, *args, **values):
        every = fields(self)
        names = [f.name for f in every]
        name = f"{self.__class__.__qualname__}.__init__()"
        if len(args) > len(names):
            raise TypeError(f"{name} takes from 1 to {len(names) + 1} positional arguments but "
                            f"{len(args) + 1} were given")
        positional = names[:len(args)]
        for key in values:
            if key in positional:
                raise TypeError(f"{name} got multiple values for argument {key!r}")
            if key not in names:
                raise TypeError(f"{name} got an unexpected keyword argument {key!r}")
        values.update(zip(names, args))
        for f in every:
            object.__setattr__(self, f.name, values[f.name] if f.name in values else f.default)

    def _field_values(self) -> tuple:
        return tuple([getattr(self, f.name) for f in fields(self)])

    def __repr__(self) -> str:
        inner = ", ".join([f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)])
        return f"{self.__class__.__qualname__}({inner})"

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._field_values() == other._field_values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._field_values())


# __init__, repr, eq (and with them hash) and the frozen guards come from _WrittenOverFields
@dataclass(init=False, repr=False, eq=False)
class Settings(_WrittenOverFields):
    """Every knob of a simulation (`grotool replay`'s options, with underscores);
    the defaults are the kernel's."""

    device: str = "nic"              # "nic" (RSS, timestamps drive IRQs) or "veth" (oracle conditions)
    budget: int = 64                 # NAPI weight: packets per driver poll
    csum: str = "auto"               # verify | trust | auto (see tcp.py)
    l4_csum: str = "partial"         # output TCP checksum: partial (pseudo-header seed) | full
    gro: bool = True                 # ethtool generic-receive-offload
    vlan_gro: bool = True            # CONFIG_VLAN_8021Q: vlan_core registers the 802.1Q/802.1ad GRO offloads
    gro_max_size: int = 65536        # ip link ... gro_max_size (IPv6)
    gro_ipv4_max_size: int = 65536   # ip link ... gro_ipv4_max_size (everything else)
    max_skb_frags: int = 17          # CONFIG_MAX_SKB_FRAGS (layout only)
    gro_normal_batch: int = 8        # net.core.gro_normal_batch
    hz: int = 250                    # CONFIG_HZ
    veth_rss: bool = False           # veth: frames carry the RSS hash of rss_key (grotool kernel --rss)
    # nic device model
    rx_queues: int = 1               # NAPI instances, chosen by RSS hash
    rss_key: bytes = DEFAULT_RSS_KEY
    rx_usecs: int = 8                # ethtool -C rx-usecs (interrupt moderation delay)
    rx_frames: int = 32              # ethtool -C rx-frames (0: no frame threshold)
    gro_flush_timeout: int = 0       # ns, /sys/class/net/DEV/gro_flush_timeout
    napi_defer_hard_irqs: int = 0    # /sys/class/net/DEV/napi_defer_hard_irqs
    poll_ns_per_frame: int = 0       # nic: time a poll spends per frame (0: polls take no time)
    # host state a capture does not carry (all off: a plain host)
    udp_gro_forwarding: bool = False     # ethtool rx-udp-gro-forwarding (NETIF_F_GRO_UDP_FWD)
    rx_gro_list: bool = False            # ethtool rx-gro-list (NETIF_F_GRO_FRAGLIST)
    udp_gro_sockets: Tuple[int, ...] = ()   # local UDP sockets with UDP_GRO, by port (any address)
    vxlan_ports: Tuple[int, ...] = ()    # VXLAN devices: their UDP tunnel sockets, by port
    geneve_ports: Tuple[int, ...] = ()   # GENEVE devices, by port
    local_tcp: Tuple[str, ...] = ()      # established local TCP sockets: "A:P>B:P" or "B:P" (see hoststate.py)
    layout: str = ""                     # skb layout model (layout.py) for the statistics; "" = not modelled
    kernel: str = "6.18"                 # the kernel release whose GRO is modelled (kernels.py profiles)
    outgoing: str = "pass"               # frames the capture marks as sent by its host: "pass" (outside GRO)
                                         # or "receive" (taken as received)

    def validate(self) -> None:
        if self.device not in ("nic", "veth"):
            raise ValueError(f"unknown device model {self.device!r}")
        if self.csum not in ("auto", "verify", "trust"):
            raise ValueError(f"unknown --csum mode {self.csum!r}")
        if self.l4_csum not in ("partial", "full"):
            raise ValueError(f"unknown --l4-csum mode {self.l4_csum!r}")
        if not 1 <= self.budget <= 65536:
            raise ValueError("budget must be 1..65536")
        for name in ("gro_max_size", "gro_ipv4_max_size"):
            value = getattr(self, name)
            if not 0 <= value <= GRO_MAX_SIZE:
                raise ValueError(f"{name} must be 0..{GRO_MAX_SIZE} (the kernel's GRO_MAX_SIZE)")
        if self.hz not in (100, 250, 300, 1000):
            raise ValueError("hz must be one of 100, 250, 300, 1000 (CONFIG_HZ choices)")
        if self.rx_queues < 1 or self.rx_queues > 1024:
            raise ValueError("rx_queues must be 1..1024")
        if len(self.rss_key) < RSS_KEY_MIN:
            raise ValueError(f"RSS key must be at least {RSS_KEY_MIN} bytes: the Toeplitz hash of an IPv6 "
                             "4-tuple (36 bytes) takes 36 + 4")
        if self.poll_ns_per_frame < 0:
            raise ValueError("poll_ns_per_frame must not be negative")
        if self.rx_usecs < 0 or self.rx_frames < 0 or self.gro_flush_timeout < 0 or self.napi_defer_hard_irqs < 0:
            raise ValueError("moderation and deferral knobs must not be negative")
        # the NIC model's 64-bit clock (napi.py): a timestamp plus any of these stays in range
        for name, limit in (("rx_usecs", MAX_RX_USECS), ("gro_flush_timeout", MAX_GRO_FLUSH_TIMEOUT_NS),
                            ("poll_ns_per_frame", MAX_POLL_NS_PER_FRAME)):
            if getattr(self, name) > limit:
                raise ValueError(f"{name} must be at most {limit:,}")
        if self.gro_normal_batch < 1:
            raise ValueError("gro_normal_batch must be at least 1")
        for name in ("udp_gro_sockets", "vxlan_ports", "geneve_ports"):
            for port in getattr(self, name):
                if not 0 < port < 65536:
                    raise ValueError(f"{name}: port {port} is not 1..65535")
        from .hoststate import parse_local_tcp
        for spec in self.local_tcp:
            parse_local_tcp(spec)
        from .layout import LAYOUTS
        if self.layout and self.layout not in LAYOUTS:
            raise ValueError(f"unknown --layout {self.layout!r} (one of {', '.join(LAYOUTS)})")
        from .kernels import cached_profile
        cached_profile(self.kernel)          # ValueError naming the known kernels
        if self.outgoing not in OUTGOING_MODES:
            raise ValueError(f"unknown --outgoing mode {self.outgoing!r} (one of {', '.join(OUTGOING_MODES)})")
        if not 1 <= self.max_skb_frags <= 45:
            raise ValueError("max_skb_frags must be 1..45 (CONFIG_MAX_SKB_FRAGS)")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["rss_key"] = self.rss_key.hex()
        for name in ("udp_gro_sockets", "vxlan_ports", "geneve_ports", "local_tcp"):
            d[name] = list(d[name])
        return d


def ipv4_max_size_for(gro_max_size: int, gro_ipv4_max_size=None) -> int:
    """netif_set_gro_max_size (net/core/dev.h): setting gro_max_size to at most
    GRO_LEGACY_MAX_SIZE sets gro_ipv4_max_size too; an explicit value wins."""
    if gro_ipv4_max_size is not None:
        return gro_ipv4_max_size
    return gro_max_size if gro_max_size <= GRO_LEGACY_MAX_SIZE else GRO_LEGACY_MAX_SIZE
