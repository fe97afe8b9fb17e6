"""Find every log source under a directory and read what its path says.

Step 1 of ingest. A *source* is one file; its path can tell the rank, local rank, host, attempt and
stream. Nothing is skipped silently: a file no rule recognizes is still a source (``layout="unknown"``)
and is ingested line by line with rank unknown.

Path layouts recognized:
- torchrun ``--log-dir`` (torch 1.9 – 2.13): ``<run_id>_<rand>/attempt_<N>/<local_rank>/{stdout,stderr}.log``
  and ``error.json``; the folder number is the LOCAL rank. Layouts without the run-id folder too.
- per-rank files named by rank: ``rank3.log``, ``rank_3.txt``, ``log_rank-3.out``, ``worker-3.log``,
  ``node-a.rank3.err`` (host ``node-a``).
- ``NCCL_DEBUG_FILE`` outputs ``<prefix>.<host>.<pid>[.log]`` (NCCL's ``%h.%p`` expansion).
- PyTorch Flight Recorder dumps ``<prefix><rank>[.json]`` whose first bytes are an FR pickle or JSON
  (``layout="fr_dump"``): read by :mod:`correlator.fr`, never as lines.
- per-task files named by a task id (``layout="task_file"``): the one numeric field that varies as 0..N-1 across
  sibling files of one name pattern (``srun --output=%x-%j-%t.out``, ``%N-%t``, ``%n-%t``, ``%A_%a-%t``; see
  :func:`learn_name_field`), and Open MPI's ``--output-filename`` folders ``<dir>/<job>/rank.<N>/stdout``. The rank
  is a candidate that :mod:`correlator.identity` keeps only where the lines state no other rank.
- anything else (launcher output, combined streams, SLURM output): ``layout="stream"``; its lines are
  demultiplexed by their prefixes later.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from correlator import limits
from correlator.errors import DiscoveryError
from correlator.read import file_kind
from parsers import flight_recorder

_ATTEMPT_RE = re.compile(r"^attempt_(\d+)$")
_RANK_NAME_RE = re.compile(r"(?:^|[^a-z])(?:rank|worker|proc)[-_]?(\d+)(?=$|[^0-9])", re.IGNORECASE)
_NCCL_FILE_RE = re.compile(r"(?:^|\.)(?P<host>[A-Za-z][\w-]*)\.(?P<pid>\d{3,})(?:\.(?:log|txt|out))?$")
_HOST_TOKEN_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*[0-9-][A-Za-z0-9-]*$")
#: A folder names a host only when it reads as one: ``node-3``, ``host-x``, ``worker-1``, a Slurm nodename
#: (``nid001234``, ``gpu-st-p4d-24xlarge-1``, ``cn042``), an EC2 ``ip-10-0-0-1``. An arbitrary folder
#: (``exp/llama-7b-sft/``, ``runs/2024-05-01/``) says nothing about the host.
_NODE_DIR_RE = re.compile(r"^(?:node|host|worker|nid|compute|gpu|cn|ip)[\w-]*$", re.IGNORECASE)
_GENERIC_WORDS = {
    "combined",
    "launcher",
    "stdout",
    "stderr",
    "log",
    "logs",
    "output",
    "out",
    "err",
    "torchrun",
    "train",
    "training",
    "nccl",
    "job",
    "slurm",
    "agent",
    "syslog",
    "kern",
    "dmesg",
    "error",
}


@dataclass(frozen=True)
class Source:
    """One input file and what its path tells.

    ``rel`` is the path relative to the root given to :func:`discover`; ``node_key`` groups the files of
    one torchrun agent (its run directory), so local ranks of different nodes are never confused.
    """

    path: Path
    rel: str
    layout: str  # torchrun_rank | rank_file | nccl_file | error_json | stream | syslog | fr_dump
    stream: str  # stdout | stderr | launcher | combined | nccl_file | error_json | syslog | fr_dump | unknown
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    attempt: int | None = None
    node_key: str | None = None
    size: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def _host_from_name(stem: str) -> str | None:
    """``node-a.rank3`` -> ``node-a``; ``node-b.combined`` -> ``node-b``; generic words give None."""
    first = stem.split(".")[0]
    if (
        "." in stem
        and first.lower() not in _GENERIC_WORDS
        and _HOST_TOKEN_RE.match(first)
        and not _RANK_NAME_RE.search(first)
    ):
        return first
    return None


def _num(text: str, cap: int) -> int | None:
    """A number from a path, or None past ``cap`` (a rank past any real world size, a pid past pid_max)."""
    if len(text) > 12:
        return None
    n = int(text)
    return n if n <= cap else None


def classify(
    path: Path, root: Path, size: int | None = None, *, rel: str | None = None, wcap: int | None = None
) -> Source:
    """Classify one file by its path (no content is read here, except the first 4 KiB of a file named
    ``<prefix><rank>``: is it a Flight Recorder dump?). Numbers past the limits (rank > the world-size cap,
    pid > 2^31) are not taken from the name; ``rel`` is :func:`printable`. ``rel`` (the path relative to
    ``root``, ``/``-separated) and ``wcap`` (the world-size cap) may be given by a caller that classifies
    many files (:func:`discover`: no path arithmetic nor environment read per file)."""
    if rel is None:
        rel = path.relative_to(root).as_posix() if path != root else path.name
    rel = printable(rel)
    parts = tuple(p for p in rel.split("/") if p and p != ".")  # as Path(rel).parts
    name = printable(path.name)
    base = name.removesuffix(".gz")
    stem = base.rsplit(".", 1)[0] if "." in base else base
    if size is None:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
    if wcap is None:
        wcap = limits.current().max_world

    fr = flight_recorder.detect(path)  # a Flight Recorder dump (name <prefix><rank> and FR content)
    if fr is not None:
        return Source(path, rel, "fr_dump", "fr_dump", rank=fr[1], size=size, node_key=rel)

    attempt_idx = (
        next((i for i, p in enumerate(parts) if _ATTEMPT_RE.match(p)), None) if "attempt_" in rel else None
    )
    if (
        attempt_idx is not None
        and attempt_idx + 1 < len(parts) - 1
        and parts[attempt_idx + 1].isascii()
        and parts[attempt_idx + 1].isdigit()
    ):
        attempt = _num(_ATTEMPT_RE.match(parts[attempt_idx]).group(1), 1 << 20)  # type: ignore[union-attr]
        local_rank = _num(parts[attempt_idx + 1], wcap)
        node_key = "/".join(parts[:attempt_idx]) or "."
        if base == "error.json":
            layout, stream = "error_json", "error_json"
        else:
            layout = "torchrun_rank"
            stream = "stderr" if "stderr" in base else "stdout" if "stdout" in base else "unknown"
        return Source(
            path, rel, layout, stream, local_rank=local_rank, attempt=attempt, node_key=node_key, size=size
        )

    if base.endswith(".json") and "error" in base:
        return Source(path, rel, "error_json", "error_json", size=size, node_key=str(Path(rel).parent))

    m = _NCCL_FILE_RE.search(base)
    if m and not _RANK_NAME_RE.search(base):
        return Source(
            path,
            rel,
            "nccl_file",
            "nccl_file",
            host=m.group("host"),
            pid=_num(m.group("pid"), (1 << 31) - 1),
            size=size,
            node_key=rel,
        )

    lowered = base.lower()
    if any(w in lowered for w in ("syslog", "dmesg", "kern.log", "messages")):
        return Source(path, rel, "syslog", "syslog", host=_host_from_name(stem), size=size, node_key=rel)

    rm = _RANK_NAME_RE.search(stem)
    if rm:
        stream = "stderr" if "err" in lowered else "stdout"
        return Source(
            path,
            rel,
            "rank_file",
            stream,
            rank=_num(rm.group(1), wcap),
            host=_host_from_name(stem),
            size=size,
            node_key=rel,
        )

    host = _host_from_name(stem)
    if host is None:
        for part in reversed(parts[:-1]):
            if (
                part.lower() not in _GENERIC_WORDS
                and _HOST_TOKEN_RE.match(part)
                and _NODE_DIR_RE.match(part)
                and not _RANK_NAME_RE.search(part)
            ):
                host = part
                break
    stream = "launcher" if any(w in lowered for w in ("launch", "torchrun", "agent")) else "combined"
    return Source(path, rel, "stream", stream, host=host, size=size, node_key=rel)


class SkipNote(str):
    """A discovery warning about a path that is not read (a symlink out of DIR, a FIFO, a second link to
    a file already read); ``entry`` is its ``skipped`` record ``{"path", "bytes", "lines", "reason"}``."""

    entry: dict[str, object]


def _note(text: str, rel: str, nbytes: int | None, reason: str) -> SkipNote:
    n = SkipNote(text)
    n.entry = {"path": rel, "bytes": nbytes, "lines": 0, "reason": reason}
    return n


def skipped_entries(warnings: list[str]) -> list[dict[str, object]]:
    """The ``skipped`` records among ``discover``'s warnings."""
    return [dict(w.entry) for w in warnings if isinstance(w, SkipNote)]


