import os
import shutil
import sys

import pytest

REQUIRED = os.environ.get("GROTOOL_REQUIRE_KERNEL") == "1"
_skipped_kernel_tests = []


def kernel_unavailable_reason():
    """Why the real-kernel tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (veth in a private network namespace)"
    for tool in ("ip", "ethtool"):
        if shutil.which(tool) is None:
            return f"needs {tool} (iproute2/ethtool)"
    return None


def pytest_collection_modifyitems(config, items):
    reason = kernel_unavailable_reason()
    if reason is None:
        return
    if REQUIRED and any("kernel" in item.keywords for item in items):
        pytest.exit(f"GROTOOL_REQUIRE_KERNEL=1 but the real-kernel tests cannot run: {reason}", returncode=1)
    for item in items:
        if "kernel" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=f"real-kernel test skipped: {reason}"))


def pytest_runtest_logreport(report):
    if report.skipped and "kernel" in report.keywords:
        _skipped_kernel_tests.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    support = sys.modules.get("kernel_support")
    if support is not None:
        support.close_vm()              # the GROTOOL_TEST_VM guest, if one was booted
    # In CI (GROTOOL_REQUIRE_KERNEL=1) a skipped real-kernel test is a failure.
    if REQUIRED and _skipped_kernel_tests:
        print(f"\n{len(_skipped_kernel_tests)} real-kernel tests were skipped but are required here:")
        for nodeid in _skipped_kernel_tests[:20]:
            print(f"  {nodeid}")
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _skipped_kernel_tests and not REQUIRED:
        terminalreporter.write_line(
            f"note: {len(_skipped_kernel_tests)} real-kernel tests skipped (run as root to include them)")
