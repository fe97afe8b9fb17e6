"""PyTorch Flight Recorder dumps: safe loading, every layout 2.2 – 2.10, rows, the FR rule, --fr.

Layouts below are reconstructed from torch's own source and docs (field names and value shapes copied,
values invented): 2.2 from ``TraceUtils.h``/``NCCLUtils.hpp`` of the torch 2.4 era (no ``pg_status``, no
thread fields), 2.4 from ``torch/csrc/distributed/c10d/FlightRecorder.hpp`` (adds ``pg_status``), 2.5 from
the FR tutorial's unpickled example (pytorch/tutorials ``prototype_source/flight_recorder_tutorial.rst``,
NCCL: ``state`` completed, ``time_discovered_completed_ns``), 2.8 from the analyzer's tests
(``test/distributed/flight_recorder/test_fr_analysis.py``: seq ids as strings, one dtype string). 2.10 is
the captured torch 2.13 gloo layout (fixtures/cases/fr-*), written by ``_dump_fr_trace[_json]()``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import polars as pl
import pytest

import correlator
from correlator import fr
from correlator.evaluate import run_case
from parsers import flight_recorder as frp
from tests.conftest import CASES, run_cli

FR_CASES = sorted(p for p in CASES.iterdir() if p.name.startswith("fr-") or "-fr-" in p.name)


def _entry(rid: int, seq: int, name: str = "all_reduce", sizes=((3, 4),), backend: str = "nccl", **kw):
    e = {
        "record_id": rid,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"{backend}:{name}",
        "time_created_ns": 1724779239936775119 + rid,
        "input_sizes": [list(s) for s in sizes],
        "input_dtypes": ["Float"] * len(sizes),
        "output_sizes": [list(s) for s in sizes],
        "output_dtypes": ["Float"] * len(sizes),
        "state": "scheduled",
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": True,
        "timeout_ms": 600000,
        "is_p2p": False,
        "frames": [
            {
                "name": "all_reduce",
                "filename": "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py",
                "line": 2696,
            },
            {"name": "<module>", "filename": "/opt/app/crash.py", "line": 44},
        ],
    }
    e.update(kw)
    return e


def layout(version: str, rank: int = 0) -> dict:
    """A one-entry dump in the given layout (see the module docstring for the sources)."""
    if version == "2.2":
        e = _entry(0, 1)
        return {
            "version": "2.2",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "entries": [e],
            "nccl_comm_state": {},
        }
    if version == "2.4":
        e = _entry(
            0,
            1,
            state="completed",
            time_discovered_started_ns=1724779239940000000,
            time_discovered_completed_ns=1724779239975811724,
            duration_ms=0.5,
        )
        return {
            "version": "2.4",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": 1,
                    "last_started_collective": 1,
                    "last_completed_collective": 1,
                }
            },
            "entries": [e],
        }
    if version == "2.5":  # the tutorial's example entry, verbatim values
        e = _entry(
            0,
            1,
            state="completed",
            time_created_ns=1724779239936775119,
            time_discovered_completed_ns=1724779239975811724,
        )
        return {
            "version": "2.5",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": 2,
                    "last_started_collective": -1,
                    "last_completed_collective": 2,
                }
            },
            "entries": [e],
        }
    if version == "2.8":  # the analyzer tests' event shape: numbers as strings, a dtype string, no frames
        e = _entry(
            0, 1, collective_seq_id="1", p2p_seq_id="0", input_dtypes="float32", output_dtypes="float32"
        )
        del e["frames"]
        return {
            "version": "2.8",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "entries": [e],
        }
    if version == "2.10":  # torch 2.13 gloo: pg_config keyed '', pg_status numbers as strings (JSON)
        e = _entry(
            0,
            1,
            backend="gloo",
            process_group=["0", "default_pg"],
            thread_id="1",
            thread_name="python3",
            time_discovered_started_ns=0,
            time_discovered_completed_ns=0,
        )
        del e["frames"]
        return {
            "version": "2.10",
            "comm_lib_version": "",
            "nccl_comm_state": {},
            "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": "1",
                    "last_started_collective": "-1",
                    "last_completed_collective": "1",
                }
            },
            "entries": [e],
        }
    raise AssertionError(version)


@pytest.mark.parametrize("version", ["2.2", "2.4", "2.5", "2.8", "2.10"])
@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_every_layout_loads(tmp_path: Path, version: str, fmt: str) -> None:
    obj = layout(version)
    p = tmp_path / ("fr_rank_1.json" if fmt == "json" else "nccl_trace_rank_1")
    p.write_bytes(json.dumps(obj).encode() if fmt == "json" else pickle.dumps(obj, protocol=2))
    assert frp.detect(p) == (fmt, 1)
    d = frp.read(p, p.name)
    assert (d.rank, d.version, len(d.entries)) == (1, version, 1)
    e = d.entries[0]
    assert (e.pg, e.seq, e.name, e.input_sizes, e.numel) == ("0", 1, "all_reduce", [[3, 4]], 12)
    assert e.input_dtypes == (["float32"] if version == "2.8" else ["Float"])
    rows = [r for r in frp.rows(d) if r["kind"] == "fr_collective"]
    assert rows[0]["op"] == "ALLREDUCE" and rows[0]["record_id"] == 0 and rows[0]["shape"] == "[3, 4]"
    assert rows[0]["ts"].year == 2024
    status = [r for r in frp.rows(d) if r["kind"] in ("fr_status", "fr_waiting")]
    if version in ("2.2", "2.8"):
        assert status == []  # no pg_status in these layouts
    else:
        assert status[0]["pg"] == "0" and status[0]["seq_completed"] == (2 if version == "2.5" else 1)
    if version in ("2.4", "2.5"):  # NCCL-only fields
        assert e.state == "completed" and e.time_completed_ns == 1724779239975811724
        assert rows[0]["ts_end"] is not None
    if version == "2.10":
        assert e.time_started_ns is None and e.time_completed_ns is None  # JSON's 0 means unknown
        assert d.pg_ranks == {"0": [0, 1]}  # gloo's '' key is the default PG


def test_crafted_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    payload = pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [Evil()]}, protocol=2)
    p = tmp_path / "logs" / "nccl_trace_rank_0"
    p.parent.mkdir()
    p.write_bytes(payload)
    with pytest.raises(frp.FlightRecorderError, match=r"refused global (posix|os)\.system"):
        frp.load_dump(p)
    assert not marker.exists()
    # Through ingest: a warning that names the file, nothing run, nothing read as text from it.
    (tmp_path / "logs" / "rank0.log").write_text("[rank0]: hello\n")
    res = correlator.ingest(tmp_path / "logs")
    assert not marker.exists()
    assert any("nccl_trace_rank_0" in w and "refused global" in w for w in res.warnings)
    assert res.table.filter(pl.col("path") == "nccl_trace_rank_0").height == 0


def test_truncated_and_wrong_dumps_are_clear_errors(tmp_path: Path) -> None:
    good = pickle.dumps(layout("2.4"), protocol=2)
    p = tmp_path / "fr_rank_0"
    p.write_bytes(good[: len(good) // 2])
    with pytest.raises(frp.FlightRecorderError, match="fr_rank_0"):
        frp.load_dump(p)
    p.write_bytes(pickle.dumps({"version": "9.1", "entries": []}, protocol=2))
    with pytest.raises(frp.FlightRecorderError, match="not supported"):
        frp.load_dump(p)
    p.write_bytes(b'{"pg_config": {}, "entries": [')
    with pytest.raises(frp.FlightRecorderError):
        frp.load_dump(p, "json")


def test_dumps_are_not_read_as_rank_logs() -> None:
    res = correlator.ingest(CASES / "fr-02-op-mismatch" / "logs")
    assert not any("claim rank" in w for w in res.warnings)
    t = res.table.filter(pl.col("path").str.starts_with("fr/"))
    assert set(t["kind"].unique().to_list()) <= {"fr_collective", "fr_status", "fr_waiting"}
    assert (t["layer"] == "fr").all() and t["line_count"].sum() == 0
    assert res.lines_read == res.table["line_count"].sum() + res.skipped_lines


def _trace(tmp_path: Path, seqs: dict[int, list[tuple[int, str, tuple]]], first_rid: dict[int, int]) -> Path:
    """Write one pickle dump per rank: seqs[rank] = [(seq, op, sizes), ...]."""
    d = tmp_path / "dumps"
    d.mkdir(exist_ok=True)
    for r, items in seqs.items():
        entries = [_entry(first_rid[r] + i, s, op, sz, backend="gloo") for i, (s, op, sz) in enumerate(items)]
        obj = {
            "version": "2.10",
            "pg_config": {"": {"name": "", "desc": "", "ranks": str(list(range(len(seqs))))}},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": items[-1][0],
                    "last_started_collective": -1,
                    "last_completed_collective": items[-1][0],
                }
            },
            "entries": entries,
        }
        (d / f"fr_rank_{r}").write_bytes(pickle.dumps(obj, protocol=2))
    return d


def test_ring_wrap_is_trimmed_and_majority_decides(tmp_path: Path) -> None:
    # Rank 0's buffer wrapped further (it holds seq 5.. only); rank 2 calls broadcast at seq 8.
    step = [(5, "all_reduce", ((4,),)), (6, "all_reduce", ((4,),)), (7, "all_reduce", ((4,),))]
    seqs = {
        0: step[0:] + [(8, "all_reduce", ((4,),))],
        1: [(3, "all_reduce", ((4,),)), (4, "all_reduce", ((4,),))] + step + [(8, "all_reduce", ((4,),))],
        2: [(4, "all_reduce", ((4,),))] + step + [(8, "broadcast", ((4,),))],
        3: [(4, "all_reduce", ((4,),))] + step + [(8, "all_reduce", ((4,),))],
    }
    d = _trace(tmp_path, seqs, {0: 4, 1: 2, 2: 3, 3: 3})
    v = fr.analyze(correlator.load(d))
    assert v is not None and v.initiators == [2] and v.kind == "op_mismatch" and v.seq == 8
    assert v.claim == "rank 2 called broadcast at pg 0 seq 8 where ranks 0-1, 3 called all_reduce"


def test_even_split_names_nobody(tmp_path: Path) -> None:
    seqs = {0: [(1, "all_reduce", ((4,),))], 1: [(1, "broadcast", ((4,),))]}
    assert fr.analyze(correlator.load(_trace(tmp_path, seqs, {0: 0, 1: 0}))) is None


def test_clean_dumps_show_no_disagreement() -> None:
    assert fr.analyze(correlator.load(CASES / "fr-06-clean-dumps-only" / "logs")) is None


@pytest.mark.parametrize("case", FR_CASES, ids=lambda p: p.name)
def test_captured_fr_case(case: Path) -> None:
    """Every captured FR case, with logs and with the dumps alone, is diagnosed as labelled (or is a
    labelled known miss)."""
    r = run_case(case)
    assert r.initiating_ok and r.collateral_ok, (r.got, r.want)
    assert r.passed or r.excused, (r.got, r.want)


def test_verdicts_say_what_fr_showed() -> None:
    d = correlator.diagnose(correlator.load(CASES / "fr-02-op-mismatch" / "logs"))
    assert d.initiator_basis == "Flight Recorder"
    assert "rank 1 called broadcast at pg 0 seq 25 where ranks 0, 2-3 called all_reduce" in d.summary
    first = d.evidence[0]
    assert first.path == "fr/fr_rank_1.json" and "record_id 24" in first.text
    d = correlator.diagnose(correlator.load(CASES / "fr-03-size-mismatch-rank0" / "logs"))
    assert (
        "rank 0 called all_reduce of [48, 16] at pg 0 seq 1 where ranks 1-2 called all_reduce of [32, 16]"
        in d.summary
    )
    assert any("rank 3 left no Flight Recorder dump" in r for r in d.confidence_reasons)
    d = correlator.diagnose(correlator.load(CASES / "fr-04-skip-collective-dumps-only" / "logs"))
    assert "skipped that all_reduce and ran ahead" in d.summary and d.missing_ranks == [1]
    # NCCL (reconstructed from the FR tutorial): an extra collective on rank 0; pg_status says where each
    # rank is stuck (first seq not completed).
    t = correlator.load(CASES / "recon-17-fr-nccl-extra-allreduce-rank0-dumps-only" / "logs")
    d = correlator.diagnose(t)
    assert (
        "rank 0 called all_reduce of [4, 5] at pg 0 seq 3 where ranks 1-3 called all_reduce of [3, 4]"
        in d.summary
    )
    assert "an extra collective" in d.summary
    st = t.filter(pl.col("kind") == "fr_waiting").sort("rank")
    assert st["seq"].to_list() == [3, 3, 3, 3] and st["seq_enqueued"].to_list() == [5, 4, 4, 4]


def test_cli_fr_option_and_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(CASES / "fr-02-op-mismatch" / "logs", logs)
    shutil.move(logs / "fr", tmp_path / "dumps")
    code, out, _ = run_cli(
        ["diagnose", logs, "--fr", tmp_path / "dumps", "-f", "json", "-q"], monkeypatch, capsys
    )
    got = json.loads(out)
    assert code == 0 and got["initiating_ranks"] == [1] and got["failure_kind"] == "collective_mismatch"
    code, out, _ = run_cli(
        [
            "events",
            logs,
            "--fr",
            tmp_path / "dumps",
            "--kind",
            "fr_collective",
            "-n",
            "0",
            "-f",
            "json",
            "-q",
        ],
        monkeypatch,
        capsys,
    )
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and len(rows) == 80 and {r["kind"] for r in rows} == {"fr_collective"}
    code, _, err = run_cli(["diagnose", logs, "--fr", tmp_path / "nope", "-q"], monkeypatch, capsys)
    assert code == 2 and "--fr" in err


def test_fr_slices_in_perfetto_and_plot(tmp_path: Path) -> None:
    """NCCL entries with a known completion time become slices (created .. completed); gloo's never do."""
    from correlator.perfetto import to_trace
    from correlator.plot import timeline_figure

    d = tmp_path / "dumps"
    d.mkdir()
    for r in (0, 1):
        obj = layout("2.5")
        e2 = _entry(1, 2, state="scheduled", time_created_ns=1724779240000000000)  # rank r stuck in seq 2
        obj["entries"].append(
            e2 if r == 0 else _entry(1, 2, name="broadcast", time_created_ns=1724779240000000000)
        )
        (d / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(obj, protocol=2))
    (d / "nccl_trace_rank_2").write_bytes(pickle.dumps(layout("2.5"), protocol=2))
    t = correlator.load(d)
    diag = correlator.diagnose(t)
    xs = [
        e
        for e in to_trace(t, diag)["traceEvents"]
        if e.get("ph") == "X" and "flight_recorder" in e.get("cat", "")
    ]
    # the seq-1 entry of each rank: created ...936775119, completed ...975811724 -> 39036 µs
    assert len(xs) == 3 and {x["dur"] for x in xs} == {39036}
    fig = timeline_figure(t, diag)
    assert fig is not None
    gloo = correlator.load(CASES / "fr-06-clean-dumps-only" / "logs")
    assert gloo.filter(pl.col("ts_end").is_not_null()).height == 0


