"""One batch of files -> its table part, its reduced rows and its summary: the one ingest step that
``rankscope timeline`` (:func:`correlator.streaming.stream_ingest`) and streaming ``diagnose`` run per
batch, and the in-memory read of a folder of logs (:func:`correlator.api.load_path`: ``diagnose``,
``events``, ``graph``, the non-streaming ``timeline``) runs as one batch of the whole folder
(:func:`ingest_whole`). The live watcher reads appended byte ranges, not files, and shares ingest's steps after
parsing (:func:`correlator.ingest.table_from_parsed`; :mod:`correlator.tail` says why). Ray's tasks run it
too (``rankscope timeline --engine ray``, :mod:`correlator.rayengine`).

:func:`ingest_batch` is a pure function of a :class:`BatchJob` (the files, the context files whose rows
other batches keep, the zone, what to return): it reads nothing but the files, writes nothing but its own
temporary shadow directory and, asked to, its table part as a Parquet file beside it (encoded where the
batch runs; the caller joins the parts without encoding them again, :mod:`correlator.parts`), and returns a
small :class:`BatchResult` that pickles, so it runs the same on a thread or in a worker process (or as a
task of another engine). Its only other argument, :class:`Hooks`, is the progress callbacks of a caller
in this process; they observe, and change nothing in the result.
Identity that needs the whole job (event ids across batches, the job's ranks, hosts and attempts) is the
small second pass of the caller over the results' summaries.

:func:`correlator.pool.in_order` (re-exported here) runs it over a list of jobs with a bounded number in
flight and yields the results in job order: on threads of this process for small inputs (no start-up), in
a pool of worker processes started with ``spawn`` (polars' thread pool does not survive ``fork``) for large
ones, each worker's polars pool sized to its share of the cores (:func:`pool_kind`, :func:`batch_workers`),
or in a :class:`Pool` the caller gives (Ray's tasks: :mod:`correlator.rayengine`).
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import polars as pl

from correlator.discover import DiscoveryError, Source, following_symlinks, learned_from
from correlator.limits import env_int
from correlator.pool import Pool, cores, in_order
from correlator.reduce import reduce_for_diagnosis
from correlator.schema import Kind, parquet_options, to_write_arrow

if TYPE_CHECKING:
    from correlator.ingest import IngestResult
    from correlator.signatures import TextPatterns

#: Input bytes of a streaming run below which batches run on threads of this process: a worker process
#: costs ~1 CPU-s to start (Python, polars, pyarrow and the parsers imported again), which only pays off
#: over several batches per worker.
PROCESS_MIN_BYTES = 128 * 1024**2
#: Fewest workers for which batches run in processes. Since each batch writes its own table part (a worker
#: sends back a path, not its rows), 2 worker processes beat 2 threads on 2 cores (2026-12-07, ``rankscope
#: timeline``, 3 alternations): the 256-rank COLL job (1,018 MB) 11.8 s / 21.9 CPU-s / 473 MiB against
#: 14.5 s / 23.2 / 787 in threads, the 32-rank app job (255 MB) 6.6 s / 12.2 / 618 against 6.7 s / 11.7 /
#: 1,047, and near the input floor, the 40-rank COLL job (152 MB, 5 batches), 2.95 s / 4.8 / 465 against
#: 2.88 s / 4.2 / 734. One worker stays a thread. (With the parts sent back as tables, 2 processes had cost
#: ~1.7x the CPU of 2 threads: 2026-12-05, RESULTS.md.) Threads also stop scaling past ~4 workers (the
#: per-batch Python holds the GIL: issue #32, 16 cores, 8-16 threads no faster than 4).
PROCESS_MIN_WORKERS = 2
#: Memory one batch's ingest takes at most, as a multiple of its input bytes, plus the ~0.2 GiB of a
#: worker's imports: the total budget below bounds the workers. Measured 2026-12-06 (one worker process,
#: ``rankscope timeline``'s batches): application lines 673 MiB for 25 MiB batches (the 64-rank app job),
#: NCCL COLL lines 476 MiB for 30 MiB batches (64-rank COLL job), i.e. ~19x and ~9x over the imports; 12
#: before, which under-counted application batches.
_BATCH_MEMORY_FACTOR = 20
_WORKER_BASE_BYTES = 200 * 1024**2

Want = Literal["parquet", "frame", "none"]


def source_bytes(src: Source) -> int:
    s = getattr(src, "size", None)
    if s is not None:
        return int(s)
    try:
        return src.path.stat().st_size
    except OSError:
        return 0


@dataclass
class Batch:
    """One batch of files: ``files`` give the rows; ``context`` files (the rest of a node that had to be
    split: launcher log, error.json files, small per-rank files) are read with every chunk of the node, for
    rank identity (node offsets, launcher pairing, pids) and tee de-duplication, and each of their rows is
    kept by one chunk: a row of local rank L (a ``--tee`` copy ``[defaultL]:``, the launcher's line about L)
    by the chunk that holds the torchrun folders of L, of every attempt (``owned``; there its copy in the
    rank's own files is found, so ``duplicate`` is as in one ingest of the whole node; the local rank is read
    from the line itself, while a row's attempt may be resolved differently from one chunk to another), every
    other row by the chunk with ``keeps_rest`` (the first). ``claimed``: the local ranks some chunk owns."""

    files: list[Source]
    context: list[Source] = field(default_factory=list)
    owned: frozenset[int] = frozenset()
    claimed: frozenset[int] = frozenset()
    keeps_rest: bool = False

    @property
    def nbytes(self) -> int:
        return sum(source_bytes(s) for s in self.files)


@dataclass(frozen=True)
class BatchJob:
    """The arguments of :func:`ingest_batch` (all picklable). ``whole``: the input is this path whole, one
    file or a folder (no shadow directory; the files are those ingest's own discovery finds, ``batch`` only
    says their size); ``tmp``: where the shadow directory goes; ``base``: the input root as the user named
    it (warnings name it instead of the shadow); ``keep_last``: see
    :func:`correlator.reduce.reduce_for_diagnosis`, None for no reduced rows (a caller that reduces the
    whole table itself); ``want``: the table part as a Parquet file the batch writes under ``tmp``
    (``parquet``: a :class:`PartFile` of ``WRITE_SCHEMA`` with :func:`correlator.schema.parquet_options`, row
    groups of at most ``row_group_rows`` rows, for :class:`correlator.parts.PartsWriter` to join), a polars
    frame (``frame``) or not at all (``none``: only the reduced rows and the summary).
    ``fr``: a folder of Flight Recorder dumps kept apart; ``keep_coll``: cut NCCL COLL lines while reading
    (see :func:`correlator.ingest.ingest`); ``empty_ok``: a batch with no readable line gives an empty
    result with the warning (a batch among others) instead of raising
    :class:`~correlator.discover.DiscoveryError` (the whole input); ``summary``: False leaves the summary
    (``rows``, ``kinds``, ``unparsed``, ``ranks``, ``hosts``, ``attempts``) empty, for a caller that reads the
    table itself (:func:`ingest_whole`); ``text``: the signature patterns whose lines the reduced rows
    keep whole (None: the built-in library's; see :func:`correlator.reduce.signature_text`)."""

    batch: Batch
    whole: str | None
    tz: str | None
    keep_last: int | None
    tmp: str
    base: str
    want: Want = "frame"
    fr: str | None = None
    keep_coll: int | None = None
    empty_ok: bool = True
    summary: bool = True
    text: TextPatterns | None = None
    row_group_rows: int = 1_000_000


@dataclass(frozen=True)
class PartFile:
    """A batch's table part written as a Parquet file (:class:`BatchJob`'s ``want="parquet"``): its path and
    rows. The caller joins it into the output (:class:`correlator.parts.PartsWriter`) and removes it."""

    path: str
    rows: int


@dataclass(frozen=True)
class Hooks:
    """Progress callbacks of a caller in this process, passed on to :func:`correlator.ingest.ingest`
    (``progress``, ``on_sources``, ``on_phase``, ``on_progress``: see there). Not pickled: a batch in a
    worker process runs without them."""

    progress: Callable[[Source], None] | None = None
    on_sources: Callable[[list[Source]], None] | None = None
    on_phase: Callable[[str], None] | None = None
    on_progress: Callable[[str, int, int], None] | None = None


@dataclass
class BatchResult:
    """What one batch gives back: the table part (as ``want`` asked), the reduced rows, and its summary
    (counts and sets the caller sums over batches). ``event_id`` counts from 0 in each part, below
    ``id_span`` (the ids the batch's ingest gave, less those of the context rows other batches keep: the
    kept rows' ids move down past them, and the caller moves the next batch's ids past ``id_span``, so
    batches in path order number their rows as one ingest of the job does; with ``keep_coll``, but for the
    ids of COLL lines cut among the rows left to other batches). ``sources``:
    the files ingest found (for a ``whole`` job: the input's); ``coll_lines_dropped``: the NCCL COLL lines
    ``keep_coll`` cut."""

    table: pl.DataFrame | PartFile | None
    reduced: pl.DataFrame | None
    rows: int = 0
    lines_read: int = 0
    skipped: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    maxrss_kib: int = 0
    skipped_list: list[dict[str, object]] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    unparsed: int = 0
    ranks: list[int] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    coll_lines_dropped: int = 0
    id_span: int = 0


def _part_file(t: pl.DataFrame, job: BatchJob) -> PartFile:
    """Write the batch's rows ``t`` as a Parquet part under ``job.tmp`` (see :class:`BatchJob`): the encoding
    of its pages happens here, in the batch's worker, not in the process that joins the parts (a 32 MiB batch
    of the 256-rank COLL job, 160k rows: ~0.1 CPU-s)."""
    import pyarrow.parquet as pq

    fd, path = tempfile.mkstemp(prefix="part-", suffix=".parquet", dir=job.tmp)
    os.close(fd)
    pq.write_table(to_write_arrow(t), path, row_group_size=job.row_group_rows, **parquet_options())  # type: ignore[arg-type]
    return PartFile(path, t.height)


def with_offset(part: pl.DataFrame, offset: int) -> pl.DataFrame:
    """``part`` with its ``event_id`` values moved by ``offset`` (ids unique across the batches; a
    :class:`PartFile`'s move as :class:`correlator.parts.PartsWriter` joins it)."""
    return part.with_columns((pl.col("event_id") + offset).alias("event_id"))


def _shadow(batch: list[Source], tmp: Path) -> Path:
    """A directory of symlinks mirroring ``batch``'s relative paths (so ``path`` in the table is unchanged)."""
    shadow = Path(tempfile.mkdtemp(prefix="batch-", dir=tmp))
    for s in batch:
        dst = shadow / s.rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.abspath(s.path), dst)
    return shadow


def _rank_key_in(local_ranks: frozenset[int]) -> pl.Expr:
    """Rows whose ``local_rank`` is one of ``local_ranks`` (a null local rank is in none)."""
    if not local_ranks:
        return pl.lit(False)
    return pl.col("local_rank").cast(pl.Int64).is_in(sorted(local_ranks)).fill_null(False)


def _keeps(batch: Batch) -> pl.Expr:
    """The context rows ``batch`` keeps (see :class:`Batch`)."""
    keep = _rank_key_in(batch.owned)
    if batch.keeps_rest:
        keep = keep | ~_rank_key_in(batch.claimed)
    return keep


_SKIP_RE = re.compile(r"skipped, binary content \(\d+ bytes, (\d+) lines\)")


def _context_warnings(
    warnings: list[str], ctx: set[str], by_reason: dict[str, int]
) -> tuple[list[str], int, dict[str, int]]:
    """The warnings of a batch that does not keep its context files' rows: theirs left out, and the lines of
    a binary context file (counted by the batch that keeps it) as the count to take off."""
    mine: list[str] = []
    dropped = 0
    for w in warnings:
        rel = w.split(": ", 1)[0]
        if rel not in ctx:
            mine.append(w)
            continue
        m = _SKIP_RE.search(w)
        if m:
            n = int(m.group(1))
            dropped += n
            by_reason["binary content"] = by_reason.get("binary content", 0) - n
    return mine, dropped, {k: v for k, v in by_reason.items() if v}


def _summarize(out: BatchResult, t: pl.DataFrame) -> None:
    """The per-batch counts and sets of ``t`` that the caller sums over batches."""
    out.rows = t.height
    out.kinds = dict(t.group_by("kind").len().iter_rows())
    out.unparsed = int(t.filter(pl.col("kind") == Kind.UNPARSED)["line_count"].sum() or 0)
    out.ranks = [int(r) for r in t["rank"].drop_nulls().unique().to_list()]
    out.hosts = t["host"].drop_nulls().unique().to_list()
    out.attempts = [int(a) for a in t["attempt"].drop_nulls().unique().to_list()]


def ingest_batch(job: BatchJob, hooks: Hooks | None = None) -> BatchResult:
    """Ingest one batch (``correlator.ingest.ingest`` of a shadow directory of its files, or of the
    ``whole`` input), drop the context rows other batches keep, reduce it for diagnosis and summarize it.
    Raises what ``ingest`` raises, except (under ``empty_ok``) a batch of only empty or binary files, which
    gives an empty result with the warning."""
    from correlator.ingest import compact, ingest

    batch = job.batch
    h = hooks or Hooks()
    everything = batch.files + batch.context
    target = Path(job.whole) if job.whole else _shadow(everything, Path(job.tmp))
    try:
        # the shadow's links point at files discovery already vetted; file-name ranks were learned from all
        # files (a ``whole`` job without files: ingest's own discovery of the input decides both)
        with (
            following_symlinks() if everything else contextlib.nullcontext(),
            learned_from(everything) if everything else contextlib.nullcontext(),
        ):
            res = ingest(
                target,
                tz=job.tz,
                fr=job.fr,
                keep_coll=job.keep_coll,
                progress=h.progress,
                on_sources=h.on_sources,
                on_phase=h.on_phase,
                on_progress=h.on_progress,
            )
    except DiscoveryError as e:  # a batch of only empty/binary files
        if not job.empty_ok:
            raise
        return BatchResult(None, None, warnings=[str(e).replace(str(target), job.base)])
    finally:
        if not job.whole:
            shutil.rmtree(target, ignore_errors=True)
    t = res.table
    lines_read, skipped, warnings = res.lines_read, res.skipped_lines, list(res.warnings)
    by_reason = dict(getattr(res, "skipped_by_reason", None) or {})
    ctx = {s.rel for s in batch.context}
    span = int(t["event_id"].max()) + 1 if t.height else 0  # type: ignore[arg-type]
    if ctx:
        drop = pl.col("path").is_in(list(ctx)) & ~_keeps(batch)
        gone = t.filter(drop)
        lines_read -= int(gone["line_count"].sum() or 0)
        t = t.filter(~drop)
        if gone.height:
            # each kept row's id moves down by the rows left to other batches before it (ids rise in path order),
            # so batches taken in path order give the ids of one ingest of the job
            t = t.with_columns(
                pl.col("event_id") - gone["event_id"].search_sorted(t["event_id"]).cast(pl.Int64)
            )
            span -= gone.height
    if ctx and not batch.keeps_rest:  # the warnings and skipped lines of context files: the keeper's
        warnings, n, by_reason = _context_warnings(warnings, ctx, by_reason)
        lines_read -= n
        skipped -= n
    skipped_list = [
        e for e in getattr(res, "skipped", []) if batch.keeps_rest or not ctx or e.get("path") not in ctx
    ]
    out = BatchResult(
        None,
        None
        if job.keep_last is None
        else compact(reduce_for_diagnosis(t, job.keep_last, job.text, templates=True)),
        lines_read=lines_read,
        skipped=skipped,
        skipped_by_reason=by_reason,
        warnings=warnings,
        skipped_list=skipped_list,
        sources=res.sources,
        coll_lines_dropped=res.coll_lines_dropped,
        id_span=span,
    )
    if job.summary:
        _summarize(out, t)
    out.table = _part_file(t, job) if job.want == "parquet" else t if job.want == "frame" else None
    out.maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out


def ingest_whole(
    root: str | os.PathLike[str],
    *,
    tz: str | None = None,
    fr: str | os.PathLike[str] | None = None,
    keep_coll: int | None = None,
    hooks: Hooks | None = None,
) -> IngestResult:
    """The whole input under ``root`` (a folder or one file) as one batch of :func:`ingest_batch`, given back
    as ``correlator.ingest.ingest`` gives it (the same table, counts, warnings and skipped files): the
    in-memory read of :func:`correlator.api.load_path`. Raises :class:`~correlator.discover.DiscoveryError`
    when nothing readable is found."""
    from correlator.ingest import IngestResult

    out = ingest_batch(
        BatchJob(
            Batch([]),
            whole=str(root),
            tz=tz,
            keep_last=None,
            tmp="",
            base=str(root),
            want="frame",
            fr=None if fr is None else str(fr),
            keep_coll=keep_coll,
            empty_ok=False,
            summary=False,
        ),
        hooks,
    )
    assert isinstance(out.table, pl.DataFrame)  # want="frame"
    return IngestResult(
        out.table,
        out.sources,
        out.warnings,
        out.lines_read,
        out.skipped,
        out.skipped_by_reason,
        out.skipped_list,
        out.coll_lines_dropped,
    )


def batch_workers(workers: int | None, batch_bytes: int | None = None) -> int:
    """Batches ingested at once: ``workers``, else ``RANKSCOPE_BATCH_WORKERS``, else the cores this process
    may use, at most as many as the memory budget holds (``RANKSCOPE_MEMORY_MB``, else half the machine's
    memory, over :data:`_BATCH_MEMORY_FACTOR` x ``batch_bytes`` + a worker's imports each). Both settings
    are read by :func:`correlator.limits.env_int`: 0 or not a whole number counts as unset."""
    if workers is None:
        workers = env_int("RANKSCOPE_BATCH_WORKERS", 0) or cores()
        if batch_bytes:
            workers = within_memory(workers, batch_bytes)
    return max(1, workers)


def within_memory(workers: int, nbytes: int) -> int:
    """``workers``, at most as many as the memory budget (``RANKSCOPE_MEMORY_MB``, else half the machine's
    memory) holds when each ingests ``nbytes`` of logs at once (:data:`_BATCH_MEMORY_FACTOR` x ``nbytes`` + a
    worker's imports); at least 1."""
    per = _BATCH_MEMORY_FACTOR * nbytes + _WORKER_BASE_BYTES
    return max(1, min(workers, _memory_budget() // per))


def _memory_budget() -> int:
    mib = env_int("RANKSCOPE_MEMORY_MB", 0)
    if mib:
        return mib * 1024**2
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


def pool_kind(input_bytes: int, batches: int, workers: int) -> Literal["threads", "processes"]:
    """Where batches run: ``RANKSCOPE_BATCH_POOL`` (``threads`` or ``processes``) if set; else processes
    when there are at least :data:`PROCESS_MIN_WORKERS` workers, two batches per worker to share their
    start-up and at least :data:`PROCESS_MIN_BYTES` of input; else threads."""
    env = os.environ.get("RANKSCOPE_BATCH_POOL", "").strip().lower()
    if env in ("threads", "processes"):
        return env  # type: ignore[return-value]
    if workers >= PROCESS_MIN_WORKERS and batches >= 2 * workers and input_bytes >= PROCESS_MIN_BYTES:
        return "processes"
    return "threads"


__all__ = [
    "PROCESS_MIN_BYTES",
    "PROCESS_MIN_WORKERS",
    "Batch",
    "BatchJob",
    "BatchResult",
    "Hooks",
    "PartFile",
    "Pool",
    "batch_workers",
    "cores",
    "in_order",
    "ingest_batch",
    "ingest_whole",
    "pool_kind",
    "with_offset",
    "within_memory",
]
