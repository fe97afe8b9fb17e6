"""Turn the timestamp parts the prefixes extracted into ``ts`` (UTC, µs) and ``ts_quality``.

Fast paths (polars ``str.to_datetime`` with a fixed format) cover every stamp in docs/log-formats.md §8:
kubectl RFC 3339 ``Z`` (exact), Python asctime ``YYYY-MM-DD HH:MM:SS,mmm`` (no zone; exact with one: ``+02:00``,
``+0200``, ``Z``, as ``datetime.isoformat()`` writes it), glog with year,
torchelastic ``YYYY-MM-DD_HH:MM:SS``, HF ``MM/DD/YYYY``, Open MPI ctime, epoch seconds (exact), and the
year-less c10/glog/torch._logging ``MMDD HH:MM:SS`` whose year is inferred from the directory.
``dateparser`` handles stamp shapes no fast path knows (user-defined NCCL_DEBUG_TIMESTAMP_FORMAT);
it runs once per distinct string, never per line.
"""

from __future__ import annotations

import datetime as dt
import threading
from functools import lru_cache

import polars as pl

UTC = dt.UTC

#: The stamps ``ts`` may hold: those a Python ``datetime`` can represent (years 1 – 9999), since every output
#: that shows a stamp converts it to one (polars itself goes much further: an ``error.json`` stamp just under
#: 2^40 s lands in the year 36812 and made ``events`` fail, issue 35). A stamp outside is no stamp.
TS_MIN = dt.datetime(1, 1, 1, tzinfo=UTC)
TS_MAX = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
#: The largest epoch second within :data:`TS_MAX` (253402300799).
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
MAX_EPOCH_S = (TS_MAX - _EPOCH) // dt.timedelta(seconds=1)  # in integers: a float rounds it up
MIN_EPOCH_S = (TS_MIN - _EPOCH) // dt.timedelta(seconds=1)


#: dateparser keeps shared caches that are not safe across threads (scrapinghub/dateparser#441, #813), and
#: streaming ingests batches on several threads: one parse at a time.
_DATEPARSE_LOCK = threading.Lock()


@lru_cache(maxsize=4096)
def _dateparse(text: str) -> dt.datetime | None:
    import dateparser  # slow import: only when a stamp of unknown shape shows up

    try:
        with _DATEPARSE_LOCK:
            value = dateparser.parse(text, settings={"RETURN_AS_TIMEZONE_AWARE": False})
    except Exception:  # noqa: BLE001 - dateparser raises assorted errors on junk
        return None
    return value.replace(tzinfo=None) if value else None


