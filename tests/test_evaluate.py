"""The corpus scorer: accepted readings, unscored collateral, edges and the real/reconstructed subsets.

Each test copies one real captured case (gloo-01: rank 2 raises, ranks 0, 1, 3 are collateral) and varies
only its expected.json, so the expected score follows from the label alone.
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import pytest

from correlator.batch import in_order
from correlator.evaluate import evaluate, run_case
from tests.conftest import CASES

CASE = CASES / "gloo-01-exception-before-allreduce"


def _case(tmp: Path, name: str, **label: object) -> Path:
    dst = tmp / name
    shutil.copytree(CASE / "logs", dst / "logs")
    want = {
        "initiating_ranks": [2],
        "collateral_ranks": [0, 1, 3],
        "failure_kind": "rank_crash",
        "source": "captured",
    }
    want.update(label)
    (dst / "expected.json").write_text(json.dumps(want))
    return dst


def test_wrong_label_fails_and_accepted_alternative_passes(tmp_path: Path) -> None:
    wrong = run_case(_case(tmp_path, "wrong", initiating_ranks=[3]))
    assert not wrong.initiating_ok and not wrong.passed
    alt = run_case(_case(tmp_path, "alt", initiating_ranks=[3], accept_initiating=[[2]]))
    assert alt.initiating_ok and alt.passed


def test_unscored_collateral_is_ignored(tmp_path: Path) -> None:
    partial = _case(tmp_path, "partial", collateral_ranks=[0])
    assert not run_case(partial).collateral_ok
    unscored = run_case(_case(tmp_path, "unscored", collateral_ranks=[0], collateral_scored=False))
    assert unscored.collateral_ok and unscored.passed


def test_edges_are_scored(tmp_path: Path) -> None:
    # Rank 1 was SIGTERMed by torchrun after rank 2 failed: the edge is killed_by rank 2.
    good = run_case(_case(tmp_path, "good", explained_by={"1": {"rank": 2, "edge": "killed_by"}}))
    assert (good.edges_ok, good.edges_total) == (1, 1) and good.passed
    bad = run_case(_case(tmp_path, "bad", explained_by={"1": {"rank": 0, "edge": "killed_by"}}))
    assert (bad.edges_ok, bad.edges_total) == (0, 1) and not bad.passed


def test_subsets_are_scored_apart(tmp_path: Path) -> None:
    _case(tmp_path, "a-real", source="public")
    _case(tmp_path, "b-recon", source="reconstructed", initiating_ranks=[0])
    rep = evaluate(tmp_path)
    assert rep.totals("real")["cases"] == 1 and rep.totals("real")["initiating_accuracy"] == 1.0
    assert (
        rep.totals("reconstructed")["cases"] == 1
        and rep.totals("reconstructed")["initiating_accuracy"] == 0.0
    )
    assert rep.totals()["initiating_accuracy"] == 0.5
    assert set(rep.to_json()["subsets"]) == {"real", "reconstructed"}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "label", [{"accept_initiating": [2]}, {"collateral_ranks": ["0"]}, {"explained_by": {"1": 2}}]
)
def test_malformed_labels_name_the_field(tmp_path: Path, label: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(label))):
        run_case(_case(tmp_path, "bad", **label))


def _result(*, init_ok: bool, edges: tuple[int, int], known_miss=None, known_edge_miss=None):  # type: ignore[no-untyped-def]
    from correlator.evaluate import CaseResult

    return CaseResult(
        "c",
        init_ok and edges[0] == edges[1],
        init_ok,
        True,
        True,
        {},
        {},
        0.0,
        known_miss=known_miss,
        edges_ok=edges[0],
        edges_total=edges[1],
        known_edge_miss=known_edge_miss,
    )


def test_known_edge_miss_excuses_only_an_edge_miss() -> None:
    from correlator.evaluate import EvalReport

    edge_only = _result(init_ok=True, edges=(1, 2), known_edge_miss="tool gives peer_error")
    assert edge_only.verdict_ok and not edge_only.passed and edge_only.excused
    # the same label does not excuse a wrong verdict: that is a regression
    verdict_wrong = _result(init_ok=False, edges=(1, 2), known_edge_miss="tool gives peer_error")
    assert not verdict_wrong.excused
    # a known_miss does not excuse an edge miss of a right verdict (it would hide a verdict regression)
    assert not _result(init_ok=True, edges=(1, 2), known_miss="old reason").excused
    t = EvalReport([edge_only, verdict_wrong]).totals()
    assert (t["passed"], t["verdict_passed"], t["known_misses"], t["regressions"]) == (0, 1, 1, 1)


def test_stale_known_miss_labels_are_named() -> None:
    assert _result(init_ok=True, edges=(2, 2), known_miss="x").stale_label == (
        "known_miss set but the verdict is right"
    )
    assert _result(init_ok=True, edges=(2, 2), known_edge_miss="x").stale_label == (
        "known_edge_miss set but every expected edge is found"
    )
    assert _result(init_ok=False, edges=(1, 2), known_miss="x").stale_label is None


def test_confidence_bands_count_right_verdicts_per_band() -> None:
    from correlator.evaluate import CaseResult, EvalReport

    def case(conf: float | None, ok: bool, source: str = "public") -> CaseResult:
        got: dict[str, object] = {} if conf is None else {"confidence": conf}
        return CaseResult("c", ok, ok, True, True, {}, got, 0.0, source=source)

    rep = EvalReport(
        [
            case(0.3, True),
            case(0.49, False),
            case(None, False),  # a refused case claims nothing: band < 0.5
            case(0.5, True),  # 0.5 opens the middle band
            case(0.79, False),
            case(0.8, True),
            case(0.95, True),
            case(0.95, False, source="reconstructed"),  # not in the real subset
        ]
    )
    got = {b["band"]: (b["cases"], b["initiating_right"], b["accuracy"]) for b in rep.bands("real")}
    assert got == {"< 0.5": (3, 1, 0.333), "0.5-0.8": (2, 1, 0.5), ">= 0.8": (2, 2, 1.0)}
    assert [b["cases"] for b in rep.bands(None)] == [3, 2, 3]
    assert rep.to_json()["confidence_bands"]["reconstructed"][2]["accuracy"] == 0.0  # type: ignore[index]
    assert EvalReport([]).bands("real")[0]["accuracy"] is None


def test_cases_scored_in_worker_processes_score_as_one_after_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evaluate(workers=2)`` diagnoses the cases in two worker processes: the same results, reported in case
    order, as one after another in this process (a case's seconds aside); a malformed label raises the same
    error from a worker."""
    _case(tmp_path, "a-right")
    _case(tmp_path, "b-wrong", initiating_ranks=[3])
    _case(tmp_path, "c-recon", source="reconstructed", collateral_ranks=[0, 1])
    _case(tmp_path, "d-edge", explained_by={"1": {"rank": 2, "edge": "killed_by"}})

    def scored(workers: int) -> tuple[list[dict[str, object]], list[tuple[int, int, str]]]:
        seen: list[tuple[int, int, str]] = []
        rep = evaluate(tmp_path, on_case=lambda d, t, c: seen.append((d, t, c.name)), workers=workers)
        cases = [{k: v for k, v in c.items() if k != "seconds"} for c in rep.to_json()["cases"]]  # type: ignore[union-attr]
        return cases, seen

    ev = importlib.import_module("correlator.evaluate")
    calls: list[tuple[int, str]] = []

    def spy(run, jobs, workers, kind="threads"):  # type: ignore[no-untyped-def]
        calls.append((workers, kind))
        return in_order(run, jobs, workers, kind)

    monkeypatch.setattr(ev, "in_order", spy)
    one, seen_one = scored(1)
    two, seen_two = scored(2)
    assert calls == [(1, "processes"), (2, "processes")]  # 1: in this process (in_order runs it inline)
    assert (
        seen_one
        == seen_two
        == [(i, 4, n) for i, n in enumerate(["a-right", "b-wrong", "c-recon", "d-edge"], 1)]
    )
    assert [c["passed"] for c in one] == [True, False, False, True]
    assert one == two
    _case(tmp_path, "e-bad", collateral_ranks=["0"])
    with pytest.raises(ValueError, match="collateral_ranks"):
        evaluate(tmp_path, workers=2)


