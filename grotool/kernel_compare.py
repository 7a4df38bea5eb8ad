"""One capture replayed under two kernel profiles (`grotool compare --kernel A
--kernel B`): the two results compared flow by flow (compare.py), and the
kernel history rows that decided differently."""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from typing import List, NamedTuple, Tuple

from .compare import CompareResult, compare_captures
from .engine import Settings
from .engine.kernels import ROWS, cached_profile
from .replay import replay


class KernelComparison(NamedTuple):
    kernels: Tuple[str, str]           # the two --kernel values
    releases: Tuple[str, str]          # the releases they model
    result: CompareResult              # B's deliveries against A's
    rows_differing: List[str]          # modelled rows that hold in one release only
    rows_deciding: List[str]           # of those, the rows a decision in this capture named

    def to_json(self) -> dict:
        doc = self.result.to_json()
        doc["kernels"] = {"a": self.kernels[0], "b": self.kernels[1], "releases": list(self.releases),
                          "rows_differing": self.rows_differing, "rows_deciding": self.rows_deciding}
        return doc


def compare_kernels(input_path: str, kernel_a: str, kernel_b: str, settings: Settings,
                    require_order: bool = False) -> KernelComparison:
    """Replay ``input_path`` under both kernels (the other settings alike)."""
    a, b = cached_profile(kernel_a), cached_profile(kernel_b)
    differing = [row.id for row in ROWS if row.modelled == "engine" and a.holds(row.id) != b.holds(row.id)]
    named = set()

    def collect(event) -> None:
        if event.row:
            named.add(event.row.split(":")[0].split(",")[0].split()[1])

    with tempfile.TemporaryDirectory(prefix="grotool-compare-") as tmp:
        paths = []
        for tag, kernel in (("a", kernel_a), ("b", kernel_b)):
            pcap, segs = os.path.join(tmp, f"{tag}.pcap"), os.path.join(tmp, f"{tag}.jsonl")
            replay(input_path, pcap, replace(settings, kernel=kernel), packets_path=segs, events=collect)
            paths.append((pcap, segs))
        result = compare_captures(paths[0][0], paths[1][0], require_order=require_order,
                                  sidecar_a=paths[0][1], sidecar_b=paths[1][1])
    # the sides are named by what was replayed, not by the temporary files
    for side, kernel, release in ((result.a, kernel_a, a.release), (result.b, kernel_b, b.release)):
        side.path = f"{input_path} --kernel {kernel} (Linux {release})"
        side.sidecar = "replay --packets"
    deciding = [row for row in differing if row in named]
    return KernelComparison((kernel_a, kernel_b), (a.release, b.release), result, differing, deciding)


def compare_with_vm(input_path: str, vm, settings: Settings, require_order: bool = False) -> CompareResult:
    """``input_path`` through the kernel of ``vm`` (a grotool.oracle.vm.VmSession,
    already booted) against grotool's replay under that kernel's profile
    (``settings`` with --device veth and the profile of the guest's series)."""
    from .engine.kernels import series_of
    from .oracle import HostState, run_kernel_replay

    profile = series_of(vm.image.release)
    settings = replace(settings, device="veth", kernel=profile)
    host = HostState.build(udp_gro_forwarding=settings.udp_gro_forwarding, rx_gro_list=settings.rx_gro_list,
                           udp_gro_sockets=settings.udp_gro_sockets, vxlan_ports=settings.vxlan_ports,
                           geneve_ports=settings.geneve_ports, local_tcp=settings.local_tcp)
    with tempfile.TemporaryDirectory(prefix="grotool-compare-") as tmp:
        kpcap, kjson = os.path.join(tmp, "kernel.pcap"), os.path.join(tmp, "kernel.json")
        spcap, sjson = os.path.join(tmp, "replay.pcap"), os.path.join(tmp, "replay.jsonl")
        run = run_kernel_replay(input_path, kpcap, kjson, csum=settings.csum, host=host, vm=vm)
        replay(input_path, spcap, settings, packets_path=sjson)
        result = compare_captures(kpcap, spcap, require_order=require_order, sidecar_a=kjson, sidecar_b=sjson)
    result.a.path = f"{input_path} through Linux {run.kernel} (VM {vm.image_spec})"
    result.b.path = f"{input_path} grotool replay --device veth --kernel {profile}"
    result.a.sidecar, result.b.sidecar = "grotool kernel --json", "replay --packets"
    return result
