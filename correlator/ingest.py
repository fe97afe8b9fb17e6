"""Ingest: a directory of logs -> the event table (``correlator.schema``).

discover -> read -> demultiplex + parse (``parsers``) -> timestamps -> rank identity -> tee de-duplication.
Every readable line ends up in exactly one row; what could not be read is reported in
``IngestResult.warnings`` and counted in ``IngestResult.skipped_lines``.

Shape of the work (issue 13): one frame of physical lines (one text column, ``raw``; ``body`` starts as the
same buffer); ``parsers.parse_lines_split`` sends NCCL COLL lines of plain files down a one-regex fast path
and everything else through every prefix and rule, and hands on only the event-table columns plus
:data:`correlator.schema.INTERMEDIATE_COLUMNS`. Stamps and identity then run on the generic rows plus one weighted summary
row per run of fast rows of one (file, host, pid) (:func:`_resolve_with_fast_rows`); the two parts are
merged once, narrow, at the end.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import polars as pl

import parsers
from correlator import fr_load as flight_recorder
from correlator import identity, limits, stacks
from correlator.discover import DiscoveryError, Source, discover, skipped_entries
from correlator.read import ReadResult, SmallFile, read_lines, read_small_lines
from correlator.schema import PARSE_KEEP, POLARS_SCHEMA, Kind, conform
from parsers import coll, elastic, timestamps
from parsers.rules import true_at


@dataclass
class IngestResult:
    """The event table plus what ingest saw and skipped.

    ``table``: the event table (see ``correlator.schema.COLUMN_DOCS``); ``sources``: the files found;
    ``warnings``: one line per problem (file and reason); ``lines_read``: physical lines read;
    ``skipped_lines``: lines that could not be read (binary files, unreadable files);
    ``skipped_by_reason``: the same count split by reason (``binary content`` …), so that
    ``lines_read == table["line_count"].sum() + skipped_lines`` always holds.
    """

    table: pl.DataFrame
    sources: list[Source]
    warnings: list[str] = field(default_factory=list)
    lines_read: int = 0
    skipped_lines: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    #: What was not read, one dict per file and reason: ``{"path", "bytes", "lines", "reason"}``.
    skipped: list[dict[str, object]] = field(default_factory=list)
    #: NCCL COLL lines read but left out of the table by ``ingest(keep_coll=...)`` (0 otherwise); then
    #: ``lines_read == table["line_count"].sum() + skipped_lines + coll_lines_dropped``.
    coll_lines_dropped: int = 0

    def summary(self) -> dict[str, object]:
        """Counts for the closing summary: files, ranks, hosts, attempts, rows by kind, lines not understood."""
        t = self.table
        kinds = dict(sorted(t.group_by("kind").len().iter_rows(), key=lambda kv: -kv[1]))
        unparsed = int(t.filter(pl.col("kind") == Kind.UNPARSED)["line_count"].sum() or 0)
        return {
            "files": len(self.sources),
            "lines_read": self.lines_read,
            "lines_skipped": self.skipped_lines,
            "skipped_by_reason": dict(self.skipped_by_reason),
            "rows": t.height,
            "ranks": sorted(t["rank"].drop_nulls().unique().to_list()),
            "hosts": sorted(t["host"].drop_nulls().unique().to_list()),
            "attempts": sorted(t["attempt"].drop_nulls().unique().to_list()),
            "rows_by_kind": kinds,
            "lines_not_understood": unparsed,
            "warnings": len(self.warnings),
            "skipped": [dict(e) for e in self.skipped],
        }


def _raw_column(parts: Sequence[pl.Series | list[str]]) -> pl.Series:
    """The lines of ``parts`` one after another, as one String Series: a run of parts held as lists (small
    files, see ``ReadResult.lines_or_list``) becomes one Series (one construction for thousands of files,
    not one each); Series parts are kept as they are (no rechunk: the frame refers to the files' text
    buffers instead of a second copy of all of it)."""
    out: list[pl.Series] = []
    run: list[str] = []
    for lines in parts:
        if isinstance(lines, list):
            run.extend(lines)
            continue
        if run:
            out.append(pl.Series("text", run, dtype=pl.String))
            run = []
        out.append(lines)
    if run or not out:
        out.append(pl.Series("text", run, dtype=pl.String))
    return pl.concat(out, rechunk=False) if len(out) > 1 else out[0]


def plain_lines(
    parts: Sequence[tuple[int, Source, pl.Series | list[str]]],
    first: list[int] | None = None,
    key: str = "__src",
) -> pl.DataFrame:
    """The frame of physical lines of many plain sources at once (one polars frame, not one per file:
    a directory of 10,000 tiny files costs one frame build). Same columns as :func:`_with_source`, the
    source index in column ``key``. ``first``: the line number of each part's first line (default 1; the
    live watcher reads files from an offset). A part's lines: a Series or a list of str."""
    meta = pl.DataFrame(
        {
            key: [i for i, _, _ in parts],
            "first": first if first is not None else [1] * len(parts),
            "path": [s.rel for _, s, _ in parts],
            "n": [len(lines) for _, _, lines in parts],
            "layout": ["stream" if s.layout == "error_json" else s.layout for _, s, _ in parts],
            "stream": [s.stream for _, s, _ in parts],
            "src_rank": [s.rank for _, s, _ in parts],
            "src_local_rank": [s.local_rank for _, s, _ in parts],
            "src_host": [s.host for _, s, _ in parts],
            "pid": [s.pid for _, s, _ in parts],
            "src_attempt": [s.attempt for _, s, _ in parts],
            "node_key": [s.node_key for _, s, _ in parts],
        },
        schema_overrides={
            key: pl.Int64,
            "first": pl.Int64,
            "n": pl.Int64,
            "layout": pl.String,
            "stream": pl.String,
            "src_rank": pl.Int32,
            "src_local_rank": pl.Int32,
            "src_host": pl.String,
            "pid": pl.Int64,
            "src_attempt": pl.Int32,
            "node_key": pl.String,
        },
    )
    raw = _raw_column([lines for _, _, lines in parts]).alias("raw")
    rows = (
        meta.with_columns(
            pl.int_ranges(pl.col("first"), pl.col("first") + pl.col("n"), dtype=pl.Int64).alias("line")
        )
        .explode("line")
        .drop("n", "first")
    )
    return rows.with_columns(
        raw,
        pl.lit(1, dtype=pl.Int32).alias("line_count"),
        raw.alias("body"),
        pl.lit(None, dtype=pl.String).alias("layer"),
    ).select(
        key,
        "raw",
        "path",
        "line",
        "line_count",
        "body",
        "layout",
        "stream",
        "src_rank",
        "src_local_rank",
        "src_host",
        "pid",
        "src_attempt",
        "node_key",
        "layer",
    )


