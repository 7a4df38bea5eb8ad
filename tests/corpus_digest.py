"""Run by tests/test_builds.py in a process per build: every capture of a
folder replayed under three hosts, one line per replay: the frames, a digest
of the output capture and the statistics document (timings left out), and
the super-packets; or the one-line refusal."""

import glob
import hashlib
import json
import os
import sys
import tempfile

from grotool.engine import Settings
from grotool.errors import InputError
from grotool.replay import replay

HOSTS = [("nic", {}), ("veth", {}),
         ("veth", {"udp_gro_forwarding": True, "rx_gro_list": True, "udp_gro_sockets": (53, 443),
                   "vxlan_ports": (4789,), "geneve_ports": (6081,), "csum": "verify", "l4_csum": "full"})]


def without_timings(doc):
    if isinstance(doc, dict):
        return {k: without_timings(v) for k, v in doc.items()
                if not any(w in k for w in ("time", "elapsed", "seconds")) and k not in ("version", "engine")}
    if isinstance(doc, list):
        return [without_timings(v) for v in doc]
    return doc


def main(folder: str) -> None:
    out = os.path.join(tempfile.mkdtemp(), "out.pcap")
    for path in sorted(glob.glob(os.path.join(folder, "*"))):
        if path.endswith("LICENSE"):
            continue
        name = os.path.basename(path)
        for n, (device, host) in enumerate(HOSTS):
            try:
                result = replay(path, out, Settings(device=device, **host))
            except InputError as exc:
                print(name, n, "refused:", str(exc).replace(out, "OUT"))
                continue
            digest = hashlib.sha256(open(out, "rb").read())
            digest.update(json.dumps(without_timings(result.document), sort_keys=True).encode())
            print(name, n, result.frames, digest.hexdigest(), result.document["totals"]["super_packets"])


if __name__ == "__main__":
    main(sys.argv[1])