_CTRL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(name: str) -> str:
    """A path as text that is safe to print and to store: bytes that are not UTF-8 (``surrogateescape``)
    become ``\\xNN``, and so do control characters (newlines, terminal escapes) in the name."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        name = os.fsencode(name).decode("utf-8", errors="backslashreplace")
    if _CTRL_RE.search(name):
        name = _CTRL_RE.sub(lambda m: f"\\x{ord(m.group(0)):02x}", name)
    return name


def _is_link(e: os.DirEntry[str]) -> bool:
    try:
        return e.is_symlink()
    except OSError:
        return False


def _inside(path: str, root_real: str) -> bool:
    return path == root_real or path.startswith(root_real.rstrip(os.sep) + os.sep)


def _walk(rootp: Path, follow: bool) -> tuple[list[tuple[Path, int]], list[str]]:
    """Regular files under ``rootp`` (path, size), each real file once, plus warnings. Symlinks are
    followed at most once per real path, and never out of ``rootp`` unless ``follow``."""
    files, warnings = _walk_rel(rootp, follow)
    return [(Path(p), size) for p, size, _rel in files], warnings


def _link_stat(
    path: str, rel: str, follow: bool, root_real: str, warnings: list[str]
) -> os.stat_result | None:
    """The stat of what the symlink ``path`` points at; None (with a warning) for a broken link, or a link
    out of the input folder when links are not followed."""
    target = os.path.realpath(path)
    try:
        st = os.stat(path)
    except OSError:
        warnings.append(f"{rel}: skipped (not a regular file or a broken link)")
        return None
    if not follow and not _inside(target, root_real):
        warnings.append(
            _note(
                f"{rel}: skipped, symlink pointing outside the input folder (not followed; "
                "use --follow-symlinks or RANKSCOPE_FOLLOW_SYMLINKS=1)",
                rel,
                None,
                "symlink outside the input",
            )
        )
        return None
    return st


def _walk_rel(rootp: Path, follow: bool) -> tuple[list[tuple[str, int, str]], list[str]]:
    """As :func:`_walk`, each file as ``(path, size, path relative to rootp with / separators)``, in
    path-component order. The per-file work is one ``stat`` and string slicing (no ``Path`` nor
    ``relpath`` per entry: 200,000 files are walked in seconds)."""
    warnings: list[str] = []
    root_real = os.path.realpath(rootp)
    files: list[tuple[str, int, str]] = []
    seen_dirs: set[tuple[int, int]] = set()
    # real file -> the path it is read at (the first seen, or a later link whose name gives a rank) and its index
    seen_files: dict[tuple[int, int], tuple[str, int]] = {}
    root_s = str(rootp)
    prefix = root_s if root_s.endswith(os.sep) else root_s + os.sep

    def rel_of(p: str) -> str:
        try:
            r = os.path.relpath(p, rootp)
        except ValueError:
            r = p
        return printable(r.replace(os.sep, "/"))

    try:
        st = os.stat(rootp)
        seen_dirs.add((st.st_dev, st.st_ino))
    except OSError as err:
        raise DiscoveryError(f"{printable(str(rootp))}: cannot read ({err.strerror or err})") from None
    stack = [str(rootp)]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: (_is_link(e), e.name))  # a file before a link to it
        except OSError as err:
            warnings.append(
                _note(
                    f"{rel_of(d)}: skipped directory ({err.strerror or err})",
                    rel_of(d),
                    None,
                    "unreadable directory",
                )
            )
            continue
        subdirs: list[str] = []
        for e in entries:
            path = e.path
            try:
                link = e.is_symlink()
            except OSError:
                link = False
            if link:
                lst = _link_stat(path, rel_of(path), follow, root_real, warnings)
                if lst is None:
                    continue
                st = lst
            else:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError as err:
                    rel = rel_of(path)
                    warnings.append(
                        _note(f"{rel}: skipped ({err.strerror or err})", rel, None, "cannot read")
                    )
                    continue
            key = (st.st_dev, st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                if key in seen_dirs:
                    warnings.append(f"{rel_of(path)}: skipped (symlink loop or directory already visited)")
                    continue
                seen_dirs.add(key)
                subdirs.append(path)
            elif stat.S_ISREG(st.st_mode):
                r = path[len(prefix) :] if path.startswith(prefix) else rel_of(path)
                entry = (path, st.st_size, r if os.sep == "/" else r.replace(os.sep, "/"))
                if key in seen_files:
                    first, at = seen_files[key]
                    if _names_rank(path) and not _names_rank(first):
                        # the link whose name gives a rank is read (``all.log`` and ``rank3.log``: rank 3's)
                        files[at] = entry
                        seen_files[key] = (path, at)
                        path, first = first, path
                    rel = rel_of(path)
                    warnings.append(
                        _note(
                            f"{rel}: skipped, same file as {rel_of(first)} (a second link; read once)",
                            rel,
                            st.st_size,
                            "second link to a file",
                        )
                    )
                    continue
                seen_files[key] = (path, len(files))
                files.append(entry)
            else:
                rel = rel_of(path)
                warnings.append(
                    _note(
                        f"{rel}: skipped, not a regular file ({file_kind(st.st_mode)})",
                        rel,
                        None,
                        "not a regular file",
                    )
                )
        stack.extend(reversed(subdirs))
    files.sort(key=lambda f: f[2].split("/"))  # the order of Path.parts (the root is common to all)
    return files, warnings


_WALKS: contextvars.ContextVar[
    dict[tuple[str, bool], tuple[list[tuple[str, int, str]], list[str]]] | None
] = contextvars.ContextVar("rankscope_shared_walks", default=None)


@contextlib.contextmanager
def sharing_walks() -> Iterator[None]:
    """Within this block, a folder is walked once: :func:`input_size` (the streaming decision) and
    :func:`discover` of the same folder share one walk (200,000 files: ~20 s a walk on 2 busy cores). For
    one command, whose input does not change while it starts; nested blocks share the outer one's walks."""
    token = _WALKS.set({}) if _WALKS.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _WALKS.reset(token)


