"""Tailing for the live watcher: the files under the watched directory read from where the last pass
stopped (rotation, truncation and appended bytes), parsed, kept in a reduced store of parsed lines
(:func:`correlator.reduce.reduce_store`) and turned into the event table by ingest's own steps
(:func:`correlator.ingest.source_frame`, :func:`correlator.ingest.plain_lines`, ``parsers.parse_lines``,
:func:`correlator.ingest.table_from_parsed`). :class:`correlator.watch.Watcher` runs it once per pass.

Why the appended lines of a pass are not a batch of :func:`correlator.batch.ingest_batch` (the function
streaming and the in-memory read share): a batch is whole files read from their start, while a pass reads
byte ranges after an offset (with a carry of lines parsed again); and the new rows' timestamps, ranks and
tee pairing depend on rows read passes ago, so identity runs over the whole store each pass, not over the
new lines. The steps before and after that store are ingest's.
"""

from __future__ import annotations

import bisect
import datetime as dt
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

import parsers
from correlator.discover import DiscoveryError, Source, discover
from correlator.ingest import plain_lines, source_frame, table_from_parsed
from correlator.read import ANSI_RE, looks_binary, read_lines
from correlator.reduce import reduce_store
from correlator.schema import FAULT_KINDS, empty_table
from correlator.verdict import Diagnosis
from parsers import nccl

if TYPE_CHECKING:
    from correlator.signatures import TextPatterns

#: Most bytes read from one file in one pass, and from all files in one pass (the rest is read by the next
#: passes, which the CLI runs back to back while ``Watcher.backlog`` is true): bounded memory when a watcher
#: starts on a directory that already holds gigabytes.
MAX_READ_BYTES = 64 * 1024**2
MAX_PASS_BYTES = 256 * 1024**2
#: Most physical lines carried over to the next pass's parse per file.
MAX_CARRY_LINES = 4096
HEAD_KEEP = 2


@dataclass
class Tail:
    """Read state of one file (keyed by its (device, inode))."""

    src: Source  # the source as first discovered (its rows keep this path)
    inode: tuple[int, int]
    offset: int = 0
    partial: bytes = b""
    quiet: int = 0  # passes without new bytes
    next_line: int = 1  # number of the next physical line
    carry: list[str] = field(default_factory=list)  # lines from carry_first on, re-parsed with the next lines
    carry_first: int = 1
    binary: bool = False
    whole_sig: tuple[int, int] | None = None  # (size, mtime_ns) of a file read whole (error.json, .gz)
    pending_sig: tuple[int, int] | None = None
    seen_path: str = ""
    idx: int = 0  # the ``wsrc`` column of its rows
    path: Path | None = None  # where the file is now (a rotated file moves)
    reset: bool = False  # truncated: its earlier rows are dropped


def _decode(data: bytes) -> list[str]:
    """Complete lines of ``data`` (which ends with a newline) decoded as ``correlator.read.read_lines`` does."""
    if b"\x00" in data:
        data = data.replace(b"\x00", b"")
    text = data.decode("utf-8", errors="replace")
    text = text.removesuffix("\n")
    lines = text.split("\n")
    if "\r" in text:
        lines = [ln.removesuffix("\r") for ln in lines]
        lines = [ln.rsplit("\r", 1)[-1] if "\r" in ln else ln for ln in lines]
    if "\x1b[" in text:
        lines = [ANSI_RE.sub("", ln) for ln in lines]
    return lines


def _lines_frame(parts: list[tuple[int, Source, list[str], int]]) -> pl.DataFrame:
    """The frame of physical lines of the appended parts ``(source index, source, lines, first line
    number)``: :func:`correlator.ingest.plain_lines` with the source index in ``wsrc``."""
    return plain_lines(
        [(i, s, pl.Series("raw", lines, dtype=pl.String)) for i, s, lines, _ in parts],
        first=[f for _, _, _, f in parts],
        key="wsrc",
    )


