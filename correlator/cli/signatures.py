"""``rankscope signatures`` and ``rankscope explain ID``: the known-failure signature library
(:mod:`correlator.signatures`)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from correlator.signatures import Signature


class SigFormat(str, Enum):
    table = "table"
    json = "json"


ExtraOpt = Annotated[
    list[Path] | None,
    typer.Option("--signatures", help="Extra signature file(s) (TOML) besides the built-in library."),
]


def _load(extra: list[Path] | None) -> list[Signature]:
    from correlator.signatures import load_signatures

    try:
        return load_signatures(extra or [])
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2)


def signatures_cmd(
    format: Annotated[
        SigFormat, typer.Option("--format", "-f", help="table (for people) or json.")
    ] = SigFormat.table,
    signatures: ExtraOpt = None,
) -> None:
    """List the known-failure signatures (built-in library plus --signatures files)."""
    sigs = _load(signatures)
    if format == SigFormat.json:
        print(json.dumps([s.to_dict() for s in sigs], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    tab = Table(
        title=f"{len(sigs)} known-failure signatures (rankscope explain ID for details)",
        title_justify="left",
    )
    for col in ("id", "layer", "role", "title"):
        tab.add_column(col, overflow="fold", no_wrap=col == "id")
    for s in sigs:
        tab.add_row(s.id, s.layer, s.role, s.title)
    Console().print(tab)


def explain_cmd(
    sig_id: Annotated[str, typer.Argument(metavar="ID", help="Signature id (see `rankscope signatures`).")],
    signatures: ExtraOpt = None,
) -> None:
    """Print one known-failure signature in full: meaning, root cause, fix, checklist, references."""
    from correlator.signatures import close_ids, explain_text, find

    sigs = _load(signatures)
    s = find(sigs, sig_id)
    if s is None:
        close = close_ids(sigs, sig_id)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        typer.echo(
            f"error: unknown signature id {sig_id!r} ({hint}run `rankscope signatures` for the list)",
            err=True,
        )
        raise typer.Exit(2)
    print(explain_text(s))