def _walk_shared(rootp: Path, follow: bool) -> tuple[list[tuple[str, int, str]], list[str]]:
    """:func:`_walk_rel`, once per folder within :func:`sharing_walks` (the warnings list is a copy)."""
    cache = _WALKS.get()
    if cache is None:
        return _walk_rel(rootp, follow)
    key = (os.path.abspath(rootp), follow)
    if key not in cache:
        cache[key] = _walk_rel(rootp, follow)
    files, warnings = cache[key]
    return files, list(warnings)


_FOLLOW: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "rankscope_follow_symlinks", default=None
)


@contextlib.contextmanager
def following_symlinks() -> Iterator[None]:
    """Within this block, discovery follows symlinks out of the root (for a tree of links that the caller
    built to files it already discovered, e.g. the streaming batches)."""
    token = _FOLLOW.set(True)
    try:
        yield
    finally:
        _FOLLOW.reset(token)


def _follow_default() -> bool:
    v = _FOLLOW.get()
    return limits.current().follow_symlinks if v is None else v


def input_size(root: str | os.PathLike[str], follow_symlinks: bool | None = None) -> int:
    """Total bytes of the files :func:`discover` would read under ``root`` (each real file once)."""
    p = Path(root)
    try:
        if not p.is_dir():
            return p.stat().st_size if p.is_file() else 0
        follow = _follow_default() if follow_symlinks is None else follow_symlinks
        return sum(size for _, size, _rel in _walk_shared(p, follow)[0])
    except (OSError, DiscoveryError):
        return 0


