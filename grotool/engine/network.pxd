# Cython declarations for network.py (compiled build only): see tcp.pxd.
from grotool.engine.skb cimport Skb
from grotool.engine.ipv4 cimport inet_gro_flush
from grotool.engine.ipv6 cimport ipv6_gro_flush

cpdef network_flush(Skb p, Skb skb, Py_ssize_t offset, int inner)
cpdef gro_receive_network_flush(Skb p, Skb skb)
