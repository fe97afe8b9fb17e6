"""polars' memory allocator settings, applied when :mod:`correlator` is imported before polars is.

polars allocates with jemalloc and configures it when it is imported (``polars/__init__.py``, polars 1.x-2.1:
``dirty_decay_ms:500,muzzy_decay_ms:1000``, followed by the options of a ``_RJEM_MALLOC_CONF`` already in
the environment, the later option winning). Freed pages are first kept ("dirty") for 0.5 s, then marked
lazily freeable ("muzzy", ``MADV_FREE``) for 1 s, and are counted in the process's RSS all that time. Ingest
frees hundreds of MiB every second (each batch's text and the intermediate columns of its parse), so a good
part of a run's peak RSS was pages already freed. ``muzzy_decay_ms:0`` gives them back at the end of the
dirty period instead.

Measured on the 256-rank bench (1,019 MB of logs, 2 cores; ``benchmarks/RESULTS.md``): ``rankscope diagnose
DIR`` peaks at 972-979 MB instead of 1,094-1,104 MB, in the same time.

The setting is only a default: a ``_RJEM_MALLOC_CONF`` already in the environment is kept as it is, and
nothing changes once polars is loaded (polars reads the variable when it is imported): a program that
imports polars before :mod:`correlator` keeps polars' defaults.

A batch worker process (``correlator.pool``, spawned for a large job's batches) starts with
:data:`WORKER_CONF` instead where this default applies (no user setting, polars not loaded first). It runs
one batch after another, each parse freeing and taking again hundreds of MiB within a second, and pages
given back after 0.5 s came back as page faults (the kernel zeroes each one); so did glibc's heap, trimmed
after each file's buffers were freed (:data:`WORKER_GLIBC`). Measured on the 256-rank bench at 2 cores
(``benchmarks/RESULTS.md``, 23rd session): ``rankscope timeline`` of the COLL job took 2.4 M page faults
with 7.5 s of system time, 0.65 M with both settings; its wall time 19.85 -> 16.14 s (COLL, 1,018 MB) and
19.54 -> 15.83 s (application job, 425 MB), medians of two alternations, at 567 against 482 MiB and 773
against 615 MiB peak per worker (within the budget ``correlator.batch`` counts a worker: 20x its batch +
0.2 GiB).
"""

from __future__ import annotations

import os
import sys

#: The environment variable polars' jemalloc (tikv-jemallocator, ``_rjem_`` symbol prefix) reads its options from.
ENV = "_RJEM_MALLOC_CONF"
#: rankscope's default, appended by polars to its own: freed pages go back to the system after polars' dirty
#: period (0.5 s), without the further 1 s as lazily freeable pages.
CONF = "muzzy_decay_ms:0"


#: What a batch worker process starts polars' jemalloc with (see the module): freed pages are kept 5 s before
#: they go back to the system, long enough for the next steps of a batch, and the next batch, to take them again.
WORKER_CONF = "dirty_decay_ms:5000,muzzy_decay_ms:0"


def configure() -> bool:
    """Set :data:`ENV` to :data:`CONF` unless it is set or polars is already loaded; True when it was set."""
    if "polars" in sys.modules or ENV in os.environ:
        return False
    os.environ[ENV] = CONF
    return True


#: Whether rankscope chose polars' allocator options in this process (:func:`configure`, at import: no user
#: setting, polars not loaded before). polars rewrites :data:`ENV` when it loads (its defaults first), so
#: this is remembered rather than read back.
_OURS = configure()


def worker_conf() -> str | None:
    """The :data:`ENV` a batch worker process is to start with: :data:`WORKER_CONF` where rankscope chose this
    process's options (:data:`_OURS`), else None (the worker inherits the user's setting, or the host
    program's polars defaults)."""
    return WORKER_CONF if _OURS else None


#: glibc's allocator in a batch worker process (Python's buffers: each file's bytes, their cleaned and decoded
#: copies): blocks up to 32 MiB (glibc's largest ``mmap`` threshold) come from the heap, which keeps up to
#: 256 MiB free at its top instead of trimming it, so one file's buffers are the next file's. Read by glibc when
#: the process starts (``mallopt(3)``'s environment variables); a variable the user set is kept.
WORKER_GLIBC = {"MALLOC_MMAP_THRESHOLD_": str(32 * 1024**2), "MALLOC_TRIM_THRESHOLD_": str(256 * 1024**2)}


def worker_env() -> dict[str, str]:
    """The variables a batch worker process is to start with, beside the environment it inherits: polars'
    allocator (:func:`worker_conf`) and glibc's (:data:`WORKER_GLIBC`, each unless already set)."""
    env = {k: v for k, v in WORKER_GLIBC.items() if k not in os.environ}
    conf = worker_conf()
    if conf is not None:
        env[ENV] = conf
    return env
