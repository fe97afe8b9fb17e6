"""Ingest: a directory of logs -> the event table (``correlator.schema``).

discover -> read -> demultiplex + parse (``parsers``) -> timestamps -> rank identity -> tee de-duplication.
Every readable line ends up in exactly one row; what could not be read is reported in
``IngestResult.warnings`` and counted in ``IngestResult.skipped_lines``.

Shape of the work (issue 13): one frame of physical lines (one text column, ``raw``; ``body`` starts as the
same buffer); ``parsers.parse_lines_split`` sends NCCL COLL lines of plain files down a one-regex fast path
and everything else through every prefix and rule, and hands on only the event-table columns plus
:data:`correlator.schema.INTERMEDIATE_COLUMNS`. Stamps and identity then run on the generic rows plus one weighted summary
row per run of fast rows of one (file, host, pid) (:func:`resolve_with_fast_rows`); the two parts are
merged once, narrow, at the end.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import polars as pl

import parsers
from correlator import fr_load as flight_recorder
from correlator import identity, limits, stacks
from correlator.discover import DiscoveryError, Source, discover, skipped_entries
from correlator.fastrows import (
    CollCut,
    full_event_ids,
    parse_reduced,
    reread,
    resolve_with_fast_rows,
)
from correlator.lines import compact, plain_lines
from correlator.pool import in_order
from correlator.read import ReadResult, read_lines
from correlator.schema import PARSE_KEEP, Kind, conform, kinds_by_count
from correlator.smallfile import SmallFile, read_small_lines
from parsers import coll, elastic, timestamps
from parsers.rules import parallelism, true_at


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
        kinds = kinds_by_count(dict(t.group_by("kind").len().iter_rows()))
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

    An ``error.json`` is read with the small-file limit (:func:`correlator.smallfile.read_small`): a larger one
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


@dataclass
class _Read:
    """What reading the files gave :func:`ingest`: frames (already parsed: error.json, stack dumps…), plain
    line lists (source order, file), each file's mtime, counts, warnings."""

    frames: list[pl.DataFrame] = field(default_factory=list)
    #: ``(source index, source, lines, line number of the first)``: a file past a cap gives two (head, tail).
    plain: list[tuple[int, Source, pl.Series | list[str], int]] = field(default_factory=list)
    mtimes: list[float | None] = field(default_factory=list)
    lines_read: int = 0
    skipped: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    skipped_list: list[dict[str, object]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


#: Bytes of files (their size on disk) read ahead on threads while the files before them are handed on
#: (:func:`_reads`); a file larger than this is read alone.
READ_AHEAD_BYTES = 32 << 20


class _BytesRead:
    """The ``READING`` progress of files read on several threads: the bytes read of every file (per MiB within
    a large file, :func:`correlator.read.read_lines`'s ``on_bytes``, and all of it once it is handed on),
    summed and reported under a lock, so the reports never go back whatever the order of the threads."""

    def __init__(self, report: Callable[[str, int, int], None] | None, total: int) -> None:
        self.report, self.total, self.done = report, total, 0
        self.seen: dict[int, int] = {}
        self.lock = threading.Lock()

    def _add(self, key: int, upto: int) -> None:
        with self.lock:
            was = self.seen.get(key, 0)
            if upto > was:
                self.seen[key] = upto
                self.done += upto - was
                if self.report is not None:
                    self.report(READING, self.done, self.total)

    def within(self, src: Source) -> Callable[[int], None] | None:
        """``on_bytes`` of ``src``'s read."""
        if self.report is None:
            return None
        return lambda n: self._add(id(src), min(n, src.size))

    def finish(self, src: Source) -> None:
        """``src`` is read whole: all its bytes count."""
        self._add(id(src), src.size)


def _reads(
    sources: list[Source], read: _BytesRead, lim: limits.Limits
) -> Iterator[tuple[Source, pl.DataFrame | None, ReadResult]]:
    """:func:`source_frame` of each of ``sources`` (Flight Recorder dumps left out), in order, read ahead on
    up to ``rules.parallelism`` threads (reading is system calls, decoding and polars' CSV reader, which
    release the GIL in large part; 16-rank COLL job, 61 MB in 16 files, 2 cores, in process: 0.19 s one file
    after another, 0.15 s two at a time), at most :data:`READ_AHEAD_BYTES` (or one file) ahead of the file
    handed on, so the text held beyond the reader's is bounded (:func:`correlator.pool.in_order`, weighed
    by file size). Progress within each file goes to ``read``."""
    files = [s for s in sources if s.layout != "fr_dump"]

    def one(src: Source) -> tuple[Source, pl.DataFrame | None, ReadResult]:
        return (src, *source_frame(src, None, read.within(src), lim))

    yield from in_order(
        one,
        files,
        parallelism(len(files)),
        weight=lambda src: src.size,
        max_weight=READ_AHEAD_BYTES,
        name="read",
    )


def _read_all(
    sources: list[Source],
    order: dict[int, int],
    cut: CollCut | None,
    progress: Callable[[Source], None] | None,
    on_progress: Callable[[str, int, int], None] | None,
    total_bytes: int,
) -> _Read:
    """Read every file of ``sources`` (Flight Recorder dumps are read by :mod:`correlator.fr_load`): lines
    to ``plain`` or, with ``cut``, to the NCCL COLL cut; files parsed whole to ``frames``. ``progress(src)``
    is called after each file is read, in order."""
    rd = _Read()
    frames, plain, mtimes, by_reason = rd.frames, rd.plain, rd.mtimes, rd.by_reason
    read = _BytesRead(on_progress, total_bytes)
    lim = limits.current()  # read once, not per file
    # Each file's modification time (for the year of stamps without one): from the fstat of its read, else
    # one stat (a dump, an error.json, a file not read)
    mtimes.extend(_mtime(s.path) for s in sources if s.layout == "fr_dump")
    try:
        for src, frame, res in _reads(sources, read, lim):
            if progress:
                progress(src)
            i = order[id(src)]
            mtimes.append(res.mtime if res.mtime is not None else _mtime(src.path))
            read.finish(src)
            if frame is not None:
                frames.append(frame.with_columns(pl.lit(i, dtype=pl.Int64).alias("__src")))
            elif res.n_lines and cut is not None:
                runs = res.parts()
                for k, (first, lines) in enumerate(runs):
                    known = res.text_bytes if len(runs) == 1 else None
                    cut.add(i, src, lines, known, first, more=k < len(runs) - 1)
            elif res.n_lines:
                plain.extend((i, src, lines, first) for first, lines in res.parts())
            rd.lines_read += res.physical_lines
            rd.skipped += res.skipped_lines
            rd.skipped_list.extend(res.skipped)
            for e in res.skipped:
                if e["lines"]:
                    by_reason[str(e["reason"])] = by_reason.get(str(e["reason"]), 0) + int(e["lines"])  # type: ignore[call-overload]
            rd.warnings.extend(res.warnings)
        if cut is not None:
            frames.extend(cut.finish())
    finally:
        if cut is not None:
            cut.close()
    return rd


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
    (:data:`CUT_BATCH_BYTES` of text) in a worker thread while later files are read (:class:`CollCut`),
    so the text of the lines cut is held for a few batches only (:data:`_IN_FLIGHT` waiting for the cut
    plus the one being read); a file that must be parsed whole after all is read again from disk, as it is
    then (:func:`parse_reduced`). The rows that remain are the rows of the
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
    report(READING, 0, total_bytes)
    fr_rows = flight_recorder.collect([(s.path, s.rel) for s in sources if s.layout == "fr_dump"], fr)
    warnings.extend(fr_rows.warnings)
    by_reason: dict[str, int] = {}
    skipped_list = skipped_entries(warnings)
    # Frames are built in path order (``path`` is ``Source.rel``), so the table usually needs no final sort.
    order = {id(s): k for k, s in enumerate(sorted(sources, key=lambda s: s.rel))}
    cut = CollCut(keep_coll) if keep_coll is not None else None
    rd = _read_all(sources, order, cut, progress, on_progress, total_bytes)
    frames, plain, mtimes = rd.frames, rd.plain, rd.mtimes
    lines_read, skipped = rd.lines_read, rd.skipped
    warnings.extend(rd.warnings)
    skipped_list.extend(rd.skipped_list)
    for k, v in rd.by_reason.items():
        by_reason[k] = by_reason.get(k, 0) + v
    if plain:
        plain.sort(key=lambda part: part[0])  # stable: a file's head before its tail
        frames.append(plain_lines([p[:3] for p in plain], first=[p[3] for p in plain]))
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
    gen, fast, dropped = _parse(df, cut, sources, order, on_phase, on_progress)
    del df
    parsed = [gen, fast]
    del gen, fast  # the merge of the two parts frees their columns as it goes (parsers.merge_taken)
    df = _stamps_and_identity(parsed, year, tz, on_phase, report)
    warnings.extend(identity.unused_file_name_ranks(df, sources))
    if on_phase:
        on_phase(BUILDING)
    rel_of = {order[id(s)]: s.rel for s in sources} if dropped is not None and dropped.height else {}
    df, n_dropped = _build(df, fr_rows.table, dropped, rel_of, warnings)
    report(BUILDING, 1, 1)
    return IngestResult(
        conform(df), sources, warnings, lines_read, skipped, by_reason, skipped_list, n_dropped
    )


def _parse(
    df: pl.DataFrame,
    cut: CollCut | None,
    sources: list[Source],
    order: dict[int, int],
    on_phase: Callable[[str], None] | None,
    on_progress: Callable[[str, int, int], None] | None,
) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None]:
    """Scan and parse the lines of ``df``: (the generic rows, the NCCL COLL fast-path rows or None, the
    lines the cut dropped or None)."""
    report = on_progress or (lambda _step, _done, _total: None)
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
            gen, fast, dropped = parse_reduced(
                df, cut.dropped(), cut.paths, lambda rels: reread(rels, by_rel, order)
            )
        else:
            gen, fast = parsers.parse_lines_split(df, keep=PARSE_KEEP, fast=fast_rows)
    finally:
        coll.ON_ROWS.reset(token)
    report(PARSING, n_lines, n_lines)
    del fast_rows
    return gen, fast, dropped


