"""Read one source file into physical lines, losing nothing that can be read, within stated limits.

Step 2 of ingest. What a file holds is judged from its bytes, not its name:

- **compression** is sniffed from magic bytes (gzip, bzip2, xz, zstd), with or without a suffix; every
  member of a concatenated archive is read; data is decompressed in chunks, so a damaged or truncated
  archive keeps what came out before the damage (with a warning), and a decompression bomb stops at the
  ratio cap (:mod:`correlator.limits`) with a warning, the rest of the folder still diagnosed;
- **encoding**: UTF-8 (a BOM is dropped), UTF-16 with or without BOM, anything else as UTF-8 with
  replacement (invalid bytes become U+FFFD and are counted);
- **line ends**: LF, CRLF, and CR-only files (old Mac style) are split into lines; a line that redraws
  itself with bare carriage returns (tqdm / rich progress bars) keeps only its final state;
- **NUL bytes** are dropped (a sparse hole or a NUL-filled head is skipped with ``SEEK_DATA`` where the file
  system allows; a line that held only NULs stays, empty, so it is still counted);
- **binary** is judged per region (about 64 KiB, cut at line ends): a region where more than 10% of the bytes
  are control bytes (NUL runs excluded) is skipped and its lines counted as skipped; the text around it stays;
- **terminal safety**: colour codes (CSI) are removed; every other C0/C1 control character (OSC titles,
  clipboard writes, hyperlinks, bells) is escaped as ``\\xNN``, so nothing read can drive a terminal;
- **limits**: bytes per file, line length (a longer line is kept truncated and marked ``…[truncated``),
  lines per file. Every limit hit is a warning and an entry of :attr:`ReadResult.skipped`. A file past the
  size cap (plain or compressed, UTF-8 or UTF-16) or the line cap keeps its head and its tail (a quarter and three quarters of
  the cap, :data:`HEAD_SHARE`): a failed job's log ends in its failure. The lines between are counted (a plain
  file's middle is read through for its newlines, a compressed file's decompressed to its end in bounded
  memory, neither kept), so every line kept has its own line number (:attr:`ReadResult.starts`).

Non-regular files (FIFOs, devices, sockets) are opened non-blocking and skipped with a reason; a file that
vanishes, shrinks or grows while read is read up to a consistent point (its size when opened) and reported.
"""

from __future__ import annotations

import bz2
import errno
import lzma
import os
import re
import stat
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path

import polars as pl

from correlator import limits as _limits

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: Control characters escaped in text (tab and newline are kept; CR is handled as a line end / redraw).
_CTRL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]")
#: Every ASCII control byte but tab, newline and CR (with an ASCII-only file: none of _CTRL_RE, no binary).
_ANY_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 13)) + b"\x7f"
#: A ``bytes.translate`` table that maps each byte of :data:`_ANY_CONTROL` above ASCII and keeps the others:
#: ``data.translate(_CONTROL_TO_HIGH).isascii()`` tells a clean file (ASCII, no control byte) in one copy
#: (6.7 ms for a 4 MB log with a ``translate`` that deletes them and a length test, 4 ms like this).
_CONTROL_TO_HIGH = bytes(0x80 if b in _ANY_CONTROL else b for b in range(256))
#: Bytes of a file tested at a time by :func:`_is_clean`: small enough for the allocator to reuse one
#: block from step to step (4 MiB steps were slower than one copy of the whole).
_CLEAN_STEP = 64 << 10


def _is_clean(data: bytes | bytearray) -> bool:
    """Whether ``data`` is ASCII without a control byte (:data:`_ANY_CONTROL`): ``translate`` then ``isascii``
    per :data:`_CLEAN_STEP` bytes, so no copy of a large file is made (a 302 MB console: 0.13 s against 0.24 s
    for one copy translated whole)."""
    return data.isascii() and all(
        data[a : a + _CLEAN_STEP].translate(_CONTROL_TO_HIGH).isascii()
        for a in range(0, len(data), _CLEAN_STEP)
    )


_BINARY_MIN = 64
_REGION = 64 * 1024
_CHUNK = 1 << 20
#: Bytes of zstd output per read (:func:`_decompress_zstd`).
_ZSTD_READ = 1 << 16
#: Files up to this size are read with one ``pread`` (with their head, see :func:`read_lines`); below
#: :data:`_CHUNK`, so that a read of them holds no whole chunk of NULs (a sparse hole).
_SMALL_FILE = 64 * 1024
_DSTEP = 256 * 1024  # output per decompression step: caps are checked this often
_NUL_RUN = re.compile(rb"\x00{16,}")

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)
_SUFFIX = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd", ".zstd": "zstd"}


@dataclass
class ReadResult:
    """Physical lines of one file (``lines``, a polars String Series) and what happened reading it.

    ``physical_lines``: lines counted in what was read (kept + skipped); ``skipped_lines``: lines not in
    ``lines`` (binary regions, past the line cap, a whole unreadable file: then 0 and a reason);
    ``skipped``: one dict per thing not read, ``{"path", "bytes", "lines", "reason"}`` (``lines`` is None
    when it could not be counted, e.g. the rest of a file past the size cap).
    """

    #: The lines: a Series, or for a small clean file the Python list they were split into (``lines``
    #: builds the Series on first use; ``correlator.ingest`` builds one Series for many such files).
    _lines: pl.Series | list[str]
    physical_lines: int
    skipped_lines: int = 0
    warnings: list[str] = field(default_factory=list)
    #: Why ``skipped_lines`` were skipped (``binary content``, ``cannot read``); None when nothing was.
    skip_reason: str | None = None
    skipped: list[dict[str, object]] = field(default_factory=list)
    #: Bytes of text in ``lines`` with their newlines, when known without a pass over them (else None).
    text_bytes: int | None = None
    #: The file's modification time when it was opened (:func:`read_lines`: from the ``fstat`` it does
    #: anyway, so that ingest needs no second ``stat`` per file for the year of stamps without one).
    mtime: float | None = None
    #: Where the line numbers of ``lines`` jump past lines not kept (the middle of a file past the size or
    #: line cap, whose head and tail are kept): ``(row, line number)``, ascending, the row ``row`` of ``lines``
    #: and those after it numbered on from that line number. Empty: the rows are lines 1 to n.
    starts: list[tuple[int, int]] = field(default_factory=list)

    @property
    def lines(self) -> pl.Series:
        """The lines as a polars String Series (named ``text``)."""
        if isinstance(self._lines, list):
            self._lines = pl.Series("text", self._lines, dtype=pl.String)
        return self._lines

    @property
    def n_lines(self) -> int:
        """How many lines ``lines`` holds (no Series built)."""
        return len(self._lines)

    def lines_or_list(self) -> pl.Series | list[str]:
        """The lines as they are held: a Series, or a list of str (see ``_lines``)."""
        return self._lines

    def line_list(self) -> list[str]:
        """The lines as a list of str."""
        return list(self._lines) if isinstance(self._lines, list) else self._lines.to_list()

    def parts(self) -> list[tuple[int, pl.Series | list[str]]]:
        """The lines as runs of consecutive line numbers: ``(line number of the run's first line, its lines)``;
        one run (from line 1) unless lines were left out between the head and the tail of the file
        (:attr:`starts`)."""
        if not self.starts:
            return [(1, self._lines)]
        s = self.lines
        at = [*self.starts, (s.len(), 0)]
        runs: list[tuple[int, pl.Series | list[str]]] = [(1, s.slice(0, at[0][0]))] if at[0][0] else []
        runs += [(line, s.slice(row, nxt - row)) for (row, line), (nxt, _) in pairwise(at)]
        return runs


