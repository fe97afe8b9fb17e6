"""Pictures of a failed job: the per-rank timeline, the (pg, seq) progress heatmap and the causal graph.

``timeline_figure(table, diagnosis)`` — one row per rank (grouped by host), corrected time on x, faults
coloured by kind, routine lines faint, the initiating event starred and annotated, collectives that timed out
drawn as bars (start = stamp - elapsed) and the collective everyone waits in (``diagnosis.focus``) shaded.
``progress_heatmap(table)`` — how far each rank got on each process group (:func:`correlator.align.progress`).
``graph_figure(G)`` — the causal graph of :func:`correlator.build_graph`.

All three return matplotlib ``Figure`` objects (the Agg backend: no display, no browser). ``write_report``
writes them as a self-contained HTML page (inline SVG) or one of them as PNG/SVG (``rankscope plot DIR -o
timeline.html|timeline.png``, :mod:`correlator.cli.plot`). matplotlib is imported when a figure is drawn.
"""

from __future__ import annotations

import datetime as dt
import html
import io
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from correlator.align import pg_key, progress
from correlator.perfetto import UNKNOWN_HOST, category, initiating_event_ids, prepare
from correlator.schema import Kind
from correlator.verdict import Basis

if TYPE_CHECKING:
    import networkx as nx
    from matplotlib.figure import Figure

    from correlator.diagnose import Diagnosis

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
_CAT_MARKERS = {"cause": "X", "effect": "o", "launcher": "s", "progress": "|", "log": "|"}
STATUS_COLORS = {
    "initiating": "#d62728",
    "collateral": "#ff7f0e",
    "unexplained": "#bcbd22",
    "clean": "#2ca02c",
    "missing": "#9e9e9e",
}
#: Bases whose initiator's own fault line says what happened (no need to say how it was found).
_OWN_FAULT_BASES = {b.value for b in Basis if b.names_its_own_fault}
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


