"""NCCL Inspector records (issue #33 item 3): the per-operation JSON of NCCL's profiler plugin.

RECONSTRUCTED from NCCL's source (no GPU job ran here): NVIDIA/nccl ``plugins/profiler/inspector`` at commit
5067397 (NCCL 2.30.7; the plugin writes ``inspector_output_format_version`` ``v4.0``). With
``NCCL_PROFILER_PLUGIN=…/libnccl-profiler-inspector.so NCCL_INSPECTOR_ENABLE=1`` every process writes
``<NCCL_INSPECTOR_DUMP_DIR>/<hostname>-pid<pid>.log`` (``inspector.cc``: ``"%s/%s-pid%d.log"``; the default
folder is ``nccl-inspector-<SLURM_JOB_ID>`` or ``nccl-inspector-unknown-jobid``), one compact JSON object per
line and completed operation (``json.cc`` writes no spaces; ``inspector_json.cc``
``inspectorCommInfoDumpColl`` / ``inspectorCommInfoDumpP2p``)::

    {"header":{"id":"0x7f8c496ae9f661","comm_name":"unknown","rank":2,"n_ranks":8,"nnodes":1},
     "metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface",
                 "dump_timestamp_us":1748030377748202,"hostname":"example-hostname","pid":1639453},
     "coll_perf":{"coll":"AllReduce","coll_sn":1407,"coll_msg_size_bytes":17179869184,"coll_exec_time_us":61974,
                  "coll_timing_source":"kernel_gpu","coll_algobw_gbs":277.210914,"coll_busbw_gbs":485.119099}}

(printed on one line; ``p2p_perf`` records have ``p2p``, ``p2p_sn``, ``p2p_peer``, ``p2p_exec_time_us``, …;
``NCCL_INSPECTOR_DUMP_VERBOSE=1`` adds ``event_trace_sn`` / ``event_trace_ts``).

Rows: kind ``inspector_op`` (layer ``nccl``), ``pg`` = the communicator id (hex, no ``0x``),
``ranks_named`` = the rank in that communicator (``header.rank``), ``world_size`` = its size
(``n_ranks``), ``pid`` = the process's, ``op`` = c10d's spelling of the operation (``ALLREDUCE``), ``seq`` =
``coll_sn`` / ``p2p_sn``, ``elapsed_ms`` = the execution time (whole ms), the stamp = ``dump_timestamp_us``
(when the record was written, not when the operation ran). The job rank is not set: the record states the
communicator rank; :mod:`correlator.rasview` maps it (by pid, or by a communicator that spans the job).
"""

from __future__ import annotations

import polars as pl

from parsers.nccl import NCCL_OPS
from parsers.rules import Rule

KIND = "inspector_op"

RULES = [
    Rule(
        "inspector_op",
        KIND,
        "nccl",
        '{"header":{"id":"',
        r'^\{"header":\{"id":"0x[0-9a-f]+"',
        "info",
        "NCCL Inspector plugin v4.0 (NVIDIA/nccl plugins/profiler/inspector/inspector_json.cc, 5067397), reconstructed",
        '{"header":{"id":"0x7f8c496ae9f661","comm_name":"unknown","rank":2,"n_ranks":8,"nnodes":1},"metadata":'
        '{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface",'
        '"dump_timestamp_us":1748030377748202,"hostname":"example-hostname","pid":1639453},"coll_perf":{"coll":'
        '"AllReduce","coll_sn":1407,"coll_msg_size_bytes":17179869184,"coll_exec_time_us":61974,'
        '"coll_timing_source":"kernel_gpu","coll_algobw_gbs":277.210914,"coll_busbw_gbs":485.119099}}',
    )
]

#: ncclFuncToString names -> c10d's op names
OPS = NCCL_OPS


def _j(path: str) -> pl.Expr:
    return pl.col("body").str.json_path_match(path)


def exec_us() -> pl.Expr:
    """The record's execution time in microseconds (``coll_exec_time_us`` / ``p2p_exec_time_us``), from ``raw``."""
    raw = pl.col("raw").str.json_path_match
    return pl.coalesce(raw("$.coll_perf.coll_exec_time_us"), raw("$.p2p_perf.p2p_exec_time_us")).cast(
        pl.Int64, strict=False
    )


def fields(df: pl.DataFrame) -> pl.DataFrame:
    """Fill the Inspector rows' columns from their JSON (vectorised ``json_path_match``, only on those rows)."""
    if "kind" not in df.columns:
        return df
    mask = (pl.col("kind") == KIND).fill_null(False)
    if not df.select(mask.any()).item():
        return df
    rows = df.with_row_index("__i").filter(mask)
    op = pl.coalesce(_j("$.coll_perf.coll"), _j("$.p2p_perf.p2p"))
    us = pl.coalesce(_j("$.coll_perf.coll_exec_time_us"), _j("$.p2p_perf.p2p_exec_time_us")).cast(
        pl.Int64, strict=False
    )
    got = rows.select(
        "__i",
        _j("$.header.id").str.strip_prefix("0x").alias("pg"),
        _j("$.header.rank").alias("ranks_named"),
        _j("$.header.n_ranks").cast(pl.Int32, strict=False).alias("world_size"),
        _j("$.metadata.pid").cast(pl.Int64, strict=False).alias("pid"),
        op.replace(OPS).alias("op"),
        pl.coalesce(_j("$.coll_perf.coll_sn"), _j("$.p2p_perf.p2p_sn"))
        .cast(pl.Int64, strict=False)
        .alias("seq"),
        (us // 1000).alias("elapsed_ms"),
        (_j("$.metadata.dump_timestamp_us").cast(pl.Int64, strict=False) // 1_000_000).alias("epoch_s"),
        pl.format(
            "NCCL Inspector: {} sn {} of comm {} (rank {}/{}), {} us",
            op,
            pl.coalesce(_j("$.coll_perf.coll_sn"), _j("$.p2p_perf.p2p_sn")),
            _j("$.header.id"),
            _j("$.header.rank"),
            _j("$.header.n_ranks"),
            us,
        ).alias("message"),
    )
    at = got["__i"]
    out = df
    for c in ("pg", "ranks_named", "world_size", "pid", "op", "seq", "elapsed_ms", "epoch_s", "message"):
        s = got[c]
        base = out[c] if c in out.columns else pl.Series(c, [None] * out.height, dtype=s.dtype)
        out = out.with_columns(base.cast(s.dtype).scatter(at, s).alias(c))
    return out
