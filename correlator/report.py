"""Render a Diagnosis for people (terminal text, Markdown) and for scripts (JSON), and the causal graph
as GraphML / node-link JSON / Graphviz DOT."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from correlator.schema import Kind

# networkx (~0.1-0.17 s to import) only where a graph is written: not for `rankscope diagnose`.
if TYPE_CHECKING:
    import networkx as nx

#: Evidence kinds written by a launcher (torchrun agent, srun, mpirun), shown as "launcher" when rankless.
_LAUNCHER_KINDS = frozenset(
    {
        Kind.WORKER_FAILED,
        Kind.WORKER_SIGNALLED,
        Kind.FAILURE_ENTRY,
        Kind.ROOT_CAUSE_ENTRY,
        Kind.LAUNCHER_ERROR,
        Kind.RENDEZVOUS,
        Kind.RESTART,
        Kind.PROCESS_EXIT,
        Kind.JOB_CANCELLED,
        Kind.PROCESS_KILLED,
    }
)

from correlator.ranks import ranges
from correlator.verdict import Cite, Diagnosis

#: Characters of an evidence line the terminal report shows (``-f json``/``markdown`` carry the whole line).
_TERMINAL_TEXT = 600

_STATUS_STYLE = {
    "initiating": "bold red",
    "collateral": "yellow",
    "unexplained": "bold yellow",
    "clean": "green",
    "missing": "magenta",
}


def json_default(o: Any) -> Any:
    """The ``default`` of every ``json.dumps`` whose output rankscope writes (diagnose, graph, watch, eval,
    perfetto JSON): JSON values, never a Python repr. A confidence note becomes ``{code, weight, text}``
    (:meth:`correlator.confidence.Note.to_dict`), an enum member its name, a set a sorted list, a dataclass
    its fields (converted the same way), a numpy/polars scalar its value; anything else its ``str()``
    (a datetime keeps the ``2024-05-01 12:00:00+00:00`` form it always had)."""
    import dataclasses
    import enum

    from correlator.confidence import Note

    if isinstance(o, Note):
        return o.to_dict()
    if isinstance(o, enum.Enum):
        return o.name
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
    item = getattr(o, "item", None)
    if callable(item) and type(o).__module__.split(".")[0] in ("numpy", "polars"):
        return item()
    return str(o)


def to_json(d: Diagnosis) -> str:
    return json.dumps(d.to_json(), indent=2, default=json_default)


def _explained(s: Any) -> str:
    e = s.explained_by
    if not e:
        return ""
    where = f" (pg {e.pg}, SeqNum {e.seq})" if e.seq is not None else ""
    return f"{e.edge.replace('_', ' ')} rank {e.rank}{where}"


def _ranks_phrase(nums: list[int]) -> str:
    if not nums:
        return "none"
    return ("rank " if len(nums) == 1 else "ranks ") + ranges(nums)


def _grouped(statuses: list[Any]) -> list[dict[str, Any]]:
    """Ranks with the same status, first fault and explanation share one row (readable at 512 ranks)."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for s in statuses:
        key = (s.status, s.first_fault_kind or "", _explained(s))
        g = groups.setdefault(
            key, {"ranks": [], "hosts": [], "status": s.status, "kind": key[1], "why": key[2], "ts": []}
        )
        g["ranks"].append(s.rank)
        if s.host and s.host not in g["hosts"]:
            g["hosts"].append(s.host)
        if s.first_fault_ts:
            # A line without a stamp of its own carries an earlier line's time: show it as a lower bound.
            g["ts"].append(("≥ " if s.first_fault_ts_quality == "inherited" else "") + s.first_fault_ts)
    out = []
    for g in groups.values():
        ts = sorted(g.pop("ts"))
        fmt = [re.sub(r"(\.\d{3})\d*$", r"\1", t.replace("T", " ").replace("Z", "")) for t in ts]
        g["at"] = "" if not fmt else fmt[0] if fmt[0] == fmt[-1] else f"{fmt[0]} … {fmt[-1][11:]}"
        out.append(g)
    return sorted(out, key=lambda g: (g["status"] != "initiating", min(g["ranks"])))


#: How ``InitiatingEvent.ts_basis`` is shown: the sign before the time and the note after it.
_BASIS = {
    "stamp": ("", ""),
    "stamp above": ("≥ ", " (no stamp of its own: the stamped line above it in its file)"),
    "stamp below": ("≤ ", " (no stamp of its own: the stamped line below it in its file)"),
}


