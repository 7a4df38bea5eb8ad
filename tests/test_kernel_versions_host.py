"""The version rows on real kernels: for each row grotool calls checked
(kernels.CHECKED), crafted traffic where the row decides goes through the
oracle's kernel (the host's, or a VM's with GROTOOL_TEST_VM) and through the
simulation under that kernel's profile: the same packets, bytes and segments.
A profile on the other side of the row gives another answer, so each case
really is version-sensitive."""

import pytest

from grotool.engine import simulate
from grotool.engine.kernels import CHECKED, cached_profile
from grotool.oracle import HostState

from kernel_support import oracle_kernel_profile, oracle_replay_frames as replay_frames, tcp
from test_differential_breadth import assert_identical, machine_settings
from test_kernel_versions import tcp4, udp_ttl

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


# (row, frames, host state, a release before the row, a release with it)
CASES = [
    ("T1", _cwr, {}, "6.14.0", "6.15.0"),
    ("L2", _fixed_id_no_df, {}, "6.17.0", "6.18.0"),
    ("V1", _hop_limit, {}, "5.17.0", "5.18.0"),
    ("U1", _udp_ttl, {"udp_gro_sockets": (5202,)}, "6.8.0", "6.9.0"),
]


def test_every_checked_row_has_a_case():
    assert {row for row, releases in CHECKED.items()} <= {row for row, *_ in CASES} | {"T2", "L1", "U6", "C11", "C7", "C12", "C13"}


@pytest.mark.parametrize("row,build,host,before,after", CASES, ids=[c[0] for c in CASES])
def test_row_matches_the_oracle_kernel(row, build, host, before, after):
    frames = build()
    kernel = replay_frames(frames, csum="auto", host=HostState.build(**host), require_reliable=True)
    recs = [(i, f, len(f)) for i, f in enumerate(frames)]
    sim = list(simulate(recs, 1, machine_settings(**host)))
    assert_identical(frames, kernel, sim, f"row {row} on {oracle_kernel_profile()}")
    holds = cached_profile(oracle_kernel_profile()).holds(row)
    other = list(simulate(recs, 1, machine_settings(kernel=before if holds else after, **host)))
    assert [d.segs for d in other] != [d.segs for d in sim], f"row {row}: the other side should differ"
