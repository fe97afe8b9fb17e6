"""The labelled corpus (fixtures/cases): every case is diagnosed right or listed as a known miss."""

from __future__ import annotations

import json

from correlator.evaluate import evaluate, find_cases
from tests.conftest import CASES


def test_corpus_size_and_sources() -> None:
    cases = find_cases(CASES)
    sources = [json.loads((c / "expected.json").read_text()).get("source") for c in cases]
    # counted here by listing the folders, not through find_cases
    assert len(cases) == sum((p / "expected.json").is_file() for p in CASES.iterdir())
    assert len(cases) >= 24
    assert sum(s == "captured" for s in sources) >= 14
    # every capture (cap-*) is labelled as one
    assert all(s == "captured" for c, s in zip(cases, sources) if c.name.startswith("cap-"))
    assert set(sources) <= {"public", "captured", "reconstructed"}


def test_no_case_regresses() -> None:
    rep = evaluate(CASES, workers=None)  # as rankscope eval: in worker processes on every core
    bad = [
        f"{c.name}: got {c.got} want {c.want} {c.error or ''}"
        for c in rep.cases
        if not c.passed and not c.excused
    ]
    assert not bad, "\n".join(bad)
    # Known misses must still be misses: a fixed verdict drops its known_miss (a right verdict with a wrong
    # edge turns it into known_edge_miss), a fixed edge drops its known_edge_miss.
    stale = [f"{c.name}: {c.stale_label}" for c in rep.cases if c.stale_label]
    assert not stale, "stale known-miss labels:\n" + "\n".join(stale)