def _subplots(w: float, h: float) -> tuple[Figure, Any]:
    """A figure and its axes without pyplot: no backend, no global figure registry (safe in a CLI, a server
    or a notebook, where ``display(fig)`` shows it)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    return fig, fig.subplots()


def _kind_color(kind: str) -> str:
    return KIND_COLORS.get(kind, _CAT_COLORS[category(kind)])


def _unit(span_s: float) -> tuple[float, str]:
    if span_s >= 3 * 3600:
        return 3600.0, "h"
    if span_s >= 180:
        return 60.0, "min"
    if span_s >= 2:
        return 1.0, "s"
    return 0.001, "ms"


def _rows(
    t: pl.DataFrame, diagnosis: Diagnosis | None
) -> tuple[list[tuple[str, int | None]], dict[tuple[str, int | None], int]]:
    """Row order: hosts by their lowest rank, within a host the no-rank (launcher) row first, then ranks.
    Ranks that left no log get their own rows (under ``no log``) when there are few rows."""
    hr = t.select("host_label", "rank").unique()
    rank_host = dict(
        hr.filter(pl.col("rank").is_not_null())
        .group_by("rank")
        .agg(pl.col("host_label").sort().first())
        .iter_rows()
    )
    hosts_min: dict[str, int] = {}
    for h, r in hr.iter_rows():
        key = r if r is not None else 10**9
        hosts_min[h] = min(hosts_min.get(h, 10**9), key)
    hosts = sorted(hosts_min, key=lambda h: (h == UNKNOWN_HOST and hosts_min[h] == 10**9, hosts_min[h], h))
    rows: list[tuple[str, int | None]] = []
    for h in hosts:
        if t.filter((pl.col("host_label") == h) & pl.col("rank").is_null()).height:
            rows.append((h, None))
        rows.extend((h, r) for r in sorted(r for r, hh in rank_host.items() if hh == h))
    if diagnosis is not None:
        seen = set(rank_host)
        initiating = set(diagnosis.initiating_ranks)
        missing = [r for r in diagnosis.missing_ranks if r not in seen and r not in initiating]
        rows.extend(("no log", r) for r in diagnosis.initiating_ranks if r not in seen)
        if missing:
            rows.append(("no log", -1))  # one row for all of them
    return rows, {k: i for i, k in enumerate(rows)}


#: Layers of lines a rank writes itself (a traceback, a c10d or NCCL line, the script's logging): in a
#: host's rank-less row they are the ranks' own lines that carry no rank, not the launcher's.
_RANK_LAYERS = ("python", "c10d", "nccl", "app", "fr")


def unranked_label(t: pl.DataFrame, host: str) -> str:
    """The label of ``host``'s rank-less row, by what it holds: ``launcher`` (torchelastic, srun, mpirun …
    lines, or nothing a rank writes), ``untagged lines of HOST`` (the ranks' own lines that carry no rank:
    a traceback without a ``[rankN]:`` prefix), or ``launcher + untagged lines of HOST``."""
    mine = t.filter((pl.col("host_label") == host) & pl.col("rank").is_null())
    own = mine.filter(pl.col("layer").is_in(_RANK_LAYERS)).height
    launcher = mine.filter(
        pl.col("layer").is_in(["elastic", "system"]) | (pl.col("stream") == "launcher")
    ).height
    if not own:
        return "launcher"
    where = "" if host == UNKNOWN_HOST else f" of {host}"
    return f"launcher + untagged lines{where}" if launcher else f"untagged lines{where}"


def _focus_mask(t: pl.DataFrame, focus: dict[str, Any]) -> pl.Series:
    if not focus or focus.get("seq") is None:
        return pl.Series([False] * t.height)
    fpg = str(focus.get("pg") or "0")
    return t.select(((pl.col("seq") == focus["seq"]) & (pg_key() == fpg)).fill_null(False))[:, 0]


def _waited_in(t: pl.DataFrame) -> dict[str, Any]:
    """The (pg, seq, op) most ranks timed out in, when the diagnosis names no focus."""
    w = t.filter(
        pl.col("kind").is_in(
            [Kind.WATCHDOG_TIMEOUT, Kind.WATCHDOG_STATUS, Kind.GLOO_TIMEOUT, Kind.HEARTBEAT_TIMEOUT]
        )
        & pl.col("seq").is_not_null()
        & pl.col("rank").is_not_null()
    )
    if w.height == 0:
        return {}
    top = (
        w.with_columns(pg_key().alias("pgk"))
        .group_by("pgk", "seq")
        .agg(pl.col("rank").n_unique().alias("n"), pl.col("op").drop_nulls().first().alias("op"))
        .sort("n", "seq", descending=[True, False])
        .row(0, named=True)
    )
    return {"pg": top["pgk"], "seq": top["seq"], "op": top["op"]} if top["n"] >= 2 else {}


def timeline_data(table: pl.DataFrame, diagnosis: Diagnosis) -> tuple[pl.DataFrame, str, int]:
    """The rows the timeline draws: the diagnosed attempt's rows of :func:`correlator.perfetto.prepare`
    (``tc``: the diagnosis's time, µs since the epoch, the same as the Perfetto trace's ``ts``), with ``x``
    (seconds from ``t0``, the initiating event's ``tc``, or the first event's); the time base
    (``time`` or ``event order``) and ``t0``."""
    t_all, base = prepare(table, diagnosis)
    t = t_all.filter(pl.col("attempt") == diagnosis.attempt) if t_all["attempt"].n_unique() > 1 else t_all
    inits = t.filter(pl.col("event_id").is_in(initiating_event_ids(table, diagnosis))).sort("tc")
    t0 = int(inits["tc"][0]) if inits.height else (int(t["tc"].min()) if t.height else 0)  # type: ignore[arg-type]
    return t.with_columns(((pl.col("tc") - t0) / 1e6).alias("x")), base, t0


def timeline_figure(table: pl.DataFrame, diagnosis: Diagnosis, *, max_label_rows: int = 48) -> Figure:
    """Per-rank timeline of the diagnosed attempt (see the module docstring)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    t, base, _t0 = timeline_data(table, diagnosis)
    if t.height == 0:
        fig, ax = _subplots(8, 2)
        ax.axis("off")
        ax.text(0.5, 0.5, "no events in these logs", ha="center", va="center")
        fig.suptitle(diagnosis.summary or "", fontsize=10)
        return fig
    init_ids = initiating_event_ids(table, diagnosis)
    inits = t.filter(pl.col("event_id").is_in(init_ids))
    rows, row_of = _rows(t, diagnosis)
    n = max(1, len(rows))
    many = n > MANY_ROWS
    # Each row's y: a join on (host, rank), a no-rank row matching the host's no-rank row (nulls equal).
    ys = pl.DataFrame(
        {
            "host_label": [h for h, _r in row_of],
            "rank": [r for _h, r in row_of],
            "y": list(row_of.values()),
        },
        schema={"host_label": pl.String, "rank": t.schema["rank"], "y": pl.Int32},
    )
    t = t.join(
        ys, on=["host_label", "rank"], how="left", nulls_equal=True, maintain_order="left"
    ).with_columns(pl.col("y").fill_null(-1))
    cats = {k: category(k) for k in t["kind"].unique().to_list()}
    t = t.with_columns(
        pl.col("kind").replace_strict(cats, default="log", return_dtype=pl.String).alias("cat")
    )
    focus = dict(diagnosis.focus or {})
    focus_label = "focus"
    if focus.get("seq") is None:
        focus, focus_label = _waited_in(t), "the others wait in"
    t = t.with_columns(_focus_mask(t, focus).alias("focus"))

    # Time axis: seconds relative to the initiating event (or the first event): ``x`` of timeline_data.
    slices = t.filter(
        pl.col("kind").is_in([Kind.WATCHDOG_TIMEOUT, Kind.GLOO_TIMEOUT]) & (pl.col("y") >= 0)
    ).with_columns(
        (
            pl.when(pl.col("kind") == Kind.WATCHDOG_TIMEOUT)
            .then(pl.col("elapsed_ms"))
            .otherwise(pl.col("timeout_ms"))
            / 1000.0
        ).alias("dur")
    )
    slices = (
        slices.filter(pl.col("dur").is_not_null() & (pl.col("dur") > 0)) if base == "time" else slices.head(0)
    )
    # Flight Recorder entries with a known end (NCCL's time_discovered_completed_ns): created .. completed.
    fr_sl = t.filter(
        (pl.col("kind") == Kind.FR_COLLECTIVE)
        & pl.col("ts_end").is_not_null()
        & (pl.col("y") >= 0)
        & pl.lit(base == "time")
    ).with_columns(((pl.col("ts_end") - pl.col("ts")).dt.total_microseconds() / 1e6).alias("dur"))
    slices = pl.concat([slices, fr_sl.with_columns(pl.col("x") + pl.col("dur")).filter(pl.col("dur") > 0)])
    xs = t["x"].to_list() + (slices["x"] - slices["dur"]).to_list()
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if base == "time":
        scale, unit = _unit(max(hi - lo, 1e-3))
    else:
        scale, unit = 1.0, ""
        t = t.with_columns((pl.col("x") * 1000).alias("x"))  # 1 ms per event -> 1 per event
        lo, hi = lo * 1000, hi * 1000
    t = t.with_columns((pl.col("x") / scale).alias("x"))
    slices = slices.with_columns((pl.col("x") / scale).alias("x"), (pl.col("dur") / scale).alias("dur"))
    lo, hi = lo / scale, hi / scale
    pad = max((hi - lo) * 0.04, 1e-6 if base == "time" else 1.0)

    row_h = 0.26 if n <= 24 else (0.16 if n <= MANY_ROWS else max(0.035, 9.0 / n))
    fig_h = min(max(3.6, 1.9 + n * row_h), 16.0)
    fig, ax = _subplots(13, fig_h)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(lo - pad, hi + pad * (6 if inits.height else 1))

    # Host bands.
    status = {s.rank: s.status for s in diagnosis.per_rank}
    start = 0
    bands: list[tuple[str, int, int]] = []
    for i in range(1, n + 1):
        if i == n or rows[i][0] != rows[start][0]:
            bands.append((rows[start][0], start, i - 1))
            start = i
    for j, (h, a, b) in enumerate(bands):
        if j % 2 == 0:
            ax.axhspan(a - 0.5, b + 0.5, color="#f2f2f2", zorder=0, lw=0)
        if len(bands) > 1 or h not in (UNKNOWN_HOST,):
            if j > 0:
                ax.axhline(a - 0.5, color="#cccccc", lw=0.6, zorder=0.5)
            if h != "no log":
                ax.text(
                    1.003,
                    1 - (a + b + 1) / 2 / n,
                    h,
                    transform=ax.transAxes,
                    fontsize=8 if not many else 6,
                    va="center",
                    ha="left",
                    color="#555555",
                )
        if h == "no log":
            ax.axhspan(
                a - 0.5, b + 0.5, facecolor="none", hatch="////", edgecolor="#dddddd", lw=0, zorder=0.2
            )
            from correlator.report import ranges

            in_table = set(t["rank"].drop_nulls().to_list())  # once, not per missing rank
            initiating = set(diagnosis.initiating_ranks)
            miss = sorted(r for r in diagnosis.missing_ranks if r not in in_table and r not in initiating)
            if miss:
                ax.text(
                    0.01,
                    b,
                    f"no log at all from rank{'s' if len(miss) > 1 else ''} {ranges(miss)}",
                    transform=ax.get_yaxis_transform(),
                    va="center",
                    fontsize=8,
                    color="#757575",
                )

    for h, r in rows:
        if r is not None and status.get(r) == "initiating":
            y = row_of[(h, r)]
            ax.axhspan(y - 0.5, y + 0.5, color="#fcbba1", alpha=0.45 if not many else 0.8, zorder=0.4, lw=0)

    # Each rank's span of activity: from its first to its last line (silence shows as a short line).
    spans = (
        t.filter(pl.col("y") >= 0)
        .group_by("y")
        .agg(pl.col("x").min().alias("a"), pl.col("x").max().alias("b"))
    )
    ax.hlines(spans["y"], spans["a"], spans["b"], color="#9e9e9e", lw=0.8 if not many else 0.4, zorder=1)

    # Timed-out collectives as bars.
    if slices.height:
        fs = slices.filter(pl.col("focus"))
        ax.barh(
            slices["y"],
            slices["dur"],
            left=slices["x"] - slices["dur"],
            height=0.55 if not many else 0.9,
            color="#ffbb78",
            alpha=0.55,
            lw=0,
            zorder=1.5,
        )
        if fs.height:
            ax.barh(
                fs["y"],
                fs["dur"],
                left=fs["x"] - fs["dur"],
                height=0.55 if not many else 0.9,
                color="#ffbb78",
                edgecolor="#e6550d",
                lw=0.6 if not many else 0.2,
                zorder=1.6,
            )

    # Routine lines and progress, faint; omitted when there are many ranks.
    pts = t.filter(pl.col("y") >= 0)
    if not many:
        rout = pts.filter(pl.col("cat").is_in(["log", "progress"]))
        prog = rout.filter(pl.col("cat") == "progress")
        other = rout.filter(pl.col("cat") == "log")
        ax.scatter(other["x"], other["y"], marker="|", s=40, c="#c8c8c8", lw=0.8, zorder=2, rasterized=True)
        ax.scatter(prog["x"], prog["y"], marker="|", s=40, c="#6baed6", lw=0.9, zorder=2.1, rasterized=True)

    # Faults, coloured by kind; the focus collective ringed.
    faults = pts.filter(pl.col("cat").is_in(["cause", "effect", "launcher"])).sort("cat", descending=True)
    kinds_present: dict[str, int] = {}
    for (cat,), part in faults.group_by("cat", maintain_order=True):
        size = {"cause": 110, "effect": 42, "launcher": 36}[cat] * (0.45 if many else 1)
        ax.scatter(
            part["x"],
            part["y"],
            marker=_CAT_MARKERS[cat],
            s=size,
            c=[_kind_color(k) for k in part["kind"].to_list()],
            edgecolors=["black" if f else "none" for f in part["focus"].to_list()],
            linewidths=0.5,
            zorder=3 if cat != "cause" else 4,
            alpha=0.95,
        )
        for k in part["kind"].to_list():
            kinds_present[k] = kinds_present.get(k, 0) + 1

    # The focus collective: the time span of its events.
    fev = t.filter(pl.col("focus"))
    if fev.height and base == "time":
        fa = float(fev["x"].min())  # type: ignore[arg-type]
        fb = float(fev["x"].max())  # type: ignore[arg-type]
        fsl = slices.filter(pl.col("focus"))
        if fsl.height:
            fa = min(fa, float((fsl["x"] - fsl["dur"]).min()))  # type: ignore[arg-type]
        ax.axvspan(fa, max(fb, fa + (hi - lo) * 0.003), color="#fdd0a2", alpha=0.25, zorder=0.3, lw=0)
        what = f"{focus.get('op') or 'collective'} SeqNum {focus['seq']} (pg {focus.get('pg') or '0'})"
        if focus.get("majority"):
            what += f"; the majority ran {focus['majority']}"
        ax.text(
            (fa + fb) / 2,
            n - 0.5,
            f"{focus_label}: {what}",
            ha="center",
            va="bottom",
            fontsize=8,
            color="#a63603",
            zorder=8,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
        )

    # The initiating event(s), starred and annotated.
    starred = t.filter(pl.col("event_id").is_in(init_ids) & (pl.col("y") >= 0)).sort("x", "y")
    ax.scatter(
        starred["x"],
        starred["y"],
        marker="*",
        s=420 if not many else 260,
        c="#ffdd00",
        edgecolors="#b30000",
        linewidths=1.4,
        zorder=6,
    )
    star_ranks = sorted(set(starred["rank"].drop_nulls().to_list()))
    for i, row in enumerate(starred.head(2 if starred.height <= 2 else 1).iter_rows(named=True)):
        what = row["exc_type"] or (
            f"exit {row['exit_code']}" if row["exit_code"] is not None else row["kind"]
        )
        if category(row["kind"]) in ("progress", "log"):
            what = f"last ordinary line: {row['kind'].replace('_', ' ')}"
        stamp = ""
        if base == "time" and not row["ts_inferred"]:
            stamp = "\n" + dt.datetime.fromtimestamp(row["tc"] / 1e6, dt.UTC).strftime(
                "%Y-%m-%d %H:%M:%S UTC"
            )
        basis = diagnosis.initiator_basis
        if basis and basis not in _OWN_FAULT_BASES:
            what = f"{basis}\n{what}"
        label = f"rank {row['rank']}: {what}{stamp}\n{row['path']}:{row['line']}"
        if starred.height > 2:
            from correlator.report import ranges

            label = f"{len(star_ranks)} initiating ranks ({ranges(star_ranks)}), first: {label}"
        xl = ax.get_xlim()
        left = row["x"] > xl[0] + 0.55 * (xl[1] - xl[0])
        ax.annotate(
            label,
            (row["x"], row["y"]),
            xytext=(-16 if left else 16, 16 + 34 * i),
            ha="right" if left else "left",
            textcoords="offset points",
            fontsize=8.5,
            color="#8b0000",
            fontweight="bold",
            zorder=7,
            bbox={"boxstyle": "round,pad=0.3", "fc": "#fffbe6", "ec": "#b30000", "lw": 0.8, "alpha": 0.95},
            arrowprops={"arrowstyle": "-", "color": "#b30000", "lw": 0.8},
        )

    # y labels: ranks coloured by their status; thinned when there are many.
    labels = []
    for h, r in rows:
        if r is None:
            labels.append(unranked_label(t, h))
        else:
            labels.append(
                f"rank {r}"
                if h != "no log"
                else (f"rank {r} (no log)" if r >= 0 else f"no log ({len(diagnosis.missing_ranks)})")
            )
    if not many and n <= max_label_rows * 2:
        ticks = list(range(n))
    else:
        first_rank: dict[str, int] = {}
        for i, (h, r) in enumerate(rows):
            if r is not None and r >= 0:
                first_rank.setdefault(h, i)
        ticks = sorted(
            set(first_rank.values())
            | {row_of[(h, r)] for h, r in rows if r is not None and status.get(r) == "initiating"}
        )
        must = {row_of[(h, r)] for h, r in rows if r is not None and status.get(r) == "initiating"}
        if len(ticks) > max_label_rows:
            step = -(-len(ticks) // max_label_rows)
            ticks = sorted(set(ticks[::step]) | must)
        gap = max(1, n // 60)
        ticks = [i for i in ticks if i in must or all(abs(i - m) > gap for m in must)]
    ax.set_yticks(ticks, [labels[i] for i in ticks], fontsize=8 if n <= 32 else 6.5)
    for lab, i in zip(ax.get_yticklabels(), ticks):
        h, r = rows[i]
        st = status.get(r) if r is not None else None
        if st == "initiating":
            lab.set_color(STATUS_COLORS["initiating"])
            lab.set_fontweight("bold")
        elif st == "collateral":
            lab.set_color("#b35806")
        elif st == "missing" or h == "no log":
            lab.set_color("#9e9e9e")
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#e0e0e0", lw=0.5, zorder=0)
    ax.set_axisbelow(True)
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)
    if base == "time":
        ref = "the initiating event" if inits.height else "the first event"
        ax.set_xlabel(f"time ({unit}) relative to {ref}, host clocks aligned", fontsize=9)
    else:
        ax.set_xlabel("event order (these logs carry no timestamps)", fontsize=9)

    # Legend: the fault kinds present, then the marks.
    handles: list[Any] = []
    for k, c in sorted(
        kinds_present.items(), key=lambda kc: (["cause", "effect", "launcher"].index(category(kc[0])), kc[0])
    ):
        cat = category(k)
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker=_CAT_MARKERS[cat],
                ms=7 if cat == "cause" else 5,
                mfc=_kind_color(k),
                mec="none",
                label=f"{k} ({c})",
            )
        )
    if inits.height:
        handles.append(
            Line2D([], [], ls="", marker="*", ms=12, mfc="#ffdd00", mec="#b30000", label="initiating event")
        )
    if slices.height:
        timed = slices.filter(pl.col("kind") != Kind.FR_COLLECTIVE).height
        handles.append(
            Patch(
                fc="#ffbb78",
                alpha=0.7,
                label="collective until it timed out"
                if timed == slices.height
                else "collective (Flight Recorder start .. end)"
                if not timed
                else "collective (timed out / Flight Recorder)",
            )
        )
    if not many:
        handles.append(
            Line2D([], [], ls="", marker="|", ms=7, mec="#6baed6", label="progress (step, collective)")
        )
        handles.append(Line2D([], [], ls="", marker="|", ms=7, mec="#c8c8c8", label="other log line"))
    handles.append(Line2D([], [], color="#9e9e9e", lw=1, label="first to last line"))
    host_w = (
        max((len(h) for h, _, _ in bands if h != "no log"), default=0)
        if len(bands) > 1 or rows[0][0] != UNKNOWN_HOST
        else 0
    )
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.015 + 0.0062 * host_w, 1.0),
        fontsize=7.5,
        frameon=False,
        title="events",
        title_fontsize=8,
        alignment="left",
    )

    summary = "\n".join(textwrap.wrap(diagnosis.summary or "", 120)[:3])
    fig.suptitle(summary, fontsize=10.5, fontweight="bold", ha="left", x=0.01)
    sub = (
        f"failure kind {diagnosis.failure_kind} · confidence {diagnosis.confidence:.2f} · attempt {diagnosis.attempt}"
        f" · {len(diagnosis.ranks_seen)} ranks seen"
        + (f" of {diagnosis.world_size}" if diagnosis.world_size else "")
    )
    if many:
        sub += " · routine lines omitted"
    ax.set_title(sub, fontsize=8.5, loc="left", color="#555555")
    return fig


