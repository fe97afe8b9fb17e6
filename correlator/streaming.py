"""Streaming ingest: logs larger than memory -> a parquet event table + the reduced table diagnosis needs.

:func:`stream_ingest` processes the sources in batches, each through the normal ingest pipeline
(``correlator.ingest.ingest``: read -> parse -> time -> identity -> tee de-duplication), writes every
batch's rows to one parquet file as row groups (``correlator.schema.EVENT_SCHEMA``), and keeps in memory
only what :func:`correlator.diagnose` reads:

- every row except the three high-volume routine families below (faults, launcher/agent output, NCCL
  init/abort, rendezvous, the application's own non-progress lines, unparsed lines …);
- NCCL COLL and DETAIL fingerprint rows: the last ``keep_last`` per (rank, process group) — the highest
  sequence numbers a rank entered, which is what alignment, clock offsets and the straggler rules use;
- progress rows (``step_progress``): the last ``keep_last`` per rank;
- NCCL INFO chatter (kind ``log``, layer ``nccl``): the rows that state a rank or world size (topology
  lines) and the last ``keep_last`` per rank.

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

Batches run on a few threads of this process (one per core, at most 4; polars releases the GIL in its
kernels, so one batch's Python steps overlap another's polars steps) and are taken in order, so the output
does not depend on the number of threads. Peak memory is a few batches' ingest (~0.4 GiB each for the
default 32 MiB batches) plus the reduced table (tens of rows per rank), independent of the total input
size.
"""

from __future__ import annotations

import contextvars
import os
import re
import resource
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from correlator.discover import (
    DiscoveryError,
    Source,
    discover,
    following_symlinks,
    input_size,
    learned_from,
    skipped_entries,
)
from correlator.ingest import compact, ingest
from correlator.schema import (
    EVENT_SCHEMA,
    WRITE_SCHEMA,
    Kind,
    conform,
    empty_table,
    parquet_options,
    to_write_arrow,
)

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

#: How many of the last rows per group the reduced table keeps (``keep_last``; ``ingest(keep_coll=...)``).
KEEP_LAST = 4
#: Kinds that are routine at volume and reduced (see the module docstring); other rows are kept whole.
ROUTINE_KINDS = frozenset({"nccl_coll", "collective_fingerprint", "step_progress", "log"})
_SEQ_KINDS = ["nccl_coll", "collective_fingerprint"]
#: NCCL INFO chatter that is kept whole: it maps addresses to hosts (peer errors name an address).
_NCCL_KEEP = ("Bootstrap", "NET/IB : Using", "NET/Socket : Using", "Using network")


def input_bytes(root: str | os.PathLike[str]) -> int:
    """Total size of the files under ``root`` (to decide whether to stream)."""
    return input_size(root)  # each real file once, no symlink out of root (a link to "." must not fan out)


def should_stream(root: str | os.PathLike[str], threshold: int = STREAMING_THRESHOLD_BYTES) -> bool:
    """True when the input under ``root`` is larger than ``threshold`` bytes."""
    return input_bytes(root) > threshold


def _size(src: Source) -> int:
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
        return sum(_size(s) for s in self.files)


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
    """The group a per-rank file is chunked with: every torchrun folder of one local rank (all attempts, all
    runs of the node: the context rows of that local rank are kept by one chunk), else its folder."""
    if s.layout == "torchrun_rank" and s.local_rank is not None:
        return f"\0local_rank={s.local_rank:09d}"
    return str(Path(s.rel).parent)