def _within(
    report: Callable[[str, int, int], None] | None, base: int, size: int, total: int
) -> Callable[[int], None] | None:
    """``read_lines``'s ``on_bytes`` for a file of ``size`` bytes that starts at ``base`` of ``total``."""
    if report is None:
        return None
    return lambda n: report(READING, base + min(n, size), total)


#: The last bytes of an ``error.json`` larger than the small-file limit that are read too: torchelastic
#: writes the stamp and the exit code after the message.
_ERROR_JSON_TAIL = 64 * 1024
#: The mark :func:`correlator.read.read_lines` puts at the end of a line kept truncated.
_TRUNCATED_MARK = re.compile(r" …\[truncated: line of \d+ bytes\]$", re.MULTILINE)


def source_frame(
    src: Source,
    progress: Callable[[Source], None] | None,
    on_bytes: Callable[[int], None] | None = None,
    lim: limits.Limits | None = None,
) -> tuple[pl.DataFrame | None, ReadResult]:
    """Read one source. Returns a frame for an error.json record, or None for plain lines (in ``res.lines``).

    An ``error.json`` is read with the small-file limit (:func:`correlator.read.read_small`): a larger one
    (a message that embeds a giant repr) keeps the head of its message, with a warning, and nothing larger
    than the limit reaches a parser."""
    cut: SmallFile | None = None
    if src.layout == "error_json":
        res, cut = read_small_lines(src.path, src.rel, tail=_ERROR_JSON_TAIL)
    else:
        res = read_lines(src.path, src.rel, on_bytes, lim)
    if progress:
        progress(src)
    n = res.n_lines
    if src.layout == "error_json" and n:
        text = "\n".join(res.line_list())
        try:
            parsed = elastic.parse_error_json(text)
            if (  # cut short: the head of the message, the stamp from the file's end
                parsed is None
                and cut is not None
                and (cut.truncated or any(e["reason"] == "line truncated" for e in res.skipped))
            ):
                head = _TRUNCATED_MARK.sub("", text)
                tail = (cut.tail or cut.data[-_ERROR_JSON_TAIL:]).decode("utf-8", errors="replace")
                parsed = elastic.parse_error_json_head(head, tail)
                if parsed is not None:
                    res.warnings.append(
                        f"{src.rel}: error.json cut short; kept the first {len(str(parsed['message']))} "
                        "characters of its message"
                    )
        except (ValueError, TypeError, OverflowError, RecursionError):  # hostile JSON must not stop ingest
            parsed = None
        if parsed is not None:
            epoch, code = parsed["epoch_s"], parsed["exit_code"]
            if not (isinstance(epoch, int) and 0 <= epoch <= timestamps.MAX_EPOCH_S):
                if epoch is not None:
                    res.warnings.append(f"{src.rel}: timestamp {str(epoch)[:30]} out of range; ignored")
                epoch = None
            if not (isinstance(code, int) and -(2**31) <= code < 2**31):
                code = None
            frame = pl.DataFrame(
                {
                    "path": [src.rel],
                    "line": [1],
                    "line_count": [n],
                    "raw": [text],
                    "body": [str(parsed["message"]).split("\n")[0]],
                    "epoch_s": [epoch],
                    "exit_code_json": [code],
                },
                schema_overrides={
                    "epoch_s": pl.Int64,
                    "exit_code_json": pl.Int32,
                    "line": pl.Int64,
                    "line_count": pl.Int32,
                },
            )
            return _with_source(frame, src), res
        res.warnings.append(f"{src.rel}: not a torchelastic error.json; read as plain lines")
    return None, res


