"""The per-rank timeline of the diagnosed attempt.

One row per rank (grouped by host), corrected time on x, faults coloured by kind, routine lines faint, the
initiating event starred and annotated, collectives that timed out drawn as bars (start = stamp - elapsed)
and the collective everyone waits in (``diagnosis.focus``) shaded. :func:`timeline_figure` lays out a
:class:`_Frame` (what is drawn where) and draws it layer by layer, back to front.
"""

from __future__ import annotations

import datetime as dt
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from correlator.align import pg_key
from correlator.perfetto import UNKNOWN_HOST, category, initiating_event_ids, prepare
from correlator.plot.style import (
    CAT_MARKERS,
    MANY_ROWS,
    OWN_FAULT_BASES,
    STATUS_COLORS,
    kind_color,
    subplots,
    time_unit,
)
from correlator.schema import Kind

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from correlator.verdict import Diagnosis

Row = tuple[str, int | None]


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


@dataclass
class _Frame:
    """What the layers of one timeline read: the rows drawn (``t``: ``x`` in ``unit``s, ``y`` the row, ``cat``
    the kind's category, ``focus``), the collectives drawn as bars (``slices``: ``x`` their end, ``dur``), the
    rows of the figure, the x range, the initiating events and each rank's status."""

    t: pl.DataFrame
    slices: pl.DataFrame
    rows: list[Row]
    row_of: dict[Row, int]
    base: str
    lo: float
    hi: float
    unit: str
    inits: pl.DataFrame
    init_ids: list[int]
    status: dict[int, str]
    focus: dict[str, Any]
    focus_label: str

    @property
    def n(self) -> int:
        return max(1, len(self.rows))

    @property
    def many(self) -> bool:
        return self.n > MANY_ROWS


def timeline_figure(table: pl.DataFrame, diagnosis: Diagnosis, *, max_label_rows: int = 48) -> Figure:
    """Per-rank timeline of the diagnosed attempt (see the module docstring)."""
    f = _frame(table, diagnosis)
    if f is None:
        fig, ax = subplots(8, 2)
        ax.axis("off")
        ax.text(0.5, 0.5, "no events in these logs", ha="center", va="center")
        fig.suptitle(diagnosis.summary or "", fontsize=10)
        return fig
    n = f.n
    row_h = 0.26 if n <= 24 else (0.16 if n <= MANY_ROWS else max(0.035, 9.0 / n))
    fig_h = min(max(3.6, 1.9 + n * row_h), 16.0)
    fig, ax = subplots(13, fig_h)
    ax.set_ylim(n - 0.5, -0.5)
    pad = max((f.hi - f.lo) * 0.04, 1e-6 if f.base == "time" else 1.0)
    ax.set_xlim(f.lo - pad, f.hi + pad * (6 if f.inits.height else 1))
    bands = _draw_hosts(ax, f, diagnosis)
    _draw_lines(ax, f)
    kinds_present = _draw_faults(ax, f)
    _draw_focus(ax, f)
    _draw_initiating(ax, f, diagnosis)
    _draw_y_labels(ax, f, diagnosis, max_label_rows)
    _draw_axes(ax, f)
    _draw_legend(ax, f, kinds_present, bands)
    summary = "\n".join(textwrap.wrap(diagnosis.summary or "", 120)[:3])
    fig.suptitle(summary, fontsize=10.5, fontweight="bold", ha="left", x=0.01)
    sub = (
        f"failure kind {diagnosis.failure_kind} · confidence {diagnosis.confidence:.2f} · attempt {diagnosis.attempt}"
        f" · {len(diagnosis.ranks_seen)} ranks seen"
        + (f" of {diagnosis.world_size}" if diagnosis.world_size else "")
    )
    if f.many:
        sub += " · routine lines omitted"
    ax.set_title(sub, fontsize=8.5, loc="left", color="#555555")
    return fig


