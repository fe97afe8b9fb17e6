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

import datetime as dt
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Self

import polars as pl
import typer

from correlator.alerts import Alert, AlertRules
from correlator.diagnose import Diagnosis
from correlator.discover import DiscoveryError
from correlator.prometheus import PrometheusWriter
from correlator.schema import Kind, empty_table
from correlator.tail import MAX_PASS_BYTES, MAX_READ_BYTES, Tail, TailReader

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
    """The verdict on the files as they are now: ``ingest`` (or the streaming ingest above 2 GiB) + diagnose,
    the same steps as ``rankscope diagnose`` (:func:`correlator.api.diagnose_path`; the built-in signatures
    attached), and the ``skipped`` list (path, bytes, lines, reason) that ``diagnose --format json`` prints.
    Raises DiscoveryError, or :class:`correlator.api.InputError` for a bad ``tz``."""
    from correlator.api import diagnose_path

    r = diagnose_path(root, tz=tz, require_lines=False)
    return r.diagnosis, r.table, r.skipped


class OnStall(str, Enum):
    observe = "observe"
    dump_stacks = "dump-stacks"


class WatchFormat(str, Enum):
    """``--format`` of ``rankscope watch``."""

    text = "text"
    json = "json"


def register(app: Any) -> None:
    """Add ``rankscope watch`` to the CLI."""

    @app.command()
    def watch(
        directory: Annotated[
            Path,
            typer.Argument(
                help="Directory of the running job's logs (torchrun --log-dir, "
                "rank*.log, SLURM output, NCCL_DEBUG files).",
                show_default=False,
            ),
        ],
        interval: Annotated[
            str, typer.Option("--interval", help="Time between passes (2s, 500ms, 1m).")
        ] = "2s",
        until_exit: Annotated[
            bool,
            typer.Option(
                "--until-exit",
                help="Stop when the launcher logs its exit "
                "(torchrun ChildFailedError, srun task exits and signals, Force Terminated, "
                "slurmstepd cancellation, mpirun aborts, DeepSpeed, Lightning) and print the "
                "final verdict.",
            ),
        ] = False,
        stall: Annotated[
            str, typer.Option("--stall", help="No progress for this long makes a straggler alert.")
        ] = "120s",
        format: Annotated[
            WatchFormat,
            typer.Option(
                "--format",
                "-f",
                help="text: readable alert lines; json: one "
                "JSON object per alert line, final verdict as one JSON line.",
            ),
        ] = WatchFormat.text,
        exec_cmd: Annotated[
            str | None,
            typer.Option(
                "--exec",
                help="Shell command run per alert with the alert JSON "
                "on stdin (in the background, with --exec-timeout).",
            ),
        ] = None,
        exec_timeout: Annotated[
            str, typer.Option("--exec-timeout", help="Kill an --exec command after this long.")
        ] = "30s",
        prometheus: Annotated[
            Path | None,
            typer.Option(
                "--prometheus",
                help="Write node_exporter textfile-collector "
                "metrics to this .prom file each pass (atomic rename).",
            ),
        ] = None,
        signatures: Annotated[
            list[Path] | None, typer.Option("--signatures", help="Extra signature file(s) (TOML).")
        ] = None,
        tz: Annotated[
            str | None,
            typer.Option("--tz", help="Time zone (IANA name) of stamps that carry none. Default: UTC."),
        ] = None,
        on_stall: Annotated[
            OnStall,
            typer.Option(
                "--on-stall",
                help="observe: alert only. dump-stacks: on a stalled/straggler alert, run `py-spy dump` for "
                "each worker of the job on this machine and write the dumps beside the logs "
                "(DIR/rankscope-stacks-<time>/rank<N>.txt); the next pass diagnoses them.",
            ),
        ] = OnStall.observe,
        py_spy: Annotated[
            str, typer.Option("--py-spy", help="The py-spy program for --on-stall dump-stacks.")
        ] = "py-spy",
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No status lines on stderr.")] = False,
        max_passes: Annotated[
            int, typer.Option("--max-passes", hidden=True, help="Stop after N passes (tests).")
        ] = 0,
    ) -> None:
        """Follow a running job: alert on the first initiating fault and on stragglers while it still runs.

        Exit status: 0 when --until-exit saw the launcher exit (or --max-passes ran out); 130 after Ctrl-C
        (SIGINT), 143 after SIGTERM, 129 after SIGHUP, each after printing the verdict so far (also when
        `uv run` or `timeout` forwards the signal a second time). 2 on bad arguments.
        """
        from correlator.api import diagnose_path
        from correlator.console import out
        from correlator.errors import InputError as UsageError
        from correlator.report import render_text

        try:
            every, stall_s, exec_s = (
                parse_duration(interval),
                parse_duration(stall),
                parse_duration(exec_timeout),
            )
        except ValueError as e:
            raise UsageError(str(e)) from None
        if tz:
            import zoneinfo

            try:
                zoneinfo.ZoneInfo(tz)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise UsageError(f"--tz {tz!r}: unknown time zone") from None
        if not directory.exists():
            raise UsageError(f"{directory}: no such file or directory")
        if prometheus is not None and not prometheus.parent.is_dir():
            raise UsageError(f"--prometheus {prometheus}: folder {prometheus.parent} does not exist")

        def warn(msg: str) -> None:
            if not quiet:
                print(f"warning: {msg}", file=sys.stderr, flush=True)

        w = Watcher(directory, stall=stall_s, tz=tz, signatures=list(signatures or []))
        runner = _Exec(exec_cmd, exec_s, warn) if exec_cmd else None

        stops = _Signals()
        next_dump = 0.0
        status = ""
        warned = 0
        with stops:
            try:
                while True:
                    t0 = time.monotonic()
                    alerts = w.poll()
                    for a in alerts:
                        print(a.to_json() if format == WatchFormat.json else a.to_text(), flush=True)
                        if runner:
                            runner.submit(a.to_json())
                    stall_alerts = [a for a in alerts if a.alert in ("stalled", "straggler")]
                    if on_stall == OnStall.dump_stacks and stall_alerts and time.monotonic() >= next_dump:
                        next_dump = time.monotonic() + stall_s  # at most one round of dumps per --stall
                        _dump_stacks(directory, py_spy, stall_alerts[0].reason, warn, quiet)
                    if prometheus is not None:
                        try:
                            w.write_prometheus(prometheus)
                        except OSError as e:
                            warn(f"--prometheus {prometheus}: cannot write ({e.strerror or e})")
                    for msg in w.warnings[warned:]:
                        warn(msg)
                    warned = len(w.warnings)
                    line = w.status_line()
                    if not quiet and line != status:
                        print(line, file=sys.stderr, flush=True)
                        status = line
                    if until_exit and w.exited():
                        stops.disarm()
                        if not quiet:
                            print(
                                f"watch: the launcher exited ({w.exit_seen}); final verdict:",
                                file=sys.stderr,
                                flush=True,
                            )
                        break
                    if max_passes and w.passes >= max_passes:
                        break
                    if not w.backlog:  # catching up on a backlog: the next pass at once
                        time.sleep(max(0.0, every - (time.monotonic() - t0)))
            except _Stop:
                pass
            finally:
                stops.disarm()  # from here on a signal is only remembered: the verdict is printed whole
                if runner:
                    runner.close()
            if stops.code and not quiet:
                _say("watch: interrupted; verdict so far:", sys.stderr)
            # the same pipeline, and so the same verdict, as `rankscope diagnose DIR`
            try:
                result = diagnose_path(directory, tz=tz, signatures=signatures or [], require_lines=False)
            except DiscoveryError as e:
                _say(f"watch: no verdict: {e}", sys.stderr)
                raise typer.Exit(stops.code) from None
            try:
                if format == WatchFormat.json:
                    print(json.dumps(result.to_dict()))
                else:
                    render_text(result.diagnosis, out)
                sys.stdout.flush()
            except OSError:  # the terminal went away (SIGHUP): the exit status still says why
                if not stops.code:
                    raise
        if stops.code:
            raise typer.Exit(stops.code)