def _names_rank(path: str) -> bool:
    """Whether the file name of ``path`` gives a rank (``rank3.log``, ``worker-3.log``: :data:`_RANK_NAME_RE`)."""
    return _RANK_NAME_RE.search(os.path.basename(path)) is not None


def discover(
    root: str | os.PathLike[str], follow_symlinks: bool | None = None
) -> tuple[list[Source], list[str]]:
    """Walk ``root`` (a directory or a single file) and return its sources plus warnings.

    Symlink loops, links out of ``root`` (followed only with ``follow_symlinks``, default from
    ``RANKSCOPE_FOLLOW_SYMLINKS``), second links to one file, FIFOs/devices and unreadable directories are
    warnings (:class:`SkipNote` for those that hold data: see :func:`skipped_entries`), not raised. Raises
    :class:`DiscoveryError` when ``root`` does not exist or holds no file at all.
    """
    rootp = Path(root)
    if not rootp.exists():
        raise DiscoveryError(f"{printable(str(root))}: no such file or directory")
    if rootp.is_file():
        return [classify(rootp, rootp.parent)], []
    if not rootp.is_dir():
        raise DiscoveryError(
            f"{printable(str(root))}: not a regular file or directory (a FIFO, socket or device cannot be read)"
        )
    follow = _follow_default() if follow_symlinks is None else follow_symlinks
    files, warnings = _walk_shared(rootp, follow)
    if not files:
        raise DiscoveryError(
            f"{printable(str(root))}: no log files found (empty directory)"
            + (f"; {warnings[0]}" if warnings else "")
        )
    wcap = limits.current().max_world
    sources = [classify(Path(p), rootp, size, rel=rel, wcap=wcap) for p, size, rel in files]
    sources, learned = ranks_from_siblings(sources)
    warnings.extend(learned)
    warnings.extend(_rank_clashes(sources))
    return sources, warnings