def _frame(table: pl.DataFrame, diagnosis: Diagnosis) -> _Frame | None:
    """The layout of the timeline: rows placed, kinds categorised, the focus marked, bars and x scaled
    (None: no events)."""
    t, base, _t0 = timeline_data(table, diagnosis)
    if t.height == 0:
        return None
    init_ids = initiating_event_ids(table, diagnosis)
    inits = t.filter(pl.col("event_id").is_in(init_ids))
    rows, row_of = _rows(t, diagnosis)
    t = _placed(t, row_of)
    focus = dict(diagnosis.focus or {})
    focus_label = "focus"
    if focus.get("seq") is None:
        focus, focus_label = _waited_in(t), "the others wait in"
    t = t.with_columns(_focus_mask(t, focus).alias("focus"))
    # Time axis: seconds relative to the initiating event (or the first event): ``x`` of timeline_data.
    slices = _slices(t, base)
    xs = t["x"].to_list() + (slices["x"] - slices["dur"]).to_list()
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if base == "time":
        scale, unit = time_unit(max(hi - lo, 1e-3))
    else:
        scale, unit = 1.0, ""
        t = t.with_columns((pl.col("x") * 1000).alias("x"))  # 1 ms per event -> 1 per event
        lo, hi = lo * 1000, hi * 1000
    t = t.with_columns((pl.col("x") / scale).alias("x"))
    slices = slices.with_columns((pl.col("x") / scale).alias("x"), (pl.col("dur") / scale).alias("dur"))
    status = {s.rank: s.status for s in diagnosis.per_rank}
    return _Frame(
        t,
        slices,
        rows,
        row_of,
        base,
        lo / scale,
        hi / scale,
        unit,
        inits,
        init_ids,
        status,
        focus,
        focus_label,
    )


def _placed(t: pl.DataFrame, row_of: dict[Row, int]) -> pl.DataFrame:
    """``t`` with each row's ``y`` (a join on (host, rank), a no-rank row matching the host's no-rank row:
    nulls equal; -1 for none) and ``cat``, its kind's category."""
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
    return t.with_columns(
        pl.col("kind").replace_strict(cats, default="log", return_dtype=pl.String).alias("cat")
    )


def _slices(t: pl.DataFrame, base: str) -> pl.DataFrame:
    """The collectives drawn as bars (``x``: their end, ``dur`` seconds): the ones that timed out (start =
    stamp - elapsed), and Flight Recorder entries with a known end (NCCL's time_discovered_completed_ns:
    created .. completed). None without timestamps."""
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
    fr_sl = t.filter(
        (pl.col("kind") == Kind.FR_COLLECTIVE)
        & pl.col("ts_end").is_not_null()
        & (pl.col("y") >= 0)
        & pl.lit(base == "time")
    ).with_columns(((pl.col("ts_end") - pl.col("ts")).dt.total_microseconds() / 1e6).alias("dur"))
    return pl.concat([slices, fr_sl.with_columns(pl.col("x") + pl.col("dur")).filter(pl.col("dur") > 0)])


def _bands(rows: list[Row]) -> list[tuple[str, int, int]]:
    """The runs of rows of one host: (host, first row, last row)."""
    n = max(1, len(rows))
    start = 0
    bands: list[tuple[str, int, int]] = []
    for i in range(1, n + 1):
        if i == n or rows[i][0] != rows[start][0]:
            bands.append((rows[start][0], start, i - 1))
            start = i
    return bands


def _draw_hosts(ax: Any, f: _Frame, diagnosis: Diagnosis) -> list[tuple[str, int, int]]:
    """Host bands (every other one shaded, named on the right), the ``no log`` band hatched and the rows of
    the initiating ranks tinted. Returns the bands."""
    bands = _bands(f.rows)
    for j, (h, a, b) in enumerate(bands):
        if j % 2 == 0:
            ax.axhspan(a - 0.5, b + 0.5, color="#f2f2f2", zorder=0, lw=0)
        if len(bands) > 1 or h not in (UNKNOWN_HOST,):
            if j > 0:
                ax.axhline(a - 0.5, color="#cccccc", lw=0.6, zorder=0.5)
            if h != "no log":
                ax.text(
                    1.003,
                    1 - (a + b + 1) / 2 / f.n,
                    h,
                    transform=ax.transAxes,
                    fontsize=8 if not f.many else 6,
                    va="center",
                    ha="left",
                    color="#555555",
                )
        if h == "no log":
            _draw_no_log(ax, f, diagnosis, a, b)
    for h, r in f.rows:
        if r is not None and f.status.get(r) == "initiating":
            y = f.row_of[(h, r)]
            ax.axhspan(y - 0.5, y + 0.5, color="#fcbba1", alpha=0.45 if not f.many else 0.8, zorder=0.4, lw=0)
    return bands


