"""Logs as users hold them: a tar or zip archive, or a pasted stream on standard input.

:func:`opened` turns such an input into a folder (or one file) that every command reads as usual, and
removes it afterwards. It sits in front of discovery and changes nothing for a folder or a plain log file.

- ``-``: standard input is copied to a temporary file ``stdin`` (then treated like any file: a gzip or
  tar piped in is recognised by its bytes).
- a tar (plain, gzip, bzip2, xz or zstd; ``.tar``, ``.tar.gz``, ``.tgz``, ``.tar.zst`` … or no suffix at
  all: it is recognised by the ``ustar`` magic of its first header) or a zip (``PK\\x03\\x04``): the
  regular-file members are written under a temporary folder ``<archive name>!/``, so evidence reads
  ``job.tar.gz!/node-a/rank2.log:47``. Nothing is written outside that folder: absolute member names and
  ``..`` parts are refused, links, devices and FIFOs are skipped, and the limits of
  :mod:`correlator.limits` hold (bytes per member after decompression, the compression ratio of the whole
  archive); each skip is a warning. A member (or standard input) past the size cap is copied as the reader
  keeps a file past it, its head and tail, so the failure it ends in is read at its own line number.

Compressed tars are read as a stream (Python's ``tarfile``; zstd through pyarrow's codec, as in
:mod:`correlator.read`).
"""

from __future__ import annotations

import bz2
import contextlib
import datetime
import lzma
import os
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from correlator import limits
from correlator.discover import DiscoveryError
from correlator.errors import InputError
from correlator.output import copied_from
from correlator.read import Ends, Kept

__all__ = ["archive_kind", "opened"]

_CHUNK = 1 << 20
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: At most this many members are written (a zip of a million empty files is a bomb of another kind).
MAX_MEMBERS = 1_000_000
#: At most this many folders are created for an archive's members (each costs an inode in /tmp).
MAX_FOLDERS = 100_000
#: A member deeper than this many folders is skipped (no log tree is that deep; a bomb's names are).
MAX_DEPTH = 64
#: What each entry of an archive (a member, a folder, a link: a tar header) and each folder created count
#: against the compression ratio at least, however few bytes they hold: empty members and folders are not free.
ENTRY_COST = 512
FOLDER_COST = 4096


def _head_decompressed(path: Path, head: bytes) -> bytes:
    """The first ~512 bytes of ``path`` after the compression its magic names (b"" when none or damaged)."""
    try:
        if head.startswith(b"\x1f\x8b"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 1024)
        if head.startswith(b"BZh"):
            return bz2.BZ2Decompressor().decompress(head, 1024)
        if head.startswith(b"\xfd7zXZ\x00"):
            return lzma.LZMADecompressor().decompress(head, 1024)
        if head.startswith(_ZSTD_MAGIC):
            with _zstd_stream(path) as s:
                return bytes(s.read(1024))
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        return b""
    except Exception:  # noqa: BLE001 - pyarrow's ArrowInvalid on a damaged zstd frame
        return b""
    return b""


def archive_kind(path: Path) -> str | None:
    """``"zip"``, ``"tar"`` or None for ``path`` (a file), from its bytes: the zip local-header magic, or
    the POSIX ``ustar`` magic at offset 257 of the first tar header, under any compression that
    :mod:`correlator.read` knows (gzip, bzip2, xz, zstd). A pre-POSIX (v7) tar has no magic and is taken
    by its ``.tar`` suffix. Never raises: an unreadable file is not an archive."""
    try:
        if not path.is_file():
            return None
        with open(path, "rb") as f:
            head = f.read(64 * 1024)
    except OSError:
        return None
    if head.startswith(_ZIP_MAGIC):
        return "zip"
    body = head if head[257:262] == b"ustar" else _head_decompressed(path, head)
    if body[257:262] == b"ustar":
        return "tar"
    if path.name.lower().endswith(".tar"):
        try:
            return "tar" if tarfile.is_tarfile(path) else None
        except OSError:
            return None
    return None


@contextlib.contextmanager
def _zstd_stream(path: Path) -> Iterator[IO[bytes]]:
    try:
        import pyarrow as pa

        stream = pa.CompressedInputStream(pa.OSFile(str(path)), "zstd")
    except Exception as e:  # noqa: BLE001 - a pyarrow build without zstd
        raise InputError(f"{path}: zstd-compressed and no zstd decoder ({type(e).__name__})") from None
    with stream:
        yield stream  # type: ignore[misc]


