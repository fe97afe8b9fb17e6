"""The ``rankscope`` command line (typer). A thin shell over the Python API.

Exit codes: 0 — the command did its job (a diagnosis was made, whatever it found; an eval with no
regression); 1 — ``eval`` found regressions; 2 — usage error or unreadable/empty input; 3 — internal error
(a bug: please report it with the command line).
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from correlator import commands
from correlator.console import err, out
from correlator.console import safe as _safe
from correlator.errors import DiscoveryError, InputError
from correlator.output import atomic_write

# The engine (polars, pyarrow, networkx: ~1.5 s of imports) is imported inside the commands that run it, so
# that `rankscope --version` and `--help` start at once (issue #32 item 3; tests/test_cli.py checks that
# importing this module loads none of them).
if TYPE_CHECKING:
    import polars as pl
    from typer import _click as click

    from correlator.ingest import IngestResult

#: Commands that feature modules add with ``register(app)``: name -> (module, the summary line that
#: `rankscope --help` lists). A feature module is imported only when one of its commands runs (plot loads
#: matplotlib, watch the whole engine); tests/test_cli.py checks these lines against the commands' own.
FEATURE_COMMANDS: dict[str, tuple[str, str]] = {
    "plot": (
        "correlator.plot",
        "Draw the failure: per-rank timeline, (pg, seq) progress heatmap and causal graph (HTML or PNG).",
    ),
    "redact": (
        "correlator.redact",
        (
            "Write a copy of the logs with host names, IPs, user names, e-mails and secrets replaced by "
            "stable\npseudonyms (host-1, ip-3, user-1, <secret-1>); diagnosing the copy names the same ranks."
        ),
    ),
    "signatures": (
        "correlator.signatures",
        "List the known-failure signatures (built-in library plus --signatures files).",
    ),
    "explain": (
        "correlator.signatures",
        "Print one known-failure signature in full: meaning, root cause, fix, checklist, references.",
    ),
    "watch": (
        "correlator.watch",
        "Follow a running job: alert on the first initiating fault and on stragglers while it still runs.",
    ),
}


class _Commands(TyperGroup):
    """rankscope's command group: a feature command is listed by :data:`FEATURE_COMMANDS` (a placeholder
    that carries its help line) and replaced by the real command, its module imported, when it is run or
    asked for its own ``--help``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        import importlib.util

        for name, (module, summary) in FEATURE_COMMANDS.items():
            if name not in self.commands and importlib.util.find_spec(module) is not None:
                self.commands[name] = TyperCommand(name=name, help=summary)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] in FEATURE_COMMANDS and args[0] in self.commands:
            self.commands.update(feature_commands(FEATURE_COMMANDS[args[0]][0]))
        return super().resolve_command(ctx, args)


def feature_commands(module: str) -> dict[str, click.Command]:
    """The commands that feature ``module`` adds with its ``register(app)``, as click commands."""
    import importlib

    sub = typer.Typer()
    importlib.import_module(module).register(sub)
    return dict(typer.main.get_group(sub).commands)