def _col(df: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in df.columns else pl.lit(None, dtype=pl.String)


def _yearless(df: pl.DataFrame, ref_year: int, ref_month: int) -> pl.Expr:
    """The naive time of year-less stamps (glog ``MMDD hh:mm:ss.uuuuuu``, ``mm``/``dd`` columns) in
    ``ref_year``; a month far after ``ref_month`` is December of the year before (Dec -> Jan rollover)."""
    has_yearless = _col(df, "hms").is_not_null() & _col(df, "yyyy").is_null()
    rows = df.select(has_yearless.fill_null(False)).to_series()
    n = int(rows.sum())
    if n * 2 < df.height:
        # Few glog stamps (an application log with a watchdog line or two): the text is built and parsed for
        # those rows only, not for every row (0.085 s per 400k rows, the branch computed everywhere).
        out = pl.repeat(None, df.height, dtype=pl.Datetime("us"), eager=True)
        if n:
            sub = df.filter(rows).select(_yearless_ts(df, ref_year, ref_month)).to_series()
            out = out.scatter(rows.arg_true(), sub)
        return pl.lit(out)
    return pl.when(has_yearless).then(_yearless_ts(df, ref_year, ref_month)).otherwise(None)


def _yearless_ts(df: pl.DataFrame, ref_year: int, ref_month: int) -> pl.Expr:
    """The stamp of :func:`_yearless` as text parsed, for every row (null where a field is)."""
    mmdd = _col(df, "mmdd")
    month = pl.coalesce(mmdd.str.slice(0, mmdd.str.len_chars() - 2), _col(df, "mm")).cast(
        pl.Int32, strict=False
    )
    day = pl.coalesce(mmdd.str.slice(-2), _col(df, "dd")).cast(pl.Int32, strict=False)
    # A month far after the reference month is December of the previous year (Dec -> Jan rollover).
    year = pl.when(month > ref_month + 6).then(ref_year - 1).otherwise(ref_year)
    frac = pl.when(_col(df, "usec").is_not_null()).then(pl.lit(".") + _col(df, "usec")).otherwise(pl.lit(""))
    yearless = pl.concat_str(
        [
            year.cast(pl.String),
            pl.lit("-"),
            month.cast(pl.String).str.zfill(2),
            pl.lit("-"),
            day.cast(pl.String).str.zfill(2),
            pl.lit(" "),
            _col(df, "hms"),
            frac,
        ]
    )
    return yearless.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")


#: Python logging's default stamp (``%(asctime)s``: milliseconds after a comma) as a fixed shape, read as it
#: is written: polars parses a fixed shape ~4x faster than the general ``%.f`` (0.03 against 0.13 s of CPU per
#: 400k stamps, polars 2.1), and where it gives a value that value is the general format's read of the stamp
#: with ``.`` for ``,`` (other fractions or separators, or none, give null and are read as below). Read as it
#: is, not after a rewrite of every stamp: 560k stamps of a tee'd console 0.075 -> 0.044 s.
_PY_COMMA = "%Y-%m-%d %H:%M:%S,%3f"
#: The same shape after the rewrite (``,`` -> ``.``, ``T`` -> space), for the stamps the first leaves.
_PY_FIXED = "%Y-%m-%d %H:%M:%S.%3f"
_PY_GENERAL = "%Y-%m-%d %H:%M:%S%.f"


#: A zone at the end of a ``pyts`` stamp (``Z``, ``+hh:mm``, ``+hhmm``): then it is an exact time.
_PY_ZONE = r"(?:Z|[+-][0-9]{2}:?[0-9]{2})$"


def _py_stamps(df: pl.DataFrame) -> tuple[pl.Expr, pl.Expr]:
    """``pyts`` (``2026-11-29 22:00:01,234``, ``2026-11-29T22:00:01.123456``, …) as ``(naive, exact)``
    datetimes (µs; null where it does not read), literal columns of ``df``'s length: a stamp without a zone is
    naive, the general format's (``%Y-%m-%d %H:%M:%S%.f``) read of it with ``.`` for ``,`` and a space for ``T``;
    one with a zone (:data:`_PY_ZONE`: ``2026-11-29T22:00:01.123+02:00``, as ``datetime.isoformat()`` writes
    it) is exact, in UTC."""
    none = pl.lit(None, dtype=pl.Datetime("us"))
    if "pyts" not in df.columns:
        return none, pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    pyts = df["pyts"]
    out = pyts.str.to_datetime(_PY_COMMA, strict=False, time_unit="us")
    miss = out.is_null() & pyts.is_not_null()
    exact = None
    if miss.any():
        py = pyts.filter(miss).str.replace(",", ".", literal=True).str.replace("T", " ", literal=True)
        zoned = py.str.contains(_PY_ZONE)
        if zoned.any():  # exact: read with its offset (Z as +00:00); not a naive stamp
            z = (
                py.filter(zoned)
                .str.replace(r"Z$", "+00:00")
                .str.replace(r"([+-][0-9]{2})([0-9]{2})$", "$1:$2")
            )
            got_z = z.str.to_datetime(
                "%Y-%m-%d %H:%M:%S%.f%:z", strict=False, time_unit="us", time_zone="UTC"
            )
            at = miss.arg_true().filter(zoned)
            exact = pl.repeat(None, pyts.len(), dtype=pl.Datetime("us", "UTC"), eager=True).scatter(at, got_z)
            py = py.set(zoned, None)  # type: ignore[arg-type]
        got = py.str.to_datetime(_PY_FIXED, strict=False, time_unit="us")
        left = got.is_null() & py.is_not_null()
        if left.any():
            got = got.scatter(
                left.arg_true(), py.filter(left).str.to_datetime(_PY_GENERAL, strict=False, time_unit="us")
            )
        out = out.scatter(miss.arg_true(), got)
    return pl.lit(out), (pl.lit(exact) if exact is not None else pl.lit(None, dtype=pl.Datetime("us", "UTC")))


def build_ts(df: pl.DataFrame, mtime_year: int, tz: str | None = None) -> pl.DataFrame:
    """Add ``ts`` (Datetime[us, UTC]) and ``ts_quality`` from the stamp columns prefixes left.

    ``mtime_year`` is the fallback year for year-less stamps when no full stamp exists in the input;
    ``tz`` (IANA name) is the zone of stamps that carry none (default UTC). Rows without a stamp inherit
    the previous stamp of their stream later (:func:`inherit`).
    """
    fmt_naive = pl.Datetime("us")
    py_ts, py_exact = _py_stamps(df)
    cf_ts = _col(df, "cf_time").str.to_datetime("%Y-%m-%d_%H:%M:%S", strict=False, time_unit="us")
    us_ts = _col(df, "usts").str.to_datetime("%m/%d/%Y %H:%M:%S", strict=False, time_unit="us")
    mpi_ts = (
        _col(df, "mpi_ctime")
        .str.replace(r"\s+", " ")
        .str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False, time_unit="us")
    )
    nccl_ts = _col(df, "nccl_ts").str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    glog_full = pl.concat_str(
        [
            _col(df, "yyyy"),
            _col(df, "mm"),
            _col(df, "dd"),
            pl.lit(" "),
            _col(df, "hms"),
            pl.lit("."),
            _col(df, "usec"),
        ]
    ).str.to_datetime("%Y%m%d %H:%M:%S%.f", strict=False, time_unit="us")
    kub = _col(df, "xport_ts").str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", strict=False, time_unit="us")
    if "epoch_s" in df.columns:  # bounded first: a larger value would overflow the multiplication
        secs = pl.col("epoch_s").cast(pl.Int64)
        ok = secs.is_between(MIN_EPOCH_S, MAX_EPOCH_S)
        epoch = pl.when(ok).then(secs * 1_000_000).otherwise(None).cast(fmt_naive)
    else:
        epoch = pl.lit(None, dtype=fmt_naive)

    naive_full = pl.coalesce(py_ts, cf_ts, glog_full, us_ts, mpi_ts, nccl_ts)
    df = df.with_columns(
        pl.coalesce(kub, epoch, py_exact.dt.replace_time_zone(None)).alias("__exact"),
        naive_full.alias("__full"),
    )
    # Reference year: the most common year among full stamps; else the file modification year.
    years = pl.concat([df["__exact"].dt.year(), df["__full"].dt.year()]).drop_nulls()
    ref_year = int(years.mode().sort()[-1]) if years.len() else mtime_year
    ref_month = 12
    if years.len():
        full = pl.concat([df["__exact"], df["__full"]]).drop_nulls()
        ref_month = int(full.filter(full.dt.year() == ref_year).max().month)  # type: ignore[union-attr]

    df = df.with_columns(_yearless(df, ref_year, ref_month).alias("__yearless"))

    # Stamps of a shape no fast path knows: dateparser, once per distinct string.
    unknown = (
        df.filter(pl.col("nccl_ts").is_not_null() & pl.col("__full").is_null())
        if "nccl_ts" in df.columns
        else df.clear()
    )
    if unknown.height:
        mapping = {s: _dateparse(s) for s in unknown["nccl_ts"].unique().to_list()}
        parsed = df["nccl_ts"].replace_strict(mapping, default=None, return_dtype=pl.Datetime("us"))
        df = df.with_columns(pl.coalesce(pl.col("__full"), parsed).alias("__full"))

    zone = tz or "UTC"

    def to_utc(e: pl.Expr, naive_zone: str) -> pl.Expr:
        """``e`` (naive, in ``naive_zone``) in UTC; null outside :data:`TS_MIN` – :data:`TS_MAX` (a zone
        can push 9999-12-31 into the year 10000)."""
        u = e.dt.replace_time_zone(
            naive_zone, ambiguous="earliest", non_existent="null"
        ).dt.convert_time_zone("UTC")
        return pl.when(u.is_between(TS_MIN, TS_MAX)).then(u).otherwise(None)

    df = df.with_columns(
        to_utc(pl.col("__exact"), "UTC").alias("__exact"),
        to_utc(pl.col("__full"), zone).alias("__full"),
        to_utc(pl.col("__yearless"), zone).alias("__yearless"),
    )
    df = df.with_columns(
        pl.coalesce(pl.col("__exact"), pl.col("__full"), pl.col("__yearless")).alias("ts"),
        pl.when(pl.col("__exact").is_not_null())
        .then(pl.lit("exact"))
        .when(pl.col("__full").is_not_null())
        .then(pl.lit("no_tz"))
        .when(pl.col("__yearless").is_not_null())
        .then(pl.lit("no_year"))
        .otherwise(None)
        .alias("ts_quality"),
    )
    return df.drop("__exact", "__full", "__yearless")


def inherit(df: pl.DataFrame, stream_keys: list[str]) -> pl.DataFrame:
    """Rows without a stamp take the previous stamp of their own stream (``inherited``), else ``missing``."""
    keys = ["path", *stream_keys]
    filled = pl.col("ts").forward_fill().over(keys)
    return df.with_columns(
        pl.when(pl.col("ts").is_null() & filled.is_not_null())
        .then(pl.lit("inherited"))
        .when(pl.col("ts").is_null())
        .then(pl.lit("missing"))
        .otherwise(pl.col("ts_quality"))
        .alias("ts_quality"),
        filled.alias("ts"),
    )
