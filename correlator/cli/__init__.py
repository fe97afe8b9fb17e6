"""The ``rankscope`` command line: :data:`app` (typer) and :func:`main`, the console-script entry point
(``rankscope = "correlator.cli:main"``; ``python -m correlator`` runs it too). See :mod:`correlator.cli.app`;
one module per command, :mod:`correlator.cli.common` for what they share. No library module imports this
package or typer."""

from correlator.cli.app import app, main

__all__ = ["app", "main"]
