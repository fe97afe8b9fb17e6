"""Fault rows and their role: cause, effect, or exit (a bare exit status).

Error-class precedence (docs/design.md): an application exception, CUDA OOM, CUDA/hardware error or SIGKILL
outranks closed connections, timeouts, watchdog, store and monitoredBarrier messages, which are usually
effects of another rank's failure. A launcher-reported exit code is a cause only when nothing else explains
the rank: -9 (SIGKILL: OOM killer) always is, -15 (SIGTERM from the agent) never is.
"""

from __future__ import annotations

import polars as pl

from correlator.schema import FAULT_KINDS, Kind
from correlator.verdict import Role
from parsers import python

#: The role sets, declared once on :class:`correlator.schema.Kind` (``Kind.CAUSE``, ``Kind.EXIT``, ``Kind.PEER``).
CAUSE_KINDS = sorted(Kind.CAUSE)
EXIT_KINDS = sorted(Kind.EXIT)
#: Effect kinds that point at a peer rather than at a collective.
PEER_KINDS = sorted(Kind.PEER)

#: Fault kind -> failure_kind of the verdict when that fault starts the trouble.
FAILURE_KIND_OF = {
    Kind.PYTHON_EXCEPTION: "rank_crash",
    Kind.CUDA_OOM: "cuda_oom",
    Kind.CUDA_ERROR: "cuda_error",
    Kind.PROCESS_KILLED: "oom_kill",
    Kind.DDP_ERROR: "collective_mismatch",
    Kind.COLLECTIVE_MISMATCH: "collective_mismatch",
    Kind.NCCL_NET_ERROR: "network_error",
    Kind.GLOO_CONNECTION_CLOSED: "network_error",
    Kind.STORE_ERROR: "launcher_error",
    Kind.LAUNCHER_ERROR: "launcher_error",
    Kind.WATCHDOG_HANG: "straggler_hang",
}


def _late_hang() -> pl.Expr:
    """A watchdog hang logged after the rank's own collective timeout: the abort hanging, not a cause."""
    timed_out_at = (
        pl.when(pl.col("kind").is_in([Kind.WATCHDOG_TIMEOUT, Kind.WATCHDOG_STATUS]))
        .then(pl.col("ts"))
        .otherwise(None)
        .min()
        .over("rank")
    )
    return (pl.col("kind") == Kind.WATCHDOG_HANG) & (pl.col("ts") > timed_out_at).fill_null(False)


def _raised_by_wait() -> pl.Expr:
    """A plain exception that is a wait failing: on a rank whose own file already showed a timeout or a lost
    connection (the traceback of the collective or store call), or raised inside a collective's own code."""
    waited = pl.col("kind").is_in(_WAIT_KINDS) & (pl.col("severity") != "warning")
    waited_before = ((waited.cast(pl.Int32).cum_sum() - waited.cast(pl.Int32)).over("rank", "path") > 0) | (
        pl.col("kind").is_in([Kind.STORE_ERROR]) & pl.col("timeout_ms").is_not_null()
    ).cast(pl.Int32).cum_sum().over("rank", "path").gt(0)
    # An exception raised inside a collective's own code (its traceback passes through a communication
    # function of distributed_c10d.py: ``broadcast_object_list`` -> ``_tensor_to_object`` -> ``EOFError: Ran
    # out of input`` while rank 0 was still packing data, modelscope/ms-swift#4340) is the wait failing too.
    raised_in_collective = pl.col("raw").str.contains(python.COLLECTIVE_FRAME_RE)
    return (
        (pl.col("kind") == Kind.PYTHON_EXCEPTION)
        & pl.col("rank").is_not_null()
        & (waited_before | raised_in_collective)
    )


