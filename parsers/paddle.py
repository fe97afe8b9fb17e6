"""PaddlePaddle's launchers and workers (docs/log-formats.md §7.5): which trainer the launcher reports dead,
the console's copy of worker logs, and the worker's own fatal-signal report.

Two launchers, both write one ``log/workerlog.N`` per local trainer N (their stdout+stderr; ranks from the file
name: :func:`correlator.discover.ranks_from_siblings`) and stream local trainer 0's log to their own console:

- ``python -m paddle.distributed.launch`` (Paddle ≥ 2.3, ``launch/controllers``): lines
  ``LAUNCH INFO 2026-12-04 23:16:17,715 Pod failed`` (``'%(name)s %(levelname)s %(asctime)s %(message)s'``,
  launch/context/__init__.py); on a failure ``Container failed !!!`` then the failed container
  (``Container.__str__``, launch/job/container.py: ``Container rank {rank} status {status} cmd {cmd} code {code}
  log {file}``; the rank is the container's index in the node's pod, i.e. its LOCAL rank) and, after
  ``---- ERROR LOG DETAIL ----``, the last 3000 bytes of that container's log (``Container.tail``);
- ``python -m paddle.distributed.fleet.launch`` / ``fleetrun`` / ``paddle.distributed.launch --legacy`` (Paddle
  1.8 – 3.3, fleet/launch_utils.py ``watch_local_trainers``): ``ABORT!!! Out of all {nranks} trainers, the
  trainer process with rank={error_rank} was aborted. Please check its log.`` — ``error_rank`` is the list of
  GLOBAL trainer ranks (``TrainerProc.rank``) whose process exited non-zero. Each line is written twice, by two
  handlers: ``'%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s'`` (fleet/launch_utils.py
  ``get_logger``) and ``'[%(asctime)-15s] [%(levelname)8s] %(filename)s:%(lineno)s - %(message)s'``
  (distributed/utils/log_utils.py).

Workers: Paddle's signal handler prints ``FatalError: `Termination signal` is detected by the operating
system.`` and ``[SignalInfo: *** SIGTERM (@0x4e97) received by PID 20308 (TID …) from PID 20119 ***]`` when the
launcher tears a trainer down (a teardown, not a fault), framed by ``C++ Traceback`` / ``Error Message Summary``
banners of dashes that are not torchelastic's failure-summary borders. Paddle's bundled gloo names the peer by
its rank: ``[/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:584] TIMEOUT self_rank = 0 pair_rank = 1
peer_str = [127.0.0.1]:17287`` (the connection to trainer 1 broke: it died).

All lines above are real: fixtures/cases/cap-paddle-* (Paddle 3.3.1 CPU wheel, gloo).
"""

from __future__ import annotations

import polars as pl

from parsers.horovod import explode_list
from parsers.rules import Prefix, Rule, ascii_classes

SRC = "PaddlePaddle {} (Paddle 3.3.1: python/paddle/distributed/{})"

