"""The kernel GRO selftest cases through the simulation, with the results this
kernel (6.18.44) gives: shared/spec/selftest-gro-cases.md section 5, also
checked live against the kernel in test_differential.py."""

import pytest

from grotool import scenarios as S
from grotool.engine import Settings, simulate
from grotool.oracle.kernel import parse

SCENARIOS = S.all_scenarios(include_optional=True)


def delivered(sc, settings):
    """(sport, TCP payload) per delivered packet; (None, None) for an IP fragment."""
    out = []
    for d in simulate([(ts, f, len(f)) for ts, f in sc.records(0)], 1, settings):
        p = parse(d.data)
        out.append((p.flow[3], p.payload) if p is not None and p.proto == 6 else (None, None))
    return out


def matches(got, want_sizes):
    return len(got) == len(want_sizes) and all(g[1] is None or g[1] == w for g, w in zip(got, want_sizes))


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_veth_model_gives_this_kernels_results(sc):
    got = delivered(sc, Settings(device="veth"))
    assert matches(got, [size for _, size in sc.expected_order]), (got, sc.expected_order)
    assert all(g[0] is None or g[0] == w[0] for g, w in zip(got, sc.expected_order))


NIC_CASES = [s for s in SCENARIOS if "capacity" not in s.name]


@pytest.mark.parametrize("sc", NIC_CASES, ids=[s.name for s in NIC_CASES])
def test_nic_model_with_selftest_deferral_honours_the_pauses(sc):
    """With the selftest's own settings (gro_flush_timeout 200 us,
    napi_defer_hard_irqs 1) and the scenario's timestamps, each pause is a
    flush: the result the selftest itself sees.  (capacity is left out: with
    RSS the flows spread over buckets and all coalesce.)"""
    settings = Settings(device="nic", gro_flush_timeout=200_000, napi_defer_hard_irqs=1, rx_usecs=0, rx_frames=0)
    got = delivered(sc, settings)
    assert matches(got, sc.expected_paused), (got, sc.expected_paused)
