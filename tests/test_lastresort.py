"""Issue #30 item 2 (in part): a text log with a failure in it is not refused when no parser recognises it:
a rank named next to a failure word gives a low-confidence verdict that quotes the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from correlator import lastresort
from tests.conftest import run_cli

#: A launcher no parser knows, in the shape of PaddlePaddle's ``ABORT!!! … rank=[2,3] was aborted`` (Paddle's own line is
#: a real format since parsers/paddle.py, tests/test_launchers_more.py: it no longer reaches the last resort).
PADDLE = "supervisor: job halted, the worker process with rank=[2,3] was aborted. Please check its log."


def _diagnose(tmp_path: Path, text: str, monkeypatch, capsys) -> tuple[int, dict, str]:  # type: ignore[no-untyped-def]
    (tmp_path / "launch.log").write_text(text)
    code, out, err = run_cli(["diagnose", tmp_path, "--format", "json", "-q"], monkeypatch, capsys)
    return code, (json.loads(out) if code == 0 else {}), err


def test_paddle_abort_names_the_aborted_trainers(tmp_path, monkeypatch, capsys):
    text = "supervisor: waiting for peers\n" + PADDLE + "\n"
    code, d, err = _diagnose(tmp_path, text, monkeypatch, capsys)
    assert code == 0, err
    assert d["initiating_ranks"] == [2, 3]
    assert d["confidence"] <= 0.3
    assert d["confidence_reason_codes"] == ["LAST_RESORT"]
    assert [(e["path"], e["line"]) for e in d["evidence"]] == [("launch.log", 2)] * 2


@pytest.mark.parametrize(
    ("line", "ranks", "kind"),
    [
        ("worker 5 died with signal 9", [5], "rank_crash"),
        ("job stuck: Missing ranks: 1, 3", [1, 3], "straggler_hang"),
        ("trainer 0 exited with code 1", [0], "rank_crash"),
    ],
)
def test_failure_word_next_to_a_rank(line, ranks, kind, tmp_path, monkeypatch, capsys):
    code, d, err = _diagnose(tmp_path, f"starting\n{line}\n", monkeypatch, capsys)
    assert code == 0, err
    assert (d["initiating_ranks"], d["failure_kind"]) == (ranks, kind)


def test_no_rank_or_no_failure_word_names_no_one_and_only_blank_input_is_refused(
    tmp_path, monkeypatch, capsys
):
    for text, kind in (
        ("hello world\nworker 3 started\n", "none"),  # a rank, but no failure word
        ("fatal error, giving up\n", "unknown"),  # a failure word, but no rank
        ("Process 2109115 was killed\n", "unknown"),  # a pid is not a rank
    ):
        code, d, err = _diagnose(tmp_path, text, monkeypatch, capsys)
        assert code == 0, (text, err)
        assert "no line is one rankscope recognises" in d["summary"], (text, d)
        assert (d["failure_kind"], d["initiating_ranks"]) == (kind, []), (text, d)  # nobody is named
        assert d["confidence_reason_codes"] == ["NOTHING_RECOGNISED"]
    code, _, err = _diagnose(tmp_path, "\n\n", monkeypatch, capsys)
    assert code == 2 and "no text to read" in err


def test_mentions_skip_pids_and_repeats():
    assert lastresort._mentioned("process 2109115 failed; worker 7 failed; rank=[7, 2]", 1 << 18) == [7, 2]
    assert lastresort._mentioned("local_rank: 4 error", 1 << 18) == [4]
