"""``rankscope timeline DIR --engine ray`` (issue #32 item 4): each batch a Ray task that runs
``correlator.batch.ingest_batch`` and writes its part into the output dataset, on a local Ray cluster.

Ray is an optional extra (``uv sync --extra ray``): the tests that run it skip when it is not importable;
the clear error when it is missing is tested without it.
"""

from __future__ import annotations

import glob
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.conftest import run_cli


@pytest.fixture(scope="module")
def logs(small_job: Path) -> Path:
    return small_job


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    import os

    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # see correlator.rayengine.require_ray
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _parts(folder: Path) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(f) for f in sorted(glob.glob(str(folder / "part-*.parquet")))])


def test_ray_tasks_write_what_the_local_engine_writes(logs: Path, tmp_path: Path, local_ray: Any) -> None:
    from correlator.streaming import stream_ingest

    bb = 20_000  # several batches, nodes split into chunks with their launcher log as context
    red_l, s_l = stream_ingest(logs, tmp_path / "local.parquet", batch_bytes=bb)
    red_r, s_r = stream_ingest(logs, tmp_path / "ds", batch_bytes=bb, engine="ray")
    assert s_r["batches"] == s_l["batches"] > 4
    parts = sorted(p.name for p in (tmp_path / "ds").iterdir())
    assert parts == [f"part-{i:05d}.parquet" for i in range(int(s_l["batches"]))]  # type: ignore[call-overload]
    assert _parts(tmp_path / "ds").equals(pl.read_parquet(tmp_path / "local.parquet"))
    assert red_r.equals(red_l)
    assert {k: v for k, v in s_r.items() if k != "peak_rss_mib"} == {
        k: v for k, v in s_l.items() if k != "peak_rss_mib"
    }


def test_timeline_engine_ray_cli(
    logs: Path, tmp_path: Path, local_ray: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    out = tmp_path / "by-host"
    code, _o, err = run_cli(
        ["timeline", logs, "--engine", "ray", "-o", out, "--partition-by", "host"], monkeypatch, capsys
    )
    assert code == 0, err
    written = pl.read_parquet(str(out / "**" / "*.parquet"), hive_partitioning=False)
    from correlator.ingest import load

    whole = load(logs)
    assert written.height == whole.height
    assert sorted(written["host"].unique().to_list()) == sorted(whole["host"].unique().to_list())
    code, _o, err = run_cli(["diagnose", out, "-f", "json"], monkeypatch, capsys)  # the dataset reads back
    assert code in (0, 1), err


def test_engine_ray_without_ray_is_a_clear_error(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code, _o, err = run_cli(["timeline", logs, "--engine", "ray", "-o", tmp_path / "ds"], monkeypatch, capsys)
    assert code == 2
    assert "Ray is not installed" in " ".join(err.split()) and "rankscope[ray]" in err
    assert not (tmp_path / "ds").exists()
