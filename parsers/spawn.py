"""``torch.multiprocessing.spawn`` (``mp.spawn``): the parent's report of a worker that died.

The parent joins its workers and raises on the first failure (torch/multiprocessing/spawn.py,
``ProcessContext.join``), with the worker's spawn index, which is its LOCAL rank:

- ``process N terminated with signal SIGKILL`` — ``ProcessExitedException`` (torch ≥ 1.8), a bare
  ``Exception`` before;
- ``process N terminated with exit code C`` — the same two classes;
- ``-- Process N terminated with the following error:`` followed by the worker's own traceback —
  ``ProcessRaisedException`` (torch ≥ 1.8), ``Exception`` before. The traceback after that line is the
  worker's: it gets the worker's index as its stated rank (``msg_rank``; mp.spawn runs one node's workers).

Each becomes a ``worker_failed`` row (layer ``elastic``: the launcher's word) with ``local_rank_stated``,
``exit_code`` (negative signal number for a signal, as torchrun reports it) and ``signal``.
"""

from __future__ import annotations

import signal as _signal

import polars as pl

from parsers.rules import Rule

SRC = "torch.multiprocessing.spawn ProcessContext.join, torch 1.0 – 2.13"

RULES: list[Rule] = [
    Rule("spawn_signal", "worker_failed", "elastic", "terminated with signal",
         r"process (?P<local_rank_stated>\d+) terminated with signal (?P<signal>SIG[A-Z0-9]+)", "error", SRC,
         "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL"),
    Rule("spawn_exit", "worker_failed", "elastic", "terminated with exit code",
         r"process (?P<local_rank_stated>\d+) terminated with exit code (?P<exit_code>-?\d+)", "error", SRC,
         "Exception: process 1 terminated with exit code 1"),
    Rule("spawn_raised", "worker_failed", "elastic", "terminated with the following error",
         r"Process (?P<local_rank_stated>\d+) terminated with the following error", "error", SRC,
         "-- Process 1 terminated with the following error:"),
]

_SIGNUM = {s.name: int(s) for s in _signal.Signals}


def worker_fields(df: pl.DataFrame) -> pl.DataFrame:
    """Exit code from the signal name of ``spawn_signal`` rows; the traceback that follows a ``spawn_raised``
    row (the next non-blank row of the file) is that worker's: its ``msg_rank`` is the worker's index."""
    if "rule" not in df.columns or not df.select(pl.col("rule").is_in([r.name for r in RULES]).any()).item():
        return df
    sig = pl.col("signal").replace_strict(_SIGNUM, default=None, return_dtype=pl.Int32)
    df = df.with_columns(
        pl.when((pl.col("rule") == "spawn_signal") & pl.col("exit_code").is_null()).then(-sig)
        .otherwise(pl.col("exit_code")).alias("exit_code"))
    # The worker's traceback is the next non-blank row after the marker, in the same file.
    marks = (df.with_row_index("__o").filter(pl.col("kind") != "blank")
             .with_columns(pl.when(pl.col("rule") == "spawn_raised").then(pl.col("local_rank_stated"))
                           .shift(1).over("path").alias("__owner"))
             .filter(pl.col("__owner").is_not_null()))
    if marks.height == 0:
        return df
    owner = dict(marks.select("__o", "__owner").iter_rows())
    is_tb = pl.col("kind").is_in(["python_exception", "cuda_oom", "cuda_error"]) | pl.col("exc_type").is_not_null()
    own = pl.int_range(pl.len(), dtype=pl.UInt32).replace_strict(owner, default=None, return_dtype=pl.Int32)
    return df.with_columns(pl.when(own.is_not_null() & is_tb).then(own).otherwise(pl.col("msg_rank")).alias("msg_rank"))