def test_eval_workers_default_to_the_cores_and_are_bounded_by_the_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the module (``correlator.evaluate``, imported from the package, is the function)
    ev = importlib.import_module("correlator.evaluate")
    monkeypatch.setattr(ev, "cores", lambda: 16)
    monkeypatch.delenv("RANKSCOPE_EVAL_WORKERS", raising=False)
    monkeypatch.setenv("RANKSCOPE_MEMORY_MB", str(1 << 20))  # a budget that bounds nothing here
    assert [ev.eval_workers(None, n) for n in (0, 1, 5, 40)] == [1, 1, 5, 16]
    assert ev.eval_workers(3, 40) == 3
    monkeypatch.setenv("RANKSCOPE_EVAL_WORKERS", "4")
    assert ev.eval_workers(None, 40) == 4 and ev.eval_workers(2, 40) == 2
    monkeypatch.setenv("RANKSCOPE_EVAL_WORKERS", "0")  # not a count of workers: the cores
    assert ev.eval_workers(None, 40) == 16
    with pytest.raises(ValueError, match="at least 1"):
        ev.eval_workers(0, 40)


def test_eval_workers_by_default_fit_the_memory_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # 20x a case's bytes + 200 MiB of imports per worker (as the batches of a large job): a 1 GiB budget
    # holds 4 workers of 1 MiB cases, 1 of 64 MiB cases; an explicit count is taken as given
    ev = importlib.import_module("correlator.evaluate")
    monkeypatch.setattr(ev, "cores", lambda: 16)
    monkeypatch.delenv("RANKSCOPE_EVAL_WORKERS", raising=False)
    monkeypatch.setenv("RANKSCOPE_MEMORY_MB", "1024")
    mib = 1024**2
    assert [ev.eval_workers(None, 40, b) for b in (0, mib, 64 * mib)] == [5, 4, 1]
    assert ev.eval_workers(8, 40, 64 * mib) == 8


