"""Clock alignment: a per-host offset, with its uncertainty, from events that must be near-simultaneous.

Collective entries of the same (pg, seq) on different hosts happen within the collective's own skew,
so the median difference of their timestamps against a reference host estimates the host's clock offset.
Hosts with no shared collective keep offset 0 and a large uncertainty. The uncertainty is never below
the timestamp resolution (1 s for c10 stamps, whose sub-second digits are not wall time).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from correlator.align import pg_key
from correlator.schema import Kind


@dataclass(frozen=True)
class HostClock:
    """Offset (seconds, subtract from the host's stamps) and its uncertainty (seconds)."""

    host: str
    offset_s: float
    uncertainty_s: float
    samples: int


def estimate(table: pl.DataFrame) -> dict[str, HostClock]:
    """Estimate each host's clock offset against the host with the most collective events (of those, the first
    by name). Keys in host-name order."""
    t = table.filter(
        pl.col("host").is_not_null()
        & pl.col("ts").is_not_null()
        & pl.col("seq").is_not_null()
        & pl.col("kind").is_in([Kind.COLLECTIVE_FINGERPRINT, Kind.NCCL_COLL])
        & ~pl.col("duplicate")
    )
    hosts = sorted(table["host"].drop_nulls().unique().to_list())
    if len(hosts) <= 1 or t.height == 0:
        return {h: HostClock(h, 0.0, 1.0, 0) for h in hosts}
    t = t.with_columns(pg_key().alias("pgk"))
    per = t.group_by("host", "pgk", "seq").agg(pl.col("ts").min().alias("t"))
    ref = per.group_by("host").len().sort(["len", "host"], descending=[True, False])["host"][0]
    r = per.filter(pl.col("host") == ref).select("pgk", "seq", pl.col("t").alias("t_ref"))
    diffs = per.join(r, on=["pgk", "seq"]).with_columns(
        ((pl.col("t") - pl.col("t_ref")).dt.total_microseconds() / 1e6).alias("d")
    )
    # per host, in one pass: the median offset, its median absolute deviation, the number of shared collectives
    stats = {
        h: (n, med, mad)
        for h, n, med, mad in diffs.group_by("host")
        .agg(
            pl.len().alias("n"),
            pl.col("d").median().alias("med"),
            (pl.col("d") - pl.col("d").median()).abs().median().alias("mad"),
        )
        .iter_rows()
    }
    out: dict[str, HostClock] = {}
    for h in hosts:
        n, med, mad = stats.get(h, (0, None, None))
        if h == ref:
            out[h] = HostClock(h, 0.0, 1.0, n)
        elif n == 0 or med is None:
            out[h] = HostClock(h, 0.0, 60.0, 0)  # no shared collective: offset unknown, assume synchronized
        else:
            out[h] = HostClock(h, float(med), max(1.0, 3 * float(mad)), n)
    return out


def corrected(table: pl.DataFrame, clocks: dict[str, HostClock]) -> pl.Series:
    """``ts`` minus the host's offset (a Datetime series aligned with ``table``)."""
    if not clocks or all(c.offset_s == 0 for c in clocks.values()):
        return table["ts"]
    off = {h: int(c.offset_s * 1e6) for h, c in clocks.items()}
    shift = table["host"].replace_strict(off, default=0, return_dtype=pl.Int64)
    return table["ts"] - pl.Series(shift).cast(pl.Duration("us"))


def attempt_times(table: pl.DataFrame) -> pl.Series:
    """The one time of every row that the report, the plot and the Perfetto trace state: ``ts`` minus its
    host's offset, the offsets estimated per attempt from that attempt's rows (:func:`estimate`). A
    Datetime series named ``tc`` aligned with ``table``; null where ``ts`` is null."""
    if table.height == 0 or table["attempt"].n_unique() <= 1:
        return corrected(table, estimate(table)).alias("tc")
    idx = table.with_row_index("__i")
    parts = [
        part.select("__i", corrected(part, estimate(part)).alias("tc"))
        for _, part in idx.group_by("attempt", maintain_order=True)
    ]
    return pl.concat(parts).sort("__i")["tc"]


#: The columns :func:`shown_times` reads (the clock estimate's and the file order's).
TIME_COLUMNS = ["event_id", "path", "line", "ts", "host", "attempt", "kind", "pg", "seq", "duplicate"]


def shown_times(table: pl.DataFrame, paths: list[str] | None = None) -> tuple[pl.DataFrame, str]:
    """The time at which the report, the plot and the Perfetto trace place every event, and the time base.

    Over the non-duplicate, non-blank rows of ``table``: ``event_id``, ``path``, ``line``, ``tc`` (Datetime µs
    UTC, :func:`attempt_times`; a row without a stamp of its own takes the ``tc`` of the nearest stamped row
    above it in its file, else of the nearest below it; null only when its file has no stamp at all) and
    ``ts_basis`` (``stamp``: its own stamp; ``stamp above``: a lower bound; ``stamp below``: an upper bound;
    null with ``tc``). Rows in table order. The base is ``time``, or ``event order`` when the rows carry
    fewer than two distinct stamps (then no row has a time worth stating and ``tc`` is all null).
    ``paths``: return the rows of these files only (the offsets and the time base still come from all rows).
    """
    t = table.select(TIME_COLUMNS).filter(~pl.col("duplicate") & (pl.col("kind") != Kind.BLANK))
    own = attempt_times(t)
    out = t.select("event_id", "path", "line").with_columns(
        own.alias("__own"), pl.int_range(pl.len()).alias("__i")
    )
    if paths is not None:
        out = out.filter(pl.col("path").is_in(paths))
    if own.drop_nulls().n_unique() < 2:
        return out.select(
            "event_id",
            "path",
            "line",
            pl.lit(None, own.dtype).alias("tc"),
            pl.lit(None, pl.String).alias("ts_basis"),
        ), "event order"
    out = out.sort("path", "line", "event_id").with_columns(
        pl.col("__own").forward_fill().over("path").alias("__above"),
        pl.col("__own").backward_fill().over("path").alias("__below"),
    )
    out = out.with_columns(
        pl.coalesce("__own", "__above", "__below").alias("tc"),
        pl.when(pl.col("__own").is_not_null())
        .then(pl.lit("stamp"))
        .when(pl.col("__above").is_not_null())
        .then(pl.lit("stamp above"))
        .when(pl.col("__below").is_not_null())
        .then(pl.lit("stamp below"))
        .alias("ts_basis"),
    )
    return out.sort("__i").select("event_id", "path", "line", "tc", "ts_basis"), "time"
