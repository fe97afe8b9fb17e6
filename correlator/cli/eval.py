"""``rankscope eval CASES``: score the diagnosis on a labelled corpus (:mod:`correlator.evaluate`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from correlator.cli.common import DiagFormat, UsageError, out

if TYPE_CHECKING:
    from correlator.evaluate import CaseResult, EvalReport


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
            out.print(case_line(c), highlight=False)
        print_scores(rep, tot)
    if tot["regressions"]:
        raise typer.Exit(1)


def case_line(c: CaseResult) -> str:
    """One case: PASS / KNOWN / FAIL, what the diagnosis said against what was expected, the time taken."""
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
    return line


def score_line(name: str, t: dict[str, Any]) -> str:
    """The scores of a subset of cases (or of all) on one line."""
    edges = f", edges {t['edge_accuracy']:.3f} of {t['edges_expected']}" if t["edges_expected"] else ""
    return (
        f"{name}: {t['passed']}/{t['cases']} cases pass ({t['verdict_passed']} with the right verdict); initiating accuracy {t['initiating_accuracy']:.3f}, "
        f"collateral P/R/F1 {t['collateral_precision']:.3f}/{t['collateral_recall']:.3f}/{t['collateral_f1']:.3f}, "
        f"kind accuracy {t['kind_accuracy']:.3f}{edges}, {t['seconds_per_case']:.2f} s per case"
    )


def print_scores(rep: EvalReport, tot: dict[str, Any]) -> None:
    """The scores per subset and of all cases, then the confidence bands of the real cases."""
    from correlator.evaluate import SUBSETS

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
