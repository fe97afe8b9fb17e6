"""Steps that several ``rankscope`` commands share: checking ``-o`` against the input, the progress bar,
printing ingest warnings, loading logs. Below :mod:`correlator.cli` (command modules such as
:mod:`correlator.plot` use them without importing the CLI); the work itself is :mod:`correlator.api`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from correlator.console import err
from correlator.errors import InputError, safe

# The engine (polars, pyarrow, networkx) and rich's progress bar are imported inside the functions that use
# them: `rankscope --help` and `--version` load this module and must start at once (issue #32 item 3).
if TYPE_CHECKING:
    from correlator import api
    from correlator.ingest import IngestResult
    from correlator.job import Job


def input_path(ctx: Any, value: Path) -> Path:
    """Typer callback of the DIR argument of every command that reads logs: see
    :func:`correlator.archive.input_path` (imported when a command runs: it loads discovery and polars)."""
    from correlator.archive import input_path as opened_input

    return opened_input(ctx, value)


def check_output(directory: Path, output: Path | None) -> None:
    """Refuse an output path inside the input (it would be read back as logs next time), equal to it,
    or a folder that holds the input."""
    if output is None:
        return
    try:
        src, dst = directory.resolve(), output.resolve()
    except (OSError, RuntimeError) as e:
        raise InputError(f"{output}: cannot resolve the output path ({e})") from None
    if dst == src:
        raise InputError(f"{output}: the output is the input itself; choose a path outside {directory}")
    if src.is_dir() and dst.is_relative_to(src):
        raise InputError(
            f"{output}: inside the input folder {directory}; it would be read as a log next time "
            "(write it elsewhere)"
        )
    if src.is_relative_to(dst) and dst.is_dir():
        raise InputError(f"{output}: a folder that holds the input {directory}; choose another output path")


def current_output() -> Path | None:
    """The ``-o`` value of the running command, if it has one."""
    try:  # typer >= 0.20 vendors click (a separately installed click, e.g. a dev tool's, is not the one running)
        from typer._click.globals import get_current_context
    except ModuleNotFoundError:
        from click.globals import get_current_context  # type: ignore[no-redef]
    ctx = get_current_context(silent=True)
    out_path = ctx.params.get("output") if ctx is not None else None
    return out_path if isinstance(out_path, Path) else None


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


def print_warnings(warnings: list[str], quiet: bool) -> None:
    if not quiet:
        for w in warnings[:20]:
            err.print(f"[yellow]warning:[/] {safe(w)}", highlight=False)
        if len(warnings) > 20:
            err.print(f"[yellow]warning:[/] … and {len(warnings) - 20} more warnings", highlight=False)


def load(
    directory: Path, tz: str | None, quiet: bool, redact: bool = False, fr: Path | None = None
) -> IngestResult:
    from correlator.api import load_path

    if directory.exists():
        check_output(directory, current_output())
    with progress(quiet) as bar:
        res = load_path(directory, tz=tz, redact=redact, fr=fr, progress=bar)
    print_warnings(list(res.warnings), quiet)
    return res


def open_job(directory: Path, quiet: bool, **options: Any) -> Job:
    """The command's :class:`correlator.job.Job` over ``directory``, read now under a progress bar (unless
    ``quiet``), its ingest warnings printed; ``options`` those of :func:`correlator.job.open_job`."""
    from correlator.job import open_job as _open_job

    if directory.exists():
        check_output(directory, current_output())
    with progress(quiet) as bar:
        job = _open_job(directory, progress=bar, on_warnings=lambda ws: print_warnings(ws, quiet), **options)
        job.result()
    return job


__all__ = ["check_output", "current_output", "input_path", "load", "open_job", "print_warnings", "progress"]
