"""The ``rankscope`` command line (typer): the app, its commands and :func:`main`, the console-script entry.

One module per command (:mod:`correlator.cli.diagnose`, ``timeline``, ``events``, ``graph``, ``eval``,
``plot``, ``redact``, ``signatures`` with ``explain``, ``watch``), each a thin renderer over
:func:`correlator.job.open_job`; what they share is :mod:`correlator.cli.common`. The command modules import
the engine (polars, pyarrow, networkx, matplotlib: ~1.5 s of imports) inside the commands, so that
``rankscope --version`` and ``--help`` start at once (issue #32 item 3; tests/test_cli.py checks that
importing the CLI loads none of them).

Exit codes: 0 — the command did its job (a diagnosis was made, whatever it found; an eval with no
regression); 1 — ``eval`` found regressions; 2 — usage error or unreadable/empty input; 3 — internal error
(a bug: please report it with the command line); 4 — ``diagnose --exit-code`` found a failure.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from correlator.cli.common import Signals, UsageError, err, safe
from correlator.cli.diagnose import diagnose
from correlator.cli.eval import eval_cmd
from correlator.cli.events import events
from correlator.cli.graph import graph
from correlator.cli.plot import plot
from correlator.cli.redact import redact
from correlator.cli.signatures import explain_cmd, signatures_cmd
from correlator.cli.timeline import timeline
from correlator.cli.watch import WATCH_HELP, watch
from correlator.errors import DiscoveryError

app = typer.Typer(
    name="rankscope",
    help="Find which rank of a failed distributed training job failed first, why, and which errors on the "
    "other ranks are only collateral. Point it at the directory of per-rank logs "
    "(a torchrun --log-dir, rank*.log files, SLURM output, NCCL_DEBUG files).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(diagnose)
app.command()(timeline)
app.command()(events)
app.command()(graph)
app.command(name="eval")(eval_cmd)
app.command()(plot)
app.command(name="redact")(redact)
app.command(name="signatures")(signatures_cmd)
app.command(name="explain")(explain_cmd)
app.command(help=WATCH_HELP)(watch)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"rankscope {version('rankscope')}")
        except PackageNotFoundError:
            print("rankscope (not installed as a package)")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """Find which rank of a failed distributed training job failed first, why, and which errors are collateral."""


def _global_flags() -> None:
    """Flags that hold for every command, wherever they stand: ``--follow-symlinks`` (also
    ``RANKSCOPE_FOLLOW_SYMLINKS=1``) lets discovery follow symlinks that leave the input folder."""
    import os

    if "--follow-symlinks" in sys.argv[1:]:
        sys.argv = [a for a in sys.argv if a != "--follow-symlinks"]
        _SAVED_ENV["RANKSCOPE_FOLLOW_SYMLINKS"] = os.environ.get("RANKSCOPE_FOLLOW_SYMLINKS")
        os.environ["RANKSCOPE_FOLLOW_SYMLINKS"] = "1"


_SAVED_ENV: dict[str, str | None] = {}


def _restore_flags() -> None:
    """Undo :func:`_global_flags` (main() may run several times in one process: tests, notebooks)."""
    import os

    for k, v in _SAVED_ENV.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    _SAVED_ENV.clear()


class Interrupted(KeyboardInterrupt):
    """Raised on SIGINT, SIGTERM or SIGHUP while a command runs (:class:`correlator.cli.common.Signals`): it
    unwinds the command as Ctrl-C does, so the ``finally`` blocks run (the temporary copy of an archive or of
    standard input is removed, a half-written output deleted) before the exit with 128 + the signal's number.
    ``watch`` handles the signals of its loop itself, the same way."""


def main() -> None:
    """Console-script entry point: one-line errors with meaningful exit codes, never a raw traceback."""
    import signal

    if hasattr(signal, "SIGPIPE"):  # `rankscope … | head` ends quietly, like any Unix tool
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _global_flags()
    stops = Signals(lambda _code: Interrupted())
    try:
        with stops:
            _run()
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(stops.code or 130)
    except SystemExit as e:
        if not stops.code or e.code != 130:
            raise
        err.print("aborted")  # typer turns an interrupt in a command into exit status 130
        sys.exit(stops.code)
    finally:
        _restore_flags()


def _run() -> None:
    """The command, its errors turned into one line and an exit status (:func:`main`)."""
    try:
        rc = app(standalone_mode=False)
        # Without standalone mode, typer returns a command's typer.Exit code instead of exiting with it.
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except UsageError as e:
        err.print(f"[red]error:[/] {safe(e)}", highlight=False)
        sys.exit(2)
    except DiscoveryError as e:
        err.print(f"[red]error:[/] {safe(e)}", highlight=False)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (
        OSError
    ) as e:  # disk full, unwritable output, a file vanishing under us: the environment, not a bug
        err.print(f"[red]error:[/] {safe(e)}", highlight=False)
        sys.exit(2)
    except MemoryError:
        err.print(
            '[red]error:[/] out of memory reading this input; lower the limits (see README, "bad input": '
            "RANKSCOPE_MAX_FILE_MB, RANKSCOPE_MAX_LINES) or use --streaming",
            highlight=False,
        )
        sys.exit(2)
    except RecursionError:
        err.print(
            "[red]error:[/] input nested too deeply to read (a hostile JSON/TOML file?)", highlight=False
        )
        sys.exit(2)
    except typer.Abort:  # (Ctrl-C while click prompts): main() says "aborted"
        raise
    except Exception as e:  # noqa: BLE001 - click usage errors, then genuine bugs
        # typer >= 0.20 vendors click and raises its own copy's exceptions, even when a separate click is
        # installed (a dev tool may bring one): the vendored copy first.
        try:
            from typer import _click as click
        except ImportError:
            import click  # type: ignore[no-redef]

        if isinstance(e, click.exceptions.UsageError):
            e.show()
            sys.exit(2)
        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, BrokenPipeError):
            sys.exit(0)
        err.print(
            f"[red]internal error:[/] {type(e).__name__}: {safe(e)} — please report this with the command line",
            highlight=False,
        )
        sys.exit(3)
    except BaseException as e:  # a Rust panic in polars/pyarrow (pyo3's PanicException is a BaseException)
        if type(e).__name__ != "PanicException":
            raise
        err.print(
            f"[red]error:[/] the table engine failed on this input ({safe(str(e)[:300])}); the input is "
            "malformed in a way rankscope does not catch yet — please report it",
            highlight=False,
        )
        sys.exit(2)


def entry() -> None:
    """The console script (``rankscope``, ``python -m correlator``): :func:`main`, then an exit that skips the
    interpreter's last collection of every object. At exit Python clears each module and runs a full garbage
    collection over the objects polars, pyarrow, typer and rich made at import (hundreds of thousands): with
    them moved to the permanent generation first (``gc.freeze``), that is skipped (``import polars`` alone:
    0.055 -> 0.010 s from the last line to the process's end; ``rankscope diagnose`` of the README's first case
    0.98 -> 0.93 s, 25 alternating runs on 2 cores). Every output is written and closed by then;
    the memory goes back to the system with the process. :func:`main` itself leaves the collector alone: tests
    run it in one process many times."""
    import gc

    try:
        main()
    finally:
        gc.freeze()


__all__ = ["app", "entry", "main"]