def _with_source(frame: pl.DataFrame, src: Source) -> pl.DataFrame:
    layout = "stream" if src.layout == "error_json" and "epoch_s" not in frame.columns else src.layout
    return frame.with_columns(
        pl.lit(layout).alias("layout"),
        pl.lit(src.stream).alias("stream"),
        pl.lit(src.rank, dtype=pl.Int32).alias("src_rank"),
        pl.lit(src.local_rank, dtype=pl.Int32).alias("src_local_rank"),
        pl.lit(src.host, dtype=pl.String).alias("src_host"),
        pl.lit(src.pid, dtype=pl.Int64).alias("pid"),
        pl.lit(src.attempt, dtype=pl.Int32).alias("src_attempt"),
        pl.lit(src.node_key, dtype=pl.String).alias("node_key"),
        pl.lit("elastic" if layout == "error_json" else None, dtype=pl.String).alias("layer"),
    )


def mark_duplicates(df: pl.DataFrame) -> pl.DataFrame:
    """torchrun --tee copies every worker line into the launcher output; when the per-rank file holds
    the same record, the tee copy is marked ``duplicate`` (kept in the table, skipped by diagnosis)."""
    tee_copy = pl.col("tee_local_rank").is_not_null() & (pl.col("layout") == "stream")
    if not df.select(tee_copy.any()).item():
        return df.with_columns(pl.lit(False).alias("duplicate"))
    per_rank = (
        df.lazy()
        .filter(pl.col("layout") == "torchrun_rank")
        .select("node_key", "local_rank", "record")
        .unique()
        .collect()
    )
    if per_rank.height == 0:
        return df.with_columns(pl.lit(False).alias("duplicate"))
    # Only the tee copies are looked up (a small frame), never a join of the whole table.
    hits = (
        df.lazy()
        .with_row_index("__i")
        .filter(tee_copy)
        .select("__i", "node_key", "local_rank", "record")
        .join(per_rank.lazy(), on=["node_key", "local_rank", "record"], how="semi")
        .select("__i")
        .collect()["__i"]
    )
    return df.with_columns(true_at(df.height, hits).alias("duplicate"))


def _sorted_by_path_line(df: pl.DataFrame) -> bool:
    """True when ``df`` is already in ``path, line`` order (then sorting it again is skipped)."""
    if df.height < 2:
        return True
    if not df["path"].is_sorted():
        return False
    same_file = pl.col("path") == pl.col("path").shift(1)
    return bool(
        df.select((~same_file | (pl.col("line") >= pl.col("line").shift(1))).fill_null(True).all()).item()
    )


