"""``rankscope watch --on-stall dump-stacks`` (issue #33 item 4): the job's workers are found from their
environment, each is dumped with py-spy into DIR/rankscope-stacks-<time>/rank<N>.txt, and the dumps are then
read like any stack dump. A fake ``/proc`` and a fake ``py-spy`` (a script printing a real py-spy dump of
fixtures/cases/stk-01) stand in for a live job here; the live run is in the README."""

from __future__ import annotations

import datetime as dt
import os
import stat
import sys
from pathlib import Path

import polars as pl

import correlator
from correlator import stackdump

DUMP = Path(__file__).resolve().parent.parent / "fixtures/cases/stk-01-dataloader-read-hang/logs/stacks"


def _proc(tmp: Path, pid: int, env: dict[str, str], stdout: Path | None = None) -> None:
    d = tmp / "proc" / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")
    if stdout is not None:
        os.symlink(stdout, d / "fd" / "1")


def test_workers_of_the_watched_job_only(tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "run/attempt_0/1").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    _proc(tmp_path, 101, {"RANK": "1", "TORCHELASTIC_ERROR_FILE": str(job / "run/attempt_0/1/error.json")})
    _proc(tmp_path, 102, {"RANK": "3"}, stdout=job / "task-3.out")  # srun --output / a shell redirect
    _proc(tmp_path, 103, {"RANK": "0", "TORCHELASTIC_ERROR_FILE": str(other / "error.json")})  # another job
    _proc(tmp_path, 104, {"PATH": "/usr/bin"})  # not a worker
    assert stackdump.worker_pids(job, proc=str(tmp_path / "proc")) == {1: 101, 3: 102}


def test_dumps_are_written_by_rank_and_diagnosed(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank0.log").write_text("2026-12-04 23:14:40,411 INFO [trainer] rank=0 step=3 loss=0.8526\n")
    fake = tmp_path / "py-spy"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\npid = sys.argv[-1]\n"
        f"sys.stdout.write(open({str(DUMP)!r} + '/rank' + str(int(pid) - 100) + '.txt').read())\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    now = dt.datetime(2026, 12, 4, 23, 14, 55, tzinfo=dt.UTC)
    folder, done, problems = stackdump.dump_stacks(job, {0: 100, 1: 101, 7: 999}, str(fake), now=now)
    assert folder == job / "rankscope-stacks-20261204T231455Z" and done == [0, 1] and len(problems) == 1
    assert sorted(p.name for p in folder.iterdir()) == ["rank0.txt", "rank1.txt", "watch.log"]
    t = correlator.load(job)
    d = t.filter(pl.col("kind") == "stack_dump").sort("rank")
    assert d.select("rank", "pid", "op").rows() == [(0, 17606, "ALLREDUCE"), (1, 17607, None)]
    assert t["ts"].max() == now  # watch.log stamps the moment of the dumps