def restart_line(rows: list[tuple[int, int, tuple]], floor: int, window: int = 256) -> int:
    """The first line of the next pass's parse for one file: a line before which every record is complete.

    ``rows``: (line, line_count, stream key) of the rows of the latest parse (lines >= ``floor``, sorted).
    Start at the earliest last-record of any stream (its record may continue); move back over any stream's
    last multi-line record before that point (its lines may run past it); then one more row back (the row
    before a record is context: the ``Root Cause`` header of a ChildFailedError block, a wrapped line).
    A stream whose last record started more than ``window`` lines before the file's last row is taken as
    finished (a rank that stopped writing to a shared launcher file must not pin the carry there).
    """
    if not rows:
        return floor
    recent = rows[-1][0] - window
    starts: dict[tuple, list[int]] = {}
    counts: dict[int, int] = {}
    for ln, lc, key in rows:
        starts.setdefault(key, []).append(ln)
        counts[ln] = max(counts.get(ln, 0), lc)
    starts = {k: v for k, v in starts.items() if v[-1] >= recent}
    cs = min(v[-1] for v in starts.values())

    def settle(cs: int) -> int:
        moved = True
        while moved:
            moved = False
            for v in starts.values():
                i = bisect.bisect_left(v, cs) - 1
                if i >= 0 and v[i] >= recent and counts.get(v[i], 1) > 1:
                    cs, moved = v[i], True
        return cs

    cs = settle(cs)
    all_starts = sorted(counts)
    i = bisect.bisect_left(all_starts, cs) - 1
    if i >= 0:
        cs = settle(all_starts[i])
    return max(cs, floor)


class WatchState:
    """The state a :class:`correlator.watch.Watcher` keeps between passes (set in its ``__init__``), shared
    by its parts: tailing and the store (:class:`TailReader`), alerts (:class:`correlator.alerts.AlertRules`),
    the Prometheus text file (:class:`correlator.prometheus.PrometheusWriter`)."""

    root: Path
    clock: Callable[[], float]
    wallclock: Callable[[], dt.datetime]
    tails: dict[tuple[int, int], Tail]
    by_path: dict[str, tuple[int, int]]
    store: pl.DataFrame | None
    table: pl.DataFrame
    diagnosis: Diagnosis | None
    warnings: list[str]
    passes: int
    lines_read: int
    bytes_read: int
    exit_seen: str | None
    _exited: bool
    _year: int
    _sig_extra: list[Path]
    _sigs: list[Any] | None
    _text: TextPatterns | None
    _alerted_init: set[int]
    _last_key: tuple[str, tuple[int, ...]] | None
    _progress: dict[int, tuple]
    _last_adv: dict[int, float]
    _flagged: dict[int, str]
    _stalled_alerted: bool
    behind: set[int]
    faults_by_kind: dict[str, int]
    alerts_by_type: dict[str, int]
    last_pass_cpu_s: float
    timings: dict[str, float]
    backlog: bool
    _budget: int
    _reclassified: bool
    stall: float
    keep_last: int
    tz: str | None

    def ranks_seen(self) -> list[int]:
        """The ranks the table names so far."""
        return sorted(int(r) for r in self.table["rank"].drop_nulls().unique().to_list())


