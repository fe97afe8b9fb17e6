"""Launcher formats captured on this project's box (fixtures/cases/cap-19 … cap-28, fixtures/capture/launchers.py):
each parse rule added for them, pinned on a minimal line copied from the capture."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import correlator
import parsers


def _events(tmp_path: Path, text: str, name: str = "console.log") -> pl.DataFrame:
    (tmp_path / name).write_text(text + "\n")
    return correlator.load(tmp_path)


def _kind(t: pl.DataFrame, kind: str) -> dict:
    rows = t.filter(pl.col("kind") == kind)
    assert rows.height == 1, t.select("kind", "rank", "message").to_dicts()
    return rows.row(0, named=True)


def test_spawn_process_raised_names_the_process(tmp_path: Path) -> None:
    # cap-19-spawn-exception, torch 2.13 mp.spawn: the parent's ProcessRaisedException block
    text = (
        "torch.multiprocessing.spawn.ProcessRaisedException: \n\n"
        "-- Process 2 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/app/train.py", line 179, in main\n'
        "    raise CorruptBatchError(\n"
        "train.CorruptBatchError: corrupt sample in shard 17 (record 4291): expected 16 features, got 15"
    )
    r = _kind(_events(tmp_path, text), "worker_failed")
    assert (r["rank"], r["message"]) == (2, "-- Process 2 terminated with the following error:")


def test_spawn_process_exited_signal(tmp_path: Path) -> None:
    # cap-20-spawn-sigkill
    text = "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL"
    r = _kind(_events(tmp_path, text), "worker_failed")
    assert (r["rank"], r["signal"], r["exit_code"]) == (1, "SIGKILL", -9)


def test_spawn_process_exited_exit_code(tmp_path: Path) -> None:
    # same raise site, the non-signal branch (torch/multiprocessing/spawn.py ProcessContext.join)
    text = "torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with exit code 7"
    r = _kind(_events(tmp_path, text), "worker_failed")
    assert (r["rank"], r["signal"], r["exit_code"]) == (3, None, 7)


def test_spawn_terminating_is_a_signalled_worker(tmp_path: Path) -> None:
    text = "W1201 19:01:17.290000 15002 torch/multiprocessing/spawn.py:165] Terminating process 15021 via signal SIGTERM"
    r = _kind(_events(tmp_path, text), "worker_signalled")
    assert (r["pid"], r["signal"], r["layer"]) == (15021, "SIGTERM", "elastic")


def test_deepspeed_exit_line_names_no_rank(tmp_path: Path) -> None:
    # cap-27 / cap-29, DeepSpeed 0.19.8: local rank 2 (cap-27) or 1 (cap-29) failed, yet the line carries the LAST
    # spawned command ('--local_rank=3'): sigkill_handler formats the spawn loop's leftover ``cmd``.
    text = (
        "[2026-12-01 19:10:25,477] [ERROR] [launch.py:259:sigkill_handler] ['/opt/venv/bin/python3', '-u', "
        "'train.py', '--local_rank=3', '--fault', 'sigkill', '--fault-rank', '1', '--fault-step', '3'] exits with "
        "return code = -9"
    )
    r = _kind(_events(tmp_path, text), "worker_failed")
    assert (r["exit_code"], r["rank"], r["local_rank"]) == (-9, None, None)


def test_record_glued_after_progress_bar_keeps_its_prefix(tmp_path: Path) -> None:
    # cap-28 (Lightning 2.6.6): rank 1's excepthook traceback starts right after rank 0's tqdm bar
    text = (
        "Epoch 0:  30%|███       | 3/10 [00:00<00:00, 49.46it/s][rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/opt/app/train_lightning.py", line 65, in <module>\n'
        "[rank1]:     main()\n"
        "[rank1]: CorruptBatchError: corrupt sample in shard 10 (batch 3): expected 16 features, got 15"
    )
    t = _events(tmp_path, text)
    r = _kind(t, "python_exception")
    assert (r["rank"], r["line"], r["exc_type"]) == (1, 1, "CorruptBatchError")
    assert t.filter(pl.col("line") == 1)["message"].to_list()[0].endswith("49.46it/s]")
    assert t["line_count"].sum() == 4


def test_progress_bar_postfix_and_plain_text_after_it(tmp_path: Path) -> None:
    # a tqdm postfix stays inside the stats bracket; ordinary text after a bar is not a record start
    text = (
        "Epoch 0:  50%|█████     | 5/10 [00:01<00:01, 4.10it/s, v_num=0, train_loss=0.91]"
        "[rank: 1] Child process with PID 7 terminated with code 1. Forcefully terminating all other processes "
        "to avoid zombies 🧟\n"
        "Epoch 0:  60%|██████    | 6/10 [00:01<00:01, 4.10it/s] done"
    )
    t = _events(tmp_path, text)
    assert t["line"].to_list() == [1, 1, 2]
    assert _kind(t, "worker_failed")["exit_code"] == 1
    assert t.filter(pl.col("line") == 2)["message"].to_list()[0].endswith("4.10it/s] done")


def test_lightning_child_observer_names_the_local_rank(tmp_path: Path) -> None:
    # cap-30: the observer's [rank: N] is the failed child's local rank (index + 1), not the writer's rank
    text = (
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n"
        "[rank: 1] Seed set to 1234\n"
        "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n"
        "Epoch 0:  30%|███       | 3/10 [00:00<00:00, 41.55it/s][rank: 1] Child process with PID 11896 terminated "
        "with code -9. Forcefully terminating all other processes to avoid zombies 🧟"
    )
    t = _events(tmp_path, text)
    r = _kind(t, "worker_failed")
    assert (r["local_rank"], r["rank"], r["pid"], r["exit_code"]) == (1, 1, 11896, -9)
    seed = t.filter(pl.col("message") == "Seed set to 1234").row(0, named=True)
    assert (seed["rank"], seed["layer"]) == (1, "app")
    init = (
        t.filter(pl.col("message").str.starts_with("Initializing distributed"))
        .select("rank", "world_size")
        .rows()
    )
    assert init == [(0, 2), (1, 2)]


def test_mpirun_signal_report_names_rank_and_signal(tmp_path: Path) -> None:
    # cap-31, Open MPI 4.1.4: the only line that says which rank died of SIGKILL
    text = "mpirun noticed that process rank 2 with PID 0 on node node-a exited on signal 9 (Killed)."
    r = _kind(_events(tmp_path, text), "worker_failed")
    assert (r["rank"], r["signal"], r["host"], r["pid"], r["exit_code"]) == (2, "SIGKILL", "node-a", None, -9)


def test_mpirun_signal_report_any_signal_number(tmp_path: Path) -> None:
    # The number is the signal (signal(7) on Linux: 4 is SIGILL); the exit code follows torchrun's -N convention.
    text = "mpirun noticed that process rank 5 with PID 4242 on node node-b exited on signal 4 (Illegal instruction)."
    r = _kind(_events(tmp_path, text), "worker_failed")
    assert (r["rank"], r["signal"], r["host"], r["pid"], r["exit_code"]) == (5, "SIGILL", "node-b", 4242, -4)


def test_pdsh_exit_status_line(tmp_path: Path) -> None:
    # cap-25, pdsh 2.34 -S -R exec
    r = _kind(_events(tmp_path, "pdsh@node-a: node-b: bash exited with exit code 1"), "process_exit")
    assert (r["host"], r["exit_code"], r["rank"]) == ("node-b", 1, None)


def test_spawn_child_traceback_gets_the_process_index(tmp_path: Path) -> None:
    # cap-33 (torch 2.13 mp.spawn): the only copy of process 2's error is inside the parent's exception
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/app/spawn_train.py", line 34, in <module>\n'
        "    mp.spawn(worker, args=(nprocs, port), nprocs=nprocs, join=True)\n"
        "torch.multiprocessing.spawn.ProcessRaisedException: \n"
        "\n"
        "-- Process 2 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in all_reduce\n'
        "    work.wait()\n"
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
        "waiting 10000ms for recv operation to complete\n"
        "after the block"
    )
    t = _events(tmp_path, text)
    child = t.filter(pl.col("message").str.contains("Timed out waiting"))
    assert child.select("rank", "kind", "timeout_ms").rows() == [(2, "gloo_timeout", 10000)]
    parent = t.filter(pl.col("message").str.starts_with("torch.multiprocessing.spawn.ProcessRaisedException"))
    assert parent["rank"].to_list() == [None]
    assert t.filter(pl.col("message") == "after the block")["rank"].to_list() == [None]
    assert t["line_count"].sum() == 11


def test_srun_and_mpirun_exit_reports_count_as_launcher_output() -> None:
    """ "no launcher output to confirm exit statuses" is not said next to srun's or mpirun's own exit reports
    (cap-24: `srun: error: node-a: task 2: Killed`, `tasks 1,3: Exited with exit code 1`; cap-31: `mpirun
    noticed that process rank 2 … exited on signal 9 (Killed).`); it still is where no launcher wrote
    anything (public-02: per-node combined logs only). Before, only torchelastic's lines counted."""
    cases = Path(__file__).resolve().parents[1] / "fixtures" / "cases"
    for case, reported in (
        ("cap-24-srun-per-rank-sigkill", "srun: error: node-a: task 2: Killed"),
        ("cap-31-mpirun-tag-sigkill", "mpirun noticed that process rank 2 with PID 0 on node node-a"),
    ):
        logs = cases / case / "logs"
        assert any(reported in f.read_text() for f in logs.rglob("*") if f.is_file())
        d = correlator.diagnose(correlator.load(logs))
        assert "NO_LAUNCHER" not in d.confidence_reason_codes, case
        assert "no launcher output to confirm exit statuses" not in d.confidence_reasons, case
    d = correlator.diagnose(correlator.load(cases / "public-02-oom-rank2-multinode-timeouts" / "logs"))
    assert "NO_LAUNCHER" in d.confidence_reason_codes


def test_exit_reports_are_the_rows_whose_rule_holds_among_plain_log_lines() -> None:
    # srun's Force Terminated is a `log` row: exit_reports tests the rules' literals over every `log` row
    # before the rules themselves; the rows are those where a rule's kind, literal and pattern hold
    rows = [
        ("log", "step=5 loss=2.31"),
        ("log", "srun: Force Terminated StepId=3.0"),  # srun_force_terminated (kind log)
        ("log", "srun: Force Terminated"),  # the literal without the pattern's StepId
        ("process_exit", "srun: error: node-b: task 11: Exited with exit code 1"),  # srun_exit
        ("log", "srun: error: node-b: task 11: Exited with exit code 1"),  # srun_exit's text, not its kind
        ("launcher_error", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "),
        ("python_exception", "RuntimeError: boom"),
        ("log", None),
    ]
    t = pl.DataFrame(
        {"kind": [k for k, _ in rows], "message": [m for _, m in rows], "i": list(range(len(rows)))}
    )
    assert parsers.exit_reports(t)["i"].to_list() == [1, 3, 5]
    assert t.filter(parsers.exit_report())["i"].to_list() == [1, 3, 5]