def _member_path(root: Path, name: str) -> Path | None:
    """Where member ``name`` goes under ``root``, or None when it would leave it (absolute, ``..``)."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".")]
    if not parts or parts[0] == "/" or ".." in parts or any("\x00" in p for p in parts):
        return None
    # ``root`` is a new folder that holds only what this module wrote (folders and regular files, never a
    # link), so a name without ``..`` stays inside it.
    return root.joinpath(*parts)


def _copy_capped(
    read: Callable[[int], bytes], dest: Path, cap: int, more: Callable[[int], bool] | None = None
) -> tuple[int, Ends | None, int]:
    """Copy the stream ``read`` to ``dest`` so that :func:`correlator.read.read_lines` sees in it what it would
    see in the stream itself. Up to ``cap`` bytes, the stream whole. Past it, what :class:`correlator.read.Kept`
    keeps of a file past the size cap (the whole lines of its first quarter and a window of its last three
    quarters, held in memory as the reader holds them) with, between them, one empty line for each line left
    out (at most ``cap`` of them, the disk a copy takes stays under twice the cap): each line kept has its line
    number in the stream, and the reader, which finds the copy past the cap too, counts the empty lines
    without keeping them. ``more(n)``, called after each piece of ``n`` bytes, returns False to stop the copy
    there (the archive's ratio cap). Returns the bytes read, the head and tail kept (None when the stream
    fitted) and the empty lines written for the lines left out."""
    total = 0
    kept: Kept | None = None
    with open(dest, "wb") as out:
        while True:
            piece = read(_CHUNK)
            if not piece:
                break
            total += len(piece)
            if kept is None and total <= cap:
                out.write(piece)
            else:
                if kept is None:  # past the cap: the bytes so far are the start of what the reader keeps
                    out.flush()
                    kept = Kept(cap)
                    with open(dest, "rb") as back:
                        while chunk := back.read(_CHUNK):
                            kept.add(chunk)
                kept.add(piece)
            if more is not None and not more(len(piece)):
                break
    if kept is None:
        return total, None, 0
    ends = kept.result()
    if not isinstance(ends, Ends):  # (past the cap, Kept always cuts)
        dest.write_bytes(ends)
        return total, None, 0
    pad = min(ends.middle_lines, cap)
    with open(dest, "wb") as out:
        out.write(ends.head)
        out.writelines(kept.nl * min(_CHUNK, pad - at) for at in range(0, pad, _CHUNK))
        out.write(ends.tail)
    return total, ends, pad


_CUT_NOTE = re.compile(r"^(?P<what>.+?): [0-9]+ bytes, past the file size cap \(")


def without_recut(warnings: list[str], notes: list[str]) -> list[str]:
    """``warnings`` (of a read of what :func:`opened` gave) without the size-cap warning of each member (or
    standard input) that ``notes`` already says was copied past the cap: the copy keeps the member's head,
    tail and line numbers, so the reader finds it past the cap too, and its warning would repeat the note
    with the copy's sizes instead of the member's."""
    cut = {m["what"] for n in notes if (m := _CUT_NOTE.match(n))}
    if not cut:
        return warnings
    return [w for w in warnings if not ((m := _CUT_NOTE.match(w)) and m["what"] in cut)]


def _cut_note(what: str, total: int, ends: Ends, pad: int, cap: int) -> str:
    """The warning for a stream copied past the size cap (:func:`_copy_capped`)."""
    head_lines = (
        ends.head.decode(ends.encoding, errors="replace").count("\n")
        if ends.encoding
        else ends.head.count(b"\n")
    )
    note = (
        f"{what}: {total} bytes, past the file size cap ({cap // (1024 * 1024)} MiB; raise "
        f"RANKSCOPE_MAX_FILE_MB): kept its first {len(ends.head)} and last {len(ends.tail)} bytes; the "
        f"{ends.middle_lines} lines between them (from line {head_lines + 1}) left out"
    )
    if pad < ends.middle_lines:
        note += f"; line numbers past them are {ends.middle_lines - pad} lower than in the input"
    return note


class _Budget:
    """The limits over one archive: bytes per member, the ratio of all members to the archive's size."""

    def __init__(self, archive: Path, warnings: list[str]) -> None:
        self.lim = limits.current()
        self.size = max(archive.stat().st_size, 1)
        self.total = 0
        self.members = 0
        self.warnings = warnings
        self.name = archive.name
        self.stopped = False
        self.folders: set[Path] = set()
        self.too_deep = 0
        self.first_deep = ""

    def copy(self, src: IO[bytes], dest: Path, member: str) -> None:
        """Copy one member, past ``max_file_bytes`` its head and tail (:func:`_copy_capped`); stop the
        archive at the ratio cap, measured on every byte decompressed."""
        cap = self.lim.max_file_bytes
        total, ends, pad = _copy_capped(src.read, dest, cap, self._more)
        if ends is not None:
            self.warnings.append(_cut_note(f"{self.name}!/{member}", total, ends, pad, cap))
        self.members += 1
        if self.members >= MAX_MEMBERS and not self.stopped:
            self.warnings.append(f"{self.name}: stopped unpacking after {MAX_MEMBERS} members")
            self.stopped = True

    def entry(self) -> bool:
        """Count one entry of the archive (:data:`ENTRY_COST`); False once the archive is stopped."""
        return not self.stopped and self._more(ENTRY_COST)

    def make_parents(self, root: Path, dest: Path) -> bool:
        """Create the folders between ``root`` and ``dest`` one by one (no recursion, however deep), each new
        one counted (:data:`FOLDER_COST`, :data:`MAX_FOLDERS`); False when the archive stops here."""
        at = root
        for part in dest.relative_to(root).parts[:-1]:
            at = at / part
            if at in self.folders:
                continue
            if len(self.folders) >= MAX_FOLDERS:
                self.warnings.append(f"{self.name}: stopped unpacking after creating {MAX_FOLDERS} folders")
                self.stopped = True
                return False
            at.mkdir(exist_ok=True)
            self.folders.add(at)
            if not self._more(FOLDER_COST):
                return False
        return True

    def finish(self) -> None:
        """The warnings counted while unpacking (one for all members too deep, however many)."""
        if self.too_deep:
            self.warnings.append(
                f"{self.name}!/{self.first_deep[:200]}: skipped, deeper than {MAX_DEPTH} folders"
                + (f", and {self.too_deep - 1} more members as deep" if self.too_deep > 1 else "")
            )

    def _more(self, n: int) -> bool:
        """Count ``n`` more bytes decompressed; False (with a warning) past the ratio cap."""
        self.total += n
        if self.total > self.lim.ratio_floor_bytes and self.total > self.lim.max_ratio * self.size:
            self.warnings.append(
                f"{self.name}: stopped unpacking after {self.total} bytes: compression ratio above "
                f"{self.lim.max_ratio}:1 (a decompression bomb?; each entry counts as at least "
                f"{ENTRY_COST} bytes and each folder created as {FOLDER_COST}; raise RANKSCOPE_MAX_RATIO); "
                "the members before it are read"
            )
            self.stopped = True
            return False
        return True


