"""``rankscope plot DIR -o timeline.html``: the figures of the job's verdict (:mod:`correlator.plot`)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from correlator.cli.common import UsageError, err, input_path, open_job


class Figure_(str, Enum):
    """Which figure a .png / .svg holds."""

    timeline = "timeline"
    progress = "progress"
    graph = "graph"


#: The extensions ``-o`` may have (:data:`correlator.plot.FORMATS`, not imported here: it loads the engine).
FORMATS = (".html", ".htm", ".png", ".svg")


def plot(
    directory: Annotated[
        Path,
        typer.Argument(
            help="Directory (or single file) of logs from the failed job; also a tar or zip archive "
            "of them, or - for standard input.",
            show_default=False,
            callback=input_path,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="timeline.html (verdict, evidence and every figure), or timeline.png / .svg (one figure).",
        ),
    ] = Path("timeline.html"),
    figure: Annotated[
        Figure_,
        typer.Option(
            "--figure",
            help="Figure for .png/.svg: timeline (per-rank events), "
            "progress ((pg, seq) heatmap) or graph (causal graph).",
        ),
    ] = Figure_.timeline,
    attempt: Annotated[
        int | None,
        typer.Option("--attempt", help="Plot this torchelastic attempt instead of the first failed one."),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option("--tz", help="Time zone (IANA name) of stamps that carry none. Default: UTC."),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar or summary on stderr.")
    ] = False,
    redact: Annotated[
        bool, typer.Option("--redact", help="Pseudonymize host names, IPs, user names and secrets.")
    ] = False,
    every_line: Annotated[
        bool | None,
        typer.Option(
            "--every-line/--reduced",
            help="Draw every line (about 10x the logs in memory), or thin the routine lines as diagnosis "
            "reads them (the last collectives and progress of each rank). Default: every line up to 64 MiB "
            "of logs.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Draw the failure: per-rank timeline, (pg, seq) progress heatmap and causal graph (HTML or PNG)."""
    if output.suffix.lower() not in FORMATS:
        # UsageError: main() prints it as one line and exits 2 (a typer.Exit(2) raised here would leave
        # main() with exit status 0, since it runs the app with standalone_mode=False).
        raise UsageError(f"{output}: unknown plot format; use .html, .png or .svg")
    from correlator.api import plot_every_line
    from correlator.discover import sharing_walks
    from correlator.plot import REDUCED_NOTE, TABLE_NOTE, write_report

    # The figures of the verdict `rankscope diagnose` prints (correlator.job), over every line of small logs;
    # the size decision and the ingest walk the folder once.
    with sharing_walks():
        full = plot_every_line(directory, every_line)
        job = open_job(directory, quiet, attempt=attempt, tz=tz, redact=redact, full_table=full)
        # a timeline table is read as diagnosis reads it, whatever the options
        note = TABLE_NOTE if job.mode in ("parquet", "dataset") else None if full else REDUCED_NOTE
    try:
        rows = job.table() if note is None else job.rows_read()
        write_report(rows, job.diagnose(), output, figure=figure.value, G=job.graph(), note=note)
    except OSError as e:
        raise UsageError(f"{output}: cannot write ({e.strerror or e})")
    if not quiet:
        err.print(f"wrote {output}" + (f" ({note})" if note else ""), highlight=False)
