"""The application's GRO knobs (rte_gro_param and how it drives the library):
their choices and defaults.  Apart from the model so that the command line
builds its options without importing it (a Linux replay never does)."""

MODES = ("light", "heavy")
GRO_TYPES = ("tcp4", "udp4", "vxlan_tcp4", "vxlan_udp4")   # every type of 22.11

DEFAULT_BURST = 32
DEFAULT_MAX_FLOWS = 4                 # testpmd: GRO_DEFAULT_FLOW_NUM = 128 / GRO_DEFAULT_ITEM_NUM_PER_FLOW
DEFAULT_MAX_ITEMS = 32                # testpmd: GRO_DEFAULT_ITEM_NUM_PER_FLOW

VXLAN_PORT = 4789                     # the UDP port the application classifies as VXLAN (IANA's)
