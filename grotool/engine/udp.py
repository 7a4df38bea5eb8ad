"""UDP: udp4/6_gro_receive, udp_gro_receive, udp_gro_receive_segment and the
completions (net/ipv4/udp_offload.c, net/ipv6/udp_offload.c), 6.18 semantics.

Three ways a datagram can take part in GRO, all decided per packet by the
host state (hoststate.py): segment GRO (a local UDP_GRO socket,
rx-udp-gro-forwarding without a socket, or fraglist under rx-gro-list), or a
UDP tunnel socket (VXLAN, GENEVE) whose gro_receive parses the inner packet.
Anything else goes up alone (udp_no_gro_path).
"""

from __future__ import annotations

from struct import Struct

from . import csum
from .hoststate import GENEVE_SOCKET, UDP_GRO_SOCKET, VXLAN_SOCKET
from .network import gro_receive_network_flush
from .offloads import enter_layer
from .skb import extend_key, settled_key
from .tunnels import (ETH_P_TEB, geneve_gro_complete, geneve_gro_receive, udp_tunnel_payload, vxlan_gro_complete,
                      vxlan_gro_receive)
from .tcp import checksum_verified, full_l4_checksum, lco_valid, pseudo4, pseudo6, validate_l4

UDP_GRO_CNT_MAX = 64                 # udp_offload.c
_u16 = Struct("!H").unpack_from


def _receive(bucket, skb, gro, pseudo):
    """The shared body of udp4_gro_receive and udp6_gro_receive."""
    data = skb.data
    off = skb.off
    if skb.end < off + 8:
        skb.flush = skb.flush or "udp_hdr_unreadable"
        return None
    check = (data[off + 6] << 8) | data[off + 7]
    # the checksum state the tunnel path asks about: nonzero and never verified
    unverified = False
    if gro.verify_l4:
        if skb.flush is None:
            # skb_gro_checksum_validate_zero_check: a zero checksum is accepted unchecked
            if check:
                ps = pseudo(data, skb.network_offsets[skb.encap_mark], skb.end - off, 17)
                if not validate_l4(gro, skb, ps, off + 6, _tunnel_lco if gro.csum_auto else None):
                    skb.flush = "udp_csum_bad"
                    return None
            checksum_verified(skb)
        elif check:
            unverified = True        # a packet that will be flushed anyway is not verified
        if not check and not gro.udp_zero_csum_tunnel:
            unverified = True        # row U9: before 5.12 a zero checksum counted as unverified
    # udp4/6_gro_lookup_skb, only while udp_encap_needed_key is on
    sk = gro.host.udp_socket((data[off + 2] << 8) | data[off + 3])
    return udp_gro_receive(bucket, skb, gro, sk, check, unverified)


def _tunnel_lco(gro, skb, total):
    """--csum auto: the outer checksum of a VXLAN or GENEVE packet, covering
    ``total`` (validate_l4's sum), filled by local checksum offload over an
    inner seed (tcp.lco_valid; validate_l4's lco)."""
    if skb.encap_mark:
        return False
    data = skb.data
    off = skb.off
    sk = gro.host.udp_socket((data[off + 2] << 8) | data[off + 3])
    if sk is VXLAN_SOCKET:
        at, etype = off + 16, None
    elif sk is GENEVE_SOCKET and skb.end >= off + 16:
        at = off + 16 + (data[off + 8] & 0x3F) * 4
        etype = (data[off + 10] << 8) | data[off + 11]
        etype = None if etype == ETH_P_TEB else etype
    else:
        return False
    return lco_valid(data, off, total, at, etype, skb.end)


def udp4_gro_receive(bucket, skb, gro):
    return _receive(bucket, skb, gro, pseudo4)


def udp6_gro_receive(bucket, skb, gro):
    return _receive(bucket, skb, gro, pseudo6)


def udp_gro_receive(bucket, skb, gro, sk, check, unverified):
    """udp_gro_receive: segment GRO, a tunnel socket's gro_receive, or no GRO."""
    skb.is_flist = 0
    host = gro.host
    tunnel = sk is VXLAN_SOCKET or sk is GENEVE_SOCKET
    if host.rx_gro_list:
        if not tunnel:
            skb.is_flist = 0 if sk is UDP_GRO_SOCKET else 1
        elif not host.tunnel_skips_l4:
            skb.is_flist = 1                 # row U3: a tunnel socket has no UDP_GRO
    if not tunnel or skb.is_flist:
        # (skb->encapsulation, set only on locally encapsulated packets, is never set here)
        if (sk is None and host.udp_gro_forwarding) or sk is UDP_GRO_SOCKET or skb.is_flist:
            if not enter_layer(skb):
                return None
            return udp_gro_receive_segment(bucket, skb, gro, check)
        off = skb.off
        data = skb.data
        if skb.flush is None:
            ports = gro.stats.udp_no_gro_path
            dport = (data[off + 2] << 8) | data[off + 3]
            if dport in ports:
                ports[dport] += 1
            elif len(ports) < 4096:
                ports[dport] = 1
                # the first datagram to a port: a VXLAN/GENEVE device there would have taken it?
                kind = udp_tunnel_payload(data, off + 8, skb.end)
                if kind:
                    gro.stats.udp_tunnel_payloads[dport] = kind
            skb.flush = "udp_no_gro_path"
        # nothing is compared, but the socket lookup read the port pair: with it
        # the delivery carries a full flow identity (statistics name the flow once)
        extend_key(skb, data, off, 4)
        skb.l4_off = off
        skb.off = off + 8
        return None
    if skb.encap_mark:
        skb.flush = skb.flush or "tunnel_nested"
        return None
    if unverified:
        skb.flush = skb.flush or "udp_tunnel_csum_unverified"
        return None
    skb.encap_mark = 1
    off = skb.off
    data = skb.data
    # same tunnel: the port pair, and checksums both zero or both nonzero
    skb.key = settled_key(skb) + data[off:off + 4] + (b"\x00" if check else b"\x01")
    skb.l4_off = off
    skb.off = off + 8
    if not enter_layer(skb):                 # call_gro_receive_sk
        return None
    if sk is VXLAN_SOCKET:
        return vxlan_gro_receive(bucket, skb, gro)
    return geneve_gro_receive(bucket, skb, gro)


