"""Logs as Kubernetes users hold them: ``kubectl logs --prefix [--timestamps]`` of a job's pods, and one file per pod
of a Kubeflow PyTorchJob.

Shapes from the producers' source: kubectl puts ``[pod/NAME/CONTAINER] `` before each line the API server streams
(kubernetes/kubernetes#76471), and with ``--timestamps`` the server starts each line with its RFC 3339 stamp
(PodLogOptions.Timestamps), so the stamp follows the prefix. A PyTorchJob with a Master names its pods
``<job>-master-0`` and ``<job>-worker-<i>`` and gives the Master rank 0 and Worker i rank i + 1
(kubeflow/training-operator ``pkg/controller.v1/pytorch/envvar.go``). The answers are the ranks those rules give.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl

import correlator
from correlator.api import diagnose_path
from correlator.discover import discover

# The failing worker's traceback has no rank of its own: only its c10d lines say ``[Rank r]`` (ProcessGroupWrapper,
# TORCH_DISTRIBUTED_DEBUG=DETAIL, as in ../shared/real-logs/gloo-01's rank files, self-tags removed).
_FP = "[I1129 23:08:35.{us:06d}000 ProcessGroupWrapper.cpp:710] [Rank {r}] Running collective: CollectiveFingerPrint(SequenceNumber=24, OpType=ALLREDUCE, TensorShape=[676], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)))"
_TB = [
    "Traceback (most recent call last):",
    '  File "/opt/app/train.py", line 37, in <module>',
    "    main()",
    '  File "/opt/app/train.py", line 30, in main',
    "    batch = next(loader)",
    "ValueError: corrupt record in shard 9",
]
_MB = "[E1129 23:08:50.{us:06d}000 ProcessGroupGloo.cpp:144] [Rank 0]: Rank {bad} failed to pass monitoredBarrier in 15000 ms"


def _pods(job: str, bad_rank: int) -> dict[str, list[tuple[int, str]]]:
    """Lines per pod (microsecond offset, text) of a 4-rank PyTorchJob whose rank ``bad_rank`` raises."""
    names = [f"{job}-master-0", *(f"{job}-worker-{i}" for i in range(3))]
    pods: dict[str, list[tuple[int, str]]] = {}
    for r, name in enumerate(names):  # rank r: Master 0, Worker i -> i + 1
        lines = [(100 + r, _FP.format(us=100 + r, r=r))]
        if r == bad_rank:
            lines += [(200 + k, t) for k, t in enumerate(_TB)]
        if r == 0:
            lines.append((900, _MB.format(us=900, bad=bad_rank)))
        pods[name] = lines
    return pods


def _stamp(us: int) -> str:
    return f"2026-11-29T23:08:{35 + us // 900 * 15:02d}.{us:06d}000Z"


def test_kubectl_prefix_then_timestamps_keeps_the_stamp_and_the_pods_rank(tmp_path: Path) -> None:
    pods = _pods("trainer", bad_rank=2)
    merged = sorted((us, name, text) for name, lines in pods.items() for us, text in lines)
    (tmp_path / "job.log").write_text(
        "".join(f"[pod/{name}/pytorch] {_stamp(us)} {text}\n" for us, name, text in merged)
    )
    t = correlator.load(tmp_path)
    exc = t.filter(pl.col("kind") == "python_exception").row(0, named=True)
    # the stamp after the prefix is the line's (exact), the traceback one record of its six lines
    assert (exc["ts_quality"], exc["line_count"], exc["host"]) == ("exact", len(_TB), "trainer-worker-1")
    assert exc["ts"] == dt.datetime(2026, 11, 29, 23, 8, 35, 200, tzinfo=dt.UTC)
    # its pod's c10d lines state rank 2 and no other pod's do: the traceback is rank 2's
    assert (exc["rank"], exc["rank_source"]) == (2, "host")
    d = diagnose_path(tmp_path).diagnosis
    assert (d.initiating_ranks, d.failure_kind) == ([2], "rank_crash")


def test_a_pod_that_states_two_ranks_gives_none_to_its_other_lines(tmp_path: Path) -> None:
    # one pod running two ranks (torchrun inside it, no tee prefix): its untagged lines stay without a rank
    lines = [
        "[pod/trainer-worker-0/pytorch] " + _FP.format(us=1, r=1),
        "[pod/trainer-worker-0/pytorch] " + _FP.format(us=2, r=2),
        *(f"[pod/trainer-worker-0/pytorch] {t}" for t in _TB),
        "[pod/trainer-master-0/pytorch] " + _FP.format(us=3, r=0),
        "[pod/trainer-worker-1/pytorch] " + _FP.format(us=4, r=3),
    ]
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n")
    exc = correlator.load(tmp_path).filter(pl.col("kind") == "python_exception").row(0, named=True)
    assert exc["rank"] is None


def _write_pod_files(root: Path, job: str, bad_rank: int, with_master: bool = True) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, lines in _pods(job, bad_rank).items():
        if with_master or "master" not in name:
            (root / f"{name}.log").write_text("".join(f"{t}\n" for _, t in lines))


def test_pytorchjob_pod_files_take_the_operators_ranks(tmp_path: Path) -> None:
    _write_pod_files(tmp_path, "bert-ft", bad_rank=2)
    sources, warnings = discover(tmp_path)
    ranks = {s.path.name: (s.layout, s.rank) for s in sources}
    assert ranks == {
        "bert-ft-master-0.log": ("task_file", 0),
        "bert-ft-worker-0.log": ("task_file", 1),
        "bert-ft-worker-1.log": ("task_file", 2),
        "bert-ft-worker-2.log": ("task_file", 3),
    }
    assert any("Kubeflow PyTorchJob" in w for w in warnings)
    got = diagnose_path(tmp_path)
    assert (got.diagnosis.initiating_ranks, got.diagnosis.failure_kind) == ([2], "rank_crash")
    (ev,) = got.diagnosis.initiating_events
    assert ev.path == "bert-ft-worker-1.log"


def test_worker_files_without_a_master_keep_the_name_rank(tmp_path: Path) -> None:
    # no Master replica: a worker's index is its rank (nothing to shift)
    _write_pod_files(tmp_path, "bert-ft", bad_rank=2, with_master=False)
    ranks = {s.path.name: s.rank for s in discover(tmp_path)[0]}
    assert ranks == {"bert-ft-worker-0.log": 0, "bert-ft-worker-1.log": 1, "bert-ft-worker-2.log": 2}


def test_streaming_batches_take_the_pytorchjob_ranks(tmp_path: Path) -> None:
    from correlator.streaming import stream_ingest

    _write_pod_files(tmp_path, "bert-ft", bad_rank=2)
    reduced, _summary = stream_ingest(tmp_path, None, batch_bytes=64, workers=1)
    exc = reduced.filter(pl.col("kind") == "python_exception")
    assert exc["rank"].to_list() == [2] and exc["path"].to_list() == ["bert-ft-worker-1.log"]
