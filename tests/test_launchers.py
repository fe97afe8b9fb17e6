"""Launcher formats captured on this project's box (fixtures/cases/cap-19 … cap-28, fixtures/capture/launchers.py):
each parse rule added for them, pinned on a minimal line copied from the capture."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import correlator


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
    assert (r["rank"], r["signal"], r["exit_code"]) == (1, "SIGKILL", None)


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
    text = ("[2026-12-01 19:10:25,477] [ERROR] [launch.py:259:sigkill_handler] ['/opt/venv/bin/python3', '-u', "
            "'train.py', '--local_rank=3', '--fault', 'sigkill', '--fault-rank', '1', '--fault-step', '3'] exits with "
            "return code = -9")
    r = _kind(_events(tmp_path, text), "worker_failed")
    assert (r["exit_code"], r["rank"], r["local_rank"]) == (-9, None, None)