def _unpack_tar(archive: Path, root: Path, budget: _Budget) -> None:
    with open(archive, "rb") as raw:
        head = raw.read(4)
    try:
        with contextlib.ExitStack() as stack:
            if head.startswith(_ZSTD_MAGIC):
                fileobj: IO[bytes] = stack.enter_context(_zstd_stream(archive))
                tf = stack.enter_context(tarfile.open(fileobj=fileobj, mode="r|"))
            else:
                tf = stack.enter_context(tarfile.open(archive, mode="r|*"))
            for m in tf:
                if not budget.entry():
                    break
                if m.isdir():
                    continue
                if not m.isreg():
                    what = "link" if m.issym() or m.islnk() else "special file"
                    budget.warnings.append(f"{archive.name}!/{m.name}: skipped, a {what} in the archive")
                    continue
                _write_member(root, m.name, budget, lambda m=m: tf.extractfile(m), float(m.mtime))  # type: ignore[misc]
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as e:
        budget.warnings.append(
            f"{archive.name}: damaged or truncated tar ({type(e).__name__}: {e}); the members before the "
            "damage are read"
        )


def _write_member(root: Path, name: str, budget: _Budget, open_member, mtime: float | None) -> None:  # type: ignore[no-untyped-def]
    """Copy one member under ``root`` with its modification time (ingest takes the year of stamps that
    lack one from it)."""
    dest = _member_path(root, name)
    if dest is None:
        budget.warnings.append(
            f"{budget.name}!/{name}: skipped, the name leaves the archive (absolute or ..)"
        )
        return
    if len(dest.relative_to(root).parts) > MAX_DEPTH + 1:
        budget.too_deep += 1
        budget.first_deep = budget.first_deep or name
        return
    try:
        if not budget.make_parents(root, dest):
            return
        src = open_member()
        if src is None:
            return
        with src:
            budget.copy(src, dest, name)
        if mtime is not None:
            with contextlib.suppress(OverflowError, ValueError, OSError):  # a stamp no clock holds: keep now
                os.utime(dest, (mtime, mtime))
    except (OSError, RuntimeError, zipfile.BadZipFile, zlib.error, EOFError) as e:
        budget.warnings.append(f"{budget.name}!/{name}: skipped ({type(e).__name__}: {e})")