def _stamps_and_identity(
    parts: list[pl.DataFrame | None],
    year: int,
    tz: str | None,
    on_phase: Callable[[str], None] | None,
    report: Callable[[str, int, int], None],
) -> pl.DataFrame:
    """The parsed rows with their timestamps, ranks and identity (the fast-path rows merged in); ``parts``:
    ``[the generic rows, the NCCL COLL fast-path rows or None]``, taken out of the list."""
    gen, fast = parts
    parts.clear()
    if gen is None:
        raise ValueError("_stamps_and_identity: no generic rows")
    if "exit_code_json" in gen.columns:
        gen = gen.with_columns(pl.coalesce(pl.col("exit_code"), pl.col("exit_code_json")).alias("exit_code"))
    if on_phase:
        on_phase(STAMPS)
    if fast is None:
        # The stamps are read on a thread while rank identity takes its first steps (those before one reads
        # ``ts``): each runs on about one core. A row takes its stamp by its place in ``gen`` (identity keeps
        # the rows; this does not rely on their order).
        row = "_stamp_row"

        def read_stamps(rows: pl.DataFrame) -> pl.DataFrame:
            return timestamps.build_ts(rows, year, tz).select("ts", "ts_quality")

        with ThreadPoolExecutor(max_workers=1) as pool:
            stamps = pool.submit(read_stamps, gen)

            def stamped(df: pl.DataFrame) -> pl.DataFrame:
                got, at = stamps.result(), df[row]
                report(STAMPS, 1, 1)
                if on_phase:
                    on_phase(IDENTITY)
                return df.drop(row).with_columns(got["ts"].gather(at), got["ts_quality"].gather(at))

            df = identity.resolve(gen.with_row_index(row), stamps=stamped)
        df = timestamps.inherit(df, parsers.STREAM_KEYS)
        return _assign_stack_ranks(df, report, 1)
    gen = timestamps.build_ts(gen, year, tz)  # fast-path rows carry no stamp of their own
    report(STAMPS, 1, 1)
    if on_phase:
        on_phase(IDENTITY)
    # Units of this step: the columns of the merge of the two parts (its long part) as they are merged.
    units = [1]

    def merged(done: int, total: int) -> None:
        units[0] = total
        report(IDENTITY, done, total)

    both = [gen, fast]
    del gen, fast
    df = resolve_with_fast_rows(both, merged)
    return _assign_stack_ranks(df, report, units[0])