def _rank_clashes(sources: list[Source]) -> list[str]:
    """One warning per rank that several files claim by name (same rank, stream and attempt): the
    lines of all of them are kept, but their order across files is a guess."""
    claims: dict[tuple[int, str, int | None, str | None], list[str]] = {}
    for s in sources:
        if s.layout in ("rank_file", "task_file") and s.rank is not None:
            claims.setdefault((s.rank, s.stream, s.attempt, s.host), []).append(s.rel)
    return [
        f"{', '.join(rels)}: {len(rels)} files claim rank {rank} ({stream}); all are read, lines of that rank "
        f"may interleave"
        for (rank, stream, _a, _h), rels in claims.items()
        if len(rels) > 1
    ]


# --- Rank from a field of sibling file names (Slurm ``srun --output=%x-%j-%t.out`` and its kin) -----------------

_FIELD_RE = re.compile(r"[0-9]+")
#: Slurm's default output names, ``slurm-%j.out`` and, for an array task, ``slurm-%A_%a.out`` (sbatch(1)): one
#: file per job, whose array index is no rank (``tests/data/slurm_task_files/sbatch-array-default``).
_SLURM_JOB_OUTPUT_RE = re.compile(r"^slurm-[0-9]+(?:_[0-9]+)?\.out$")
#: Text before a number that makes it a node's number (the host words of :data:`_NODE_DIR_RE`).
_HOST_WORD_RE = re.compile(r"(?:^|[^a-z])(?:node|host|nid|compute|cn|ip)[-_.]?$", re.IGNORECASE)
#: The widest number taken as a task id (a job id, a date, a pid is longer; ``--output=%5t`` pads to 5).
_MAX_FIELD_WIDTH = 6


