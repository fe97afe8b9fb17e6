"""Streaming ingest (``correlator.streaming``) and partitioned export (``correlator.export``).

The streaming path must give the same diagnosis as the normal path, a parquet file with the event schema
whose rows and line counts add up to the normal table's, and a reduced table that keeps what diagnosis reads.
On every corpus case, streaming (one batch, and a node split into rank-folder batches) gives the verdict of
the whole table: tests/test_reduced_diagnosis.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest

from correlator.diagnose import diagnose
from correlator.export import read_partitioned, write_partitioned
from correlator.ingest import ingest
from correlator.report import to_json
from correlator.schema import EVENT_SCHEMA, FAULT_KINDS
from correlator.streaming import plan, plan_batches, reduce_for_diagnosis, reduced_from_parquet, stream_ingest
from tests.conftest import VERDICT_KEYS as KEYS

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from generate import generate


def _verdict(table: pl.DataFrame) -> dict[str, object]:
    d = json.loads(to_json(diagnose(table)))
    return {k: d[k] for k in KEYS}


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("gen") / "logs"
    info = generate(out, ranks=24, lines=300, seed=7)
    return out, info


def test_generator_is_understood(gen: tuple[Path, dict[str, object]]) -> None:
    root, info = gen
    res = ingest(root)
    s = res.summary()
    assert s["lines_read"] == info["lines"]
    assert s["lines_not_understood"] <= 2
    assert set(s["ranks"]) == set(range(24))  # type: ignore[arg-type]
    d = diagnose(res.table)
    assert d.initiating_ranks == [info["culprit"]]
    assert d.failure_kind == "cuda_oom"


def test_streaming_matches_normal_path(gen: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    root, info = gen
    full = ingest(root)
    out = tmp_path / "events.parquet"
    reduced, summary = stream_ingest(root, out, batch_bytes=_node_bytes(root))  # one node per batch
    assert summary["batches"] == 3
    assert _verdict(reduced) == _verdict(full.table)
    assert diagnose(reduced).initiating_ranks == [info["culprit"]]
    # The parquet file: event schema, every row, line counts add up to the lines read.
    pf = pq.ParquetFile(out)
    assert pf.schema_arrow.equals(EVENT_SCHEMA)
    assert pf.metadata.num_row_groups >= summary["batches"]
    written = pl.read_parquet(out)
    assert written.height == full.table.height == summary["rows"]
    assert int(written["line_count"].sum()) == int(full.table["line_count"].sum()) == summary["lines_read"]
    assert written["event_id"].n_unique() == written.height
    assert summary["lines_read"] == full.lines_read
    assert summary["rows_by_kind"] == full.summary()["rows_by_kind"]
    assert summary["ranks"] == full.summary()["ranks"]
    # Same rows as the normal table (ids aside): same (path, line, kind, ...) multiset.
    cols = ["path", "line", "line_count", "kind", "host", "seq"]
    assert written.select(cols).sort(cols).equals(full.table.select(cols).sort(cols))
    # Same ranks, except the launcher's "failed ... local_rank: L" lines: with several nodes in one run
    # the normal path cannot pair a launcher log with its tree (it names no run dir) and reads the local
    # rank as global; a per-node batch pairs them and gets the global rank right.
    ranked = ["path", "line", "rank"]
    not_launcher = pl.col("stream") != "launcher"
    assert (
        written.filter(not_launcher)
        .select(ranked)
        .sort(ranked)
        .equals(full.table.filter(not_launcher).select(ranked).sort(ranked))
    )


def test_parquet_file_encodes_free_text_plain_and_without_statistics(
    gen: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    """``schema.parquet_options``: dictionaries for the short string columns only, no min/max of a log line."""
    root, _info = gen
    out = tmp_path / "events.parquet"
    stream_ingest(root, out, batch_bytes=_node_bytes(root))
    meta = pq.ParquetFile(out).metadata
    for g in range(meta.num_row_groups):
        cols = {
            meta.row_group(g).column(i).path_in_schema: meta.row_group(g).column(i)
            for i in range(meta.num_columns)
        }
        for name in ("raw", "message"):
            assert not cols[name].is_stats_set, name
            assert not any("DICTIONARY" in e for e in cols[name].encodings), (name, cols[name].encodings)
        for name in ("kind", "path", "host"):
            assert any("DICTIONARY" in e for e in cols[name].encodings), (name, cols[name].encodings)
        for name in ("kind", "rank", "seq", "event_id"):
            assert cols[name].is_stats_set, name
        assert not any("DICTIONARY" in e for e in cols["seq"].encodings)


def test_reduced_table_keeps_faults_and_is_small(gen: tuple[Path, dict[str, object]]) -> None:
    root, _info = gen
    t = ingest(root).table
    red = reduce_for_diagnosis(t)
    assert red.schema == t.schema
    faults = t.filter(pl.col("kind").is_in(list(FAULT_KINDS)))
    assert faults.join(red, on="event_id", how="anti").height == 0
    assert red.height < t.height / 5
    # Every rank keeps its highest collective.
    top = t.filter(pl.col("kind") == "nccl_coll").group_by("rank").agg(pl.col("seq").max()).sort("rank")
    top_r = red.filter(pl.col("kind") == "nccl_coll").group_by("rank").agg(pl.col("seq").max()).sort("rank")
    assert top.equals(top_r)


@pytest.mark.parametrize("seed", range(6))
def test_reduction_keeps_the_last_collectives_per_rank_and_pg_with_repeated_seqs(seed: int) -> None:
    # Many repeats and missing values of seq, so the k-th largest seq of a group is shared by several rows:
    # the reduction must keep exactly the last KEEP by (seq, then row), computed here by a plain sort.
    import random

    keep = 4
    rnd = random.Random(seed)
    rows = [
        {
            "id": i,
            "kind": "nccl_coll",
            "layer": "nccl",
            "rank": rnd.choice([0, 1, 2]),
            "path": "r.log",
            "pg": rnd.choice(["a", "b"]),
            "seq": rnd.choice([None, 1, 2, 2, 3, 3, 3, 5]),
            "world_size": 2,
            "message": "AllReduce",
        }
        for i in range(rnd.randint(5, 120))
    ]
    t = pl.DataFrame(rows, schema_overrides={"seq": pl.Int64, "rank": pl.Int32})
    want: set[int] = set()
    for key in {(r["rank"], r["pg"]) for r in rows}:
        group = [r for r in rows if (r["rank"], r["pg"]) == key]
        group.sort(key=lambda r: (-(2**63) if r["seq"] is None else r["seq"], r["id"]), reverse=True)
        want |= {r["id"] for r in group[:keep]}
    got = reduce_for_diagnosis(t, keep_last=keep)["id"].to_list()
    assert got == sorted(want)


def _node_bytes(root: Path) -> int:
    return max(sum(f.stat().st_size for f in node.rglob("*") if f.is_file()) for node in root.iterdir())


def test_plan_batches_keeps_a_node_together(gen: tuple[Path, dict[str, object]]) -> None:
    from correlator.discover import discover

    root, _ = gen
    sources, _w = discover(root)
    batches = plan_batches(sources, batch_bytes=_node_bytes(root))
    assert [len({Path(s.rel).parts[0] for s in b}) for b in batches] == [1, 1, 1]
    assert len(plan_batches(sources, batch_bytes=10**12)) == 1
    # Below a node's size the node is split by rank folder, never mixing nodes; every file is kept once.
    small = plan(sources, batch_bytes=1)
    assert len(small) == 24
    assert all(len({Path(s.rel).parts[0] for s in b.files + b.context}) == 1 for b in small)
    kept = [s.rel for b in small for s in b.files + (b.context if b.keeps_rest else [])]
    assert sorted(kept) == sorted(s.rel for s in sources)
    assert all(s.stream == "launcher" or s.stream == "stderr" for b in small for s in b.context)


def test_torchrun_log_dir_is_batched_by_size(gen: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    """A plain ``torchrun --log-dir`` (``attempt_0/<rank>/``) is one first-level unit: it is still split."""
    root, _ = gen
    node = min(root.iterdir())
    (run,) = list((node / "torchrun_logs").iterdir())
    full = ingest(run)
    budget = max(1, sum(f.stat().st_size for f in run.rglob("*") if f.is_file()) // 4)
    reduced, summary = stream_ingest(run, tmp_path / "e.parquet", batch_bytes=budget)
    assert summary["batches"] >= 4
    assert summary["lines_read"] == full.lines_read
    written = pl.read_parquet(tmp_path / "e.parquet")
    cols = [
        "path",
        "line",
        "line_count",
        "kind",
        "rank",
        "rank_source",
        "local_rank",
        "host",
        "attempt",
        "seq",
        "pg",
        "ts",
        "ts_quality",
    ]
    assert written.select(cols).sort("path", "line").equals(full.table.select(cols).sort("path", "line"))
    assert _verdict(reduced) == _verdict(full.table)


def test_split_nodes_give_the_same_table_as_whole_nodes(
    gen: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    root, _ = gen
    whole, s1 = stream_ingest(root, tmp_path / "a.parquet", batch_bytes=_node_bytes(root))
    split, s2 = stream_ingest(root, tmp_path / "b.parquet", batch_bytes=1)
    assert s2["batches"] == 24 and s1["batches"] == 3
    assert {k: v for k, v in s1.items() if k not in ("batches", "peak_rss_mib", "reduced_rows")} == {
        k: v for k, v in s2.items() if k not in ("batches", "peak_rss_mib", "reduced_rows")
    }
    cols = [
        "path",
        "line",
        "line_count",
        "kind",
        "rank",
        "rank_source",
        "local_rank",
        "host",
        "attempt",
        "seq",
        "pg",
        "ts",
        "ts_quality",
        "duplicate",
    ]
    a = pl.read_parquet(tmp_path / "a.parquet").select(cols).sort("path", "line")
    b = pl.read_parquet(tmp_path / "b.parquet").select(cols).sort("path", "line")
    assert a.equals(b)
    assert _verdict(split) == _verdict(whole)


def test_partitioned_export_roundtrip(gen: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    root, info = gen
    out = tmp_path / "s.parquet"
    stream_ingest(root, out)
    full = pl.read_parquet(out)
    for by in ("host", "rank"):
        files = write_partitioned(full, tmp_path / by, by=by)
        assert files and all(f.parent.name.startswith(f"{by}=") for f in files)
        assert all(pq.ParquetFile(f).schema_arrow.equals(EVENT_SCHEMA) for f in files)
        back = read_partitioned(tmp_path / by)
        assert back.height == full.height and back.schema == full.schema
    hosts = {p.name for p in (tmp_path / "host").iterdir()}
    assert "host=node-0000" in hosts
    assert diagnose(reduced_from_parquet(tmp_path / "host")).initiating_ranks == [info["culprit"]]
    assert diagnose(reduced_from_parquet(out)).initiating_ranks == [info["culprit"]]
    with pytest.raises(ValueError):
        write_partitioned(full, tmp_path / "x", by="kind")


def test_per_node_ingest_then_merge(gen: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    """Scaling out: each node ingests its own tree, the merged dataset diagnoses like the whole."""
    root, info = gen
    ds = tmp_path / "ds"
    for node in sorted(p for p in root.iterdir() if p.is_dir()):
        # Each node sees only its own folder; paths stay relative to the job root via the node folder name.
        t = ingest(node).table.with_columns((pl.lit(node.name + "/") + pl.col("path")).alias("path"))
        write_partitioned(t, ds, by="host", part_name=f"{node.name}.parquet")
    merged = read_partitioned(ds)
    assert merged["event_id"].n_unique() == merged.height
    assert diagnose(reduced_from_parquet(ds)).initiating_ranks == [info["culprit"]]
    assert diagnose(merged).initiating_ranks == [info["culprit"]]


def test_rules_engine_fills_a_field_from_several_rules() -> None:
    """parsers.rules.apply_rules: two rules of one list setting the same field (comm, world_size)."""
    from parsers import nccl
    from parsers.rules import apply_rules

    df = pl.DataFrame(
        {
            "message": [
                "comm 0x1 rank 3 nranks 16 cudaDev 3 - Init COMPLETE",
                "AllReduce: opCount 1f sendbuff 0x1 recvbuff 0x1 count 4 datatype 7 op 0 root 0 comm 0x2 [nranks=8] stream 0x3",
                "nothing to see",
            ]
        }
    )
    out = apply_rules(df, nccl.RULES)
    assert out["kind"].to_list() == ["nccl_init", "nccl_coll", None]
    assert out["comm"].to_list() == ["0x1", "0x2", None]
    assert out["world_size"].to_list() == [16, 8, None]
    assert out["seq"].to_list() == [None, 31, None]


def test_streaming_into_partitioned_dataset(gen: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    root, info = gen
    reduced, summary = stream_ingest(root, tmp_path / "ds", batch_bytes=1, partition_by="host")
    merged = read_partitioned(tmp_path / "ds")
    assert merged.height == summary["rows"]
    assert diagnose(reduced).initiating_ranks == [info["culprit"]]
    assert {p.name for p in (tmp_path / "ds").iterdir()} >= {
        "host=node-0000",
        "host=node-0001",
        "host=node-0002",
    }
    assert diagnose(reduced_from_parquet(tmp_path / "ds")).initiating_ranks == [info["culprit"]]
    with pytest.raises(ValueError):
        stream_ingest(root, tmp_path / "bad", partition_by="kind")


def test_batches_on_several_workers_write_what_one_worker_writes(
    gen: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    root, _info = gen
    one, many = tmp_path / "one.parquet", tmp_path / "many.parquet"
    bb = _node_bytes(root) // 3  # several batches per node, so the order of their results matters
    red1, s1 = stream_ingest(root, one, batch_bytes=bb, workers=1)
    red3, s3 = stream_ingest(root, many, batch_bytes=bb, workers=3)
    assert s1["batches"] == s3["batches"] > 3
    assert pl.read_parquet(one).equals(pl.read_parquet(many))  # same rows, same order, same event ids
    assert red1.equals(red3)
    assert {k: v for k, v in s1.items() if k != "peak_rss_mib"} == {
        k: v for k, v in s3.items() if k != "peak_rss_mib"
    }


def test_in_order_yields_in_batch_order_with_bounded_batches_in_flight() -> None:
    import threading
    import time

    from correlator.batch import in_order as _in_order

    running = 0
    most = 0
    lock = threading.Lock()

    def run(b: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02 * (b % 3))  # later batches often finish first
        with lock:
            running -= 1
        return b * 10

    got = list(_in_order(run, list(range(12)), 3))  # type: ignore[arg-type]
    assert got == [b * 10 for b in range(12)]
    assert most == 3


def test_in_order_raises_a_batch_error_at_its_turn() -> None:
    from correlator.batch import in_order as _in_order

    def run(b: int) -> int:
        if b == 2:
            raise ValueError("batch 2 is bad")
        return b

    it = _in_order(run, list(range(5)), 2)  # type: ignore[arg-type]
    assert [next(it), next(it)] == [0, 1]
    with pytest.raises(ValueError, match="batch 2"):
        next(it)


def test_in_order_runs_a_given_pool_in_order_with_a_bounded_window() -> None:
    """A pool given to ``in_order`` (Ray's tasks in ``rayengine``) gets the jobs, a window of them at a time,
    even a single job (no inline shortcut: it must run where the pool runs), and the results come back in job
    order through the pool's ``result``; it is closed at the end."""
    from correlator.batch import in_order

    log: list[str] = []

    class Pool:
        def submit(self, run: Any, job: int) -> tuple[str, int]:
            log.append(f"submit {job}")
            return ("h", run(job))

        def result(self, handle: tuple[str, int]) -> int:
            log.append(f"result {handle[1]}")
            return handle[1]

        def close(self) -> None:
            log.append("close")

    got = []
    for r in in_order(lambda j: j * 10, [1, 2, 3, 4], 2, pool=Pool()):
        log.append(f"took {r}")
        got.append(r)
    assert got == [10, 20, 30, 40]
    assert log == [
        "submit 1", "submit 2",  # the window
        "result 10", "took 10", "submit 3",  # the next only once one is taken
        "result 20", "took 20", "submit 4",
        "result 30", "took 30",
        "result 40", "took 40",
        "close",
    ]  # fmt: skip
    log.clear()
    assert list(in_order(lambda j: j, [7], 4, pool=Pool())) == [7]
    assert log == ["submit 7", "result 7", "close"]


def test_in_order_bounds_the_weight_of_the_jobs_in_flight() -> None:
    """With ``weight`` and ``max_weight`` (``ingest._reads``: file sizes, the read-ahead budget), a job starts
    only while the jobs running or waiting to be taken weigh at most ``max_weight`` with it, in job order (a
    heavy job waits for those before it to be taken, and the light ones after it wait for it); a job heavier
    than the budget runs alone. The job count stays bounded by ``workers`` as well."""
    from correlator.pool import in_order

    log: list[str] = []

    class Pool:
        def submit(self, run: Any, job: int) -> int:
            log.append(f"submit {job}")
            return int(run(job))

        def result(self, handle: int) -> int:
            return handle

        def close(self) -> None:
            log.append("close")

    jobs = [5, 3, 4, 9, 1, 1, 1, 1]  # each job weighs its value; the budget is 8, 3 at once
    for r in in_order(lambda j: j, jobs, 3, pool=Pool(), weight=lambda j: j, max_weight=8):
        log.append(f"took {r}")
    assert log == [
        "submit 5", "submit 3",  # 5 + 3 = 8: within the budget; 4 more would pass it
        "took 5", "submit 4",  # 3 + 4 = 7; 9 more would pass it
        "took 3",  # 4 + 9 > 8: the 9 waits
        "took 4", "submit 9",  # heavier than the budget: alone
        "took 9", "submit 1", "submit 1", "submit 1",  # three at once: the workers' bound
        "took 1", "submit 1",
        "took 1", "took 1", "took 1",
        "close",
    ]  # fmt: skip


def test_timeline_streams_a_parquet_table_above_its_threshold(
    gen: tuple[Path, dict[str, object]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from correlator import streaming
    from correlator.cli import app

    root, _info = gen
    total = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    runner = CliRunner()
    normal = tmp_path / "normal.parquet"
    assert runner.invoke(app, ["timeline", str(root), "-o", str(normal)]).exit_code == 0  # below: whole table
    monkeypatch.setattr(streaming, "TABLE_STREAMING_THRESHOLD_BYTES", total - 1)
    monkeypatch.setattr(streaming, "DEFAULT_BATCH_BYTES", _node_bytes(root))
    streamed = tmp_path / "streamed.parquet"
    r = runner.invoke(app, ["timeline", str(root), "-o", str(streamed)])
    assert r.exit_code == 0, r.output
    assert "in 3 batches" in r.output  # one per node
    assert not list(tmp_path.glob(".streamed.parquet.tmp-*"))  # written under a temporary name, renamed
    cols = ["path", "line", "line_count", "kind", "host", "seq", "message"]
    a, b = pl.read_parquet(normal), pl.read_parquet(streamed)
    assert a.select(cols).sort(cols).equals(b.select(cols).sort(cols))
    # Other formats, and --redact, need the whole table: by default they do not stream (and do not fail).
    assert runner.invoke(app, ["timeline", str(root), "-o", str(tmp_path / "t.csv"), "-q"]).exit_code == 0
    r = runner.invoke(app, ["timeline", str(root), "-o", str(tmp_path / "r.parquet"), "--redact"])
    assert r.exit_code == 0 and "batches" not in r.output
    # Above the threshold in one batch (a node's tee'd console, a Slurm job's output): nothing to stream
    monkeypatch.setattr(streaming, "DEFAULT_BATCH_BYTES", total)
    r = runner.invoke(app, ["timeline", str(root), "-o", str(tmp_path / "one.parquet")])
    assert r.exit_code == 0 and "batch" not in r.output
    assert pl.read_parquet(tmp_path / "one.parquet").select(cols).sort(cols).equals(a.select(cols).sort(cols))


TEE_CASES = ["gloo-01-exception-before-allreduce", "cap-12-elastic-restart", "fr-01-hang-before-collective"]


@pytest.mark.parametrize("name", [*TEE_CASES, "cap-12-elastic-restart:no-error-json"])
def test_a_node_split_by_rank_folder_marks_the_same_tee_copies(name: str, tmp_path: Path) -> None:
    """torchrun --tee copies in the launcher log are marked ``duplicate`` against the rank's own files: with the
    node split into batches of rank folders, each copy is kept by the batch holding its local rank's files, so
    the table equals one ingest of the whole case (a copy kept by the first batch was compared with rank 0
    only). Without error.json files (no restart stamp every batch sees) a launcher line's attempt can be
    resolved differently per batch: ownership by local rank alone keeps each line once."""
    import shutil

    case = REPO / "fixtures" / "cases" / name.split(":")[0] / "logs"
    if name.endswith(":no-error-json"):
        case = Path(shutil.copytree(case, tmp_path / "logs"))
        for f in case.rglob("error.json"):
            f.unlink()
    full = ingest(case)
    _red, summary = stream_ingest(case, tmp_path / "e.parquet", batch_bytes=1)
    assert summary["batches"] >= 4
    cols = ["path", "line", "line_count", "kind", "duplicate", "rank", "local_rank", "host"]
    written = pl.read_parquet(tmp_path / "e.parquet").select(cols).sort("path", "line")
    want = full.table.select(cols).sort("path", "line")
    assert written.height == want.height
    assert written["duplicate"].sum() == want["duplicate"].sum() > 0
    assert written.equals(want)
    assert summary["lines_read"] == full.lines_read


def _pid_of(b: int) -> tuple[int, int]:
    """(batch, the pid that ran it): run in a worker process by the tests below (module level: it pickles)."""
    if b == 3:
        raise ValueError("batch 3 is bad")
    return b, os.getpid()


def test_in_order_in_worker_processes_keeps_the_order_and_the_error() -> None:
    from correlator.batch import in_order

    it = in_order(_pid_of, list(range(6)), 2, "processes")
    got = [next(it) for _ in range(3)]
    assert [b for b, _ in got] == [0, 1, 2]
    assert all(pid != os.getpid() for _, pid in got)  # ran in other processes
    with pytest.raises(ValueError, match="batch 3 is bad"):  # the worker's exception, at its turn
        next(it)


def test_batches_in_processes_write_what_one_thread_writes(
    gen: tuple[Path, dict[str, object]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _info = gen
    one, many = tmp_path / "one.parquet", tmp_path / "many.parquet"
    bb = _node_bytes(root) // 3
    red1, s1 = stream_ingest(root, one, batch_bytes=bb, workers=1)
    monkeypatch.setenv("RANKSCOPE_BATCH_POOL", "processes")
    red2, s2 = stream_ingest(root, many, batch_bytes=bb, workers=2)
    assert s1["batches"] == s2["batches"] > 3
    assert pl.read_parquet(one).equals(pl.read_parquet(many))
    assert red1.equals(red2)
    assert {k: v for k, v in s1.items() if k != "peak_rss_mib"} == {
        k: v for k, v in s2.items() if k != "peak_rss_mib"
    }


def test_a_batch_writes_its_part_where_it_runs(gen: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    """``want="parquet"``: the batch writes its table part as a Parquet file under ``tmp`` (the rows its
    ``frame`` would give, in the write schema, row groups of ``row_group_rows``); its result pickles small (no
    table in it, only the part's path), for a worker process to send back."""
    import dataclasses
    import pickle

    import pyarrow.parquet as pq

    from correlator.batch import BatchJob, PartFile, ingest_batch
    from correlator.discover import discover
    from correlator.schema import WRITE_SCHEMA
    from correlator.streaming import plan

    root, _info = gen
    batch = plan(discover(root)[0], _node_bytes(root))[0]
    frame = ingest_batch(BatchJob(batch, None, None, 4, str(tmp_path), str(root), "frame")).table
    res = ingest_batch(
        BatchJob(batch, None, None, 4, str(tmp_path), str(root), "parquet", row_group_rows=1000)
    )
    assert isinstance(frame, pl.DataFrame) and frame.height > 2000
    assert isinstance(res.table, PartFile) and Path(res.table.path).parent == tmp_path
    part = pq.ParquetFile(res.table.path)
    assert part.schema_arrow.names == WRITE_SCHEMA.names
    assert part.metadata.num_row_groups == -(-frame.height // 1000) and res.table.rows == frame.height
    assert pl.read_parquet(res.table.path).equals(frame.select(WRITE_SCHEMA.names))
    back = pickle.loads(pickle.dumps(res))
    assert back.table == res.table and back.reduced is not None and back.reduced.equals(res.reduced)
    # the part adds its path to what a worker sends back, not its rows
    assert len(pickle.dumps(res)) - len(pickle.dumps(dataclasses.replace(res, table=None))) < 500


def test_pool_kind_by_size() -> None:
    from correlator.batch import PROCESS_MIN_BYTES, pool_kind

    assert pool_kind(PROCESS_MIN_BYTES - 1, 100, 4) == "threads"  # small input: no worker start-up
    assert pool_kind(PROCESS_MIN_BYTES, 7, 4) == "threads"  # fewer than two batches per worker
    assert pool_kind(PROCESS_MIN_BYTES, 8, 4) == "processes"
    assert pool_kind(10 * PROCESS_MIN_BYTES, 40, 2) == "processes"  # 2 cores: less memory, no slower
    assert pool_kind(10 * PROCESS_MIN_BYTES, 40, 1) == "threads"  # one worker: no start-up to pay


def test_event_ids_stay_unique_when_a_node_is_split(
    gen: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    """A node split into chunks: each chunk reads the node's context files and drops the rows another chunk
    keeps, after its ids were given; the next chunk's ids must still start past every id given before, so
    no two rows share an ``event_id`` and the ids rise in batch order (the reduced rows point at the same)."""
    root, _info = gen
    out = tmp_path / "t.parquet"
    reduced, s = stream_ingest(root, out, batch_bytes=_node_bytes(root) // 3, workers=1)
    t = pl.read_parquet(out)
    assert s["batches"] > 3 and t.height == s["rows"]
    assert t["event_id"].n_unique() == t.height
    assert t["event_id"].is_sorted()
    by_id = dict(zip(t["event_id"].to_list(), t["raw"].to_list(), strict=True))
    assert all(
        by_id[e] == raw
        for e, raw in zip(reduced["event_id"].to_list(), reduced["raw"].to_list(), strict=True)
    )


def test_table_only_keeps_no_reduced_rows(gen: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    """``keep_last=None`` (what ``rankscope timeline`` streams with): the same table written and the same
    summary as with reduced rows, but none kept; an empty batch among others still counts its warnings."""
    root, _ = gen
    (root / "node_empty").mkdir(exist_ok=True)
    (root / "node_empty" / "rank_99.log").write_bytes(b"")
    try:
        red, s1 = stream_ingest(root, tmp_path / "a.parquet", batch_bytes=1)
        none, s2 = stream_ingest(root, tmp_path / "b.parquet", batch_bytes=1, keep_last=None)
    finally:
        (root / "node_empty" / "rank_99.log").unlink()
        (root / "node_empty").rmdir()
    assert red.height > 0 and s1["reduced_rows"] == red.height
    assert none.height == 0 and s2["reduced_rows"] == 0
    drop = ("peak_rss_mib", "reduced_rows")
    assert {k: v for k, v in s1.items() if k not in drop} == {k: v for k, v in s2.items() if k not in drop}
    assert s2["rows"] == pl.scan_parquet(tmp_path / "b.parquet").select(pl.len()).collect().item() > 0
    assert pl.read_parquet(tmp_path / "a.parquet").equals(pl.read_parquet(tmp_path / "b.parquet"))


def test_streamed_table_is_the_whole_ingest_row_for_row(tmp_path: Path) -> None:
    """Batches follow the path order of a whole ingest, so a streamed table has its rows and event ids: the
    torchrun layout of 12 local ranks split into batches (``attempt_0/10/`` sorts before ``attempt_0/2/``; the
    folders' local ranks sort the other way) and two node folders whose names differ by a suffix
    (``node-1-b/`` sorts before ``node-1/``). Before, a streamed ``timeline`` gave rank 2's lines the ids a
    ``diagnose`` of the same job gave rank 10's. (A node's launcher log whose rows several batches keep, and
    the folders of one local rank in several attempts, which one batch takes together where context rows
    are shared out by local rank, stay out of path order: their rows are the same, in another order.)"""
    from generate import generate_app

    app = tmp_path / "app"
    generate_app(app, ranks=12, lines=300, seed=3)
    nodes = tmp_path / "nodes"
    for name, rank in (("node-1", 0), ("node-1-b", 1), ("node-10", 2)):
        (nodes / name).mkdir(parents=True)
        (nodes / name / f"rank{rank}.log").write_text(
            "".join(f"2026-11-29 22:00:{i:02d},000 - INFO - rank={rank} step={i}\n" for i in range(40))
        )
    from correlator.discover import discover

    # 200 kB: the ranks' small stderr files ride along with every batch as context, each kept by the batch of
    # its folder (their ids were given in every batch: the kept rows' ids now move down past the others')
    assert not any(b.context for b in plan(discover(app)[0], 20_000))
    assert all(b.context for b in plan(discover(app)[0], 200_000))
    multi = tmp_path / "multi" / "run1"  # two attempts: without context files, each folder a group of its own
    for a in (0, 1):
        shutil.copytree(app / "attempt_0", multi / f"attempt_{a}")
    assert not any(b.context for b in plan(discover(multi.parent)[0], 20_000))
    for root, bb in ((app, 20_000), (app, 200_000), (nodes, 1), (multi.parent, 20_000)):
        whole = ingest(root).table
        out = tmp_path / f"{root.name}-{bb}.parquet"
        _red, s = stream_ingest(root, out, batch_bytes=bb, workers=1)
        assert s["batches"] >= 2
        written = pl.read_parquet(out)
        assert written.equals(whole.select(written.columns)), (root.name, bb)


def test_a_unit_of_many_context_files_sends_them_with_their_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``CONTEXT_MAX_FILES`` context files (the small stderr files of thousands of ranks in one folder),
    a split unit's stderr files go with their rank's folder, as they do past half a batch of bytes, instead of
    being read with every batch; the streamed table is still the whole ingest's."""
    from generate import generate_app

    from correlator import streaming
    from correlator.discover import discover

    app = tmp_path / "app"
    generate_app(app, ranks=12, lines=300, seed=3)
    sources = discover(app)[0]
    assert all(len(b.context) == 12 for b in plan(sources, 200_000))  # 12 stderr files: within the bound
    monkeypatch.setattr(streaming, "CONTEXT_MAX_FILES", 11)
    batches = plan(sources, 200_000)
    assert len(batches) >= 2 and not any(b.context for b in batches)
    for b in batches:  # each folder's two files in one batch
        folders = [str(Path(s.rel).parent) for s in b.files]
        assert all(folders.count(f) == 2 for f in folders)
    whole = ingest(app).table
    out = tmp_path / "t.parquet"
    _red, s = stream_ingest(app, out, batch_bytes=200_000, workers=1)
    assert s["batches"] == len(batches)
    written = pl.read_parquet(out)
    assert written.equals(whole.select(written.columns))


def test_diagnose_streams_an_application_heavy_job_not_a_coll_heavy_one(
    gen: tuple[Path, dict[str, object]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``diagnosis_streams``: the COLL share is read from the files' heads (the generator's COLL job: COLL lines
    counted here with the generator's own line shape; its application job: none), and a job streams by default
    when its bytes other than COLL lines pass ``DIAGNOSE_OTHER_BYTES``; ``full_table`` callers (``plot``) keep
    the 2 GiB rule. The streamed verdict is the whole path's, event ids included."""
    from generate import generate_app

    from correlator import streaming
    from correlator.api import diagnose_path, want_streaming
    from correlator.discover import discover

    coll_root, _info = gen
    app_root = tmp_path / "app"
    generate_app(app_root, ranks=12, lines=400, seed=5)
    heads = [f.read_bytes()[: 256 * 1024] for f in coll_root.rglob("*") if f.is_file()]
    lines = [ln for h in heads for ln in h.split(b"\n")[:-1]]
    coll = re.compile(rb"^[^ ]+ \[[0-9]+\] NCCL INFO [A-Za-z]+: opCount [0-9a-f]+ ")
    want = sum(len(ln) + 1 for ln in lines if coll.match(ln)) / sum(len(ln) + 1 for ln in lines)
    assert want > 0.8
    # the sample reads the 16 largest files: the ranks' logs, without the launcher logs' lines
    assert want <= streaming.coll_share(discover(coll_root)[0]) < want + 0.05
    assert streaming.coll_share(discover(app_root)[0]) == 0.0
    sizes = {r: sum(f.stat().st_size for f in r.rglob("*") if f.is_file()) for r in (coll_root, app_root)}
    assert not want_streaming(app_root, None)  # below DIAGNOSE_OTHER_BYTES: read whole
    limit = min(sizes.values()) // 2  # both jobs pass it; only the app job's other bytes do
    assert sizes[coll_root] * (1 - want) < limit
    monkeypatch.setattr(streaming, "DIAGNOSE_OTHER_BYTES", limit)
    assert not want_streaming(app_root, None)  # one batch of 32 MiB: nothing to stream
    monkeypatch.setattr(streaming, "DEFAULT_BATCH_BYTES", sizes[app_root] // 4)
    assert want_streaming(app_root, None) and not want_streaming(coll_root, None)
    assert not want_streaming(app_root, None, full_table=True)
    assert not want_streaming(app_root, False) and want_streaming(coll_root, True)
    one = tmp_path / "one" / "node-0"  # the same lines in one file (a console): one batch whatever its size
    one.mkdir(parents=True)
    (one / "console.log").write_bytes(b"".join(f.read_bytes() for f in sorted(app_root.rglob("*.log"))))
    assert not want_streaming(one.parent, None)
    streamed = json.loads(to_json(diagnose_path(app_root).diagnosis))
    whole = json.loads(to_json(diagnose_path(app_root, streaming=False).diagnosis))
    assert streamed == whole
    assert streamed["initiating_ranks"] and streamed["evidence"][0]["event_id"] is not None


def test_streaming_without_a_table_cuts_coll_lines_in_each_batch(
    gen: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    """No table written (``out_parquet`` None): each batch cuts the NCCL COLL lines diagnosis does not read
    while reading (``keep_coll``), and the reduced rows are the same as when the batch parses every line."""
    root, _info = gen
    bb = _node_bytes(root)
    cut, s_cut = stream_ingest(root, None, batch_bytes=bb, workers=1)
    full, s_full = stream_ingest(root, tmp_path / "t.parquet", batch_bytes=bb, workers=1)
    assert s_cut["batches"] == s_full["batches"] > 1
    assert s_cut["lines_read"] == s_full["lines_read"]
    kinds_cut, kinds_full = s_cut["rows_by_kind"], s_full["rows_by_kind"]
    assert isinstance(kinds_cut, dict) and isinstance(kinds_full, dict)
    assert 0 < kinds_cut["nccl_coll"] < kinds_full["nccl_coll"] / 10  # the COLL rows, cut
    assert {k: v for k, v in kinds_cut.items() if k != "nccl_coll"} == {
        k: v for k, v in kinds_full.items() if k != "nccl_coll"
    }
    assert _verdict(cut) == _verdict(full)
    assert reduce_for_diagnosis(cut).equals(reduce_for_diagnosis(full))


def test_events_of_a_large_job_are_streamed_and_the_same(
    gen: tuple[Path, dict[str, object]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``rankscope events`` of a job that ``timeline`` streams goes through a streamed parquet file (it read
    every line whole: 4.5 GiB for the 425 MB application job) and prints the same events, and names the
    job's ranks when none match; the temporary file is gone afterwards."""
    import tempfile

    from correlator import streaming
    from tests.conftest import run_cli

    root, _info = gen
    args = [
        ["events", str(root), "-f", "json", "--limit", "0", "-q"],
        ["events", str(root), "--faults", "-f", "json", "-q"],
        ["events", str(root), "--rank", "999"],
    ]
    whole = [run_cli(a, monkeypatch, capsys) for a in args]
    total = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    monkeypatch.setattr(streaming, "TABLE_STREAMING_THRESHOLD_BYTES", total - 1)
    monkeypatch.setattr(streaming, "DEFAULT_BATCH_BYTES", _node_bytes(root))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    spied: list[int] = []
    real = streaming.stream_ingest

    def spy(*a: Any, **k: Any) -> Any:
        got = real(*a, **k)
        spied.append(int(got[1]["batches"]))  # type: ignore[call-overload]
        return got

    monkeypatch.setattr(streaming, "stream_ingest", spy)
    streamed = [run_cli(a, monkeypatch, capsys) for a in args]
    assert spied == [3, 3, 3]  # one batch a node, each time
    for (c1, o1, _e1), (c2, o2, _e2) in zip(whole[:2], streamed[:2], strict=True):
        assert c1 == c2 == 0 and o1 == o2 and o1.count("\n") > 10
    assert "0 events match (ranks in these logs: 0-23)" in whole[2][2]
    assert "0 events match (ranks in these logs: 0-23)" in streamed[2][2]
    assert list(tmp.iterdir()) == []
    # --redact needs the whole table (as timeline's): read whole, not streamed, and it still answers
    code, out, err = run_cli(
        ["events", str(root), "--faults", "-f", "json", "-q", "--redact"], monkeypatch, capsys
    )
    assert code == 0 and spied == [3, 3, 3] and out.count("\n") == whole[1][1].count("\n"), err


def test_coll_share_reads_plain_heads_only(tmp_path: Path) -> None:
    """``coll_share`` samples the heads of the largest plain files: a compressed log is not opened (its share
    counts as none: the memory-safe answer), and COLL lines past a file's first 256 KiB are not seen."""
    import gzip

    from correlator import streaming
    from correlator.discover import discover

    coll = "node-0:1:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0x1 [nranks=2] stream 0x1\n"
    app = "2026-11-29 22:00:00,000 - INFO - rank=0 step=1 loss=1.0\n"
    (tmp_path / "rank0.log").write_text(coll * 3 + app)
    with gzip.open(tmp_path / "rank1.log.gz", "wt") as f:
        f.write(coll * 1000)
    want = 3 * len(coll) / (3 * len(coll) + len(app))
    assert streaming.coll_share(discover(tmp_path)[0]) == pytest.approx(want)
    big = tmp_path / "big"
    big.mkdir()
    (big / "rank2.log").write_text(app * (300_000 // len(app)) + coll * 10)  # its COLL lines past the head
    assert streaming.coll_share(discover(big)[0]) == 0.0


def test_events_of_a_timeline_table_are_those_of_its_logs(
    gen: tuple[Path, dict[str, object]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``rankscope events`` reads a ``timeline`` parquet file and a partitioned dataset as ``diagnose`` does (it
    refused them as "binary content"): the same events as from the logs; ``--tz`` is said not to apply; a
    parquet that is not an event table is refused by name."""
    from tests.conftest import run_cli

    root, _info = gen
    one, ds = tmp_path / "t.parquet", tmp_path / "ds"
    assert run_cli(["timeline", root, "-o", one, "-q"], monkeypatch, capsys)[0] == 0
    assert run_cli(["timeline", root, "-o", ds, "--partition-by", "host", "-q"], monkeypatch, capsys)[0] == 0
    for args in (["--faults"], ["--rank", "3", "--limit", "0"]):
        want = run_cli(["events", root, "-f", "json", "-q", *args], monkeypatch, capsys)
        assert want[0] == 0 and want[1].count("\n") > 2
        for table in (one, ds):
            got = run_cli(["events", table, "-f", "json", "-q", *args], monkeypatch, capsys)
            assert got[:2] == want[:2], (table, args, got[2])
    code, _out, err = run_cli(["events", one, "--faults", "--tz", "Europe/Berlin"], monkeypatch, capsys)
    assert code == 0 and "--tz Europe/Berlin not applied" in err
    other = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(other)
    code, _out, err = run_cli(["events", other], monkeypatch, capsys)
    assert code == 2 and "other.parquet" in err and "Traceback" not in err, err
