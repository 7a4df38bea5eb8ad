"""One line that says which host option would change the result, when the
capture holds traffic that the host state decides (UDP GRO, UDP tunnels,
TCP fraglist) and the options given did not cover it."""

from __future__ import annotations

from typing import Optional

TUNNEL_PORTS = {4789: "--vxlan-port 4789", 6081: "--geneve-port 6081"}


def host_hint(settings, stats) -> Optional[str]:
    ports = stats.udp_no_gro_path
    advice = [TUNNEL_PORTS[p] for p in sorted(TUNNEL_PORTS) if p in ports]
    others = {p: n for p, n in ports.items() if p not in TUNNEL_PORTS}
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