#: The new launcher's logger (name ``LAUNCH``).
LAUNCH_PREFIX = Prefix(
    "paddle_launch",
    r"^LAUNCH (?P<sev_word>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<pyts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (?P<rest>.*)$",
    layer="elastic",
    source=SRC.format("launcher, 2.3 – 3.3", "launch/context/__init__.py"),
    example="LAUNCH INFO 2026-12-04 23:16:17,715 Pod failed",
)
#: The legacy launcher's two handlers; only its own files (launch.py, launch_utils.py) — the same formats serve
#: fleet's loggers inside trainers, whose lines are the trainer's, not the launcher's.
FLEET_PREFIX = Prefix(
    "paddle_fleet",
    r"^(?P<sev_word>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<pyts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "
    r"(?P<src>launch(?:_utils)?\.py):(?P<srcline>\d+)\] (?P<rest>.*)$",
    layer="elastic",
    source=SRC.format("legacy launcher, 1.8 – 3.3", "fleet/launch_utils.py get_logger"),
    example="ERROR 2026-12-04 23:14:55,115 launch_utils.py:648] ABORT!!! Out of all 4 trainers, the trainer process "
    "with rank=[3] was aborted. Please check its log.",
)
FLEET_BRACKET_PREFIX = Prefix(
    "paddle_fleet_bracket",
    r"^\[(?P<pyts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \[ *(?P<sev_word>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] "
    r"(?P<src>launch(?:_utils)?\.py):(?P<srcline>\d+) - (?P<rest>.*)$",
    layer="elastic",
    source=SRC.format("legacy launcher, 2.0 – 3.3", "utils/log_utils.py get_logger"),
    example="[2026-12-04 23:14:55,115] [   ERROR] launch_utils.py:648 - ABORT!!! Out of all 4 trainers, the trainer "
    "process with rank=[3] was aborted. Please check its log.",
)
PREFIXES = [LAUNCH_PREFIX, FLEET_PREFIX, FLEET_BRACKET_PREFIX]

RULES: list[Rule] = [
    Rule(
        "paddle_abort",
        "worker_failed",
        "elastic",
        "ABORT!!! Out of all",
        r"ABORT!!! Out of all (?P<world_size>\d+) trainers, the trainer process with rank=\[(?P<paddle_ranks>\d+(?:,\s*"
        r"\d+)*)\] was aborted",
        "error",
        SRC.format("legacy launcher, 1.8 – 3.3", "fleet/launch_utils.py watch_local_trainers"),
        "ERROR 2026-12-04 23:14:55,115 launch_utils.py:648] ABORT!!! Out of all 4 trainers, the trainer process with "
        "rank=[3] was aborted. Please check its log.",
    ),
    Rule(
        "paddle_container_failed",
        "worker_failed",
        "elastic",
        "status failed cmd",
        r"^Container rank (?P<local_rank_stated>\d+) status failed cmd .* code (?P<exit_code>-?\d+) log ",
        "error",
        SRC.format("launcher, 2.3 – 3.3", "launch/job/container.py Container.__str__"),
        "Container rank 1 status failed cmd ['/opt/venv/bin/python', '-u', 'paddle_train.py', '--fault', 'exception', "
        "'--fault-rank', '1', '--fault-step', '3'] code 1 log <cases>/logs/log/workerlog.1",
    ),
    Rule(
        "paddle_gloo_pair",
        "gloo_connection_closed",
        "c10d",
        "pair_rank = ",
        r"tcp/pair\.cc:\d+\] TIMEOUT self_rank = (?P<rank_stated>\d+) pair_rank = (?P<peer_rank>\d+) "
        r"peer_str = \[(?P<peer_addr>[^\]]+)\]",
        "error",
        "gloo bundled with PaddlePaddle 3.3.1 (third_party/gloo transport/tcp/pair.cc:584)",
        "RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:584] TIMEOUT self_rank = 0 pair_rank = 1 "
        "peer_str = [127.0.0.1]:17287",
    ),
    Rule(
        "paddle_gloo_timeout",
        "gloo_timeout",
        "c10d",
        "unbound_buffer.cc",
        r"unbound_buffer\.cc:\d+\] TIMEOUT self_rank = \S+ pair_rank = \S+",
        "error",
        "gloo bundled with PaddlePaddle 3.3.1 (third_party/gloo transport/tcp/unbound_buffer.cc:80, :133)",
        "RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:80] TIMEOUT self_rank = none "
        "pair_rank = 2 peer_str = none",
    ),
    Rule(
        "paddle_flags_banner",
        "log",
        "app",
        "Modified FLAGS detected",
        None,
        "info",
        SRC.format("init_parallel_env, 3.x", "parallel.py"),
        "======================= Modified FLAGS detected =======================",
    ),
    # torchelastic's failure-summary border is at most 60 characters wide (format_msg: min(width, 60)); Paddle's
    # banner closes with 71.
    Rule(
        "paddle_flags_close",
        "log",
        "app",
        "=" * 61,
        r"^={61,}\s*$",
        "info",
        SRC.format("init_parallel_env, 3.x", "parallel.py"),
        "=" * 71,
    ),
]