def _assign_stack_ranks(
    df: pl.DataFrame, report: Callable[[str, int, int], None], units: int
) -> pl.DataFrame:
    """The last of identity: a stack dump named by its pid only gets its rank from the logs; the step reported
    done (``units`` of it)."""
    df = stacks.assign_ranks(df)
    report(IDENTITY, units, units)
    return df


def _build(
    df: pl.DataFrame,
    fr_table: pl.DataFrame,
    dropped: pl.DataFrame | None,
    rel_of: dict[int, str],
    warnings: list[str],
) -> tuple[pl.DataFrame, int]:
    """The event table: values capped, tee duplicates marked, Flight Recorder rows added, sorted by
    (path, line), event ids (those of the full table when NCCL COLL lines were cut). Returns it and the
    number of lines cut."""
    df = limits.cap_values(df, warnings)
    df = mark_duplicates(df)
    if fr_table.height:
        df = pl.concat([df, fr_table], how="diagonal_relaxed")
    if not _sorted_by_path_line(df):
        df = df.sort("path", "line", maintain_order=True)
    df = (
        df.drop("_pos", strict=False)
        .with_row_index("event_id")
        .with_columns(pl.col("event_id").cast(pl.Int64))
    )
    n_dropped = 0
    if dropped is not None and dropped.height:
        n_dropped = dropped.height
        df = df.with_columns(full_event_ids(df, dropped, rel_of).alias("event_id"))
    if identity.WEIGHT in df.columns:
        df = df.drop(identity.WEIGHT)
    return df, n_dropped