def _unpack_zip(archive: Path, root: Path, budget: _Budget) -> None:
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise InputError(f"{archive}: not a readable zip archive ({e})") from None
    with zf:
        for info in zf.infolist():
            if not budget.entry():
                break
            if info.is_dir():
                continue
            mode = info.external_attr >> 16
            if stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # a link or device (zips made on Unix say)
                budget.warnings.append(f"{archive.name}!/{info.filename}: skipped, a link or special file")
                continue
            if info.flag_bits & 0x1:
                budget.warnings.append(f"{archive.name}!/{info.filename}: skipped, encrypted")
                continue
            try:
                mtime: float | None = datetime.datetime(*info.date_time).timestamp()
            except (ValueError, OverflowError):
                mtime = None
            _write_member(root, info.filename, budget, lambda info=info: zf.open(info), mtime)  # type: ignore[misc]


def _stdin_to(dest: Path, warnings: list[str]) -> None:
    """Copy standard input to ``dest``; past ``max_file_bytes``, its head and tail (:func:`_copy_capped`), so
    that the failure a stream ends in is read. The stream is read to its end."""
    stream = sys.stdin.buffer if sys.stdin is not None else None
    if stream is None or (hasattr(stream, "isatty") and stream.isatty()):
        raise InputError(
            "-: reads the log from standard input; pipe or redirect one into it (… | rankscope …)"
        )
    cap = limits.current().max_file_bytes
    total, ends, pad = _copy_capped(stream.read, dest, cap)
    if ends is not None:
        warnings.append(_cut_note("stdin", total, ends, pad, cap))


@contextlib.contextmanager
def opened(path: str | os.PathLike[str], warnings: list[str] | None = None) -> Iterator[Path]:
    """``path`` as something discovery reads: itself for a folder or a plain file; a temporary folder
    holding an archive's members; a temporary file holding standard input for ``-``. The temporary copy
    is removed on exit. Notes on what was not unpacked are appended to ``warnings``.

    Raises :class:`~correlator.errors.InputError` for ``-`` on a terminal and for a zip that cannot be
    opened at all (a damaged tar keeps the members before the damage, with a warning).
    """
    notes = warnings if warnings is not None else []
    p = Path(path)
    if str(path) != "-" and archive_kind(p) is None:
        yield p
        return
    tmp = Path(tempfile.mkdtemp(prefix="rankscope-input-"))
    try:
        if str(path) == "-":
            src = tmp / "stdin"
            _stdin_to(src, notes)
            kind = archive_kind(src)
            name = "stdin"
        else:
            src, kind, name = p, archive_kind(p), p.name
        if kind is None:
            given = src
        else:
            given = tmp
            root = tmp / f"{name}!"
            root.mkdir()
            budget = _Budget(src, notes)
            if kind == "zip":
                _unpack_zip(src, root, budget)
            else:
                _unpack_tar(src, root, budget)
            budget.finish()
            if src.parent == tmp:
                src.unlink()  # stdin's copy: the members are out, the stream itself is not a log
        try:
            with copied_from(given, Path(str(path))):  # `-o` is checked against the archive as named
                yield given
        except (InputError, DiscoveryError) as e:  # name the input as the user gave it, not the copy
            text = str(e).replace(str(tmp / "stdin"), "-").replace(str(tmp), str(path))
            raise type(e)(text) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