def _split_unit(unit: list[Source], batch_bytes: int) -> list[Batch]:
    """A unit larger than ``batch_bytes`` (a node, or a whole torchrun ``--log-dir``): its big per-rank files
    in chunks of about ``batch_bytes``, grouped by folder (a rank's stdout and stderr stay together); the
    other files ride along as context, their rows kept as :class:`Batch` says (by rank folder, else by the
    first chunk)."""
    big_layouts = ("torchrun_rank", "rank_file", "task_file", "nccl_file")
    bulk = [s for s in unit if s.layout in big_layouts and s.stream != "stderr"]
    ctx = [s for s in unit if s not in bulk]
    if (
        sum(_size(s) for s in ctx) > batch_bytes // 2
    ):  # then only what pairs a node: launcher output, error.json
        keep = [s for s in ctx if s.layout == "error_json" or s.stream == "launcher"]
        bulk += [s for s in ctx if s not in keep]
        ctx = keep
    folders: dict[str, list[Source]] = {}
    for s in bulk:
        folders.setdefault(_folder(s), []).append(s)
    room = max(1, batch_bytes - sum(_size(s) for s in ctx))
    chunks: list[list[Source]] = []
    cur: list[Source] = []
    cur_bytes = 0
    for key in sorted(folders):
        grp = folders[key]
        gb = sum(_size(s) for s in grp)
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
    units = _units(sources)
    for key in sorted(units):
        unit = units[key]
        ub = sum(_size(s) for s in unit)
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
    """Whether no batch of :func:`plan` over ``root`` reads more than ``batch_bytes`` (default
    :data:`DEFAULT_BATCH_BYTES`) of context files. A node split into chunks reads its launcher log with every
    chunk: with ``--tee`` that log holds a copy of every rank's lines, and streaming would read it once per
    chunk (more time, and more memory per batch than the node's own files). ``rankscope timeline`` streams by
    default only when this holds."""
    bb = DEFAULT_BATCH_BYTES if batch_bytes is None else batch_bytes
    try:
        sources, _w = discover(Path(root))
    except DiscoveryError:
        return True
    return all(sum(_size(s) for s in b.context) <= bb for b in plan(sources, bb))


def plan_batches(sources: list[Source], batch_bytes: int = DEFAULT_BATCH_BYTES) -> list[list[Source]]:
    """The files each batch of :func:`plan` gives all rows of (context files left out: a split node's chunks
    share their rows out, see :class:`Batch`)."""
    return [b.files for b in plan(sources, batch_bytes)]


def _kept(
    t: pl.LazyFrame | pl.DataFrame,
    order: str,
    keep_last: int,
    ident: str | None = None,
    chatter: pl.Expr | None = None,
    frame: bool = False,
) -> pl.LazyFrame:
    """The ``ident`` (default ``order``) values of the rows of ``t`` the reduced table keeps: the rows kept
    whole, the last ``keep_last`` sequence rows per (rank or file, process group) by (``seq``, ``order``),
    and the last ``keep_last`` tail rows per (rank or file, kind) by ``order``.

    Works on the key columns only (``kind, layer, rank, path, pg, seq, world_size, message``; ``message`` is
    read for NCCL INFO chatter rows only) and sorts only numbers, never the wide table. ``chatter``: the
    NCCL INFO chatter test when it was decided beforehand (then ``message`` is not read)."""
    kind, layer = pl.col("kind"), pl.col("layer")
    nccl_chatter = (
        chatter
        if chatter is not None
        else (
            (kind == "log")
            & (layer == "nccl")
            & pl.col("world_size").is_null()
            & ~pl.col("message").str.contains_any(list(_NCCL_KEEP)).fill_null(False)
        )
    )
    seqish = kind.is_in(_SEQ_KINDS)
    tails = (kind == "step_progress") | nccl_chatter
    is_coll = kind == "nccl_coll"
    cols = dict.fromkeys([order, ident or order])
    base = t.lazy().select(
        *cols,
        pl.col("seq"),
        kind.alias("__k"),
        seqish.alias("__s"),
        tails.alias("__t"),
        pl.col("rank").alias("__wr"),
        pl.when(pl.col("rank").is_null()).then(pl.col("path")).alias("__wp"),
        is_coll.alias("__c"),
        # NCCL COLL rows without a commId are one group of their own; other rows without a PG are the default PG.
        pl.when(is_coll).then(pl.col("pg")).otherwise(pl.coalesce(pl.col("pg"), pl.lit("0"))).alias("__pg"),
    )
    kept = _select(base, order, keep_last)
    return kept if frame else kept.select(ident or order)


