"""The causal graph figure (:meth:`correlator.job.Job.graph`): initiating ranks in the middle, edges by type."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from correlator.plot.style import EDGE_COLORS, MANY_ROWS, STATUS_COLORS, subplots

if TYPE_CHECKING:
    import networkx as nx
    from matplotlib.figure import Figure


def graph_figure(G: nx.DiGraph) -> Figure:
    """The causal graph: initiating ranks in the middle, the others around them by host and rank, edges
    ("A's trouble is explained by B") coloured by type."""
    import networkx as nx

    nodes = sorted(G.nodes)
    n = len(nodes)
    many = n > MANY_ROWS
    fig, ax = subplots(*((8.5, 7.5) if not many else (10, 9.5)))
    ax.axis("off")
    if n == 0:
        ax.text(0.5, 0.5, "no ranks", ha="center", va="center")
        return fig
    inits = [r for r in nodes if G.nodes[r].get("status") == "initiating"]
    others = sorted(
        (r for r in nodes if r not in inits), key=lambda r: (str(G.nodes[r].get("host") or "~"), r)
    )
    shells = [inits, others] if inits and others else [nodes]
    pos = nx.shell_layout(G, nlist=shells) if len(shells) > 1 else nx.circular_layout(sorted(nodes))
    if len(inits) == 1 and others:
        pos[inits[0]] = (0.0, 0.0)
    status = {r: G.nodes[r].get("status", "clean") for r in nodes}
    etypes = sorted({d.get("edge", "?") for _, _, d in G.edges(data=True)})
    for et in etypes:
        el = [(a, b) for a, b, d in G.edges(data=True) if d.get("edge") == et]
        nx.draw_networkx_edges(
            G,
            pos,
            edgelist=el,
            ax=ax,
            edge_color=EDGE_COLORS.get(et, "#777777"),
            width=1.3 if not many else 0.4,
            alpha=0.8 if not many else 0.35,
            arrows=True,
            arrowsize=12 if not many else 5,
            node_size=600 if not many else 60,
            connectionstyle="arc3,rad=0.06",
        )
    size = 600 if n <= 32 else (260 if not many else 60)
    for st in ("clean", "collateral", "unexplained", "missing", "initiating"):
        nl = [r for r in nodes if status[r] == st]
        if not nl:
            continue
        nx.draw_networkx_nodes(
            G,
            pos,
            nodelist=nl,
            ax=ax,
            node_size=size * (1.8 if st == "initiating" else 1),
            node_color="white" if st == "missing" else STATUS_COLORS[st],
            edgecolors=STATUS_COLORS[st] if st == "missing" else "#333333",
            linewidths=1.2 if st != "initiating" else 2.0,
        )
    if not many:
        nx.draw_networkx_labels(
            G,
            pos,
            labels={r: str(r) for r in nodes},
            ax=ax,
            font_size=8 if n <= 32 else 6,
            font_color="black",
        )
    else:
        nx.draw_networkx_labels(
            G, pos, labels={r: str(r) for r in inits}, ax=ax, font_size=9, font_weight="bold"
        )
    if len(shells) > 1:
        _host_names(ax, G, others, pos)
    handles = _legend_handles(nodes, status, etypes)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    basis = G.graph.get("initiator_basis") or ""
    kind = G.graph.get("failure_kind") or ""
    ax.set_title(
        f'Causal graph: an arrow A → B reads "A\'s trouble is explained by B"\n'
        f"failure kind {kind}" + (f" · initiator found by: {basis}" if basis else ""),
        fontsize=9.5,
        loc="left",
    )
    ax.margins(0.12)
    return fig


def _host_names(ax: Any, G: nx.DiGraph, others: list[int], pos: dict[int, Any]) -> None:
    """Host names next to the first rank of each host on the outer shell (when there are several hosts)."""
    hosts_seen: set[str] = set()
    if len({G.nodes[r].get("host") for r in others}) > 1:
        for r in others:
            h = G.nodes[r].get("host")
            if h and h not in hosts_seen:
                hosts_seen.add(h)
                x, y = pos[r]
                ax.text(x * 1.16, y * 1.16, h, fontsize=7.5, color="#555555", ha="center", va="center")


def _legend_handles(nodes: list[int], status: dict[int, str], etypes: list[str]) -> list[Any]:
    """The legend: each status present with its count, then the edge types."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D(
            [],
            [],
            ls="",
            marker="o",
            ms=9,
            mfc="white" if st == "missing" else STATUS_COLORS[st],
            mec=STATUS_COLORS[st] if st == "missing" else "#333333",
            label=f"{st} ({sum(1 for r in nodes if status[r] == st)})",
        )
        for st in ("initiating", "collateral", "unexplained", "clean", "missing")
        if any(status[r] == st for r in nodes)
    ]
    handles += [
        Line2D([], [], color=EDGE_COLORS.get(et, "#777777"), lw=2, label=et.replace("_", " "))
        for et in etypes
    ]
    return handles


__all__ = ["graph_figure"]