def _mtime(path: os.PathLike[str]) -> float | None:
    """The modification time of ``path`` (one ``stat``), or None when it is gone."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


#: The names ``ingest(on_phase=...)`` is called with, in order (after the per-file ``progress`` calls).
PHASES = (
    "scanning lines",
    "parsing lines",
    "reading timestamps",
    "resolving rank identity",
    "building the event table",
)
SCANNING, PARSING, STAMPS, IDENTITY, BUILDING = PHASES
#: The name of the reading step in ``ingest(on_progress=...)`` (before :data:`PHASES`).
READING = "reading logs"


def ingest(
    root: str | os.PathLike[str],
    *,
    tz: str | None = None,
    progress: Callable[[Source], None] | None = None,
    on_sources: Callable[[list[Source]], None] | None = None,
    fr: str | os.PathLike[str] | None = None,
    on_phase: Callable[[str], None] | None = None,
    keep_coll: int | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> IngestResult:
    """Read every log under ``root`` (a directory or one file) into the event table.

    ``tz``: IANA zone for stamps that carry none (default UTC). ``progress`` is called once per file
    read; ``on_sources`` once with the list of files found; ``on_phase`` with the name of each step after
    reading as it starts (:data:`PHASES`, in that order), so a progress display moves between files and phases.
    ``on_progress(step, done, total)``: progress within the steps (:data:`READING`, then :data:`PHASES`), with
    ``done`` never decreasing within a step and ending at ``total``: reading counts bytes (``Source.size``,
    per MiB within a file as it is read and at the end of each file); scanning (each line tested for the
    NCCL COLL fast path, ``parsers.fast_split``) counts lines, per ``parsers.coll.SCAN_ROWS``; parsing
    counts lines (after each chunk of NCCL COLL fast-path lines, ``parsers.coll.CHUNK_ROWS``, after each
    slice of the other lines, ``parsers.GENERIC_CHUNK_ROWS``, and at its end); identity counts the
    columns of the merge of the fast-path rows with the others, after each (one unit if there are none);
    the other later steps, one unit each, report at their end. ``fr``: a directory of Flight Recorder dumps
    kept elsewhere (dumps under ``root`` are found anyway; see :mod:`correlator.fr`).

    ``keep_coll``: build only the rows diagnosis needs (``rankscope diagnose DIR``, issue #13 item 4):
    NCCL COLL lines of the fast-path shape (:mod:`parsers.coll`) are cut, before parsing, to the last
    ``keep_coll`` per run of one process in a file and communicator, by opCount (see
    :func:`_reduce_coll_lines`); every other line is parsed as usual. The cut runs batch by batch
    (:data:`CUT_BATCH_BYTES` of text) in a worker thread while later files are read (:class:`_CollCut`),
    so the text of the lines cut is held for a few batches only (:data:`_IN_FLIGHT` waiting for the cut
    plus the one being read); a file that must be parsed whole after all is read again from disk, as it is
    then (:func:`_parse_reduced`). The rows that remain are the rows of the
    full table, with its ``event_id`` values, and ``streaming.reduce_for_diagnosis`` of this table equals
    that of the full table when ``keep_coll`` is at least its ``keep_last``; ``coll_lines_dropped`` counts
    the lines left out. Raises :class:`DiscoveryError` if ``root``
    is missing, holds no file, or no line of any file could be read (all empty, binary or unreadable);
    every other problem becomes a warning.
    """
    sources, warnings = discover(root)
    if on_sources:
        on_sources(sources)
    report = on_progress or (lambda _step, _done, _total: None)
    total_bytes = sum(s.size for s in sources if s.layout != "fr_dump")
    bytes_done = 0
    report(READING, 0, total_bytes)
    fr_rows = flight_recorder.collect([(s.path, s.rel) for s in sources if s.layout == "fr_dump"], fr)
    warnings.extend(fr_rows.warnings)
    frames, plain, lines_read, skipped = [], [], 0, 0
    by_reason: dict[str, int] = {}
    skipped_list = skipped_entries(warnings)
    # Frames are built in path order (``path`` is ``Source.rel``), so the table usually needs no final sort.
    order = {id(s): k for k, s in enumerate(sorted(sources, key=lambda s: s.rel))}
    cut = _CollCut(keep_coll) if keep_coll is not None else None
    lim = limits.current()  # read once, not per file
    # Each file's modification time (for the year of stamps without one): from the fstat of its read, else
    # one stat (a dump, an error.json, a file not read)
    mtimes: list[float | None] = []
    try:
        for src in sources:
            i = order[id(src)]
            if src.layout == "fr_dump":  # read by correlator.fr above, not as lines
                mtimes.append(_mtime(src.path))
                continue
            frame, res = source_frame(
                src, progress, _within(on_progress, bytes_done, src.size, total_bytes), lim
            )
            mtimes.append(res.mtime if res.mtime is not None else _mtime(src.path))
            bytes_done += src.size
            report(READING, bytes_done, total_bytes)
            if frame is not None:
                frames.append(frame.with_columns(pl.lit(i, dtype=pl.Int64).alias("__src")))
            elif res.n_lines and cut is not None:
                cut.add(i, src, res.lines_or_list(), res.text_bytes)
            elif res.n_lines:
                plain.append((i, src, res.lines_or_list()))
            lines_read += res.physical_lines
            skipped += res.skipped_lines
            skipped_list.extend(res.skipped)
            for e in res.skipped:
                if e["lines"]:
                    by_reason[str(e["reason"])] = by_reason.get(str(e["reason"]), 0) + int(e["lines"])  # type: ignore[call-overload]
            warnings.extend(res.warnings)
        if cut is not None:
            frames.extend(cut.finish())
    finally:
        if cut is not None:
            cut.close()
    if plain:
        plain.sort(key=lambda part: part[0])
        frames.append(plain_lines(plain))
    if not any(f.height for f in frames) and fr_rows.table.height:  # Flight Recorder dumps, no text log
        return IngestResult(
            conform(flight_recorder.with_ids(fr_rows.table)),
            sources,
            warnings,
            lines_read,
            skipped,
            by_reason,
        )
    if not any(f.height for f in frames):
        why = (
            f": {warnings[0]}" + (f" (and {len(warnings) - 1} more problems)" if len(warnings) > 1 else "")
            if warnings
            else ""
        )
        raise DiscoveryError(f"{root}: no log lines to read in {len(sources)} file(s){why}")
    df = pl.concat([f for f in frames if f.height], how="diagonal_relaxed")
    if len(frames) > 1:
        df = df.sort("__src", "line", maintain_order=True)
    del frames, plain
    if cut is None:
        df = df.drop("__src")
    known = [m for m in mtimes if m is not None]
    year = dt.datetime.fromtimestamp(max(known), dt.UTC).year if known else dt.datetime.now(dt.UTC).year
    n_lines = df.height
    counted = {SCANNING: 0, PARSING: 0}

    def rows_done(step: str) -> Callable[[int], None]:
        def add(n: int) -> None:
            counted[step] = min(n_lines, counted[step] + n)
            report(step, counted[step], n_lines)

        return add

    if on_phase:
        on_phase(SCANNING)
    report(SCANNING, 0, n_lines)
    # With the cut, the lines were tested batch by batch while they were read (``_cut_batch``).
    fast_rows = parsers.fast_split(df, rows_done(SCANNING) if on_progress else None) if cut is None else None
    report(SCANNING, n_lines, n_lines)
    if on_phase:
        on_phase(PARSING)
    report(PARSING, 0, n_lines)
    dropped: pl.DataFrame | None = None
    token = coll.ON_ROWS.set(rows_done(PARSING) if on_progress else None)
    try:
        if cut is not None:
            by_rel = {s.rel: s for s in sources}
            gen, fast, dropped = _parse_reduced(
                df, cut.dropped(), cut.paths, lambda rels: _reread(rels, by_rel, order)
            )
        else:
            gen, fast = parsers.parse_lines_split(df, keep=PARSE_KEEP, fast=fast_rows)
    finally:
        coll.ON_ROWS.reset(token)
    report(PARSING, n_lines, n_lines)
    del fast_rows
    del df
    if "exit_code_json" in gen.columns:
        gen = gen.with_columns(pl.coalesce(pl.col("exit_code"), pl.col("exit_code_json")).alias("exit_code"))
    if on_phase:
        on_phase(STAMPS)
    gen = timestamps.build_ts(gen, year, tz)  # fast-path rows carry no stamp of their own
    report(STAMPS, 1, 1)
    if on_phase:
        on_phase(IDENTITY)
    # Units of this step: 1, or the columns of the merge of the two parts (its long part) as they are merged.
    units = [1]

    def merged(done: int, total: int) -> None:
        units[0] = total
        report(IDENTITY, done, total)

    if fast is None:
        df = timestamps.inherit(identity.resolve(gen), parsers.STREAM_KEYS)
    else:
        df = _resolve_with_fast_rows(gen, fast, merged)
    df = stacks.assign_ranks(df)  # a stack dump named by its pid only gets its rank from the logs
    report(IDENTITY, units[0], units[0])
    warnings.extend(identity.unused_file_name_ranks(df, sources))
    if on_phase:
        on_phase(BUILDING)
    df = limits.cap_values(df, warnings)
    df = mark_duplicates(df)
    if fr_rows.table.height:
        df = pl.concat([df, fr_rows.table], how="diagonal_relaxed")
    if not _sorted_by_path_line(df):
        df = df.sort("path", "line", maintain_order=True)
    df = df.drop("_pos").with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64))
    n_dropped = 0
    if dropped is not None and dropped.height:
        n_dropped = dropped.height
        rel_of = {order[id(s)]: s.rel for s in sources}
        df = df.with_columns(_full_event_ids(df, dropped, rel_of).alias("event_id"))
    if identity.WEIGHT in df.columns:
        df = df.drop(identity.WEIGHT)
    report(BUILDING, 1, 1)
    return IngestResult(
        conform(df), sources, warnings, lines_read, skipped, by_reason, skipped_list, n_dropped
    )


#: Positions in the line frame of :func:`_reduce_coll_lines` (a private column).
_LINE_IDX = "__li"
#: Per row of a cut lines frame: the line was a COLL fast-path candidate of a file that was cut.
_CAND = "__cand"
#: Text read per batch before its NCCL COLL lines are cut (``ingest(keep_coll=...)``): the lines of one batch
#: are held whole, the batches after the cut only keep what remains.
CUT_BATCH_BYTES = 32 << 20


def compact(df: pl.DataFrame) -> pl.DataFrame:
    """A copy of ``df`` that owns its text: polars string columns are views into shared buffers, so a few
    rows filtered out of a batch would otherwise keep the whole batch's text alive (measured: ~65 MB per
    32 MB batch, 8.5 GiB after 128 batches)."""
    return pl.from_arrow(df.to_arrow(compat_level=pl.CompatLevel.oldest()))  # type: ignore[return-value]


class _CollCut:
    """The reading side of ``ingest(keep_coll=...)``: files are gathered into batches of about
    :data:`CUT_BATCH_BYTES` of text; each batch becomes a lines frame (``plain_lines``) whose NCCL COLL
    lines are cut (:func:`_reduce_coll_lines`) while the next batch is read (one worker thread: the cut runs
    in polars, which releases the GIL, while reading runs in Python), and at most :data:`_IN_FLIGHT` batches
    wait for their cut, so the text of the cut lines is held for a few batches only. Every decision of the
    cut is per file (fast-path shape per line, the file-level tests of ``parsers.fast_split``, runs within
    one file), so cutting batch by batch cuts the same lines as cutting all files at once. Results are
    kept in batch order; an error in the worker is raised by :meth:`add` or :meth:`finish`."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.batch: list[tuple[int, Source, pl.Series | list[str]]] = []
        self.size = 0
        self.frames: list[pl.DataFrame] = []
        self.cut: list[pl.DataFrame] = []
        #: Paths of the files of which some lines were cut.
        self.paths: set[str] = set()
        self.pool: ThreadPoolExecutor | None = None
        self.pending: deque[Future[tuple[pl.DataFrame, pl.DataFrame | None, set[str]]]] = deque()

    def add(self, i: int, src: Source, lines: pl.Series | list[str], text_bytes: int | None = None) -> None:
        """Queue the ``lines`` of one file (``text_bytes``: their size with newlines, when known)."""
        self.batch.append((i, src, lines))
        if text_bytes is None:
            if isinstance(lines, list):
                text_bytes = sum(len(x.encode()) + 1 for x in lines)
            else:
                text_bytes = int(lines.str.len_bytes().sum() or 0) + lines.len()
        self.size += text_bytes
        if self.size >= CUT_BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self.batch:
            return
        frame = plain_lines(self.batch)
        self.batch, self.size = [], 0
        if self.pool is None:
            self.pool = ThreadPoolExecutor(_CUT_WORKERS, thread_name_prefix="rankscope-cut")
        self.pending.append(self.pool.submit(_cut_batch, frame, self.keep))
        while len(self.pending) > _IN_FLIGHT:
            self._take()

    def _take(self) -> None:
        red, dropped, paths = self.pending.popleft().result()
        self.frames.append(red)
        if dropped is not None:
            self.cut.append(dropped)
        self.paths |= paths

    def finish(self) -> list[pl.DataFrame]:
        """The lines frames of all batches (columns of ``plain_lines`` plus :data:`_CAND` and, where lines
        were cut, :data:`identity.WEIGHT`)."""
        try:
            self._flush()
            while self.pending:
                self._take()
        finally:
            self.close()
        return self.frames

    def close(self) -> None:
        """Stop the worker (batches not cut yet are dropped); safe to call more than once."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        self.pending.clear()

    def dropped(self) -> pl.DataFrame:
        """``(__src, line)`` of every line cut."""
        if not self.cut:
            return pl.DataFrame(schema={"__src": pl.Int64, "line": pl.Int64})
        return pl.concat(self.cut)


#: Batches read but not yet cut, and the threads that cut them (see :class:`_CollCut`). One thread: the
#: reading and the cut then fill two cores; a second cut thread was measured no faster on 2 cores.
_IN_FLIGHT = 2
_CUT_WORKERS = 1


def _cut_batch(frame: pl.DataFrame, keep: int) -> tuple[pl.DataFrame, pl.DataFrame | None, set[str]]:
    """One batch of :class:`_CollCut`: ``(lines frame left, (__src, line) cut or None, paths cut)``."""
    fast = parsers.fast_split(frame)
    if fast is None:
        return frame.with_columns(pl.lit(False).alias(_CAND)), None, set()
    red, dropped, paths = _reduce_coll_lines(frame, keep, fast)
    # Own the text of the rows kept when most of the batch was cut (else its buffers stay alive).
    return (compact(red) if red.height * 2 < frame.height else red), dropped, paths


def _reread(rels: set[str], by_rel: dict[str, Source], order: dict[int, int]) -> pl.DataFrame:
    """The lines frame of the files ``rels``, every line (a file the cut must give back whole; see
    :func:`_parse_reduced`), read again from disk: the lines the cut left out were not kept."""
    parts = []
    for rel in sorted(rels):
        src = by_rel[rel]
        res = read_lines(src.path, src.rel)
        if res.n_lines:
            parts.append((order[id(src)], src, res.lines_or_list()))
    if not parts:
        return pl.DataFrame(schema={"__src": pl.Int64, "path": pl.String, "line": pl.Int64})
    return plain_lines(parts).with_columns(pl.lit(False).alias(_CAND))


def _reduce_coll_lines(
    df: pl.DataFrame, keep: int, fast: pl.Series
) -> tuple[pl.DataFrame, pl.DataFrame, set[str]]:
    """The lines frame ``df`` (of ``plain_lines``, with ``__src``) without the NCCL COLL lines diagnosis
    does not need.

    ``fast``: the rows of ``df`` that take the COLL fast path (``parsers.fast_split``); files of layout
    ``stream`` (launcher pairing reads their text line by line) keep every
    line. Among the other fast rows, a *run* is a maximal sequence (in row order, fast rows only) of one
    file and one ``host:pid`` (the line's first token without its thread id): the unit identity resolution
    summarizes (``_resolve_with_fast_rows``). Per run, kept: its first row, and per communicator (the
    ``comm 0x..`` token) the ``keep`` rows with the highest opCount (a tie: the later line). The first row
    kept of each run carries the weight (:data:`identity.WEIGHT`) of the run's lines left out, so the
    majorities of identity resolution count every line as before.

    Why exact: a run and a communicator lie inside one (rank, process group) of the full table (rank is
    resolved per run; the PG is a function of host, pid and comm), so the last ``keep`` rows per (rank, PG)
    by SeqNum, which is all ``streaming.reduce_for_diagnosis`` keeps of these rows, are among the kept ones;
    the world size (``[nranks=N]``, one per communicator) keeps its maximum; stamps are inherited from the
    generic rows, all kept. Returns ``(lines frame with column _CAND, dropped (__src, line), paths cut)``;
    ``_CAND`` marks the rows that were candidates (fast rows of files not kept whole).
    """
    cand = (pl.Series(fast) & (df["layout"] != "stream").fill_null(True)).fill_null(False)
    raw = pl.col("raw")
    # A line of the fast-path shape has space-free tokens and pointer buffers, so these literals occur
    # once, in place (as in ``parsers.coll._parse_chunk``); ``host:pid`` is read once per distinct head.
    c = (
        df.select("__src", "path", "raw", "line")
        .with_row_index(_LINE_IDX)
        .filter(cand)
        .select(
            _LINE_IDX,
            "__src",
            "path",
            "line",
            raw.str.slice(0, raw.str.find(" NCCL INFO ", literal=True)).alias("head"),
            coll.between(raw, ": opCount ", " sendbuff ")
            .str.to_integer(base=16, strict=False)
            .fill_null(-(2**63))
            .alias("seq"),
            coll.between(raw, " comm ", " [nranks=").alias("comm"),
        )
    )
    hp = coll.per_distinct(c["head"], pl.col(coll.DISTINCT).str.extract(r"^([^ :]+:[0-9]+):", 1).alias("hp"))
    c = c.drop("head").with_columns(hp["hp"])
    none = c.select("__src", "line").clear()
    if c.height == 0:
        return df.with_columns(cand.alias(_CAND)), none, set()
    starts = (
        pl.col("path").ne_missing(pl.col("path").shift(1)) | pl.col("hp").ne_missing(pl.col("hp").shift(1))
    ).fill_null(True)
    c = c.with_columns(starts.alias("first"), (starts.cum_sum() - 1).alias("run"))
    top = (
        c.lazy()
        .group_by("run", "comm")
        .agg(pl.col(_LINE_IDX).top_k_by([pl.col("seq"), pl.col(_LINE_IDX)], keep))
        .explode(_LINE_IDX)
        .select(_LINE_IDX)
        .collect()[_LINE_IDX]
    )
    kept = c["first"] | c[_LINE_IDX].is_in(top.implode())
    if bool(kept.all()):
        return df.with_columns(cand.alias(_CAND)), none, set()
    ck = c.select(_LINE_IDX, "run", "first").with_columns(kept.alias("k"))
    # The run's first row carries the lines of its run that are left out.
    lost = ck.group_by("run").agg((~pl.col("k")).sum().alias("lost"))
    w = ck.filter("first").join(lost, on="run", how="left")
    weight = (
        pl.Series(identity.WEIGHT, [None], pl.Int64)
        .extend_constant(None, df.height - 1)
        .scatter(w[_LINE_IDX], (w["lost"] + 1).cast(pl.Int64))
    )
    drop_idx = ck.filter(~pl.col("k"))[_LINE_IDX]
    dropped = c.filter(~kept)
    reduced_paths = set(dropped["path"].unique().to_list())
    keep_mask = pl.Series([True]).extend_constant(True, df.height - 1).scatter(drop_idx, False)
    out = df.with_columns(weight, cand.alias(_CAND)).filter(keep_mask)
    return out, dropped.select("__src", "line"), reduced_paths


def _parse_reduced(
    df: pl.DataFrame,
    dropped: pl.DataFrame,
    paths: set[str],
    reread: Callable[[set[str]], pl.DataFrame],
) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame]:
    """``parsers.parse_lines_split`` of the lines frame ``df`` cut by :class:`_CollCut` (its column
    :data:`_CAND`; ``dropped``: the ``(__src, line)`` cut; ``paths``: the files cut).

    The cut assumes that the COLL lines it cuts take the fast path and that their files hold no
    restart line, and that no torchrun ``--tee`` copy of them is looked up by tee de-duplication; these are
    known only after parsing (a file whose other lines may form multi-line records goes back to the generic
    path, which reads its COLL lines; attempts count restarts line by line; a tee copy of a COLL line in a
    launcher output makes every file keep them). A file for which one turns out false is read again whole
    (``reread(paths)``: its lines frame, every line) and the lines parsed again (both tests are per file,
    so once is enough; a third parse is a safety net that should never run). Returns ``(generic rows,
    fast rows, dropped (__src, line))``."""
    keep_cols = (*PARSE_KEEP, identity.WEIGHT)
    for _ in range(3):
        red_cand = df[_CAND].fill_null(False)
        red = df.drop(_CAND, "__src")
        gen, fast = parsers.parse_lines_split(red, keep=keep_cols)
        if not paths:
            return gen, fast, dropped
        # Every COLL line kept of a cut file must have taken the fast path, and no cut file may
        # restart; else its file is put back whole.
        fast_pos = fast["_pos"] if fast is not None else pl.Series("_pos", [], pl.UInt32)
        went_generic = (
            red.select("path")
            .with_row_index("_p")
            .filter(red_cand & red["path"].is_in(list(paths)) & ~pl.col("_p").is_in(fast_pos.implode()))
        )
        bad = set(went_generic["path"].unique().to_list())
        restarts = gen.filter((pl.col("kind") == Kind.RESTART) & pl.col("path").is_in(list(paths)))
        bad |= set(restarts["path"].unique().to_list())
        # torchrun --tee copies of COLL lines in a launcher output: tee de-duplication looks for the per-rank
        # line of each copy, in files paired with the launcher only by identity resolution (later), so then
        # every file keeps its COLL lines (the launcher output holds them all anyway).
        tee_copy = (
            pl.col("tee_local_rank").is_not_null()
            & (pl.col("layout") == "stream")
            & pl.col("record").str.contains(coll.LITERAL, literal=True).fill_null(False)
        )
        if gen.select(tee_copy.any()).item():
            bad |= paths
        if not bad:
            return gen, fast, dropped
        bad_src = df.filter(pl.col("path").is_in(list(bad)))["__src"].unique()
        whole = reread(bad)
        back = df.filter(~pl.col("path").is_in(list(bad)))
        df = pl.concat([back, whole], how="diagonal_relaxed").sort("__src", "line", maintain_order=True)
        paths -= bad
        dropped = dropped.filter(~pl.col("__src").is_in(bad_src.implode()))
    raise AssertionError("unreachable: a file is put back whole at most once")  # pragma: no cover


def _full_event_ids(df: pl.DataFrame, dropped: pl.DataFrame, rel_of: dict[int, str]) -> pl.Series:
    """The ``event_id`` each row of ``df`` (the reduced table, in ``path, line`` order) has in the full
    table: its position plus the number of dropped lines (each one row of its own) before it in
    ``path, line`` order. ``dropped``: ``(__src, line)``; ``rel_of``: ``__src`` -> path."""
    src_ids = dropped["__src"].unique().to_list()
    paths = sorted(set(df["path"].unique().to_list()) | {rel_of[i] for i in src_ids})
    code = {p: i for i, p in enumerate(paths)}
    src_code = {i: code[rel_of[i]] for i in src_ids}
    dk = (
        dropped.select(
            pl.col("__src").replace_strict(src_code, return_dtype=pl.Int64) * (1 << 32)
            + pl.col("line").fill_null(0).cast(pl.Int64)
        )
        .to_series()
        .sort()
    )
    keys = df.select(
        pl.col("path").replace_strict(code, return_dtype=pl.Int64) * (1 << 32)
        + pl.col("line").fill_null(0).cast(pl.Int64)
    ).to_series()
    before = dk.search_sorted(keys, side="left").cast(pl.Int64)
    return (df["event_id"] + before).alias("event_id")


#: What identity resolution sets on a row (the rest of a fast-path row is known after parsing).
_IDENTITY_OUT = ("rank", "rank_source", "local_rank", "host", "attempt")


def _resolve_with_fast_rows(
    gen: pl.DataFrame, fast: pl.DataFrame, on_column: Callable[[int, int], None] | None = None
) -> pl.DataFrame:
    """Identity and inherited stamps for the generic rows and the NCCL COLL fast-path rows, in two passes
    over small frames: the fast rows of one (file, host, pid) are alike for identity, so each such group
    goes into :func:`identity.resolve` as ONE summary row weighted by its size (:data:`identity.WEIGHT`);
    its results are joined back onto the group's rows. Stamps: a fast row takes the last stamp of its
    stream before it (an as-of join on the row position), exactly what :func:`timestamps.inherit` gives.

    Fast rows stay whole where the summary would not be exact: files read as combined streams (launcher
    pairing reads their text) and files with restart lines (attempts count restarts line by line).
    ``on_column``: progress of the final merge (``parsers.merge_parts``)."""
    restart_paths = (
        gen.lazy().filter(pl.col("kind") == Kind.RESTART).select(pl.col("path").unique()).collect()["path"]
    )
    whole = (pl.col("layout") == "stream") | pl.col("path").is_in(restart_paths.implode())
    keep_whole = fast.select(whole.any()).item()
    if keep_whole:
        gen = parsers.merge_parts(gen, fast.filter(whole))
        fast = fast.filter(~whole)
    if fast.height == 0:
        return timestamps.inherit(identity.resolve(gen), parsers.STREAM_KEYS)
    # Runs of fast rows (in row order) from one (file, host, pid): each run enters identity as one row.
    key = ["path", "host", "pid"]
    starts = pl.any_horizontal([pl.col(k).ne_missing(pl.col(k).shift(1)) for k in key]).fill_null(True)
    fast = fast.with_columns((starts.cum_sum() - 1).cast(pl.Int64).alias("_gid"))
    # A run's weight: its rows, or the lines they stand for after ``ingest(keep_coll=...)`` cut some.
    size = pl.col(identity.WEIGHT).fill_null(1).sum() if identity.WEIGHT in fast.columns else pl.len()
    groups = fast.filter(starts).with_columns(
        fast.group_by("_gid", maintain_order=True)
        .agg(size.alias("n"))["n"]
        .cast(pl.Int64)
        .alias(identity.WEIGHT)
    )
    both = identity.resolve(pl.concat([gen, groups.drop("_pos")], how="diagonal_relaxed"))
    is_group = pl.col("_gid").is_not_null()
    resolved = both.filter(is_group).select("_gid", *_IDENTITY_OUT).sort("_gid")
    gen = timestamps.inherit(both.filter(~is_group).drop("_gid", identity.WEIGHT), parsers.STREAM_KEYS)
    idx = fast["_gid"]
    fast = fast.drop([c for c in (*_IDENTITY_OUT, "_gid") if c in fast.columns]).with_columns(
        [resolved[c].gather(idx) for c in _IDENTITY_OUT]
    )
    # Stamps: the last stamped row of the same stream (the fast rows' stream: no tee/srun/transport key).
    no_key = pl.all_horizontal([pl.col(k).is_null() for k in parsers.STREAM_KEYS])
    stamps = (
        gen.lazy()
        .filter(no_key & pl.col("ts").is_not_null())
        .select("_pos", "path", "ts")
        .sort("_pos")
        .collect()
    )
    prev = fast.select("_pos", "path").join_asof(
        stamps, on="_pos", by="path", strategy="backward", check_sortedness=False
    )  # fast rows are in _pos order
    fast = fast.with_columns(
        prev["ts"].alias("ts"),
        pl.when(prev["ts"].is_not_null())
        .then(pl.lit("inherited"))
        .otherwise(pl.lit("missing"))
        .alias("ts_quality"),
    )
    # Only what the table and the tee de-duplication still read goes into the (one) merge of the two parts.
    final = [*POLARS_SCHEMA, "layout", "node_key", "tee_local_rank", "record", "_pos"]
    return parsers.merge_parts(
        gen.select([c for c in final if c in gen.columns]),
        fast.select([c for c in final if c in fast.columns]),
        on_column,
    )


def load(
    root: str | os.PathLike[str], *, tz: str | None = None, fr: str | os.PathLike[str] | None = None
) -> pl.DataFrame:
    """Return the event table for ``root`` (plus the Flight Recorder dumps under ``fr``). Raises
    :class:`DiscoveryError` on a missing/empty path."""
    return ingest(root, tz=tz, fr=fr).table


__all__ = ["DiscoveryError", "IngestResult", "ingest", "load"]
