"""Streaming ingest: logs larger than memory -> a parquet event table + the reduced table diagnosis needs.

:func:`stream_ingest` processes the sources in batches, each through the normal ingest pipeline
(``correlator.ingest.ingest``: read -> parse -> time -> identity -> tee de-duplication), writes every
batch's rows to one parquet file as row groups (``correlator.schema.EVENT_SCHEMA``; each batch encodes its
part where it runs, and the parts are joined in batch order without encoding them again:
:mod:`correlator.parts`), and keeps in memory
only what :func:`correlator.diagnose` reads:

- every row except the high-volume routine families below (faults, launcher/agent output, NCCL
  init/abort, rendezvous, launcher and c10d log lines …);
- NCCL COLL and DETAIL fingerprint rows: the last ``keep_last`` per (rank, process group) — the highest
  sequence numbers a rank entered, which is what alignment, clock offsets and the straggler rules use;
- progress rows (``step_progress``): the last ``keep_last`` per rank;
- NCCL INFO chatter (kind ``log``, layer ``nccl``): the rows that state a rank or world size (topology
  lines) and the last ``keep_last`` per rank;
- a training script's own lines (log lines, progress bars, unparsed lines): the first 16 and last 64 per rank
  and kind;
- of the progress, chatter and script lines, every one a signature's regex could match
  (:func:`correlator.reduce.signature_text`).

Batches (:func:`plan`): about ``batch_bytes`` of input each, whatever the folder layout. The unit is the
first directory level under ``root`` (a node's torchrun tree with its launcher log beside it), so rank
identity (NCCL init lines, launcher pids, tee offsets) resolves within a batch; small units are packed
together. A unit larger than ``batch_bytes`` (a big node, or a plain torchrun ``--log-dir`` given as
``root``, whose ``attempt_0/<rank>/`` folders are all one unit) is split into chunks of per-rank folders;
the node's other files (launcher log, error.json, stderr files) are read with every chunk as context for
identity and tee de-duplication; a row of theirs about local rank L (a ``--tee`` copy) is kept by the chunk
holding L's folders, every other row by the first chunk (:class:`Batch`). Each batch is ingested from a
shadow directory of symlinks that mirrors the relative paths, so ``path`` in the table is the same as in a
normal run, and ``event_id`` is made unique across batches.

Each batch is one call of the pure function :func:`correlator.batch.ingest_batch` (files -> table part,
reduced rows, summary). Batches run in worker processes started with ``spawn`` for large inputs (one per
core within a memory budget; polars' thread pool does not survive ``fork``), on threads of this process
for small ones, and are taken in order, so the output depends on neither. Peak memory is a few batches'
ingest (~0.4-0.7 GiB each for the default 32 MiB batches) per worker plus the reduced table (at most about
a hundred rows per rank and kind, and the lines signatures name), independent of the total input size; at
most ``workers`` batches are in flight.
"""

from __future__ import annotations

import contextvars
import os
import shutil
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from correlator.batch import (
    Batch,
    BatchJob,
    BatchResult,
    PartFile,
    Want,
    batch_workers,
    in_order,
    ingest_batch,
    pool_kind,
    source_bytes,
    with_offset,
)
from correlator.discover import (
    DiscoveryError,
    Source,
    discover,
    input_size,
    skipped_entries,
)
from correlator.engines import check_engine
from correlator.reduce import (
    KEEP_LAST,
    holds_mismatch,
    kept,
    nccl_topology,
    reduce_for_diagnosis,
    select,
    signature_text,
    template_firsts,
)
from correlator.schema import (
    POLARS_SCHEMA,
    Kind,
    conform,
    empty_table,
    kinds_by_count,
    parquet_options,
)

if TYPE_CHECKING:
    from correlator.parts import PartsWriter
    from correlator.signatures import TextPatterns