def initiating_lines(d: Diagnosis, limit: int = 3) -> list[str]:
    """One line per initiating event (:attr:`Diagnosis.initiating_events`), the first ``limit`` of them:
    ``rank 5: cuda_oom at ≥ 2025-02-11 02:31:40.000 (…) — node-a.console.log:200``; the time is the one
    the plot and the Perfetto trace place the event at (ms shown, the JSON has µs). Then ``… and N more``."""
    out = []
    for e in d.initiating_events[:limit]:
        sign, note = _BASIS.get(e.ts_basis or "", ("", ""))
        when = (
            f"at {sign}{_short_ts(e.ts)}{note}"
            if e.ts
            else "at no known time (the logs carry fewer than two distinct stamps)"
            if e.ts_basis == "event order"
            else "at no known time (no stamp in its file)"
        )
        what = "last sign of life" if e.cite is Cite.LAST_SIGN_OF_LIFE else e.kind
        out.append(f"rank {e.rank}: {what} {when} — {e.path}:{e.line}")
    if len(d.initiating_events) > limit:
        out.append(f"… and {len(d.initiating_events) - limit} more")
    return out


def _short_ts(iso: str) -> str:
    """``2025-02-11T03:17:23.630000Z`` -> ``2025-02-11 03:17:23.630`` (UTC)."""
    s = iso.replace("T", " ").replace("Z", "")
    return re.sub(r"(\.\d{3})\d*$", r"\1", s if "." in s[19:] else s + ".000")


def render_text(d: Diagnosis, console: Console, max_rows: int = 40) -> None:
    """The 3 a.m. report: verdict, evidence lines, per-rank status."""
    style = "bold green" if d.failure_kind == "none" else "bold red"
    console.print(Text("VERDICT  ", style="bold") + Text(d.summary, style=style))
    for line in initiating_lines(d):
        console.print(Text("initiating event  ", style="bold") + Text(line), soft_wrap=True)
    console.print(
        f"kind: [bold]{d.failure_kind}[/]   confidence: [bold]{d.confidence:.2f}[/]   attempt: {d.attempt}"
        f"   world size: {d.world_size if d.world_size is not None else 'unknown'}"
        f"   ranks seen: {len(d.ranks_seen)}"
    )
    if d.confidence_reasons:
        console.print(Text("confidence lowered by: " + "; ".join(d.confidence_reasons), style="dim"))
    for sig in d.signatures[:3]:
        console.print(
            f"[bold]likely cause[/] [cyan]{escape(str(sig.get('id')))}[/]: {escape(str(sig.get('title')))}"
        )
        if sig.get("fix"):
            console.print(Text(f"  fix: {sig['fix']}"))
    if d.evidence:
        console.print("\n[bold]Evidence[/]")
        for e in d.evidence:
            rank = (
                f"rank {e.rank}"
                if e.rank is not None
                else ("launcher" if e.kind in _LAUNCHER_KINDS else "no rank")
            )
            console.print(
                Text(f"  {e.path}:{e.line}", style="cyan")
                + Text(f"  [{rank}, {e.kind}] {e.role}", style="dim")
            )
            shown = e.text if len(e.text) <= _TERMINAL_TEXT else e.text[: _TERMINAL_TEXT - 1] + "…"
            console.print(Text(f"    {shown}"), soft_wrap=True)
    involved = [s for s in d.per_rank if s.status in ("initiating", "collateral")]
    if involved:
        console.print()
        table = Table(title="Ranks involved", title_justify="left", show_lines=False)
        for col in ("rank", "host", "status", "first fault", "at", "explained by"):
            table.add_column(col)
        for g in _grouped(involved)[:max_rows]:
            table.add_row(
                ranges(g["ranks"]),
                Text(", ".join(g["hosts"])),
                Text(g["status"], style=_STATUS_STYLE.get(g["status"], "")),
                g["kind"],
                g["at"],
                Text(g["why"]),
            )
        console.print(table)
        if len(_grouped(involved)) > max_rows:
            console.print("  … and more (use --format json for every rank)", style="dim")
    if d.unexplained_ranks:
        console.print(f"failed, no initiator named: {_ranks_phrase(d.unexplained_ranks)}")
    console.print(
        f"no fault seen: {_ranks_phrase(d.clean_ranks)}   no log at all: {_ranks_phrase(d.missing_ranks)}"
    )
    if len(d.attempts) > 1:
        console.print("\n[bold]Attempts[/]")
        for a in d.attempts:
            console.print(
                Text(
                    f"  attempt {a.attempt}: {a.failure_kind}, initiating {ranges(a.initiating_ranks)} — {a.summary}"
                )
            )


