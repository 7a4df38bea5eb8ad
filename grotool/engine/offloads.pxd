# Cython declarations for offloads.py (compiled build only): the tables stay
# Python dicts and lists; the recursion counter is a C call.
from grotool.engine.skb cimport Skb

cpdef bint enter_layer(Skb skb)