def progress_heatmap(table: pl.DataFrame) -> Figure:
    """Where each rank stopped: per process group, how far behind the group's furthest rank it is.

    Cells show the highest sequence number the rank entered (``entered``); the colour is the lag behind the
    group's maximum (white = at the front). Process groups are columns, ranks rows.
    """
    import numpy as np
    from matplotlib.colors import LinearSegmentedColormap

    prog = progress(table)
    if prog.height == 0:
        fig, ax = _subplots(6, 2)
        ax.axis("off")
        ax.text(0.5, 0.5, "no collective sequence numbers or steps in these logs", ha="center", va="center")
        return fig
    pgs = prog.group_by("pg").agg(pl.len().alias("n"), pl.col("entered").max().alias("mx"))
    pgs = pgs.sort(pl.col("pg") == "step", pl.col("n"), pl.col("pg"), descending=[False, True, False])
    pg_list = pgs["pg"].to_list()[:24]
    seen = table.filter(~pl.col("duplicate"))["rank"].drop_nulls().unique().to_list()
    ranks = sorted(
        set(prog["rank"].unique().to_list()) | set(seen)
    )  # a rank with no sequence line stays, grey
    ri = {r: i for i, r in enumerate(ranks)}
    pj = {p: j for j, p in enumerate(pg_list)}
    lag = np.full((len(ranks), len(pg_list)), np.nan)
    text = [["" for _ in pg_list] for _ in ranks]
    mx = dict(pgs.select("pg", "mx").iter_rows())
    for pg, r, ent, comp, _ in prog.iter_rows():
        if pg not in pj:
            continue
        lag[ri[r], pj[pg]] = ent - mx[pg]
        text[ri[r]][pj[pg]] = str(ent) + (f"\n✓{comp}" if comp is not None and comp != ent else "")
    n = len(ranks)
    wide = n > 48  # many ranks: ranks along x, process groups as rows
    if wide:
        fig_w, fig_h = 13.0, min(max(2.6, 1.7 + 0.45 * len(pg_list)), 12)
    else:
        fig_h = min(max(2.8, 1.4 + n * (0.3 if n <= 32 else max(0.04, 10 / n))), 16)
        fig_w = min(max(5.0, 2.2 + 1.3 * len(pg_list)), 16)
    fig, ax = _subplots(fig_w, fig_h)
    worst = float(np.nanmin(lag)) if np.isfinite(lag).any() else 0.0
    cmap = LinearSegmentedColormap.from_list(
        "lag", ["#b30000", "#fc8d59", "#fee8c8", "#ffffff"]
    ).with_extremes(bad="#eeeeee")
    vmin = min(worst, -1.0)
    im = ax.imshow(
        np.ma.masked_invalid(lag.T if wide else lag),
        aspect="auto",
        cmap=cmap,
        vmin=vmin,
        vmax=0,
        interpolation="nearest",
    )
    if not wide and n <= 40 and len(pg_list) <= 12:
        for i in range(n):
            for j in range(len(pg_list)):
                if text[i][j]:
                    behind = np.isfinite(lag[i, j]) and lag[i, j] < 0
                    ax.text(
                        j,
                        i,
                        text[i][j].split("\n")[0],
                        ha="center",
                        va="center",
                        fontsize=7.5,
                        color="white" if behind and lag[i, j] < vmin / 2 else "black",
                        fontweight="bold" if behind else "normal",
                    )

    def short(p: str) -> str:
        return p if len(p) <= 18 else p[:8] + "…" + p[-6:]

    pg_labels = [
        ("training step (app log)" if p == "step" else f"pg {short(p)}")
        + f"{' · ' if wide else chr(10)}max {mx[p]}"
        for p in pg_list
    ]
    coll = [j for j, p in enumerate(pg_list) if p != "step"]
    behind_ranks = sorted(
        {ranks[i] for i in range(n) for j in coll if np.isfinite(lag[i, j]) and lag[i, j] < 0}
    )
    silent = [r for r in ranks if not np.isfinite(lag[ri[r]]).any()]
    if wide:
        ax.set_yticks(range(len(pg_list)), pg_labels, fontsize=8)
        step = -(-n // 32)
        must = {ri[r] for r in behind_ranks[:8]}
        keep = sorted({i for i in range(0, n, step) if all(abs(i - m) > step // 2 for m in must)} | must)
        ax.set_xticks(keep, [str(ranks[i]) for i in keep], fontsize=7, rotation=90)
        ax.set_xlabel("rank", fontsize=8)
        rank_labels = ax.get_xticklabels()
    else:
        ax.set_xticks(range(len(pg_list)), pg_labels, fontsize=8)
        ax.xaxis.tick_top()
        ax.set_yticks(range(n), [f"rank {r}" for r in ranks], fontsize=7.5 if n > 16 else 8.5)
        rank_labels = ax.get_yticklabels()
    for lab in rank_labels:
        try:
            r = int(lab.get_text().split()[-1])
        except (IndexError, ValueError):
            continue
        if r in behind_ranks:
            lab.set_color("#b30000")
            lab.set_fontweight("bold")
        elif r in silent:
            lab.set_color("#b30000")
            lab.set_fontstyle("italic")
    cb = fig.colorbar(im, ax=ax, shrink=0.6 if n > 8 and not wide else 0.9, pad=0.02)
    cb.set_label("behind the furthest rank (sequence numbers)", fontsize=8)
    cb.ax.tick_params(labelsize=7)
    from correlator.report import ranges

    title = "Where each rank stopped: highest collective entered, per process group"
    if behind_ranks:
        sub = f"behind on a collective: rank{'s' if len(behind_ranks) > 1 else ''} {ranges(behind_ranks)}"
    elif silent:  # a hung rank often logs no sequence number at all: it is not "not behind"
        sub = "no rank that logged a sequence number is behind"
    else:
        sub = "no rank is behind on a collective sequence"
    if silent:
        sub += (
            f" · grey: no sequence number logged (rank{'s' if len(silent) > 1 else ''} {ranges(silent)}; "
            "a hung or straggling rank shows this way)"
        )
    ax.set_title(f"{title}\n{sub}", fontsize=9.5, loc="left")
    return fig


def graph_figure(G: nx.DiGraph) -> Figure:
    """The causal graph: initiating ranks in the middle, the others around them by host and rank, edges
    ("A's trouble is explained by B") coloured by type."""
    import networkx as nx
    from matplotlib.lines import Line2D

    nodes = sorted(G.nodes)
    n = len(nodes)
    many = n > MANY_ROWS
    fig, ax = _subplots(*((8.5, 7.5) if not many else (10, 9.5)))
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
    # Host names next to the first rank of each host on the outer shell.
    hosts_seen: set[str] = set()
    if len(shells) > 1 and len({G.nodes[r].get("host") for r in others}) > 1:
        for r in others:
            h = G.nodes[r].get("host")
            if h and h not in hosts_seen:
                hosts_seen.add(h)
                x, y = pos[r]
                ax.text(x * 1.16, y * 1.16, h, fontsize=7.5, color="#555555", ha="center", va="center")
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


def figure_bytes(fig: Figure, fmt: str, dpi: int = 110) -> bytes:
    """Render ``fig`` as ``png`` or ``svg`` bytes and close it."""
    buf = io.BytesIO()
    fig.savefig(
        buf, format=fmt, dpi=dpi, bbox_inches="tight", metadata={"Software": None} if fmt == "png" else None
    )
    return buf.getvalue()


def report_html(table: pl.DataFrame, diagnosis: Diagnosis, G: nx.DiGraph, title: str = "rankscope") -> str:
    """A self-contained HTML page: the verdict, the evidence, and the three figures as inline SVG."""

    def svg(fig: Figure) -> str:
        s = figure_bytes(fig, "svg").decode("utf-8")
        return s[s.index("<svg") :]

    from correlator.report import initiating_lines, ranges

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
<h2>Timeline</h2>{svg(timeline_figure(table, diagnosis))}
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
) -> None:
    """Write ``path``: ``.html`` (all figures and the verdict) or ``.png``/``.svg`` (one ``figure``:
    timeline | progress | graph)."""
    from correlator.graph import build_graph

    path = Path(path)
    ext = path.suffix.lower()
    if ext not in FORMATS:
        raise ValueError(f"{path}: unknown plot format; use .html, .png or .svg")
    if G is None and (ext in (".html", ".htm") or figure == "graph"):
        G = build_graph(table, diagnosis.attempt)
    if ext in (".html", ".htm"):
        path.write_text(report_html(table, diagnosis, G, title=f"rankscope: {path.stem}"), encoding="utf-8")
        return
    if figure == "progress":
        fig = progress_heatmap(table.filter(pl.col("attempt") == diagnosis.attempt))
    elif figure == "graph":
        fig = graph_figure(G)
    else:
        fig = timeline_figure(table, diagnosis)
    path.write_bytes(figure_bytes(fig, ext[1:]))
