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
from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

import parsers
from correlator import fr as flight_recorder
from correlator import identity, limits
from correlator.discover import DiscoveryError, Source, discover, skipped_entries
from correlator.read import ReadResult, read_lines
from correlator.schema import PARSE_KEEP, POLARS_SCHEMA, Kind, conform
from parsers import elastic, timestamps


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


def _plain_lines(
    parts: list[tuple[int, Source, pl.Series]], first: list[int] | None = None, key: str = "__src"
) -> pl.DataFrame:
    """The frame of physical lines of many plain sources at once (one polars frame, not one per file:
    a directory of 10,000 tiny files costs one frame build). Same columns as :func:`_with_source`, the
    source index in column ``key``. ``first``: the line number of each part's first line (default 1; the
    live watcher reads files from an offset)."""
    meta = pl.DataFrame(
        {
            key: [i for i, _, _ in parts],
            "first": first if first is not None else [1] * len(parts),
            "path": [s.rel for _, s, _ in parts],
            "n": [lines.len() for _, _, lines in parts],
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
    # No rechunk: the frame refers to the files' text buffers instead of a second copy of all of it.
    raw = pl.concat([lines for _, _, lines in parts], rechunk=False).alias("raw")
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


def _source_frame(
    src: Source, progress: Callable[[Source], None] | None
) -> tuple[pl.DataFrame | None, ReadResult]:
    """Read one source. Returns a frame for an error.json record, or None for plain lines (in ``res.lines``)."""
    res = read_lines(src.path, src.rel)
    if progress:
        progress(src)
    n = res.lines.len()
    if src.layout == "error_json" and n:
        text = "\n".join(res.lines.to_list())
        try:
            parsed = elastic.parse_error_json(text)
        except (ValueError, TypeError, OverflowError, RecursionError):  # hostile JSON must not stop ingest
            parsed = None
        if parsed is not None:
            epoch, code = parsed["epoch_s"], parsed["exit_code"]
            if not (isinstance(epoch, int) and 0 <= epoch < 2**40):
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


def _mark_duplicates(df: pl.DataFrame) -> pl.DataFrame:
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
    dup = (
        pl.Series("duplicate", [False]).extend_constant(False, df.height - 1)
        if df.height
        else pl.Series("duplicate", [], pl.Boolean)
    )
    return df.with_columns(dup.scatter(hits, True) if hits.len() else dup)


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


#: The names ``ingest(on_phase=...)`` is called with, in order (after the per-file ``progress`` calls).
PHASES = ("parsing lines", "reading timestamps", "resolving rank identity", "building the event table")


def ingest(
    root: str | os.PathLike[str],
    *,
    tz: str | None = None,
    progress: Callable[[Source], None] | None = None,
    on_sources: Callable[[list[Source]], None] | None = None,
    fr: str | os.PathLike[str] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> IngestResult:
    """Read every log under ``root`` (a directory or one file) into the event table.

    ``tz``: IANA zone for stamps that carry none (default UTC). ``progress`` is called once per file
    read; ``on_sources`` once with the list of files found; ``on_phase`` with the name of each step after
    reading as it starts (:data:`PHASES`, in that order), so a progress display moves between files and phases. ``fr``: a directory of Flight Recorder dumps
    kept elsewhere (dumps under ``root`` are found anyway; see :mod:`correlator.fr`). Raises :class:`DiscoveryError` if ``root``
    is missing, holds no file, or no line of any file could be read (all empty, binary or unreadable);
    every other problem becomes a warning.
    """
    sources, warnings = discover(root)
    if on_sources:
        on_sources(sources)
    fr_rows = flight_recorder.collect([(s.path, s.rel) for s in sources if s.layout == "fr_dump"], fr)
    warnings.extend(fr_rows.warnings)
    frames, plain, lines_read, skipped = [], [], 0, 0
    by_reason: dict[str, int] = {}
    skipped_list = skipped_entries(warnings)
    # Frames are built in path order (``path`` is ``Source.rel``), so the table usually needs no final sort.
    order = {id(s): k for k, s in enumerate(sorted(sources, key=lambda s: s.rel))}
    for src in sources:
        i = order[id(src)]
        if src.layout == "fr_dump":  # read by correlator.fr above, not as lines
            continue
        frame, res = _source_frame(src, progress)
        if frame is not None:
            frames.append(frame.with_columns(pl.lit(i, dtype=pl.Int64).alias("__src")))
        elif res.lines.len():
            plain.append((i, src, res.lines))
        lines_read += res.physical_lines
        skipped += res.skipped_lines
        skipped_list.extend(res.skipped)
        for e in res.skipped:
            if e["lines"]:
                by_reason[str(e["reason"])] = by_reason.get(str(e["reason"]), 0) + int(e["lines"])  # type: ignore[call-overload]
        warnings.extend(res.warnings)
    if plain:
        plain.sort(key=lambda part: part[0])
        frames.append(_plain_lines(plain))
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
    df = df.drop("__src")
    mtimes = [s.path.stat().st_mtime for s in sources if s.path.exists()]
    year = dt.datetime.fromtimestamp(max(mtimes), dt.UTC).year if mtimes else dt.datetime.now(dt.UTC).year
    if on_phase:
        on_phase("parsing lines")
    gen, fast = parsers.parse_lines_split(df, keep=PARSE_KEEP)
    del df
    if "exit_code_json" in gen.columns:
        gen = gen.with_columns(pl.coalesce(pl.col("exit_code"), pl.col("exit_code_json")).alias("exit_code"))
    if on_phase:
        on_phase("reading timestamps")
    gen = timestamps.build_ts(gen, year, tz)  # fast-path rows carry no stamp of their own
    if on_phase:
        on_phase("resolving rank identity")
    if fast is None:
        df = timestamps.inherit(identity.resolve(gen), parsers.STREAM_KEYS)
    else:
        df = _resolve_with_fast_rows(gen, fast)
    if on_phase:
        on_phase("building the event table")
    df = limits.cap_values(df, warnings)
    df = _mark_duplicates(df)
    if fr_rows.table.height:
        df = pl.concat([df, fr_rows.table], how="diagonal_relaxed")
    if not _sorted_by_path_line(df):
        df = df.sort("path", "line", maintain_order=True)
    df = df.drop("_pos").with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64))
    return IngestResult(conform(df), sources, warnings, lines_read, skipped, by_reason, skipped_list)


#: What identity resolution sets on a row (the rest of a fast-path row is known after parsing).
_IDENTITY_OUT = ("rank", "rank_source", "local_rank", "host", "attempt")


def _resolve_with_fast_rows(gen: pl.DataFrame, fast: pl.DataFrame) -> pl.DataFrame:
    """Identity and inherited stamps for the generic rows and the NCCL COLL fast-path rows, in two passes
    over small frames: the fast rows of one (file, host, pid) are alike for identity, so each such group
    goes into :func:`identity.resolve` as ONE summary row weighted by its size (:data:`identity.WEIGHT`);
    its results are joined back onto the group's rows. Stamps: a fast row takes the last stamp of its
    stream before it (an as-of join on the row position), exactly what :func:`timestamps.inherit` gives.

    Fast rows stay whole where the summary would not be exact: files read as combined streams (launcher
    pairing reads their text) and files with restart lines (attempts count restarts line by line)."""
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
    groups = fast.filter(starts).with_columns(
        fast.group_by("_gid", maintain_order=True).len()["len"].cast(pl.Int64).alias(identity.WEIGHT)
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
    )


def load(
    root: str | os.PathLike[str], *, tz: str | None = None, fr: str | os.PathLike[str] | None = None
) -> pl.DataFrame:
    """Return the event table for ``root`` (plus the Flight Recorder dumps under ``fr``). Raises
    :class:`DiscoveryError` on a missing/empty path."""
    return ingest(root, tz=tz, fr=fr).table


__all__ = ["DiscoveryError", "IngestResult", "ingest", "load"]
