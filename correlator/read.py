"""Read one source file into physical lines, losing nothing that can be read.

Step 2 of ingest. Bytes are decoded as UTF-8 with replacement (invalid bytes become U+FFFD and are
counted); ``.gz`` files are decompressed transparently, every member of a concatenated archive (a
truncated or damaged archive yields what could be decompressed, with a warning; a ``.gz`` name on plain
text is read as text, with a warning); CRLF endings lose their CR; a line that redraws itself with bare
carriage returns (tqdm / rich progress bars) keeps only its final state; NUL bytes are dropped (a line
that held only NULs stays, empty, so that it is still counted).
A file that is mostly NUL or control bytes is binary: it is skipped with a warning and its line
count is reported as skipped, never silently.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_BINARY_SAMPLE = 8192
_BINARY_MIN = 64


@dataclass
class ReadResult:
    """Physical lines of one file (``lines``, a polars String Series) and what happened reading it."""

    lines: pl.Series
    physical_lines: int
    skipped_lines: int = 0
    warnings: list[str] = field(default_factory=list)
    #: Why ``skipped_lines`` were skipped (``binary content``, ``cannot read``); None when nothing was.
    skip_reason: str | None = None


def _decompress_gz(data: bytes, rel: str, warnings: list[str]) -> bytes:
    """Decompress every gzip member (``cat a.gz b.gz`` and logrotate produce several); a truncated or
    damaged archive yields what decompressed before the damage, with a warning."""
    out: list[bytes] = []
    rest = data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(d.decompress(rest))
            out.append(d.flush())
        except zlib.error as e:
            warnings.append(f"{rel}: damaged gzip archive ({e}); read the {sum(map(len, out))} bytes that "
                            "decompressed before the damage")
            break
        if not d.eof:
            warnings.append(f"{rel}: truncated gzip archive; read the {sum(map(len, out))} bytes that decompress")
            break
        rest = d.unused_data
        if rest and rest[:2] != b"\x1f\x8b":
            if rest.strip(b"\x00"):
                warnings.append(f"{rel}: {len(rest)} bytes after the gzip data ignored (not gzip)")
            break
    return b"".join(out)


#: Control bytes that do not occur in text logs (tab, newline, CR, form feed, vertical tab and ESC do).
_CONTROL_BYTES = bytes(b for b in range(32) if b < 9 or (13 < b < 32 and b != 27))


def _looks_binary(data: bytes) -> bool:
    """More than 10% control bytes (not tab/newline/CR/ESC) in the first 8 KiB. Tiny files (< 64 bytes)
    are always text: a stray control byte in a one-line file is not worth losing the line."""
    sample = data[:_BINARY_SAMPLE]
    if len(sample) < _BINARY_MIN:
        return False
    ctrl = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return ctrl / len(sample) > 0.10


def read_lines(path: Path, rel: str) -> ReadResult:
    """Read ``path`` and return its physical lines.

    Never raises on bad content; an unreadable file (permissions, I/O error) gives an empty result with
    a warning. Line numbers are positions in the returned series plus one.
    """
    warnings: list[str] = []
    try:
        data = path.read_bytes()
    except OSError as e:
        return ReadResult(pl.Series("text", [], dtype=pl.String), 0, 0, [f"{rel}: skipped, cannot read ({e.strerror or e})"])
    if path.name.endswith(".gz"):
        if data[:2] == b"\x1f\x8b":
            data = _decompress_gz(data, rel, warnings)
        elif data:
            warnings.append(f"{rel}: named .gz but not gzip-compressed; read as plain text")
    if _looks_binary(data):
        n = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        return ReadResult(pl.Series("text", [], dtype=pl.String), n, n,
                          [*warnings, f"{rel}: skipped, binary content ({len(data)} bytes, {n} lines)"],
                          skip_reason="binary content")
    if not data:
        return ReadResult(pl.Series("text", [], dtype=pl.String), 0)
    if b"\x00" in data:
        nul = data.count(b"\x00")
        warnings.append(f"{rel}: {nul} NUL bytes dropped")
        data = data.replace(b"\x00", b"")
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - data.decode("utf-8", errors="ignore").count("\ufffd") if "\ufffd" in text else 0
    if bad:
        warnings.append(f"{rel}: {bad} invalid UTF-8 sequences replaced by U+FFFD")
    if text.endswith("\n"):
        text = text[:-1]
    elif text and not path.name.endswith(".json"):
        warnings.append(f"{rel}: last line has no newline (truncated write?); kept as is")
    s = pl.Series("text", text.split("\n"), dtype=pl.String)
    n = len(s)
    if "\r" in text:
        # CRLF -> LF; a bare CR redraws the line: keep the text after the last non-final CR.
        s = s.str.strip_suffix("\r").str.replace(r"(?s)^.*\r", "")
    if "\x1b[" in text:
        s = s.str.replace_all(_ANSI_RE.pattern, "")
    return ReadResult(s, n, 0, warnings)