def _select(base: pl.LazyFrame, order: str, keep_last: int) -> pl.LazyFrame:
    """The kept rows of a key frame made by :func:`_kept` (all its columns). Applying it again to the union
    of its results over parts of a table gives its result over the whole table (top-k of top-k's)."""
    whole = base.filter(~pl.col("__s") & ~pl.col("__t"))
    # The last keep_last by (seq, order), a missing seq lowest: a top-k per group, no sort of the rows.
    seq_key = pl.col("seq").fill_null(-(2**63))
    groups = ("__wr", "__wp", "__c", "__pg")
    seq_rows = (
        base.filter(pl.col("__s"))
        # Only rows whose seq reaches the group's keep_last-th largest seq (counted with repeats) can be
        # among its last keep_last by (seq, order): a cheap window test first, so the top-k over every
        # column runs on a few rows per group (0.41 s -> 0.21 s on the 4.9 M COLL rows of the 256-rank bench).
        .filter(seq_key >= seq_key.top_k(keep_last).min().over(groups))
        .group_by(*groups)
        .agg(pl.all().top_k_by([seq_key, pl.col(order)], keep_last))
        .explode(pl.all().exclude(groups))  # type: ignore[arg-type]
    )
    tail_rows = (
        base.filter(pl.col("__t"))
        .group_by("__wr", "__wp", "__k")
        .agg(pl.all().top_k_by(order, keep_last))
        .explode(pl.all().exclude("__wr", "__wp", "__k"))  # type: ignore[arg-type]
    )
    cols = base.collect_schema().names()
    return pl.concat([whole.select(cols), seq_rows.select(cols), tail_rows.select(cols)], how="vertical")


def reduce_for_diagnosis(table: pl.DataFrame, keep_last: int = KEEP_LAST) -> pl.DataFrame:
    """The rows of ``table`` that diagnosis needs (see the module docstring); same schema, same order."""
    if table.height == 0:
        return table
    rows = _kept(table.with_row_index("__i"), "__i", keep_last).collect()["__i"].sort()
    return table[rows]


@dataclass
class _BatchOut:
    """What one batch gives back (from one ingest of its shadow directory)."""

    table: pl.DataFrame | None
    reduced: pl.DataFrame | None
    lines_read: int = 0
    skipped: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    maxrss_kib: int = 0
    skipped_list: list[dict[str, object]] = field(default_factory=list)


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


def _run_batch(
    batch: Batch, single_file: str | None, tz: str | None, keep_last: int, tmp: str, base: str
) -> _BatchOut:
    everything = batch.files + batch.context
    target = Path(single_file) if single_file else _shadow(everything, Path(tmp))
    try:
        # the shadow's links point at files discovery already vetted; file-name ranks were learned from all files
        with following_symlinks(), learned_from(everything):
            res = ingest(target, tz=tz)
    except DiscoveryError as e:  # a batch of only empty/binary files
        return _BatchOut(None, None, warnings=[str(e).replace(str(target), base)])
    finally:
        if not single_file:
            shutil.rmtree(target, ignore_errors=True)
    t = res.table
    lines_read, skipped, warnings = res.lines_read, res.skipped_lines, list(res.warnings)
    by_reason = dict(getattr(res, "skipped_by_reason", None) or {})
    ctx = {s.rel for s in batch.context}
    if ctx:
        drop = pl.col("path").is_in(list(ctx)) & ~_keeps(batch)
        lines_read -= int(t.filter(drop)["line_count"].sum() or 0)
        t = t.filter(~drop)
    if ctx and not batch.keeps_rest:  # the warnings and skipped lines of context files: the keeper's
        mine = []
        for w in warnings:
            rel = w.split(": ", 1)[0]
            if rel not in ctx:
                mine.append(w)
                continue
            m = _SKIP_RE.search(w)
            if m:  # a binary context file: its lines are counted by the batch that keeps it
                n = int(m.group(1))
                lines_read -= n
                skipped -= n
                by_reason["binary content"] = by_reason.get("binary content", 0) - n
        warnings = mine
        by_reason = {k: v for k, v in by_reason.items() if v}
    skipped_list = [
        e for e in getattr(res, "skipped", []) if batch.keeps_rest or not ctx or e.get("path") not in ctx
    ]
    return _BatchOut(
        t,
        compact(reduce_for_diagnosis(t, keep_last)),
        lines_read,
        skipped,
        by_reason,
        warnings,
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        skipped_list,
    )


