"""What the figures share: colours per fault kind, status and edge type, marks per category, the figure
factory (no pyplot) and the time unit of an axis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from correlator.perfetto import category
from correlator.verdict import Basis

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Colour per fault kind (others of the same category fall back to the category colour).
KIND_COLORS: dict[str, str] = {
    # causes: reds
    "cuda_oom": "#d62728",
    "cuda_error": "#b3001b",
    "python_exception": "#e8464a",
    "process_killed": "#8b0000",
    "ddp_error": "#ff6f61",
    "collective_mismatch": "#c2185b",
    # waiting / timeouts: oranges
    "watchdog_timeout": "#ff7f0e",
    "watchdog_status": "#f5a623",
    "heartbeat_timeout": "#e6550d",
    "gloo_timeout": "#fd8d3c",
    "monitored_barrier_failed": "#d95f02",
    "monitored_barrier_peer": "#fdae6b",
    # network / teardown: purples and browns
    "watchdog_teardown": "#8c6d31",
    "async_error": "#9467bd",
    "nccl_error": "#7b4173",
    "nccl_net_error": "#6a3d9a",
    "nccl_warn": "#a55194",
    "gloo_connection_closed": "#756bb1",
    "store_error": "#636363",
    "nccl_peer_closed": "#bcbddc",
    "nccl_abort": "#9e9ac8",
    # launcher: blues
    "worker_failed": "#1f77b4",
    "worker_signalled": "#6baed6",
    "failure_entry": "#3182bd",
    "root_cause_entry": "#08519c",
    "error_file": "#4292c6",
    "launcher_error": "#2171b5",
    "process_exit": "#17becf",
    "job_cancelled": "#084594",
    "restart": "#9ecae1",
}
_CAT_COLORS = {
    "cause": "#d62728",
    "effect": "#ff7f0e",
    "launcher": "#1f77b4",
    "progress": "#9ecae1",
    "log": "#bdbdbd",
}
CAT_MARKERS = {"cause": "X", "effect": "o", "launcher": "s", "progress": "|", "log": "|"}
STATUS_COLORS = {
    "initiating": "#d62728",
    "collateral": "#ff7f0e",
    "unexplained": "#bcbd22",
    "clean": "#2ca02c",
    "missing": "#9e9e9e",
}
#: Bases whose initiator's own fault line says what happened (no need to say how it was found).
OWN_FAULT_BASES = {b.value for b in Basis if b.names_its_own_fault}
EDGE_COLORS = {
    "waits_for": "#ff7f0e",
    "peer_error": "#9467bd",
    "mismatch": "#c2185b",
    "killed_by": "#1f77b4",
    "exited_before": "#8c564b",
}
#: Above this many rows routine lines are not drawn and y labels are thinned.
MANY_ROWS = 64
FORMATS = (".html", ".htm", ".png", ".svg")


def subplots(w: float, h: float) -> tuple[Figure, Any]:
    """A figure and its axes without pyplot: no backend, no global figure registry (safe in a CLI, a server
    or a notebook, where ``display(fig)`` shows it)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    return fig, fig.subplots()


def kind_color(kind: str) -> str:
    return KIND_COLORS.get(kind, _CAT_COLORS[category(kind)])


def time_unit(span_s: float) -> tuple[float, str]:
    if span_s >= 3 * 3600:
        return 3600.0, "h"
    if span_s >= 180:
        return 60.0, "min"
    if span_s >= 2:
        return 1.0, "s"
    return 0.001, "ms"


__all__ = [
    "CAT_MARKERS",
    "EDGE_COLORS",
    "FORMATS",
    "KIND_COLORS",
    "MANY_ROWS",
    "OWN_FAULT_BASES",
    "STATUS_COLORS",
    "kind_color",
    "subplots",
    "time_unit",
]
