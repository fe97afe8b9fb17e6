"""Streaming, the in-memory read (``diagnose``, ``events``, ``graph``) and the live watcher share one batch
function (issue #32: "streaming, diagnose and watch use the same batch function").

The in-memory read is one batch of the whole input (:func:`correlator.batch.ingest_whole`); it must give
what ``correlator.ingest.ingest`` gives, field by field, with the NCCL COLL cut of ``diagnose`` too.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from correlator import batch as batch_mod
from correlator import streaming
from correlator.api import diagnose_path, load_path
from correlator.batch import ingest_whole
from correlator.ingest import ingest


@pytest.fixture(scope="module")
def gen(small_job: Path) -> Path:
    (small_job / "blob.log").write_bytes(
        b"\x00\x01\x02" * 100
    )  # a binary file: a skipped entry and a warning
    return small_job


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    jobs: list[Any] = []
    real = batch_mod.ingest_batch

    def spy(job: Any, hooks: Any = None) -> Any:
        jobs.append(job)
        return real(job, hooks)

    monkeypatch.setattr(batch_mod, "ingest_batch", spy)
    monkeypatch.setattr(streaming, "ingest_batch", spy)  # imported there by name
    return jobs


@pytest.mark.parametrize("keep_coll", [None, 4])
def test_whole_input_as_one_batch_is_what_ingest_gives(gen: Path, keep_coll: int | None) -> None:
    want = ingest(gen, keep_coll=keep_coll)
    got = ingest_whole(gen, keep_coll=keep_coll)
    assert got.table.equals(want.table)
    assert [s.rel for s in got.sources] == [s.rel for s in want.sources]
    assert (got.warnings, got.lines_read, got.skipped_lines) == (
        want.warnings,
        want.lines_read,
        want.skipped_lines,
    )
    assert (got.skipped_by_reason, got.skipped, got.coll_lines_dropped) == (
        want.skipped_by_reason,
        want.skipped,
        want.coll_lines_dropped,
    )
    assert got.skipped and got.skipped_by_reason  # the binary file is reported, not lost
    if keep_coll is not None:
        assert got.coll_lines_dropped > 0  # the generator writes NCCL COLL lines: the cut ran


def test_diagnose_reads_logs_through_the_batch_function(gen: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _spy(monkeypatch)
    diagnose_path(gen, streaming=False)
    assert len(jobs) == 1
    job = jobs[0]
    assert job.whole == str(gen) and job.keep_coll is not None and not job.empty_ok
    jobs.clear()
    load_path(gen)  # events, graph, the in-memory timeline
    assert len(jobs) == 1 and jobs[0].keep_coll is None


def test_streaming_diagnose_runs_the_same_function(gen: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _spy(monkeypatch)
    monkeypatch.setenv("RANKSCOPE_BATCH_POOL", "threads")  # the spy lives in this process
    streamed = diagnose_path(gen, streaming=True).diagnosis.to_json()
    assert jobs and all(j.whole is None for j in jobs)
    assert streamed == diagnose_path(gen, streaming=False).diagnosis.to_json()


def test_empty_input_still_raises_discovery_error(tmp_path: Path) -> None:
    discover = importlib.import_module("correlator.discover")
    (tmp_path / "empty.log").write_bytes(b"")
    with pytest.raises(discover.DiscoveryError, match="no log lines to read"):
        load_path(tmp_path)


def test_the_whole_input_skips_the_batch_summary(gen: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-memory read gives back the table, whose summary its caller computes: the batch summary (kinds,
    ranks, hosts, attempts), which only streaming sums over batches, is not computed for it."""
    heights: list[int] = []
    real = batch_mod._summarize

    def spy(out: Any, t: Any) -> None:
        heights.append(t.height)
        real(out, t)

    monkeypatch.setattr(batch_mod, "_summarize", spy)
    whole = ingest_whole(gen)
    assert heights == [] and whole.table.height > 0
    monkeypatch.setenv("RANKSCOPE_BATCH_POOL", "threads")  # the spy lives in this process
    _red, s = streaming.stream_ingest(gen, None)  # no table written: COLL lines cut while reading, as here
    cut = ingest_whole(gen, keep_coll=streaming.KEEP_LAST)
    assert len(heights) == s["batches"] and sum(heights) == s["rows"] == cut.table.height < whole.table.height


def test_workers_are_bounded_by_the_memory_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """``batch_workers``: the cores, at most as many as ``RANKSCOPE_MEMORY_MB`` holds at 20x a batch's bytes
    plus 200 MiB of imports per worker (the measured worst case, application batches); at least one. An
    explicit count is taken as given; ``RANKSCOPE_BATCH_WORKERS`` replaces the cores, within the budget."""
    monkeypatch.setattr(batch_mod, "cores", lambda: 16)
    monkeypatch.delenv("RANKSCOPE_BATCH_WORKERS", raising=False)
    mib = 1024**2
    per = 20 * 32 + 200  # MiB a worker of 32 MiB batches may take
    for budget, want in ((64 * 1024, 16), (8 * 1024, 8 * 1024 // per), (per * 3 - 1, 2), (100, 1)):
        monkeypatch.setenv("RANKSCOPE_MEMORY_MB", str(budget))
        assert batch_mod.batch_workers(None, 32 * mib) == want, budget
    assert batch_mod.batch_workers(None, None) == 16  # no batch size: the cores
    assert batch_mod.batch_workers(3, 32 * mib) == 3
    monkeypatch.setenv("RANKSCOPE_BATCH_WORKERS", "12")
    assert batch_mod.batch_workers(None, 32 * mib) == 1  # (budget 100 MiB still set)
    monkeypatch.setenv("RANKSCOPE_MEMORY_MB", str(64 * 1024))
    assert batch_mod.batch_workers(None, 32 * mib) == 12
    # read as every numeric setting is (correlator.limits.env_int, as RANKSCOPE_EVAL_WORKERS): 0 and what is
    # not a whole number count as unset (the cores), ``_`` between digits is allowed
    for unset in ("0", "-2", "four", ""):
        monkeypatch.setenv("RANKSCOPE_BATCH_WORKERS", unset)
        assert batch_mod.batch_workers(None, 32 * mib) == 16, unset
    monkeypatch.setenv("RANKSCOPE_BATCH_WORKERS", "1_0")
    assert batch_mod.batch_workers(None, 32 * mib) == 10
    monkeypatch.setenv("RANKSCOPE_MEMORY_MB", "2_048")
    assert batch_mod._memory_budget() == 2048 * mib
    monkeypatch.delenv("RANKSCOPE_MEMORY_MB")
    unset = batch_mod._memory_budget()  # half the machine's memory, whatever it is here
    monkeypatch.setenv("RANKSCOPE_MEMORY_MB", "0")
    assert batch_mod._memory_budget() == unset != 0
