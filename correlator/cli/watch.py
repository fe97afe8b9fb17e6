"""``rankscope watch DIR``: follow a running job, print its alerts, and at the end the job's verdict.

The following itself is :class:`correlator.watch.Watcher` (one pass per :meth:`~correlator.watch.Watcher.poll`);
this module runs the passes, prints, runs ``--exec`` and ``--on-stall`` actions, and handles the signals
that end a watch (:class:`correlator.cli.common.Signals`)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from correlator.cli.common import Signals, UsageError

if TYPE_CHECKING:
    from correlator.watch import Watcher, _Exec


class OnStall(str, Enum):
    observe = "observe"
    dump_stacks = "dump-stacks"


class WatchFormat(str, Enum):
    """``--format`` of ``rankscope watch``."""

    text = "text"
    json = "json"


DirectoryArg = Annotated[
    Path,
    typer.Argument(
        help="Directory of the running job's logs (torchrun --log-dir, "
        "rank*.log, SLURM output, NCCL_DEBUG files).",
        show_default=False,
    ),
]
IntervalOpt = Annotated[str, typer.Option("--interval", help="Time between passes (2s, 500ms, 1m).")]
UntilExitOpt = Annotated[
    bool,
    typer.Option(
        "--until-exit",
        help="Stop when the launcher logs its exit "
        "(torchrun ChildFailedError, srun task exits and signals, Force Terminated, "
        "slurmstepd cancellation, mpirun aborts, DeepSpeed, Lightning) and print the "
        "final verdict.",
    ),
]
StallOpt = Annotated[str, typer.Option("--stall", help="No progress for this long makes a straggler alert.")]
FormatOpt = Annotated[
    WatchFormat,
    typer.Option(
        "--format",
        "-f",
        help="text: readable alert lines; json: one "
        "JSON object per alert line, final verdict as one JSON line.",
    ),
]
ExecCmdOpt = Annotated[
    str | None,
    typer.Option(
        "--exec",
        help="Shell command run per alert with the alert JSON "
        "on stdin (in the background, with --exec-timeout).",
    ),
]
ExecTimeoutOpt = Annotated[
    str, typer.Option("--exec-timeout", help="Kill an --exec command after this long.")
]
PrometheusOpt = Annotated[
    Path | None,
    typer.Option(
        "--prometheus",
        help="Write node_exporter textfile-collector metrics to this .prom file each pass (atomic rename).",
    ),
]
SignaturesOpt = Annotated[
    list[Path] | None, typer.Option("--signatures", help="Extra signature file(s) (TOML).")
]
TzOpt = Annotated[
    str | None,
    typer.Option("--tz", help="Time zone (IANA name) of stamps that carry none. Default: UTC."),
]
OnStallOpt = Annotated[
    OnStall,
    typer.Option(
        "--on-stall",
        help="observe: alert only. dump-stacks: on a stalled/straggler alert, run `py-spy dump` for "
        "each worker of the job on this machine and write the dumps beside the logs "
        "(DIR/rankscope-stacks-<time>/rank<N>.txt); the next pass diagnoses them.",
    ),
]
PySpyOpt = Annotated[str, typer.Option("--py-spy", help="The py-spy program for --on-stall dump-stacks.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No status lines on stderr.")]
MaxPassesOpt = Annotated[int, typer.Option("--max-passes", hidden=True, help="Stop after N passes (tests).")]


#: ``rankscope watch --help``: one paragraph per string, no line breaks inside one (the help keeps them as
#: they are, so a paragraph broken in the source broke mid-sentence on screen).
WATCH_HELP = (
    "Follow a running job: alert on the first initiating fault and on stragglers while it still runs.\n\n"
    "Exit status: 0 when --until-exit saw the launcher exit (or --max-passes ran out); 130 after Ctrl-C "
    "(SIGINT), 143 after SIGTERM, 129 after SIGHUP, each after printing the verdict so far (also when "
    "`uv run` or `timeout` forwards the signal a second time). 2 on bad arguments."
)


def watch(
    directory: DirectoryArg,
    interval: IntervalOpt = "2s",
    until_exit: UntilExitOpt = False,
    stall: StallOpt = "120s",
    format: FormatOpt = WatchFormat.text,
    exec_cmd: ExecCmdOpt = None,
    exec_timeout: ExecTimeoutOpt = "30s",
    prometheus: PrometheusOpt = None,
    signatures: SignaturesOpt = None,
    tz: TzOpt = None,
    on_stall: OnStallOpt = OnStall.observe,
    py_spy: PySpyOpt = "py-spy",
    quiet: QuietOpt = False,
    max_passes: MaxPassesOpt = 0,
) -> None:
    """Follow a running job: alert on the first initiating fault and on stragglers while it still runs.
    The exit statuses: :data:`WATCH_HELP` (the command's help, registered in :mod:`correlator.cli.app`)."""
    from correlator.watch import Watcher, _Exec, parse_duration

    try:
        every, stall_s, exec_s = parse_duration(interval), parse_duration(stall), parse_duration(exec_timeout)
    except ValueError as e:
        raise UsageError(str(e)) from None
    _check_args(directory, tz, prometheus)

    def warn(msg: str) -> None:
        if not quiet:
            print(f"warning: {msg}", file=sys.stderr, flush=True)

    loop = _Loop(
        w=Watcher(directory, stall=stall_s, tz=tz, signatures=list(signatures or [])),
        runner=_Exec(exec_cmd, exec_s, warn) if exec_cmd else None,
        warn=warn,
        directory=directory,
        every=every,
        stall_s=stall_s,
        json_alerts=format == WatchFormat.json,
        dump_stacks=on_stall == OnStall.dump_stacks,
        py_spy=py_spy,
        prometheus=prometheus,
        until_exit=until_exit,
        max_passes=max_passes,
        quiet=quiet,
    )
    stops = Signals(_Stop)
    with stops:
        try:
            loop.run(stops)
        except _Stop:
            pass
        finally:
            stops.disarm()  # from here on a signal is only remembered: the verdict is printed whole
            if loop.runner:
                loop.runner.close()
        if stops.code and not quiet:
            _say("watch: interrupted; verdict so far:", sys.stderr)
        _final_verdict(directory, tz, signatures or [], format == WatchFormat.json, stops.code)
    if stops.code:
        raise typer.Exit(stops.code)


def _check_args(directory: Path, tz: str | None, prometheus: Path | None) -> None:
    """Refuse an unknown ``--tz``, ``-`` (standard input: a stream has no files to follow), a missing
    ``directory``, and a ``--prometheus`` file in a missing folder or inside ``directory`` (each pass would
    read the metrics back as a log: :func:`correlator.output.check_output`)."""
    from correlator.output import check_output

    if str(directory) == "-":
        raise UsageError(
            "watch follows a folder (or a file) of logs that a running job writes, not standard input; give "
            "the job's log folder, ./- for one named - (to read one log from standard input: rankscope "
            "diagnose -)"
        )
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
    try:
        check_output(directory, prometheus)
    except UsageError as e:
        raise UsageError(f"--prometheus {e}") from None


@dataclass
class _Loop:
    """The passes of one watch and what each pass does with its alerts."""

    w: Watcher
    runner: _Exec | None
    warn: Callable[[str], None]
    directory: Path
    every: float
    stall_s: float
    json_alerts: bool
    dump_stacks: bool
    py_spy: str
    prometheus: Path | None
    until_exit: bool
    max_passes: int
    quiet: bool

    def run(self, stops: Signals) -> None:
        """Passes until the launcher exits (``--until-exit``), ``--max-passes`` ran out, or a signal
        (:class:`_Stop`)."""
        next_dump, status, warned = 0.0, "", 0
        w = self.w
        while True:
            t0 = time.monotonic()
            alerts = w.poll()
            for a in alerts:
                print(a.to_json() if self.json_alerts else a.to_text(), flush=True)
                if self.runner:
                    self.runner.submit(a.to_json())
            stall_alerts = [a for a in alerts if a.alert in ("stalled", "straggler")]
            if self.dump_stacks and stall_alerts and time.monotonic() >= next_dump:
                next_dump = time.monotonic() + self.stall_s  # at most one round of dumps per --stall
                _dump_stacks(self.directory, self.py_spy, stall_alerts[0].reason, self.warn, self.quiet)
            if self.prometheus is not None:
                try:
                    w.write_prometheus(self.prometheus)
                except OSError as e:
                    self.warn(f"--prometheus {self.prometheus}: cannot write ({e.strerror or e})")
            for msg in w.warnings[warned:]:
                self.warn(msg)
            warned = len(w.warnings)
            line = w.status_line()
            if not self.quiet and line != status:
                print(line, file=sys.stderr, flush=True)
                status = line
            if self.until_exit and w.exited():
                stops.disarm()
                if not self.quiet:
                    print(
                        f"watch: the launcher exited ({w.exit_seen}); final verdict:",
                        file=sys.stderr,
                        flush=True,
                    )
                return
            if self.max_passes and w.passes >= self.max_passes:
                return
            if not w.backlog:  # catching up on a backlog: the next pass at once
                time.sleep(max(0.0, self.every - (time.monotonic() - t0)))


def _final_verdict(directory: Path, tz: str | None, signatures: list[Path], as_json: bool, code: int) -> None:
    """The job's verdict on the files as they are now: the one `rankscope diagnose DIR` prints
    (:meth:`correlator.job.Job.result`). ``code``: the exit status a signal set (0: none)."""
    from correlator.cli.common import out
    from correlator.discover import DiscoveryError
    from correlator.job import open_job
    from correlator.report import render_text

    try:
        result = open_job(directory, tz=tz, signatures=signatures, require_lines=False).result()
    except DiscoveryError as e:
        _say(f"watch: no verdict: {e}", sys.stderr)
        raise typer.Exit(code) from None
    try:
        if as_json:
            print(json.dumps(result.to_dict()))
        else:
            render_text(result.diagnosis, out)
        sys.stdout.flush()
    except OSError:  # the terminal went away (SIGHUP): the exit status still says why
        if not code:
            raise


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
    """Raised by :class:`correlator.cli.common.Signals` to leave the watch loop. A ``typer.Exit`` with 128 + the signal number,
    so that even one that escaped would end the command with that status, never as an internal error."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code