#: Input size above which ``rankscope diagnose DIR`` streams by default (``--streaming`` forces it); below
#: it, ``diagnose`` cuts NCCL COLL lines while reading (``ingest(keep_coll=...)``), which is faster and also
#: bounded (~1x the input).
STREAMING_THRESHOLD_BYTES = 2 * 1024**3
#: Input size above which ``rankscope timeline -o X.parquet`` streams by default: more than two batches.
#: Streaming writes the same rows in bounded memory and, with batches on all cores, in less time than
#: building the whole table (256-rank bench, 1 GB: 15.2 s at 0.7 GB against 32 s at 6.5 GB; RESULTS.md).
TABLE_STREAMING_THRESHOLD_BYTES = 64 * 1024**2
#: Default input bytes per batch: about one node of 8 ranks x 20,000 lines (~0.3 GiB of memory while it is
#: ingested, 2026-12-03).
DEFAULT_BATCH_BYTES = 32 * 1024**2
#: Context files (:func:`_split_unit`: a split unit's stderr and other small files, read with every batch of
#: the unit) above which only the launcher output and error.json stay context and the rest go with their
#: folders, as they do above half a batch of bytes: a node's few ranks are context, a folder of thousands of
#: ranks is not (1,024 ranks' 3-line stderr files made each of 31 batches shadow, read and parse 1,024 files).
CONTEXT_MAX_FILES = 64

#: Kinds that are routine at volume and reduced (``Kind.ROUTINE``; see :mod:`correlator.reduce`).
ROUTINE_KINDS = Kind.ROUTINE


def input_bytes(root: str | os.PathLike[str]) -> int:
    """Total size of the files under ``root`` (to decide whether to stream)."""
    return input_size(root)  # each real file once, no symlink out of root (a link to "." must not fan out)


def should_stream(root: str | os.PathLike[str], threshold: int = STREAMING_THRESHOLD_BYTES) -> bool:
    """True when the input under ``root`` is larger than ``threshold`` bytes."""
    return input_bytes(root) > threshold


#: ``rankscope diagnose DIR`` also streams by default when more than this many bytes of its input are lines
#: other than NCCL COLL lines (:func:`diagnosis_streams`). Not streamed, diagnosis cuts the COLL lines while
#: reading and builds a row of every other line (the 425 MB application job of the 256-rank bench: 4.4 GB of
#: memory, 10x its input; streamed, 0.65 GB, and sooner); streamed, each ~32 MiB batch is reduced where it runs.
DIAGNOSE_OTHER_BYTES = 64 * 1024**2
#: What the COLL-share sample reads: the head of each of the largest plain files, up to this many files.
_SAMPLE_HEAD_BYTES = 256 * 1024
_SAMPLE_FILES = 16
_COMPRESSED = (".gz", ".zst", ".zstd", ".bz2", ".xz", ".lz4")


def coll_share(sources: list[Source]) -> float:
    """The fraction of the bytes that are NCCL COLL lines (those :func:`parsers.coll.fast_mask` finds, the
    lines ``ingest(keep_coll=...)`` cuts), estimated from the whole lines of the first
    :data:`_SAMPLE_HEAD_BYTES` of the :data:`_SAMPLE_FILES` largest uncompressed files. 0.0 when nothing could
    be sampled. Reads at most ~4 MiB."""
    from parsers.coll import fast_mask

    plain = [s for s in sources if s.layout != "fr_dump" and not s.rel.lower().endswith(_COMPRESSED)]
    sample = sorted(plain, key=lambda s: (-source_bytes(s), s.rel))[:_SAMPLE_FILES]
    heads = []
    for s in sample:
        try:
            with open(s.path, "rb") as f:
                head = f.read(_SAMPLE_HEAD_BYTES)
        except OSError:
            continue
        heads.append(head[: head.rfind(b"\n") + 1])  # whole lines: not what the sample's end (or EOF) cut
    text = b"".join(heads).decode("utf-8", errors="replace")
    if not text:
        return 0.0
    lines = pl.Series([text]).str.split("\n").explode().head(-1)  # (after the last newline: nothing)
    size = lines.str.len_bytes() + 1
    return int(size.filter(fast_mask(lines.str.strip_suffix("\r"))).sum()) / int(size.sum())