def _draw_no_log(ax: Any, f: _Frame, diagnosis: Diagnosis, a: int, b: int) -> None:
    """The ``no log`` band, rows ``a`` to ``b``: hatched, naming the ranks that left no log at all."""
    from correlator.report import ranges

    ax.axhspan(a - 0.5, b + 0.5, facecolor="none", hatch="////", edgecolor="#dddddd", lw=0, zorder=0.2)
    in_table = set(f.t["rank"].drop_nulls().to_list())  # once, not per missing rank
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


def _draw_lines(ax: Any, f: _Frame) -> None:
    """Each rank's span of activity (first to last line: silence shows as a short line), the collectives
    as bars (the focus one outlined), and routine lines and progress, faint (not when there are many rows)."""
    t, slices, many = f.t, f.slices, f.many
    spans = (
        t.filter(pl.col("y") >= 0)
        .group_by("y")
        .agg(pl.col("x").min().alias("a"), pl.col("x").max().alias("b"))
    )
    ax.hlines(spans["y"], spans["a"], spans["b"], color="#9e9e9e", lw=0.8 if not many else 0.4, zorder=1)
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
    if not many:
        rout = t.filter(pl.col("y") >= 0).filter(pl.col("cat").is_in(["log", "progress"]))
        prog = rout.filter(pl.col("cat") == "progress")
        other = rout.filter(pl.col("cat") == "log")
        ax.scatter(other["x"], other["y"], marker="|", s=40, c="#c8c8c8", lw=0.8, zorder=2, rasterized=True)
        ax.scatter(prog["x"], prog["y"], marker="|", s=40, c="#6baed6", lw=0.9, zorder=2.1, rasterized=True)


def _draw_faults(ax: Any, f: _Frame) -> dict[str, int]:
    """Faults, coloured by kind, the focus collective's ringed. Returns the count of each kind drawn."""
    pts = f.t.filter(pl.col("y") >= 0)
    faults = pts.filter(pl.col("cat").is_in(["cause", "effect", "launcher"])).sort("cat", descending=True)
    kinds_present: dict[str, int] = {}
    for (cat,), part in faults.group_by("cat", maintain_order=True):
        size = {"cause": 110, "effect": 42, "launcher": 36}[cat] * (0.45 if f.many else 1)
        ax.scatter(
            part["x"],
            part["y"],
            marker=CAT_MARKERS[cat],
            s=size,
            c=[kind_color(k) for k in part["kind"].to_list()],
            edgecolors=["black" if x else "none" for x in part["focus"].to_list()],
            linewidths=0.5,
            zorder=3 if cat != "cause" else 4,
            alpha=0.95,
        )
        for k in part["kind"].to_list():
            kinds_present[k] = kinds_present.get(k, 0) + 1
    return kinds_present


def _draw_focus(ax: Any, f: _Frame) -> None:
    """The focus collective: the time span of its events, shaded and named."""
    fev = f.t.filter(pl.col("focus"))
    if not (fev.height and f.base == "time"):
        return
    focus = f.focus
    fa = float(fev["x"].min())  # type: ignore[arg-type]
    fb = float(fev["x"].max())  # type: ignore[arg-type]
    fsl = f.slices.filter(pl.col("focus"))
    if fsl.height:
        fa = min(fa, float((fsl["x"] - fsl["dur"]).min()))  # type: ignore[arg-type]
    ax.axvspan(fa, max(fb, fa + (f.hi - f.lo) * 0.003), color="#fdd0a2", alpha=0.25, zorder=0.3, lw=0)
    what = f"{focus.get('op') or 'collective'} SeqNum {focus['seq']} (pg {focus.get('pg') or '0'})"
    if focus.get("majority"):
        what += f"; the majority ran {focus['majority']}"
    ax.text(
        (fa + fb) / 2,
        f.n - 0.5,
        f"{f.focus_label}: {what}",
        ha="center",
        va="bottom",
        fontsize=8,
        color="#a63603",
        zorder=8,
        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
    )


def _draw_initiating(ax: Any, f: _Frame, diagnosis: Diagnosis) -> None:
    """The initiating event(s), starred; the first one or two annotated."""
    starred = f.t.filter(pl.col("event_id").is_in(f.init_ids) & (pl.col("y") >= 0)).sort("x", "y")
    ax.scatter(
        starred["x"],
        starred["y"],
        marker="*",
        s=420 if not f.many else 260,
        c="#ffdd00",
        edgecolors="#b30000",
        linewidths=1.4,
        zorder=6,
    )
    star_ranks = sorted(set(starred["rank"].drop_nulls().to_list()))
    for i, row in enumerate(starred.head(2 if starred.height <= 2 else 1).iter_rows(named=True)):
        label = _star_label(row, f.base, diagnosis)
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