@dataclass(frozen=True)
class NameField:
    """What :func:`learn_name_field` found in a set of sibling names: ``index`` of the numeric field that is the
    task id, the value it takes in each name (``{name: value}``), and ``groups``, the number of separate runs
    (siblings that differ in an outer varying field too, such as a Slurm array index)."""

    index: int
    values: dict[str, int]
    groups: int


def _split_name(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``llama-ft-884213-2.out`` -> (``("llama-ft-", "-", ".out")``, ``("884213", "2")``): the text between
    numbers (the name's pattern) and the numbers."""
    nums = tuple(_FIELD_RE.findall(name))
    return tuple(_FIELD_RE.split(name)), nums


def learn_name_field(names: list[str]) -> NameField | None:
    """The task-id field of a set of sibling file names, or None.

    The names must share one pattern (the same text between their numbers). A numeric field *varies* when two
    names that agree on every other numeric field differ in it (a node index ``%n`` or a node name ``node3``
    that changes together with the task id does not vary on its own). The task id is the last varying field
    (launchers put it innermost: ``%A_%a-%t``, ``%n-%t``, ``%N-%t``); the varying fields before it split the
    names into separate runs (a Slurm array index), and in each run its values must be ``0 .. N-1`` exactly,
    one name each, N >= 2, at most :data:`_MAX_FIELD_WIDTH` digits. So a date (``train-2024-05-01.log`` …: the
    day starts at 1), a job id alone (``run-884213.out``), checkpoint steps (``checkpoint-1000.log``,
    ``checkpoint-2000.log``: not contiguous), a node's number (``node-0.log``, ``node-1.log``) and a single file
    give None.
    """
    if len(names) < 2:
        return None
    split = [_split_name(n) for n in names]
    pattern = split[0][0]
    if not split[0][1] or any(p != pattern for p, _ in split):
        return None
    n_fields = len(split[0][1])
    rows = [tuple(int(x) for x in nums) for _, nums in split]
    if len(set(rows)) != len(rows):
        return None

    def varies(i: int) -> bool:
        seen: dict[tuple[int, ...], int] = {}
        for r in rows:
            key = r[:i] + r[i + 1 :]
            if seen.setdefault(key, r[i]) != r[i]:
                return True
        return False

    varying = [i for i in range(n_fields) if varies(i)]
    if not varying:
        return None
    idx = varying[-1]
    if any(len(nums[idx]) > _MAX_FIELD_WIDTH for _, nums in split):
        return None
    if _HOST_WORD_RE.search(pattern[idx]):  # ``node-0.log``, ``host1.out``: a node's file, not a task's
        return None
    outer = varying[:-1]
    runs: dict[tuple[int, ...], list[int]] = {}
    for r in rows:
        runs.setdefault(tuple(r[i] for i in outer), []).append(r[idx])
    for vals in runs.values():
        if sorted(vals) != list(range(len(vals))) or len(vals) < 2:
            return None
    return NameField(idx, {n: r[idx] for n, r in zip(names, rows, strict=True)}, len(runs))


def _mpirun_rank(src: Source) -> int | None:
    """Open MPI's ``--output-filename DIR`` layout, ``DIR/<job>/rank.<N>/{stdout,stderr,stddiag}``: the folder
    names the rank, zero-padded to the width of the largest (``rank.00`` … ``rank.10``; captured with Open MPI
    4.1.4, ``tests/data/mpirun_output_filename/SOURCE.md``)."""
    parts = Path(src.rel).parts
    if len(parts) < 2 or parts[-1] not in ("stdout", "stderr", "stddiag"):
        return None
    m = re.fullmatch(r"rank\.(\d{1,7})", parts[-2])
    return int(m.group(1)) if m else None


def ranks_from_siblings(sources: list[Source]) -> tuple[list[Source], list[str]]:
    """Give files that no path rule placed (``layout="stream"``, combined) the rank their name's varying field
    states (:func:`learn_name_field` over the files of one folder that share a name pattern), as
    ``layout="task_file"`` with a note; and Open MPI's ``rank.N/stdout`` files their rank. The rank is a candidate:
    :mod:`correlator.identity` confirms it against the ranks the lines state and drops it when they say
    otherwise (``rank_source`` ``file_name``). Returns the sources and one line per set of siblings, for the
    warnings (where discovery says what it read from paths)."""
    out = list(sources)
    lines: list[str] = []
    wcap = limits.current().max_world
    groups: dict[str, list[int]] = {}
    known = _LEARNED.get()
    for k, s in enumerate(sources):
        if known is not None and s.layout == "rank_file":  # a pod's name read as a PyTorchJob's (below)
            was = known.get(s.rel)
            if was is not None and was.rank is not None:
                out[k] = _as_task_file(s, was.rank, was.notes[-1] if was.notes else "rank from the file name")
            continue
        if s.layout != "stream" or s.stream != "combined":
            continue
        if known is not None:  # a batch of a larger discovery: its siblings were learned there
            was = known.get(s.rel)
            if was is not None and was.rank is not None:
                out[k] = _as_task_file(s, was.rank, was.notes[-1] if was.notes else "rank from the file name")
            continue
        if _SLURM_JOB_OUTPUT_RE.match(s.path.name):
            continue
        r = _mpirun_rank(s)
        if r is not None and r <= wcap:
            note = f"rank {r} from the folder name (Open MPI --output-filename rank.N/{Path(s.rel).name})"
            out[k] = _as_task_file(s, r, note)
            continue
        groups.setdefault(str(Path(s.rel).parent), []).append(k)
    for folder, idxs in groups.items():
        by_pattern: dict[tuple[str, ...], list[int]] = {}
        for k in idxs:
            by_pattern.setdefault(_split_name(printable(sources[k].path.name))[0], []).append(k)
        for members in by_pattern.values():
            names = [printable(sources[k].path.name) for k in members]
            found = learn_name_field(names)
            if found is None or max(found.values.values()) > wcap:
                continue
            top = max(found.values.values())
            shape = _shape(names[0], found.index)
            where = "" if folder == "." else f"{folder}/"
            runs = f" in each of {found.groups} runs" if found.groups > 1 else ""
            for k, name in zip(members, names, strict=True):
                v = found.values[name]
                note = (
                    f"rank {v} from the file name: the field that takes 0..{top}{runs} across "
                    f"{len(members)} sibling files {where}{shape}"
                )
                out[k] = _as_task_file(sources[k], v, note)
            lines.append(
                f"{where}{shape}: {len(members)} sibling files; the field {{N}} (0..{top}{runs}) is read as the "
                "rank (rank_source file_name) where their lines state no other rank"
            )
    if known is None:
        out, jobs = _pytorchjob_ranks(out)
        lines += jobs
    return out, lines


#: Kubeflow's PyTorchJob names a replica's pod ``<job>-<master|worker>-<index>`` and, where the job has a Master
#: replica, gives the Master rank 0 and Worker ``i`` rank ``i + 1`` (training-operator
#: ``pkg/controller.v1/pytorch/envvar.go``: ``setPodEnv``, ``genGeneralName``). Logs saved per pod keep its name.
_PYTORCHJOB_RE = re.compile(r"^(?P<job>.+?)-(?P<role>master|worker)-(?P<i>[0-9]+)(?=$|[^0-9])", re.IGNORECASE)


def _pytorchjob_ranks(sources: list[Source]) -> tuple[list[Source], list[str]]:
    """Files of one folder named after the pods of one PyTorchJob with a Master (``<job>-master-0…`` beside
    ``<job>-worker-<i>…``): the Master's rank 0, Worker ``i``'s rank ``i + 1``, as ``task_file`` candidates that
    :mod:`correlator.identity` confirms against the ranks their lines state (``worker-1`` alone reads as rank
    1). Returns the sources and one line per job, for the warnings."""
    jobs: dict[tuple[str, str], list[tuple[int, str, int]]] = {}
    for k, s in enumerate(sources):
        m = _PYTORCHJOB_RE.match(printable(s.path.name)) if s.layout in ("rank_file", "stream") else None
        if m:
            key = (str(Path(s.rel).parent), m["job"].lower())
            jobs.setdefault(key, []).append((k, m["role"].lower(), int(m["i"])))
    out, lines = list(sources), []
    wcap = limits.current().max_world
    for (folder, job), members in jobs.items():
        masters = {i for _, role, i in members if role == "master"}
        if masters != {0} or all(role == "master" for _, role, _ in members):
            continue
        if max(i for _, _, i in members) + 1 > wcap:
            continue
        for k, role, i in members:
            rank = 0 if role == "master" else i + 1
            note = f"rank {rank} from the pod name (Kubeflow PyTorchJob: Master rank 0, Worker i rank i + 1)"
            out[k] = _as_task_file(sources[k], rank, note)
        where = "" if folder == "." else f"{folder}/"
        lines.append(
            f"{where}{job}-master-0, {job}-worker-{{i}}: a Kubeflow PyTorchJob's pods; the Master read as rank 0 "
            "and Worker i as rank i + 1 (rank_source file_name) where their lines state no other rank"
        )
    return out, lines


_LEARNED: contextvars.ContextVar[dict[str, Source] | None] = contextvars.ContextVar(
    "rankscope_learned_task_files", default=None
)


@contextlib.contextmanager
def learned_from(sources: list[Source]) -> Iterator[None]:
    """Within this block, discovery takes the file-name ranks of ``sources`` (a discovery of the whole input)
    instead of learning them from the files it sees: a streaming batch holds only some of the siblings."""
    token = _LEARNED.set({s.rel: s for s in sources if s.layout == "task_file" and s.rank is not None})
    try:
        yield
    finally:
        _LEARNED.reset(token)


def _shape(name: str, index: int) -> str:
    """``llama-ft-884213-2.out`` with field 1 -> ``llama-ft-884213-{N}.out``."""
    texts, nums = _split_name(name)
    parts = [texts[0]]
    for i, (n, t) in enumerate(zip(nums, texts[1:], strict=True)):
        parts.append("{N}" if i == index else n)
        parts.append(t)
    return "".join(parts)


def _as_task_file(s: Source, rank: int, note: str) -> Source:
    lowered = s.path.name.lower()
    stream = "stderr" if "err" in lowered else "stdout"
    return Source(
        s.path,
        s.rel,
        "task_file",
        stream,
        rank=rank,
        host=s.host,
        size=s.size,
        node_key=s.node_key,
        notes=(*s.notes, note),
    )
