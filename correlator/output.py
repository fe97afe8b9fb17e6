"""Every file a command writes goes through :func:`atomic_write`: checked, complete, or not there at all.

A full disk, a read-only folder or an output that is a device must never end in exit status 0 (a script
would believe the table was written), and an interrupted run must never leave half a file under the real
name. Standard output is checked by :func:`correlator.cli.app.main`, which flushes it before it exits.
:func:`check_output` refuses an output that would land inside the input.

This module sits below :mod:`correlator.cli` and never imports it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from correlator.errors import InputError

__all__ = ["atomic_write", "check_output", "copied_from", "given_input"]

#: Temporary copies of an input (an archive unpacked, standard input saved) and what the user named:
#: :func:`check_output` checks ``-o`` against the name given, not only against the copy.
_COPIES: dict[Path, Path] = {}


@contextlib.contextmanager
def copied_from(copy: Path, given: Path) -> Iterator[None]:
    """While this block runs, ``copy`` (a temporary folder or file) stands for the input ``given`` (the
    archive the user named; ``-`` for standard input): an output equal to, inside or holding ``given`` is
    refused as it is for ``given`` itself (:func:`check_output`)."""
    key = copy.resolve()
    _COPIES[key] = given
    try:
        yield
    finally:
        _COPIES.pop(key, None)


def _write_error(output: Path, e: BaseException) -> InputError:
    """One line for a failed write: the OS reason where there is one (polars wraps it in its own error)."""
    text = str(e).strip()
    why = getattr(e, "strerror", None) or (text.splitlines()[-1] if text else type(e).__name__)
    return InputError(f"{output}: cannot write ({why})")


def _in_place(output: Path, target: str, write: Callable[[str], object]) -> None:
    try:
        write(target)
    except OSError as e:
        raise _write_error(output, e) from None
    except Exception as e:  # polars' ComputeError and kin carry the OS error in their text
        if type(e).__module__.split(".")[0] != "polars":
            raise
        raise _write_error(output, e) from None


def atomic_write(output: Path, write: Callable[[str], object]) -> None:
    """Write ``output`` through ``write(path)``.

    A regular file (or a new name) is written to a temporary name in the same folder, then renamed over
    ``output``: a full disk or an interrupted run never leaves a partial file under the real name, and the
    new file gets the usual mode (``0666`` less the umask). ``-`` is standard output. Anything else that exists under that name — a
    character device such as ``/dev/stdout`` or ``/dev/full``, a FIFO — is written in place: it is never
    replaced by a regular file.

    Raises :class:`~correlator.errors.InputError` (``"<output>: cannot write (<reason>)"``; the CLI exits
    2) when ``output`` is a folder or when the write fails in any way, including polars' own errors that
    wrap an OS error (``ComputeError: … No space left on device``).
    """
    if str(output) == "-":  # `-o -`: standard output, written in place like any device
        sys.stdout.flush()
        _in_place(output, "/dev/stdout", write)
        return
    try:
        st = os.stat(output)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _write_error(output, e) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(f"{output}: is a directory; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):  # a device or a FIFO: write in place
        _in_place(output, str(output), write)
        return
    parent = output.parent if str(output.parent) else Path(".")
    # The temporary name keeps the extension: writers that pick the format from it still do.
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.tmp-", suffix=output.suffix, dir=parent)
    except OSError as e:
        raise _write_error(output, e) from None
    os.close(fd)
    try:
        try:
            write(tmp)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes 0600; the output gets the usual mode
            os.replace(tmp, output)
        except OSError as e:
            raise _write_error(output, e) from None
        except Exception as e:
            if type(e).__module__.split(".")[0] != "polars":
                raise
            raise _write_error(output, e) from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def given_input(directory: Path) -> Path | None:
    """The archive the user named when ``directory`` is its temporary copy (:func:`copied_from`), else None
    (also for standard input, which no output can overwrite)."""
    try:
        given = _COPIES.get(directory.resolve())
    except (OSError, RuntimeError):
        return None
    return None if given is None or str(given) == "-" else given


def check_output(directory: Path, output: Path | None) -> None:
    """Refuse an output path inside the input (it would be read back as logs next time), equal to it,
    or a folder that holds the input. For a temporary copy of the input (an archive unpacked, see
    :func:`copied_from`) the input is also the archive as the user named it: ``-o job.zip`` over
    ``job.zip`` is refused, never written over the logs."""
    if output is None:
        return
    given = given_input(directory)
    if given is not None:
        _check_one(given, output)
    _check_one(directory, output)


def _resolved(path: Path, output: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError) as e:
        raise InputError(f"{output}: cannot resolve the output path ({e})") from None


def _check_one(directory: Path, output: Path) -> None:
    src, dst = _resolved(directory, output), _resolved(output, output)
    if dst == src:
        raise InputError(f"{output}: the output is the input itself; choose a path outside {directory}")
    if src.is_dir() and dst.is_relative_to(src):
        raise InputError(
            f"{output}: inside the input folder {directory}; it would be read as a log next time "
            "(write it elsewhere)"
        )
    if src.is_relative_to(dst) and dst.is_dir():
        raise InputError(f"{output}: a folder that holds the input {directory}; choose another output path")
