"""Issue #34 item 4: ``diagnose --exit-code`` says in its exit status whether the logs show a failure."""

from __future__ import annotations

import json

import pytest

from tests.conftest import CASES, run_cli


@pytest.mark.parametrize(
    "case", ["gloo-07-clean-run", "public-02-oom-rank2-multinode-timeouts", "gloo-05-sigkill-oom"]
)
def test_exit_code_follows_the_expected_answer(case, monkeypatch, capsys):
    want = json.loads((CASES / case / "expected.json").read_text())
    failed = want["failure_kind"] != "none"  # the answer written before the tool saw the case
    code, out, err = run_cli(["diagnose", CASES / case / "logs", "--exit-code", "-q"], monkeypatch, capsys)
    assert code == (4 if failed else 0), err
    assert out.strip(), "the verdict is still printed"
    code, _, err = run_cli(["diagnose", CASES / case / "logs", "-q"], monkeypatch, capsys)
    assert code == 0, err  # without the option: 0 whatever it finds
