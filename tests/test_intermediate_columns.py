"""The intermediate columns (``correlator.schema.INTERMEDIATE``) are declared once, next to the event table,
and the parse step hands on nothing else (issue 13 item 2, issue 15 item 6)."""

from __future__ import annotations

import datetime as dt
import importlib
import json
from pathlib import Path
from typing import Literal

import polars as pl
import pytest

import correlator
import parsers
from correlator.schema import COLUMN_DOCS, INTERMEDIATE, INTERMEDIATE_COLUMNS, PARSE_KEEP

CASES = Path(__file__).parent.parent / "fixtures/cases"
ingest_mod = importlib.import_module("correlator.ingest")


def test_declared_once_and_apart_from_the_event_table() -> None:
    names = [n for n, _ in INTERMEDIATE]
    assert len(names) == len(set(names))
    assert not set(names) & set(COLUMN_DOCS)
    assert PARSE_KEEP == (*COLUMN_DOCS, *names)
    # ingest uses the schema's declaration, not a copy of its own
    assert ingest_mod.PARSE_KEEP is PARSE_KEEP


@pytest.fixture(scope="module")
def parsed_columns() -> tuple[set[str], set[str]]:
    """(columns the parse step handed on, those of them non-null somewhere) over every corpus case."""
    handed: set[str] = set()
    filled: set[str] = set()
    orig = parsers.parse_lines_split

    def spy(
        df: pl.DataFrame,
        keep: tuple[str, ...] | None = None,
        fast: pl.Series | None | Literal["scan"] = "scan",
    ) -> tuple[pl.DataFrame, pl.DataFrame | None]:
        gen, fast_rows = orig(df, keep=keep, fast=fast)
        for part in (gen, fast_rows):
            if part is not None:
                handed.update(part.columns)
                filled.update(c for c in part.columns if part[c].null_count() < part.height)
        return gen, fast_rows

    mp = pytest.MonkeyPatch()
    mp.setattr(parsers, "parse_lines_split", spy)
    try:
        for case in sorted(CASES.iterdir()):
            if (case / "logs").is_dir():
                ingest_mod.ingest(case / "logs")
    finally:
        mp.undo()
    return handed, filled


def test_parse_hands_on_only_declared_columns(parsed_columns: tuple[set[str], set[str]]) -> None:
    handed, _ = parsed_columns
    assert handed - {"_pos"} <= set(PARSE_KEEP)


def test_every_declared_column_is_filled_by_some_real_log(parsed_columns: tuple[set[str], set[str]]) -> None:
    """A declared column that no corpus log fills is dead weight (or a rule lost its input). Two are set
    outside the parse step or have no corpus line yet, and are checked directly below."""
    _, filled = parsed_columns
    assert set(INTERMEDIATE_COLUMNS) - filled == {"exit_code_json", "yyyy"}


def test_glog_stamp_with_year_fills_yyyy(tmp_path: Path) -> None:
    # glog >= 0.6 with ``FLAGS_log_year_in_prefix`` (glog src/logging.cc ``LogMessage::Init`` writes the year
    # before the month). Reconstructed from that format string: no corpus log has one yet (the dinov3 issue 113
    # console line looks alike but is dinov3's own logger, with no microseconds).
    line = "I20250828 04:05:40.123456 1038637 helpers.cc:105] Training  [   220/375000]"
    (tmp_path / "console.log").write_text(line + "\n")
    t = correlator.load(tmp_path)
    # the year comes from the line (a year-less stamp would take the current year and say ``no_year``)
    assert t["ts"].to_list() == [dt.datetime(2025, 8, 28, 4, 5, 40, 123456, tzinfo=dt.UTC)]
    assert t["ts_quality"].to_list() != ["no_year"]


def test_error_json_fills_exit_code_then_the_table_drops_it(tmp_path: Path) -> None:
    # A real torchrun error.json (cap-05 capture) with the ``errorCode`` that the agent adds when it copies a
    # child's error file (torch ``ErrorHandler.dump_error_file(..., error_code)`` writes
    # ``message["errorCode"]``); the code is set here, so the expected value is known independently.
    src = CASES / "cap-05-collective-mismatch-detail/logs/torchrun_logs/none_ki3tamzp/attempt_0/3/error.json"
    doc = json.loads(src.read_text())
    doc["message"]["errorCode"] = 7
    d = tmp_path / "attempt_0" / "3"
    d.mkdir(parents=True)
    (d / "error.json").write_text(json.dumps(doc))
    t = correlator.load(tmp_path)
    assert not set(INTERMEDIATE_COLUMNS) & set(t.columns)
    assert t["exit_code"].to_list() == [7]
    stamp = int(doc["message"]["extraInfo"]["timestamp"])
    assert t["ts"].to_list() == [dt.datetime.fromtimestamp(stamp, dt.UTC)]
