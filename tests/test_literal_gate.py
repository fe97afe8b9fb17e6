"""``parsers._literal_gate``: a message rule list is applied only where some row holds one of its literals, and of
the list only the rules whose literal some row holds are tried; the rows it classifies, and their fields, are
those ``apply_rules`` gives with the whole list."""

from __future__ import annotations

import polars as pl
import pytest

import parsers
from parsers import c10d, elastic
from parsers.rules import Rule, apply_rules, ensure_columns


def _frame(lines: list[str]) -> pl.DataFrame:
    return ensure_columns(pl.DataFrame({"message": lines}, schema={"message": pl.String}))


@pytest.mark.parametrize("rules", [c10d.RULES, elastic.RULES], ids=["c10d", "elastic"])
def test_the_gate_tries_only_the_rules_whose_literal_a_row_holds(
    rules: list[Rule], monkeypatch: pytest.MonkeyPatch
) -> None:
    # two rules' own lines (one holding a later rule's literal too, or not), a line of another list, none
    picked = [rules[0], rules[len(rules) // 2]]
    lines = [r.example for r in picked] + ["2026-01-02 03:04:05,000 INFO step=3 loss=0.5", ""]
    df = _frame(lines)
    want = apply_rules(df, list(rules))
    occurring = [r.name for r in rules if any(r.literal in line for line in lines)]
    assert 2 <= len(occurring) < len(rules)  # some rules are left out, else the test shows nothing

    tried: list[list[str]] = []
    real = parsers.apply_rules

    def spy(frame: pl.DataFrame, rs: list[Rule], **kwargs: object) -> pl.DataFrame:
        tried.append([r.name for r in rs])
        return real(frame, rs, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parsers, "apply_rules", spy)
    got = parsers._literal_gate(df["message"])(df, list(rules))
    assert tried == [occurring]  # in the list's order: the first match still wins
    assert got.equals(want)
    assert got["kind"].drop_nulls().len() >= 2  # the two rules' lines are classified
    # a list none of whose literals occurs is not applied at all
    tried.clear()
    quiet = _frame(["2026-01-02 03:04:05,000 INFO step=3 loss=0.5"])
    assert parsers._literal_gate(quiet["message"])(quiet, list(rules)).equals(quiet)
    assert tried == []