RECORD_RULES: list[Rule] = [
    Rule(
        "paddle_termination",
        "worker_signalled",
        "python",
        "`Termination signal` is detected",
        r"(?s)FatalError: `Termination signal` is detected.*?SignalInfo: \*\*\* (?P<signal>SIG\w+) \(@0x[0-9a-f]+\) "
        r"received by PID (?P<pid>\d+)",
        "warning",
        "PaddlePaddle signal handler (paddle/fluid/platform/init.cc SignalHandle, 2.0 – 3.3)",
        "FatalError: `Termination signal` is detected by the operating system.\n  [TimeInfo: *** Aborted at "
        '1796426178 (unix time) try "date -d @1796426178" if you are using GNU date ***]\n  [SignalInfo: *** SIGTERM '
        "(@0x4e97) received by PID 20308 (TID 0x7f60b6e02b80) from PID 20119 ***]",
    ),
]

#: The dashes that frame Paddle's C++ error report (``print_error_message``); told from torchelastic's
#: section lines by their neighbours (:func:`banner_rows`).
BANNER = Rule(
    "paddle_error_banner",
    "log",
    "python",
    "---",
    r"^-{10,}\s*$",
    "info",
    "PaddlePaddle enforce.h / init.cc error summary (2.0 – 3.3)",
    "--------------------------------------",
)
_BANNER_HEADS = [
    "C++",
    "C++ Traceback (most recent call last):",
    "Error Message Summary:",
    "PaddleCheckError",
]


def banner_rows(df: pl.DataFrame) -> pl.Series:
    """Rows that are a dashed line within two rows of a header of Paddle's error report (``C++ Traceback (most
    recent call last):``, ``Error Message Summary:``) in the same file."""
    body = pl.col("message").fill_null("").str.strip_chars()
    if not df.select(body.str.contains(r"^-{10,}$").any()).item():  # no dashed line: no window over the file
        return pl.repeat(False, df.height, dtype=pl.Boolean, eager=True).alias("b")
    head = body.is_in(_BANNER_HEADS)
    near = pl.any_horizontal([head.shift(k).over("path").fill_null(False) for k in (-2, -1, 1, 2)])
    return df.select((body.str.contains(r"^-{10,}$") & near).alias("b"))["b"]


def abort_rows(df: pl.DataFrame) -> pl.DataFrame:
    """One ``worker_failed`` row per rank of a legacy ``ABORT!!! … rank=[a, b]`` line (``rank_stated``; extra rows
    of one line have ``line_count`` 0, like split tee lines); the global rank of a ``Container rank N`` line where
    the console states its node's offset (:func:`console_streams`)."""
    if "paddle_offset" in df.columns:
        # ``Container rank N`` is a local rank: global where the console states its node's offset
        container = (pl.col("kind") == "worker_failed") & pl.col("local_rank_stated").is_not_null()
        df = df.with_columns(
            pl.when(container & pl.col("rank_stated").is_null())
            .then(pl.col("local_rank_stated") + pl.col("paddle_offset"))
            .otherwise(pl.col("rank_stated"))
            .cast(pl.Int32)
            .alias("rank_stated")
        ).drop("paddle_offset")
    if "paddle_ranks" not in df.columns:
        return df
    hit = pl.col("paddle_ranks").is_not_null() & (pl.col("kind") == "worker_failed")
    if not df.select(hit.any()).item():
        return df.drop("paddle_ranks")
    out = explode_list(df, hit, "paddle_ranks", "rank_stated")
    return out.drop("paddle_ranks")


_DETAIL = r"^-+ ERROR LOG DETAIL -+$"
_FAILED = ascii_classes(r"^Container rank (\d+) status failed cmd ")


