"""Stack dumps as evidence of a silent hang (issue #33): py-spy and faulthandler dumps become one
``stack_dump`` row each (parsers.stack), are placed on their rank (file name, pid), and the odd rank out names
the initiator (correlator.stacks); a job stopped from outside is not a launcher failure.

The dump texts below are lines of the real captures in fixtures/cases/stk-* (py-spy 0.4.3, CPython 3.11.7)
and, for ``--locals``, py-spy's own format strings (src/dump.rs write_trace)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import correlator
from correlator import stacks
from parsers import stack

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "cases"

PYSPY_ALLREDUCE = """Process 17606: /opt/venv/bin/python -u train.py --fault slow_read --fault-rank 1
Python v3.11.7 (/usr/local/bin/python3.11)

Thread 17606 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:3252)
    _exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)
    sync_grads (train.py:102)
    main (train.py:252)
    record.<locals>.wrap.<locals>.wrapper (torch/distributed/elastic/multiprocessing/errors/__init__.py:367)
    <module> (train.py:283)"""

PYSPY_LOADER = """Process 17607: /opt/venv/bin/python -u train.py --fault slow_read --fault-rank 1
Python v3.11.7 (/usr/local/bin/python3.11)

Thread 17607 (idle): "MainThread"
    RemoteShards.__getitem__ (train.py:91)
    _MapDatasetFetcher.fetch.<locals>.<listcomp> (torch/utils/data/_utils/fetch.py:54)
    _MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:54)
    _SingleProcessDataLoaderIter._next_data (torch/utils/data/dataloader.py:785)
    _BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:725)
    main (train.py:240)
    record.<locals>.wrap.<locals>.wrapper (torch/distributed/elastic/multiprocessing/errors/__init__.py:367)
    <module> (train.py:283)"""

#: ``--locals`` (dump.rs: ``        Arguments:`` / ``        Locals:`` / ``            name: repr``) and a second
#: thread (a thread block without a name would print ``Thread 0x7F.. (idle)``).
PYSPY_LOCALS = """Process 19317: python train.py --local_rank=2
Python v3.11.7 (/usr/local/bin/python3.11)

Thread 0x7F0A3C2B1740 (active): "Thread-1"
    wait (threading.py:327)
    run (threading.py:982)
Thread 19317 (idle): "MainThread"
    save (torch/serialization.py:1002)
        Arguments:
            obj: <dict at 0x7f0a3c2b1740>
            f: "/ckpt/step3.pt"
        Locals:
            pickle_protocol: 2
    save_checkpoint (train.py:96)
        Arguments:
            model: <Sequential at 0x7f0a3c2b1750>
    main (train.py:247)
    <module> (train.py:283)"""

#: ``--native`` (stk-03's rank 3): native frames interleaved, a libc frame below ``<module>``.
PYSPY_NATIVE = """Process 20655: /opt/venv/bin/python -u train.py --fault subgroup_barrier
Python v3.11.7 (/usr/local/bin/python3.11)

Thread 20655 (idle): "MainThread"
    0x7efd6a4a3f16 (libc.so.6)
    pthread_cond_wait (libc.so.6)
    c10d::Work::wait (libtorch_cpu.so)
    pybind11::cpp_function::dispatcher (libtorch_python.so)
    barrier (torch/distributed/distributed_c10d.py:5356)
    _exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)
    main (train.py:262)
    <module> (train.py:283)
    0x7efd6a44524a (libc.so.6)"""

#: faulthandler (CPython traceback.c), as written to a rank's stderr by ``kill -USR1`` (stk-01, rank 1).
FAULTHANDLER = """Thread 0x00007f7794be3000 (most recent call first):
  File "/usr/local/lib/python3.11/threading.py", line 327 in wait

