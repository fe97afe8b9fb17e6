"""``torch.multiprocessing.spawn`` (``mp.spawn``): the parent's report of a worker that died.

The parent joins its workers and raises on the first failure (torch/multiprocessing/spawn.py,
``ProcessContext.join``), with the worker's spawn index, which is its LOCAL rank:

- ``process N terminated with signal SIGKILL`` — ``ProcessExitedException`` (torch ≥ 1.8), a bare
  ``Exception`` before;
- ``process N terminated with exit code C`` — the same two classes;
- ``-- Process N terminated with the following error:`` followed by the worker's own traceback —
  ``ProcessRaisedException`` (torch ≥ 1.8), ``Exception`` before. The traceback after that line is the
  worker's: it gets the worker's index as its rank (:func:`spawn_child_rank`; mp.spawn runs one node's workers).
- ``Terminating process P via signal SIGTERM``: the parent tearing the other workers down (torch 2.1+).

Each becomes a ``worker_failed`` row (layer ``elastic``: the launcher's word) with ``rank_stated`` (the index: the
rank on one node),
``exit_code`` and ``signal`` (a signal's exit code comes from :func:`parsers.elastic.signal_exit_codes`).
"""

from __future__ import annotations

import polars as pl

from parsers.rules import Rule, ascii_classes

SRC = "torch.multiprocessing.spawn ProcessContext.join, torch 1.0 – 2.13"

RULES: list[Rule] = [
    Rule(
        "spawn_signal",
        "worker_failed",
        "elastic",
        "terminated with signal",
        r"process (?P<rank_stated>\d+) terminated with signal (?P<signal>SIG[A-Z0-9]+)",
        "error",
        SRC,
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
    ),
    Rule(
        "spawn_exit",
        "worker_failed",
        "elastic",
        "terminated with exit code",
        r"process (?P<rank_stated>\d+) terminated with exit code (?P<exit_code>-?\d+)",
        "error",
        SRC,
        "Exception: process 1 terminated with exit code 1",
    ),
    Rule(
        "spawn_raised",
        "worker_failed",
        "elastic",
        "terminated with the following error",
        r"Process (?P<rank_stated>\d+) terminated with the following error",
        "error",
        SRC,
        "-- Process 1 terminated with the following error:",
    ),
    Rule(
        "spawn_terminating",
        "worker_signalled",
        "elastic",
        "Terminating process",
        r"Terminating process (?P<pid>\d+) via signal (?P<signal>SIG\w+)",
        "warning",
        "torch.multiprocessing.spawn ProcessContext.join, torch 2.1 – 2.13",
        "W1201 19:01:17.290000 15002 torch/multiprocessing/spawn.py:165] Terminating process 15021 via signal SIGTERM",
    ),
]

_SPAWN_HEAD = ascii_classes(r"^-- Process (\d+) terminated with the following error:$")


def spawn_child_rank(df: pl.DataFrame) -> pl.DataFrame:
    """Give the child's traceback that ``torch.multiprocessing.spawn``'s parent re-prints after
    ``-- Process N terminated with the following error:`` the process index N as its rank.

    The child itself prints nothing (``_wrap`` pickles the traceback to the parent), so this block is the
    only place its error appears, unprefixed (fixtures/cases/cap-19, cap-33; torch 2.13 spawn.py). The block
    is the head line, then ``Traceback …`` and indented frames, up to and including the first line at
    indentation 0 (the exception line). Sets ``c10_rank`` (the stated rank of a traceback, as the excepthook's
    ``[rankN]:`` would) and ``hook_rank`` (its own stream) on the block's rows; input is the prefix-stripped
    lines frame sorted by ``path``, ``line``.
    """
    body = pl.col("body")
    if not df["body"].str.contains(_SPAWN_HEAD).any():
        return df
    head = body.str.extract(_SPAWN_HEAD, 1).cast(pl.Int32, strict=False)
    df = df.with_columns(head.alias("__sp_head"))
    df = df.with_columns(pl.col("__sp_head").is_not_null().cum_sum().over("path").alias("__sp_blk"))
    ends = (
        pl.col("__sp_head").is_null()
        & ~body.str.contains(r"^[ \t]")
        & (body.str.len_chars() > 0)
        & (body != "Traceback (most recent call last):")
    )
    df = df.with_columns(ends.cast(pl.Int32).cum_sum().over("path", "__sp_blk").alias("__sp_end"))
    inside = (pl.col("__sp_blk") > 0) & ((pl.col("__sp_end") == 0) | ((pl.col("__sp_end") == 1) & ends))
    n = pl.col("__sp_head").forward_fill().over("path", "__sp_blk")
    return df.with_columns(
        pl.when(inside)
        .then(pl.coalesce(pl.col("c10_rank"), n))
        .otherwise(pl.col("c10_rank"))
        .alias("c10_rank"),
        pl.when(inside)
        .then(pl.coalesce(pl.col("hook_rank"), n))
        .otherwise(pl.col("hook_rank"))
        .alias("hook_rank"),
    ).drop("__sp_head", "__sp_blk", "__sp_end")
