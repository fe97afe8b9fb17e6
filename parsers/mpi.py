"""Open MPI's own reports (``mpirun`` / ``mpiexec``, ORTE 3.x – 4.x, PRRTE 5.x help texts), as real logs show them.

- ``mpiexec noticed that process rank 0 with PID 19474 on node node-a exited on signal 11 (Segmentation fault).``
  (help-errmgr-base.txt ``normal-termination-but``/``proc-aborted-signal``; openai/glow#18);
- the opal backtrace handler's ``[node-a:19474] Signal: Segmentation fault (11)``: a rank's own crash, joined to
  its rank through the pid.

Each becomes a ``worker_failed`` row with ``rank_stated`` (the MPI rank is the global rank), or a
``process_killed`` row with the signal for the backtrace, so the diagnosis can name the rank.
"""

from __future__ import annotations

import signal

import polars as pl

from parsers.rules import Rule

_NAMES = {int(s): s.name for s in signal.Signals}

SRC = "Open MPI {} (orte/mca/errmgr, opal/util/stacktrace.c)"

RULES: list[Rule] = [
    Rule(
        "mpi_noticed_signal",
        "worker_failed",
        "system",
        "noticed that process rank",
        r"(?:mpirun|mpiexec|prterun|prte) noticed that process rank (?P<rank_stated>\d+) with PID (?:0|(?P<pid>\d+)) on node "
        r"(?P<host_fqdn>\S+?) exited on signal (?P<signum>\d+)",
        "error",
        SRC.format("3.x – 5.x"),
        "mpiexec noticed that process rank 0 with PID 19474 on node node-a exited on signal 11 (Segmentation fault).",
    ),
    Rule(
        "mpi_backtrace_signal",
        "process_killed",
        "system",
        "] Signal: ",
        r"^\[(?P<host_fqdn>[^:\]\s]+):(?P<pid>\d+)\] Signal: [^(]*\((?P<signum>\d+)\)",
        "fatal",
        SRC.format("1.x – 5.x"),
        "[node-a:19474] Signal: Segmentation fault (11)",
    ),
]


def signal_fields(df: pl.DataFrame) -> pl.DataFrame:
    """Exit code (negative signal number, as torchrun reports it) of the signal reports."""
    if "signum" not in df.columns:
        return df
    sig = pl.col("signum").cast(pl.Int32, strict=False)
    name = sig.replace_strict(_NAMES, default=None, return_dtype=pl.String)
    return df.with_columns(
        pl.when(sig.is_not_null() & pl.col("exit_code").is_null())
        .then(-sig)
        .otherwise(pl.col("exit_code"))
        .alias("exit_code"),
        pl.when(sig.is_not_null())
        .then(pl.coalesce(pl.col("signal"), name))
        .otherwise(pl.col("signal"))
        .alias("signal"),
    ).drop("signum")
