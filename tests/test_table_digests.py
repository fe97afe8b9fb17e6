"""The table ingest writes stays the same on every corpus case, column by column.

The digests in ``tests/data/table_digests.json`` were computed from the code before the single-pass ingest
rewrite (issue 13); regenerate them (``python -m tests.table_digest``) only for an intended change of the
table, such as a new parser rule.
"""

from __future__ import annotations

import json

import pytest

from correlator.ingest import load
from tests.table_digest import CASES, DIGESTS, column_digests

_PINNED: dict[str, dict[str, str]] = json.loads(DIGESTS.read_text())


def test_every_case_is_pinned() -> None:
    assert sorted(_PINNED) == sorted(c.name for c in CASES.iterdir() if (c / "logs").is_dir())


@pytest.mark.parametrize("case", sorted(_PINNED))
def test_table_identical_column_by_column(case: str) -> None:
    got = column_digests(load(CASES / case / "logs"))
    want = _PINNED[case]
    assert sorted(got) == sorted(want), f"columns differ: {sorted(set(got) ^ set(want))}"
    changed = [c for c in want if got.get(c) != want[c]]
    assert not changed, f"{case}: columns changed: {changed}"