def _star_label(row: dict[str, Any], base: str, diagnosis: Diagnosis) -> str:
    """An initiating event's note: the rank, what happened (and how it was found, unless its own fault
    line says so), its time, where."""
    what = row["exc_type"] or (f"exit {row['exit_code']}" if row["exit_code"] is not None else row["kind"])
    if category(row["kind"]) in ("progress", "log"):
        what = f"last ordinary line: {row['kind'].replace('_', ' ')}"
    stamp = ""
    if base == "time" and not row["ts_inferred"]:
        stamp = "\n" + dt.datetime.fromtimestamp(row["tc"] / 1e6, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    basis = diagnosis.initiator_basis
    if basis and basis not in OWN_FAULT_BASES:
        what = f"{basis}\n{what}"
    return f"rank {row['rank']}: {what}{stamp}\n{row['path']}:{row['line']}"


def _draw_y_labels(ax: Any, f: _Frame, diagnosis: Diagnosis, max_label_rows: int) -> None:
    """The y labels: ranks coloured by their status; thinned when there are many."""
    rows, n = f.rows, f.n
    labels = []
    for h, r in rows:
        if r is None:
            labels.append(unranked_label(f.t, h))
        else:
            labels.append(
                f"rank {r}"
                if h != "no log"
                else (f"rank {r} (no log)" if r >= 0 else f"no log ({len(diagnosis.missing_ranks)})")
            )
    ticks = list(range(n)) if not f.many and n <= max_label_rows * 2 else _thinned(f, max_label_rows)
    ax.set_yticks(ticks, [labels[i] for i in ticks], fontsize=8 if n <= 32 else 6.5)
    for lab, i in zip(ax.get_yticklabels(), ticks):
        h, r = rows[i]
        st = f.status.get(r) if r is not None else None
        if st == "initiating":
            lab.set_color(STATUS_COLORS["initiating"])
            lab.set_fontweight("bold")
        elif st == "collateral":
            lab.set_color("#b35806")
        elif st == "missing" or h == "no log":
            lab.set_color("#9e9e9e")


def _thinned(f: _Frame, max_label_rows: int) -> list[int]:
    """The rows labelled when there are many: each host's first rank and every initiating rank, at most
    ``max_label_rows`` (the initiating ones always, their close neighbours not)."""
    rows, row_of, status = f.rows, f.row_of, f.status
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
    gap = max(1, f.n // 60)
    return [i for i in ticks if i in must or all(abs(i - m) > gap for m in must)]


def _draw_axes(ax: Any, f: _Frame) -> None:
    """Grid, spines and the x label (the time unit and what it is relative to, or event order)."""
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#e0e0e0", lw=0.5, zorder=0)
    ax.set_axisbelow(True)
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)
    if f.base == "time":
        ref = "the initiating event" if f.inits.height else "the first event"
        ax.set_xlabel(f"time ({f.unit}) relative to {ref}, host clocks aligned", fontsize=9)
    else:
        ax.set_xlabel("event order (these logs carry no timestamps)", fontsize=9)


def _draw_legend(
    ax: Any, f: _Frame, kinds_present: dict[str, int], bands: list[tuple[str, int, int]]
) -> None:
    """The legend, right of the host names: the fault kinds present, then the marks."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

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
                marker=CAT_MARKERS[cat],
                ms=7 if cat == "cause" else 5,
                mfc=kind_color(k),
                mec="none",
                label=f"{k} ({c})",
            )
        )
    if f.inits.height:
        handles.append(
            Line2D([], [], ls="", marker="*", ms=12, mfc="#ffdd00", mec="#b30000", label="initiating event")
        )
    slices = f.slices
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
    if not f.many:
        handles.append(
            Line2D([], [], ls="", marker="|", ms=7, mec="#6baed6", label="progress (step, collective)")
        )
        handles.append(Line2D([], [], ls="", marker="|", ms=7, mec="#c8c8c8", label="other log line"))
    handles.append(Line2D([], [], color="#9e9e9e", lw=1, label="first to last line"))
    host_w = (
        max((len(h) for h, _, _ in bands if h != "no log"), default=0)
        if len(bands) > 1 or f.rows[0][0] != UNKNOWN_HOST
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


__all__ = ["timeline_data", "timeline_figure", "unranked_label"]
