"""Horovod's stall reports: which ranks have (not) submitted a collective the others wait in.

The coordinator (rank 0's background thread) warns when a tensor has been submitted by only some ranks for
longer than ``HOROVOD_STALL_CHECK_TIME_SECONDS`` (60 s). Three layouts, all real (horovod/horovod issues):

- ≤ 0.15 ``operations.cc`` / ``stall_inspector``: ``Stalled ops: <tensor> [ready ranks: 5, 6, 3, 1, 4, 0]`` —
  the ranks that HAVE submitted (the missing ones are the others; #530, #336);
- 0.16: ``W horovod/common/operations.cc:588] <tensor> [missing ranks: 1]`` (#1012);
- ≥ 0.19 ``stall_inspector.cc:105``: ``Stalled ranks:`` then one line per MISSING rank,
  ``2: [HorovodBroadcast_Variable_0, …]`` (``missing_ranks[rank]`` in stall_inspector.cc; #1666, DLE#549);
- ≥ 0.21 the same list under ``Missing ranks:``, each ``<rank>[!]: [<tensor>, <tensor>, … ...]`` (at most six
  names; ``!`` marks a rank stalled past ``HOROVOD_STALL_SHUTDOWN_TIME_SECONDS``), where a tensor is named by the
  framework: ``cond_1/…/HorovodAllreduce_grads_0`` (TensorFlow), ``allreduce.fc.weight`` (PyTorch's
  ``DistributedOptimizer``). Only lines in such a list are read (:func:`stall_items`): ``1: [x]`` alone says
  nothing.

Each named rank becomes one row (``peer_rank``; extra rows of one line have ``line_count`` 0, like split tee
lines): kind ``stall_ready`` or ``stall_missing``; ``pg`` is ``horovod:<tensor>`` (the collective instance),
``op`` its type (``HorovodAllreduce_…`` → ``ALLREDUCE``). The lines are reports, not faults of the rank that
printed them (rank 0 reports even when rank 0 is the one missing).
"""

from __future__ import annotations

import polars as pl

from parsers.rules import Prefix, Rule, ascii_classes

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
_LIST = ascii_classes(r"(?P<hvd_ranks>\d+(?:,\s*\d+)*)")

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
        "hvd_shutdown_marked",
        "log",
        "app",
        "is stalled for longer than",
        None,
        "error",
        SRC.format("≥ 0.21 (stall_inspector.cc CheckForStalledTensors)"),
        'One or more rank (marked by "!") is stalled for longer than 120 seconds. Will shutdown.',
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

#: One rank of a ``Missing ranks:`` / ``Stalled ranks:`` list (example: Horovod 0.21.1 + TF 2.4, public repro
#: DEKHTIARJonathan/HVD_TF_Worker_Desync_BugReport README) (stall_inspector.cc ≥ 0.19: ``message << std::endl
#: << kv.first; if shutdown ``"!"``; ``": ["`` then the names). Applied only to the rows :func:`stall_items` marks.
MISSING_ITEM = Rule(
    "hvd_missing_item",
    "stall_missing",
    "app",
    ": [",
    r"^(?P<hvd_ranks>\d+)!?: \[(?P<hvd_tensor>[^,\]\s]+)",
    "warning",
    SRC.format("≥ 0.21, after 'Missing ranks:'"),
    "[2021-02-02 21:19:07.345988: W /tmp/pip-install-dxtho7yu/horovod_0bde588442554cf4b80c76441efc4e03/horovod/"
    "common/stall_inspector.cc:105] One or more tensors were submitted to be reduced, gathered or broadcasted by "
    "subset of ranks and are waiting for remainder of ranks for more than 10 seconds. This may indicate that "
    "different ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, "
    "which will cause deadlock. \nMissing ranks:\n0: [cond_1/then/_10/cond_1/SGD/PartitionedCall/"
    "DistributedSGD_Allreduce/cond/then/_79/DistributedSGD_Allreduce/cond/HorovodAllreduce_grads_0]",
)
_HEAD = r"(?:^|\s)(?:Missing|Stalled) ranks:\s*$"
_ITEM = ascii_classes(r"^\d+!?: \[")