def _batch_workers(workers: int | None) -> int:
    """Batches ingested at once: ``workers``, else ``RANKSCOPE_BATCH_WORKERS``, else the cores (at most 4)."""
    if workers is None:
        env = os.environ.get("RANKSCOPE_BATCH_WORKERS", "")
        workers = int(env) if env.isdigit() else min(4, os.cpu_count() or 1)
    return max(1, workers)


def _in_order(
    run: Callable[[Batch], _BatchOut], batches: list[Batch], workers: int
) -> Generator[_BatchOut, None, None]:
    """``run`` of each batch, yielded in batch order, with up to ``workers`` batches ingested at once on
    threads (polars releases the GIL in its kernels; the Python steps of one batch overlap the polars steps
    of another). At most ``workers`` batches are running or waiting to be taken, besides the one the caller
    holds: the next starts only when the caller asks for it. An error in a batch is raised when its turn
    comes; closing the generator early cancels the batches not started and waits for those running."""
    if workers <= 1 or len(batches) <= 1:
        yield from (run(b) for b in batches)
        return
    pool = ThreadPoolExecutor(max_workers=workers)
    pending: deque[Future[_BatchOut]] = deque()
    try:
        it = iter(batches)
        for b in it:
            pending.append(pool.submit(run, b))
            if len(pending) >= workers:
                break
        while pending:
            out = pending.popleft().result()
            yield out
            del out
            nxt = next(it, None)  # only now: while a batch is taken (written), one fewer is ingested
            if nxt is not None:
                pending.append(pool.submit(run, nxt))
    finally:
        # Stopped early (an error, Ctrl-C, the consumer closed us): batches not started never start, and
        # those running are waited for, so the caller can remove their files afterwards.
        pool.shutdown(wait=True, cancel_futures=True)


