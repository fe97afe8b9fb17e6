"""What the ``rankscope`` commands share: the terminal consoles, the options several commands take, checking
``-o`` against the input, the progress bar, printing ingest warnings, opening the job. The work itself is the
library's (:mod:`correlator.job`, :mod:`correlator.api`); a command module renders what it returns."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Self

import typer
from rich.console import Console
from rich.markup import escape

from correlator.errors import InputError, safe
from correlator.output import check_output

# The engine (polars, pyarrow, networkx) and rich's progress bar are imported inside the functions that use
# them: `rankscope --help` and `--version` load this module and must start at once (issue #32 item 3).
if TYPE_CHECKING:
    from correlator import api
    from correlator.ingest import IngestResult
    from correlator.job import Job


# Redirected output keeps whole lines: a report saved to a file or piped to less is not cut at 80 columns.
err = Console(stderr=True, soft_wrap=True)
out = Console(width=None if sys.stdout.isatty() else 160)

#: Bad arguments or input: printed as one line, exit code 2 (the API's :class:`correlator.errors.InputError`).
UsageError = InputError


def input_path(ctx: Any, value: Path) -> Path:
    """Typer callback of the DIR argument of every command that reads logs (``ctx``: the click context): a
    tar or zip archive is unpacked, and ``-`` (standard input) copied, for as long as the command runs
    (:func:`correlator.archive.opened`, entered with ``ctx.with_resource``); a folder or a plain file is
    returned as it is. What was not unpacked is printed as warnings on stderr (not under ``--quiet``).
    :mod:`correlator.archive` is imported when a command runs: it loads discovery and polars."""
    from correlator.archive import opened

    notes: list[str] = []
    path: Path = ctx.with_resource(opened(value, notes))
    _NOTES.extend(notes)  # print_warnings leaves out what they already say
    if not {"-q", "--quiet"} & set(sys.argv[1:]):
        for w in notes[:20]:
            err.print(f"[yellow]warning:[/] {safe(w)}", highlight=False)
    return path


class DiagFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


DirArg = Annotated[
    Path,
    typer.Argument(
        help="Directory (or single file) of logs from the failed job; also a .tar(.gz|.zst|…) or .zip "
        "archive of them, or - to read one combined log from standard input.",
        show_default=False,
        callback=input_path,
    ),
]
TzOpt = Annotated[
    str | None,
    typer.Option(
        "--tz", help="Time zone (IANA name, e.g. Europe/Berlin) of stamps that carry none. Default: UTC."
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary on stderr.")]
StreamingOpt = Annotated[
    bool | None,
    typer.Option(
        "--streaming/--no-streaming",
        help="Ingest node by node in bounded memory (~1.3 GiB) keeping only what diagnosis needs. Default: on "
        "above 2 GiB of logs, or above 64 MiB of lines other than NCCL COLL lines (a sample says which).",
    ),
]
FrOpt = Annotated[
    Path | None,
    typer.Option(
        "--fr",
        help="Directory of PyTorch Flight Recorder dumps kept apart from "
        "the logs (dumps under DIRECTORY are found anyway).",
        show_default=False,
    ),
]
StacksOpt = Annotated[
    Path | None,
    typer.Option(
        "--stacks",
        help="Directory of stack dumps (py-spy dump, faulthandler, torch debug server stacks_*.txt) kept "
        "apart from the logs (dumps under DIRECTORY are found anyway).",
        show_default=False,
    ),
]
RedactOpt = Annotated[
    bool,
    typer.Option(
        "--redact",
        help="Replace host names, IPs, user names, e-mails and secrets by stable "
        "pseudonyms (host-1, ip-3, user-1) in everything written.",
    ),
]


def current_output() -> Path | None:
    """The ``-o`` value of the running command, if it has one (click's parameters hold the text as given;
    typer converts it to a ``Path`` in the command's own arguments, and in these too from 0.29 on)."""
    try:  # typer >= 0.20 vendors click (a separately installed click, e.g. a dev tool's, is not the one running)
        from typer._click.globals import get_current_context
    except ModuleNotFoundError:
        from click.globals import get_current_context  # type: ignore[no-redef]
    ctx = get_current_context(silent=True)
    out_path = ctx.params.get("output") if ctx is not None else None
    return Path(out_path) if isinstance(out_path, (str, os.PathLike)) and str(out_path) else None


@contextmanager
def progress(quiet: bool) -> Iterator[api.Progress | None]:
    """A progress bar on stderr (a terminal, not ``--quiet``) as an :data:`correlator.api.Progress` callback."""
    if quiet or not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("reading logs", total=None)
        last: list[object] = [None, None, 0.0]  # stage, total, time of the last redraw

        def update(stage: str, done: int, total: int | None) -> None:
            # Called per file (200,000 tiny files: 200,000 calls): the bar is redrawn ~20 times a second
            # at most within a step; a new step, a new total and a step's end always show.
            now = time.monotonic()
            if stage == last[0] and total == last[1] and done != total and now - last[2] < 0.05:  # type: ignore[operator]
                return
            last[:] = [stage, total, now]
            progress.update(task, description=stage, completed=done, total=total)
            if total is None:  # a step of unknown size: a pulsing bar, not the last step's count
                for t in progress.tasks:  # (rich's update keeps the old total when given None)
                    if t.id == task:
                        t.total = None

        yield update


#: What :func:`input_path` printed of the archive or standard input it opened (one command per process).
_NOTES: list[str] = []


def print_warnings(warnings: list[str], quiet: bool) -> None:
    """``warnings`` on stderr (the first 20, then a count), unless ``quiet``; a size-cap warning of an archive
    member that :func:`input_path` already printed is left out
    (:func:`correlator.archive.without_recut`)."""
    if _NOTES:
        from correlator.archive import without_recut

        warnings = without_recut(warnings, _NOTES)
    if not quiet:
        for w in warnings[:20]:
            err.print(f"[yellow]warning:[/] {safe(w)}", highlight=False)
        if len(warnings) > 20:
            err.print(f"[yellow]warning:[/] … and {len(warnings) - 20} more warnings", highlight=False)


@contextmanager
def reading(directory: Path, quiet: bool, check: bool = True, **options: Any) -> Iterator[Job]:
    """A :class:`correlator.job.Job` over ``directory`` (``options``: those of :func:`correlator.job.open_job`)
    whose reads in this block show a progress bar (unless ``quiet``) and print their ingest warnings.
    ``check``: first refuse an ``-o`` of the command inside the input (:func:`correlator.output.check_output`)."""
    from correlator.job import open_job as _open_job

    if check and directory.exists():
        check_output(directory, current_output())
    with progress(quiet) as bar:
        yield _open_job(directory, progress=bar, on_warnings=lambda ws: print_warnings(ws, quiet), **options)


def open_job(directory: Path, quiet: bool, **options: Any) -> Job:
    """The command's :class:`correlator.job.Job` over ``directory``, its verdict made now under a progress bar
    (unless ``quiet``), its ingest warnings printed; ``options`` those of :func:`correlator.job.open_job`."""
    with reading(directory, quiet, **options) as job:
        job.result()
    return job


#: Kinds the ingest summary names; the rest are counted together.
_KINDS_SHOWN = 12


def summary(res: IngestResult | dict[str, object]) -> None:
    """The ingest summary on stderr: files, lines, events, ranks, hosts, attempts, what was skipped."""
    s = res if isinstance(res, dict) else res.summary()
    by_kind = list(s["rows_by_kind"].items())  # type: ignore[attr-defined]
    kinds = ", ".join(f"{k} {v}" for k, v in by_kind[:_KINDS_SHOWN])
    if len(by_kind) > _KINDS_SHOWN:
        rest = by_kind[_KINDS_SHOWN:]
        kinds += f" and {len(rest)} more kinds ({sum(v for _, v in rest)} events)"
    why: dict[str, int] = s.get("skipped_by_reason") or {}  # type: ignore[assignment]
    skipped = f"{s['lines_skipped']} skipped" + (
        f": {escape(', '.join(f'{v} {k}' for k, v in why.items()))}" if why else ""
    )
    err.print(
        f"[bold]{s['files']}[/] files, [bold]{s['lines_read']}[/] lines ({skipped}), "
        f"[bold]{s['rows']}[/] events; ranks {ranges(s['ranks'])}; hosts {', '.join(s['hosts']) or 'unknown'}; "  # type: ignore[arg-type]
        f"attempts {s['attempts']}",
        highlight=False,
    )
    err.print(f"events by kind: {kinds}", highlight=False)
    err.print(f"lines not understood: {s['lines_not_understood']}", highlight=False)
    skipped_list = list(s.get("skipped") or [])  # type: ignore[call-overload]
    for e in skipped_list[:10]:
        lines = "?" if e.get("lines") is None else e["lines"]
        nbytes = "?" if e.get("bytes") is None else e["bytes"]
        err.print(
            f"skipped: {safe(e['path'])}: {safe(e['reason'])} ({nbytes} bytes, {lines} lines)",
            highlight=False,
        )
    if len(skipped_list) > 10:
        err.print(f"skipped: … and {len(skipped_list) - 10} more", highlight=False)


def ranges(ranks: list[int]) -> str:
    """``ranks`` as ``0-3, 7`` (:func:`correlator.report.ranges`, imported when called)."""
    from correlator.report import ranges as _ranges

    return _ranges(ranks)


__all__ = [
    "DiagFormat",
    "DirArg",
    "FrOpt",
    "QuietOpt",
    "RedactOpt",
    "StacksOpt",
    "StreamingOpt",
    "TzOpt",
    "UsageError",
    "check_output",
    "current_output",
    "err",
    "input_path",
    "open_job",
    "out",
    "print_warnings",
    "progress",
    "ranges",
    "reading",
    "safe",
    "summary",
]


class Signals:
    """SIGINT, SIGTERM and SIGHUP while a command runs, handled in this one place (a context manager that
    installs the handlers, from the main thread only, and restores the previous ones).

    The first signal sets :attr:`code` to 128 + its number (130, 143, 129) and, until :meth:`disarm`, raises
    ``stop(code)`` to unwind the command (its ``finally`` blocks run: the temporary copy of an archive or of
    standard input is removed). Every later signal is only ignored: a launcher forwards the signal its process
    group already got (``uv run`` re-sends SIGINT, SIGTERM and SIGHUP to its child, ``timeout`` signals the
    child and then the whole group), so one Ctrl-C arrives two or three times, and the copies must not cut
    the cleanup, or ``watch``'s verdict so far, short. By default SIGTERM and SIGHUP kill a process at once."""

    SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self, stop: Callable[[int], BaseException]) -> None:
        self.code = 0
        self.armed = True
        self._stop = stop
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.code:
            return
        self.code = 128 + signum
        if self.armed:
            raise self._stop(self.code)

    def disarm(self) -> None:
        """From now on a signal is remembered (:attr:`code`), never raised."""
        self.armed = False

    def __enter__(self) -> Self:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return self  # (signal handlers can be set from the main thread only)
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
