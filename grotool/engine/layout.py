"""How the driver hands frames to GRO (the skb layout), and so which path
skb_gro_receive takes for each merged segment.  Decisions never depend on it
(except page-pool mixing, not modelled); only the super-packet's shape does.
"""

from __future__ import annotations

# name -> description
LAYOUTS = {
    "frags": "napi_gro_frags: the whole frame in one page fragment, an empty linear area",
    "header-split": "exactly the headers in the linear area, the payload in one page fragment",
    "linear-pagefrag": "the whole frame in a linear area that is a page fragment (build_skb)",
    "linear-kmalloc": "the whole frame in a kmalloc'd linear area (copybreak, small napi_alloc_skb)",
    "mlx5-copy256": "256 bytes copied into a kmalloc'd linear area, the rest in page fragments "
                    "(mlx5e striding RQ before the 2026 fix)",
}