def test_subgroup_record_ids_do_not_trim_other_ranks(tmp_path: Path) -> None:
    """Ranks 0-1 also run a sub-group's collectives, so their record ids run ahead of rank 2's: trimming by
    the largest first record_id would drop all of rank 2; per-PG seq trimming keeps the alignment right."""
    d = tmp_path / "dumps"
    d.mkdir()
    for r in (0, 1, 2):
        ents, rid = [], 100 if r < 2 else 10
        for s in range(1, 5):
            ents.append(_entry(rid, s, backend="gloo"))
            rid += 1
            if r < 2:
                ents.append(_entry(rid, s, backend="gloo", process_group=("1", "sub"), sizes=((2,),)))
                rid += 1
        if r == 2:
            ents.append(
                _entry(rid, 5, name="all_reduce", sizes=((3, 4),), backend="gloo", input_dtypes=["Half"])
            )
        else:
            ents.append(_entry(rid, 5, backend="gloo"))
        obj = {
            "version": "2.10",
            "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1, 2]"}},
            "entries": ents,
        }
        (d / f"fr_rank_{r}").write_bytes(pickle.dumps(obj, protocol=2))
    v = fr.analyze(correlator.load(d))
    assert v is not None and (v.initiators, v.kind, v.pg, v.seq) == ([2], "dtype_mismatch", "0", 5)
    assert (
        "rank 2 called all_reduce of Half at pg 0 seq 5 where ranks 0-1 called all_reduce of Float" == v.claim
    )


