"""The prefix passes that skip rows: :func:`parsers.rules.strip_prefixes` (a family's prefixes split by
alternations of their heads) strips what :func:`parsers.rules.strip_prefix` does one prefix after the other,
and the hard-wrap marks (:func:`parsers._mark_wraps`, its windows only on files holding a plain line) of a
file do not depend on the other files of the frame."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

import parsers
from parsers import c10d
from parsers.rules import FIELD_TYPES, Prefix, strip_prefix, strip_prefixes

PRODUCERS = parsers.PRODUCER_PREFIXES

ASCTIME = "2026-11-29 23:08:34,362 INFO [trainer] rank=1 step=0 loss=1.7994 avg_loss=1.1560 lr=0.05"


def _bodies() -> list[str]:
    """Every producer prefix's own line, lines holding two of them (in both orders), none, and one whose head
    matches but whose rest holds a newline (the whole pattern does not match)."""
    examples = [p.example for p in PRODUCERS]
    return [
        *examples,
        "[rank: 1] " + ASCTIME,  # Lightning's rank, then a stamp: both stripped
        "2026-11-29 23:08:34,362 INFO [rank: 1] Seed set to 1234",  # the rank prefix after the stamp stays
        "[rank2]: " + c10d.C10_NEW.example,
        "plain text, no prefix",
        "",
        "2026-11-29 23:08:34,362 INFO first\nsecond",
    ]


def _sequential(
    df: pl.DataFrame, prefixes: tuple[Prefix, ...], mask: pl.Series | None = None
) -> pl.DataFrame:
    for p in prefixes:
        df = strip_prefix(df, p, mask=mask)
    return df


def test_strip_prefixes_strips_what_one_prefix_after_the_other_does() -> None:
    df = pl.DataFrame({"body": _bodies()})
    got = strip_prefixes(df, PRODUCERS)
    want = _sequential(df, PRODUCERS)
    assert sorted(got.columns) == sorted(want.columns)
    assert got.select(want.columns).equals(want)
    rows = dict(
        zip(_bodies(), got.select("body", "lightning_rank", "sev_word", "c10_rank").rows(), strict=True)
    )
    assert rows["[rank: 1] " + ASCTIME] == (
        "[trainer] rank=1 step=0 loss=1.7994 avg_loss=1.1560 lr=0.05",
        "1",  # a string here (cast with the rank fields, later)
        "INFO",
        None,
    )
    assert rows["2026-11-29 23:08:34,362 INFO [rank: 1] Seed set to 1234"] == (
        "[rank: 1] Seed set to 1234",
        None,
        "INFO",
        None,
    )
    hook = c10d.EXCEPTHOOK.example
    assert rows[hook] == (hook.removeprefix("[rank2]: "), None, None, 2)
    assert (
        rows["2026-11-29 23:08:34,362 INFO first\nsecond"][0] == "2026-11-29 23:08:34,362 INFO first\nsecond"
    )


def test_strip_prefixes_keeps_to_its_mask() -> None:
    bodies = [c10d.PG_PREFIX.example, c10d.RANK_PREFIX.example, c10d.PG_PREFIX.example, "[Rank 7] x"]
    df = pl.DataFrame({"body": bodies})
    mask = pl.Series([True, True, False, None])
    pair = (c10d.PG_PREFIX, c10d.RANK_PREFIX)
    got = strip_prefixes(df, pair, mask=mask)
    assert got.equals(_sequential(df, pair, mask=mask.fill_null(False)))
    assert got["pg_rank"].to_list() == [13, 2, None, None]
    assert got["body"].to_list()[2:] == bodies[2:]


def _lines(root: Path) -> pl.DataFrame:
    from correlator.discover import discover
    from correlator.ingest import plain_lines
    from correlator.read import read_lines

    srcs = sorted(discover(root)[0], key=lambda s: s.rel)
    return plain_lines([(i, s, read_lines(s.path, s.rel).lines) for i, s in enumerate(srcs)]).drop("__src")


def test_wrap_marks_of_a_file_do_not_depend_on_other_files(tmp_path: Path) -> None:
    line = (
        "[rank1]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
        "Timeout(ms)=600000) ran for 600061 milliseconds before timing out."
    )
    # A terminal of 100 columns cut each line into 100 + 100 + 60 characters (the second and third pieces
    # continue the first); the other file holds log lines only.
    (tmp_path / "a.log").write_text(
        "\n".join(line[i : i + 100] for _ in range(3) for i in range(0, len(line), 100))
    )
    (tmp_path / "b.log").write_text("\n".join([ASCTIME] * 4))
    both = parsers._prefix_layers(_lines(tmp_path).with_row_index("_pos"))
    assert both.filter(pl.col("path") == "a.log")["wrap_cont"].to_list() == [False, True, True] * 3
    assert not both.filter(pl.col("path") == "b.log")["wrap_cont"].any()
    (tmp_path / "b.log").unlink()
    alone = parsers._prefix_layers(_lines(tmp_path).with_row_index("_pos"))
    assert alone["wrap_cont"].to_list() == [False, True, True] * 3


def _untouched(df: pl.DataFrame, prefixes: tuple[Prefix, ...]) -> pl.DataFrame:
    """``df`` as the strip_prefix docstring defines it where no prefix matches, written out here: each prefix's
    named groups (but ``rest``) as null columns of their field type, then its ``pfx_<name>`` marker, False, in
    prefix order, a column added once."""
    cols: dict[str, pl.Series] = {}
    for p in prefixes:
        for g in re.compile(p.pattern).groupindex:
            if g != "rest" and g not in df.columns and g not in cols:
                cols[g] = pl.repeat(None, df.height, dtype=FIELD_TYPES.get(g, pl.String()), eager=True).alias(
                    g
                )
        marker = f"pfx_{p.name}"
        if marker not in df.columns and marker not in cols:
            cols[marker] = pl.repeat(False, df.height, eager=True).alias(marker)
    return df.with_columns(list(cols.values()))


def test_strip_prefixes_where_no_row_is_left_adds_what_strip_prefix_adds() -> None:
    """Where no row is left for a set of prefixes (no row matches any; a mask of no row), the frame gets the
    columns and markers of each prefix that matches nothing: same names, types, values and order, both by
    :func:`strip_prefixes` and by :func:`strip_prefix` one prefix after the other."""
    df = pl.DataFrame({"body": ["plain text, no prefix", ""]})
    for prefixes, mask in (
        (PRODUCERS, None),
        (PRODUCERS, pl.Series([False, False])),
        ((c10d.PG_PREFIX, c10d.RANK_PREFIX), pl.Series([False, None])),
    ):
        want = _untouched(df, prefixes)
        got = strip_prefixes(df, prefixes, mask=mask)
        one_by_one = _sequential(df, prefixes, mask=None if mask is None else mask.fill_null(False))
        for frame in (got, one_by_one):
            assert frame.columns == want.columns
            assert frame.equals(want)
        assert len(got.columns) > 1 + len(prefixes)  # the markers and some group columns were added
