"""Parsers: turn physical log lines into classified events, one module per producer of lines.

- :mod:`parsers.transport` — kubectl, mpirun, srun, pdsh and torchrun ``--tee`` prefixes (demultiplexing);
- :mod:`parsers.nccl` — NCCL_DEBUG output;
- :mod:`parsers.c10d` — PyTorch C++ logs (c10/glog), ProcessGroupNCCL/Gloo, DETAIL fingerprints, DDP, TCPStore;
- :mod:`parsers.elastic` — torchrun / torchelastic agent lines, ChildFailedError summaries, error.json;
- :mod:`parsers.deepspeed` — the DeepSpeed launcher (rank map, spawned pids, return codes);
- :mod:`parsers.horovod` — Horovod's stall reports (ready / missing ranks);
- :mod:`parsers.mpi` — Open MPI's own reports (the first rank to fail, signals);
- :mod:`parsers.spawn` — ``torch.multiprocessing.spawn``'s reports of a dead worker;
- :mod:`parsers.python` — tracebacks (grouped into one record) and exceptions;
- :mod:`parsers.app` — the training script's own logging and progress lines;
- :mod:`parsers.lightning` — PyTorch Lightning's ``[rank: N]`` prefix, child-process observer and init lines;
- :mod:`parsers.system` — Slurm, kernel OOM killer, Xid, shell job reports;
- :mod:`parsers.timestamps` — timestamp parts to UTC ``ts``;
- :mod:`parsers.rules` — the vectorized engine they all use.

:func:`parse_lines` runs them in order over a frame of physical lines.
"""

from __future__ import annotations

import polars as pl

from parsers import app, c10d, deepspeed, elastic, horovod, lightning, mpi, nccl, python, spawn, system, transport
from parsers.rules import apply_rules, ensure_columns, strip_prefix

#: Columns that identify one stream inside a file (a rank's lines inside a combined file).
STREAM_KEYS = ["srun_label", "xport_host", "xport_rank", "tee_local_rank", "hook_rank"]

_SEV = {"F": "fatal", "C": "fatal", "E": "error", "W": "warning", "I": "info", "V": "debug",
        "DEBUG": "debug", "INFO": "info", "WARNING": "warning", "WARN": "warning", "ERROR": "error",
        "CRITICAL": "fatal", "TRACE": "debug", "CALL": "debug"}

_KNOWN_START = (
    r"^(?:\[|[A-Za-z0-9][\w.-]*:\d+:\d+ |[VIWEFC]\d{4}|\d{4}-\d\d-\d\d|Traceback|[A-Za-z_][\w.]*(?:Error|Exception):|"
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):|\s)"
)


def _mark_wraps(df: pl.DataFrame) -> pl.DataFrame:
    """Mark physical lines a terminal hard-wrapped: a line without any prefix that does not itself start like
    a log line and follows either (in a tee'd file) a line ending in a space, or a line as long as the file's
    wrap width (the length most of its long lines share). It joins that line's stream (same tee rank) and,
    later, its record."""
    tee = pl.col("pfx_tee")
    share = tee.cast(pl.Float64).mean().over("path")
    prev_raw = pl.col("raw").shift(1).over("path")
    # A terminal or a paste box of fixed width cuts lines mid-word at that width: the file's long lines share
    # one length, and none is longer (``…WorkNCCL(SeqNum=4, OpTy`` / ``pe=BROADCAST, …`` in huggingface/open-r1#620).
    n = pl.col("raw").str.len_chars()
    width = n.filter((n >= 70) & (n >= n.max() * 0.9)).mode().max().over("path")
    at_width = (((n == width).sum().over("path") >= 3) & (n.max().over("path") <= width + 1)
                & (n.shift(1).over("path") >= width).fill_null(False))
    plain = ~pl.col("body").str.contains(_KNOWN_START) & (pl.col("body").str.len_chars() > 0) & pl.col("xport_rank").is_null()
    wrap = plain & (
        (~tee & (share >= 0.5) & prev_raw.str.ends_with(" ").fill_null(False))
        | (at_width & ~tee)
    )
    df = df.with_columns(wrap.alias("wrap_cont"))
    return df.with_columns(
        pl.when(pl.col("wrap_cont")).then(pl.col("tee_local_rank").shift(1).over("path"))
        .otherwise(pl.col("tee_local_rank")).alias("tee_local_rank"),
        pl.when(pl.col("wrap_cont")).then(pl.col("tee_role").shift(1).over("path"))
        .otherwise(pl.col("tee_role")).alias("tee_role"),
    )


