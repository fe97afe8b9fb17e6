"""Resource limits on input: part of the contract, each with an environment variable to raise it.

A log folder can hold anything (a gzip bomb, one file of terabytes, a line of gigabytes, a rank number
past any real world size); these bounds keep memory and time finite and are always reported when hit
(a warning naming the file and a ``skipped`` entry), never silent.

=============================  ==========================  ==========================================
limit                          environment variable        default
=============================  ==========================  ==========================================
bytes kept per file            ``RANKSCOPE_MAX_FILE_MB``   1024 MiB (after decompression)
compression ratio              ``RANKSCOPE_MAX_RATIO``     500 : 1  (checked past 256 KiB of output)
line length                    ``RANKSCOPE_MAX_LINE_KB``   1024 KiB (longer lines kept truncated)
lines per file                 ``RANKSCOPE_MAX_LINES``     5,000,000
rank / world size              ``RANKSCOPE_MAX_WORLD``     262,144 (2^18; larger values become null)
follow symlinks out of DIR     ``RANKSCOPE_FOLLOW_SYMLINKS`` off (``--follow-symlinks`` sets it)
bytes of a small file          ``RANKSCOPE_MAX_SMALL_KB``  4096 KiB (``error.json``, ``--signatures``
                                                           files, ``expected.json``)
=============================  ==========================  ==========================================

A file past the size cap (plain or decompressed) or the line cap keeps its first quarter and its last three
quarters of the cap (the failure a log ends in, and the init lines it starts with), the lines between counted
and left out, each line kept with its own line number.

Small files are read by one reader, :func:`correlator.smallfile.read_small`: a larger ``error.json`` keeps the
head of its message (with a warning), a larger signature file or ``expected.json`` is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


def env_int(name: str, default: int) -> int:
    """The whole number the environment variable ``name`` holds (``_`` between digits allowed: ``5_000_000``),
    or ``default`` where it is unset, empty, not a whole number, 0 or below. The one reader of the project's
    numeric settings: these limits, and the worker counts and memory budget of :mod:`correlator.batch` and
    :mod:`correlator.evaluate`."""
    v = os.environ.get(name, "").strip().replace("_", "")
    if not v:
        return default
    try:
        n = int(v)
    except ValueError:
        return default
    return n if n > 0 else default


@dataclass(frozen=True)
class Limits:
    """The limits in force (bytes, lines, ratio, ranks)."""

    max_file_bytes: int
    max_ratio: int
    ratio_floor_bytes: int
    max_line_bytes: int
    max_lines: int
    max_world: int
    follow_symlinks: bool
    max_small_bytes: int = 4 << 20

    @classmethod
    def from_env(cls) -> Limits:
        """The defaults, each raised (or lowered) by its environment variable."""
        return cls(
            max_file_bytes=env_int("RANKSCOPE_MAX_FILE_MB", 1024) * 1024 * 1024,
            max_ratio=env_int("RANKSCOPE_MAX_RATIO", 500),
            ratio_floor_bytes=env_int("RANKSCOPE_RATIO_FLOOR_KB", 256) * 1024,
            max_line_bytes=env_int("RANKSCOPE_MAX_LINE_KB", 1024) * 1024,
            max_lines=env_int("RANKSCOPE_MAX_LINES", 5_000_000),
            max_world=env_int("RANKSCOPE_MAX_WORLD", 1 << 18),
            follow_symlinks=os.environ.get("RANKSCOPE_FOLLOW_SYMLINKS", "").strip().lower()
            in ("1", "true", "yes", "on"),
            max_small_bytes=env_int("RANKSCOPE_MAX_SMALL_KB", 4096) * 1024,
        )


def current() -> Limits:
    """The limits for this call (read from the environment each time, so tests and the CLI can set them)."""
    return Limits.from_env()


__all__ = ["Limits", "cap_values", "current", "env_int"]


_RANK_COLS = ("rank", "local_rank", "rank_stated", "peer_rank", "src_rank", "tee_local_rank")


def cap_values(df, warnings: list[str]):  # type: ignore[no-untyped-def]
    """Null ranks and world sizes no real job has, with one warning per column (``df`` a polars frame with
    the event-table columns; returned with the same columns).

    - a world size of 0, negative, or above ``RANKSCOPE_MAX_WORLD``;
    - a rank that is negative, above ``RANKSCOPE_MAX_WORLD``, or more than 4x the largest stated world
      size (a stray ``[rank99999]:`` in a 16-rank job): diagnosis sizes its work by the world size.
    """
    import polars as pl

    lim = current()
    fixes = []
    if "world_size" in df.columns:
        bad = (pl.col("world_size") <= 0) | (pl.col("world_size") > lim.max_world)
        n = df.select(bad.sum()).item() or 0
        if n:
            warnings.append(
                f"{n} line(s) state a world size of 0 or above {lim.max_world}; ignored as implausible "
                "(raise RANKSCOPE_MAX_WORLD)"
            )
            fixes.append(pl.when(bad).then(None).otherwise(pl.col("world_size")).alias("world_size"))
            df = df.with_columns(fixes.pop())
        stated = df["world_size"].drop_nulls()
        top = int(stated.max()) if stated.len() else None  # type: ignore[arg-type]
    else:
        top = None
    limit = lim.max_world if top is None else min(lim.max_world, 4 * top)
    for c in _RANK_COLS:
        if c not in df.columns or not df.schema[c].is_integer():
            continue
        bad = (pl.col(c) < 0) | (pl.col(c) >= limit)
        n = df.select(bad.sum()).item() or 0
        if n:
            example = df.filter(bad)[c].head(1).item()
            why = (
                f"past 4x the stated world size {top}"
                if top is not None and limit < lim.max_world
                else f"above {lim.max_world}"
            )
            warnings.append(
                f"{n} line(s) name {c.replace('_', ' ')} {example} ({why}); taken as unknown "
                "(raise RANKSCOPE_MAX_WORLD)"
            )
            df = df.with_columns(pl.when(bad).then(None).otherwise(pl.col(c)).alias(c))
    return df
