"""``rankscope eval CASES``: score the diagnosis on a labelled corpus (:mod:`correlator.evaluate`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from correlator.cli.common import DiagFormat, UsageError, err, out, progress
from correlator.errors import safe

if TYPE_CHECKING:
    from correlator.evaluate import CaseResult, EvalReport


def eval_cmd(
    cases_dir: Annotated[
        Path, typer.Argument(help="Folder of cases: each case folder holds logs/ and expected.json.")
    ],
    format: Annotated[
        DiagFormat,
        typer.Option(
            "--format",
            "-f",
            help="text (a line per case as it is scored, then the scores), json (for scripts), markdown (the "
            "scores and the cases that did not pass, as tables for a pull request or a ticket).",
        ),
    ] = DiagFormat.text,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar on stderr.")] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Cases diagnosed at once, each in a worker process (default: RANKSCOPE_EVAL_WORKERS, else "
            "every core this process may use, as many as RANKSCOPE_MEMORY_MB (else half the memory) holds for "
            "the largest case; 1: one after another in this process). The scores are the same.",
        ),
    ] = None,
) -> None:
    """Score the diagnosis on a labelled corpus; exit 1 when a case regressed (not a listed known miss)."""
    from correlator.evaluate import evaluate, find_cases

    if not cases_dir.is_dir():
        raise UsageError(f"{cases_dir}: not a directory")
    n_cases = len(find_cases(cases_dir))
    if not n_cases:
        raise UsageError(f"{cases_dir}: no case folders (none holds an expected.json)")
    with progress(quiet) as update:
        if update is not None:
            update("scoring cases", 0, n_cases)

        def scored(done: int, total: int, c: CaseResult) -> None:
            if format == DiagFormat.text:
                out.print(case_line(c), highlight=False)
            if update is not None:
                update("scoring cases", done, total)

        try:
            rep = evaluate(cases_dir, on_case=scored, workers=jobs)
        except ValueError as e:  # a malformed expected.json
            raise UsageError(str(e)) from None
    for c in rep.cases:  # after the progress bar: a label the scorer cannot score is said, not skipped
        if c.kind_warning:
            err.print(f"[yellow]warning:[/] {safe(c.kind_warning)}", highlight=False)
    tot = rep.totals()
    if format == DiagFormat.json:
        from correlator.report import json_default

        print(json.dumps(rep.to_json(), indent=2, default=json_default))
    elif format == DiagFormat.markdown:
        print(render_markdown(rep), end="")
    else:
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
        + (f" (label {escape(repr(c.want['failure_kind']))} not scored)" if c.kind_warning else "")
        + f", {c.seconds:.2f}s"
    )
    if c.error:
        line += f" [red]error: {escape(c.error)}[/]"
    if c.excused:
        why = c.known_miss if not c.verdict_ok else c.known_edge_miss
        line += f" [dim](known {'miss' if not c.verdict_ok else 'edge miss'}: {escape(why or '')})[/]"
    return line


def kind_score(t: dict[str, Any]) -> str:
    """The kind accuracy, with how many cases it covers when that is not all of them."""
    if not t["kind_scored"]:
        return "- (no case labelled with a known kind)"
    if t["kind_scored"] == t["cases"]:
        return f"{t['kind_accuracy']:.3f}"
    return f"{t['kind_accuracy']:.3f} ({t['kind_scored']} of {t['cases']} cases labelled with a known kind)"


def score_line(name: str, t: dict[str, Any]) -> str:
    """The scores of a subset of cases (or of all) on one line."""
    edges = f", edges {t['edge_accuracy']:.3f} of {t['edges_expected']}" if t["edges_expected"] else ""
    return (
        f"{name}: {t['passed']}/{t['cases']} cases pass ({t['verdict_passed']} with the right verdict); initiating accuracy {t['initiating_accuracy']:.3f}, "
        f"collateral P/R/F1 {t['collateral_precision']:.3f}/{t['collateral_recall']:.3f}/{t['collateral_f1']:.3f}, "
        f"kind accuracy {kind_score(t)}{edges}, {t['seconds_per_case']:.2f} s per case"
    )


def unsorted_note(rep: EvalReport) -> str | None:
    """Which cases are in no subset (no ``source``, or one whose first word names no subset), else None."""
    from correlator.evaluate import SUBSETS

    loose = [c for c in rep.cases if c.subset is None]
    if not loose:
        return None
    names = ", ".join(c.name for c in loose[:5]) + (f", … ({len(loose) - 5} more)" if len(loose) > 5 else "")
    known = ", ".join(n for names_ in SUBSETS.values() for n in names_)
    return (
        f"{len(loose)} of {len(rep.cases)} cases count in 'all' only: their expected.json has no source, or "
        f"one that does not start with {known} ({names})"
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
    note = unsorted_note(rep)
    if note:
        out.print(f"note: {escape(note)}", highlight=False)
    out.print("", highlight=False)
    if not rep.totals("real")["cases"]:
        out.print(
            "confidence bands, real cases: none to score (no case's source starts with public or captured)",
            highlight=False,
        )
        return
    out.print("confidence bands, real cases (how often the initiating rank was right):", highlight=False)
    for b in rep.bands("real"):
        acc = "-" if b["accuracy"] is None else f"{b['accuracy']:.2f}"
        out.print(
            f"  confidence {b['band']:>7}: {b['cases']:3d} verdicts, {b['initiating_right']:3d} right "
            f"({acc}), {b['verdict_right']} with kind and collateral right too",
            highlight=False,
        )


def _cell(x: object) -> str:
    """``x`` as the text of a markdown table cell (``|`` escaped, one line)."""
    return " ".join(str(x).split()).replace("|", "\\|")


def render_markdown(rep: EvalReport) -> str:
    """The scores per subset and of all cases, then the cases that did not pass (regressions first, then the
    known misses with their reason), as markdown tables."""
    from correlator.evaluate import SUBSETS

    tot = rep.totals()
    lines = [
        f"## rankscope eval: {tot['passed']}/{tot['cases']} cases pass, {tot['regressions']} regressed",
        "",
        (
            "| cases | n | pass | right verdict | initiating accuracy | collateral P / R / F1 | kind accuracy "
            "| edges | s per case |"
        ),
        "|---|---:|---:|---:|---:|---|---:|---|---:|",
    ]
    rows = [(f"{sub} ({' + '.join(src)})", rep.totals(sub)) for sub, src in SUBSETS.items()] + [("all", tot)]
    for name, t in rows:
        if not t["cases"]:
            continue
        edges = f"{t['edge_accuracy']:.3f} of {t['edges_expected']}" if t["edges_expected"] else "-"
        lines.append(
            f"| {_cell(name)} | {t['cases']} | {t['passed']} | {t['verdict_passed']} | "
            f"{t['initiating_accuracy']:.3f} | {t['collateral_precision']:.3f} / {t['collateral_recall']:.3f} / "
            f"{t['collateral_f1']:.3f} | {_cell(kind_score(t))} | {edges} | {t['seconds_per_case']:.2f} |"
        )
    note = unsorted_note(rep)
    if note:
        lines += ["", f"Note: {_cell(note)}"]
    bad = sorted((c for c in rep.cases if not c.passed), key=lambda c: (c.excused, c.name))
    if bad:
        lines += [
            "",
            "### Cases that did not pass",
            "",
            "| case | status | initiating (want) | collateral (want) | kind (want) | why |",
            "|---|---|---|---|---|---|",
        ]
        for c in bad:
            status = "known miss" if c.excused else "FAIL"
            why = c.error or (c.known_miss if not c.verdict_ok else c.known_edge_miss) or ""
            lines.append(
                f"| {_cell(c.name)} | {status} | {c.got['initiating_ranks']} ({c.want['initiating_ranks']}) | "
                f"{c.got['collateral_ranks']} ({c.want['collateral_ranks']}) | "
                f"{_cell(c.got['failure_kind'])} ({_cell(c.want['failure_kind'])}) | {_cell(why)} |"
            )
    return "\n".join(lines) + "\n"
