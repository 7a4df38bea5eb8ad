"""One line that says which host option would change the result, when the
capture holds traffic that the host state decides (UDP GRO, UDP tunnels,
TCP fraglist) and the options given did not cover it.

Each piece of advice names an option with the value that would change what
GRO does: a UDP port whose datagrams carry a VXLAN or GENEVE header and an
inner Ethernet frame gets ``--vxlan-port PORT`` / ``--geneve-port PORT``
(whatever the port: 4789 and 6081 are the IANA ports, 8472 Linux's old VXLAN
default that flannel uses); the IANA tunnel ports get theirs even when the
first datagram did not look like one; any other port gets the UDP GRO options."""

from __future__ import annotations

from typing import Optional

TUNNEL_PORTS = {4789: "vxlan", 6081: "geneve"}
TUNNEL_OPTIONS = {"vxlan": "--vxlan-port", "geneve": "--geneve-port"}


def host_hint(settings, stats) -> Optional[str]:
    ports = stats.udp_no_gro_path
    shaped = getattr(stats, "udp_tunnel_payloads", {})
    tunnels = {p: shaped.get(p) or TUNNEL_PORTS.get(p) for p in ports}
    advice = [f"{TUNNEL_OPTIONS[kind]} {p}" for p, kind in sorted(tunnels.items()) if kind]
    others = {p: n for p, n in ports.items() if not tunnels[p]}
    if others:
        top = max(others, key=lambda p: (others[p], -p))
        advice.append(f"--udp-gro-socket {top}, --udp-gro-forwarding or --rx-gro-list")
    unmerged = sum(ports.values())
    parts = []
    if advice:
        parts.append(f"{unmerged} UDP datagrams had no GRO path on this host: consider {'; '.join(advice)}")
    if settings.rx_gro_list and not settings.local_tcp and stats.tcp_fraglist_assumed:
        parts.append("every TCP flow was taken as forwarded (fraglist GRO): give --local-tcp for flows "
                     "this host terminates")
    return "hint: " + "; ".join(parts) if parts else None
