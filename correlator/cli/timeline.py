"""``rankscope timeline DIR -o timeline.parquet``: the normalized event table, written.

Choosing the format and streaming, partitioning and the atomic write are
:meth:`correlator.job.Job.write_table`; this module states what was written."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from correlator.cli.common import DirArg, QuietOpt, RedactOpt, TzOpt, err, reading, summary
from correlator.engines import Engine


class TableFormat(str, Enum):
    parquet = "parquet"
    jsonl = "jsonl"
    csv = "csv"
    perfetto = "perfetto"


class PartitionBy(str, Enum):
    host = "host"
    rank = "rank"


def timeline(
    directory: DirArg,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Output file: .parquet (the default), .jsonl (.ndjson) or .csv; a name with no extension is "
            "parquet; another extension (.json included) needs --format.",
        ),
    ] = Path("timeline.parquet"),
    format: Annotated[
        TableFormat | None,
        typer.Option(
            "--format",
            "-f",
            help="parquet (DuckDB, polars, Spark), jsonl, csv, or "
            "perfetto (Chrome trace-event JSON for ui.perfetto.dev, e.g. -o trace.json). Default: "
            "from the -o extension; none: parquet.",
        ),
    ] = None,
    partition_by: Annotated[
        PartitionBy | None,
        typer.Option(
            "--partition-by",
            help="Write a hive-partitioned parquet dataset under -o (a folder): host=…/ or rank=…/.",
        ),
    ] = None,
    streaming: Annotated[
        bool | None,
        typer.Option(
            "--streaming/--no-streaming",
            help="Ingest and write batch by batch (~32 MiB of logs each, on all cores) in bounded memory. "
            "Default: on for parquet output of more than 64 MiB of logs (not with --redact, nor when the "
            "files make one batch, nor when a node split into batches would re-read a launcher log larger "
            "than a batch).",
        ),
    ] = None,
    engine: Annotated[
        Engine,
        typer.Option(
            "--engine",
            help="local: batches on this machine's cores. ray: each batch a Ray task that writes its part "
            "into a parquet dataset under -o (a folder), for logs on a file system every node reads; needs "
            "the ray extra (pip install 'rankscope[ray]'); RAY_ADDRESS names a running cluster.",
        ),
    ] = Engine.local,
    tz: TzOpt = None,
    quiet: QuietOpt = False,
    redact: RedactOpt = False,
) -> None:
    """Write the normalized event table (one row per log line or multi-line record, every rank)."""
    with reading(directory, quiet, check=False, tz=tz, redact=redact) as job:
        w = job.write_table(
            output,
            format=format.value if format else None,
            partition_by=partition_by.value if partition_by else None,
            streaming=streaming,
            engine=engine.value,
        )
    if quiet:
        return
    if w.summary is not None:
        summary(w.summary)
    where = escape(str(output))
    if w.batches is not None:
        err.print(
            f"wrote {w.rows} events to {where} in {w.batches} {'batch' if w.batches == 1 else 'batches'} "
            f"(peak memory {w.peak_rss_mib} MiB)",
            highlight=False,
        )
    elif w.partitions is not None:
        err.print(f"wrote {w.rows} events to {w.partitions} partitions under {where}", highlight=False)
    else:
        err.print(f"wrote {w.rows} events to {where}", highlight=False)