def _dump_stacks(directory: Path, py_spy: str, why: str, warn: Callable[[str], None], quiet: bool) -> None:
    """``--on-stall dump-stacks``: dump every worker of the job found on this machine (correlator.stackdump)."""
    from correlator import stackdump

    folder, done, problems = stackdump.dump_stacks(
        directory, stackdump.worker_pids(directory), py_spy, why=f" ({why})" if why else ""
    )
    for p in problems:
        warn(p)
    if folder is not None and not quiet:
        print(f"watch: wrote stack dumps of ranks {done} to {folder}", file=sys.stderr, flush=True)


def _say(text: str, stream: Any) -> None:
    """One line to ``stream``, flushed; a stream that is gone (a closed terminal after SIGHUP) is ignored."""
    try:
        print(text, file=stream, flush=True)
    except OSError:
        pass


class _Stop(typer.Exit):
    """Raised by :class:`_Signals` to leave the watch loop. A ``typer.Exit`` with 128 + the signal number,
    so that even one that escaped would end the command with that status, never as an internal error."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class _Signals:
    """SIGINT, SIGTERM and SIGHUP while watching, handled in this one place (a context manager that installs
    the handlers and restores the previous ones).

    The first signal sets :attr:`code` to 128 + its number (130, 143, 129) and, while the watch loop runs
    (:meth:`disarm` not called yet), raises :class:`_Stop` to leave it. Every later signal is only ignored:
    a launcher forwards the signal its process group already got — ``uv run`` re-sends SIGINT, SIGTERM and
    SIGHUP to its child, ``timeout`` signals the child and then the whole group — so one Ctrl-C arrives two
    or three times, and the copies must not cut the verdict so far short (they did: the verdict was never
    printed, or the command ended as an internal error). The exit status is the first signal's."""

    SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self) -> None:
        self.code = 0
        self.armed = True
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.code:
            return
        self.code = 128 + signum
        if self.armed:
            raise _Stop(self.code)

    def disarm(self) -> None:
        """From now on a signal is remembered (:attr:`code`), never raised."""
        self.armed = False

    def __enter__(self) -> Self:
        import signal

        for name in self.SIGNALS:
            num = getattr(signal, name, None)
            if num is not None:
                self._old[num] = signal.signal(num, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        for num, old in self._old.items():
            signal.signal(num, old)
        self._old.clear()


__all__ = [
    "MAX_PASS_BYTES",
    "MAX_READ_BYTES",
    "ROUTINE_KINDS",
    "Alert",
    "Watcher",
    "full_verdict",
    "parse_duration",
    "register",
]