def strip_producers(df: pl.DataFrame) -> pl.DataFrame:
    """Strip producer (L3) and ProcessGroup (L4) prefixes; set ``layer`` and the prefix severity."""
    for pfx in (nccl.PREFIX, c10d.C10_NEW, c10d.C10_OLD, c10d.GLOG, c10d.EXCEPTHOOK, c10d.EXCEPTHOOK,
                elastic.OLD_PYLOG, elastic.TORCH_LOGGING_21, horovod.PREFIX, lightning.RANK_PREFIX, *app.PREFIXES):
        df = strip_prefix(df, pfx)
    # torch._logging lines of the elastic agent share the glog shape; their source path says who wrote them.
    if "src" in df.columns:
        df = df.with_columns(
            pl.when(pl.col("src").str.contains(r"elastic|distributed/run\.py|launcher/api\.py"))
            .then(pl.lit("elastic")).otherwise(pl.col("layer")).alias("layer")
        )
    is_c10d = (df["layer"] == "c10d").fill_null(False)
    df = strip_prefix(df, c10d.PG_PREFIX, mask=is_c10d)
    df = strip_prefix(df, c10d.RANK_PREFIX, mask=is_c10d)
    sev_parts = [pl.col(c) for c in ("sev", "sev_word", "nccl_level") if c in df.columns]
    psev = pl.coalesce(sev_parts).replace_strict(_SEV, default=None, return_dtype=pl.String) if sev_parts else pl.lit(None, dtype=pl.String)
    return df.with_columns(psev.alias("psev"))


def classify(df: pl.DataFrame) -> pl.DataFrame:
    """Run every module's message rules (first match wins) and fill kinds of what is left."""
    df = ensure_columns(df)
    df = df.with_columns(pl.col("body").alias("message"))
    layer = df["layer"].fill_null("")
    df = apply_rules(df, elastic.RECORD_RULES, text="record")
    df = apply_rules(df, system.RULES)
    df = apply_rules(df, nccl.RULES, where=layer == "nccl")
    df = apply_rules(df, python.RULES)
    df = apply_rules(df, spawn.RULES)
    df = apply_rules(df, horovod.RULES)
    df = apply_rules(df, mpi.RULES)
    df = apply_rules(df, c10d.RULES)
    df = apply_rules(df, [python.TERMINATE])
    df = apply_rules(df, lightning.RULES, where=layer.is_in(["", "app"]))
    df = apply_rules(df, elastic.RULES, where=layer.is_in(["elastic", "", "app", "c10d"]))
    df = apply_rules(df, deepspeed.RULES, where=layer.is_in(["elastic", "", "app"]))
    df = apply_rules(df, app.RULES, where=layer.is_in(["", "app"])).pipe(app.bar_fields)
    df = python.exception_fields(df)
    df = elastic.signal_exit_codes(df)
    is_exc = (df["exc_type"].is_not_null() & df["layer"].fill_null("").is_in(["", "python", "elastic"]))
    df = apply_rules(df, [python.CATCH_ALL], where=is_exc)
    # A traceback record with no exception line anywhere (the paste ends inside its frames).
    no_exc = ~df["record"].str.contains(r"\n\s*(?:\[rank\d+\]: )?[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b")
    df = apply_rules(df, [python.CUT_TRACEBACK], where=no_exc & (df["line_count"] > 1)).pipe(python.cut_message)
    if "nccl_level" in df.columns:
        df = apply_rules(df, [nccl.WARN_RULE], where=(df["nccl_level"] == "WARN").fill_null(False))
    df = lightning.rank_fields(df)
    df = app.progress_fields(df)
    df = nccl.normalize_ops(df)
    df = nccl.resolve_comms(df)
    df = elastic.mark_root_cause(df)
    return df.with_columns(
        pl.when(pl.col("kind").is_not_null()).then(pl.col("kind"))
        .when(pl.col("message").str.strip_chars() == "").then(pl.lit("blank"))
        .when(pl.col("layer").is_not_null()).then(pl.lit("log"))
        .otherwise(pl.lit("unparsed")).alias("kind"),
        pl.coalesce(pl.col("psev"), pl.col("severity"), pl.lit("unknown")).alias("severity"),
        pl.coalesce(pl.col("layer"), pl.lit("unknown")).alias("layer"),
    ).pipe(c10d.stated_ranks).pipe(horovod.stall_rows).pipe(mpi.signal_fields)


def parse_lines(df: pl.DataFrame) -> pl.DataFrame:
    """Parse a frame of physical lines (``path, line, line_count, raw, body`` + source columns).

    Returns one row per record with the prefix columns, ``message``, ``record``, ``kind``, ``layer``,
    ``severity`` and rule fields; line counts are preserved (sum of ``line_count`` is unchanged).
    """
    df = transport.strip_transport(df)
    for c, t in (("tee_local_rank", pl.Int32), ("tee_role", pl.String), ("xport_rank", pl.Int32),
                 ("xport_host", pl.String), ("srun_label", pl.String), ("pfx_tee", pl.Boolean), ("layer", pl.String)):
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=t).alias(c))
    df = df.with_columns(pl.col("pfx_tee").fill_null(False))
    df = _mark_wraps(df)
    df = strip_producers(df)
    # Every line of an uncaught traceback carries the excepthook's [rankN]: prefix, so ranks whose tracebacks
    # interleave in one combined stream are separate streams.
    df = df.with_columns(pl.when(pl.col("pfx_excepthook")).then(pl.col("c10_rank")).otherwise(None).alias("hook_rank"))
    df = spawn.spawn_child_rank(df)
    df = python.group_records(df, STREAM_KEYS)
    return classify(df)
