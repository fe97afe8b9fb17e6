"""The (pg, seq) progress heatmap: how far each rank got on each process group (:func:`correlator.align.progress`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from correlator.align import progress
from correlator.plot.style import subplots

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def progress_heatmap(table: pl.DataFrame) -> Figure:
    """Where each rank stopped: per process group, how far behind the group's furthest rank it is.

    Cells show the highest sequence number the rank entered (``entered``); the colour is the lag behind the
    group's maximum (white = at the front). Process groups are columns, ranks rows.
    """
    import numpy as np
    from matplotlib.colors import LinearSegmentedColormap

    prog = progress(table)
    if prog.height == 0:
        fig, ax = subplots(6, 2)
        ax.axis("off")
        ax.text(0.5, 0.5, "no collective sequence numbers or steps in these logs", ha="center", va="center")
        return fig
    pg_list, ranks, lag, text, mx = _lags(table, prog)
    ri = {r: i for i, r in enumerate(ranks)}
    n = len(ranks)
    wide = n > 48  # many ranks: ranks along x, process groups as rows
    if wide:
        fig_w, fig_h = 13.0, min(max(2.6, 1.7 + 0.45 * len(pg_list)), 12)
    else:
        fig_h = min(max(2.8, 1.4 + n * (0.3 if n <= 32 else max(0.04, 10 / n))), 16)
        fig_w = min(max(5.0, 2.2 + 1.3 * len(pg_list)), 16)
    fig, ax = subplots(fig_w, fig_h)
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
    ax.set_title(_title(behind_ranks, silent), fontsize=9.5, loc="left")
    return fig


def _lags(
    table: pl.DataFrame, prog: pl.DataFrame
) -> tuple[list[str], list[int], Any, list[list[str]], dict[str, int]]:
    """The heatmap's cells: process groups (at most 24, the training step last), ranks (a rank with no
    sequence line stays, grey), each cell's lag behind its group's furthest rank (NaN: nothing logged) and
    its text (entered, and ✓completed where it differs), and each group's furthest sequence number."""
    import numpy as np

    pgs = prog.group_by("pg").agg(pl.len().alias("n"), pl.col("entered").max().alias("mx"))
    pgs = pgs.sort(pl.col("pg") == "step", pl.col("n"), pl.col("pg"), descending=[False, True, False])
    pg_list = pgs["pg"].to_list()[:24]
    seen = table.filter(~pl.col("duplicate"))["rank"].drop_nulls().unique().to_list()
    ranks = sorted(set(prog["rank"].unique().to_list()) | set(seen))
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
    return pg_list, ranks, lag, text, mx


def _title(behind_ranks: list[int], silent: list[int]) -> str:
    """The title: who is behind on a collective, and who logged no sequence number at all."""
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
    return f"{title}\n{sub}"


__all__ = ["progress_heatmap"]