def test_text_lines_of_the_same_seq_are_linked() -> None:
    """A DETAIL fingerprint (no PG id: the default PG) about the same seq joins the FR evidence."""
    from correlator.schema import conform

    t = correlator.load(CASES / "fr-02-op-mismatch" / "logs")
    fp = conform(
        pl.DataFrame(
            {
                "event_id": [10**6],
                "path": ["rank1.log"],
                "line": [1],
                "line_count": [1],
                "rank": [1],
                "layer": ["c10d"],
                "kind": ["collective_fingerprint"],
                "seq": [25],
                "op": ["BROADCAST"],
                "duplicate": [False],
                "raw": [
                    "[rank1]:[I] Running collective: CollectiveFingerPrint(SequenceNumber=25, OpType=BROADCAST)"
                ],
                "attempt": [0],
            }
        )
    )
    v = fr.analyze(pl.concat([t, fp]))
    assert v is not None and 10**6 in v.evidence and v.evidence[0] != 10**6


def test_nccl_state_names_the_rank_that_never_started(tmp_path: Path) -> None:
    """Same collectives everywhere; at seq 3 rank 2's kernel is still scheduled while the others started it
    (NCCL states; gloo dumps always say scheduled, so this never fires there)."""
    d = tmp_path / "dumps"
    d.mkdir()
    for r in range(4):
        ents = [
            _entry(0, 1, state="completed", time_discovered_completed_ns=1724779239975811724),
            _entry(1, 2, state="completed", time_discovered_completed_ns=1724779239985811724),
            _entry(2, 3, state="scheduled" if r == 2 else "started"),
        ]
        obj = {
            "version": "2.5",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": 3,
                    "last_started_collective": 2 if r == 2 else 3,
                    "last_completed_collective": 2,
                }
            },
            "entries": ents,
        }
        (d / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(obj, protocol=2))
    t = correlator.load(d)
    v = fr.analyze(t)
    assert v is not None and (v.initiators, v.pg, v.seq) == ([2], "0", 3)
    assert (
        v.claim
        == "rank 2's all_reduce at pg 0 seq 3 never started (scheduled) while ranks 0-1, 3 had started it"
    )
    diag = correlator.diagnose(t)
    assert (diag.initiating_ranks, diag.collateral_ranks, diag.failure_kind) == (
        [2],
        [0, 1, 3],
        "straggler_hang",
    )