app = typer.Typer(
    cls=_Commands,
    name="rankscope",
    help="Find which rank of a failed distributed training job failed first, why, and which errors on the "
    "other ranks are only collateral. Point it at the directory of per-rank logs "
    "(a torchrun --log-dir, rank*.log files, SLURM output, NCCL_DEBUG files).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
#: Bad arguments or input: printed as one line, exit code 2 (the API's :class:`correlator.errors.InputError`).
UsageError = InputError


#: ``diagnose --exit-code``: the logs show a failure (0, 1, 2 and 3 keep their meanings; see main()).
FAILURE_FOUND = 4


class DiagFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class TableFormat(str, Enum):
    parquet = "parquet"
    jsonl = "jsonl"
    csv = "csv"
    perfetto = "perfetto"


class EventsFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


DirArg = Annotated[
    Path,
    typer.Argument(
        help="Directory (or single file) of logs from the failed job; also a .tar(.gz|.zst|…) or .zip "
        "archive of them, or - to read one combined log from standard input.",
        show_default=False,
        callback=commands.input_path,
    ),
]
TzOpt = Annotated[
    str | None,
    typer.Option(
        "--tz", help="Time zone (IANA name, e.g. Europe/Berlin) of stamps that carry none. Default: UTC."
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary on stderr.")]
StreamingOpt = Annotated[
    bool | None,
    typer.Option(
        "--streaming/--no-streaming",
        help="Ingest node by node in bounded "
        "memory (~1.3 GiB) keeping only what diagnosis needs. Default: on above 2 GiB of logs.",
    ),
]
FrOpt = Annotated[
    Path | None,
    typer.Option(
        "--fr",
        help="Directory of PyTorch Flight Recorder dumps kept apart from "
        "the logs (dumps under DIRECTORY are found anyway).",
        show_default=False,
    ),
]
RedactOpt = Annotated[
    bool,
    typer.Option(
        "--redact",
        help="Replace host names, IPs, user names, e-mails and secrets by stable "
        "pseudonyms (host-1, ip-3, user-1) in everything written.",
    ),
]


_check_output = commands.check_output
_current_output = commands.current_output
_progress = commands.progress
_print_warnings = commands.print_warnings
_load = commands.load


def _summary(res: IngestResult | dict[str, object]) -> None:
    s = res if isinstance(res, dict) else res.summary()
    kinds = ", ".join(f"{k} {v}" for k, v in list(s["rows_by_kind"].items())[:12])  # type: ignore[attr-defined]
    why: dict[str, int] = s.get("skipped_by_reason") or {}  # type: ignore[assignment]
    skipped = f"{s['lines_skipped']} skipped" + (
        f": {escape(', '.join(f'{v} {k}' for k, v in why.items()))}" if why else ""
    )
    err.print(
        f"[bold]{s['files']}[/] files, [bold]{s['lines_read']}[/] lines ({skipped}), "
        f"[bold]{s['rows']}[/] events; ranks {_r(s['ranks'])}; hosts {', '.join(s['hosts']) or 'unknown'}; "  # type: ignore[arg-type]
        f"attempts {s['attempts']}",
        highlight=False,
    )
    err.print(f"events by kind: {kinds}", highlight=False)
    err.print(f"lines not understood: {s['lines_not_understood']}", highlight=False)
    skipped_list = list(s.get("skipped") or [])  # type: ignore[call-overload]
    for e in skipped_list[:10]:
        lines = "?" if e.get("lines") is None else e["lines"]
        nbytes = "?" if e.get("bytes") is None else e["bytes"]
        err.print(
            f"skipped: {_safe(e['path'])}: {_safe(e['reason'])} ({nbytes} bytes, {lines} lines)",
            highlight=False,
        )
    if len(skipped_list) > 10:
        err.print(f"skipped: … and {len(skipped_list) - 10} more", highlight=False)


def _r(ranks: list[int]) -> str:
    from correlator.report import ranges

    return ranges(ranks)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"rankscope {version('rankscope')}")
        except PackageNotFoundError:
            print("rankscope (not installed as a package)")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """Find which rank of a failed distributed training job failed first, why, and which errors are collateral."""


@app.command()
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

    job = commands.open_job(
        directory,
        quiet,
        fr=fr,
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


_atomic_write = atomic_write


class PartitionBy(str, Enum):
    host = "host"
    rank = "rank"


def _streamed(
    directory: Path, tz: str | None, quiet: bool, out: Path | None = None, partition_by: str | None = None
) -> tuple[pl.DataFrame, dict[str, object]]:
    from correlator.streaming import stream_ingest

    if not directory.exists():
        raise UsageError(f"{directory}: no such file or directory")
    with _progress(quiet) as update:
        cb = None if update is None else (lambda done, total: update("streaming node by node", done, total))
        table, s = stream_ingest(directory, out, tz=tz, partition_by=partition_by, progress=cb)
    _print_warnings(list(s.get("warning_lines") or []), quiet)  # type: ignore[call-overload]
    return table, s


@app.command()
def timeline(
    directory: DirArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="Output file (.parquet by default).")] = Path(
        "timeline.parquet"
    ),
    format: Annotated[
        TableFormat | None,
        typer.Option(
            "--format",
            "-f",
            help="parquet (DuckDB, polars, Spark), jsonl, csv, or "
            "perfetto (Chrome trace-event JSON for ui.perfetto.dev). Default: "
            "from the -o extension, else parquet.",
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
            "Default: on for parquet output of more than 64 MiB of logs (not with --redact, nor when a node "
            "split into batches would re-read a launcher log larger than a batch).",
        ),
    ] = None,
    tz: TzOpt = None,
    quiet: QuietOpt = False,
    redact: RedactOpt = False,
) -> None:
    """Write the normalized event table (one row per log line or multi-line record, every rank)."""
    import polars as pl

    from correlator.api import want_streaming
    from correlator.discover import sharing_walks

    with sharing_walks():  # the streaming decision and the ingest walk the folder once
        if format is None:
            format = {".jsonl": TableFormat.jsonl, ".ndjson": TableFormat.jsonl, ".csv": TableFormat.csv}.get(
                output.suffix.lower(), TableFormat.parquet
            )
        by = partition_by.value if partition_by else None
        if streaming is None:  # by default a parquet table of more than two batches streams (bounded memory)
            from correlator.streaming import TABLE_STREAMING_THRESHOLD_BYTES, context_bounded

            streaming = (
                format == TableFormat.parquet
                and not redact
                and want_streaming(directory, None, TABLE_STREAMING_THRESHOLD_BYTES)
                and context_bounded(directory)
            )
        if (by or streaming) and format != TableFormat.parquet:
            raise UsageError("--partition-by and --streaming write parquet only")
        if streaming:
            if directory.exists():
                _check_output(directory, output)
            if redact:
                raise UsageError(
                    "--redact needs the whole table: use --no-streaming, or `rankscope redact` first"
                )
            got: list[dict[str, object]] = []
            try:
                if by:
                    s = _streamed(directory, tz, quiet, output, by)[1]
                else:  # one file: written under a temporary name, renamed when complete
                    _atomic_write(
                        output, lambda tmp: got.append(_streamed(directory, tz, quiet, Path(tmp))[1])
                    )
                    s = got[0]
            except OSError as e:
                raise UsageError(f"{output}: cannot write ({e.strerror or e})")
            if not quiet:
                _summary(s)
                err.print(
                    f"wrote {s['rows']} events to {escape(str(output))} in {s['batches']} "
                    f"{'batch' if s['batches'] == 1 else 'batches'} "
                    f"(peak memory {s['peak_rss_mib']} MiB)",
                    highlight=False,
                )
            return
        if format == TableFormat.perfetto:  # the trace of the verdict `rankscope diagnose` prints
            _write_trace(directory, output, tz, quiet, redact)
            return
        res = _load(directory, tz, quiet, redact)
        if by:
            import socket

            from correlator.export import write_partitioned

            try:
                files = write_partitioned(
                    res.table, output, by=by, part_name=f"part-{socket.gethostname().split('.')[0]}.parquet"
                )
            except OSError as e:
                raise UsageError(f"{output}: cannot write ({e.strerror or e})")
            if not quiet:
                _summary(res)
                err.print(
                    f"wrote {res.table.height} events to {len(files)} partitions under {escape(str(output))}",
                    highlight=False,
                )
            return
        t = res.table
        try:
            with _progress(quiet) as bar:  # the write of a large table takes seconds: say so
                if bar is not None:
                    bar(f"writing {output.name}", 0, None)
                _write_table(t, output, format)
        except (OSError, pl.exceptions.PolarsError) as e:
            raise UsageError(f"{output}: cannot write ({getattr(e, 'strerror', None) or e})") from None
        if not quiet:
            _summary(res)
            err.print(f"wrote {t.height} events to {escape(str(output))}", highlight=False)


def _write_trace(directory: Path, output: Path, tz: str | None, quiet: bool, redact: bool) -> None:
    """The Perfetto trace of every line of ``directory`` with the job's one verdict, to ``output``."""
    from correlator.perfetto import write_trace

    job = commands.open_job(directory, quiet, tz=tz, redact=redact, full_table=True)
    t, d = job.table(), job.diagnose()
    try:
        _atomic_write(output, lambda tmp: write_trace(t, d, Path(tmp)))
    except OSError as e:
        raise UsageError(f"{output}: cannot write ({e.strerror or e})") from None
    if not quiet:
        err.print(f"wrote {t.height} events to {escape(str(output))}", highlight=False)


def _write_table(t: pl.DataFrame, output: Path, format: TableFormat) -> None:
    """``t`` to ``output`` in ``format`` (parquet, jsonl, csv), through :func:`_atomic_write`."""
    if format == TableFormat.parquet:
        _atomic_write(output, t.write_parquet)
    elif format == TableFormat.jsonl:
        _atomic_write(output, t.write_ndjson)
    else:
        _atomic_write(output, t.write_csv)


@app.command()
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
) -> None:
    """Print events as a table (or JSON/CSV), filtered by rank and kind."""
    import polars as pl

    from correlator.schema import FAULT_KINDS, KIND_ALIASES, Kind, resolve_kinds

    kinds: set[str] = set()
    if kind:
        kinds, bad = resolve_kinds(kind)
        if bad:
            raise UsageError(
                f"unknown kind {', '.join(bad)}; known kinds: {', '.join(m.value for m in Kind)}; "
                f"words that cover several kinds: {', '.join(sorted(KIND_ALIASES))}"
            )
    res = _load(directory, tz, quiet, redact, fr=fr)
    t = res.table.filter(~pl.col("duplicate"))
    if rank:
        t = t.filter(pl.col("rank").is_in(rank))
    if kind:
        t = t.filter(pl.col("kind").is_in(sorted(kinds)))
    if faults:
        t = t.filter(pl.col("kind").is_in(list(FAULT_KINDS)))
    # in the one time the report, plot and trace state (a line without a stamp of its own sits at the stamp
    # above it in its file), then file order: an unstamped fault is not pushed to the end
    from correlator.clock import shown_times

    shown, _ = shown_times(res.table)
    t = (
        t.join(shown.select("event_id", pl.col("tc").alias("__shown")), on="event_id", how="left")
        .sort("__shown", "path", "line", "event_id", nulls_last=True)
        .drop("__shown")
    )
    total = t.height
    if limit and limit < 2**62:  # a larger limit is no limit
        t = t.head(limit)
    if not quiet:
        if total == 0:
            have = res.table["rank"].drop_nulls().unique().sort().to_list()
            hint = f" (ranks in these logs: {_r(have)})" if rank and have else ""
            err.print(f"0 events match{hint}", highlight=False)
        elif total > t.height:
            err.print(f"showing {t.height} of {total} matching events (--limit 0 for all)", highlight=False)
    cols = ["ts", "rank", "host", "kind", "pg", "seq", "op", "path", "line", "message"]
    if format == EventsFormat.json:
        print(t.write_ndjson(), end="")
    elif format == EventsFormat.csv:
        print(t.select(cols).write_csv(), end="")
    elif not out.is_terminal or out.width < 100:
        # Pipes and narrow terminals: one plain line per event (grep- and less-friendly).
        for r in t.iter_rows(named=True):
            ts = r["ts"].strftime("%Y-%m-%d %H:%M:%S") if r["ts"] else "-"
            seq_s = f" SeqNum={r['seq']}" if r["seq"] is not None and r["kind"] != Kind.STEP_PROGRESS else ""
            rank_s = "-" if r["rank"] is None else str(r["rank"])
            msg = (r["message"] or "").split("\n")[0]
            print(f"{ts}  rank {rank_s:>4}  {r['kind']}{seq_s}  {r['path']}:{r['line']}  {msg}")
    else:
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
            seq = f" SeqNum {r['seq']}" if r["seq"] is not None and r["kind"] != Kind.STEP_PROGRESS else ""
            tab.add_row(
                ts,
                "" if r["rank"] is None else str(r["rank"]),
                Text(r["kind"] + seq),
                Text(f"{r['path']}:{r['line']}"),
                Text((r["message"] or "").split("\n")[0]),
            )
        out.print(tab)


