"""Two launches of one job appended to the same files (a requeued Slurm job's ``--open-mode=append`` output, a
re-run into the same log folder): each launch is an attempt of its own, diagnosed apart.

Built from two real captures (fixtures/cases/gloo-01 then gloo-05, torch 2.13, gloo, torchrun): the launcher's
output of both into one ``slurm-777.out``, each rank's stdout and stderr of both into one ``rank<N>.log``. Each
launch's answer is its case's ``expected.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import correlator
from correlator.api import diagnose_path

CASES = Path(__file__).parent.parent / "fixtures" / "cases"
RUNS = ["gloo-01-exception-before-allreduce", "gloo-05-sigkill-oom"]


def _rank_dir(case: str) -> Path:
    (d,) = (CASES / case / "logs" / "torchrun_logs").glob("*/attempt_0")
    return d


def _appended(root: Path, runs: list[str]) -> Path:
    root.mkdir()
    launcher = "".join((CASES / c / "logs" / "launcher.log").read_text() for c in runs)
    (root / "slurm-777.out").write_text(launcher)
    for r in range(4):
        text = ""
        for c in runs:
            for name in ("stdout.log", "stderr.log"):
                p = _rank_dir(c) / str(r) / name
                text += p.read_text() if p.exists() else ""
        (root / f"rank{r}.log").write_text(text)
    return root


def _want(case: str) -> tuple[list[int], str]:
    e = json.loads((CASES / case / "expected.json").read_text())
    return e["initiating_ranks"], e["failure_kind"]


def test_each_launch_is_an_attempt_with_its_own_verdict(tmp_path: Path) -> None:
    root = _appended(tmp_path / "logs", RUNS)
    t = correlator.load(root)
    assert sorted(t["attempt"].unique().to_list()) == [0, 1]
    # every row of the second launch's launcher output is attempt 1: from its first line on
    launcher = t.filter(t["path"] == "slurm-777.out")
    first_of_second = len((CASES / RUNS[0] / "logs" / "launcher.log").read_text().splitlines()) + 1
    assert launcher.filter(launcher["line"] < first_of_second)["attempt"].unique().to_list() == [0]
    assert launcher.filter(launcher["line"] >= first_of_second)["attempt"].unique().to_list() == [1]
    # each rank file by the launches' times: its first run's lines attempt 0, its second run's attempt 1
    for r in range(4):
        n0 = sum(
            len(p.read_text().splitlines())
            for p in (_rank_dir(RUNS[0]) / str(r) / n for n in ("stdout.log", "stderr.log"))
            if p.exists()
        )
        rows = t.filter(t["path"] == f"rank{r}.log")
        assert rows.filter(rows["line"] <= n0)["attempt"].unique().to_list() == [0], r
        assert rows.filter(rows["line"] > n0)["attempt"].unique().to_list() == [1], r
    for attempt, case in enumerate(RUNS):
        d = diagnose_path(root, attempt=attempt).diagnosis
        assert (d.attempt, d.initiating_ranks, d.failure_kind) == (attempt, *_want(case)), case
    top = diagnose_path(root).diagnosis  # the first failed launch's verdict on top, the later one named
    assert (top.initiating_ranks, top.failure_kind) == _want(RUNS[0])


def test_one_launch_of_several_agents_stays_one_attempt(tmp_path: Path) -> None:
    # each agent's first lines at the start of one launch follow no end report: one attempt
    root = tmp_path / "logs"
    root.mkdir()
    banner = (CASES / RUNS[0] / "logs" / "launcher.log").read_text().splitlines()[:5]
    rest = (CASES / RUNS[0] / "logs" / "launcher.log").read_text()
    (root / "slurm-777.out").write_text("\n".join(banner) + "\n" + rest)
    t = correlator.load(root)
    assert t["attempt"].unique().to_list() == [0]
