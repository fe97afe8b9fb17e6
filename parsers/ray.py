"""Ray: the driver console's worker prefix and Ray Train's reports (docs/log-formats.md §23).

Ray's log monitor forwards every worker and actor line to the driver's console behind
``(<Actor> pid=<pid>[, ip=<ip>]) `` (``ray/_private/worker.py`` ``print_worker_logs``: ``f"{color_pre}({prefix_for(
data)}{pid}{ip_prefix}){color_post} {message}"``, ANSI colour codes unless ``RAY_COLOR_PREFIX=0``; Ray 1.x – 2.60).
The pid is the process's, not a rank; Ray Train states the map:

- the controller (Train V2, ``worker_group.py``): ``Started training worker group of size 4:`` then one line per
  worker ``- (ip=192.0.2.2, pid=28306) world_rank=1, local_rank=1, node_rank=0``; Train V1 (``backend_executor.py``)
  ``- (node_id=…, ip=…, pid=…) world_rank=1, …`` after ``Started distributed worker processes:``;
- each worker (``ray/train/torch/config.py``): ``Setting up process group for: env:// [rank=1, world_size=4]``.

:func:`worker_ranks` gives every line of a mapped pid that rank as ``xport_rank`` (a transport prefix that names
the global rank, as mpirun's ``[1,N]``). Ray Train V2 names the ranks whose train function failed:
``[Rank 1 Error Snippet]:`` (``worker_group/poll.py``; ``[Rank 0,2 Error Snippet]:`` for one error on several
ranks) → ``worker_failed`` per rank. Lines are real: fixtures/cases/cap-ray-* (Ray 2.60.0, torch 2.13 CPU, gloo).
"""

from __future__ import annotations

import polars as pl

from parsers.horovod import explode_list
from parsers.rules import Prefix, Rule, ascii_classes, strip_prefix

SRC = "Ray 2.60.0 ({})"

_ANSI = ascii_classes(r"(?:\x1b\[[\d;]*m)?")
#: Ray's worker tag ``(<Actor> pid=<pid>[, ip=<ip>])``, which :data:`PREFIX` strips at the start of a line.
TAG = ascii_classes(
    r"\((?:(?P<ray_actor>[A-Za-z_][\w.]*) )?pid=(?P<ray_pid>\d+)(?:, ip=(?P<ray_ip>[^)\s]+))?\)"
)
PREFIX = Prefix(
    "ray_worker",
    rf"^{_ANSI}{TAG}{_ANSI} (?P<rest>.*)$",
    source=SRC.format("ray/_private/worker.py print_worker_logs, Ray 1.x – 2.60"),
    example="\x1b[36m(RayTrainWorker pid=28306)\x1b[0m Error in training function:",
)

RULES: list[Rule] = [
    Rule(
        "ray_worker_map",
        "rendezvous",
        "elastic",
        ") world_rank=",
        r"pid=\d+\) world_rank=\d+, local_rank=\d+",
        "info",
        SRC.format(
            "train/v2/_internal/execution/worker_group/worker_group.py; V1 train/_internal/backend_executor.py"
        ),
        "- (ip=192.0.2.2, pid=28306) world_rank=1, local_rank=1, node_rank=0",
    ),
]

_SNIPPET = ascii_classes(r"^\[Rank (?P<ray_ranks>\d+(?:,\d+)*) Error Snippet\]:\s*$")
#: ``[Rank R Error Snippet]:`` followed by the controller's health-check text: the worker PROCESS died (killed, a
#: segfault, the OOM killer) — the only line that says so, as the dead worker writes nothing (cap-ray-02).
SNIPPET_DEAD = Rule(
    "ray_snippet_dead",
    "worker_failed",
    "elastic",
    "Error Snippet]:",
    _SNIPPET,
    "error",
    SRC.format("train/v2/_internal/execution/worker_group/poll.py, Train V2; WorkerHealthCheckFailedError"),
    "[Rank 2 Error Snippet]:\nA worker health check failed.",
)
#: ``[Rank 1,3 Error Snippet]:`` followed by a traceback: a copy of what those workers raised, which their own
#: ``(RayTrainWorker pid=P)`` lines already show (or Ray's log dedup folded): a report, not another fault.
SNIPPET_RAISED = Rule(
    "ray_snippet_raised",
    "log",
    "elastic",
    "Error Snippet]:",
    _SNIPPET,
    "info",
    SRC.format("train/v2/_internal/execution/worker_group/poll.py, Train V2"),
    "[Rank 1,3 Error Snippet]:\nTraceback (most recent call last):",
)
_DIED = r"^(?:A worker health check failed|The actor died unexpectedly|The actor is dead)"


def dead_snippets(df: pl.DataFrame) -> pl.Series:
    """Rows of ``[Rank R Error Snippet]:`` whose next row in the same file (and prefix) says the worker process
    died (``A worker health check failed.``)."""
    msg = pl.col("message").fill_null("")
    if not df["message"].str.contains(_SNIPPET).any():  # no snippet header: no window over the file
        return pl.repeat(False, df.height, dtype=pl.Boolean, eager=True).alias("d")
    keys = ["path", *(k for k in ("xport_rank", "ray_pid") if k in df.columns)]
    nxt = msg.shift(-1).over(keys).fill_null("")
    return df.select((msg.str.contains(_SNIPPET) & nxt.str.contains(_DIED)).alias("d"))["d"]


WORKER_MAP = ascii_classes(r"pid=(\d+)\) world_rank=(\d+),")
_PG = ascii_classes(r"^Setting up process group for: \S+ \[rank=(\d+), world_size=\d+\]")