def diagnosis_streams(root: str | os.PathLike[str]) -> bool:
    """Whether ``rankscope diagnose`` streams the folder ``root`` by default: above
    :data:`STREAMING_THRESHOLD_BYTES` of input, or when its bytes other than NCCL COLL lines (its size times
    one minus :func:`coll_share`) are more than :data:`DIAGNOSE_OTHER_BYTES` in more than one batch
    (:func:`plan`). A COLL-heavy job is read whole below 2 GiB: with its COLL lines cut while reading, that
    holds ~1x its input and is faster than batches (256 ranks, 1.0 GB, 95 % COLL bytes: 8.0 s at 0.9 GB
    against 10.3 s at 0.27 GB streamed, 2 cores)."""
    size = input_bytes(root)
    if size > STREAMING_THRESHOLD_BYTES:
        return True
    if size <= DIAGNOSE_OTHER_BYTES:
        return False
    try:
        sources, _w = discover(Path(root))
    except DiscoveryError:
        return False  # the whole path says what is wrong
    # more than one batch: a job of one large file (a node's tee'd console) is one batch either way
    return (
        size * (1.0 - coll_share(sources)) > DIAGNOSE_OTHER_BYTES
        and len(plan(sources, DEFAULT_BATCH_BYTES)) > 1
    )


def _units(sources: list[Source]) -> dict[str, list[Source]]:
    """Files by first directory level (a node's tree with its launcher log); top-level files join the only
    directory unit that holds text logs (not only Flight Recorder dumps) when there is one, else form their
    own unit."""
    units: dict[str, list[Source]] = {}
    top_files: list[Source] = []
    for s in sources:
        parts = Path(s.rel).parts
        if len(parts) > 1:
            units.setdefault(parts[0], []).append(s)
        else:
            top_files.append(s)
    if top_files:
        # A launcher log beside one run's folders goes with them (tee copies, pairing), also when a folder of
        # Flight Recorder dumps is beside them (dumps are no text log to pair with).
        text_units = [u for u in units.values() if any(s.layout != "fr_dump" for s in u)]
        if len(text_units) == 1:
            text_units[0].extend(top_files)
        else:
            units["."] = top_files
    return units


def _folder(s: Source) -> str:
    """The group a per-rank file is chunked with where a split unit has context files: every torchrun folder
    of one local rank (all attempts, all runs of the node: the context rows of that local rank are kept by
    one chunk), else its folder. Without context files, each folder is a group (:func:`_split_unit`)."""
    if s.layout == "torchrun_rank" and s.local_rank is not None:
        return f"\0local_rank={s.local_rank:09d}"
    return str(Path(s.rel).parent)


def _in_path_order(groups: dict[str, list[Source]]) -> list[list[Source]]:
    """``groups`` ordered by their first file's path (``Source.rel``), the order of a whole ingest's rows: batches
    taken in this order give the rows, and so the event ids, of one ingest of the job where the groups' paths
    do not interleave (each group a folder: ``attempt_0/10/`` after ``attempt_0/1/``, not after ``attempt_0/9/``
    as the groups' keys sort, nor ``node-1/`` after ``node-1-b/``)."""
    return sorted(groups.values(), key=lambda g: min(s.rel for s in g))


