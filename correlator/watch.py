"""Follow a running job's logs and raise alerts while it is still alive (``rankscope watch DIR``).

One *pass* (:meth:`Watcher.poll`) does, in this order:

1. ``correlator.discover.discover(root)`` — new ranks, attempts and rotated files appear as new sources;
2. a tail read of every source: only the bytes appended since the last pass (per-file byte offset and the
   partial last line are kept; a file that shrank was truncated and is read again from 0; a path whose inode
   changed was rotated, and the old inode found under its new name keeps its offset). Files are opened
   read-only and never locked. Bytes are decoded as ``correlator.read`` does (UTF-8 with replacement, NUL
   bytes dropped, CRLF, bare-CR redraws, ANSI colours); ``error.json`` and ``.gz`` files are read whole once
   their size is stable for one pass;
3. the new lines — plus a short *carry* of already-read lines whose record may still be open (a traceback
   being written, the ``Root Cause`` header before a ChildFailedError block) — go through the same parsers
   as ingest (``parsers.parse_lines``); the carry rows replace their earlier parse. Parsing cost per pass is
   proportional to the appended bytes;
4. the parsed rows join a *store* reduced like ``correlator.streaming`` reduces (every non-routine row, and of
   the routine families — NCCL COLL / DETAIL fingerprints, progress lines, INFO chatter — the first 2 and
   last ``keep_last`` per file, stream, kind and communicator); timestamps, rank identity
   (``correlator.identity.resolve``, which needs a file's whole context) and tee de-duplication run on that
   small store; ``correlator.diagnose`` runs on the result when new rows arrived;
5. alerts (:class:`Alert`): a new would-be initiator (a rank the diagnosis names as initiating that no other
   rank's fault explains), a changed verdict, and stragglers by silence (``stall`` seconds by the watcher's
   clock): a rank that stopped advancing (step / SeqNum / opCount) while others kept going, a collective
   every rank but a few entered, or a job whose ranks all stopped, naming the odd one out.

The verdict of a pass is an *incremental* verdict on the reduced store. :func:`full_verdict` is the final
verdict: the normal ``ingest`` + ``diagnose`` on the files as they are, exactly what ``rankscope diagnose``
gives. The watcher's clock is injectable (``clock``, ``wallclock``) so tests drive passes deterministically.

Known limits: a record split across passes is re-parsed whole only when its lines stay within the carry
(at most 4,096 lines; a stream of a shared file that wrote nothing for 256 lines counts as finished); a
per-file decision the parsers make from a file's share of prefixed lines (tee, srun labels) is made per
pass; a last line without a newline is taken as complete after two quiet passes (a writer that later
finishes it produces two rows); the rows of a file renamed by rotation keep the name it had when they were
read; a job that ends cleanly at torchrun's default log level logs no exit line (``--until-exit`` then
waits: stop it with Ctrl-C).
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import os
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

import parsers
from correlator import identity
from correlator.diagnose import Diagnosis, diagnose
from correlator.discover import DiscoveryError, Source, discover
from correlator.ingest import _mark_duplicates, _plain_lines, _source_frame
from correlator.read import _ANSI_RE, _looks_binary, read_lines
from correlator.schema import FAULT_KINDS, Kind, conform, empty_table
from parsers import nccl, timestamps

#: Row kinds that are routine at volume: reduced to the first 2 and last ``keep_last`` rows per group
#: (``log`` rows only when they are NCCL INFO chatter).
ROUTINE_KINDS = frozenset(
    {"nccl_coll", "collective_fingerprint", "step_progress", "log", "blank", "unparsed"}
)
#: NCCL INFO lines kept whole: they map addresses to hosts and state topology (as in correlator.streaming).
_NCCL_KEEP = ("Bootstrap", "NET/IB : Using", "NET/Socket : Using", "Using network")
_SEQ_KINDS = (Kind.NCCL_COLL, Kind.COLLECTIVE_FINGERPRINT)
#: Most bytes read from one file in one pass, and from all files in one pass (the rest is read by the next
#: passes, which the CLI runs back to back while ``Watcher.backlog`` is true): bounded memory when a watcher
#: starts on a directory that already holds gigabytes.
MAX_READ_BYTES = 64 * 1024**2
MAX_PASS_BYTES = 256 * 1024**2
#: Most physical lines carried over to the next pass's parse per file.
MAX_CARRY_LINES = 4096
_HEAD_KEEP = 2


def parse_duration(text: str | float) -> float:
    """``"2s"``, ``"500ms"``, ``"1.5m"``, ``"2h"``, ``"120"`` (seconds) -> seconds. Raises ValueError."""
    if isinstance(text, (int, float)):
        return float(text)
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|min|h)?\s*", str(text))
    if not m:
        raise ValueError(f"{text!r}: not a duration (use e.g. 2s, 500ms, 1m, 2h)")
    value = float(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    if value <= 0:
        raise ValueError(f"{text!r}: a duration must be positive")
    return value


@dataclass
class Alert:
    """One alert: a JSON line on stdout (``to_json``) or a readable line (``to_text``).

    ``alert``: ``initiator`` (a fault no other rank explains yet) | ``verdict_changed`` (also: the first
    fault when the verdict can name no initiating rank; ``rank`` is then null) | ``straggler`` (a
    collective every rank but a few entered, the rest silent for ``stall`` s) | ``silent`` (a rank that
    stopped advancing while others kept going for ``stall`` s) | ``stalled`` (every rank stopped for
    ``stall`` s; ``rank`` is the odd one out, or null when none stands out). ``kind`` is the rank's first
    fault kind (``initiator``), the failure kind (``verdict_changed``) or ``no_progress``. ``evidence`` is
    ``path:line`` relative to the watched directory. ``verdict``: the verdict so far (failure kind,
    initiating and collateral ranks, confidence, summary). ``time``: wall clock, ISO 8601 UTC.
    """

    time: str
    alert: str
    rank: int | None
    host: str | None
    kind: str | None
    signature: str | None
    evidence: str | None
    evidence_text: str | None
    reason: str
    verdict: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        from correlator.report import json_default

        return json.dumps(asdict(self), default=json_default)

    def to_text(self) -> str:
        who = "job" if self.rank is None else f"rank {self.rank}" + (f" ({self.host})" if self.host else "")
        sig = f" [{self.signature}]" if self.signature else ""
        at = f" at {self.evidence}" if self.evidence else ""
        v = self.verdict
        so_far = (
            f" | verdict so far: {v.get('failure_kind')}, initiating {v.get('initiating_ranks')}"
            if v.get("failure_kind") not in (None, "none")
            else ""
        )
        return f"{self.time} ALERT {self.alert}: {who} {self.kind or ''}{sig}{at} — {self.reason}{so_far}"


@dataclass
class _Tail:
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
        lines = [_ANSI_RE.sub("", ln) for ln in lines]
    return lines


def _lines_frame(parts: list[tuple[int, Source, list[str], int]]) -> pl.DataFrame:
    """The frame of physical lines of the appended parts ``(source index, source, lines, first line
    number)``: :func:`correlator.ingest._plain_lines` with the source index in ``wsrc``."""
    return _plain_lines(
        [(i, s, pl.Series("raw", lines, dtype=pl.String)) for i, s, lines, _ in parts],
        first=[f for _, _, _, f in parts],
        key="wsrc",
    )


def _restart_line(rows: list[tuple[int, int, tuple]], floor: int, window: int = 256) -> int:
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


class _Exec:
    """Runs ``--exec CMD`` once per alert (alert JSON on stdin) in one background thread, in order, each with
    a timeout; never blocks the watcher (a full queue drops the alert's command with a warning)."""

    def __init__(self, cmd: str, timeout_s: float, warn: Callable[[str], None]) -> None:
        self.cmd, self.timeout_s, self.warn = cmd, timeout_s, warn
        self.q: queue.Queue[str | None] = queue.Queue(maxsize=256)
        self.thread = threading.Thread(target=self._run, name="rankscope-watch-exec", daemon=True)
        self.thread.start()

    def submit(self, payload: str) -> None:
        try:
            self.q.put_nowait(payload)
        except queue.Full:
            self.warn("--exec: 256 alert commands pending; this alert's command is dropped")

    def _run(self) -> None:
        while True:
            payload = self.q.get()
            if payload is None:
                return
            try:
                r = subprocess.run(
                    self.cmd,
                    shell=True,
                    input=payload.encode(),
                    timeout=self.timeout_s,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    check=False,
                )
                if r.returncode:
                    tail = r.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
                    self.warn(f"--exec exited {r.returncode}: {tail[0][:200]}")
            except subprocess.TimeoutExpired:
                self.warn(f"--exec timed out after {self.timeout_s:g}s (killed)")
            except OSError as e:
                self.warn(f"--exec failed: {e}")

    def close(self, wait_s: float | None = None) -> None:
        """Stop after the pending commands; wait for them at most ``wait_s`` (default: one ``--exec-timeout``)."""
        try:
            self.q.put_nowait(None)
        except queue.Full:
            pass
        self.thread.join(self.timeout_s if wait_s is None else wait_s)


class Watcher:
    """Follow the logs under ``root``; :meth:`poll` runs one pass and returns its alerts.

    ``stall``: seconds without progress that make a straggler (by ``clock``); ``keep_last``: routine rows
    kept per group; ``clock``: monotonic seconds (default ``time.monotonic``); ``wallclock``: the alert time
    (default now, UTC); ``signatures``: extra signature files to match besides the built-in library.
    Raises :class:`DiscoveryError` when ``root`` does not exist (an empty directory is waited on).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        stall: float = 120.0,
        keep_last: int = 4,
        tz: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], dt.datetime] | None = None,
        signatures: list[Path] | None = None,
    ) -> None:
        self.root = Path(root)
        if not self.root.exists():
            raise DiscoveryError(f"{root}: no such file or directory")
        self.stall, self.keep_last, self.tz = float(stall), keep_last, tz
        self.clock = clock
        self.wallclock = wallclock or (lambda: dt.datetime.now(dt.UTC))
        self.tails: dict[tuple[int, int], _Tail] = {}
        self.by_path: dict[str, tuple[int, int]] = {}
        self.store: pl.DataFrame | None = None
        self.table: pl.DataFrame = empty_table()
        self.diagnosis: Diagnosis | None = None
        self.warnings: list[str] = []
        self.passes = 0
        self.lines_read = 0
        self.bytes_read = 0
        self.exit_seen: str | None = None
        self._exited = False
        self._year = dt.datetime.now(dt.UTC).year
        self._sig_extra = list(signatures or [])
        self._sigs: list[Any] | None = None
        self._alerted_init: set[int] = set()
        self._last_key: tuple[str, tuple[int, ...]] | None = None
        self._progress: dict[int, tuple] = {}
        self._last_adv: dict[int, float] = {}
        self._flagged: dict[int, str] = {}  # rank -> alert type, until the rank advances again
        self._stalled_alerted = False
        self.behind: set[int] = set()
        self.faults_by_kind: dict[str, int] = {}
        self.alerts_by_type: dict[str, int] = {}
        self.last_pass_cpu_s = 0.0
        #: CPU seconds of the last pass by stage: read, parse, table (store, identity), diagnose.
        self.timings: dict[str, float] = {}
        #: True when the last pass left appended bytes unread (the per-pass read budget was spent).
        self.backlog = False
        self._budget = MAX_PASS_BYTES
        #: A stored file was read otherwise this pass (:meth:`_reclassify`): the verdict is made again.
        self._reclassified = False

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

    def _tail_for(self, src: Source) -> tuple[_Tail | None, os.stat_result | None]:
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
            t = _Tail(src, key, seen_path=src.rel, idx=len(self.tails))
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

    def _reclassify(self, t: _Tail, src: Source) -> None:
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

    def _read_plain(self, t: _Tail, st: os.stat_result) -> list[str]:
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
        if t.offset == 0 and _looks_binary(data):
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

    def _read_whole(self, t: _Tail, st: os.stat_result) -> pl.DataFrame | None:
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
            frame, res = _source_frame(src, None)
        else:
            frame, res = None, read_lines(src.path, src.rel)
        self.warnings.extend(w for w in res.warnings if w not in self.warnings)
        self.bytes_read += st.st_size
        if frame is None:
            if not res.lines.len():
                return None
            return _lines_frame([(t.idx, src, res.lines.to_list(), 1)])
        return frame.with_columns(pl.lit(t.idx, dtype=pl.Int64).alias("wsrc"))

    # ------------------------------------------------------------------ one pass
    def poll(self) -> list[Alert]:
        """One pass: read what was appended, parse it, update the verdict; returns the new alerts."""
        cpu0 = time.process_time()
        self.passes += 1
        now = self.clock()
        self._budget, self.backlog = MAX_PASS_BYTES, False
        sources = self._sources()
        plain: list[tuple[_Tail, list[str], int]] = []
        whole: list[pl.DataFrame] = []
        cut: dict[int, int] = {}  # wsrc -> rows from this line on are replaced
        mtimes = []
        for src in sources:
            t, st = self._tail_for(src)
            if t is None or st is None or t.binary:
                continue
            mtimes.append(st.st_mtime)
            if src.layout == "error_json" or src.path.name.endswith(".gz"):
                frame = self._read_whole(t, st)
                if frame is not None:
                    whole.append(frame)
                    cut[t.idx] = 0
                continue
            lines = self._read_plain(t, st)
            if t.reset:
                cut[t.idx], t.reset = 0, False
            if not lines:
                continue
            self.lines_read += len(lines)
            first = t.carry_first if t.carry else t.next_line
            plain.append((t, t.carry + lines, first))
            cut[t.idx] = min(first, cut.get(t.idx, first))
            t.next_line += len(lines)
        if mtimes:
            self._year = dt.datetime.fromtimestamp(max(mtimes), dt.UTC).year
        changed = bool(plain or whole or cut or self._reclassified)
        self._reclassified = False
        self.timings = {"read": time.process_time() - cpu0, "parse": 0.0, "table": 0.0, "diagnose": 0.0}
        if changed:
            self._ingest_new(plain, whole, cut)
        alerts: list[Alert] = []
        if changed:
            c = time.process_time()
            alerts += self._diagnosis_alerts()
            self.timings["diagnose"] = time.process_time() - c
        alerts += self._progress_alerts(now, changed)
        if self.exit_seen and not changed and not self.backlog:
            self._exited = True
        for a in alerts:
            self.alerts_by_type[a.alert] = self.alerts_by_type.get(a.alert, 0) + 1
        self.last_pass_cpu_s = time.process_time() - cpu0
        return alerts

    def _ingest_new(
        self, plain: list[tuple[_Tail, list[str], int]], whole: list[pl.DataFrame], cut: dict[int, int]
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
        if "exit_code_json" in parsed.columns:
            parsed = parsed.with_columns(
                pl.coalesce(pl.col("exit_code"), pl.col("exit_code_json")).alias("exit_code")
            )
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
                cs = _restart_line(rows, first)
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
        """Keep every non-routine row; of routine rows the first 2 and last ``keep_last`` per group."""
        kind = pl.col("kind")
        topo = (
            (kind == Kind.LOG)
            & (pl.col("layer") == "nccl")
            & (
                pl.col("world_size").is_not_null()
                | pl.col("message").str.contains_any(list(_NCCL_KEEP)).fill_null(False)
            )
        )
        # as correlator.streaming: of ``log`` rows only NCCL INFO chatter is routine (an application's or
        # launcher's own lines are few and can be evidence: a config line that differs on one rank)
        log_kept = (kind == Kind.LOG) & ((pl.col("layer") != "nccl") | topo).fill_null(True)
        routine = kind.is_in(list(ROUTINE_KINDS)) & ~log_kept
        keys = [
            "wsrc",
            *[c for c in parsers.STREAM_KEYS if c in store.columns],
            "kind",
            *[c for c in ("pg", "comm") if c in store.columns],
        ]
        store = store.sort("wsrc", "line", maintain_order=True)
        idx = pl.int_range(pl.len()).over(keys)
        n = pl.len().over(keys)
        keep = ~routine | (idx < _HEAD_KEEP) | (idx >= n - self.keep_last)
        return store.filter(keep)

    def _finish(self) -> None:
        """Store -> event table: communicators, timestamps, identity, inheritance, tee duplicates."""
        df = self.store
        if df is None or df.height == 0:
            self.table, self.faults_by_kind = empty_table(), {}
            return
        df = nccl.resolve_comms(df)  # COLL lines of a pass name comm pointers whose Init lines came earlier
        df = timestamps.build_ts(df, self._year, self.tz)
        df = identity.resolve(df)
        df = timestamps.inherit(df, parsers.STREAM_KEYS)
        df = _mark_duplicates(df)
        df = (
            df.sort("path", "line", maintain_order=True)
            .with_row_index("event_id")
            .with_columns(pl.col("event_id").cast(pl.Int64))
        )
        self.table = conform(df)
        faults = self.table.filter(pl.col("kind").is_in(list(FAULT_KINDS)) & ~pl.col("duplicate"))
        self.faults_by_kind = dict(faults.group_by("kind").len().iter_rows())
        exits = parsers.exit_reports(self.table)
        if exits.height and not self.exit_seen:
            r = exits.row(0, named=True)
            self.exit_seen = f"{r['path']}:{r['line']}"

    # ------------------------------------------------------------------ verdict and alerts
    def _signatures(self, d: Diagnosis) -> Diagnosis:
        """``d`` with the signatures that match the table so far."""
        if d.failure_kind == "none" and not self._sig_extra:
            return d
        try:
            from correlator import signatures
        except ModuleNotFoundError:  # a build without the signature library
            return d
        if self._sigs is None:
            self._sigs = signatures.load_signatures(self._sig_extra)
        return replace(d, signatures=signatures.match(d, self.table, self._sigs))

    def _verdict_dict(self) -> dict[str, Any]:
        d = self.diagnosis
        if d is None:
            return {
                "failure_kind": "none",
                "initiating_ranks": [],
                "collateral_ranks": [],
                "confidence": None,
                "summary": "no log lines yet",
            }
        return {
            "failure_kind": d.failure_kind,
            "initiating_ranks": d.initiating_ranks,
            "collateral_ranks": d.collateral_ranks,
            "confidence": d.confidence,
            "summary": d.summary,
            "signatures": [s.get("id") for s in d.signatures[:3]],
        }

    def _host(self, rank: int | None) -> str | None:
        if rank is None:
            return None
        h = self.table.filter((pl.col("rank") == rank) & pl.col("host").is_not_null())["host"]
        return h[0] if h.len() else None

    def _alert(
        self,
        kind: str,
        rank: int | None,
        what: str | None,
        reason: str,
        evidence: tuple[str | None, str | None] = (None, None),
    ) -> Alert:
        d = self.diagnosis
        sig = None
        if d is not None and d.signatures and kind in ("initiator", "verdict_changed"):
            sig = str(d.signatures[0].get("id"))
        ts = self.wallclock().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return Alert(
            ts,
            kind,
            rank,
            self._host(rank),
            what,
            sig,
            evidence[0],
            evidence[1],
            reason,
            self._verdict_dict(),
        )

    def _diagnosis_alerts(self) -> list[Alert]:
        d = self._signatures(diagnose(self.table))
        self.diagnosis = d
        out: list[Alert] = []
        if d.failure_kind == "none":
            return out
        n_init = len(d.initiating_ranks)
        if n_init > 1 and n_init * 2 > len(set(d.ranks_seen) | set(d.initiating_ranks)):
            return out  # most of the job "initiating" (silent while two ranks failed): no fingerprint yet
        key = (d.failure_kind, tuple(d.initiating_ranks))
        new = [r for r in d.initiating_ranks if r not in self._alerted_init]
        for r in new:
            ev = next((e for e in d.evidence if e.rank == r), None) or (d.evidence[0] if d.evidence else None)
            # the rank's own fault line (python_exception, cuda_oom …), else the failure kind (a silent rank)
            kind = ev.kind if ev is not None and ev.rank == r and ev.kind in FAULT_KINDS else d.failure_kind
            out.append(
                self._alert(
                    "initiator", r, kind, d.summary, (f"{ev.path}:{ev.line}", ev.text) if ev else (None, None)
                )
            )
            self._alerted_init.add(r)
        if not new and key != self._last_key and (self._last_key is not None or not d.initiating_ranks):
            r0 = d.initiating_ranks[0] if d.initiating_ranks else None
            ev = d.evidence[0] if d.evidence else None
            was = (
                f"was {self._last_key[0]} (initiating {list(self._last_key[1])}); now "
                if self._last_key
                else "a fault, no initiating rank named yet: "
            )
            out.append(
                self._alert(
                    "verdict_changed",
                    r0,
                    d.failure_kind,
                    was + d.summary,
                    (f"{ev.path}:{ev.line}", ev.text) if ev else (None, None),
                )
            )
        self._last_key = key
        return out

    def _rank_progress(self) -> dict[int, tuple]:
        """Per rank: (max step, ((pg, max seq), ...)) from the non-duplicate rows."""
        t = self.table.filter(pl.col("rank").is_not_null() & ~pl.col("duplicate"))
        prog: dict[int, tuple] = {}
        steps = dict(
            t.filter(pl.col("kind") == Kind.STEP_PROGRESS)
            .group_by("rank")
            .agg(pl.col("step").max())
            .iter_rows()
        )
        seqs: dict[int, list[tuple[str, int]]] = {}
        for r, pg, s in (
            t.filter(
                pl.col("kind").is_in(list(_SEQ_KINDS))
                & pl.col("pg").is_not_null()
                & pl.col("seq").is_not_null()
            )
            .group_by("rank", "pg")
            .agg(pl.col("seq").max())
            .sort("rank", "pg")
            .iter_rows()
        ):
            seqs.setdefault(r, []).append((pg, s))
        for r in set(steps) | set(seqs):
            prog[r] = (steps.get(r), tuple(seqs.get(r, ())))
        return prog

    def _evidence_last(self, rank: int) -> tuple[str | None, str | None]:
        t = self.table.filter(
            (pl.col("rank") == rank)
            & ~pl.col("duplicate")
            & pl.col("kind").is_in([Kind.STEP_PROGRESS, *_SEQ_KINDS])
        )
        if not t.height:
            return None, None
        r = t.sort("ts", "line", nulls_last=False).row(-1, named=True)
        return f"{r['path']}:{r['line']}", (r["message"] or "").split("\n")[0][:400]

    def _progress_alerts(self, now: float, changed: bool) -> list[Alert]:
        if changed:
            prog = self._rank_progress()
            for r, p in prog.items():
                if self._progress.get(r) != p:
                    self._progress[r] = p
                    self._last_adv[r] = now
                    self._flagged.pop(r, None)
                    self._stalled_alerted = False
        ranks = sorted(self._last_adv)
        out: list[Alert] = []
        self.behind = set()
        if len(ranks) < 2:
            return out
        age = {r: now - self._last_adv[r] for r in ranks}
        newest = max(self._last_adv.values())
        # (1) a collective every rank but a few entered, the others silent for `stall`
        by_pg: dict[str, dict[int, int]] = {}
        for r in ranks:
            for pg, s in self._progress[r][1]:
                by_pg.setdefault(pg, {})[r] = s
        for pg, seqs in by_pg.items():
            if len(seqs) < 3:
                continue
            top = max(seqs.values())
            lag = [r for r, s in seqs.items() if s < top]
            if not lag or len(lag) * 4 > len(seqs) and len(lag) > 1:
                continue
            for r in lag:
                if age[r] > self.stall:
                    self.behind.add(r)
                    if r not in self._flagged:
                        self._flagged[r] = "straggler"
                        ahead = sorted(x for x, s in seqs.items() if s == top)
                        from correlator.report import ranges

                        out.append(
                            self._alert(
                                "straggler",
                                r,
                                "no_progress",
                                f"stuck at SeqNum {seqs[r]} of pg {pg} for {age[r]:.0f}s while ranks "
                                f"{ranges(ahead)} entered SeqNum {top}",
                                self._evidence_last(r),
                            )
                        )
        # (2) a rank that stopped while the others kept advancing for `stall`
        for r in ranks:
            if age[r] > self.stall and newest - self._last_adv[r] > self.stall:
                self.behind.add(r)
                if r not in self._flagged:
                    self._flagged[r] = "silent"
                    going = [x for x in ranks if self._last_adv[x] - self._last_adv[r] > self.stall]
                    from correlator.report import ranges

                    out.append(
                        self._alert(
                            "silent",
                            r,
                            "no_progress",
                            f"no progress for {age[r]:.0f}s while ranks {ranges(going)} kept advancing",
                            self._evidence_last(r),
                        )
                    )
        # (3) every rank stopped for `stall`: name the odd one out (a progress state no other rank shares)
        if min(age.values()) > self.stall:
            counts: dict[tuple, list[int]] = {}
            for r in ranks:
                counts.setdefault(self._progress[r], []).append(r)
            common = max(counts.values(), key=len)
            odd = [r for r in ranks if r not in common] if len(common) * 2 > len(ranks) else []
            self.behind.update(odd)
            if not self._stalled_alerted:
                self._stalled_alerted = True
                quiet = min(age.values())
                if not odd:
                    out.append(
                        self._alert(
                            "stalled",
                            None,
                            "no_progress",
                            f"no rank has advanced for {quiet:.0f}s; no rank stands out",
                        )
                    )
                for r in odd:
                    if self._flagged.get(r) in ("straggler", "silent"):
                        continue
                    self._flagged[r] = "stalled"
                    mine = self._describe(self._progress[r])
                    theirs = self._describe(self._progress[common[0]])
                    from correlator.report import ranges

                    out.append(
                        self._alert(
                            "stalled",
                            r,
                            "no_progress",
                            f"no rank has advanced for {quiet:.0f}s; rank {r} stopped at {mine}, ranks "
                            f"{ranges(common)} at {theirs}",
                            self._evidence_last(r),
                        )
                    )
        return out

    @staticmethod
    def _describe(p: tuple) -> str:
        step, seqs = p
        parts = [f"step {step}"] if step is not None else []
        parts += [f"SeqNum {s} (pg {pg})" for pg, s in seqs[:2]]
        return ", ".join(parts) or "no progress line"

    # ------------------------------------------------------------------ state
    def exited(self) -> bool:
        """True once a launcher logged an exit report (a row of ``parsers.exit_report``: torchrun's
        ChildFailedError, srun's task exits and signals, mpirun's aborts, DeepSpeed, Lightning) and a pass
        after it read nothing new."""
        return self._exited

    def ranks_seen(self) -> list[int]:
        return sorted(int(r) for r in self.table["rank"].drop_nulls().unique().to_list())

    def status_line(self) -> str:
        v = self._verdict_dict()
        init = v["initiating_ranks"]
        return (
            f"watch: {len(self.tails)} files, {self.lines_read} lines, {len(self.ranks_seen())} ranks, "
            f"{len(self.behind)} behind; verdict {v['failure_kind']}"
            + (f" (initiating {init})" if init else "")
        )

    def prometheus_text(self, job: str | None = None) -> str:
        """The node_exporter textfile-collector exposition of the current state (see ``write_prometheus``).

        Every sample carries ``training_job`` (``job``, default the watched folder's name; not ``job``, which
        Prometheus sets to the scrape job). Gauges: ranks seen, ranks behind, last progress age per rank,
        fault rows by kind, one sample per initiating rank, the failure flag; counter: alerts by type."""
        job = _label(job or self.root.resolve().name)
        now = self.clock()
        lines: list[str] = []

        def metric(name: str, help_: str, typ: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {typ}")
            for labels, value in samples:
                text = str(int(value)) if float(value).is_integer() else repr(float(value))
                lines.append(f'{name}{{training_job="{job}"{labels}}} {text}')

        metric(
            "rankscope_ranks_seen",
            "Ranks that have written at least one line.",
            "gauge",
            [("", len(self.ranks_seen()))],
        )
        metric(
            "rankscope_ranks_behind",
            "Ranks flagged as stragglers (no progress for --stall while others advanced, "
            "or the odd one out of a stalled job).",
            "gauge",
            [("", len(self.behind))],
        )
        metric(
            "rankscope_last_progress_age_seconds",
            "Seconds since the watcher last saw this rank advance (step, SeqNum or opCount).",
            "gauge",
            [(f',rank="{r}"', round(now - t, 3)) for r, t in sorted(self._last_adv.items())],
        )
        metric(
            "rankscope_faults",
            "Fault rows so far by kind (tee duplicates excluded).",
            "gauge",
            [(f',kind="{_label(k)}"', v) for k, v in sorted(self.faults_by_kind.items())],
        )
        d = self.diagnosis
        kind = d.failure_kind if d else "none"
        metric(
            "rankscope_initiating_rank",
            "1 for each rank the verdict so far names as initiating.",
            "gauge",
            [(f',rank="{r}",failure_kind="{_label(kind)}"', 1) for r in (d.initiating_ranks if d else [])],
        )
        metric(
            "rankscope_failure",
            "1 while the verdict so far is a failure (failure_kind label), else 0.",
            "gauge",
            [(f',failure_kind="{_label(kind)}"', 0 if kind == "none" else 1)],
        )
        metric(
            "rankscope_alerts_total",
            "Alerts raised by this watcher, by type.",
            "counter",
            [(f',type="{k}"', v) for k, v in sorted(self.alerts_by_type.items())],
        )
        metric(
            "rankscope_watch_exited",
            "1 once the launcher logged its exit.",
            "gauge",
            [("", 1 if self.exit_seen else 0)],
        )
        metric(
            "rankscope_watch_last_pass_timestamp_seconds",
            "Unix time of the last pass.",
            "gauge",
            [("", round(self.wallclock().timestamp(), 3))],
        )
        return "\n".join(lines) + "\n"

    def write_prometheus(self, path: str | os.PathLike[str], job: str | None = None) -> None:
        """Write :meth:`prometheus_text` to ``path`` atomically (temporary file in the same folder + rename)."""
        p = Path(path)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        tmp.write_text(self.prometheus_text(job))
        os.replace(tmp, p)


def _label(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def full_verdict(
    root: str | os.PathLike[str], tz: str | None = None
) -> tuple[Diagnosis, pl.DataFrame, list[dict[str, object]]]:
    """The verdict on the files as they are now: ``ingest`` (or the streaming ingest above 2 GiB) + diagnose,
    the same steps as ``rankscope diagnose`` (:func:`correlator.api.diagnose_path`; the built-in signatures
    attached), and the ``skipped`` list (path, bytes, lines, reason) that ``diagnose --format json`` prints.
    Raises DiscoveryError, or :class:`correlator.api.InputError` for a bad ``tz``."""
    from correlator.api import diagnose_path

    r = diagnose_path(root, tz=tz, require_lines=False)
    return r.diagnosis, r.table, r.skipped


__all__ = [
    "MAX_PASS_BYTES",
    "MAX_READ_BYTES",
    "ROUTINE_KINDS",
    "Alert",
    "Watcher",
    "full_verdict",
    "parse_duration",
]