@app.command()
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
    job = commands.open_job(directory, quiet, attempt=attempt, tz=tz, redact=redact)
    G = job.graph()
    try:
        fmts: list[str] = []
        _atomic_write(output, lambda tmp: fmts.append(job.write_graph(Path(tmp))))
        fmt = fmts[0]
    except OSError as e:
        raise UsageError(f"{output}: cannot write ({e.strerror or e})")
    if not quiet:
        err.print(
            f"wrote {G.number_of_nodes()} ranks and {G.number_of_edges()} edges to {escape(str(output))} ({fmt})",
            highlight=False,
        )


@app.command(name="eval")
def eval_cmd(
    cases_dir: Annotated[
        Path, typer.Argument(help="Folder of cases: each case folder holds logs/ and expected.json.")
    ],
    format: Annotated[
        DiagFormat, typer.Option("--format", "-f", help="text or json (markdown prints text).")
    ] = DiagFormat.text,
) -> None:
    """Score the diagnosis on a labelled corpus; exit 1 when a case regressed (not a listed known miss)."""
    from correlator.evaluate import evaluate, find_cases

    if not cases_dir.is_dir():
        raise UsageError(f"{cases_dir}: not a directory")
    if not find_cases(cases_dir):
        raise UsageError(f"{cases_dir}: no case folders (none holds an expected.json)")
    try:
        rep = evaluate(cases_dir)
    except ValueError as e:  # a malformed expected.json
        raise UsageError(str(e)) from None
    tot = rep.totals()
    if format == DiagFormat.json:
        from correlator.report import json_default

        print(json.dumps(rep.to_json(), indent=2, default=json_default))
    else:
        for c in rep.cases:
            mark = "[green]PASS[/]" if c.passed else ("[yellow]KNOWN[/]" if c.excused else "[red]FAIL[/]")
            line = (
                f"{mark} {escape(c.name)}: initiating {c.got['initiating_ranks']} (want {c.want['initiating_ranks']}), "
                f"collateral {'ok' if c.collateral_ok else str(c.got['collateral_ranks']) + ' (want ' + str(c.want['collateral_ranks']) + ')'}, "
                f"kind {c.got['failure_kind']}"
                + ("" if c.kind_ok is not False else f" (want {c.want['failure_kind']})")
                + f", {c.seconds:.2f}s"
            )
            if c.error:
                line += f" [red]error: {escape(c.error)}[/]"
            if c.excused:
                why = c.known_miss if not c.verdict_ok else c.known_edge_miss
                line += f" [dim](known {'miss' if not c.verdict_ok else 'edge miss'}: {escape(why or '')})[/]"
            out.print(line, highlight=False)
        from correlator.evaluate import SUBSETS

        def score_line(name: str, t: dict[str, Any]) -> str:
            edges = (
                f", edges {t['edge_accuracy']:.3f} of {t['edges_expected']}" if t["edges_expected"] else ""
            )
            return (
                f"{name}: {t['passed']}/{t['cases']} cases pass ({t['verdict_passed']} with the right verdict); initiating accuracy {t['initiating_accuracy']:.3f}, "
                f"collateral P/R/F1 {t['collateral_precision']:.3f}/{t['collateral_recall']:.3f}/{t['collateral_f1']:.3f}, "
                f"kind accuracy {t['kind_accuracy']:.3f}{edges}, {t['seconds_per_case']:.2f} s per case"
            )

        out.print("", highlight=False)
        for sub, sources in SUBSETS.items():
            t = rep.totals(sub)
            if t["cases"]:
                out.print(score_line(f"{sub} ({' + '.join(sources)})", t), highlight=False)
        out.print(score_line("all", tot), highlight=False)
        out.print("", highlight=False)
        out.print("confidence bands, real cases (how often the initiating rank was right):", highlight=False)
        for b in rep.bands("real"):
            acc = "-" if b["accuracy"] is None else f"{b['accuracy']:.2f}"
            out.print(
                f"  confidence {b['band']:>7}: {b['cases']:3d} verdicts, {b['initiating_right']:3d} right "
                f"({acc}), {b['verdict_right']} with kind and collateral right too",
                highlight=False,
            )
    if tot["regressions"]:
        raise typer.Exit(1)


