"""The confidence vocabulary: every reason is a documented, weighted member with a template, and the
confidence is computed from the members, never from their English."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import correlator
from correlator.confidence import Reason, codes, lower, texts
from tests.test_diagnose_units import progress, table, timeout

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "cases"


@pytest.mark.parametrize("reason", list(Reason), ids=lambda r: r.name)
def test_every_reason_is_documented_weighted_and_renders(reason: Reason) -> None:
    assert reason.description and reason.__doc__ == reason.description
    assert 0.0 <= reason.weight <= 1.0
    params = {f: f"<{f}>" for f in reason.fields()}
    text = reason.note(**params).text()
    # Every field is filled in and nothing is left to format.
    assert all(v in text for v in params.values())
    assert "{" not in text and "}" not in text
    # The sentence without its fields is the template's literal text.
    assert re.sub(r"<\w+>", "", text) == re.sub(r"\{\w+\}", "", reason.template)


def test_zero_weight_is_exactly_a_documented_note() -> None:
    # A weight of 0 says how the rank was found without lowering the score; its description says so.
    assert {r for r in Reason if r.weight == 0} == {r for r in Reason if r.description.endswith("(a note).")}
    assert all(r.weight > 0 for r in Reason if "(a note)" not in r.description)


def test_templates_are_distinct_and_note_checks_its_fields() -> None:
    assert len({r.template for r in Reason}) == len(Reason)
    assert Reason.MISSING_LOGS.fields() == ["missing", "world"]
    assert Reason.MISSING_LOGS.note(missing=3, world=16).text() == "3 of 16 ranks left no log"
    with pytest.raises(ValueError, match="MISSING_LOGS takes"):
        Reason.MISSING_LOGS.note(missing=3)
    with pytest.raises(ValueError, match="NO_LAUNCHER takes"):
        Reason.NO_LAUNCHER.note(world=2)


def test_lower_sums_the_member_weights() -> None:
    notes = [Reason.FOUND_BY_SILENCE.note(), Reason.NO_LAUNCHER.note(), Reason.STALL_REPORT.note()]
    assert lower(0.95, notes) == pytest.approx(0.95 - 0.2 - 0.05 - 0.0)
    assert codes(notes) == ["FOUND_BY_SILENCE", "NO_LAUNCHER", "STALL_REPORT"]
    assert texts(notes)[1] == "no launcher output to confirm exit statuses"


def _silent_straggler() -> correlator.Diagnosis:
    rows = [progress(r, 5) for r in range(4)] + [timeout(0, 40), timeout(1, 40), timeout(2, 40)]
    return correlator.diagnose(table(rows))


def test_confidence_comes_from_the_codes_not_the_words(monkeypatch: pytest.MonkeyPatch) -> None:
    d = _silent_straggler()
    assert d.confidence_reason_codes == ["FOUND_BY_SILENCE", "NO_LAUNCHER"]
    assert d.confidence == 0.7  # 0.95 - 0.2 (silence) - 0.05 (no launcher)
    # Reword every sentence, including into words a text matcher would have taken for other reasons.
    for r in Reason:
        monkeypatch.setattr(r, "template", "missing evenly; none explains; name no rank")
    d2 = _silent_straggler()
    assert d2.confidence_reasons == ["missing evenly; none explains; name no rank"] * 2
    assert (d2.confidence, d2.confidence_reason_codes) == (d.confidence, d.confidence_reason_codes)
    # A weight, by contrast, is the score.
    monkeypatch.setattr(Reason.NO_LAUNCHER, "weight", 0.25)
    assert _silent_straggler().confidence == 0.5


def _pattern(reason: Reason) -> re.Pattern[str]:
    parts = re.split(r"\{\w+\}", reason.template)
    return re.compile(".+".join(re.escape(p) for p in parts))


@pytest.mark.parametrize(
    "case",
    [
        "fr-03-size-mismatch-rank0-dumps-only",
        "real-horovod-336-stall-rank3-different-op-4r",
        "real-gcd-6-rank0-absent-broadcast",
    ],
)
def test_json_codes_parallel_the_sentences(case: str) -> None:
    logs = CASES / case / "logs"
    if not logs.is_dir():
        pytest.fail(f"corpus case {case} is missing")
    j = correlator.diagnose(correlator.load(logs)).to_json()
    assert j["confidence_reasons"] and len(j["confidence_reason_codes"]) == len(j["confidence_reasons"])
    for code, text in zip(j["confidence_reason_codes"], j["confidence_reasons"], strict=True):
        assert _pattern(Reason[code]).fullmatch(text), (code, text)
