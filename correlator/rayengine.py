"""``rankscope timeline DIR --engine ray``: the batches of :func:`correlator.streaming.stream_ingest` as Ray
tasks, for logs that already sit on a file system every node of a Ray cluster reads (issue #32 item 4).
The per-node epilog path (``rankscope export`` on each node, then the merge) stays the first
recommendation; this is for a cluster that already runs Ray.

The same plan of batches as the local engine (:func:`correlator.streaming.plan`); each batch is one task
that runs the same pure function, :func:`correlator.batch.ingest_batch`, in a temporary folder of its own
node. Its table part stays in Ray's object store; the driver takes the batches' summaries in order (event
ids made unique across batches: a batch's ids start past every id the batches before it gave), then a second
task per batch moves the part's ids by that offset and writes it into the output dataset: ``part-NNNNN.parquet``
under ``out``, or a hive-partitioned dataset with ``partition_by``. The rows written are those the local
engine writes, batch by batch. At most ``in_flight`` batches are ingested or waiting to be written at once.

Ray is an optional extra (``pip install 'rankscope[ray]'``), imported only here; :func:`require_ray` raises
:class:`~correlator.errors.InputError` with the install line when it is missing. ``RAY_ADDRESS`` (Ray's own
variable) names an existing cluster; without it a local one is started for the run.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from correlator.batch import BatchJob, BatchResult, in_order, ingest_batch, with_offset
from correlator.errors import InputError


def require_ray() -> Any:
    """The ``ray`` module, or :class:`InputError` saying how to install it."""
    # Under `uv run`, Ray would package the working directory and start every worker through uv: the logs sit
    # on a shared file system and rankscope is installed where the workers run (read when Ray is imported).
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    try:
        import ray
    except ImportError:
        raise InputError(
            "--engine ray: Ray is not installed; install the extra (pip install 'rankscope[ray]', or "
            "uv sync --extra ray), or use the default --engine local"
        ) from None
    return ray


def _ingest(job: BatchJob) -> tuple[BatchResult, Any]:
    """One batch on a Ray worker: :func:`ingest_batch` in a temporary folder of that node; the summary and the
    table part returned apart (the driver fetches only the summary)."""
    with tempfile.TemporaryDirectory(prefix="rankscope-ray-") as tmp:
        out = ingest_batch(replace(job, tmp=tmp))
    part, out.table = out.table, None
    return out, part


class _Tasks:
    """Ray tasks as the :class:`correlator.batch.Pool` of :func:`correlator.batch.in_order`: a job is a task
    with two returns (:func:`_ingest`), its result the summary fetched with the ref of the part, which stays
    in the object store. Closing early leaves the tasks started to Ray."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self.remote = functools.cache(ray.remote(num_returns=2))  # one remote function per ``run``

    def submit(self, run: Callable[[BatchJob], Any], job: BatchJob) -> Any:
        return self.remote(run).remote(job)

    def result(self, refs: Any) -> tuple[BatchResult, Any]:
        res_ref, part_ref = refs
        return self.ray.get(res_ref), part_ref

    def close(self) -> None:
        pass


def _write(part: Any, offset: int, out: str, i: int, partition_by: str | None, row_group_rows: int) -> int:
    """The part of batch ``i`` with its ids moved by ``offset``, written into the dataset ``out``."""
    from correlator.schema import parquet_options, to_write_arrow

    if part is None:
        return 0
    part = with_offset(part, offset)
    assert isinstance(part, pl.DataFrame)  # want="frame": see streaming.stream_ingest
    if partition_by is not None:
        from correlator.export import write_partitioned

        write_partitioned(
            part, out, by=partition_by, part_name=f"part-{i:05d}.parquet", row_group_rows=row_group_rows
        )
    else:
        pq.write_table(
            to_write_arrow(part),
            str(Path(out) / f"part-{i:05d}.parquet"),
            row_group_size=row_group_rows,
            **parquet_options(),
        )
    return part.height


def run_batches(
    jobs: list[BatchJob],
    totals: Any,
    out: str | os.PathLike[str] | None,
    partition_by: str | None,
    row_group_rows: int,
    progress: Callable[[int, int], None] | None,
    in_flight: int | None = None,
) -> None:
    """Run ``jobs`` (the batches of :func:`correlator.streaming.stream_ingest`) as Ray tasks: each
    summary added to ``totals`` (``streaming._Totals``) in batch order, each part written under the folder
    ``out`` by a task of its own (nothing written when ``out`` is None). ``in_flight``: batches ingested or
    waiting to be written at once (default: twice the cluster's CPUs). Raises :class:`InputError` when Ray
    is missing."""
    ray = require_ray()
    outp: str | None = None
    if out is not None:
        p = Path(out).absolute()  # the tasks may run in another working directory
        if p.exists() and not p.is_dir():
            raise InputError(f"{out}: --engine ray writes a dataset (one part per batch): -o names a folder")
        p.mkdir(parents=True, exist_ok=True)
        outp = str(p)
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False)
    write_task = ray.remote(_write)
    window = in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
    writes: list[Any] = []
    for i, (res, part_ref) in enumerate(in_order(_ingest, jobs, window, pool=_Tasks(ray))):
        offset = totals.add(res)
        if outp is not None:
            writes.append(write_task.remote(part_ref, offset, outp, i, partition_by, row_group_rows))
            if len(writes) > window:  # a part waits in the object store until written: bound them
                ray.get(writes[-window - 1])
        del res, part_ref
        if progress:
            progress(i + 1, len(jobs))
    ray.get(writes)


__all__ = ["require_ray", "run_batches"]
