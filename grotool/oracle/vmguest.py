"""The guest side of ``grotool kernel --vm`` (grotool.oracle.vm): runs as root
inside the VM, chrooted into the host's read-only root, and serves replay jobs
from the writable job directory until told to stop.

    python -m grotool.oracle.vmguest JOBDIR

JOBDIR/jobs/N.job (a pickled dict: frames, timestamps, csum, host, batch,
rss_key) is answered with JOBDIR/results/N.result (a pickled dict: result, a
KernelReplayResult, or error and error_class).  Jobs with the same host state
share one KernelSession (one namespace), as a host-side KernelSession would.

Before the first job the guest loads veth (and, best effort, the modules the
host options may need) from the image's module tree with the host's modprobe,
points the kernel's own module loader at the same tree, and writes
JOBDIR/ready.pickle: the release, version, the modules and the
gro_flush_timeout it uses.
"""

from __future__ import annotations

import os
import pickle
import platform
import subprocess
import sys
import time
import traceback

from ..errors import GrotoolError
from .vm import GUEST_FLUSH_TIMEOUT_NS, GUEST_MODULES, GUEST_OPTIONAL_MODULES, POLL_S

MODPROBE_WRAPPER = "/run/grotool-modprobe"


def _modprobe(root: str, module: str) -> str:
    proc = subprocess.run(["modprobe", "-d", root, module], capture_output=True, text=True)
    if proc.returncode == 0:
        return "loaded"
    err = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
    return "missing: " + (err[-1] if err else f"exit {proc.returncode}")


def prepare(root: str) -> dict:
    """Module loading; the ready report."""
    info = {"release": platform.release(), "version": platform.version(), "modules": {},
            "flush_timeout_ns": GUEST_FLUSH_TIMEOUT_NS, "python": sys.version.split()[0]}
    if root:
        # the kernel's request_module (e.g. 'ip link add type geneve') runs this instead of a
        # bare /sbin/modprobe, which would look in the host's /lib/modules
        with open(MODPROBE_WRAPPER, "w") as f:
            f.write(f"#!/bin/sh\nexec modprobe -d '{root}' \"$@\"\n")
        os.chmod(MODPROBE_WRAPPER, 0o755)
        try:
            with open("/proc/sys/kernel/modprobe", "w") as f:
                f.write(MODPROBE_WRAPPER)
        except OSError:
            pass
        for mod in GUEST_MODULES + GUEST_OPTIONAL_MODULES:
            info["modules"][mod] = _modprobe(root, mod)
    builtin_veth = os.path.isdir("/sys/module/veth")
    if not builtin_veth and info["modules"].get("veth", "").startswith("missing"):
        info["error"] = f"this kernel has no veth (CONFIG_VETH): {info['modules']['veth']}"
    return info


def _write(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    os.rename(tmp, path)


def serve(jobdir: str) -> None:
    from .kernel import KernelSession, host_hint

    sessions = {}
    jobs, results = os.path.join(jobdir, "jobs"), os.path.join(jobdir, "results")
    try:
        while not os.path.exists(os.path.join(jobdir, "stop")):
            names = sorted(n for n in os.listdir(jobs) if n.endswith(".job"))
            if not names:
                time.sleep(POLL_S)
                continue
            for name in names:
                path = os.path.join(jobs, name)
                with open(path, "rb") as f:
                    job = pickle.loads(f.read())
                os.unlink(path)
                started = time.monotonic()
                env = job.get("env") or {}
                key = (job["host"], job["rss_key"], tuple(sorted(env.items())))
                answer = {}
                try:
                    ks = sessions.get(key)
                    if ks is None:
                        saved = {k: os.environ.get(k) for k in env}
                        os.environ.update(env)
                        try:
                            ks = KernelSession(host=job["host"], max_seconds=10 ** 7, rss_key=job["rss_key"],
                                               flush_timeout_ns=GUEST_FLUSH_TIMEOUT_NS)
                            ks.__enter__()
                        finally:
                            for k, v in saved.items():
                                if v is None:
                                    os.environ.pop(k, None)
                                else:
                                    os.environ[k] = v
                        sessions[key] = ks
                    result = ks.replay(job["frames"], job["timestamps"], csum=job["csum"], batch=job["batch"])
                    result.hint = host_hint(job["frames"], ks.host) if job.get("hint") else None
                    answer = {"result": result}
                except Exception as exc:
                    if isinstance(exc, GrotoolError):
                        answer = {"error": str(exc), "error_class": type(exc).__name__}
                    else:                         # reported to the host as one line, not a traceback
                        traceback.print_exc()
                        answer = {"error": f"guest error: {type(exc).__name__}: {exc}",
                                  "error_class": "EnvironmentProblem"}
                    # a session that failed mid-replay may hold packets of that replay: a new one next time
                    bad = sessions.pop(key, None)
                    if bad is not None:
                        bad.__exit__(None, None, None)
                answer["seconds"] = time.monotonic() - started
                _write(os.path.join(results, name[:-4] + ".result"), answer)
    finally:
        for ks in sessions.values():
            try:
                ks.__exit__(None, None, None)
            except Exception:
                pass


def main(argv) -> int:
    jobdir = argv[1]
    try:
        info = prepare(os.environ.get("GROTOOL_VM_MODULES_ROOT", ""))
    except Exception as exc:
        info = {"release": platform.release(), "error": f"{type(exc).__name__}: {exc}"}
    _write(os.path.join(jobdir, "ready.pickle"), info)
    if info.get("error"):
        return 1
    serve(jobdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
