"""The error the API raises for bad arguments or input, and the escaping of text printed to a terminal.
The lowest layer of the CLI side: imports nothing from ``correlator``."""

from __future__ import annotations

import re

from rich.markup import escape


class InputError(Exception):
    """Bad arguments or unreadable/empty input (a missing path, an unknown time zone, an attempt that is not
    in the logs, a parquet file that is not a timeline, a signature file that does not parse). The message is
    one line meant for the user; the CLI prints it and exits 2."""


class DiscoveryError(Exception):
    """The path given cannot be ingested at all (missing, not readable, nothing in it). Raised by
    :mod:`correlator.discover`; defined here so that the CLI can catch it without loading discovery."""


_CTRL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: object) -> str:
    """``text`` with C0/C1 control characters escaped (``\\x1b``), then rich-markup escaped: nothing
    printed from a file name, a log line or an error can drive the terminal."""
    s = str(text)
    if _CTRL_RE.search(s):
        s = _CTRL_RE.sub(lambda m: f"\\x{ord(m.group(0)):02x}", s)
    return escape(s)


__all__ = ["DiscoveryError", "InputError", "safe"]