def test_a_kind_label_outside_the_vocabulary_is_not_scored_and_is_named(tmp_path: Path) -> None:
    """A ``failure_kind`` label no verdict can give (a typo, a free-form name) is not scored: the case is
    judged on its ranks, it carries a warning naming it, the label and the known kinds, and the totals
    say over how many cases the kind accuracy is."""
    from correlator.schema import FAILURE_KINDS

    typo = run_case(_case(tmp_path / "t", "typo", failure_kind="rank_crash_typo"))
    assert typo.kind_ok is None and typo.passed
    w = typo.kind_warning or ""
    assert "typo" in w and "'rank_crash_typo'" in w and "did you mean 'rank_crash'" in w
    assert all(k in w for k in FAILURE_KINDS)
    assert run_case(_case(tmp_path / "k", "known")).kind_warning is None
    _case(tmp_path / "all", "a-known")
    _case(tmp_path / "all", "b-free", failure_kind="python-exception")
    _case(tmp_path / "all", "c-none", failure_kind=None)  # no label at all: not scored, nothing to warn about
    rep = evaluate(tmp_path / "all")
    t = rep.totals()
    assert (t["cases"], t["kind_scored"], t["kind_unknown_labels"], t["kind_accuracy"]) == (3, 1, 1, 1.0)
    assert [c["kind_warning"] is not None for c in rep.to_json()["cases"]] == [False, True, False]  # type: ignore[index,union-attr]


@pytest.mark.parametrize(
    ("source", "subset"),
    [
        ("captured", "real"),
        ("captured: torch 2.13.0+cpu, gloo, torchrun --nproc-per-node 4", "real"),
        ("Public (a GitHub issue)", "real"),
        ("reconstructed by hand", "reconstructed"),
        ("publicly posted", None),
        ("synthetic", None),
        ("", None),
        (None, None),
    ],
)
def test_a_source_with_detail_after_its_first_word_keeps_its_subset(
    source: str | None, subset: str | None
) -> None:
    from correlator.evaluate import subset_of

    assert subset_of(source) == subset


def test_eval_warns_on_unscored_kinds_and_says_why_the_bands_are_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rankscope eval``: a warning per case whose kind label is unknown (the run still passes), the kind
    accuracy with the number of cases it covers, the cases in no subset, and an empty band block explained."""
    from tests.conftest import run_cli

    _case(tmp_path, "a-detail", source="captured: torch 2.13.0+cpu, gloo")
    _case(tmp_path, "b-typo", failure_kind="cuda_oom_typo", source=None)
    code, out, err = run_cli(["eval", tmp_path, "-j1", "-q"], monkeypatch, capsys)
    assert code == 0, err
    assert "warning: b-typo: failure_kind 'cuda_oom_typo' is not a known kind" in " ".join(err.split())
    text = " ".join(out.split())
    assert "PASS b-typo:" in text and "(label 'cuda_oom_typo' not scored)" in text
    assert "real (public + captured): 1/1 cases pass" in text
    assert "kind accuracy 1.000 (1 of 2 cases labelled with a known kind)" in text
    assert "1 of 2 cases count in 'all' only" in text and "(b-typo)" in text
    assert ">= 0.8: 1 verdicts, 1 right" in text  # the case with a detailed source is a real one
    (tmp_path / "a-detail" / "expected.json").unlink()
    code, out, _ = run_cli(["eval", tmp_path, "-j1", "-q"], monkeypatch, capsys)
    text = " ".join(out.split())
    assert code == 0 and "kind accuracy - (no case labelled with a known kind)" in text
    assert (
        "confidence bands, real cases: none to score (no case's source starts with public or captured)"
        in text
    )
