"""Proposed change for ``parsers/python.py::group_records`` (owned by the parsers owner), measured here.

Idea: only files that hold a continuation *candidate* (an indented line, a traceback start, a C++ exception
continuation, an exception line, a hard-wrapped line) need the sort / window / join machinery; every other
file's rows are their own records. On generated logs only the culprit's stderr and the launcher logs qualify.

Measured (``benchmarks/generate.py`` data, 64 ranks x 20,000 lines = 1.28 M rows, shared 2-core machine):
``group_records`` 2.95 s -> 0.74 s; the event table is identical (``DataFrame.equals``) on that input and
on all 41 fixture cases. In the 256 x 20,000 profile the original took 57 s of 239 s.

Use: replace the body of ``group_records`` by the wrapper below (``_orig`` = the current implementation).
"""

from __future__ import annotations

import polars as pl

import parsers.python as P

_orig = P.group_records
_CAND = (
    r"^(?:[ \t]|Traceback|Exception raised from |frame #\d+: |\s*what\(\): |Last error:|ncclRemoteError|"
    r"ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclInvalid)"
)


def group_records_fast(df: pl.DataFrame, stream_keys: list[str]) -> pl.DataFrame:
    body = pl.col("body")
    cand = df.select(
        (
            body.str.contains(_CAND) | pl.col("wrap_cont").fill_null(False) | body.str.contains(P.EXC_LINE)
        ).alias("c")
    )["c"]
    paths = df.filter(cand)["path"].unique()
    inside = df["path"].is_in(paths.implode()) if paths.len() else pl.Series([False] * df.height)
    if inside.all():
        return _orig(df, stream_keys)
    df = df.with_row_index("__o2")
    a = _orig(df.filter(inside), stream_keys) if inside.any() else None
    b = df.filter(~inside).with_columns(pl.col("body").alias("record"))
    return pl.concat([x for x in (a, b) if x is not None], how="diagonal_relaxed").sort("__o2").drop("__o2")
