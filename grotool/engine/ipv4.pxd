# Cython declarations for ipv4.py (used only by the compiled build): see tcp.pxd.
from grotool.engine.skb cimport Skb

cpdef inet_gro_receive(bucket, Skb skb, gro)
cpdef inet_gro_flush(Skb p, Skb skb, offset, inner)
