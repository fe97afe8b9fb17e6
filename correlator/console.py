"""The terminal consoles every command shares (``rankscope`` and the commands that feature modules
register). Below :mod:`correlator.cli`: command modules import these from here, never from the CLI."""

from __future__ import annotations

import sys

from rich.console import Console

from correlator.errors import safe

# Redirected output keeps whole lines: a report saved to a file or piped to less is not cut at 80 columns.
err = Console(stderr=True, soft_wrap=True)
out = Console(width=None if sys.stdout.isatty() else 160)

__all__ = ["err", "out", "safe"]
