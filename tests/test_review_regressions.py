"""Regressions found by reviewing the diagnosis with small hand-written log folders."""

from __future__ import annotations

from pathlib import Path

import correlator

WD = (
    "[rank{r}]:[E101 10:10:00.000000 ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=10, OpType=ALLREDUCE, NumelIn=100, NumelOut=100, Timeout(ms)=600000) ran for 600037 "
    "milliseconds before timing out."
)
OK = "[rank{r}]:2026-01-01 10:00:00,000 INFO step=5 ok"


def _write(root: Path, files: dict[str, list[str]]) -> Path:
    for name, lines in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n".join(lines) + "\n")
    return root


def _diag(root: Path, attempt: int | None = None) -> correlator.Diagnosis:
    return correlator.diagnose(correlator.load(root), attempt=attempt)


def test_heartbeat_after_own_timeout_is_an_effect(tmp_path: Path) -> None:
    hb = "[rank{r}]:[E101 10:18:00.000000 ProcessGroupNCCL.cpp:1316] [PG 0 Rank {r}] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1"
    files = {f"rank{r}.log": [OK.format(r=r), WD.format(r=r), hb.format(r=r)] for r in range(3)}
    files["rank3.log"] = [OK.format(r=3)]
    d = _diag(_write(tmp_path, files))
    assert (d.initiating_ranks, d.failure_kind) == ([3], "straggler_hang")


def test_silent_rank_without_progress_is_behind_a_rank_that_entered(tmp_path: Path) -> None:
    fp = (
        "[rank{r}]:[I101 10:00:01.000000 ProcessGroupWrapper.cpp:710] [Rank {r}] Running collective: "
        "CollectiveFingerPrint(SequenceNumber=10, OpType=ALLREDUCE, TensorShape=[32], TensorDtypes=Float)"
    )
    files = {f"rank{r}.log": [OK.format(r=r), fp.format(r=r), WD.format(r=r)] for r in (0, 1)}
    files["rank3.log"] = [OK.format(r=3), fp.format(r=3)]
    files["rank2.log"] = [OK.format(r=2)]
    assert _diag(_write(tmp_path, files)).initiating_ranks == [2]


def test_early_exit_needs_the_launchers_report(tmp_path: Path) -> None:
    files = {f"rank{r}.log": [OK.format(r=r), WD.format(r=r)] for r in range(3)}
    files["rank3.log"] = [OK.format(r=3)]
    files["launcher.log"] = [
        "W0101 09:59:00.000000 100 torch/distributed/run.py:874] *****************************************"
    ]
    d = _diag(_write(tmp_path, files))
    assert (d.initiating_ranks, d.failure_kind) == ([3], "straggler_hang")


def test_srun_aborted_ranks_are_not_the_cause(tmp_path: Path) -> None:
    lines = [f"{r}: 2026-01-01 10:00:00,000 INFO rank={r} step=5 ok" for r in range(4)]
    lines += [f"{r}: " + WD.format(r=r) for r in range(3)]
    lines += [
        "srun: error: node-a: tasks 0-2: Aborted (core dumped)",
        "srun: error: node-a: task 3: Terminated",
    ]
    d = _diag(_write(tmp_path, {"slurm-1.out": lines}))
    assert (d.initiating_ranks, d.failure_kind) == ([3], "straggler_hang")


def test_srun_task_list_naming_ranks_without_lines(tmp_path: Path) -> None:
    lines = [
        "0: 2024-06-14 02:42:01,325 INFO starting",
        "1: 2024-06-14 02:42:01,325 INFO starting",
        "1: Traceback (most recent call last):",
        '1:   File "train.py", line 3, in <module>',
        "1: ValueError: bad",
        "srun: error: node-a: task 1: Exited with exit code 1",
        "srun: error: node-b: tasks 2-3: Terminated",
    ]
    d = _diag(_write(tmp_path, {"slurm-1.out": lines}))
    assert d.initiating_ranks == [1] and set(d.collateral_ranks) == {2, 3}


def test_attempt_option_shows_a_clean_attempt(tmp_path: Path) -> None:
    files = {
        "run_x/attempt_0/0/stdout.log": ["2026-01-01 10:00:00,000 INFO [trainer] rank=0 step=1 loss=1.0"],
        "run_x/attempt_0/1/stdout.log": ["2026-01-01 10:00:00,000 INFO [trainer] rank=1 step=1 loss=1.0"],
        "run_x/attempt_0/1/stderr.log": [
            "Traceback (most recent call last):",
            '  File "train.py", line 3, in <module>',
            "ValueError: bad",
        ],
        "run_x/attempt_1/0/stdout.log": ["2026-01-01 10:01:00,000 INFO [trainer] rank=0 step=1 loss=1.0"],
        "run_x/attempt_1/1/stdout.log": ["2026-01-01 10:01:00,000 INFO [trainer] rank=1 step=1 loss=1.0"],
    }
    root = _write(tmp_path, files)
    assert _diag(root).initiating_ranks == [1]
    d1 = _diag(root, attempt=1)
    assert (d1.attempt, d1.failure_kind) == (1, "none")
