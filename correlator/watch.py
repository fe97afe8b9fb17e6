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
   last ``keep_last`` per file, stream, kind and communicator; of a training script's own lines the first 16
   and last 64 and every one a signature's regex could match); timestamps, rank identity
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

import datetime as dt
import os
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from correlator.alerts import Alert, AlertRules
from correlator.discover import DiscoveryError
from correlator.prometheus import PrometheusWriter
from correlator.schema import Kind, empty_table
from correlator.tail import MAX_PASS_BYTES, MAX_READ_BYTES, Tail, TailReader
from correlator.verdict import Diagnosis

if TYPE_CHECKING:
    from correlator.signatures import TextPatterns

#: Row kinds that are routine at volume: reduced to the first 2 and last ``keep_last`` rows per group
#: (``log`` rows only when they are NCCL INFO chatter; see :func:`correlator.reduce.reduce_store`).
ROUTINE_KINDS = Kind.WATCH_ROUTINE


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


class Watcher(TailReader, AlertRules, PrometheusWriter):
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
        self.tails: dict[tuple[int, int], Tail] = {}
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
        self._text: TextPatterns | None = None
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

    def poll(self) -> list[Alert]:
        """One pass: read what was appended, parse it, update the verdict; returns the new alerts."""
        cpu0 = time.process_time()
        self.passes += 1
        now = self.clock()
        self._budget, self.backlog = MAX_PASS_BYTES, False
        sources = self._sources()
        plain: list[tuple[Tail, list[str], int]] = []
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

    def exited(self) -> bool:
        """True once a launcher logged an exit report (a row of ``parsers.exit_report``: torchrun's
        ChildFailedError, srun's task exits and signals, mpirun's aborts, DeepSpeed, Lightning) and a pass
        after it read nothing new."""
        return self._exited

    def status_line(self) -> str:
        v = self._verdict_dict()
        init = v["initiating_ranks"]
        return (
            f"watch: {len(self.tails)} files, {self.lines_read} lines, {len(self.ranks_seen())} ranks, "
            f"{len(self.behind)} behind; verdict {v['failure_kind']}"
            + (f" (initiating {init})" if init else "")
        )


def full_verdict(
    root: str | os.PathLike[str], tz: str | None = None
) -> tuple[Diagnosis, pl.DataFrame, list[dict[str, object]]]:
    """The verdict on the files as they are now: ``ingest`` (or the streaming ingest, as ``diagnose``
    decides) + diagnose, the same steps as ``rankscope diagnose`` (:func:`correlator.api.diagnose_path`; the
    built-in signatures attached), and the ``skipped`` list (path, bytes, lines, reason) that ``diagnose
    --format json`` prints.
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