def _split_unit(unit: list[Source], batch_bytes: int) -> list[Batch]:
    """A unit larger than ``batch_bytes`` (a node, or a whole torchrun ``--log-dir``): its big per-rank files
    in chunks of about ``batch_bytes``, grouped by folder (a rank's stdout and stderr stay together); the
    other files ride along as context, their rows kept as :class:`Batch` says (by rank folder, else by the
    first chunk). Context of more than half a batch of bytes or more than :data:`CONTEXT_MAX_FILES` files
    keeps only what pairs a node (launcher output, error.json); the rest goes with its folders."""
    big_layouts = ("torchrun_rank", "rank_file", "task_file", "nccl_file")
    # split by a test on each file, not by list membership (quadratic in the files: 24 s for 8,192)
    bulk = [s for s in unit if s.layout in big_layouts and s.stream != "stderr"]
    ctx = [s for s in unit if not (s.layout in big_layouts and s.stream != "stderr")]
    if (
        sum(source_bytes(s) for s in ctx) > batch_bytes // 2 or len(ctx) > CONTEXT_MAX_FILES
    ):  # then only what pairs a node: launcher output, error.json
        pairs = [s.layout == "error_json" or s.stream == "launcher" for s in ctx]
        bulk += [s for s, p in zip(ctx, pairs, strict=True) if not p]
        ctx = [s for s, p in zip(ctx, pairs, strict=True) if p]
    folders: dict[str, list[Source]] = {}
    for s in bulk:  # with no context rows to share out, each folder is a group of its own (path order)
        folders.setdefault(_folder(s) if ctx else str(Path(s.rel).parent), []).append(s)
    room = max(1, batch_bytes - sum(source_bytes(s) for s in ctx))
    chunks: list[list[Source]] = []
    cur: list[Source] = []
    cur_bytes = 0
    for grp in _in_path_order(folders):
        gb = sum(source_bytes(s) for s in grp)
        if cur and cur_bytes + gb > room:
            chunks.append(cur)
            cur, cur_bytes = [], 0
        cur.extend(grp)
        cur_bytes += gb
    if cur:
        chunks.append(cur)
    if not chunks:
        return [Batch(list(unit))]
    if not ctx:
        return [Batch(c) for c in chunks]
    mine = [
        frozenset(s.local_rank for s in c if s.layout == "torchrun_rank" and s.local_rank is not None)
        for c in chunks
    ]
    claimed: frozenset[int] = frozenset().union(*mine)
    return [Batch(c, list(ctx), mine[i], claimed, keeps_rest=i == 0) for i, c in enumerate(chunks)]


def plan(sources: list[Source], batch_bytes: int = DEFAULT_BATCH_BYTES) -> list[Batch]:
    """Batches of about ``batch_bytes`` of input whatever the folder layout: whole units (first directory
    level, see :func:`_units`) packed together while they fit; a unit larger than ``batch_bytes`` split into
    chunks of its per-rank files (:func:`_split_unit`)."""
    batches: list[Batch] = []
    cur: list[Source] = []
    cur_bytes = 0
    for unit in _in_path_order(_units(sources)):
        ub = sum(source_bytes(s) for s in unit)
        if ub > batch_bytes and len(unit) > 1:
            if cur:
                batches.append(Batch(cur))
                cur, cur_bytes = [], 0
            batches.extend(_split_unit(unit, batch_bytes))
            continue
        if cur and cur_bytes + ub > batch_bytes:
            batches.append(Batch(cur))
            cur, cur_bytes = [], 0
        cur.extend(unit)
        cur_bytes += ub
    if cur:
        batches.append(Batch(cur))
    return batches


def context_bounded(root: str | os.PathLike[str], batch_bytes: int | None = None) -> bool:
    """Whether :func:`plan` over ``root`` gives more than one batch and none reads more than ``batch_bytes``
    (default :data:`DEFAULT_BATCH_BYTES`) of context files. ``rankscope timeline`` streams by default only when
    this holds.

    A node split into chunks reads its launcher log with every chunk: with ``--tee`` that log holds a copy of
    every rank's lines, and streaming would read it once per chunk (more time, and more memory per batch than
    the node's own files). A job of one batch (one large file: a node's tee'd console, a Slurm job's output)
    streams nothing: its one batch is the whole table, written by pyarrow after the batch's second pass (75 MB
    console, 800k lines: 3.37 s at 874 MiB streamed, 2.93 s at 835 MiB not)."""
    bb = DEFAULT_BATCH_BYTES if batch_bytes is None else batch_bytes
    try:
        sources, _w = discover(Path(root))
    except DiscoveryError:
        return True
    batches = plan(sources, bb)
    return len(batches) > 1 and all(sum(source_bytes(s) for s in b.context) <= bb for b in batches)


