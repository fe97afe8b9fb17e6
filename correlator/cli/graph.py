"""``rankscope graph DIR -o graph.graphml``: the causal graph of the job's verdict, exported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from correlator.cli.common import DirArg, QuietOpt, RedactOpt, TzOpt, UsageError, err, open_job
from correlator.output import atomic_write


def graph(
    directory: DirArg,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="graph.graphml, graph.json (node-link) or graph.dot.")
    ] = Path("graph.graphml"),
    attempt: Annotated[
        int | None, typer.Option("--attempt", help="Attempt to graph (default: the first failed one).")
    ] = None,
    tz: TzOpt = None,
    quiet: QuietOpt = False,
    redact: RedactOpt = False,
) -> None:
    """Export the causal graph: ranks as nodes, edges 'A is explained by B' (waits_for, peer_error, …)."""
    if output.suffix.lower() not in (".graphml", ".json", ".dot", ".gv"):
        raise UsageError(f"{output}: unknown graph format; use .graphml, .json or .dot")
    # The graph of the verdict `rankscope diagnose` prints (correlator.job): one verdict per job.
    job = open_job(directory, quiet, attempt=attempt, tz=tz, redact=redact)
    G = job.graph()
    try:
        fmts: list[str] = []
        atomic_write(output, lambda tmp: fmts.append(job.write_graph(Path(tmp))))
        fmt = fmts[0]
    except OSError as e:
        raise UsageError(f"{output}: cannot write ({e.strerror or e})")
    if not quiet:
        err.print(
            f"wrote {G.number_of_nodes()} ranks and {G.number_of_edges()} edges to {escape(str(output))} ({fmt})",
            highlight=False,
        )