def test_dumps_alone_say_where_a_rank_stopped_not_why() -> None:
    """fr-05: rank 2 raised; its error-path dump has the shape of fr-01's sleeping rank 3 (FR writes no
    dump time, trigger or exception), so from the dumps alone the verdict says it cannot tell why."""
    d = correlator.diagnose(correlator.load(CASES / "fr-05-exception-fsdp2-dumps-only" / "logs"))
    assert (d.initiating_ranks, d.failure_kind) == ([2], "straggler_hang")
    assert "the dumps show where it stopped, not why" in d.summary
    d = correlator.diagnose(correlator.load(CASES / "fr-05-exception-fsdp2" / "logs"))
    assert (d.initiating_ranks, d.failure_kind) == ([2], "rank_crash")
    assert "not why" not in d.summary and "CorruptBatchError" in d.summary


def _p2p_dumps(tmp_path: Path, per_rank: dict[int, list[dict]], pg_ranks: dict[str, str]) -> Path:
    """NCCL dumps (reconstructed: the 2.5 tutorial layout of :func:`_entry`, with P2P entries named as
    ProcessGroupNCCL names them, ``nccl:send <pg rank>-><peer>`` / ``nccl:recv <pg rank><-<peer>``,
    ``is_p2p`` true, ``p2p_seq_id`` counting the rank's P2P ops of the PG)."""
    d = tmp_path / "dumps"
    d.mkdir()
    for r, ents in per_rank.items():
        obj = {
            "version": "2.5",
            "pg_config": {k: {"name": k, "desc": "", "ranks": v} for k, v in pg_ranks.items()},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": 1,
                    "last_started_collective": 1,
                    "last_completed_collective": 1,
                }
            },
            "entries": ents,
        }
        (d / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(obj, protocol=2))
    return d