def stall_items(df: pl.DataFrame) -> pl.Series:
    """Rows that are one rank of a stall report's list: a run of ``<rank>: [...]`` lines right after a
    ``Missing ranks:`` / ``Stalled ranks:`` line of the same stream (file and transport prefix)."""
    msg = pl.col("message").fill_null("")
    if not df["message"].str.contains(_ITEM).any():
        # No list item: no row to mark, and the per-block window below (a block per other row) is skipped.
        return pl.repeat(False, df.height, dtype=pl.Boolean, eager=True).alias("m")
    item = msg.str.contains(_ITEM)
    keys = ["path", *(k for k in ("xport_rank", "srun_label", "xport_host") if k in df.columns)]
    block = (~item).cast(pl.Int32).cum_sum().over(keys)
    head = msg.str.contains(_HEAD).first().over([*keys, block])
    return df.select((item & head).fill_null(False).alias("m"))["m"]


_OPS = {
    "allreduce": "ALLREDUCE",
    "broadcast": "BROADCAST",
    "allgather": "ALLGATHER",
    "alltoall": "ALLTOALL",
    "reducescatter": "REDUCE_SCATTER",
    "join": "JOIN",
    "barrier": "BARRIER",
}


def explode_list(
    df: pl.DataFrame, hit: pl.Expr, col: str, out: str, extra: list[pl.Expr] | None = None
) -> pl.DataFrame:
    """Rows ``hit`` whose ``col`` holds a comma list of ranks become one row per rank (``out``, Int32); the
    extra rows of one line have ``line_count`` 0, like split tee lines. ``extra``: more columns for those rows.
    Also used by :mod:`parsers.paddle` (``rank=[1, 3] was aborted``)."""
    rows = (
        df.filter(hit)
        .with_row_index("__k")
        .with_columns(pl.col(col).str.split(",").alias("__r"))
        .explode("__r")
        .with_columns(
            pl.col("__r").str.strip_chars().cast(pl.Int32, strict=False).alias(out),
            pl.when(pl.int_range(pl.len()).over("__k") > 0)
            .then(0)
            .otherwise(pl.col("line_count"))
            .cast(pl.Int32)
            .alias("line_count"),
            *(extra or []),
        )
        .drop("__k", "__r")
    )
    return pl.concat([df.filter(~hit), rows], how="vertical_relaxed").sort(
        "path", "line", maintain_order=True
    )


def stall_rows(df: pl.DataFrame) -> pl.DataFrame:
    """One row per rank a stall report names (``peer_rank``), with ``pg``/``op`` from the tensor name."""
    if "hvd_ranks" not in df.columns:
        return df
    hit = pl.col("kind").is_in(["stall_ready", "stall_missing"]) & pl.col("hvd_ranks").is_not_null()
    if not df.select(hit.any()).item():
        return df.drop("hvd_ranks", "hvd_tensor", strict=False)
    # TensorFlow names end in ``HorovodAllreduce_<name>``; PyTorch's DistributedOptimizer names ``allreduce.<param>``
    op = pl.coalesce(
        pl.col("hvd_tensor").str.extract(r"(?:^|/)Horovod([A-Za-z]+)", 1),
        pl.col("hvd_tensor").str.extract(r"^([a-z]+)\.", 1),
    ).str.to_lowercase()
    out = explode_list(
        df,
        hit,
        "hvd_ranks",
        "peer_rank",
        [
            pl.concat_str([pl.lit("horovod:"), pl.col("hvd_tensor").fill_null("?")]).alias("pg"),
            op.replace_strict(_OPS, default=None, return_dtype=pl.String).alias("op"),
        ],
    )
    return out.drop("hvd_ranks", "hvd_tensor")