def strip_worker_prefix(df: pl.DataFrame) -> pl.DataFrame:
    """Strip Ray's ``(<Actor> pid=P[, ip=I]) `` from ``body`` (``ray_pid``, ``ray_actor``, ``ray_ip``: not ``pid``,
    which would tie the controller's own pid to the ranks it reports on) and give the
    lines of Ray Train workers their world rank (:func:`worker_ranks`)."""
    if (
        not df["body"].str.contains(" pid=", literal=True).any()
    ):  # the marker is False, as strip_prefix leaves it
        return (
            df if "pfx_ray_worker" in df.columns else df.with_columns(pl.lit(False).alias("pfx_ray_worker"))
        )
    return worker_ranks(strip_prefix(df, PREFIX))


def worker_ranks(df: pl.DataFrame) -> pl.DataFrame:
    """``xport_rank`` of every line behind a Ray prefix whose pid Ray Train maps to a world rank in the same file:
    the controller's ``(…, pid=P) world_rank=R`` lines, else the worker's own ``Setting up process group for: …
    [rank=R, …]``. A pid mapped to two ranks is left alone."""
    if "pfx_ray_worker" not in df.columns or not df["pfx_ray_worker"].any():
        return df
    body = pl.col("body")
    m = body.str.extract_groups(WORKER_MAP)
    by_ctrl = df.select(
        pl.col("path"),
        m.struct.field("1").cast(pl.Int64, strict=False).alias("p"),
        m.struct.field("2").cast(pl.Int32, strict=False).alias("r"),
    )
    by_pg = df.filter(pl.col("pfx_ray_worker")).select(
        pl.col("path"),
        pl.col("ray_pid").cast(pl.Int64, strict=False).alias("p"),
        body.str.extract(_PG, 1).cast(pl.Int32, strict=False).alias("r"),
    )
    pairs = pl.concat([by_ctrl, by_pg]).drop_nulls().unique()
    if pairs.height == 0:
        return df
    pairs = pairs.filter(pl.col("r").n_unique().over("path", "p") == 1).unique(["path", "p"])
    df = df.join(
        pairs.rename({"p": "__ray_p", "r": "__ray_r"}),
        left_on=["path", pl.col("ray_pid").cast(pl.Int64, strict=False)],
        right_on=["path", "__ray_p"],
        how="left",
        maintain_order="left",
    )
    hit = pl.col("pfx_ray_worker") & pl.col("__ray_r").is_not_null()
    return df.with_columns(
        pl.when(hit & pl.col("xport_rank").is_null())
        .then(pl.col("__ray_r"))
        .otherwise(pl.col("xport_rank"))
        .cast(pl.Int32)
        .alias("xport_rank")
    ).drop("__ray_r", "__ray_p", strict=False)


_COPIED = ["kind", "severity", "layer", "exc_type", "timeout_ms", "peer_addr"]


def snippet_rows(df: pl.DataFrame) -> pl.DataFrame:
    """One row per rank of ``[Rank 0,2 Error Snippet]:`` (``rank_stated``; ``c10_rank`` as a prefix would).

    A dead-worker snippet is that rank's ``worker_failed``. A raised-error snippet states what those ranks raised:
    it takes the kind (and severity, layer, exception type, timeout, peer address) of the traceback record right
    after it (a blank line between allowed); a header with no traceback after it (the controller's copy, whose
    traceback Ray's dedup folded) stays a ``log`` row. That copy is the only trace of a rank whose own lines Ray's log
    dedup folded into another worker's (cap-ray-02 rank 3, cap-ray-03 rank 2)."""
    if "ray_ranks" not in df.columns:
        return df
    head = pl.col("ray_ranks").is_not_null() & pl.col("kind").is_in(["worker_failed", "log"])
    if not df.select(head.any()).item():
        return df.drop("ray_ranks")
    df = df.with_row_index("__i")
    # the traceback record right after the header (a blank line may come between): the copy Ray prints
    tb = (
        pl.col("severity").is_in(["error", "fatal"])
        & pl.col("record").fill_null("").str.starts_with("Traceback (most recent call last):")
        & pl.col("ray_ranks").is_null()
    )
    blank = pl.col("kind") == "blank"
    nxt = pl.when(tb.shift(-1).over("path")).then(pl.col("__i").shift(-1).over("path"))
    nxt2 = pl.when(blank.shift(-1).over("path") & tb.shift(-2).over("path")).then(
        pl.col("__i").shift(-2).over("path")
    )
    df = df.with_columns(
        pl.when(head & (pl.col("kind") == "log")).then(pl.coalesce(nxt, nxt2)).alias("__src")
    )
    src = df.select(["__i", *_COPIED]).rename({c: f"__s_{c}" for c in _COPIED})
    df = df.join(src, left_on="__src", right_on="__i", how="left", maintain_order="left")
    copy = pl.col("__src").is_not_null()
    df = df.with_columns(
        [pl.when(copy).then(pl.col(f"__s_{c}")).otherwise(pl.col(c)).alias(c) for c in _COPIED]
    ).drop("__i", "__src", *[f"__s_{c}" for c in _COPIED])
    hit = pl.col("ray_ranks").is_not_null() & (pl.col("kind") != "log")
    out = explode_list(df, hit, "ray_ranks", "rank_stated", [])
    return out.with_columns(
        pl.when(hit.fill_null(False) & pl.col("ray_ranks").is_not_null())
        .then(pl.col("rank_stated"))
        .otherwise(pl.col("c10_rank"))
        .cast(pl.Int32)
        .alias("c10_rank")
    ).drop("ray_ranks")