def _p2p(rid: int, p2p_seq: int, name: str, pg: str = "0", state: str = "completed") -> dict:
    done = 1724779239975811724 if state == "completed" else None
    return _entry(
        rid,
        1,
        name,
        ((1024,),),
        is_p2p=True,
        p2p_seq_id=p2p_seq,
        process_group=(pg, ""),
        pg_id=int(pg),
        state=state,
        time_discovered_completed_ns=done,
    )


def test_p2p_send_without_recv_names_the_peer(tmp_path: Path) -> None:
    # Rank 0's second send to rank 1 is still scheduled; rank 1 posted only one recv from rank 0.
    coll = [_entry(0, 1, state="completed", time_discovered_completed_ns=1724779239975811724)]
    ranks = {
        0: coll + [_p2p(1, 1, "send 0->1"), _p2p(2, 2, "send 0->1", state="scheduled")],
        1: coll + [_p2p(1, 1, "recv 1<-0")],
    }
    t = correlator.load(_p2p_dumps(tmp_path, ranks, {"0": "[0, 1]"}))
    v = fr.analyze(t)
    assert v is not None and (v.initiators, v.kind, v.pg, v.seq) == ([1], "p2p_unmatched", "0", 2)
    assert v.claim == (
        "rank 0's send to rank 1 at pg 0 p2p seq 2 ([1024]) has no matching recv on rank 1, "
        "which posted 1 recv from rank 0"
    )
    w = t.filter(pl.col("kind") == "fr_waiting")
    assert w.select("rank", "pg", "seq", "op").rows() == [(0, "0", 2, "SEND")]
    d = correlator.diagnose(t)
    assert (d.initiating_ranks, d.collateral_ranks, d.failure_kind) == ([1], [0], "straggler_hang")


def test_p2p_recv_without_send_maps_pg_ranks(tmp_path: Path) -> None:
    # PG 1 holds global ranks 2, 3: rank 3's "recv 1<-0" waits on global rank 2, which never sent.
    coll = [_entry(0, 1, state="completed", time_discovered_completed_ns=1724779239975811724)]
    cfg = {"0": "[0, 1, 2, 3]", "1": "[2, 3]"}
    ranks = {r: list(coll) for r in range(4)}
    ranks[3] = coll + [_p2p(1, 1, "recv 1<-0", pg="1", state="scheduled")]
    v = fr.analyze(correlator.load(_p2p_dumps(tmp_path, ranks, cfg)))
    assert v is not None and (v.initiators, v.majority, v.pg, v.seq) == ([2], [3], "1", 1)
    assert "waits for a send rank 2 never posted (it posted 0 sends to rank 3)" in v.claim


def test_matched_p2p_shows_no_disagreement(tmp_path: Path) -> None:
    ranks = {0: [_p2p(0, 1, "send 0->1")], 1: [_p2p(0, 1, "recv 1<-0")]}
    assert fr.analyze(correlator.load(_p2p_dumps(tmp_path, ranks, {"0": "[0, 1]"}))) is None
