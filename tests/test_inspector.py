"""NCCL Inspector records as evidence (issue #33 item 3), RECONSTRUCTED from the plugin's source
(tests/data/inspector/reconstruct.py: NVIDIA/nccl plugins/profiler/inspector, 5067397, output format v4.0)."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import polars as pl

import correlator
from correlator import rasview

DATA = Path(__file__).resolve().parent / "data" / "inspector" / "nccl-inspector-unknown-jobid"
RECON01 = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "cases"
    / "recon-01-straggler-silent-rank13-allreduce-16r"
)


def test_records_are_rows_with_the_json_values(tmp_path: Path) -> None:
    shutil.copytree(DATA, tmp_path / "insp")
    t = correlator.load(tmp_path)
    f = DATA / "node-b-pid52016.log"
    lines = f.read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    rows = t.filter(pl.col("path") == "insp/node-b-pid52016.log").sort("line")
    assert rows.height == len(lines) == 11  # one row per record: the long lines are no terminal wrap
    assert rows["kind"].unique().to_list() == ["inspector_op"]
    assert rows["seq"].to_list() == [r["coll_perf"]["coll_sn"] for r in recs]
    assert rows["pid"].unique().to_list() == [recs[0]["metadata"]["pid"]] == [52016]
    assert rows["pg"][0] == recs[0]["header"]["id"].removeprefix("0x")
    assert rows["ranks_named"][0] == str(recs[0]["header"]["rank"]) == "13"
    assert rows["world_size"][0] == recs[0]["header"]["n_ranks"]
    assert rows["op"][0] == "ALLREDUCE"
    assert rows["elapsed_ms"].to_list() == [r["coll_perf"]["coll_exec_time_us"] // 1000 for r in recs]
    assert rows["rank"].null_count() == rows.height  # the job rank is not the file's to say


def test_late_rank_from_execution_times(tmp_path: Path) -> None:
    """The rank with the shortest execution time at each of the common collectives arrived last (the others'
    kernels waited for it): computed here from the files with json, then by rasview."""
    shutil.copytree(DATA, tmp_path / "insp")
    per: dict[int, list[int]] = {}
    for p in DATA.iterdir():
        for line in p.read_text().splitlines():
            r = json.loads(line)
            per.setdefault(r["header"]["rank"], []).append(r["coll_perf"]["coll_exec_time_us"])
    fastest = min(per, key=lambda r: statistics.median(per[r]))
    others = statistics.median(x for r, xs in per.items() if r != fastest for x in xs)
    assert fastest == 13 and statistics.median(per[13]) < rasview.LATE_FACTOR * others
    cs = rasview.claims(correlator.load(tmp_path), 16)
    assert [(c.state, c.ranks, c.source) for c in cs] == [("late", [13], "NCCL Inspector")]


def test_inspector_joins_the_diagnosis(tmp_path: Path) -> None:
    d = tmp_path / "job"
    shutil.copytree(RECON01 / "logs", d)
    shutil.copytree(DATA, d / "nccl-inspector-unknown-jobid")
    v = correlator.diagnose(correlator.load(d))
    assert v.initiating_ranks == [13]
    ev = [e for e in v.evidence if e.kind == "inspector_op"]
    assert ev and ev[0].path == "nccl-inspector-unknown-jobid/node-b-pid52016.log"
    assert "RAS_NAMED" in v.confidence_reason_codes