def table_from_parsed(parsed: pl.DataFrame, year: int, tz: str | None, warnings: list[str]) -> pl.DataFrame:
    """Parsed rows (``parsers.parse_lines``: no NCCL COLL fast-path rows, no Flight Recorder rows) -> the
    event table, by the steps :func:`ingest` runs after parsing: timestamps (``year`` for stamps without
    one, ``tz`` for those without a zone), rank identity and inheritance, stack-dump ranks, values capped
    (a warning each into ``warnings``), tee duplicates, (path, line) order, event ids.

    The live watcher (:mod:`correlator.tail`) runs it on its store of parsed lines each pass: a tail of
    appended lines cannot be a batch of :func:`correlator.batch.ingest_batch`, which reads whole files,
    because the rows of the new lines take their identity, stamps and tee pairing from lines read passes
    ago (an NCCL init line, a launcher's pid line), so these steps run over everything kept so far."""
    df = _stamps_and_identity([parsed, None], year, tz, None, lambda _step, _done, _total: None)
    df, _n = _build(df, pl.DataFrame(), None, {}, warnings)
    return conform(df)


def load(
    root: str | os.PathLike[str], *, tz: str | None = None, fr: str | os.PathLike[str] | None = None
) -> pl.DataFrame:
    """Return the event table for ``root`` (plus the Flight Recorder dumps under ``fr``). Raises
    :class:`DiscoveryError` on a missing/empty path."""
    return ingest(root, tz=tz, fr=fr).table


__all__ = [
    "DiscoveryError",
    "IngestResult",
    "compact",
    "ingest",
    "load",
    "mark_duplicates",
    "plain_lines",
    "source_frame",
    "table_from_parsed",
]