Current thread 0x00007f7794be3b80 (most recent call first):
  File "/opt/app/train.py", line 91 in __getitem__
  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 725 in __next__
  File "/opt/app/train.py", line 240 in main
  File "/opt/app/train.py", line 283 in <module>"""


def _load(tmp_path: Path, files: dict[str, str]) -> pl.DataFrame:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text + "\n")
    return correlator.load(tmp_path)


def test_pyspy_dump_is_one_row_with_pid_op_and_place(tmp_path: Path) -> None:
    t = _load(tmp_path, {"stacks/rank2.txt": PYSPY_ALLREDUCE})
    assert t.height == 1 and t["line_count"].sum() == len(PYSPY_ALLREDUCE.split("\n"))
    r = t.row(0, named=True)
    assert (r["kind"], r["layer"], r["rank"], r["pid"], r["op"]) == (
        "stack_dump",
        "stack",
        2,
        17606,
        "ALLREDUCE",
    )
    assert "in all_reduce at train.py:102" in r["message"]
    assert r["raw"] == PYSPY_ALLREDUCE


def test_place_of_each_variant() -> None:
    loader = stack.place(PYSPY_LOADER)
    assert loader is not None and (loader.collective, loader.site) == (None, "train.py:91")
    assert loader.key == ("RemoteShards.__getitem__", "train.py:91")
    locals_ = stack.place(PYSPY_LOCALS)  # the main thread, not Thread-1; the locals are not frames
    assert locals_ is not None and locals_.thread == "MainThread"
    assert [f.fn for f in locals_.frames] == ["save", "save_checkpoint", "main", "<module>"]
    assert locals_.site == "train.py:96"
    native = stack.place(PYSPY_NATIVE)
    assert native is not None and (native.collective, native.op, native.site) == (
        "barrier",
        "BARRIER",
        "train.py:262",
    )
    assert native.text().startswith("in barrier at train.py:262: barrier (distributed_c10d.py:5356)")
    fh = stack.place(FAULTHANDLER)
    assert fh is not None and (fh.thread, fh.collective, fh.site) == ("current", None, "train.py:91")


def test_local_rank_in_the_command_line(tmp_path: Path) -> None:
    t = _load(tmp_path, {"dump.txt": PYSPY_LOCALS})
    r = t.filter(pl.col("kind") == "stack_dump").row(0, named=True)
    assert (r["pid"], r["local_rank"], r["op"]) == (19317, 2, None)
    env = PYSPY_ALLREDUCE.replace(
        "Process 17606: /opt/venv/bin/python", "Process 17606: env RANK=3 /opt/venv/bin/python"
    )
    t = _load(tmp_path / "b", {"dump.txt": env})
    assert t.filter(pl.col("kind") == "stack_dump").select("rank", "rank_source").row(0) == (3, "message")


def test_faulthandler_blocks_in_a_rank_log_are_one_dump(tmp_path: Path) -> None:
    log = "2026-12-04 23:14:40,409 INFO [trainer] rank=1 step=3 loss=1.0552\n" + FAULTHANDLER
    t = _load(tmp_path, {"rank1.log": log})
    d = t.filter(pl.col("kind") == "stack_dump")
    assert d.height == 1 and d["rank"][0] == 1 and d["line_count"][0] == len(FAULTHANDLER.split("\n"))
    assert t["line_count"].sum() == len(log.split("\n"))


def test_a_process_line_without_pyspy_header_is_not_a_dump(tmp_path: Path) -> None:
    t = _load(tmp_path, {"app.log": "Process 12: started the data server\nall good"})
    assert "stack_dump" not in t["kind"].to_list()


def _rows(places: dict[int, str]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "rank": list(places),
            "event_id": [10 * r for r in places],
            "raw": list(places.values()),
            "kind": ["stack_dump"] * len(places),
        }
    )


def test_the_rank_in_no_collective_is_the_straggler() -> None:
    v = stacks.where_ranks_stand(
        _rows({0: PYSPY_ALLREDUCE, 1: PYSPY_LOADER, 2: PYSPY_ALLREDUCE, 3: PYSPY_ALLREDUCE})
    )
    assert v is not None
    assert (v.initiators, v.failure_kind, v.cause_event, v.waiting) == (
        [1],
        "straggler_hang",
        {1: 10},
        [0, 2, 3],
    )
    assert v.evidence[0] == 10 and "the other 3 in all_reduce at train.py:102" in v.text


def test_the_rank_in_another_collective_is_odd() -> None:
    v = stacks.where_ranks_stand(
        _rows({0: PYSPY_ALLREDUCE, 1: PYSPY_ALLREDUCE, 2: PYSPY_ALLREDUCE, 3: PYSPY_NATIVE})
    )
    assert v is not None and (v.initiators, v.failure_kind) == ([3], "collective_mismatch")


@pytest.mark.parametrize(
    "places",
    [
        {0: PYSPY_ALLREDUCE, 1: PYSPY_LOADER, 2: PYSPY_LOADER, 3: PYSPY_LOADER},  # most ranks are computing
        {0: PYSPY_ALLREDUCE, 1: PYSPY_ALLREDUCE, 2: PYSPY_NATIVE, 3: PYSPY_NATIVE},  # no majority
        {0: PYSPY_ALLREDUCE, 1: PYSPY_ALLREDUCE, 2: PYSPY_ALLREDUCE},  # all in one place
    ],
)
def test_no_odd_one_out(places: dict[int, str]) -> None:
    assert stacks.where_ranks_stand(_rows(places)) is None


def test_a_missing_dump_is_reported() -> None:
    v = stacks.where_ranks_stand(
        _rows({0: PYSPY_ALLREDUCE, 1: PYSPY_LOADER, 2: PYSPY_ALLREDUCE}), [0, 1, 2, 3]
    )
    assert v is not None and v.missing == [3]


def test_stalled_compares_the_quiet_time_with_the_step_time() -> None:
    import datetime as dt

    t0 = dt.datetime(2026, 12, 4, tzinfo=dt.UTC)
    rows = [(r, "step_progress", s, t0 + dt.timedelta(seconds=0.5 * s)) for r in (0, 1) for s in range(5)]
    end = ("launcher", None)
    for gap, want in ((20.0, True), (0.6, False)):
        t = pl.DataFrame(
            [(*row[:3], row[3]) for row in rows]
            + [(None, "job_cancelled", None, t0 + dt.timedelta(seconds=2 + gap))],
            schema={"rank": pl.Int32, "kind": pl.String, "step": pl.Int64, "ts": pl.Datetime("us", "UTC")},
            orient="row",
        )
        assert stacks.stalled(t)[0] is want, end
    assert (
        stacks.stalled(
            pl.DataFrame(
                schema={"rank": pl.Int32, "kind": pl.String, "step": pl.Int64, "ts": pl.Datetime("us", "UTC")}
            )
        )[0]
        is None
    )


def test_dumps_named_by_pid_get_their_rank_from_the_launcher() -> None:
    t = correlator.load(CASES / "stk-02-checkpoint-write-hang-pid-names" / "logs")
    d = t.filter(pl.col("kind") == "stack_dump").sort("pid")
    assert d.select("path", "rank").rows() == [(f"py-spy-{19317 + i}.txt", i) for i in range(4)]


@pytest.mark.parametrize(
    ("case", "kind", "initiating", "conf"),
    [
        ("stk-01-dataloader-read-hang", "straggler_hang", [1], 0.8),
        ("stk-02-checkpoint-write-hang-pid-names", "straggler_hang", [0], 0.8),
        ("stk-03-subgroup-barrier-deadlock", "collective_mismatch", [3], 0.8),
        # without the dumps: a hang, no rank; a healthy job stopped from outside: no failure (both were
        # launcher_error at 0.95 before issue #33)
        ("stk-01-dataloader-read-hang-logs-only", "unknown", [], 0.35),
        ("stk-04-healthy-stopped-by-sigterm", "none", [], 0.6),
    ],
)
def test_captured_hangs(case: str, kind: str, initiating: list[int], conf: float) -> None:
    d = correlator.diagnose(correlator.load(CASES / case / "logs"))
    assert (d.failure_kind, d.to_json()["initiating_ranks"], d.confidence) == (kind, initiating, conf)
    if initiating:
        assert "stack dumps" in d.summary and "train.py" in d.summary
        assert d.to_json()["collateral_ranks"] == [r for r in range(4) if r not in initiating]


# -- the confidence reasons of the stack-dump rules, on the captured stk cases (answers in their SOURCE.md)


def _verdict_of(path: Path) -> tuple[list[int], str, list[str]]:
    import correlator

    d = correlator.open_job(path).diagnose()
    return d.initiating_ranks, d.failure_kind, d.confidence_reason_codes


def test_stack_reasons_on_the_captured_hangs(tmp_path: Path) -> None:
    import shutil

    from tests.conftest import CASES

    stk01 = CASES / "stk-01-dataloader-read-hang" / "logs"
    assert _verdict_of(stk01) == ([1], "straggler_hang", ["STACKS"])
    # the same hang, logs only: stopped from outside after a silent hang, nobody named
    assert _verdict_of(CASES / "stk-01-dataloader-read-hang-logs-only" / "logs") == (
        [],
        "unknown",
        ["STOPPED_WHILE_HUNG"],
    )
    # a healthy run stopped by SIGTERM: not a failure of the job
    assert _verdict_of(CASES / "stk-04-healthy-stopped-by-sigterm" / "logs") == (
        [],
        "none",
        ["STOPPED_FROM_OUTSIDE"],
    )
    # the dumps alone: the logs cannot say the job had stopped advancing
    only = tmp_path / "only"
    shutil.copytree(stk01 / "stacks", only / "stacks")
    inits, kind, codes = _verdict_of(only)
    assert (inits, kind) == ([1], "straggler_hang") and "STACKS_NO_STALL" in codes
    # stk-03 (rank 3 in a subgroup barrier, the others in all_reduce) with rank 1's dump missing: still rank 3,
    # and the verdict says a dump is missing (stk-01 would not do: its ranks' stderr holds faulthandler dumps too)
    part = tmp_path / "part"
    shutil.copytree(CASES / "stk-03-subgroup-barrier-deadlock" / "logs", part)
    (part / "stacks" / "rank1.txt").unlink()
    assert _verdict_of(part) == ([3], "collective_mismatch", ["STACKS", "STACKS_INCOMPLETE"])


# ------------------------------------------------------------------ dumps kept apart: open_job(path, stacks=DIR)


def test_stacks_dir_kept_apart_from_the_logs(tmp_path: Path) -> None:
    """stk-02's py-spy dumps (named by pid only) moved out of the logs into a nested folder elsewhere: read with
    ``stacks=``, they are mapped to their ranks by the launcher's pids and give the verdict the dumps beside
    the logs give; without them the logs alone name no one."""
    from correlator.errors import InputError
    from correlator.job import open_job

    src = CASES / "stk-02-checkpoint-write-hang-pid-names" / "logs"
    logs, dumps = tmp_path / "logs", tmp_path / "scratch" / "node-a"
    shutil.copytree(src, logs)
    dumps.mkdir(parents=True)
    moved = sorted(logs.glob("py-spy-*.txt"))
    assert len(moved) == 4
    for p in moved:
        p.rename(dumps / p.name)
    beside = open_job(src).diagnose()
    apart = open_job(logs, stacks=tmp_path / "scratch")
    d = apart.diagnose()
    assert (
        (d.initiating_ranks, d.failure_kind, d.initiator_basis)
        == (
            beside.initiating_ranks,
            beside.failure_kind,
            beside.initiator_basis,
        )
        == ([0], "straggler_hang", "stack dumps")
    )
    assert [e.path for e in d.evidence if e.kind == "stack_dump"][:1] == [f"stacks/node-a/{moved[0].name}"]
    t = apart.table()
    dumped = t.filter(pl.col("kind") == "stack_dump").sort("rank")
    assert dumped["rank"].to_list() == [0, 1, 2, 3]
    assert set(dumped["rank_source"].to_list()) == {"launcher"}
    assert t["event_id"].n_unique() == t.height
    n_lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "scratch").rglob("*.txt"))
    assert int(t.filter(pl.col("path").str.starts_with("stacks/"))["line_count"].sum()) == n_lines
    alone = open_job(logs).diagnose()
    assert alone.initiating_ranks == [] and alone.failure_kind == "unknown"
    with pytest.raises(InputError, match="--stacks"):
        open_job(logs, stacks=tmp_path / "nope").diagnose()


def test_debug_server_stacks_dump_gives_each_rank(tmp_path: Path) -> None:
    """torch's debug server dump file (``stacks_<time>.txt``: ``=== Rank N: addr ===`` + that rank's
    faulthandler dump; RECONSTRUCTED from stk-01's real faulthandler blocks, tests/data/stacks/debug-server):
    each block is one dump of rank N (the handler thread's frameless block is part of it, not the main
    thread), and the log-only copy of stk-01 gets its rank from them."""
    src = Path(__file__).resolve().parent / "data" / "stacks" / "debug-server" / "stacks_20261204_231448.txt"
    logs = tmp_path / "logs"
    shutil.copytree(CASES / "stk-01-dataloader-read-hang-logs-only" / "logs", logs)
    (logs / "debug").mkdir()
    shutil.copy(src, logs / "debug" / src.name)
    t = correlator.load(logs)
    dumps = t.filter(pl.col("kind") == "stack_dump").sort("line")
    heads = [i + 1 for i, x in enumerate(src.read_text().splitlines()) if x.startswith("=== Rank ")]
    assert dumps["line"].to_list() == [h + 1 for h in heads]  # the dump starts below its rank line
    assert dumps["rank"].to_list() == [0, 1, 2, 3]
    assert dumps["op"].to_list() == ["ALLREDUCE", None, "ALLREDUCE", "ALLREDUCE"]
    d = correlator.diagnose(t)
    assert (d.initiating_ranks, d.failure_kind, d.initiator_basis) == ([1], "straggler_hang", "stack dumps")
    alone = correlator.diagnose(correlator.load(CASES / "stk-01-dataloader-read-hang-logs-only" / "logs"))
    assert alone.initiating_ranks == []
