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
- anything else (launcher output, combined streams, SLURM output): ``layout="stream"``; its lines are
  demultiplexed by their prefixes later.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from parsers import flight_recorder

_ATTEMPT_RE = re.compile(r"^attempt_(\d+)$")
_RANK_NAME_RE = re.compile(r"(?:^|[^a-z])(?:rank|worker|proc)[-_]?(\d+)(?=$|[^0-9])", re.IGNORECASE)
_NCCL_FILE_RE = re.compile(r"(?:^|\.)(?P<host>[A-Za-z][\w-]*)\.(?P<pid>\d{3,})(?:\.(?:log|txt|out))?$")
_HOST_TOKEN_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*[0-9-][A-Za-z0-9-]*$")
_GENERIC_WORDS = {
    "combined", "launcher", "stdout", "stderr", "log", "logs", "output", "out", "err", "torchrun",
    "train", "training", "nccl", "job", "slurm", "agent", "syslog", "kern", "dmesg", "error",
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
    if ("." in stem and first.lower() not in _GENERIC_WORDS and _HOST_TOKEN_RE.match(first)
            and not _RANK_NAME_RE.search(first)):
        return first
    return None


def classify(path: Path, root: Path) -> Source:
    """Classify one file by its path (no content is read here, except the first 4 KiB of a file named
    ``<prefix><rank>``: is it a Flight Recorder dump?)."""
    rel = path.relative_to(root).as_posix() if path != root else path.name
    parts = Path(rel).parts
    name = path.name
    base = name.removesuffix(".gz")
    stem = base.rsplit(".", 1)[0] if "." in base else base
    try:
        size = path.stat().st_size
    except OSError:
        size = 0

    fr = flight_recorder.detect(path)  # a Flight Recorder dump (name <prefix><rank> and FR content)
    if fr is not None:
        return Source(path, rel, "fr_dump", "fr_dump", rank=fr[1], size=size, node_key=rel)

    attempt_idx = next((i for i, p in enumerate(parts) if _ATTEMPT_RE.match(p)), None)
    if attempt_idx is not None and attempt_idx + 1 < len(parts) - 1 and parts[attempt_idx + 1].isdigit():
        attempt = int(_ATTEMPT_RE.match(parts[attempt_idx]).group(1))  # type: ignore[union-attr]
        local_rank = int(parts[attempt_idx + 1])
        node_key = "/".join(parts[:attempt_idx]) or "."
        if base == "error.json":
            layout, stream = "error_json", "error_json"
        else:
            layout = "torchrun_rank"
            stream = "stderr" if "stderr" in base else "stdout" if "stdout" in base else "unknown"
        return Source(path, rel, layout, stream, local_rank=local_rank, attempt=attempt,
                      node_key=node_key, size=size)

    if base.endswith(".json") and "error" in base:
        return Source(path, rel, "error_json", "error_json", size=size, node_key=str(Path(rel).parent))

    m = _NCCL_FILE_RE.search(base)
    if m and not _RANK_NAME_RE.search(base):
        return Source(path, rel, "nccl_file", "nccl_file", host=m.group("host"), pid=int(m.group("pid")),
                      size=size, node_key=rel)

    lowered = base.lower()
    if any(w in lowered for w in ("syslog", "dmesg", "kern.log", "messages")):
        return Source(path, rel, "syslog", "syslog", host=_host_from_name(stem), size=size, node_key=rel)

    rm = _RANK_NAME_RE.search(stem)
    if rm:
        stream = "stderr" if "err" in lowered else "stdout"
        return Source(path, rel, "rank_file", stream, rank=int(rm.group(1)), host=_host_from_name(stem),
                      size=size, node_key=rel)

    host = _host_from_name(stem)
    if host is None:
        for part in reversed(parts[:-1]):
            if part.lower() not in _GENERIC_WORDS and _HOST_TOKEN_RE.match(part) and not _RANK_NAME_RE.search(part):
                host = part
                break
    stream = "launcher" if any(w in lowered for w in ("launch", "torchrun", "agent")) else "combined"
    return Source(path, rel, "stream", stream, host=host, size=size, node_key=rel)


class DiscoveryError(Exception):
    """The path given cannot be ingested at all (missing, not readable, nothing in it)."""


def discover(root: str | os.PathLike[str]) -> tuple[list[Source], list[str]]:
    """Walk ``root`` (a directory or a single file) and return its sources plus warnings.

    Symlink loops and unreadable directories are reported as warnings, not raised. Raises
    :class:`DiscoveryError` when ``root`` does not exist or holds no file at all.
    """
    rootp = Path(root)
    warnings: list[str] = []
    if not rootp.exists():
        raise DiscoveryError(f"{root}: no such file or directory")
    if rootp.is_file():
        return [classify(rootp, rootp.parent)], warnings
    if not rootp.is_dir():
        raise DiscoveryError(f"{root}: not a regular file or directory (a FIFO, socket or device cannot be read)")
    files: list[Path] = []
    seen_dirs: set[tuple[int, int]] = set()

    def onerror(err: OSError) -> None:
        warnings.append(f"{err.filename}: skipped directory ({err.strerror or err})")

    for dirpath, dirnames, filenames in os.walk(rootp, followlinks=True, onerror=onerror):
        try:
            st = os.stat(dirpath)
            key = (st.st_dev, st.st_ino)
        except OSError as e:
            warnings.append(f"{dirpath}: skipped directory ({e.strerror})")
            dirnames[:] = []
            continue
        if key in seen_dirs:
            warnings.append(f"{dirpath}: skipped (symlink loop or directory already visited)")
            dirnames[:] = []
            continue
        seen_dirs.add(key)
        dirnames.sort()
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            if not p.is_file():
                warnings.append(f"{p}: skipped (not a regular file or a broken link)")
                continue
            files.append(p)
    if not files:
        raise DiscoveryError(f"{root}: no log files found (empty directory)")
    sources = [classify(p, rootp) for p in files]
    warnings.extend(_rank_clashes(sources))
    return sources, warnings


def _rank_clashes(sources: list[Source]) -> list[str]:
    """One warning per rank that several files claim by name (same rank, stream and attempt): the
    lines of all of them are kept, but their order across files is a guess."""
    claims: dict[tuple[int, str, int | None, str | None], list[str]] = {}
    for s in sources:
        if s.layout == "rank_file" and s.rank is not None:
            claims.setdefault((s.rank, s.stream, s.attempt, s.host), []).append(s.rel)
    return [f"{', '.join(rels)}: {len(rels)} files claim rank {rank} ({stream}); all are read, lines of that rank "
            f"may interleave" for (rank, stream, _a, _h), rels in claims.items() if len(rels) > 1]
