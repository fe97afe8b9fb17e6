"""The ``rankscope`` command line: :data:`app` (typer), :func:`main` (the command line in process) and
:func:`entry`, the console-script entry point (``rankscope = "correlator.cli:entry"``; ``python -m correlator``
runs it too). See :mod:`correlator.cli.app`;
one module per command, :mod:`correlator.cli.common` for what they share. No library module imports this
package or typer."""

from correlator.cli.app import app, entry, main

__all__ = ["app", "entry", "main"]