def render_markdown(d: Diagnosis) -> str:
    """A Markdown report for pasting into an incident ticket."""
    lines = [
        f"## rankscope verdict: {d.failure_kind}",
        "",
        f"**{d.summary}**",
        "",
        f"- initiating ranks: {ranges(d.initiating_ranks)}",
        *(f"- initiating event: {line}" for line in initiating_lines(d)),
        f"- collateral ranks: {ranges(d.collateral_ranks)}",
        *([f"- failed, no initiator named: {ranges(d.unexplained_ranks)}"] if d.unexplained_ranks else []),
        f"- ranks with no fault seen: {ranges(d.clean_ranks)}",
        f"- missing ranks (no log): {ranges(d.missing_ranks)}",
        f"- confidence: {d.confidence:.2f}"
        + (f" (lowered by: {'; '.join(d.confidence_reasons)})" if d.confidence_reasons else ""),
        f"- attempt: {d.attempt}, world size: {d.world_size if d.world_size is not None else 'unknown'}",
        "",
    ]
    for sig in d.signatures[:3]:
        lines += [
            f"### Likely cause: {sig.get('title')} (`{sig.get('id')}`)",
            "",
            str(sig.get("meaning", "")),
            "",
            f"**Fix:** {sig.get('fix', '')}",
            "",
        ]
    if d.evidence:
        lines += ["### Evidence", ""]
        for e in d.evidence:
            rank = (
                f"rank {e.rank}"
                if e.rank is not None
                else ("launcher" if e.kind in _LAUNCHER_KINDS else "no rank")
            )
            lines += [
                f"- `{e.path}:{e.line}` ({rank}, {e.kind}; {e.role})",
                "",
                "  ```",
                f"  {e.text}",
                "  ```",
            ]
        lines.append("")
    involved = [s for s in d.per_rank if s.status in ("initiating", "collateral")]
    if involved:
        lines += [
            "### Ranks involved",
            "",
            "| rank | host | status | first fault | at | explained by |",
            "|---|---|---|---|---|---|",
        ]
        for s in involved:
            lines.append(
                f"| {s.rank} | {s.host or ''} | {s.status} | {s.first_fault_kind or ''} | {s.first_fault_ts or ''} | "
                f"{_explained(s)} |"
            )
    return "\n".join(lines) + "\n"


def _flat(G: nx.DiGraph) -> nx.DiGraph:
    """A copy whose attributes are GraphML-safe scalars (lists/dicts become JSON text)."""
    import networkx as nx

    H = nx.DiGraph()

    def conv(v: Any) -> Any:
        if v is None:
            return ""
        if isinstance(v, str):
            return str(v)  # a StrEnum member (a rank's status, an edge kind) as its plain text
        if isinstance(v, (int, float, bool)):
            return v
        return json.dumps(v, default=json_default)

    H.graph.update({k: conv(v) for k, v in G.graph.items()})
    for n, data in G.nodes(data=True):
        H.add_node(str(n), **{k: conv(v) for k, v in data.items()})
    for a, b, data in G.edges(data=True):
        H.add_edge(str(a), str(b), **{k: conv(v) for k, v in data.items()})
    return H


def write_graph(G: nx.DiGraph, out: Path) -> str:
    """Write ``G`` by the extension of ``out``: .graphml, .json (node-link), .dot. Returns the format used.

    Raises ValueError for other extensions.
    """
    import networkx as nx

    ext = out.suffix.lower()
    if "basis" in G.graph:  # the rule's member: the export carries its text, ``initiator_basis``
        G = G.copy()
        del G.graph["basis"]
    if ext == ".graphml":
        nx.write_graphml(_flat(G), out)
    elif ext == ".json":
        out.write_text(json.dumps(nx.node_link_data(G, edges="edges"), indent=2, default=json_default))
    elif ext in (".dot", ".gv"):
        out.write_text(to_dot(G))
    else:
        raise ValueError(f"unknown graph format {ext!r}: use .graphml, .json or .dot")
    return ext.lstrip(".")


def to_dot(G: nx.DiGraph) -> str:
    """Graphviz DOT text: initiating ranks red, collateral orange, edges labelled with their type."""
    colors = {
        "initiating": "red",
        "collateral": "orange",
        "unexplained": "goldenrod",
        "clean": "darkgreen",
        "missing": "purple",
    }
    lines = ["digraph rankscope {", "  rankdir=LR;", "  node [shape=box, style=rounded];"]
    for n, d in G.nodes(data=True):
        label = (
            f"rank {n}"
            + (f"\\n{d['host']}" if d.get("host") else "")
            + (f"\\n{d['first_fault_kind']}" if d.get("first_fault_kind") else "")
        )
        lines.append(f'  "{n}" [label="{label}", color={colors.get(d.get("status"), "black")}];')
    for a, b, d in G.edges(data=True):
        extra = f" SeqNum {d['seq']}" if d.get("seq") is not None else ""
        lines.append(f'  "{a}" -> "{b}" [label="{d["edge"]}{extra}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
