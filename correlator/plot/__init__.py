"""Pictures of a failed job: the per-rank timeline, the (pg, seq) progress heatmap and the causal graph.

``timeline_figure(table, diagnosis)`` (:mod:`correlator.plot.timeline`) — one row per rank (grouped by
host), corrected time on x, faults coloured by kind, routine lines faint, the initiating event starred and
annotated, collectives that timed out drawn as bars (start = stamp - elapsed) and the collective everyone
waits in (``diagnosis.focus``) shaded. ``progress_heatmap(table)`` (:mod:`correlator.plot.progress`) — how
far each rank got on each process group (:func:`correlator.align.progress`). ``graph_figure(G)``
(:mod:`correlator.plot.graph`) — the causal graph of :meth:`correlator.job.Job.graph`.

All three return matplotlib ``Figure`` objects (the Agg backend: no display, no browser); colours and the
figure factory are :mod:`correlator.plot.style`. :mod:`correlator.plot.page` writes them: ``write_report``
as a self-contained HTML page (inline SVG) or one of them as PNG/SVG (``rankscope plot DIR -o
timeline.html|timeline.png``, :mod:`correlator.cli.plot`). matplotlib is imported when a figure is drawn.
"""

from correlator.plot.graph import graph_figure
from correlator.plot.page import REDUCED_NOTE, TABLE_NOTE, figure_bytes, report_html, write_report
from correlator.plot.progress import progress_heatmap
from correlator.plot.style import EDGE_COLORS, FORMATS, KIND_COLORS, MANY_ROWS, STATUS_COLORS
from correlator.plot.timeline import timeline_data, timeline_figure, unranked_label

__all__ = [
    "EDGE_COLORS",
    "FORMATS",
    "KIND_COLORS",
    "MANY_ROWS",
    "REDUCED_NOTE",
    "STATUS_COLORS",
    "TABLE_NOTE",
    "figure_bytes",
    "graph_figure",
    "progress_heatmap",
    "report_html",
    "timeline_data",
    "timeline_figure",
    "unranked_label",
    "write_report",
]
