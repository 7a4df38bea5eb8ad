"""Terminal output, settings and documentation (issue 7, bugs 7, 9 and 10)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grotool.engine.reasons import REASONS

ROOT = Path(__file__).resolve().parent.parent
IPV6 = ROOT / "captures" / "selftest-ipv6.pcap"
IPV4 = ROOT / "captures" / "selftest-ipv4.pcap"


def run_cli(*args, timeout=120):
    # COLUMNS=80 is what CI runners and harnesses export to processes without a terminal
    import os

    env = dict(os.environ, COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "grotool", *args], capture_output=True, cwd=ROOT,
                          timeout=timeout, env=env)


# -- bug 7: data is never markup; piped output is not wrapped ---------------------------
def test_replay_table_shows_ipv6_addresses_unwrapped():
    r = run_cli("replay", "--device", "veth", "--top", "100", str(IPV6))
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    rows = [line for line in text.splitlines() if "[fdaa::2]:10000 > [fdaa::1]:8000" in line]
    assert len(rows) == 1                               # the whole label on one line
    assert re.search(r"│ tcp \[fdaa::2\]:10000 > \[fdaa::1\]:8000 +│ +3 │", rows[0])
    assert "tcp :10000 > :8000" not in text
    assert all(len(line) > 80 for line in text.splitlines()[:3])      # not cut at 80 columns


def test_compare_table_shows_ipv6_addresses_unwrapped():
    r = run_cli("compare", "--no-sidecar", "--max-flows", "100", str(IPV6), str(IPV6))
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "tcp [fdaa::2]:10000 > [fdaa::1]:8000 │ tcp" in text
    assert "compared per flow: TCP (seq, payload_len), UDP (payload_len, ordinal), other packets by their " \
           "bytes from the network header; global order not required" in text.splitlines()[1]


def test_compare_difference_panel_title_keeps_brackets(tmp_path):
    from grotool.io.capture import PcapWriter, read_capture

    _, recs = read_capture(str(IPV6))
    b = tmp_path / "b.pcap"
    with PcapWriter(str(b)) as w:
        for ts, data, _ in recs[:-1]:                      # one packet missing in B
            w.write(ts, data)
    r = run_cli("compare", "--no-sidecar", str(IPV6), str(b))
    assert r.returncode == 1, r.stderr
    text = r.stdout.decode()
    titles = [line for line in text.splitlines() if line.startswith("╭─ ")]
    assert titles and all("[" in t and "]:" in t for t in titles if "tcp" in t)


def test_reasons_table_has_full_names_when_piped():
    r = run_cli("reasons")
    assert r.returncode == 0
    text = r.stdout.decode()
    first_cells = {line.split("│")[1].strip() for line in text.splitlines()
                   if line.startswith("│") and line.split("│")[1].strip()}
    assert first_cells == set(REASONS)
    assert "…" not in text


def test_reasons_table_on_an_80_column_terminal():
    import io

    from rich.console import Console

    from grotool.cli.reasons_cmd import reasons_table

    buf = io.StringIO()
    Console(file=buf, width=80, force_terminal=True, color_system=None).print(reasons_table())
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    first_cells = {line.split("│")[1].strip() for line in lines if line.startswith("│")}
    assert first_cells - {""} == set(REASONS)


# -- bug 9: gro_max_size also sets gro_ipv4_max_size up to 64 KiB ------------------------
@pytest.mark.parametrize("args,ipv6,ipv4", [
    ([], 65536, 65536),
    (["--gro-max-size", "32000"], 32000, 32000),            # netif_set_gro_max_size: both
    (["--gro-max-size", "200000"], 200000, 65536),          # above GRO_LEGACY_MAX_SIZE: IPv4 unchanged
    (["--gro-max-size", "32000", "--gro-ipv4-max-size", "60000"], 32000, 60000),   # explicit wins
])
def test_gro_max_size_lowers_the_ipv4_limit(args, ipv6, ipv4):
    r = run_cli("replay", "-q", "--device", "veth", str(IPV4), "--json", "-", *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["settings"]["gro_max_size"], doc["settings"]["gro_ipv4_max_size"]) == (ipv6, ipv4)


def test_ipv4_aggregates_respect_a_lowered_gro_max_size(tmp_path):
    out = tmp_path / "o.pcap"
    r = run_cli("replay", "-q", "--device", "veth", str(ROOT / "captures" / "bulk-4flows.pcap"), str(out),
                "--gro-max-size", "8000")
    assert r.returncode == 0, r.stderr
    from grotool.io.capture import read_capture

    _, recs = read_capture(str(out))
    sizes = [len(d) - 14 for _, d, _ in recs if d[12:14] == b"\x08\x00"]
    assert sizes and max(sizes) <= 8000


# iproute2 6.1 neither shows nor sets gro_ipv4_max_size: rtnetlink directly.
# IFLA_GRO_MAX_SIZE is 58 and IFLA_GRO_IPV4_MAX_SIZE 64 (include/uapi/linux/if_link.h).
RTNL_SCRIPT = r"""
import socket, struct, sys
IFLA_GRO_MAX_SIZE, IFLA_GRO_IPV4_MAX_SIZE = 58, 64
RTM_NEWLINK, RTM_GETLINK, NLM_F_REQUEST, NLM_F_ACK = 16, 18, 1, 4
index = socket.if_nametoindex(sys.argv[1])
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
def request(kind, flags, attrs=b""):
    body = struct.pack("=BxHiII", 0, 0, index, 0, 0) + attrs
    s.send(struct.pack("=IHHII", 16 + len(body), kind, flags, 1, 0) + body)
    return s.recv(65536)