class TailReader(WatchState):
    """Reading and the store of a :class:`correlator.watch.Watcher` (see the module docstring)."""

    # ------------------------------------------------------------------ reading
    def _sources(self) -> list[Source]:
        try:
            sources, warnings = discover(self.root)
        except DiscoveryError:
            return []  # an empty directory: the job has not written anything yet
        for w in warnings:
            if w not in self.warnings:
                self.warnings.append(w)
        return sources

    def _tail_for(self, src: Source) -> tuple[Tail | None, os.stat_result | None]:
        try:
            st = os.stat(src.path)
        except OSError:
            return None, None
        key = (st.st_dev, st.st_ino)
        t = self.tails.get(key)
        if t is None:
            old = self.by_path.get(src.rel)
            if old is not None and old != key:
                self._warn(
                    f"{src.rel}: replaced by a new file (rotation); reading the new file from its start"
                )
            t = Tail(src, key, seen_path=src.rel, idx=len(self.tails))
            self.tails[key] = t
        elif t.seen_path != src.rel:
            if self.by_path.get(t.seen_path) == key:
                del self.by_path[t.seen_path]
            self._warn(f"{t.seen_path}: renamed to {src.rel} (rotation); following it there")
            t.seen_path = src.rel
        if (src.layout, src.rank, src.stream) != (t.src.layout, t.src.rank, t.src.stream):
            self._reclassify(t, src)
        self.by_path[src.rel] = key
        t.path = src.path
        return t, st

    def _reclassify(self, t: Tail, src: Source) -> None:
        """A file that discovery now reads otherwise — a task file whose siblings appeared after it
        (``srun --output=%t`` files of a starting job: a rank from its name only once they are there): its
        rows already stored take what the path now says, so identity resolves them with the new ones."""
        t.src = replace(t.src, layout=src.layout, rank=src.rank, stream=src.stream, notes=src.notes)
        if self.store is None or self.store.height == 0:
            return
        hit = pl.col("wsrc") == t.idx
        self.store = self.store.with_columns(
            pl.when(hit).then(pl.lit(src.layout)).otherwise(pl.col("layout")).alias("layout"),
            pl.when(hit).then(pl.lit(src.stream)).otherwise(pl.col("stream")).alias("stream"),
            pl.when(hit)
            .then(pl.lit(src.rank, dtype=pl.Int32))
            .otherwise(pl.col("src_rank"))
            .alias("src_rank"),
        )
        self._reclassified = True

    def _warn(self, msg: str) -> None:
        self.warnings.append(msg)

    def _read_plain(self, t: Tail, st: os.stat_result) -> list[str]:
        """New complete lines of a plain file (and flush a partial last line after two quiet passes)."""
        size = st.st_size
        if self._budget <= 0 and size > t.offset:
            self.backlog = True
            return []
        if size < t.offset:
            self._warn(
                f"{t.seen_path}: truncated (size {size} < {t.offset} read); reading it again from the start"
            )
            t.offset, t.partial, t.next_line, t.carry, t.carry_first, t.reset = 0, b"", 1, [], 1, True
        if size == t.offset:
            t.quiet += 1
            if t.partial and t.quiet == 2:
                data, t.partial = t.partial + b"\n", b""
                return _decode(data)
            return []
        try:
            with open(t.path or t.src.path, "rb") as fh:  # read-only, no lock
                fh.seek(t.offset)
                data = fh.read(min(size - t.offset, MAX_READ_BYTES, self._budget))
        except OSError as e:
            self._warn(f"{t.src.rel}: cannot read ({e.strerror or e})")
            return []
        if not data:
            return []
        if t.offset == 0 and looks_binary(data):
            t.binary = True
            self._warn(f"{t.src.rel}: skipped, binary content")
            return []
        t.offset += len(data)
        self.bytes_read += len(data)
        self._budget -= len(data)
        if t.offset < size:
            self.backlog = True
        t.quiet = 0
        data = t.partial + data
        cut = data.rfind(b"\n")
        if cut < 0:
            t.partial = data
            return []
        t.partial = data[cut + 1 :]
        return _decode(data[: cut + 1])

    def _read_whole(self, t: Tail, st: os.stat_result) -> pl.DataFrame | None:
        """An error.json / .gz file: parsed whole once its (size, mtime) held still for one pass."""
        sig = (st.st_size, st.st_mtime_ns)
        if sig == t.whole_sig or st.st_size == 0:
            return None
        if sig != t.pending_sig:
            t.pending_sig = sig
            return None
        t.whole_sig = sig
        src = replace(t.src, path=t.path or t.src.path)
        if src.layout == "error_json":
            frame, res = source_frame(src, None)
        else:
            frame, res = None, read_lines(src.path, src.rel)
        self.warnings.extend(w for w in res.warnings if w not in self.warnings)
        self.bytes_read += st.st_size
        if frame is None:
            if not res.lines.len():
                return None
            return _lines_frame([(t.idx, src, list(lines), first) for first, lines in res.parts()])
        return frame.with_columns(pl.lit(t.idx, dtype=pl.Int64).alias("wsrc"))

    # ------------------------------------------------------------------ one pass

    def _ingest_new(
        self, plain: list[tuple[Tail, list[str], int]], whole: list[pl.DataFrame], cut: dict[int, int]
    ) -> None:
        frames = list(whole)
        if plain:
            frames.append(_lines_frame([(t.idx, t.src, lines, first) for t, lines, first in plain]))
        if not frames:  # only truncations: drop those files' rows
            if self.store is not None:
                limit = pl.col("wsrc").replace_strict(cut, default=None, return_dtype=pl.Int64)
                self.store = self.store.filter(limit.is_null() | (pl.col("line") < limit))
                self._finish()
            return
        c0 = time.process_time()
        df = pl.concat(frames, how="diagonal_relaxed").sort("wsrc", "line", maintain_order=True)
        parsed = parsers.parse_lines(df)
        if plain:  # each plain file's carry for the next pass
            keys = [c for c in parsers.STREAM_KEYS if c in parsed.columns]
            key = (
                pl.concat_list([pl.col(k).cast(pl.String) for k in keys])
                if keys
                else pl.lit([], dtype=pl.List(pl.String))
            )
            sub = (
                parsed.filter(pl.col("wsrc").is_in([t.idx for t, _, _ in plain]))
                .select("wsrc", "line", "line_count", key.alias("k"))
                .sort("wsrc", "line")
            )
            per_src: dict[int, list[tuple[int, int, tuple]]] = {}
            for i, ln, lc, k in sub.iter_rows():
                per_src.setdefault(i, []).append((ln, lc, tuple(k or ())))
            for t, lines, first in plain:
                rows = per_src.get(t.idx, [])
                cs = restart_line(rows, first)
                if first + len(lines) - cs > MAX_CARRY_LINES:
                    cs = max(first + len(lines) - MAX_CARRY_LINES, rows[-1][0] if rows else first)
                t.carry = lines[cs - first :]
                t.carry_first = cs
        c1 = time.process_time()
        self.timings["parse"] = c1 - c0
        store = self.store
        if store is not None and cut:
            limit = pl.col("wsrc").replace_strict(cut, default=None, return_dtype=pl.Int64)
            store = store.filter(limit.is_null() | (pl.col("line") < limit))
        store = (
            parsed
            if store is None or store.height == 0
            else pl.concat([store, parsed], how="diagonal_relaxed")
        )
        self.store = self._reduce(store)
        self._finish()
        self.timings["table"] = time.process_time() - c1

    def _reduce(self, store: pl.DataFrame) -> pl.DataFrame:
        """Keep every non-routine row; of routine rows the first 2 and last ``keep_last`` per group; of a
        training script's own lines the first and last few; of both, every line a signature's regex could
        match (see :func:`correlator.reduce.reduce_store`)."""
        keys = [
            "wsrc",
            *[c for c in parsers.STREAM_KEYS if c in store.columns],
            "kind",
            *[c for c in ("pg", "comm") if c in store.columns],
        ]
        return reduce_store(store, keys, self.keep_last, HEAD_KEEP, self._signature_text())

    def _signature_text(self) -> TextPatterns:
        """The text patterns of the signatures matched (the built-in library plus ``signatures``, loaded once
        for the alerts too), whose lines the store keeps whole."""
        if self._text is None:
            from correlator import signatures
            from correlator.reduce import signature_patterns

            if self._sigs is None:
                self._sigs = signatures.load_signatures(self._sig_extra)
            self._text = signature_patterns(self._sigs)
        return self._text

    def _finish(self) -> None:
        """Store -> event table: communicators, timestamps, identity, inheritance, tee duplicates."""
        df = self.store
        if df is None or df.height == 0:
            self.table, self.faults_by_kind = empty_table(), {}
            return
        df = nccl.resolve_comms(df)  # COLL lines of a pass name comm pointers whose Init lines came earlier
        # ingest's own steps after parsing (the reason a tail is not a batch: see table_from_parsed)
        capped: list[str] = []
        self.table = table_from_parsed(df, self._year, self.tz, capped)
        self.warnings.extend(w for w in capped if w not in self.warnings)
        faults = self.table.filter(pl.col("kind").is_in(list(FAULT_KINDS)) & ~pl.col("duplicate"))
        self.faults_by_kind = dict(faults.group_by("kind").len().iter_rows())
        exits = parsers.exit_reports(self.table)
        if exits.height and not self.exit_seen:
            r = exits.row(0, named=True)
            self.exit_seen = f"{r['path']}:{r['line']}"

    # ------------------------------------------------------------------ verdict and alerts
