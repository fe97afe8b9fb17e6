"""``rankscope events DIR``: the job's events, filtered by rank and kind, as a table, JSON lines or CSV.

The selection and its order are :meth:`correlator.job.Job.events`; this module prints them."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from correlator.cli.common import (
    DirArg,
    FrOpt,
    QuietOpt,
    RedactOpt,
    StacksOpt,
    TzOpt,
    err,
    out,
    ranges,
    reading,
)

if TYPE_CHECKING:
    import polars as pl


class EventsFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


#: The columns of ``--format csv``.
CSV_COLUMNS = ["ts", "rank", "host", "kind", "pg", "seq", "op", "path", "line", "message"]


def events(
    directory: DirArg,
    rank: Annotated[
        list[int] | None, typer.Option("--rank", "-r", help="Only these global ranks (repeatable).")
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            "-k",
            help="Only these event kinds (repeatable), e.g. watchdog_timeout (which also covers the "
            "watchdog's status and teardown lines); the words of correlator.schema.KIND_ALIASES "
            "(timeout, watchdog, oom, …) cover several kinds.",
        ),
    ] = None,
    faults: Annotated[
        bool, typer.Option("--faults", help="Only events that mean something went wrong.")
    ] = False,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="At most this many events (0: all).")
    ] = 50,
    format: Annotated[
        EventsFormat,
        typer.Option(
            "--format", "-f", help="table (plain lines when piped), json (one object per line) or csv."
        ),
    ] = EventsFormat.table,
    tz: TzOpt = None,
    quiet: QuietOpt = False,
    redact: RedactOpt = False,
    fr: FrOpt = None,
    stacks: StacksOpt = None,
) -> None:
    """Print events as a table (or JSON/CSV), filtered by rank and kind."""
    from correlator.tables import event_kinds

    if kind:
        event_kinds(kind)  # an unknown kind is refused before the logs are read
    with reading(directory, quiet, tz=tz, redact=redact, fr=fr, stacks=stacks) as job:
        t = job.events(rank=rank, kind=kind, faults=faults)
    total = t.height
    if limit and limit < 2**62:  # a larger limit is no limit
        t = t.head(limit)
    if not quiet:
        if total == 0:
            have = job.ranks()
            hint = f" (ranks in these logs: {ranges(have)})" if rank and have else ""
            err.print(f"0 events match{hint}", highlight=False)
        elif total > t.height:
            err.print(f"showing {t.height} of {total} matching events (--limit 0 for all)", highlight=False)
    if format == EventsFormat.json:
        print(t.write_ndjson(), end="")
    elif format == EventsFormat.csv:
        print(t.select(CSV_COLUMNS).write_csv(), end="")
    elif not out.is_terminal or out.width < 100:
        print_lines(t)  # pipes and narrow terminals: one plain line per event (grep- and less-friendly)
    else:
        print_table(t)


def _seq(r: dict[str, object], sep: str) -> str:
    """`` SeqNum=7`` / `` SeqNum 7`` of a collective's row (not of a step line, whose ``seq`` is its step)."""
    from correlator.schema import Kind

    return f" SeqNum{sep}{r['seq']}" if r["seq"] is not None and r["kind"] != Kind.STEP_PROGRESS else ""


def print_lines(t: pl.DataFrame) -> None:
    """One plain line per event: time, rank, kind, where, the message's first line."""
    for r in t.iter_rows(named=True):
        ts = r["ts"].strftime("%Y-%m-%d %H:%M:%S") if r["ts"] else "-"
        rank_s = "-" if r["rank"] is None else str(r["rank"])
        msg = (r["message"] or "").split("\n")[0]
        print(f"{ts}  rank {rank_s:>4}  {r['kind']}{_seq(r, '=')}  {r['path']}:{r['line']}  {msg}")


def print_table(t: pl.DataFrame) -> None:
    """The events as a rich table that fits the terminal."""
    from rich.table import Table
    from rich.text import Text

    tab = Table(show_lines=False, pad_edge=False, expand=True)
    tab.add_column("time (UTC)", no_wrap=True, min_width=19)
    tab.add_column("rank", no_wrap=True, min_width=4, justify="right")
    tab.add_column("kind", no_wrap=True, min_width=16)
    tab.add_column("where", overflow="fold", ratio=1)
    tab.add_column("message", overflow="fold", ratio=3)
    for r in t.iter_rows(named=True):
        ts = r["ts"].strftime("%Y-%m-%d %H:%M:%S") if r["ts"] else ""
        tab.add_row(
            ts,
            "" if r["rank"] is None else str(r["rank"]),
            Text(r["kind"] + _seq(r, " ")),
            Text(f"{r['path']}:{r['line']}"),
            Text((r["message"] or "").split("\n")[0]),
        )
    out.print(tab)