def plan_batches(sources: list[Source], batch_bytes: int = DEFAULT_BATCH_BYTES) -> list[list[Source]]:
    """The files each batch of :func:`plan` gives all rows of (context files left out: a split node's chunks
    share their rows out, see :class:`Batch`)."""
    return [b.files for b in plan(sources, batch_bytes)]


class _Totals:
    """The job's summary, summed over the batches' summaries in batch order (the second pass over the
    batches: event ids made unique across them, the job's ranks, hosts and attempts)."""

    def __init__(self, warnings: list[str], skipped_list: list[dict[str, object]]) -> None:
        self.disc_warnings = set(warnings)
        self.warnings = list(warnings)
        self.skipped_list = skipped_list
        self.kinds: dict[str, int] = {}
        self.skipped_by_reason: dict[str, int] = {}
        self.ranks: set[int] = set()
        self.hosts: set[str] = set()
        self.attempts: set[int] = set()
        self.lines_read = self.skipped = self.rows = self.unparsed = self.peak_rss = 0
        self.next_id = 0  # the first event id of the next batch: past every id an earlier batch gave
        self.reduced: list[pl.DataFrame] = []

    def add(self, out: BatchResult) -> int:
        """Count ``out`` in; its reduced rows (event ids moved past the earlier batches') kept. Returns the
        offset of its event ids."""
        self.warnings.extend(w for w in out.warnings if w not in self.disc_warnings)
        self.peak_rss = max(self.peak_rss, out.maxrss_kib)
        offset = self.next_id
        if out.reduced is not None:  # None: a batch without a readable line, or no reduced rows asked for
            self.reduced.append(out.reduced.with_columns((pl.col("event_id") + offset).alias("event_id")))
        self.next_id += out.id_span
        self.rows += out.rows
        self.lines_read += out.lines_read
        self.skipped += out.skipped
        self.skipped_list.extend(out.skipped_list)
        self.unparsed += out.unparsed
        for k, v in out.skipped_by_reason.items():
            self.skipped_by_reason[k] = self.skipped_by_reason.get(k, 0) + v
        for k, v in out.kinds.items():
            self.kinds[k] = self.kinds.get(k, 0) + v
        self.ranks.update(out.ranks)
        self.hosts.update(out.hosts)
        self.attempts.update(out.attempts)
        return offset

    def summary(self, sources: list[Source], batches: int, table: pl.DataFrame) -> dict[str, object]:
        return {
            "files": len(sources),
            "lines_read": self.lines_read,
            "lines_skipped": self.skipped,
            "skipped_by_reason": self.skipped_by_reason,
            "skipped": self.skipped_list,
            "rows": self.rows,
            "ranks": sorted(self.ranks),
            "hosts": sorted(self.hosts),
            "attempts": sorted(self.attempts),
            "rows_by_kind": kinds_by_count(self.kinds),
            "lines_not_understood": self.unparsed,
            "warnings": len(self.warnings),
            "warning_lines": self.warnings[:50],
            "batches": batches,
            "peak_rss_mib": round(self.peak_rss / 1024, 1),
            "input_bytes": sum(source_bytes(s) for s in sources),
            "reduced_rows": table.height,
        }