def stream_ingest(
    root: str | os.PathLike[str],
    out_parquet: str | os.PathLike[str] | None,
    batch_bytes: int | None = None,
    *,
    tz: str | None = None,
    keep_last: int = 4,
    row_group_rows: int = 1_000_000,
    partition_by: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
) -> tuple[pl.DataFrame, dict[str, object]]:
    """Ingest ``root`` batch by batch; write the full event table to ``out_parquet`` (None: don't).

    With ``partition_by`` (``"host"`` or ``"rank"``), ``out_parquet`` is a directory and each batch is
    written as a hive-partitioned dataset (``<by>=<value>/part-<batch>.parquet``, see
    :func:`correlator.export.write_partitioned`) instead of one file.

    Returns ``(reduced_table, summary)``: the rows diagnosis needs (event-table schema; pass it to
    :func:`correlator.diagnose`) and the same counts as ``IngestResult.summary()`` (over the whole input)
    plus ``batches``, ``input_bytes``, ``reduced_rows`` and ``peak_rss_mib`` (this process, so far).

    ``batch_bytes``: input per batch (default :data:`DEFAULT_BATCH_BYTES`). ``workers``: batches ingested at
    once on threads (default ``RANKSCOPE_BATCH_WORKERS``, else the cores, at most 4; see :func:`_in_order`);
    the table written, the reduced table and the summary do not depend on it. Peak memory is about
    ``workers`` batches' ingest plus the reduced table (256-rank bench, 32 MiB batches, 2 workers on 2 cores:
    ~0.7 GiB). ``progress(done, total)`` is called per batch, in order. Raises :class:`DiscoveryError` when
    ``root`` is missing, empty, or no batch had a readable line.
    """
    rootp = Path(root)
    batch_bytes = DEFAULT_BATCH_BYTES if batch_bytes is None else batch_bytes
    sources, disc_warnings = discover(rootp)
    single = str(rootp) if rootp.is_file() else None
    batches = [Batch(sources)] if single else plan(sources, batch_bytes)
    kinds: dict[str, int] = {}
    ranks: set[int] = set()
    hosts: set[str] = set()
    attempts: set[int] = set()
    skipped_by_reason: dict[str, int] = {}
    reduced: list[pl.DataFrame] = []
    warnings: list[str] = list(disc_warnings)
    skipped_list = skipped_entries(disc_warnings)
    lines_read = skipped = rows = unparsed = 0
    peak_rss = 0
    writer: pq.ParquetWriter | None = None
    results: Generator[_BatchOut, None, None] | None = None
    tmp = tempfile.mkdtemp(prefix="rankscope-stream-")
    base = str(rootp.parent if single else rootp)
    event_offset = 0
    try:
        if partition_by is not None:
            from correlator.export import PARTITION_KEYS, write_partitioned

            if partition_by not in PARTITION_KEYS:
                raise ValueError(f"partition by {partition_by!r}: use one of {', '.join(PARTITION_KEYS)}")
        elif out_parquet is not None:
            writer = pq.ParquetWriter(str(out_parquet), WRITE_SCHEMA, **parquet_options())
        # Each batch runs in a copy of the caller's context (context variables such as
        # ``discover.following_symlinks`` hold on the worker threads too).
        ctx = contextvars.copy_context()
        results = _in_order(
            lambda b: ctx.copy().run(_run_batch, b, single, tz, keep_last, tmp, base),
            batches,
            _batch_workers(workers),
        )
        for i, out in enumerate(results):  # closed in ``finally`` below, before the batches' files go
            warnings.extend(w for w in out.warnings if w not in disc_warnings)
            peak_rss = max(peak_rss, out.maxrss_kib)
            if out.table is not None and out.reduced is not None:
                t = out.table.with_columns((pl.col("event_id") + event_offset).alias("event_id"))
                red = out.reduced.with_columns((pl.col("event_id") + event_offset).alias("event_id"))
                event_offset += t.height
                lines_read += out.lines_read
                skipped += out.skipped
                skipped_list.extend(out.skipped_list)
                rows += t.height
                for k, v in out.skipped_by_reason.items():
                    skipped_by_reason[k] = skipped_by_reason.get(k, 0) + v
                for k, v in t.group_by("kind").len().iter_rows():
                    kinds[k] = kinds.get(k, 0) + v
                unparsed += int(t.filter(pl.col("kind") == Kind.UNPARSED)["line_count"].sum() or 0)
                ranks.update(int(r) for r in t["rank"].drop_nulls().unique().to_list())
                hosts.update(t["host"].drop_nulls().unique().to_list())
                attempts.update(int(a) for a in t["attempt"].drop_nulls().unique().to_list())
                if partition_by is not None and out_parquet is not None:
                    write_partitioned(
                        t,
                        out_parquet,
                        by=partition_by,
                        part_name=f"part-{i:05d}.parquet",
                        row_group_rows=row_group_rows,
                    )
                    del t
                elif writer is not None:
                    arrow = to_write_arrow(t)
                    out.table = None  # the Arrow table holds the buffers the write reads
                    del t
                    writer.write_table(arrow, row_group_size=row_group_rows)
                    del arrow
                else:
                    del t
                reduced.append(red)
                del red
            del out
            if progress:
                progress(i + 1, len(batches))
    finally:
        if results is not None:
            results.close()  # an early stop: waits for the batches still running (see _in_order)
        if writer is not None:
            writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if rows == 0:
        raise DiscoveryError(f"{root}: no log lines to read in {len(sources)} file(s)")
    table = pl.concat(reduced, how="vertical") if reduced else empty_table()
    summary: dict[str, object] = {
        "files": len(sources),
        "lines_read": lines_read,
        "lines_skipped": skipped,
        "skipped_by_reason": skipped_by_reason,
        "skipped": skipped_list,
        "rows": rows,
        "ranks": sorted(ranks),
        "hosts": sorted(hosts),
        "attempts": sorted(attempts),
        "rows_by_kind": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
        "lines_not_understood": unparsed,
        "warnings": len(warnings),
        "warning_lines": warnings[:50],
        "batches": len(batches),
        "peak_rss_mib": round(peak_rss / 1024, 1),
        "input_bytes": sum(_size(s) for s in sources),
        "reduced_rows": table.height,
    }
    return table, summary


