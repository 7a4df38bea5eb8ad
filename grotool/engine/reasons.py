"""The flush-reason vocabulary (the public contract).

Names are a public contract (docs/reasons.md).  Every delivered packet
carries exactly one reason: for a super-packet or a held single, the reason
its aggregate was completed; for a packet sent up alone, the reason it could
not be held.  When the kernel ORs several causes together we report the first
in the kernel's own evaluation order.

Effect codes: S = the incoming packet goes up alone, held packets untouched;
P = the matching held packet is completed; PS = both; M = merged, then the
held packet is completed; L = list or poll level; H = (DPDK) held beside the
flow's held packets, none completed.

The reasons whose function starts with "DPDK" are the DPDK stack's
(`--stack dpdk`, grotool/dpdk/): lib/gro of DPDK 22.11, never Linux.
"""

# What each effect code says happens to the packets involved (`grotool reasons`,
# docs/reasons.md): the public meaning of the second field of REASONS.
EFFECTS = {
    "S": "the arriving packet is sent up alone, never held; held packets stay held",
    "P": "the held packet of the same flow is completed (sent up); the arriving packet is held in its place",
    "PS": "both: the held packet of the same flow is completed and the arriving packet is sent up alone",
    "M": "the arriving packet is merged into the held one, which is then completed at once "
         "(with no held packet: sent up alone)",
    "L": "decided at list or poll level (bucket full, end of a poll, budget, timer, end of capture), "
         "not by a packet's headers: held packets are completed",
    "H": "DPDK stack: the arriving packet is held as a packet of its own beside the held packets of its flow, "
         "none of which is completed",
}

