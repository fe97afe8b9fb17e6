"""Small files read whole, with a size limit: ``error.json`` files, signature files, a case's
``expected.json``, and the small-file path of the log reader (:func:`read_small_lines`). One reader for them
all (:func:`read_small`): not a FIFO, a device or ``/dev/zero``; at most ``limit`` bytes
(``RANKSCOPE_MAX_SMALL_KB``, :mod:`correlator.limits`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from correlator import limits as _limits
from correlator.read import _CHUNK, ReadResult, _lines_from_bytes, file_kind, read_lines, skip_entry


class SmallFileError(ValueError):
    """A small file that cannot be read at all (missing, not a regular file, an I/O error); the message
    starts with the caller's label for it."""


@dataclass(frozen=True)
class SmallFile:
    """One small file read by :func:`read_small`.

    ``data``: the whole file, or its first ``limit`` bytes when it is larger; ``size``: its size in bytes
    (at least what was read); ``limit``: the size limit it was read under (bytes); ``tail``: when it is
    larger than ``limit``, up to the last ``tail`` bytes asked for (never bytes of ``data``), else empty.
    """

    data: bytes
    size: int
    limit: int
    tail: bytes = b""

    @property
    def truncated(self) -> bool:
        """Whether the file holds more than ``data`` (it is larger than the limit)."""
        return self.size > len(self.data)

    def too_big(self, label: str) -> str:
        """The one-line reason a caller refuses this file because it is larger than the limit."""
        return (
            f"{label}: {self.size} bytes, more than the {self.limit}-byte limit for this file "
            "(raise RANKSCOPE_MAX_SMALL_KB)"
        )


def read_small(
    path: str | os.PathLike[str], label: str, limit: int | None = None, tail: int = 0
) -> SmallFile:
    """Read a file that is small by nature (``error.json``, a signature file, an ``expected.json``) within a
    size limit: at most ``limit`` bytes (default ``RANKSCOPE_MAX_SMALL_KB``, :mod:`correlator.limits`) from
    its head, plus its last ``tail`` bytes when it is larger. Memory is bounded by ``limit + tail`` whatever
    the file holds; each caller decides what a larger file means (:attr:`SmallFile.truncated`).

    Opened non-blocking: a FIFO or a device (``/dev/zero``) is refused, never read. Raises
    :class:`SmallFileError` (``"<label>: not a regular file (a FIFO)"``, ``"<label>: cannot read (...)"``).
    """
    if limit is None:
        limit = _limits.current().max_small_bytes
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise SmallFileError(f"{label}: cannot read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SmallFileError(f"{label}: not a regular file ({file_kind(st.st_mode)})")
        parts: list[bytes] = []
        got = 0
        while got <= limit:  # one byte past the limit tells a larger file (even one that grew)
            chunk = os.read(fd, min(_CHUNK, limit + 1 - got))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        data = b"".join(parts)
        size = max(st.st_size, len(data))
        if len(data) <= limit:
            return SmallFile(data, len(data), limit)
        end = data[limit:]
        data = data[:limit]
        back = b""
        if tail > 0:
            start = max(size - tail, limit)
            back = os.pread(fd, size - start, start) if start < size else b""
            back = back or end
        return SmallFile(data, size, limit, back)
    except OSError as e:
        raise SmallFileError(f"{label}: cannot read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def read_small_lines(path: Path, rel: str, tail: int = 0) -> tuple[ReadResult, SmallFile | None]:
    """The physical lines of a small file (``error.json``) read by :func:`read_small`, decoded and cleaned as
    :func:`read_lines` does, and the :class:`SmallFile` read (for its ``tail``). A file larger than the
    small-file limit gives the lines of its head, a warning and a ``file size cap`` entry of ``skipped``
    (the bytes not read); a file that cannot be read or is not a regular file gives what :func:`read_lines`
    gives for it (an empty result that says why) and None."""
    try:
        small = read_small(path, rel, tail=tail)
    except SmallFileError:
        return read_lines(path, rel), None
    warnings: list[str] = []
    skipped: list[dict[str, object]] = []
    if small.truncated:
        rest = small.size - len(small.data)
        warnings.append(
            f"{rel}: {small.size} bytes, more than the small-file limit ({small.limit} bytes; raise "
            f"RANKSCOPE_MAX_SMALL_KB); read its first {len(small.data)} bytes, {rest} bytes not read"
        )
        skipped.append(skip_entry(rel, rest, None, "file size cap"))
    return _lines_from_bytes(small.data, rel, path.name, _limits.current(), warnings, skipped), small


__all__ = ["SmallFile", "SmallFileError", "read_small", "read_small_lines"]