if len(sys.argv) > 2:                      # set gro_ipv4_max_size
    reply = request(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, struct.pack("=HHI", 8, IFLA_GRO_IPV4_MAX_SIZE,
                                                                         int(sys.argv[2])))
    assert struct.unpack_from("=i", reply, 16)[0] == 0, reply
reply = request(RTM_GETLINK, NLM_F_REQUEST)
pos, attrs = 32, {}
while pos + 4 <= len(reply):
    length, kind = struct.unpack_from("=HH", reply, pos)
    if length < 4:
        break
    attrs[kind] = reply[pos + 4:pos + length]
    pos += (length + 3) & ~3
print(struct.unpack("=I", attrs[IFLA_GRO_MAX_SIZE])[0], struct.unpack("=I", attrs[IFLA_GRO_IPV4_MAX_SIZE])[0])
"""


@pytest.mark.kernel
def test_real_kernel_gro_max_size_sets_gro_ipv4_max_size():
    """The rule above, on this machine's kernel: `ip link set DEV gro_max_size N`."""
    import os

    from grotool.cli import ipv4_max_size_for

    ns = f"grotool-t{os.getpid()}-gromax"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        def ip(*args):
            return subprocess.run(["ip", "-n", ns, *args], check=True, capture_output=True, text=True).stdout

        def sizes(set_ipv4=None):
            extra = [str(set_ipv4)] if set_ipv4 is not None else []
            out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", RTNL_SCRIPT, "va", *extra],
                                 check=True, capture_output=True, text=True).stdout
            gro, ipv4 = map(int, out.split())
            assert gro == json.loads(ip("-d", "-j", "link", "show", "va"))[0]["gro_max_size"]
            return gro, ipv4

        ip("link", "add", "va", "type", "veth", "peer", "name", "vb")
        assert sizes() == (65536, 65536)
        for gro, prior_ipv4 in ((32000, 65536), (200000, 32000), (60000, 200000), (65536, 1000)):
            if sizes()[1] != prior_ipv4:
                sizes(set_ipv4=prior_ipv4)
            ip("link", "set", "va", "gro_max_size", str(gro))
            expected_ipv4 = gro if gro <= 65536 else prior_ipv4
            assert sizes() == (gro, expected_ipv4)
            if prior_ipv4 == 65536:           # grotool's model starts from the kernel's default
                assert ipv4_max_size_for(gro, None) == expected_ipv4
    finally:
        subprocess.run(["ip", "netns", "del", ns])
    assert ipv4_max_size_for(200000, None) == 65536
    assert ipv4_max_size_for(40000, 60000) == 60000


# -- bug 10: documentation stands on its own ---------------------------------------------
DOCS = ["README.md", "captures/README.md", "tests/data/README.md"] + \
    [str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS)
def test_docs_point_nowhere_outside_the_repository(doc):
    text = (ROOT / doc).read_text()
    assert "spec/" not in text and "shared/" not in text
    assert "behaviour notes" not in text


def test_documented_settings_are_real_options():
    text = (ROOT / "docs" / "json.md").read_text()
    assert "netdev_budget" not in text
    help_text = run_cli("replay", "--help").stdout.decode()
    section = text.split("## `settings`")[1].split("##")[0]
    from grotool.check import _option_name        # field -> option (--udp-gro-socket, --rss, ...)

    for name in re.findall(r"`([a-z0-9_]+)`", section):
        assert _option_name(name) in help_text or name == "vlan_gro", name


# -- issue 32: the effect codes are explained where the reasons are listed ---------------
def test_reasons_output_explains_every_effect_code():
    from grotool.engine.reasons import EFFECTS

    used = {effect for effect, _, _ in REASONS.values()}
    assert used == set(EFFECTS) == {"S", "P", "PS", "M", "L", "H"}
    text = run_cli("reasons").stdout.decode()
    legend = text.split("Effect codes:")[1].splitlines()[1:]
    assert [line.split()[0] for line in legend] == list(EFFECTS)
    assert all(EFFECTS[line.split()[0]] == line.split(None, 1)[1] for line in legend)
    as_json = json.loads(run_cli("reasons", "--json").stdout)
    assert all(entry["effect_meaning"] == EFFECTS[entry["effect"]] for entry in as_json.values())


def test_docs_reasons_md_is_the_markdown_listing_with_the_effect_codes():
    doc = (ROOT / "docs" / "reasons.md").read_text()
    assert doc == run_cli("reasons", "--markdown").stdout.decode()
    from grotool.engine.reasons import EFFECTS

    for code, meaning in EFFECTS.items():
        assert f"| {code} | {meaning} |" in doc