def _empty() -> pl.Series:
    return pl.Series("text", [], dtype=pl.String)


def skip_entry(rel: str, nbytes: int | None, lines: int | None, reason: str) -> dict[str, object]:
    """One ``skipped`` entry (the shape used in the timeline summary and ``diagnose --format json``)."""
    return {"path": rel, "bytes": nbytes, "lines": lines, "reason": reason}


def _skipped(
    rel: str, reason: str, nbytes: int | None, warnings: list[str], lines: int = 0, detail: str = ""
) -> ReadResult:
    warnings.append(f"{rel}: skipped, {reason}{detail}")
    return ReadResult(
        _empty(),
        lines,
        lines,
        warnings,
        skip_reason=reason.split(" (")[0],
        skipped=[skip_entry(rel, nbytes, lines, reason.split(" (")[0])],
    )


def file_kind(mode: int) -> str:
    """What a non-regular file is, for a skip reason (``a FIFO``, ``a character device`` …)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _past_hole(fd: int, pos: int, size: int, info: dict[str, int]) -> int | None:
    """Where the data of ``fd`` goes on after a chunk of NULs that ended at ``pos`` (SEEK_DATA), counting
    the hole skipped in ``info['holes']``; None when the hole runs to the end of the file (counted too)."""
    try:
        nxt = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a hole up to the end
            info["holes"] += size - pos
            return None
        return pos
    if nxt > pos:
        info["holes"] += min(nxt, size) - pos
        return nxt
    return pos


def _raw_chunks(
    fd: int,
    size: int,
    plain: bool,
    rel: str,
    warnings: list[str],
    info: dict[str, int],
    chunk_size: int | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> Iterator[bytes]:
    """The bytes of ``fd`` up to ``size`` (its size when opened) in chunks; sparse holes of plain files are
    skipped with SEEK_DATA (counted in ``info['holes']``). ``on_bytes(n)``: called with the bytes of the file
    read (or skipped as holes) so far, after each chunk."""
    chunk_size = chunk_size or _CHUNK
    pos = 0
    while pos < size:
        if on_bytes is not None and pos:
            on_bytes(pos)
        try:
            chunk = os.read(fd, min(chunk_size, size - pos))
        except BlockingIOError:
            chunk = b""
        if not chunk:
            _note_shrank(rel, size, pos, warnings, info)
            return
        pos += len(chunk)
        if plain and len(chunk) == chunk_size and not chunk.strip(b"\x00") and hasattr(os, "SEEK_DATA"):
            info["holes"] += len(chunk)
            nxt = _past_hole(fd, pos, size, info)
            if nxt is None:
                return
            pos = nxt
            continue
        yield chunk
    _warn_if_grew(fd, size, rel, warnings)


def _note_shrank(rel: str, size: int, pos: int, warnings: list[str], info: dict[str, int]) -> None:
    """The warning (and ``info['shrank']``) for a file that ended at ``pos`` while its size was ``size``
    when opened: what was there is read."""
    warnings.append(f"{rel}: file shrank while read (from {size} to {pos} bytes); read what was there")
    info["shrank"] = 1


def _warn_if_grew(fd: int, size: int, rel: str, warnings: list[str]) -> None:
    """A warning when ``fd``, read up to ``size`` (its size when opened), has more bytes now."""
    try:
        more = os.read(fd, 1)
    except OSError:
        more = b""
    if more:
        _note_grew(size, rel, warnings)


def _note_grew(size: int, rel: str, warnings: list[str]) -> None:
    warnings.append(f"{rel}: file grew while read; read the {size} bytes it held when opened")


def _decompressor(kind: str):  # type: ignore[no-untyped-def]
    if kind == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor()


def _kept(chunks: Iterator[bytes], lim: _limits.Limits) -> bytes | Ends:
    """The bytes of ``chunks`` (a plain file's, read by :func:`_raw_chunks`) as :class:`Kept` keeps them."""
    kept = Kept(lim.max_file_bytes)
    for chunk in chunks:
        kept.add(chunk)
    return kept.result()


class Kept:
    """A file's bytes (a plain file's, or a compressed one's output) within the size cap ``cap``, given piece by
    piece: all of them while they fit; past it, the whole lines of the first ``cap // HEAD_SHARE`` bytes and a
    window of the last ``cap - cap // HEAD_SHARE`` bytes, the lines between them counted as they leave the
    window, not kept (:class:`Ends`): reading past the cap costs time, not memory.

    A UTF-16 file (judged from its head, as :func:`_utf16_text` judges a file) is cut at its two-byte newlines,
    at even offsets: the window holds whole code units (an odd byte waits for its pair) and the lines between
    are counted in the decoded text."""

    def __init__(self, cap: int) -> None:
        self.cap, self.keep = cap, cap - cap // HEAD_SHARE
        self.window: deque[bytes] = deque()
        self.held = self.total = self.lines = self.middle = 0
        self.head: bytes | None = None
        self.at_line = True  # whether the window starts a line (the byte before it is a newline)
        self.nl = b"\n"  # the file's newline as bytes (two for UTF-16, known when the head is cut)
        self.encoding: str | None = None  # utf-16-le / utf-16-be, or None for bytes read as UTF-8
        self.odd = b""  # UTF-16: a byte whose pair has not come yet

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        self.total += len(piece)
        if self.head is None:
            self.window.append(piece)
            self.held += len(piece)
            if self.total <= self.cap:
                return
            data = b"".join(self.window)
            enc = _utf16_text(data[:8192])[0]
            if enc == "utf-16":  # with a BOM
                enc = "utf-16-be" if data[:2] == b"\xfe\xff" else "utf-16-le"
            self.encoding = enc
            if enc:
                self.nl = b"\x00\n" if self.encoding == "utf-16-be" else b"\n\x00"
            cut = _nl_end(data, self.nl, 0, self.cap // HEAD_SHARE, last=True)
            self.head, piece = data[:cut], data[cut:]
            self.window, self.held = deque(), 0
        if self.encoding:  # whole code units only
            piece = self.odd + piece
            self.odd = piece[len(piece) & ~1 :]
            piece = piece[: len(piece) & ~1]
            if not piece:
                return
        self.window.append(piece)
        self.held += len(piece)
        while self.held - len(self.window[0]) >= self.keep:
            gone = self.window.popleft()
            self.held -= len(gone)
            self.lines += self._count(gone)
            self.middle += len(gone)
            self.at_line = gone.endswith(self.nl)

    def _count(self, data: bytes) -> int:
        """The newlines of ``data`` (whole code units of a UTF-16 file)."""
        if self.encoding:
            return data.decode(self.encoding, errors="replace").count("\n")
        return data.count(b"\n")

    def words(self) -> str:
        """What is kept, for a warning: ``the N bytes`` or, past the cap, ``the head and the tail of the N bytes``."""
        return (
            f"the {self.total} bytes"
            if self.head is None
            else f"the head and the tail of the {self.total} bytes"
        )

    def result(self) -> bytes | Ends:
        """All the output, or past the cap its head and tail."""
        window = b"".join(self.window)
        if self.head is None:
            return window
        lines, middle, at_line = self.lines, self.middle, self.at_line
        keep = self.keep - self.keep % len(self.nl)
        if len(window) > keep:  # the window's last ``keep`` bytes, as a plain file's tail is read
            before = window[: len(window) - keep]
            lines, middle = lines + self._count(before), middle + len(before)
            at_line = before.endswith(self.nl)
            window = window[len(before) :]
        tail = window + self.odd
        if not at_line:  # the window starts inside a line: the rest of it goes to the middle
            end = _nl_end(tail, self.nl, 0, len(tail), last=False)
            lines += 1
            middle += end or len(tail)
            tail = tail[end:] if end else b""
        return Ends(self.head, lines, middle, tail, self.encoding)


def _nl_end(data: bytes, nl: bytes, start: int, end: int, *, last: bool) -> int:
    """The offset just past the last (``last``) or the first newline ``nl`` of ``data[start:end]`` that starts at
    an offset that is a multiple of ``len(nl)`` (a UTF-16 code unit), or 0 if there is none."""
    i = data.rfind(nl, start, end) if last else data.find(nl, start, end)
    while i >= 0 and i % len(nl):
        i = data.rfind(nl, start, i + len(nl) - 1) if last else data.find(nl, i + 1, end)
    return i + len(nl) if i >= 0 else 0


def _decompress(
    chunks: Iterator[bytes],
    kind: str,
    rel: str,
    lim: _limits.Limits,
    warnings: list[str],
    skipped: list[dict[str, object]],
    size: int,
) -> bytes | Ends:
    """Decompress a stream of gzip/bzip2/xz members in bounded steps (at most 1 MiB of output per call).
    Damage keeps what came out before it; the ratio cap stops with a warning and a ``skipped`` entry for the
    compressed bytes not read. Past the size cap, the head and the tail of the output are kept (:class:`Kept`),
    the lines between counted."""
    kept = Kept(lim.max_file_bytes)
    consumed = used = 0  # consumed: compressed bytes read; used: bytes the decompressor took
    magic = next(m for m, k in _MAGIC if k == kind)
    d = _decompressor(kind)
    pending = b""
    it = iter(chunks)
    while True:
        need = not pending if kind == "gzip" else (not pending and d.needs_input)
        if need:
            nxt = next(it, None)
            if nxt is None:
                break
            pending = nxt
            consumed += len(nxt)
        backup = d.copy() if kind == "gzip" else None
        try:
            piece = d.decompress(pending, _DSTEP)
        except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError) as e:
            if backup is not None:  # salvage what decompresses before the damage, 1 KiB of input at a time
                for i in range(0, len(pending), 1024):
                    try:
                        # (deflate's output is at most ~1,032 times its input: ~1 MiB a step)
                        piece = backup.decompress(pending[i : i + 1024], lim.max_file_bytes + 1)
                    except zlib.error:
                        break
                    kept.add(piece)
            warnings.append(
                f"{rel}: damaged {kind} data ({e}); kept {kept.words()} that decompressed before the damage"
            )
            skipped.append(skip_entry(rel, max(size - consumed, 0) or None, None, f"damaged {kind} data"))
            return kept.result()
        before = len(pending)
        pending = d.unconsumed_tail if kind == "gzip" else b""
        used += before - len(pending) - (len(d.unused_data) if d.eof else 0)
        kept.add(piece)
        total = kept.total
        if total > lim.ratio_floor_bytes and total > lim.max_ratio * max(used, 1):
            stop = f"compression ratio above {lim.max_ratio}:1 (a decompression bomb?; raise RANKSCOPE_MAX_RATIO)"
            warnings.append(f"{rel}: stopped reading, {stop}; kept {kept.words()} decompressed")
            skipped.append(skip_entry(rel, max(size - used, 0), None, stop.split(" (")[0]))
            return kept.result()
        if d.eof:
            tail = d.unused_data
            while not tail:
                nxt = next(it, None)
                if nxt is None:
                    return kept.result()
                consumed += len(nxt)
                tail = nxt
            if not tail.startswith(magic):
                if tail.strip(b"\x00"):
                    warnings.append(f"{rel}: {len(tail)}+ bytes after the {kind} data ignored (not {kind})")
                    skipped.append(
                        skip_entry(
                            rel,
                            max(size - consumed, 0) + len(tail),
                            None,
                            f"not {kind} data after the archive",
                        )
                    )
                return kept.result()
            d = _decompressor(kind)
            pending = tail
    if not d.eof:
        warnings.append(f"{rel}: truncated {kind} archive; read the {kept.total} bytes that decompress")
    return kept.result()


def _decompress_zstd(
    path: Path,
    rel: str,
    lim: _limits.Limits,
    warnings: list[str],
    skipped: list[dict[str, object]],
    size: int,
) -> bytes | Ends:
    """zstd through pyarrow's codec (a dependency already); bounded like the others."""
    try:
        import pyarrow as pa

        raw = pa.OSFile(str(path))
        stream = pa.CompressedInputStream(raw, "zstd")
    except Exception as e:  # noqa: BLE001 - no zstd codec in this pyarrow build
        warnings.append(
            f"{rel}: skipped, zstd-compressed and no zstd decoder ({type(e).__name__}); decompress it first"
        )
        skipped.append(skip_entry(rel, size, None, "zstd not readable"))
        return b""
    kept = Kept(lim.max_file_bytes)
    try:
        with stream:
            while True:
                # 64 KiB a read: a read that meets damage (a truncated file) raises and loses what it had
                # decompressed, so a smaller read loses less of the end, where a killed job's failure is
                piece = stream.read(_ZSTD_READ)
                if not piece:
                    break
                kept.add(bytes(piece))
                total = kept.total
                # the ratio to the compressed bytes read so far (the codec reads 64 KiB at a time), not to the
                # file's size: a tiny frame of newlines before a large skippable frame is a bomb all the same
                if total > lim.ratio_floor_bytes and total > lim.max_ratio * max(raw.tell(), 1):
                    why = f"compression ratio above {lim.max_ratio}:1"
                    warnings.append(
                        f"{rel}: stopped reading, {why}; kept {kept.words()} decompressed (raise RANKSCOPE_MAX_RATIO)"
                    )
                    skipped.append(skip_entry(rel, None, None, why))
                    break
    except Exception as e:  # noqa: BLE001 - pyarrow raises OSError/ArrowInvalid on damaged frames
        warnings.append(
            f"{rel}: damaged zstd data ({type(e).__name__}); kept {kept.words()} that decompressed before the damage"
        )
        skipped.append(skip_entry(rel, None, None, "damaged zstd data"))
    return kept.result()


#: Control bytes that do not occur in text logs (tab, newline, CR, form feed, vertical tab and ESC do).
_CONTROL_BYTES = bytes(b for b in range(32) if b < 9 or (13 < b < 32 and b != 27))


def looks_binary(data: bytes | bytearray) -> bool:
    """More than 10% control bytes (not tab/newline/CR/ESC; runs of 16+ NULs, i.e. holes, excluded) in
    ``data`` (a region of at most about 64 KiB). Tiny regions (< 64 bytes) are always text: a stray
    control byte in a one-line file is not worth losing the line."""
    sample = data[: 4 * _REGION]
    if b"\x00" * 16 in sample:
        sample = _NUL_RUN.sub(b"", sample)
    if len(sample) < _BINARY_MIN:
        return False
    ctrl = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return ctrl / len(sample) > 0.10


def _regions(data: bytes | bytearray) -> Iterator[tuple[int, int]]:
    """(start, end) spans of about 64 KiB, cut after a newline."""
    n = len(data)
    start = 0
    while start < n:
        end = start + _REGION
        if end >= n:
            yield start, n
            return
        nl = data.find(b"\n", end)
        end = n if nl < 0 else nl + 1
        yield start, end
        start = end


def _nlines(data: bytes | bytearray) -> int:
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def _utf16(data: bytes | bytearray) -> str | None:
    """``utf-16-le``/``utf-16-be`` when ``data`` looks like UTF-16 (BOM, or NULs in every other byte of
    ASCII text); else None."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") and not data.startswith(b"\xff\xfe\x00\x00"):
        return "utf-16"
    sample = data[:4096]
    if len(sample) < 8:
        return None
    even, odd = sample[0::2], sample[1::2]
    ze, zo = even.count(0) / len(even), odd.count(0) / len(odd)
    if zo > 0.4 and ze < 0.05:
        return "utf-16-le"
    if ze > 0.4 and zo < 0.05:
        return "utf-16-be"
    return None


def _sniff(head: bytes) -> str | None:
    """The compression named by the magic bytes at the head of a file, or None."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    return None


def read_lines(
    path: Path,
    rel: str,
    on_bytes: Callable[[int], None] | None = None,
    lim: _limits.Limits | None = None,
) -> ReadResult:
    """Read ``path`` and return its physical lines (see the module docstring for what is done to them).

    ``on_bytes(n)``: progress within the file, ``n`` the bytes of it read so far (of its size on disk;
    called per MiB of plain files and per compressed chunk, not for zstd; not at all for small files).

    Never raises on bad content or an unreadable, vanished or non-regular file: those give an empty result
    with a warning and a ``skipped`` entry. Line numbers are positions in the returned series plus one, but
    past the lines a cap left out between head and tail (:meth:`ReadResult.parts`).
    ``lim``: the limits in force (default :func:`correlator.limits.current`; a caller reading many files
    reads them once).
    """
    if lim is None:
        lim = _limits.current()
    warnings: list[str] = []
    skipped: list[dict[str, object]] = []
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return _skipped(rel, "vanished before it was read", None, warnings)
    except OSError as e:
        return _skipped(rel, f"cannot read ({e.strerror or e})", None, warnings)
    try:
        try:
            st = os.fstat(fd)
        except OSError as e:
            return _skipped(rel, f"cannot read ({e.strerror or e})", None, warnings)
        if not stat.S_ISREG(st.st_mode):
            return _skipped(rel, f"not a regular file ({file_kind(st.st_mode)})", None, warnings)
        size = st.st_size
        info = {"holes": 0, "shrank": 0}
        # A small file (most of a tree of 200,000 per-rank files) is read whole in the same call that reads
        # its head, with one byte past its size to tell whether it grew: two system calls fewer per file.
        small = size <= min(_SMALL_FILE, lim.max_file_bytes)
        try:
            head = os.pread(fd, size + 1, 0) if small else os.pread(fd, 6, 0) if size else b""
        except OSError as e:
            return _skipped(rel, f"cannot read ({e.strerror or e})", size, warnings)
        kind = _sniff(head[:6] if size else b"")
        suffix_kind = _SUFFIX.get(os.path.splitext(path.name)[1].lower())
        if suffix_kind and kind != suffix_kind and size:
            if kind is None:
                warnings.append(
                    f"{rel}: named {Path(path.name).suffix} but not {suffix_kind}-compressed; "
                    "read as plain text"
                )
            else:
                warnings.append(
                    f"{rel}: named {Path(path.name).suffix} but {kind}-compressed; decompressed as {kind}"
                )
        elif kind and not suffix_kind:
            warnings.append(f"{rel}: {kind}-compressed data without a {kind} suffix; decompressed")
        data: bytes | bytearray | Ends
        try:
            if kind == "zstd":
                data = _decompress_zstd(path, rel, lim, warnings, skipped, size)
            elif kind:
                # bzip2/xz buffer their input: feed them small pieces so that the ratio is measured closely.
                raw = _raw_chunks(
                    fd, size, False, rel, warnings, info, 64 * 1024 if kind == "gzip" else 4096, on_bytes
                )
                data = _decompress(raw, kind, rel, lim, warnings, skipped, size)
            elif small:
                data = _small_plain(head, size, rel, warnings, info)
            elif size > lim.max_file_bytes:  # past the size cap: its head and its tail
                data = _kept(_raw_chunks(fd, size, True, rel, warnings, info, None, on_bytes), lim)
            else:
                data = _read_plain(fd, size, rel, warnings, info, on_bytes)
        except OSError as e:
            return _skipped(rel, f"cannot read ({e.strerror or e})", size, warnings)
    finally:
        os.close(fd)
    if info["holes"]:
        warnings.append(f"{rel}: {info['holes']} NUL bytes of sparse holes skipped")
    if isinstance(data, Ends):  # past the size cap: its head and its tail
        res = _ends_result(data, rel, path.name, lim, warnings, skipped)
    else:
        res = _lines_from_bytes(data, rel, path.name, lim, warnings, skipped)
    res.mtime = st.st_mtime
    return res


@dataclass
class Ends:
    """A file past the size cap as :class:`Kept` kept it: its head (whole lines), the lines and bytes between
    head and tail (counted, not kept), its tail (whole lines)."""

    head: bytes
    middle_lines: int
    middle_bytes: int
    tail: bytes
    encoding: str | None = None  # utf-16-le / utf-16-be: the tail's (it has no BOM to tell)
    cut: str = "file size cap"  # or "line cap" (:func:`_line_cap_ends`)


def _ends_result(
    ends: Ends,
    rel: str,
    name: str,
    lim: _limits.Limits,
    warnings: list[str],
    skipped: list[dict[str, object]],
) -> ReadResult:
    """The lines of :class:`Kept`'s head and tail as one result: each read as a file's text is
    (:func:`_lines_from_bytes`), the tail numbered from its first line's number in the file, the lines between
    them skipped (a warning and a ``skipped`` entry ``file size cap``), then the line cap applied to both."""
    cap = lim.max_file_bytes
    size = len(ends.head) + ends.middle_bytes + len(ends.tail)  # (decompressed) bytes of the file
    whole = replace(lim, max_lines=1 << 62)  # the line cap counts the lines of head and tail together
    a = _lines_from_bytes(ends.head, rel, name, whole, warnings, skipped)
    b = None
    if ends.tail:
        b = _lines_from_bytes(ends.tail, rel, name, whole, warnings, skipped, ends.encoding)
    first_tail = a.physical_lines + ends.middle_lines + 1
    if ends.cut == "line cap":  # as _keep_ends words it
        warnings.append(
            f"{rel}: {ends.middle_lines} lines past the line cap ({lim.max_lines} lines per file; raise "
            f"RANKSCOPE_MAX_LINES) left out: kept its first {a.physical_lines} and last "
            f"{b.physical_lines if b else 0} lines (to line {a.physical_lines}, from line {first_tail})"
        )
    else:
        warnings.append(
            f"{rel}: {size} bytes, past the file size cap ({cap // (1024 * 1024)} MiB; raise "
            f"RANKSCOPE_MAX_FILE_MB): kept its first {len(ends.head)} and last {len(ends.tail)} bytes (to line "
            f"{a.physical_lines}, from line {first_tail}); the {ends.middle_lines} lines between them left out"
        )
    skipped.append(skip_entry(rel, ends.middle_bytes, ends.middle_lines, ends.cut))
    parts = [a.lines] + ([b.lines] if b is not None else [])
    s = pl.concat(parts, rechunk=False) if len(parts) > 1 else parts[0]
    starts = [(a.n_lines, first_tail)] if b is not None and b.n_lines else []
    physical = a.physical_lines + ends.middle_lines + (b.physical_lines if b else 0)
    skipped_lines = a.skipped_lines + ends.middle_lines + (b.skipped_lines if b else 0)
    reasons = [r.skip_reason for r in (a, b) if r is not None and r.skip_reason]
    if s.len() > lim.max_lines:
        s, starts, extra = _keep_ends(s, starts, lim.max_lines, rel, warnings, skipped)
        skipped_lines += extra
    return ReadResult(
        s,
        physical,
        skipped_lines,
        warnings,
        skip_reason=reasons[0] if reasons else ends.cut,
        skipped=skipped,
        starts=starts,
    )


def _line_end(data: bytes | bytearray, k: int) -> int:
    """The offset just past the ``k``-th newline of ``data`` (``k`` >= 1, at most its newlines): counted per MiB,
    then found by halving within the MiB that holds it (C-speed counts, no Python per line)."""
    step = 1 << 20
    start = seen = 0
    while start < len(data):
        n = data.count(b"\n", start, start + step)
        if seen + n >= k:
            break
        seen, start = seen + n, start + step
    else:
        raise ValueError(f"no newline {k} in {len(data)} bytes")
    lo, hi = start, min(start + step, len(data))  # the k-th newline is in [lo, hi): find the shortest prefix
    while lo < hi:
        mid = (lo + hi) // 2
        if seen + data.count(b"\n", start, mid + 1) >= k:
            hi = mid
        else:
            lo = mid + 1
    return lo + 1


def _line_cap_ends(data: bytes | bytearray, max_lines: int) -> Ends | None:
    """A file's bytes past the line cap as the head and tail its lines keep (the first ``max_lines //
    HEAD_SHARE`` lines and the last ones, as :func:`_keep_ends` keeps them) and the lines between counted, cut
    before any line is split: a file of 60 M short lines took ~3 GB as lines; None within the cap."""
    n = data.count(b"\n")
    n_lines = n + (0 if data.endswith(b"\n") or not data else 1)
    if n_lines <= max_lines:
        return None
    head = max_lines // HEAD_SHARE
    tail = max_lines - head
    h = _line_end(data, head) if head else 0
    t = _line_end(data, n_lines - tail)
    return Ends(bytes(data[:h]), n_lines - head - tail, t - h, bytes(data[t:]), cut="line cap")


def _small_plain(head: bytes, size: int, rel: str, warnings: list[str], info: dict[str, int]) -> bytes:
    """The bytes of a small plain file from ``head``, one read of ``size + 1`` bytes at its start, as
    :func:`_read_plain` would read them: a file that shrank is read as it is now, one that grew as it was
    when opened (each with its warning). Small files hold no whole chunk, so no sparse hole is looked for,
    and stay under the file size cap (the caller checks)."""
    if len(head) < size:
        _note_shrank(rel, size, len(head), warnings, info)
        return head
    if len(head) > size:
        _note_grew(size, rel, warnings)
        return head[:size]
    return head


def _read_plain(
    fd: int,
    size: int,
    rel: str,
    warnings: list[str],
    info: dict[str, int],
    on_bytes: Callable[[int], None] | None = None,
) -> bytes | bytearray:
    """The bytes of a plain file, read per :data:`_CHUNK` straight into one buffer of its size (no copy to
    join the chunks: 0.24 s of 1.9 s for the 243 MB of the 64-rank bench). As :func:`_raw_chunks` does:
    whole chunks of NUL bytes are sparse holes (skipped with SEEK_DATA, counted in ``info['holes']``), a
    file that shrank or grew while read is read as it was. A file past the size cap is read by :class:`Kept`."""
    buf = bytearray(size)
    mv = memoryview(buf)
    pos = filled = 0
    ended = True  # read up to the size it had when opened (only then is a file that grew noticed)
    try:
        while pos < size:
            if on_bytes is not None and pos:
                on_bytes(pos)
            want = min(_CHUNK, size - pos, len(buf) - filled)
            try:
                n = os.readv(fd, [mv[filled : filled + want]])
            except BlockingIOError:
                n = 0
            if not n:
                _note_shrank(rel, size, pos, warnings, info)
                ended = False
                break
            pos += n
            if (
                n == _CHUNK
                and buf[filled] == 0
                and buf[filled + n - 1] == 0
                and buf.count(0, filled, filled + n) == n
                and hasattr(os, "SEEK_DATA")
            ):
                info["holes"] += n  # not kept: the next read goes to the same place
                nxt = _past_hole(fd, pos, size, info)
                if nxt is None:
                    ended = False
                    break
                pos = nxt
                continue
            filled += n
    finally:
        mv.release()
    del buf[filled:]
    if ended:
        _warn_if_grew(fd, size, rel, warnings)
    return buf


def _escape_controls(s: pl.Series, text: str) -> pl.Series:
    for ch in sorted(set(_CTRL_RE.findall(text))):
        s = s.str.replace_all(ch, f"\\x{ord(ch):02x}", literal=True)
    return s


#: Of what a file keeps past the size or line cap (:mod:`correlator.limits`), the share kept from its start
#: (the rest from its end): a failed job's log ends in its failure, which a diagnosis needs most, and starts
#: with what tells who wrote it (NCCL's init lines, the world size, a configuration), which it needs too.
HEAD_SHARE = 4


def _line_at(starts: list[tuple[int, int]], row: int) -> int:
    """The line number of row ``row`` of lines numbered by ``starts`` (see :attr:`ReadResult.starts`)."""
    first, line = 0, 1
    for r, n in starts:
        if r > row:
            break
        first, line = r, n
    return line + row - first


def _keep_ends(
    s: pl.Series,
    starts: list[tuple[int, int]],
    max_lines: int,
    rel: str,
    warnings: list[str],
    skipped: list[dict[str, object]],
) -> tuple[pl.Series, list[tuple[int, int]], int]:
    """``s`` (numbered by ``starts``) cut to ``max_lines`` lines: its first ``max_lines // HEAD_SHARE`` and its
    last lines, the line numbers of those kept unchanged (the lines between counted, with a warning and a
    ``skipped`` entry); returns the lines kept, their ``starts`` and how many were left out."""
    n = s.len()
    extra = n - max_lines
    head = max_lines // HEAD_SHARE
    tail_at = head + extra  # the first row of the tail
    last_head, first_tail = _line_at(starts, head - 1) if head else 0, _line_at(starts, tail_at)
    warnings.append(
        f"{rel}: {extra} lines past the line cap ({max_lines} lines per file; raise RANKSCOPE_MAX_LINES) left out: "
        f"kept its first {head} and last {n - tail_at} lines (to line {last_head}, from line {first_tail})"
    )
    rest = s.slice(head, extra)
    skipped.append(skip_entry(rel, int(rest.str.len_bytes().sum() or 0) + extra, extra, "line cap"))
    kept = pl.concat([s.slice(0, head), s.slice(tail_at)], rechunk=False)
    new = [(r, line) for r, line in starts if r < head] + [(head, first_tail)]
    new += [(r - extra, line) for r, line in starts if r > tail_at]
    return kept, new, extra


def _truncate_long(
    s: pl.Series, cap: int, rel: str, warnings: list[str], skipped: list[dict[str, object]]
) -> pl.Series:
    """``s`` with each line longer than ``cap`` bytes cut to ``cap`` and marked (with a warning)."""
    long = s.str.len_bytes() > cap
    n_long = int(long.sum())
    if n_long:
        longest = int(s.str.len_bytes().max())  # type: ignore[arg-type]
        dropped = int((s.filter(long).str.len_bytes() - cap).sum())
        s = pl.select(
            pl.when(long)
            .then(
                pl.concat_str(
                    [
                        s.str.slice(0, cap),
                        pl.lit(" …[truncated: line of "),
                        s.str.len_bytes().cast(pl.String),
                        pl.lit(" bytes]"),
                    ]
                )
            )
            .otherwise(s)
            .alias("text")
        ).to_series()
        # str.slice counts characters: bring multi-byte lines under the cap too.
        warnings.append(
            f"{rel}: {n_long} line(s) longer than {cap} bytes kept truncated (longest {longest} "
            "bytes; raise RANKSCOPE_MAX_LINE_KB)"
        )
        skipped.append(skip_entry(rel, dropped, 0, "line truncated"))
    return s


def _drop_binary(
    data: bytes | bytearray, clean: bool, rel: str, warnings: list[str], skipped: list[dict[str, object]]
) -> tuple[bytes | bytearray, int | None, bool]:
    """``data`` without its binary regions (judged per region: text around a binary blob is kept), the
    lines they held (None: no binary region), and whether the whole file is binary (then the lines are the
    file's)."""
    bin_regions: list[tuple[int, int]] = []
    if clean:
        return data, None, False
    if len(data) > _REGION:
        bin_regions = [(a, b) for a, b in _regions(data) if looks_binary(data[a:b])]
    elif len(data) >= _BINARY_MIN and looks_binary(data):
        bin_regions = [(0, len(data))]
    if not bin_regions:
        return data, None, False
    n_bin = sum(_nlines(data[a:b]) for a, b in bin_regions)
    nbytes = sum(b - a for a, b in bin_regions)
    if nbytes >= len(data) * 0.9:
        n = _nlines(data)
        warnings.append(f"{rel}: skipped, binary content ({len(data)} bytes, {n} lines)")
        skipped.append(skip_entry(rel, len(data), n, "binary content"))
        return data, n, True
    parts, last = [], 0
    for a, b in bin_regions:
        parts.append(data[last:a])
        last = b
    parts.append(data[last:])
    # A binary region that ends without a newline leaves its line count in n_bin.
    warnings.append(
        f"{rel}: skipped {len(bin_regions)} binary region(s) ({nbytes} bytes, {n_bin} lines); "
        "the text around them is kept (line numbers after them count kept lines)"
    )
    skipped.append(skip_entry(rel, nbytes, n_bin, "binary content"))
    return b"".join(parts), n_bin, False


def _utf16_text(data: bytes | bytearray) -> tuple[str | None, str]:
    """(the UTF-16 encoding of ``data`` and its text) when it is UTF-16 text, else (None, "")."""
    enc = _utf16(data) if data else None
    if not enc:
        return None, ""
    text = data.decode(enc, errors="replace").lstrip("\ufeff")
    sample = text[:4096]
    ascii_ish = sum(1 for c in sample if " " <= c < "\x7f" or c in "\t\n\r")
    if not sample or "\ufffd" in sample or ascii_ish < 0.9 * len(sample):
        return None, ""  # a BOM-like start on bytes that are not UTF-16 text: read as bytes
    return enc, text


def _drop_nuls(
    data: bytes | bytearray, clean: bool, rel: str, warnings: list[str]
) -> tuple[bytes | bytearray, bool, bool]:
    """``data`` without NUL bytes (with a warning), whether it was only NULs, and whether it ended in a
    line of only NULs with no newline after it."""
    only_nul = not clean and data[:1] == b"\x00" and not data.strip(b"\x00")
    if clean or b"\x00" not in data:
        return data, only_nul, False
    nul = data.count(b"\x00")
    warnings.append(f"{rel}: {nul} NUL bytes dropped")
    # A last line of only NULs with no newline after it stays, empty, like any other NUL-only line
    # (without the NULs the text would end in the newline before it, and the line would be gone).
    nul_tail = data.endswith(b"\x00") and data.rstrip(b"\x00").endswith(b"\n")
    return data.replace(b"\x00", b""), only_nul, nul_tail


def _lines_from_bytes(
    data: bytes | bytearray,
    rel: str,
    name: str,
    lim: _limits.Limits,
    warnings: list[str],
    skipped: list[dict[str, object]],
    utf16: str | None = None,
) -> ReadResult:
    """The lines of ``data``, a file's bytes (see the module docstring). ``utf16``: the encoding of a UTF-16
    file's tail (:class:`Ends`), which has no BOM to tell it, already reported."""
    skipped_lines = 0
    reason: str | None = None
    enc, text = _utf16_text(data) if utf16 is None else (utf16, data.decode(utf16, errors="replace"))
    only_nul = False
    nul_tail = False
    clean = False
    bom_only = False
    if enc:
        if utf16 is None:
            warnings.append(f"{rel}: UTF-16 text ({enc}); decoded")
        data = b""
        bad = 0
    elif len(data) > lim.max_lines and (ends := _line_cap_ends(data, lim.max_lines)) is not None:
        return _ends_result(ends, rel, name, lim, warnings, skipped)  # past the line cap: cut as bytes
    else:
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
            bom_only = not data  # a file of a BOM alone: one (empty) line, as one of NULs alone
        # Binary judged per region: text around a binary blob is kept. One C-speed pass first: a file
        # without any control byte (the usual log) has no binary region and nothing to escape.
        clean = _is_clean(data)
        data, n_bin, whole = _drop_binary(data, clean, rel, warnings, skipped)
        if whole and n_bin is not None:
            return ReadResult(_empty(), n_bin, n_bin, warnings, skip_reason="binary content", skipped=skipped)
        if n_bin is not None:
            skipped_lines += n_bin
            reason = "binary content"
        # A clean file (ASCII, no control byte) has no NUL, no invalid UTF-8 and no ANSI escape: the
        # whole-text scans below are skipped for it.
        data, only_nul, nul_tail = _drop_nuls(data, clean, rel, warnings)
        if clean and len(data) >= _CSV_MIN_CHARS and b"\r" not in data:
            # A large clean file without CR: its bytes are its text, split by polars' reader (no str of it)
            return _clean_lines(data, rel, name, lim, warnings, skipped, skipped_lines, reason)
        text = data.decode("ascii") if clean else data.decode("utf-8", errors="replace")
        bad = (
            text.count("\ufffd") - data.decode("utf-8", errors="ignore").count("\ufffd")
            if not clean and "\ufffd" in text
            else 0
        )
    # a file of only NULs (or of a BOM alone) is one empty line, counted
    one_empty = not enc and (only_nul or bom_only)
    if not text and not one_empty:
        return ReadResult(
            _empty(), skipped_lines, skipped_lines, warnings, skip_reason=reason, skipped=skipped
        )
    if bad:
        warnings.append(f"{rel}: {bad} invalid UTF-8 sequences replaced by U+FFFD")
    has_cr = "\r" in text
    if has_cr and "\n" not in text and _cr_only(text):
        text = text.replace("\r", "\n")
        warnings.append(f"{rel}: CR-only line endings; split into lines at CR")
    final_nl = text.endswith("\n") and not nul_tail
    if not final_nl and text and not name.endswith(".json"):
        warnings.append(f"{rel}: last line has no newline (truncated write?); kept as is")
    if clean and not has_cr and len(text) <= min(_SMALL_TEXT, lim.max_line_bytes):
        # A small clean file (most of a tree of 200,000 per-rank files): split in Python, one Series built
        # (four polars calls per file were ~70 % of its fixed cost). Same pieces as the split below.
        pieces = text.split("\n")
        if final_nl:
            pieces.pop()
        n = len(pieces)
        if n <= lim.max_lines:  # no further change to these lines (see below): no Series built here
            return ReadResult(
                pieces,
                n + skipped_lines,
                skipped_lines,
                warnings,
                skip_reason=reason,
                skipped=skipped,
                text_bytes=len(text) + (0 if final_nl else 1),
            )
        s = pl.Series("text", pieces, dtype=pl.String)
    elif _csv_splits(text, has_cr, final_nl):
        s = _text_lines(data if clean else text.encode("utf-8"))  # a clean file's bytes are its text
    else:
        # Split in Rust (no Python str per line: half the time of str.split + Series at 5 M lines); the
        # empty piece after a final newline is sliced off (no copy of the text without it).
        s = pl.Series("text", [text], dtype=pl.String).str.split("\n").explode().alias("text")
        if final_nl:
            s = s.slice(0, s.len() - 1)

    def rewrite(s: pl.Series) -> pl.Series:
        """Each line kept rewritten: line ends, colour codes, control characters."""
        if has_cr:
            # CRLF -> LF; a bare CR redraws the line: keep the text after the last non-final CR.
            s = s.str.strip_suffix("\r").str.replace(r"(?s)^.*\r", "")
        if not clean and "\x1b[" in text:
            s = s.str.replace_all(ANSI_RE.pattern, "")
        if not clean and _CTRL_RE.search(text):
            s = _escape_controls(s, text)
        return s

    exact = clean and not has_cr  # the lines are the text, split
    return _capped(s, len(text), final_nl, exact, rel, lim, warnings, skipped, skipped_lines, reason, rewrite)


def _clean_lines(
    data: bytes | bytearray,
    rel: str,
    name: str,
    lim: _limits.Limits,
    warnings: list[str],
    skipped: list[dict[str, object]],
    skipped_lines: int,
    reason: str | None,
) -> ReadResult:
    """:func:`_lines_from_bytes` of clean ``data`` (ASCII, no control byte, no CR) of at least
    :data:`_CSV_MIN_CHARS` bytes: its lines are the pieces between newlines, read by :func:`_text_lines` from
    the bytes; no ``str`` of the text is built (a 302 MB console: 0.17 s and its size in memory)."""
    final_nl = data.endswith(b"\n")
    if not final_nl and not name.endswith(".json"):
        warnings.append(f"{rel}: last line has no newline (truncated write?); kept as is")
    return _capped(
        _text_lines(data), len(data), final_nl, True, rel, lim, warnings, skipped, skipped_lines, reason
    )


def _capped(
    s: pl.Series,
    chars: int,
    final_nl: bool,
    exact: bool,
    rel: str,
    lim: _limits.Limits,
    warnings: list[str],
    skipped: list[dict[str, object]],
    skipped_lines: int,
    reason: str | None,
    rewrite: Callable[[pl.Series], pl.Series] | None = None,
) -> ReadResult:
    """The read of a file's lines ``s`` (of a text of ``chars`` characters; ``exact``: ``s`` is that text
    split at its newlines) within the line cap, the lines kept passed through ``rewrite``, within the line length
    cap."""
    n = s.len()
    bin_lines = skipped_lines
    starts: list[tuple[int, int]] = []
    if n > lim.max_lines:
        s, starts, extra = _keep_ends(s, starts, lim.max_lines, rel, warnings, skipped)
        skipped_lines += extra
        reason = reason or "line cap"
    if rewrite is not None:
        s = rewrite(s)
    cap = lim.max_line_bytes
    if chars > cap:
        s = _truncate_long(s, cap, rel, warnings, skipped)
    exact = exact and n <= lim.max_lines and chars <= cap
    text_bytes = chars + (0 if final_nl else 1) if exact else None
    return ReadResult(
        s,
        n + bin_lines,
        skipped_lines,
        warnings,
        skip_reason=reason,
        skipped=skipped,
        text_bytes=text_bytes,
        starts=starts,
    )


#: Texts of at least this many characters are split by polars' CSV reader (:func:`_text_lines`), shorter ones by
#: ``str.split``: the reader's fixed cost (~0.3-0.6 ms a call against ~0.2 ms) is paid back from about 1 MiB
#: (a tree of 200,000 small files must not pay it per file), and its memory saving counts in large files.
_CSV_MIN_CHARS = 1 << 20


def _csv_splits(text: str, has_cr: bool, final_nl: bool) -> bool:
    """Whether :func:`_text_lines` gives the lines of ``text`` (``has_cr``: it holds a CR; ``final_nl``: its
    last newline ends its last line): it holds at least :data:`_CSV_MIN_CHARS` characters, no CR (a line end or
    a redraw, handled on the split) and no ``\\x1f``, and a final newline is not followed by a line of NULs
    (dropped from ``text``, that line stays)."""
    return (
        len(text) >= _CSV_MIN_CHARS and not has_cr and "\x1f" not in text and final_nl == text.endswith("\n")
    )


def _text_lines(data: bytes | bytearray) -> pl.Series:
    """The lines of ``data``, UTF-8 text without CR or ``\\x1f`` (not empty), as a String series named
    ``text``: the pieces between newlines, none after a final one. Read by polars' CSV reader with that
    separator and no quote character, so each line is one field: the pieces ``str.split`` gives, on all
    cores, in several chunks, at about a fifth of its memory (a 75 MB tee'd console, 800k lines: +91 MiB and
    0.09 s against +513 MiB and 0.31 s for one Series of the text split and exploded). The caller escapes
    control characters and ANSI sequences in the lines, as it did in the split's."""
    return pl.read_csv(
        bytes(data),
        has_header=False,
        separator="\x1f",
        quote_char=None,
        schema={"text": pl.String},
        empty_string_is_null=False,
    ).to_series()


#: Files of at most this many characters of clean text are split into lines in Python (see
#: ``_lines_from_bytes``): below it one Series construction is cheaper than a split in polars.
_SMALL_TEXT = 64 * 1024


def _cr_only(text: str) -> bool:
    """A file with CRs and no LF at all: old Mac line ends (a progress bar alone, redrawing itself, ends
    with a newline when its process exits; a file cut before that is read as lines too, none is lost)."""
    return "\r" in text.rstrip("\r")


__all__ = ["Ends", "Kept", "ReadResult", "read_lines", "skip_entry"]
