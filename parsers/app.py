"""The training script's own logging: Python ``logging`` layouts and training-progress lines.

Layouts (docs/log-formats.md §7, §8): default asctime ``2026-11-29 23:08:29,847 INFO …`` (any app using
``logging.basicConfig``), Hydra/FunASR ``[2024-08-12 23:04:07,257][root][INFO] - …``, DeepSpeed
``[2024-11-29 22:41:07,512] [INFO] [launch.py:256:main] …``, HF/Accelerate ``11/29/2024 22:58:55 - INFO - …``.
Progress lines give the training ``step`` (``step=5``, ``total step: 32900``, Megatron ``iteration N/``) and,
when the line says so, the rank (``rank=2``, ``rank: 2``, ``[RANK 2]``).
"""

from __future__ import annotations

import polars as pl

from parsers.rules import Prefix, Rule, ascii_classes

ASCTIME = Prefix(
    "asctime",
    r"^(?P<pyts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?(?:Z|[+-]\d\d:?\d\d)?) (?:- )?(?:\[?(?P<sev_word>DEBUG|"
    r"INFO|WARNING|WARN|ERROR|CRITICAL)\]?(?: -)? )?(?P<rest>.*)$",
    layer="app",
    source="Python logging default asctime (CPython 3.x); with a zone (Z, +hh:mm, +hhmm) as datetime.isoformat(), "
    "structlog's TimeStamper(fmt='iso') and a datefmt ending in %z write it",
    example="2026-11-29 23:08:34,362 INFO [trainer] rank=1 step=0 loss=1.7994 avg_loss=1.1560 lr=0.05",
)
HYDRA = Prefix(
    "hydra",
    r"^\[(?P<pyts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[(?P<logger>[^\]]+)\]\[(?P<sev_word>\w+)\] - (?P<rest>.*)$",
    layer="app",
    source="Hydra job logging (FunASR, fairseq2)",
    example="[2024-08-12 23:04:07,257][root][INFO] - train, rank: 2, epoch: 0/500, total step: 32900",
)
DEEPSPEED = Prefix(
    "deepspeed",
    r"^\[(?P<pyts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \[(?P<sev_word>\w+)\] \[(?P<logger>[^\]]+)\] (?P<rest>.*)$",
    layer="app",
    source="DeepSpeed utils/logging.py (2020 – 2025)",
    example="[2024-11-29 22:41:07,512] [INFO] [launch.py:256:main] process 52011 spawned with command: ['python']",
)
HF = Prefix(
    "hf",
    r"^(?P<usts>\d\d/\d\d/\d{4} \d\d:\d\d:\d\d) - (?P<sev_word>\w+) - (?P<logger>[\w.]+) - (?P<rest>.*)$",
    layer="app",
    source="HF transformers/accelerate example scripts",
    example="11/29/2024 22:58:55 - INFO - __main__ - ***** Running training *****",
)
BRACKET_ASCTIME = Prefix(
    "bracket_asctime",
    r"^\[(?P<pyts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\] ?(?:\[?(?P<sev_word>DEBUG|INFO|"
    r"WARNING|WARN|ERROR|CRITICAL)\]?:? ?)?(?P<rest>.*)$",
    layer="app",
    source="Python logging with format '[%(asctime)s] %(levelname)s …' / '[%(asctime)s][%(levelname)s] …'",
    example="[2024-11-29 22:48:40,101] INFO step 120 loss 2.31",
)
PREFIXES = [HYDRA, DEEPSPEED, HF, BRACKET_ASCTIME, ASCTIME]

STEP_RE = ascii_classes(r"(?:\bstep[=: ]\s*|\biteration\s+|\bglobal_step[=: ]\s*)(\d+)")
RANK_RE = ascii_classes(r"(?:\brank[=:]\s*|\[RANK (?:\s*))(\d+)\b")
WORLD_RE = ascii_classes(r"\bworld[_ ]size[=: ]\s*(\d+)")
#: An unfinished tqdm progress bar: ``Map (num_proc=14):  70%|█████▌   | 7/10 [6:40:12<2:51:01, 1.2 examples/s]``
#: (0-99 %; a finished one is an ordinary line). ``elapsed_ms`` is the elapsed time it shows (``[H:]MM:SS<``).
BAR = Rule(
    "progress_bar",
    "progress_bar",
    "app",
    "%|",
    r"(?:^|[^\d])(?P<bar_pct>\d{1,2})%\|[^|]*\|[^\[]*\[(?:(?P<bar_h>\d+):)?(?P<bar_m>\d\d?):(?P<bar_s>\d\d)<",
    "info",
    "tqdm 4.x format_meter ('{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]'), as glued into "
    "real logs: LlamaFactory#2424, axolotl#2684, yolov5#4400",
    "Running tokenizer on dataset:   9%|███▊      | 280000/2969526 [29:55<4:48:08, 155.57 examples/s]",
)
RULES: list[Rule] = [BAR]


def bar_fields(df: pl.DataFrame) -> pl.DataFrame:
    """``elapsed_ms`` of progress bars from their ``[H:]MM:SS`` elapsed field."""
    if "bar_m" not in df.columns:
        return df
    bar = pl.col("kind") == "progress_bar"
    el = (
        pl.col("bar_h").cast(pl.Int64, strict=False).fill_null(0) * 3600
        + pl.col("bar_m").cast(pl.Int64, strict=False) * 60
        + pl.col("bar_s").cast(pl.Int64, strict=False)
    ) * 1000
    return df.with_columns(
        pl.when(bar).then(el).otherwise(pl.col("elapsed_ms")).alias("elapsed_ms"),
    )


def progress_fields(df: pl.DataFrame) -> pl.DataFrame:
    """Set ``step`` (and ``rank_stated``/``world_size`` where the line names them) on app lines.

    Rows that are still unclassified and carry a step become ``step_progress``; other app lines ``log``.
    """
    app = (pl.col("layer") == "app") & pl.col("kind").is_null()
    plain = (
        pl.col("layer").is_null() & pl.col("kind").is_null()
    )  # an unprefixed line of the script's own output
    # Each regex reads only the rows whose value it gives (the others are null: no scan).
    msg = pl.when(app).then(pl.col("message"))
    step = msg.str.extract(STEP_RE, 1).cast(pl.Int64, strict=False)
    rank = msg.str.extract(RANK_RE, 1).cast(pl.Int32, strict=False)
    world = pl.when(app | plain).then(pl.col("message")).str.extract(WORLD_RE, 1).cast(pl.Int32, strict=False)
    return df.with_columns(
        pl.when(app).then(pl.coalesce(pl.col("step"), step)).otherwise(pl.col("step")).alias("step"),
        pl.when(app)
        .then(pl.coalesce(pl.col("rank_stated"), rank))
        .otherwise(pl.col("rank_stated"))
        .alias("rank_stated"),
        pl.when(app | plain)
        .then(pl.coalesce(pl.col("world_size"), world))
        .otherwise(pl.col("world_size"))
        .alias("world_size"),
    ).with_columns(
        pl.when(app & pl.col("step").is_not_null())
        .then(pl.lit("step_progress"))
        .when(app)
        .then(pl.lit("log"))
        .otherwise(pl.col("kind"))
        .alias("kind")
    )