def udp_gro_receive_segment(bucket, skb, gro, check):
    """udp_gro_receive_segment: datagrams of one flow, all the same length but
    a shorter last one, become one UDP_L4 (or fraglist) super-packet."""
    data = skb.data
    off = skb.off
    if not check:
        # segment GRO needs a checksum, for symmetry with GSO
        skb.flush = skb.flush or "udp_zero_csum"
        return None
    ulen = (data[off + 4] << 8) | data[off + 5]
    if ulen <= 8 or ulen != skb.end - off:
        skb.flush = skb.flush or "udp_bad_len"
        return None
    extend_key(skb, data, off, 4)        # the port pair completes the flow identity
    key = skb.key
    skb.l4_off = off
    skb.off = off + 8
    p = bucket.find(skb.hash, key)
    if p is None:
        return None
    if skb.is_flist != p.is_flist:
        skb.flush = skb.flush or "udp_flist_mismatch"
        p.flush = "udp_flist_mismatch"
        return p
    # row U1: before 6.9 (and its stable backports) no L3 checks here
    reason = None
    if gro.udp_l3_checks:
        reason = gro_receive_network_flush(p, skb, gro)
        if reason is None and skb.flush is not None and not gro.ipid_rule:
            # before 6.10 (row L1) inet/ipv6_gro_receive put a packet's own header flags
            # (length, reserved bit) on the held packet of its flow too
            reason = skb.flush
    first_len = _u16(p.data, p.l4_off + 4)[0]
    if reason is None and ulen > first_len:
        reason = "udp_len_larger"
    if reason is None:
        if skb.is_flist:
            if skb.csum_level != p.csum_level:
                # fraglist needs equal checksum states (a flagged packet skipped
                # verification); the skb goes up alone, p stays held
                skb.flush = skb.flush or "udp_flist_csum_state"
                return None
            reason = gro.merge_list(p, skb)
        else:
            reason = gro.merge(p, skb)
        if reason is None:
            if ulen != first_len:
                reason = "udp_short_last"
            elif p.count >= UDP_GRO_CNT_MAX:
                reason = "udp_max_segs"
            else:
                return None
    p.flush = reason
    return p


# -- completion --------------------------------------------------------------------
def _complete(gro, p, header, gso_type, nhoff, pseudo):
    """udp4/6_gro_complete and udp_gro_complete."""
    total = len(header) - nhoff + p.payload_len
    header[nhoff + 4] = (total >> 8) & 0xFF
    header[nhoff + 5] = total & 0xFF
    check = (header[nhoff + 6] << 8) | header[nhoff + 7]
    # the IP header this UDP header belongs to (network_offsets[skb->encapsulation])
    pseudo_sum = pseudo(header, p.network_offsets[p.encapsulation], total, 17)
    full = check and gro.l4_csum_full
    if p.is_flist and not p.encap_mark:
        # fraglist: UDP length of the whole, the first datagram's checksum left alone
        gso_type.append("fraglist")
        gso_type.append("udp_l4")
    else:
        sk = gro.host.udp_socket((header[nhoff + 2] << 8) | header[nhoff + 3])
        tunnel = sk is VXLAN_SOCKET or sk is GENEVE_SOCKET
        if check:
            seed_sum = pseudo_sum
            if tunnel and not gro.udp_tunnel_seed_outer:
                # row U6: before 6.9 the seed read the innermost IP header's address bytes
                seed_sum = pseudo(header, p.network_offsets[1], total, 17)
            _write_check(header, nhoff, csum.seed(seed_sum))
        if tunnel:
            # the tunnel socket's gro_complete; gso_type is assigned, not ORed, and
            # encap_mark cleared so that an inner fraglist completes as one
            gso_type[:] = ["udp_tunnel_csum" if check else "udp_tunnel"]
            p.encap_mark = 0
            p.encapsulation = 1
            complete = vxlan_gro_complete if sk is VXLAN_SOCKET else geneve_gro_complete
            complete(gro, p, header, gso_type, nhoff + 8)
        else:
            gso_type.append("udp_l4")            # udp_gro_complete_segment
    if full:
        # after the inner headers are final: the checksum covers them
        _write_check(header, nhoff, full_l4_checksum(p, header, nhoff, 6, pseudo_sum))


def _write_check(header, nhoff, value):
    header[nhoff + 6] = value >> 8
    header[nhoff + 7] = value & 0xFF


def udp4_gro_complete(gro, p, header, gso_type, nhoff):
    _complete(gro, p, header, gso_type, nhoff, pseudo4)


def udp6_gro_complete(gro, p, header, gso_type, nhoff):
    _complete(gro, p, header, gso_type, nhoff, pseudo6)