class _Sink:
    """Where the batches' table parts go, in batch order: one parquet file (each batch writes its part where it
    runs, joined here without encoding it again: :class:`correlator.parts.PartsWriter`), a hive-partitioned
    dataset (one part file per batch and partition), or nowhere."""

    def __init__(
        self, out: str | os.PathLike[str] | None, partition_by: str | None, row_group_rows: int
    ) -> None:
        self.out, self.partition_by, self.row_group_rows = out, partition_by, row_group_rows
        self.writer: PartsWriter | None = None
        if partition_by is not None:
            from correlator.export import PARTITION_KEYS

            if partition_by not in PARTITION_KEYS:
                raise ValueError(f"partition by {partition_by!r}: use one of {', '.join(PARTITION_KEYS)}")
        elif out is not None:
            from correlator.parts import PartsWriter
            from correlator.schema import WRITE_SCHEMA

            self.writer = PartsWriter(out, WRITE_SCHEMA, parquet_options())

    @property
    def want(self) -> Want:
        return (
            "frame"
            if self.partition_by is not None and self.out is not None
            else "parquet"
            if self.writer
            else "none"
        )

    def write(self, i: int, part: pl.DataFrame | PartFile, offset: int) -> None:
        """Batch ``i``'s part, its ``event_id`` values moved by ``offset``; a part file is removed once joined."""
        if isinstance(part, PartFile):
            try:
                if self.writer is not None:
                    self.writer.add(part.path, offset)
            finally:
                Path(part.path).unlink(missing_ok=True)
        elif self.partition_by is not None and self.out is not None:
            from correlator.export import write_partitioned

            write_partitioned(
                with_offset(part, offset),
                self.out,
                by=self.partition_by,
                part_name=f"part-{i:05d}.parquet",
                row_group_rows=self.row_group_rows,
            )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def stream_ingest(
    root: str | os.PathLike[str],
    out_parquet: str | os.PathLike[str] | None,
    batch_bytes: int | None = None,
    *,
    tz: str | None = None,
    keep_last: int | None = 4,
    row_group_rows: int = 1_000_000,
    partition_by: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    engine: str = "local",
    text: TextPatterns | None = None,
) -> tuple[pl.DataFrame, dict[str, object]]:
    """Ingest ``root`` batch by batch; write the full event table to ``out_parquet`` (None: don't).

    With ``partition_by`` (``"host"`` or ``"rank"``), ``out_parquet`` is a directory and each batch is
    written as a hive-partitioned dataset (``<by>=<value>/part-<batch>.parquet``, see
    :func:`correlator.export.write_partitioned`) instead of one file.

    Returns ``(reduced_table, summary)``: the rows diagnosis needs (event-table schema; pass it to
    :func:`correlator.diagnose`) and the same counts as ``IngestResult.summary()`` (over the whole input)
    plus ``batches``, ``input_bytes``, ``reduced_rows`` and ``peak_rss_mib`` (the largest of the processes
    that ingested a batch). ``keep_last``: see :func:`correlator.reduce.reduce_for_diagnosis`; None keeps no
    reduced rows (the table returned is empty), for a caller that only writes the table: the reduced rows
    are held until the end. ``text``: the signature patterns whose lines the reduced rows keep whole
    (None: the built-in library's; see :func:`correlator.reduce.signature_text`).

    Each batch is :func:`correlator.batch.ingest_batch`; ``workers`` batches run at once (default
    ``RANKSCOPE_BATCH_WORKERS``, else the cores within the memory budget, see
    :func:`correlator.batch.batch_workers`), in worker processes for large inputs and on threads for small
    ones (:func:`correlator.batch.pool_kind`); the table written, the reduced table and the summary do not
    depend on either. ``batch_bytes``: input per batch (default :data:`DEFAULT_BATCH_BYTES`).
    ``progress(done, total)`` is called per batch, in order. ``engine="ray"``: the batches as Ray tasks
    that write their parts into the dataset ``out_parquet`` (a folder: ``part-NNNNN.parquet``, or
    partitioned), see :mod:`correlator.rayengine`; the rows written and the result are the same. Raises
    :class:`DiscoveryError` when ``root`` is missing, empty, or no batch had a readable line.
    """
    check_engine(engine, ValueError)  # a programming error here: the CLI and the Job API check first
    # a Ray task runs in another working directory: it is given absolute paths
    rootp = Path(root).absolute() if engine == "ray" else Path(root)
    batch_bytes = DEFAULT_BATCH_BYTES if batch_bytes is None else batch_bytes
    sources, disc_warnings = discover(rootp)
    single = str(rootp) if rootp.is_file() else None
    batches = [Batch(sources)] if single else plan(sources, batch_bytes)
    totals = _Totals(list(disc_warnings), skipped_entries(disc_warnings))
    if engine == "ray":
        from correlator.rayengine import run_batches

        base = str(rootp.parent if single else rootp)
        # parts as polars frames: Ray's own Arrow serializer does not take the string_view columns
        jobs = [BatchJob(b, single, tz, keep_last, "", base, "frame", text=text) for b in batches]
        run_batches(jobs, totals, out_parquet, partition_by, row_group_rows, progress)
        return _result(totals, root, sources, len(batches))
    results: Generator[BatchResult, None, None] | None = None
    tmp = tempfile.mkdtemp(prefix="rankscope-stream-")
    base = str(rootp.parent if single else rootp)
    sink: _Sink | None = None
    try:
        sink = _Sink(out_parquet, partition_by, row_group_rows)
        # no table written: a batch builds only the rows its reduction keeps (NCCL COLL lines cut while read)
        cut = keep_last if sink.want == "none" else None
        jobs = [
            BatchJob(
                b,
                single,
                tz,
                keep_last,
                tmp,
                base,
                sink.want,
                keep_coll=cut,
                text=text,
                row_group_rows=row_group_rows,
            )
            for b in batches
        ]
        n = batch_workers(workers, batch_bytes)
        kind = pool_kind(sum(b.nbytes for b in batches), len(batches), n)
        results = in_order(_in_context(kind), jobs, n, kind)
        for i, out in enumerate(results):  # closed in ``finally`` below, before the batches' files go
            offset = totals.add(out)
            part, out.table = out.table, None
            if part is not None:
                sink.write(i, part, offset)
            del part, out
            if progress:
                progress(i + 1, len(batches))
    finally:
        if results is not None:
            results.close()  # an early stop: waits for the batches still running (see in_order)
        if sink is not None:
            sink.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return _result(totals, root, sources, len(batches))