def _global_flags() -> None:
    """Flags that hold for every command, wherever they stand: ``--follow-symlinks`` (also
    ``RANKSCOPE_FOLLOW_SYMLINKS=1``) lets discovery follow symlinks that leave the input folder."""
    import os

    if "--follow-symlinks" in sys.argv[1:]:
        sys.argv = [a for a in sys.argv if a != "--follow-symlinks"]
        _SAVED_ENV["RANKSCOPE_FOLLOW_SYMLINKS"] = os.environ.get("RANKSCOPE_FOLLOW_SYMLINKS")
        os.environ["RANKSCOPE_FOLLOW_SYMLINKS"] = "1"


_SAVED_ENV: dict[str, str | None] = {}


def _restore_flags() -> None:
    """Undo :func:`_global_flags` (main() may run several times in one process: tests, notebooks)."""
    import os

    for k, v in _SAVED_ENV.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    _SAVED_ENV.clear()


def main() -> None:
    """Console-script entry point: one-line errors with meaningful exit codes, never a raw traceback."""
    import signal

    if hasattr(signal, "SIGPIPE"):  # `rankscope … | head` ends quietly, like any Unix tool
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _global_flags()
    try:
        rc = app(standalone_mode=False)
        # Without standalone mode, typer returns a command's typer.Exit code instead of exiting with it.
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except UsageError as e:
        err.print(f"[red]error:[/] {_safe(e)}", highlight=False)
        sys.exit(2)
    except DiscoveryError as e:
        err.print(f"[red]error:[/] {_safe(e)}", highlight=False)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (
        OSError
    ) as e:  # disk full, unwritable output, a file vanishing under us: the environment, not a bug
        err.print(f"[red]error:[/] {_safe(e)}", highlight=False)
        sys.exit(2)
    except MemoryError:
        err.print(
            '[red]error:[/] out of memory reading this input; lower the limits (see README, "bad input": '
            "RANKSCOPE_MAX_FILE_MB, RANKSCOPE_MAX_LINES) or use --streaming",
            highlight=False,
        )
        sys.exit(2)
    except RecursionError:
        err.print(
            "[red]error:[/] input nested too deeply to read (a hostile JSON/TOML file?)", highlight=False
        )
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - click usage errors, then genuine bugs
        # typer >= 0.20 vendors click and raises its own copy's exceptions, even when a separate click is
        # installed (a dev tool may bring one): the vendored copy first.
        try:
            from typer import _click as click
        except ImportError:
            import click  # type: ignore[no-redef]

        if isinstance(e, click.exceptions.UsageError):
            e.show()
            sys.exit(2)
        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, BrokenPipeError):
            sys.exit(0)
        err.print(
            f"[red]internal error:[/] {type(e).__name__}: {_safe(e)} — please report this with the command line",
            highlight=False,
        )
        sys.exit(3)
    except BaseException as e:  # a Rust panic in polars/pyarrow (pyo3's PanicException is a BaseException)
        if type(e).__name__ != "PanicException":
            raise
        err.print(
            f"[red]error:[/] the table engine failed on this input ({_safe(str(e)[:300])}); the input is "
            "malformed in a way rankscope does not catch yet — please report it",
            highlight=False,
        )
        sys.exit(2)
    finally:
        _restore_flags()


if __name__ == "__main__":
    main()
