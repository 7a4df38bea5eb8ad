"""The real librte_gro for the DPDK differential tests (grotool.dpdk.oracle).

`dpdk_library` builds the harness once per session (Debian's DPDK 22.11 is
fetched with apt-get download on first use).  Where it cannot be fetched or
built, the tests skip, except in CI (GROTOOL_REQUIRE_KERNEL=1), where they fail.
"""

from __future__ import annotations

import os

import pytest

REQUIRED = os.environ.get("GROTOOL_REQUIRE_KERNEL") == "1"


@pytest.fixture(scope="session")
def dpdk_library():
    from grotool.dpdk.oracle import harness_path, run_library
    from grotool.errors import EnvironmentProblem

    try:
        harness_path()
    except EnvironmentProblem as exc:
        if REQUIRED:
            pytest.fail(f"GROTOOL_REQUIRE_KERNEL=1 but DPDK's librte_gro is not usable here: {exc}")
        pytest.skip(f"DPDK differential test skipped: {exc}")
    return run_library


def outcome(packets):
    """What the application received: each packet's bytes and the frames it covers, in order."""
    return [(p.data, list(p.covers)) for p in packets]