def _result(
    totals: _Totals, root: str | os.PathLike[str], sources: list[Source], batches: int
) -> tuple[pl.DataFrame, dict[str, object]]:
    """The reduced table and the summary of the batches taken (:func:`stream_ingest`'s result)."""
    if totals.rows == 0:
        raise DiscoveryError(f"{root}: no log lines to read in {len(sources)} file(s)")
    table = pl.concat(totals.reduced, how="vertical") if totals.reduced else empty_table()
    return table, totals.summary(sources, batches, table)


def _in_context(kind: str) -> Callable[[BatchJob], BatchResult]:
    """:func:`ingest_batch` as threads run it (each in a copy of the caller's context: context variables such
    as ``discover.following_symlinks`` hold on the worker threads too), or itself for worker processes."""
    if kind == "processes":
        return ingest_batch
    ctx = contextvars.copy_context()
    return lambda job: ctx.copy().run(ingest_batch, job)


#: Rows of key columns read at once by :func:`reduced_from_parquet`.
_CHUNK_ROWS = 1_000_000
#: Columns that decide which rows the reduced table keeps (see :func:`correlator.reduce.kept`; ``duplicate``
#: where the file has one); ``message`` is read only for the NCCL INFO chatter rows it decides about.
_KEY_COLUMNS = ["event_id", "path", "kind", "layer", "rank", "pg", "seq", "world_size", "duplicate"]


