# Cython declarations for tcp.py (used only by the compiled build): the packet
# argument of the per-packet functions is an Skb, so its fields are read as C
# struct fields instead of by attribute lookup.  No rule lives here.
from grotool.engine.skb cimport Skb

cpdef _receive(bucket, Skb skb, gro, pseudo)
cpdef tcp_gro_receive(bucket, Skb skb, gro, thlen)