def fault_rows(table: pl.DataFrame) -> pl.DataFrame:
    """Rows that mean trouble on the rank that logged them, with a ``role`` column.

    ``role``: ``cause`` (exceptions, CUDA, SIGKILL), ``effect`` (timeouts, closed connections, SIGTERM by
    the agent, teardown), ``exit`` (an exit status with no signal) or ``weak`` (a bare NCCL WARN, a store
    retry warning: trouble only when something else failed too, and never enough to explain a rank). Duplicates are excluded; agent rows
    without a rank are kept (rank null).
    """
    # srun's task ids are global ranks when srun runs one task per rank: its labels gave ranks, or no launcher
    # of its own (torchrun, DeepSpeed) ran inside the tasks.
    srun_ranks = (
        table.filter(pl.col("rank_source") == "transport_prefix").height > 0
        or table.filter(pl.col("layer") == "elastic").height == 0
    )
    t = table.filter(~pl.col("duplicate") & pl.col("kind").is_in(list(FAULT_KINDS) + [Kind.ROOT_CAUSE_ENTRY]))
    if srun_ranks:
        t = _expand_task_lists(t)
    killed = (pl.col("exit_code") == -9) | (pl.col("signal") == "SIGKILL")
    crashed = pl.col("exit_code").is_in([-11, -7, -4, -8]) | pl.col("signal").is_in(
        ["SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE"]
    )
    late_hang = _late_hang()
    raised_by_wait = _raised_by_wait()
    # A kill reported after the scheduler cancelled the job (srun "forcing job termination", slurmstepd
    # "CANCELLED AT") is the teardown's SIGKILL, not the OOM killer.
    cancelled = pl.col("kind") == Kind.JOB_CANCELLED
    after_cancel = ((cancelled.cast(pl.Int32).cum_sum() - cancelled.cast(pl.Int32)).over("path") > 0) & (
        pl.col("kind") == Kind.PROCESS_KILLED
    )
    signal = pl.col("signal").fill_null("")
    role = (
        pl.when(pl.col("kind").is_in(CAUSE_KINDS) & (signal == "SIGTERM"))
        .then(pl.lit("effect"))
        .when(late_hang)
        .then(pl.lit("effect"))
        .when(raised_by_wait | after_cancel)
        .then(pl.lit("effect"))
        # SIGABRT is how the NCCL watchdog takes a process down after a timeout: an exit, not a cause.
        .when((pl.col("kind") == Kind.PROCESS_KILLED) & (signal == "SIGABRT"))
        .then(pl.lit("exit"))
        .when(pl.col("kind").is_in(CAUSE_KINDS))
        .then(pl.lit("cause"))
        .when(pl.col("kind").is_in(EXIT_KINDS) & (killed | crashed))
        .then(pl.lit("cause"))
        # 128 + N is a shell's "killed by signal N" (143 SIGTERM, 137 SIGKILL, 134 SIGABRT): the launcher's or the
        # watchdog's doing, as are SIGTERM / SIGHUP / SIGINT from the launcher (docs/design.md rule 15).
        .when(
            pl.col("kind").is_in(EXIT_KINDS)
            & (
                (pl.col("exit_code") == -15)
                | pl.col("signal").is_in(["SIGTERM", "SIGHUP"])
                | pl.col("exit_code").is_in([-2, -1])
                | (pl.col("exit_code") > 128)
            )
        )
        .then(pl.lit("effect"))
        .when(pl.col("kind").is_in(EXIT_KINDS) & (pl.col("exit_code") == 0))
        .then(pl.lit("none"))
        .when(pl.col("kind").is_in(EXIT_KINDS))
        .then(pl.lit("exit"))
        .when(pl.col("kind") == Kind.ERROR_FILE)
        .then(pl.lit("exit"))
        # A bare NCCL WARN (no finer rule matched) or a store retry warning is not a failure by itself.
        .when(
            (pl.col("kind") == Kind.NCCL_WARN)
            | (
                (pl.col("kind") == Kind.STORE_ERROR)
                & (pl.col("severity") == "warning")
                & pl.col("timeout_ms").is_null()
            )
        )
        .then(pl.lit("weak"))
        .otherwise(pl.lit("effect"))
    )
    # The scheduler's teardown kill is the launcher signalling the worker (it is not the rank's own error).
    return t.with_columns(
        role.alias("role"),
        pl.when(after_cancel).then(pl.lit(Kind.WORKER_SIGNALLED)).otherwise(pl.col("kind")).alias("kind"),
    ).filter(pl.col("role") != "none")


#: Waits whose failure a rank's next exception merely reports (the traceback of the collective or store call).
_WAIT_KINDS = [
    Kind.WATCHDOG_TIMEOUT,
    Kind.GLOO_TIMEOUT,
    Kind.GLOO_CONNECTION_CLOSED,
    Kind.STORE_ERROR,
    Kind.NCCL_ERROR,
    Kind.MONITORED_BARRIER_PEER,
    Kind.ASYNC_ERROR,
]


def _expand_task_lists(t: pl.DataFrame) -> pl.DataFrame:
    """srun reports a whole task list per line (``ranks_named``, filled by ``parsers.system``); when srun ran
    one task per rank (the rows' ranks came from ``srun --label``), the task ids are global ranks: one fault
    row per rank."""
    listed = pl.col("rank").is_null() & pl.col("ranks_named").is_not_null() & (pl.col("layer") == "system")
    rows = t.filter(listed)
    if rows.height == 0:
        return t
    expanded = (
        rows.with_columns(pl.col("ranks_named").str.split(",").alias("rank"))
        .explode("rank")
        .with_columns(pl.col("rank").cast(pl.Int32), pl.lit("srun_task").alias("rank_source"))
    )
    return pl.concat([t.filter(~listed), expanded], how="vertical_relaxed")


def failing_attempts(table: pl.DataFrame) -> list[int]:
    """Attempts (torchelastic restarts) that hold any fault, in order."""
    f = fault_rows(table).filter(pl.col("role") != Role.WEAK)
    return sorted(int(a) for a in f["attempt"].drop_nulls().unique().to_list())
