"""``rankscope diagnose DIR``: the job's one verdict as text, JSON or markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from correlator.cli.common import (
    DiagFormat,
    DirArg,
    FrOpt,
    QuietOpt,
    RedactOpt,
    StacksOpt,
    StreamingOpt,
    TzOpt,
    open_job,
    out,
)

#: ``diagnose --exit-code``: the logs show a failure (0, 1, 2 and 3 keep their meanings; see
#: :func:`correlator.cli.app.main`).
FAILURE_FOUND = 4


def diagnose(
    directory: DirArg,
    format: Annotated[
        DiagFormat,
        typer.Option("--format", "-f", help="text (for people), json (for scripts), markdown (for tickets)."),
    ] = DiagFormat.text,
    attempt: Annotated[
        int | None,
        typer.Option(
            "--attempt",
            help="Show this torchelastic attempt's verdict (counted from 0) instead of the first failed one.",
        ),
    ] = None,
    signatures: Annotated[
        list[Path] | None,
        typer.Option(
            "--signatures", help="Extra signature file(s) (TOML) to match besides the built-in library."
        ),
    ] = None,
    streaming: StreamingOpt = None,
    tz: TzOpt = None,
    quiet: QuietOpt = False,
    redact: RedactOpt = False,
    fr: FrOpt = None,
    stacks: StacksOpt = None,
    exit_code: Annotated[
        bool,
        typer.Option(
            "--exit-code",
            help="Exit 4 when the logs show a failure (any failure kind but none), 0 when they show none: "
            "for scripts and CI. Without it diagnose exits 0 whatever it finds.",
        ),
    ] = False,
) -> None:
    """Name the initiating rank(s), the failure kind, the collateral ranks and the evidence lines."""
    from correlator.report import render_markdown, render_text

    job = open_job(
        directory,
        quiet,
        fr=fr,
        stacks=stacks,
        streaming=streaming,
        attempt=attempt,
        redact=redact,
        tz=tz,
        signatures=signatures or [],
    )
    d = job.diagnose()
    if format == DiagFormat.json:
        print(job.to_json())
    elif format == DiagFormat.markdown:
        print(render_markdown(d), end="")
    else:
        render_text(d, out)
    if exit_code and d.failure_kind != "none":
        raise typer.Exit(FAILURE_FOUND)