def reduced_from_parquet(
    path: str | os.PathLike[str], keep_last: int = 4, text: TextPatterns | None = None
) -> pl.DataFrame:
    """The reduced table from an event-table parquet file or hive-partitioned dataset, e.g. a ``rankscope
    timeline -o`` file or the merged per-node outputs of ``correlator.export``.

    Narrow scans, never the whole table: the key columns (:data:`_KEY_COLUMNS`, plus ``message`` of the
    NCCL INFO chatter rows and the text of the application lines, by predicate push-down) choose the rows;
    then only those rows are read whole (the predicate is evaluated first, the text columns decoded for the
    kept rows only). ``text``: see :func:`correlator.reduce.reduce_for_diagnosis`.
    """
    p = Path(path)
    # The files hold every column, the partition key too: read them as plain files, not through hive paths
    # (whose ``__null__`` placeholder would replace a null host or rank).
    src = str(p / "**" / "*.parquet") if p.is_dir() else str(p)

    def scan(row: bool = False) -> pl.LazyFrame:
        lf = pl.scan_parquet(src, hive_partitioning=False)
        return lf.with_row_index("__row") if row else lf

    chatter = (pl.col("kind") == Kind.LOG) & (pl.col("layer") == "nccl") & pl.col("world_size").is_null()
    # Select by event_id (row-group statistics and a pushed-down predicate) when it is unique, which it is in
    # the output of one ingest run (there strictly increasing: a cheap test); by row number otherwise (merged
    # outputs of separate runs).
    ids = scan().select("event_id").collect()["event_id"]
    n = ids.len()
    unique = ids.len() < 2 or bool((ids.diff().drop_nulls() > 0).all()) or ids.n_unique() == ids.len()
    del ids
    by = "event_id" if unique else "__row"
    row = by == "__row"
    # NCCL INFO chatter: its few rows' messages decide (read by predicate push-down), as ids.
    msgs = scan(row).filter(chatter).select(by, "message").collect()
    chatty = msgs.filter(~nccl_topology(pl.col("message")))[by]
    del msgs
    # The key columns in chunks of row groups (bounded memory), each chunk's kept rows, then the kept rows of
    # their union (see correlator.reduce.select).
    chatter_ids = chatter & pl.col(by).is_in(chatty.implode())
    keys = [c for c in _KEY_COLUMNS if c in scan().collect_schema().names()]
    # Application lines a signature's regex could match: kept whole (streamed: bounded memory).
    said = signature_text(scan(row), by, text)
    # the first line of each template per rank where there is a mismatch: see correlator.reduce.template_firsts
    if holds_mismatch(scan()):
        said = pl.concat([said, template_firsts(scan(row), by)])
    evidence = pl.col(by).is_in(said.implode())
    cand = [
        kept(
            scan(row).slice(off, _CHUNK_ROWS).select(*dict.fromkeys([by, *keys])),
            "event_id",
            keep_last,
            ident=by,
            chatter=chatter_ids,
            frame=True,
            evidence=evidence,
        ).collect()
        for off in range(0, max(n, 1), _CHUNK_ROWS)
    ]
    rows = select(pl.concat(cand, how="vertical").lazy(), "event_id", keep_last).collect()[by].sort()
    del cand
    cols = list(POLARS_SCHEMA)
    rows_kept = (
        scan(by == "__row").filter(pl.col(by).is_in(rows.implode())).select(cols).collect(engine="streaming")
    )
    out = conform(rows_kept).sort("path", "line", "event_id")
    if out["event_id"].n_unique() != out.height:  # files of separate ingest runs (one per node)
        out = out.with_columns(pl.int_range(0, out.height, dtype=pl.Int64).alias("event_id"))
    return out


__all__ = [
    "CONTEXT_MAX_FILES",
    "DEFAULT_BATCH_BYTES",
    "DIAGNOSE_OTHER_BYTES",
    "KEEP_LAST",
    "ROUTINE_KINDS",
    "STREAMING_THRESHOLD_BYTES",
    "TABLE_STREAMING_THRESHOLD_BYTES",
    "Batch",
    "coll_share",
    "context_bounded",
    "diagnosis_streams",
    "input_bytes",
    "plan",
    "plan_batches",
    "reduce_for_diagnosis",
    "reduced_from_parquet",
    "should_stream",
    "stream_ingest",
]