# name -> (effect, kernel function, description)
REASONS = {
    # dev_gro_receive / L2
    "gro_disabled": ("S", "netif_elide_gro", "GRO is off on the device"),
    "no_l2_handler": ("S", "dev_gro_receive", "no GRO handler for the ethertype (ARP, LLDP, ...; inside a tunnel: eth_gro_receive, geneve_gro_receive)"),
    "recursion_limit": ("S", "gro_recursion_inc_test", "15 nested GRO layers (stacked VLAN tags, tunnels)"),
    "vlan_no_inner_handler": ("S", "vlan_gro_receive", "no GRO handler for the protocol inside the VLAN tag"),
    "vlan_hdr_unreadable": ("S", "vlan_gro_receive", "VLAN header cut short"),
    # IPv4
    "ip_hdr_unreadable": ("S", "inet_gro_receive", "IPv4 header cut short"),
    "ip_no_l4_handler": ("S", "inet_gro_receive", "IP protocol without GRO (ICMP, SCTP, ...)"),
    "ip_options_or_version": ("S", "inet_gro_receive", "IPv4 options present (first byte not 0x45)"),
    "ip_fragment": ("S", "inet_gro_receive", "IPv4 fragment (MF or offset set)"),
    "ip_bad_hdr_csum": ("S", "inet_gro_receive", "IPv4 header checksum bad"),
    "ip_len_mismatch": ("PS", "inet_gro_receive", "IPv4 total length differs from the bytes present (padding, trailer, truncation)"),
    "ip_reserved_flag": ("PS", "inet_gro_receive", "IPv4 reserved fragment flag set"),
    "ip_ttl_changed": ("P", "inet_gro_flush", "TTL differs from the held packet"),
    "ip_tos_changed": ("P", "inet_gro_flush", "TOS byte (DSCP or ECN) differs"),
    "ip_df_changed": ("P", "inet_gro_flush", "DF bit differs"),
    "ip_id_not_incrementing": ("P", "inet_gro_flush", "IP ID is not first ID + segments (incrementing mode)"),
    "ip_id_not_fixed": ("P", "inet_gro_flush", "IP ID differs from the first ID (fixed mode)"),
    # IPv6
    "ipv6_hdr_unreadable": ("S", "ipv6_gro_receive", "IPv6 header or extension header cut short"),
    "ipv6_no_l4_handler": ("S", "ipv6_gro_receive", "header chain ends in Fragment, AH, no-next-header or an unknown protocol"),
    "ipv6_payload_len_mismatch": ("PS", "ipv6_gro_receive", "IPv6 payload length differs from the bytes present"),
    "ipv6_tclass_changed": ("P", "ipv6_gro_flush", "traffic class (DSCP or ECN) differs"),
    "ipv6_hoplimit_changed": ("P", "ipv6_gro_flush", "hop limit differs"),
    # tunnels
    "tunnel_nested": ("S", "ipip/sit/ip6ip6/ip4ip6/gre/udp_gro_receive", "a second tunnel layer (encap_mark already set)"),
    "udp_tunnel_csum_unverified": ("S", "udp_gro_receive", "UDP tunnel packet whose nonzero outer checksum was not verified (packet already flagged)"),
    "gre_unsupported": ("S", "gre_gro_receive", "GRE flags other than K/C (sequence numbers, version), or no GRO handler for the inner protocol"),
    "gre_csum_bad": ("S", "gre_gro_receive", "GRE checksum validation failed"),
    "tunnel_hdr_bad": ("S", "vxlan/geneve/eth_gro_receive", "tunnel or inner Ethernet header cut short, GENEVE version not 0 or OAM set"),
    # TCP
    "tcp_csum_bad": ("S", "tcp4/6_gro_receive", "TCP checksum validation failed"),
    "tcp_hdr_bad": ("S", "tcp_gro_pull_header", "TCP header cut short or data offset < 5"),
    "tcp_cwr": ("P", "tcp_gro_receive", "incoming segment has CWR (it never joins a held packet; from 6.15, row T1, nothing joins it either)"),
    "tcp_flags_changed": ("P", "tcp_gro_receive", "TCP flag bits other than FIN/PSH differ (ECE, ACK, CWR, AE, reserved)"),
    "tcp_window_changed": ("P", "tcp_gro_receive", "TCP window differs"),
    "tcp_hdrlen_changed": ("P", "tcp_gro_receive", "TCP data offset differs"),
    "tcp_ack_changed": ("P", "tcp_gro_receive", "acknowledgement number differs"),
    "tcp_ts_changed": ("P", "tcp_gro_receive", "TCP timestamp option value differs"),
    "tcp_options_changed": ("P", "tcp_gro_receive", "a TCP option word differs"),
    "tcp_seq_mismatch": ("P", "tcp_gro_receive", "sequence number does not continue the held packet (gap, retransmit, reorder)"),
    "tcp_oversize": ("P", "tcp_gro_receive", "segment larger than the held packet's mss"),
    "tcp_no_payload": ("PS", "tcp_gro_receive", "segment without payload (pure ACK)"),
    "tcp_push": ("M", "tcp_gro_receive", "PSH: merged, then completed (alone: sent up)"),
    "tcp_fin": ("M", "tcp_gro_receive", "FIN: merged, then completed (alone: sent up)"),
    "tcp_urg": ("PS", "tcp_gro_receive", "URG segment, never merged"),
    "tcp_rst": ("PS", "tcp_gro_receive", "RST segment, never merged"),
    "tcp_syn": ("PS", "tcp_gro_receive", "SYN segment, never merged"),
    "tcp_short_segment": ("M", "tcp_gro_receive", "segment shorter than mss: merged, then completed"),
    "tcp_flist_mismatch": ("P", "tcp_gro_receive", "fraglist: the flag word (PSH/FIN/window included) differs, or the aggregate already has 64 segments"),
    # UDP
    "udp_hdr_unreadable": ("S", "udp4/6_gro_receive", "UDP header cut short"),
    "udp_csum_bad": ("S", "udp4/6_gro_receive", "UDP checksum validation failed"),
    "udp_no_gro_path": ("S", "udp_gro_receive", "no UDP_GRO socket, no rx-udp-gro-forwarding, no rx-gro-list (or a local socket without UDP_GRO)"),
    "udp_zero_csum": ("S", "udp_gro_receive_segment", "UDP checksum field 0: segment GRO needs a checksum"),
    "udp_bad_len": ("S", "udp_gro_receive_segment", "UDP length <= 8 or differs from the bytes present (padding, truncation)"),
    "udp_flist_mismatch": ("PS", "udp_gro_receive_segment", "fraglist state differs from the held packet's"),
    "udp_flist_csum_state": ("S", "udp_gro_receive_segment", "fraglist: checksum state (ip_summed, csum_level) differs from the held packet's; it stays held"),
    "udp_len_larger": ("P", "udp_gro_receive_segment", "datagram longer than the held packet's first one"),
    "udp_short_last": ("M", "udp_gro_receive_segment", "datagram shorter than the held packet's first one: merged, then completed"),
    "udp_max_segs": ("M", "udp_gro_receive_segment", "the aggregate reached 64 datagrams: merged, then completed"),
    # skb_gro_receive / skb_gro_receive_list
    "merge_max_size": ("P", "skb_gro_receive", "aggregate would reach gro_max_size / gro_ipv4_max_size"),
    "merge_bigtcp_ineligible": ("P", "skb_gro_receive", "aggregate would pass 64 KiB but is not eligible for BIG TCP"),
    "flist_max_size": ("P", "skb_gro_receive_list", "fraglist aggregate would reach 65536 bytes"),
    # list and poll level
    "bucket_full_evict_oldest": ("L", "gro_flush_oldest", "the bucket already held 8 packets; its oldest was completed"),
    "napi_complete": ("L", "napi_complete_done", "poll ended with work < budget: everything flushed"),
    "napi_complete_old": ("L", "napi_complete_done", "poll ended with a flush timer armed: packets from an earlier jiffy flushed"),
    "budget_exhausted_all": ("L", "__napi_poll", "poll used its whole budget; HZ < 1000 flushes everything"),
    "budget_exhausted_old": ("L", "__napi_poll", "poll used its whole budget; HZ >= 1000 flushes packets from an earlier jiffy"),
    "flush_timeout": ("L", "napi_watchdog", "gro_flush_timeout timer poll flushed what was left"),
    "end_of_capture": ("L", "grotool", "the capture ended; what was still held is flushed (as the next poll would)"),
    # DPDK 22.11 lib/gro (--stack dpdk; grotool/dpdk/engine.py)
    "dpdk_not_gro_type": ("S", "DPDK rte_gro_reassemble_burst", "DPDK: packet type of no enabled GRO type (IPv6, ARP, ...; UDP without udp4 on; VXLAN without vxlan_tcp4/vxlan_udp4 on): returned unprocessed"),
    "dpdk_tcp_hdr_len": ("S", "DPDK gro_tcp4_reassemble", "DPDK: TCP header length (l4_len) under 20 or over 60 bytes"),
    "dpdk_tcp_flags": ("S", "DPDK gro_tcp4_reassemble", "DPDK: TCP flags other than exactly ACK (PSH, FIN, SYN, RST, URG, ECE, CWR): returned unprocessed"),
    "dpdk_no_payload": ("S", "DPDK gro_tcp4/udp4_reassemble", "DPDK: ACK segment without payload once Ethernet padding is trimmed (the trim stays), or IPv4 fragment without payload"),
    "dpdk_udp_not_fragment": ("S", "DPDK gro_udp4_reassemble", "DPDK udp4, vxlan_udp4 (IPv4 fragment reassembly, inside VXLAN for vxlan_udp4): an unfragmented UDP datagram passes through"),
    "dpdk_table_full": ("S", "DPDK insert_new_item", "DPDK: the reassembly table holds its maximum of packets (light: min(burst, flows x items, 128); heavy: flows x items)"),
    "dpdk_ack_differs": ("H", "DPDK is_same_tcp4_flow", "DPDK: the ACK number is part of the flow key: a new ACK number starts a flow of its own"),
    "dpdk_tcp_options_differ": ("H", "DPDK check_seq_option", "DPDK: TCP header length or option bytes differ from the held packet's"),
    "dpdk_df_differs": ("H", "DPDK check_seq_option", "DPDK: DF bit differs from the held packet's"),
    "dpdk_ip_id_not_next": ("H", "DPDK check_seq_option", "DPDK: without DF, the IP ID is not the held packet's last ID + 1 (no wrap at 65535)"),
    "dpdk_outer_df_differs": ("H", "DPDK check_vxlan_seq_option", "DPDK vxlan_tcp4: outer IPv4 DF bit differs from the held packet's"),
    "dpdk_outer_ip_id_not_next": ("H", "DPDK check_vxlan_seq_option", "DPDK vxlan_tcp4: without outer DF, the outer IP ID does not continue (or directly precede) the held packet's"),
    "dpdk_seq_not_adjacent": ("H", "DPDK check_seq_option", "DPDK: sequence number neither continues nor directly precedes the held packet"),
    "dpdk_frag_not_adjacent": ("H", "DPDK udp4_check_neighbor", "DPDK udp4, vxlan_udp4: fragment offset neither continues nor directly precedes a held fragment of the datagram (held in offset order; joined at the flush if adjacent then)"),
    "dpdk_max_length": ("H", "DPDK merge_two_tcp4/udp4_packets", "DPDK: merging would pass an IPv4 total length of 65,535"),
    "dpdk_burst_end": ("L", "DPDK rte_gro_reassemble_burst", "DPDK light mode: the burst ended; every held packet is returned (before the unprocessed ones)"),
    "dpdk_timeout_flush": ("L", "DPDK rte_gro_timeout_flush", "DPDK heavy mode: the application flushed the GRO context (--dpdk-flush-every bursts)"),
    # grotool's own
    "capture_truncated": ("S", "grotool", "record cut by snaplen (caplen < wire length), nic device: not what the kernel saw, passed through (veth takes it through GRO as captured, as grotool kernel injects it)"),
    "not_ip_link": ("S", "grotool", "link-layer frame grotool cannot feed to GRO (too short for its link header)"),
    "outgoing": ("S", "grotool", "packet the capturing host sent (cooked capture packet type PACKET_OUTGOING, pcapng epb_flags outbound): it never went through the receive path; passed through unchanged (--outgoing receive: taken as received)"),
    "unknown_link_type": ("S", "grotool", "frame of a link type grotool does not parse (802.11, USB, ...): passed through unchanged"),
}

REASON_NAMES = frozenset(REASONS)


def effect(reason: str) -> str:
    return REASONS[reason][0]
