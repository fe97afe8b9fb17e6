"""Fault rows and their role: cause, effect, or exit (a bare exit status).

Error-class precedence (DESIGN.md): an application exception, CUDA OOM, CUDA/hardware error or SIGKILL
outranks closed connections, timeouts, watchdog, store and monitoredBarrier messages, which are usually
effects of another rank's failure. A launcher-reported exit code is a cause only when nothing else explains
the rank: -9 (SIGKILL: OOM killer) always is, -15 (SIGTERM from the agent) never is.
"""

from __future__ import annotations

import polars as pl

from correlator.schema import FAULT_KINDS

CAUSE_KINDS = ["python_exception", "cuda_oom", "cuda_error", "process_killed", "ddp_error", "watchdog_hang"]
EXIT_KINDS = ["worker_failed", "failure_entry", "root_cause_entry", "process_exit"]
#: Effect kinds that point at a peer rather than at a collective.
PEER_KINDS = ["gloo_connection_closed", "nccl_net_error", "nccl_peer_closed", "monitored_barrier_peer", "store_error",
              "nccl_error"]

#: Fault kind -> failure_kind of the verdict when that fault starts the trouble.
FAILURE_KIND_OF = {
    "python_exception": "rank_crash", "cuda_oom": "cuda_oom", "cuda_error": "cuda_error",
    "process_killed": "oom_kill", "ddp_error": "collective_mismatch", "collective_mismatch": "collective_mismatch",
    "nccl_net_error": "network_error", "gloo_connection_closed": "network_error", "store_error": "launcher_error",
    "launcher_error": "launcher_error", "watchdog_hang": "straggler_hang",
}


def fault_rows(table: pl.DataFrame) -> pl.DataFrame:
    """Rows that mean trouble on the rank that logged them, with a ``role`` column.

    ``role``: ``cause`` (exceptions, CUDA, SIGKILL), ``effect`` (timeouts, closed connections, SIGTERM by
    the agent, teardown) or ``exit`` (an exit status with no signal). Duplicates are excluded; agent rows
    without a rank are kept (rank null).
    """
    t = table.filter(~pl.col("duplicate") & pl.col("kind").is_in(list(FAULT_KINDS) + ["root_cause_entry"]))
    killed = (pl.col("exit_code") == -9) | (pl.col("signal") == "SIGKILL")
    crashed = pl.col("exit_code").is_in([-11, -7, -4, -8]) | (pl.col("signal") == "SIGSEGV")
    role = (
        pl.when(pl.col("kind").is_in(CAUSE_KINDS)).then(pl.lit("cause"))
        .when(pl.col("kind").is_in(EXIT_KINDS) & (killed | crashed)).then(pl.lit("cause"))
        .when(pl.col("kind").is_in(EXIT_KINDS) & ((pl.col("exit_code") == -15) | (pl.col("signal") == "SIGTERM")
                                                 | (pl.col("exit_code") == -2))).then(pl.lit("effect"))
        .when(pl.col("kind").is_in(EXIT_KINDS) & (pl.col("exit_code") == 0)).then(pl.lit("none"))
        .when(pl.col("kind").is_in(EXIT_KINDS)).then(pl.lit("exit"))
        .when(pl.col("kind") == "error_file").then(pl.lit("exit"))
        .otherwise(pl.lit("effect"))
    )
    return t.with_columns(role.alias("role")).filter(pl.col("role") != "none")


def mismatch_peers(message: str) -> tuple[str | None, str | None]:
    """From a ``Detected mismatch`` message, the peer's (op, shape) — what the other rank was running."""
    import re

    m = re.search(r"but Rank \d+ is running collective: CollectiveFingerPrint\(SequenceNumber=\d+,? ?OpType=(\w+)"
                  r"(?:, TensorShape=(\[[^\]]*\]))?", message)
    return (m.group(1), m.group(2)) if m else (None, None)


def barrier_ranks(message: str) -> list[int]:
    """Ranks named by ``Ranks 1, 3 failed to pass monitoredBarrier``."""
    import re

    m = re.search(r"Ranks? (\d+(?:, \d+)*) (?:failed to pass|timed out in) monitoredBarrier", message)
    return [int(x) for x in m.group(1).split(", ")] if m else []
