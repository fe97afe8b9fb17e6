"""The figures written out: PNG/SVG bytes, the self-contained HTML page (verdict, evidence and every figure),
and :func:`write_report`, which picks by the file's extension."""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from correlator.plot.graph import graph_figure
from correlator.plot.progress import progress_heatmap
from correlator.plot.style import FORMATS
from correlator.plot.timeline import timeline_figure

if TYPE_CHECKING:
    import networkx as nx
    from matplotlib.figure import Figure

    from correlator.verdict import Diagnosis


def figure_bytes(fig: Figure, fmt: str, dpi: int = 110) -> bytes:
    """Render ``fig`` as ``png`` or ``svg`` bytes and close it."""
    buf = io.BytesIO()
    fig.savefig(
        buf, format=fmt, dpi=dpi, bbox_inches="tight", metadata={"Software": None} if fmt == "png" else None
    )
    return buf.getvalue()


#: The rows a page drawn from what diagnosis reads holds (:mod:`correlator.reduce`).
_THINNED = (
    "every fault, launcher and agent line is drawn; of the collectives, progress and NCCL chatter the last "
    "of each rank, of the script's own lines the first and last"
)
#: What a page or figure drawn from the rows diagnosis reads says of them (``rankscope plot --reduced``, the
#: default above ``correlator.api.PLOT_EVERY_LINE_BYTES`` of logs).
REDUCED_NOTE = (
    f"routine lines thinned as diagnosis reads them: {_THINNED}; "
    "`rankscope plot --every-line` draws every line"
)
#: What a page drawn from a ``rankscope timeline`` table says of the rows drawn: diagnosis reads a table that
#: way whatever the options (``correlator.streaming.reduced_from_parquet``).
TABLE_NOTE = (
    f"routine lines thinned as diagnosis reads a timeline table: {_THINNED}; "
    "`rankscope plot --every-line` of the logs draws every line"
)


def report_html(
    table: pl.DataFrame,
    diagnosis: Diagnosis,
    G: nx.DiGraph,
    title: str = "rankscope",
    note: str | None = None,
) -> str:
    """A self-contained HTML page: the verdict, the evidence, and the three figures as inline SVG; ``note``
    (e.g. :data:`REDUCED_NOTE`) is shown under the timeline's heading."""

    def svg(fig: Figure) -> str:
        s = figure_bytes(fig, "svg").decode("utf-8")
        return s[s.index("<svg") :]

    from correlator.report import initiating_lines, ranges

    said = f'<p class="muted">{html.escape(note)}</p>' if note else ""

    init = "".join(f"<li>initiating event: {html.escape(line)}</li>" for line in initiating_lines(diagnosis))
    ev = "".join(
        f"<tr><td>{html.escape(e.role)}</td><td>{'' if e.rank is None else e.rank}</td><td>{html.escape(e.kind)}</td>"
        f"<td><code>{html.escape(e.path)}:{e.line}</code></td><td><code>{html.escape(e.text)}</code></td></tr>"
        for e in diagnosis.evidence
    )
    reasons = "".join(f"<li>{html.escape(r)}</li>" for r in diagnosis.confidence_reasons)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 1.5em; color: #222; }}
h1 {{ font-size: 1.3em; }} h2 {{ font-size: 1.05em; margin-top: 1.6em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }} td, th {{ border-bottom: 1px solid #ddd; padding: 3px 8px;
text-align: left; vertical-align: top; }} code {{ font-size: 0.95em; }} svg {{ max-width: 100%; height: auto; }}
.verdict {{ font-size: 1.1em; font-weight: 600; }} .muted {{ color: #666; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p class="verdict">{html.escape(diagnosis.summary)}</p>
<p class="muted">failure kind <b>{html.escape(diagnosis.failure_kind)}</b> · confidence {diagnosis.confidence:.2f} ·
attempt {diagnosis.attempt} · initiating {html.escape(ranges(diagnosis.initiating_ranks))} ·
collateral {html.escape(ranges(diagnosis.collateral_ranks))} · missing {html.escape(ranges(diagnosis.missing_ranks))}</p>
{f"<ul>{init}</ul>" if init else ""}
{f'<ul class="muted">{reasons}</ul>' if reasons else ""}
<h2>Evidence</h2><table><tr><th>role</th><th>rank</th><th>kind</th><th>where</th><th>line</th></tr>{ev}</table>
<h2>Timeline</h2>{said}{svg(timeline_figure(table, diagnosis))}
<h2>Progress per process group</h2>{svg(progress_heatmap(table.filter(pl.col("attempt") == diagnosis.attempt)))}
<h2>Causal graph</h2>{svg(graph_figure(G))}
</body></html>
"""


def write_report(
    table: pl.DataFrame,
    diagnosis: Diagnosis,
    path: str | Path,
    figure: str = "timeline",
    G: nx.DiGraph | None = None,
    note: str | None = None,
) -> None:
    """Write ``path``: ``.html`` (all figures and the verdict) or ``.png``/``.svg`` (one ``figure``:
    timeline | progress | graph). ``G``: the causal graph to draw; by default the one the verdict was read
    from (:attr:`correlator.diagnose.Diagnosis.findings`), else the records' own graph
    (:meth:`correlator.job.Job.graph` does the same). ``note``: what the page says of the rows drawn (HTML
    only; see :func:`report_html`)."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in FORMATS:
        raise ValueError(f"{path}: unknown plot format; use .html, .png or .svg")
    if G is None and (ext in (".html", ".htm") or figure == "graph"):
        from correlator.job import verdict_graph

        G = verdict_graph(diagnosis)
    if ext in (".html", ".htm"):
        page = report_html(table, diagnosis, G, title=f"rankscope: {path.stem}", note=note)
        path.write_text(page, encoding="utf-8")
        return
    if figure == "progress":
        fig = progress_heatmap(table.filter(pl.col("attempt") == diagnosis.attempt))
    elif figure == "graph":
        fig = graph_figure(G)
    else:
        fig = timeline_figure(table, diagnosis)
    path.write_bytes(figure_bytes(fig, ext[1:]))


__all__ = ["REDUCED_NOTE", "TABLE_NOTE", "figure_bytes", "report_html", "write_report"]