_TRAINER_ID = ascii_classes(r"^\s*\|\s+PADDLE_TRAINER_ID\s+(\d+)\s+\|\s*$")
_NNODES = ascii_classes(r"^nnodes: (\d+)\s*$")


def console_streams(df: pl.DataFrame) -> pl.DataFrame:
    """The launcher console's copies of worker logs, as the worker's stream (input: the prefix-stripped lines
    frame sorted by ``path``, ``line``).

    Both launchers copy local trainer 0's log into their console as it is written (``pod.logs()`` /
    ``pull_worker_log``), and the new one, on a failure, the tail of the failed container's log after
    ``ERROR LOG DETAIL``. In a file that holds Paddle launcher lines, the lines without the launcher's prefix get
    ``tee_local_rank`` 0 (a tee of local rank 0, as torchrun's ``[default0]:``) up to the ``ERROR LOG DETAIL`` line,
    and the failed container's local rank after it (``Container rank N status failed`` just before).

    The console also says where its node's ranks start (``paddle_offset``): the new launcher prints its
    configuration (``nnodes: 1``: one node, offset 0), the legacy one the first trainer's environment
    (``|  PADDLE_TRAINER_ID  0  |``: the global rank of local trainer 0). With it, the copied lines get their
    global rank (``c10_rank``, as spawn's re-printed child traceback) and the launcher's
    ``Container rank N`` its global rank (:func:`abort_rows`)."""
    marks = [
        c for c in ("pfx_paddle_launch", "pfx_paddle_fleet", "pfx_paddle_fleet_bracket") if c in df.columns
    ]
    if not marks:
        return df
    launcher = pl.any_horizontal([pl.col(c).fill_null(False) for c in marks])
    df = df.with_columns(launcher.alias("__pd_l"))
    files = df.filter(pl.col("__pd_l"))["path"].unique()
    if files.len() == 0:
        return df.drop("__pd_l")
    body = pl.col("body")
    in_file = pl.col("path").is_in(files.implode())
    detail = in_file & body.str.contains(_DETAIL)
    failed = body.str.extract(_FAILED, 1).cast(pl.Int32, strict=False)
    nnodes = pl.when(pl.col("__pd_l")).then(body.str.extract(_NNODES, 1).cast(pl.Int32, strict=False))
    first_id = body.str.extract(_TRAINER_ID, 1).cast(pl.Int32, strict=False)
    offset = pl.coalesce(
        first_id.drop_nulls().first().over("path"),
        pl.when(nnodes.drop_nulls().first().over("path") == 1).then(pl.lit(0, dtype=pl.Int32)),
    )
    df = df.with_columns(failed.alias("__pd_c"), pl.when(in_file).then(offset).alias("paddle_offset"))
    df = df.with_columns(pl.col("__pd_c").forward_fill().over("path").alias("__pd_f"))
    # local trainer 0 until the first detail header, then the container the launcher named before each header
    local = (
        pl.when(detail)
        .then(pl.col("__pd_f").fill_null(-1))
        .otherwise(None)
        .forward_fill()
        .over("path")
        .fill_null(0)
    )
    worker = (
        in_file
        & ~pl.col("__pd_l")
        & ~detail
        & pl.col("__pd_c").is_null()
        & (body.str.len_chars() > 0)
        & pl.col("tee_local_rank").is_null()
        & pl.col("c10_rank").is_null()
        & (local >= 0)
    )
    return df.with_columns(
        pl.when(worker)
        .then(local)
        .otherwise(pl.col("tee_local_rank"))
        .cast(pl.Int32)
        .alias("tee_local_rank"),
        pl.when(worker)
        .then(local + pl.col("paddle_offset"))
        .otherwise(pl.col("c10_rank"))
        .cast(pl.Int32)
        .alias("c10_rank"),
    ).drop("__pd_l", "__pd_c", "__pd_f")
