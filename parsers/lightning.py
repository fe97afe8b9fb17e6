"""PyTorch Lightning's own lines (lightning 2.x; seen in fixtures/cases/cap-28 and cap-30, Lightning 2.6.6).

- ``[rank: N] `` — ``lightning_utilities.core.rank_zero.rank_prefixed_message``: Lightning's own rank prefix
  (``[rank: 1] Seed set to 1234``). N is the process's global rank (``_get_rank()``), except in the
  child-process observer's message, where it is the failed child's index + 1, i.e. its LOCAL rank:
  ``[rank: 1] Child process with PID 11896 terminated with code -9. Forcefully terminating all other processes
  to avoid zombies 🧟`` (``fabric/strategies/launchers/subprocess_script.py`` ``_ChildProcessObserver``; the
  observer then SIGKILLs every other process of the node).
- ``Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2`` (``fabric/utilities/distributed.py``), one per rank:
  its rank and the world size.
"""

from __future__ import annotations

import polars as pl

from parsers.rules import Prefix, Rule

SRC = "PyTorch Lightning 2.x {}"

RANK_PREFIX = Prefix(
    "lightning_rank",
    r"^\[rank: (?P<lightning_rank>\d+)\] (?P<rest>.*)$",
    layer="app",
    source=SRC.format("rank_prefixed_message (lightning_utilities rank_zero.py)"),
    example="[rank: 1] Seed set to 1234",
)

RULES: list[Rule] = [
    Rule(
        "lightning_child_failed",
        "worker_failed",
        "elastic",
        "Child process with PID",
        r"Child process with PID (?P<pid>\d+) terminated with code (?P<exit_code>-?\d+)",
        "error",
        SRC.format("fabric/strategies/launchers/subprocess_script.py _ChildProcessObserver"),
        "[rank: 1] Child process with PID 11896 terminated with code -9. Forcefully terminating all other processes "
        "to avoid zombies 🧟",
    ),
    Rule(
        "lightning_init",
        "log",
        "app",
        "Initializing distributed: GLOBAL_RANK:",
        r"GLOBAL_RANK: (?P<rank_stated>\d+), MEMBER: \d+/(?P<world_size>\d+)",
        "info",
        SRC.format("fabric/utilities/distributed.py _init_dist_connection"),
        "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2",
    ),
]


def rank_fields(df: pl.DataFrame) -> pl.DataFrame:
    """Turn the ``[rank: N]`` prefix into ``local_rank_stated`` on the observer's child-failed lines and into
    ``rank_stated`` everywhere else; drops the helper column."""
    if "lightning_rank" not in df.columns:
        return df
    n = pl.col("lightning_rank").cast(pl.Int32, strict=False)
    child = (pl.col("kind") == "worker_failed") & pl.col("message").str.starts_with("Child process with PID")
    return df.with_columns(
        pl.when(child)
        .then(pl.coalesce(pl.col("local_rank_stated"), n))
        .otherwise(pl.col("local_rank_stated"))
        .alias("local_rank_stated"),
        pl.when(child)
        .then(pl.col("rank_stated"))
        .otherwise(pl.coalesce(pl.col("rank_stated"), n))
        .alias("rank_stated"),
    ).drop("lightning_rank")
