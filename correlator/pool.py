"""Jobs run a bounded number at a time, their results taken in job order: :func:`in_order`.

The one mechanism behind every fan-out of the project: a large job's batches
(:func:`correlator.streaming.stream_ingest`, on threads or in worker processes; Ray's tasks through a
:class:`Pool`, :mod:`correlator.rayengine`), the files of one ingest read ahead on threads
(``correlator.ingest._reads``, bounded by their bytes) and the cases of ``rankscope eval``
(:func:`correlator.evaluate.evaluate`). It imports nothing of the project but its errors and the allocator
setting, so the layers below the batch (ingest) use it as well as those above.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from correlator import allocator
from correlator.errors import InputError


def cores() -> int:
    """The cores this process may use (its CPU affinity where the system reports one, else the CPU count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def _child_env(threads: int) -> Iterator[None]:
    """While worker processes start: their polars pool sized to their share of the cores (a spawned child
    reads ``POLARS_MAX_THREADS`` when it imports polars), unless the user set it, and the allocators set for
    a worker (:func:`correlator.allocator.worker_env`). The environment is as it was afterwards."""
    child = allocator.worker_env()
    if "POLARS_MAX_THREADS" not in os.environ:
        child["POLARS_MAX_THREADS"] = str(threads)
    with _ENV_LOCK:
        had = {k: os.environ.get(k) for k in child}
        os.environ.update(child)
        try:
            yield
        finally:
            for k, v in had.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _executor(kind: str, workers: int, name: str) -> Executor:
    if kind == "processes":
        return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"rankscope-{name}")


T = TypeVar("T")
R = TypeVar("R")


class Pool(Protocol):
    """Where :func:`in_order` runs its jobs, when not on threads or processes of its own: ``submit(run, job)``
    starts ``run(job)`` and gives back a handle, ``result(handle)`` the job's result (raising its error),
    ``close()`` stops early (jobs not started never start; those running are waited for, or left to the
    pool). :mod:`correlator.rayengine` runs the batches as Ray tasks this way."""

    def submit(self, run: Callable[[Any], Any], job: Any) -> Any: ...
    def result(self, handle: Any) -> Any: ...
    def close(self) -> None: ...


@dataclass
class _Futures:
    """A ``concurrent.futures`` executor as a :class:`Pool`."""

    executor: Executor

    def submit(self, run: Callable[[T], R], job: T) -> Future[R]:
        return self.executor.submit(run, job)

    def result(self, fut: Future[R]) -> R:
        try:
            return fut.result()
        except BrokenProcessPool as e:  # a worker killed (out of memory, a signal): no traceback to pass on
            raise InputError(
                "a batch worker process died (out of memory? lower RANKSCOPE_BATCH_WORKERS or RANKSCOPE_MEMORY_MB)"
            ) from e

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


def in_order(
    run: Callable[[T], R],
    jobs: list[T],
    workers: int,
    kind: Literal["threads", "processes"] = "threads",
    pool: Pool | None = None,
    *,
    weight: Callable[[T], int] | None = None,
    max_weight: int | None = None,
    name: str = "batch",
) -> Generator[R, None, None]:
    """``run`` of each job, yielded in job order, with up to ``workers`` jobs running at once on threads or
    in worker processes (``kind``; ``run`` and the jobs must then pickle), or in ``pool`` (then ``kind`` is
    not read). At most ``workers`` jobs are running or waiting to be taken, besides the one the caller
    holds: the next starts only when the caller asks for it, so memory is bounded by ``workers`` jobs.
    With ``weight`` and ``max_weight`` (e.g. a file's bytes and a read-ahead budget), the jobs running or
    waiting also weigh at most ``max_weight`` together, except that one job heavier than that runs alone
    (jobs start in order: a heavy one waits for those before it to be taken). An error in a job is raised
    when its turn comes, as the same exception (a worker's is pickled back); closing the generator early
    cancels the jobs not started and waits for those running. ``name``: the threads' name prefix
    (``rankscope-<name>``)."""
    if pool is None and (workers <= 1 or len(jobs) <= 1):
        yield from (run(j) for j in jobs)
        return
    procs = pool is None and kind == "processes"
    pool = pool or _Futures(_executor(kind, workers, name))
    pending: deque[tuple[Any, int]] = deque()  # (handle, weight), in job order
    queue = deque(jobs)
    held = 0  # the weight of the jobs in ``pending``

    def start() -> None:
        """Start the next jobs while they fit (:func:`in_order`'s bounds)."""
        nonlocal held
        while queue and len(pending) < workers:
            w = weight(queue[0]) if weight is not None and max_weight is not None else 0
            if pending and max_weight is not None and held + w > max_weight:
                return
            pending.append((pool.submit(run, queue.popleft()), w))
            held += w

    try:
        with _child_env(max(1, cores() // workers)) if procs else contextlib.nullcontext():
            start()  # the workers start here, while the environment holds
        while pending:
            handle, w = pending.popleft()
            held -= w
            out = pool.result(handle)
            yield out
            del out
            start()  # only now: while a job's result is taken (a batch written), one fewer runs
    finally:
        # Stopped early (an error, Ctrl-C, the consumer closed us): jobs not started never start, and
        # those running are waited for, so the caller can remove their files afterwards.
        pool.close()


__all__ = ["Pool", "cores", "in_order"]
