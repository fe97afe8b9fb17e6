"""Horovod's stall reports: which ranks have (not) submitted a collective the others wait in.

The coordinator (rank 0's background thread) warns when a tensor has been submitted by only some ranks for
longer than ``HOROVOD_STALL_CHECK_TIME_SECONDS`` (60 s). Three layouts, all real (horovod/horovod issues):

- ≤ 0.15 ``operations.cc`` / ``stall_inspector``: ``Stalled ops: <tensor> [ready ranks: 5, 6, 3, 1, 4, 0]`` —
  the ranks that HAVE submitted (the missing ones are the others; #530, #336);
- 0.16: ``W horovod/common/operations.cc:588] <tensor> [missing ranks: 1]`` (#1012);
- ≥ 0.19 ``stall_inspector.cc:105``: ``Stalled ranks:`` then one line per MISSING rank,
  ``2: [HorovodBroadcast_Variable_0, …]`` (``missing_ranks[rank]`` in stall_inspector.cc; #1666, DLE#549).

Each named rank becomes one row (``peer_rank``; extra rows of one line have ``line_count`` 0, like split tee
lines): kind ``stall_ready`` or ``stall_missing``; ``pg`` is ``horovod:<tensor>`` (the collective instance),
``op`` its type (``HorovodAllreduce_…`` → ``ALLREDUCE``). The lines are reports, not faults of the rank that
printed them (rank 0 reports even when rank 0 is the one missing).
"""

from __future__ import annotations

import polars as pl

from parsers.rules import Prefix, Rule

#: Horovod's C++ log prefix (``LOG(WARNING)`` in horovod/common/logging.cc, 0.16+).
PREFIX = Prefix(
    "horovod",
    r"^\[(?P<pyts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+): (?P<sev>[TDIWEF]) (?P<src>[^\]:\s]+):(?P<srcline>\d+)\] "
    r"(?P<rest>.*)$",
    layer="app",
    source="Horovod common/logging.cc LogMessage (0.16 – 0.28)",
    example="[2020-01-14 13:48:07.704032: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted",
)

SRC = "Horovod {} (horovod/common/operations.cc, stall_inspector.cc)"
_LIST = r"(?P<hvd_ranks>\d+(?:,\s*\d+)*)"

RULES: list[Rule] = [
    Rule(
        "hvd_ready",
        "stall_ready",
        "app",
        "[ready ranks:",
        r"(?P<hvd_tensor>Horovod\w+)? ?\[ready ranks: " + _LIST + r"\]",
        "warning",
        SRC.format("≤ 0.15"),
        "Stalled ops: HorovodBroadcast_InceptionV3_Logits_Conv2d_1c_1x1_weights_0 [ready ranks: 5, 6, 3, 1, 4, 0]",
    ),
    Rule(
        "hvd_missing",
        "stall_missing",
        "app",
        "[missing ranks:",
        r"(?P<hvd_tensor>Horovod\w+)? ?\[missing ranks: " + _LIST + r"\]",
        "warning",
        SRC.format("0.16"),
        "[2019-04-13 13:53:31.851506: W horovod/common/operations.cc:588] HorovodBroadcast_dense_1_bias_Momentum_0 "
        "[missing ranks: 1]",
    ),
    Rule(
        "hvd_stalled_rank",
        "stall_missing",
        "app",
        ": [Horovod",
        r"^(?P<hvd_ranks>\d+): \[(?P<hvd_tensor>Horovod\w+)",
        "warning",
        SRC.format("≥ 0.19, after 'Stalled ranks:'"),
        "[2020-01-14 13:48:07.704032: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to "
        "be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than "
        "60 seconds.\nStalled ranks:\n2: [HorovodBroadcast_Variable_0, HorovodBroadcast_Variable_1_0]",
    ),
    Rule(
        "hvd_shut_down",
        "peer_shutdown",
        "app",
        "Horovod has been shut down",
        None,
        "error",
        SRC.format("0.13 – 0.28 (common/common.h SHUT_DOWN_ERROR)"),
        "RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt "
        "to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.",
    ),
]

_OPS = {
    "allreduce": "ALLREDUCE",
    "broadcast": "BROADCAST",
    "allgather": "ALLGATHER",
    "alltoall": "ALLTOALL",
    "reducescatter": "REDUCE_SCATTER",
    "join": "JOIN",
    "barrier": "BARRIER",
}


def stall_rows(df: pl.DataFrame) -> pl.DataFrame:
    """One row per rank a stall report names (``peer_rank``), with ``pg``/``op`` from the tensor name."""
    if "hvd_ranks" not in df.columns:
        return df
    hit = pl.col("kind").is_in(["stall_ready", "stall_missing"]) & pl.col("hvd_ranks").is_not_null()
    if not df.select(hit.any()).item():
        return df.drop("hvd_ranks", "hvd_tensor", strict=False)
    op = pl.col("hvd_tensor").str.extract(r"^Horovod([A-Za-z]+)", 1).str.to_lowercase()
    rows = (
        df.filter(hit)
        .with_row_index("__k")
        .with_columns(pl.col("hvd_ranks").str.split(",").alias("__r"))
        .explode("__r")
        .with_columns(
            pl.col("__r").str.strip_chars().cast(pl.Int32, strict=False).alias("peer_rank"),
            pl.when(pl.int_range(pl.len()).over("__k") > 0)
            .then(0)
            .otherwise(pl.col("line_count"))
            .cast(pl.Int32)
            .alias("line_count"),
            pl.concat_str([pl.lit("horovod:"), pl.col("hvd_tensor").fill_null("?")]).alias("pg"),
            op.replace_strict(_OPS, default=None, return_dtype=pl.String).alias("op"),
        )
        .drop("__k", "__r")
    )
    out = pl.concat([df.filter(~hit), rows], how="vertical_relaxed").sort("path", "line", maintain_order=True)
    return out.drop("hvd_ranks", "hvd_tensor")
