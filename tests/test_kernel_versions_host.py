"""The version rows on the real host kernel (6.18): for each row grotool claims
as checked (kernels.CHECKED), crafted traffic where the row decides goes
through `grotool kernel` and through the simulation under the 6.18 profile:
the same packets, bytes and segments; and an older profile that lacks the row
gives another answer, so the case really is version-sensitive."""

import pytest

from grotool.engine import simulate
from grotool.engine.kernels import CHECKED
from grotool.oracle import HostState, replay_frames

from test_differential_breadth import assert_identical, machine_settings
from test_kernel_versions import tcp4, udp_ttl
from kernel_support import tcp

pytestmark = pytest.mark.kernel


def _cwr():
    return [tcp4(i, flags=0x10 | (0x80 if i in (2, 5) else 0)) for i in range(8)]


def _fixed_id_no_df():
    return [tcp4(i, df=False, ip_id=0) for i in range(8)]


def _hop_limit():
    # the same segments arriving over two paths with different hop limits, interleaved
    return [tcp(1000, seq=1000 + (i // 2) * 1000, family=6, ttl=64 if i % 2 == 0 else 63) for i in range(8)]


def _udp_ttl():
    return [udp_ttl(i, 64 if i < 3 else 63) for i in range(6)]


# (row, frames, host state, an older kernel lacking the row)
CASES = [
    ("T1", _cwr, {}, "6.12"),
    ("L2", _fixed_id_no_df, {}, "6.12"),
    ("V1", _hop_limit, {}, "5.15"),
    ("U1", _udp_ttl, {"udp_gro_sockets": (5202,)}, "6.6.0"),
]


def test_every_checked_row_has_a_case():
    assert {row for row, *_ in CASES} == {row for row, releases in CHECKED.items() if "6.18.44" in releases}


@pytest.mark.parametrize("row,build,host,older", CASES, ids=[c[0] for c in CASES])
def test_row_matches_the_host_kernel(row, build, host, older):
    frames = build()
    kernel = replay_frames(frames, csum="auto", host=HostState.build(**host), require_reliable=True)
    recs = [(i, f, len(f)) for i, f in enumerate(frames)]
    sim = list(simulate(recs, 1, machine_settings(kernel="6.18", **host)))
    assert_identical(frames, kernel, sim, f"row {row}")
    before = list(simulate(recs, 1, machine_settings(kernel=older, **host)))
    assert [d.segs for d in before] != [d.segs for d in sim], f"row {row}: {older} should differ"
