"""Where independent pieces of work run: in this process, in local processes,
or on a Dask distributed cluster.  One interface for all three, so `grotool
sweep` and `grotool check` do not care which one runs them.

    with make_executor(jobs=4) as ex:              # or scheduler="tcp://host:8786"
        results = ex.map(function, items)          # results in the order of items
        results = ex.map(function, items, progress=lambda done, total: ...)

``function`` must be a module-level function and ``items`` picklable (they
cross process boundaries).  Results come back in the order of ``items``
whatever finished first, so a run gives the same output on any executor.

``progress``, when given, is called in this process as ``progress(done,
total)`` each time an item completes: (1, n), (2, n) ... (n, n), counted from
the completed futures (workers never report anything themselves).  It only
observes: results are the same with or without it.

A worker on another machine reads capture paths as given: the captures must be
at the same paths there (a shared filesystem), and grotool must be installed
on the workers.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

from .errors import EnvironmentProblem

# progress(done, total): an item completed (see the module docstring)
Progress = Optional[Callable[[int, int], None]]

DASK_INSTALL_HINT = "pip install 'grotool[dask]'"
# how long connecting to a Dask scheduler may take before giving up (exit 4)
DASK_CONNECT_TIMEOUT_S = 20


class Executor:
    """Runs ``function(item)`` for every item; ``map`` returns results in item order."""

    description = "this process"

    def map(self, function: Callable, items: Sequence, progress: Progress = None) -> List:
        results = []
        for item in items:
            results.append(function(item))
            if progress is not None:
                progress(len(results), len(items))
        return results

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ProcessExecutor(Executor):
    """Local worker processes (concurrent.futures.ProcessPoolExecutor)."""

    def __init__(self, jobs: int):
        from concurrent.futures import ProcessPoolExecutor

        self.jobs = jobs
        self.description = f"{jobs} local processes"
        self._pool = ProcessPoolExecutor(max_workers=jobs)

    def map(self, function: Callable, items: Sequence, progress: Progress = None) -> List:
        from concurrent.futures import as_completed

        # one future per item (items are whole replays, seconds each: balance beats batching)
        futures = [self._pool.submit(function, item) for item in items]
        if progress is not None:
            for done, _ in enumerate(as_completed(futures), 1):
                progress(done, len(futures))
        # in item order; the first failure in item order is raised
        return [future.result() for future in futures]

    def close(self) -> None:
        # cancel_futures: an interrupted run does not wait for queued replays
        self._pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor(Executor):
    """The workers of a Dask distributed cluster (the optional 'dask' extra)."""

    def __init__(self, address: str):
        try:
            from distributed import Client
        except ImportError:
            raise EnvironmentProblem(
                f"--scheduler needs dask.distributed, which is not installed ({DASK_INSTALL_HINT})") from None
        try:
            self._client = Client(address, timeout=DASK_CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise EnvironmentProblem(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        self.description = f"Dask scheduler {address}"

    def map(self, function: Callable, items: Sequence, progress: Progress = None) -> List:
        if not items:
            return []
        # pure=False: two equal items are still two runs (no result sharing by hash)
        futures = self._client.map(function, list(items), pure=False)
        if progress is not None:
            from distributed import as_completed

            # this client's loop: it is not the default client (set_as_default=False)
            for done, _ in enumerate(as_completed(futures, loop=self._client.loop), 1):
                progress(done, len(futures))
        return self._client.gather(futures)

    def close(self) -> None:
        self._client.close()


def make_executor(jobs: int = 1, scheduler: Optional[str] = None) -> Executor:
    """A Dask executor with a scheduler address, local processes with jobs > 1,
    else this process."""
    if scheduler:
        return DaskExecutor(scheduler)
    if jobs > 1:
        return ProcessExecutor(jobs)
    return Executor()