#: Columns that decide which rows the reduced table keeps (see :func:`_reduced_parts`); ``message`` is read only
#: for the NCCL INFO chatter rows it decides about.
#: Rows of key columns read at once by :func:`reduced_from_parquet`.
_CHUNK_ROWS = 1_000_000
_KEY_COLUMNS = ["event_id", "path", "kind", "layer", "rank", "pg", "seq", "world_size"]


def reduced_from_parquet(path: str | os.PathLike[str], keep_last: int = 4) -> pl.DataFrame:
    """The reduced table from an event-table parquet file or hive-partitioned dataset, e.g. a ``rankscope
    timeline -o`` file or the merged per-node outputs of ``correlator.export``.

    Two narrow scans, never the whole table: the key columns (:data:`_KEY_COLUMNS`, plus ``message`` of the
    NCCL INFO chatter rows only, by predicate push-down) choose the rows; then only those rows are read
    whole (the predicate is evaluated first, the text columns decoded for the kept rows only).
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
    chatty = msgs.filter(~pl.col("message").str.contains_any(list(_NCCL_KEEP)).fill_null(False))[by]
    del msgs
    # The key columns in chunks of row groups (bounded memory), each chunk's kept rows, then the kept rows of
    # their union (see _select).
    chatter_ids = chatter & pl.col(by).is_in(chatty.implode())
    cand = [
        _kept(
            scan(row).slice(off, _CHUNK_ROWS).select(*dict.fromkeys([by, *_KEY_COLUMNS])),
            "event_id",
            keep_last,
            ident=by,
            chatter=chatter_ids,
            frame=True,
        ).collect()
        for off in range(0, max(n, 1), _CHUNK_ROWS)
    ]
    rows = _select(pl.concat(cand, how="vertical").lazy(), "event_id", keep_last).collect()[by].sort()
    del cand
    cols = list(EVENT_SCHEMA.names)
    kept = (
        scan(by == "__row").filter(pl.col(by).is_in(rows.implode())).select(cols).collect(engine="streaming")
    )
    out = conform(kept).sort("path", "line", "event_id")
    if out["event_id"].n_unique() != out.height:  # files of separate ingest runs (one per node)
        out = out.with_columns(pl.int_range(0, out.height, dtype=pl.Int64).alias("event_id"))
    return out


__all__ = [
    "DEFAULT_BATCH_BYTES",
    "KEEP_LAST",
    "ROUTINE_KINDS",
    "STREAMING_THRESHOLD_BYTES",
    "TABLE_STREAMING_THRESHOLD_BYTES",
    "Batch",
    "context_bounded",
    "input_bytes",
    "plan",
    "plan_batches",
    "reduce_for_diagnosis",
    "reduced_from_parquet",
    "should_stream",
    "stream_ingest",
]
