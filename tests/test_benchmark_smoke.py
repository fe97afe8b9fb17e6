"""Smoke test of the benchmark tools: a tiny generated tree and a tiny bench run (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import bench
from generate import generate


def _bench(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``benchmarks/bench.py ARGS`` run from the repository, its output captured."""
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench.py"), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        check=False,
    )


def test_generate_is_deterministic(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", ranks=10, lines=120, seed=3)
    b = generate(tmp_path / "b", ranks=10, lines=120, seed=3)
    assert a["culprit"] == b["culprit"] and a["bytes"] == b["bytes"] and a["lines"] == b["lines"]
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == a["files"] == 10 * 2 + 2  # stdout+stderr per rank, one launcher log per node
    assert any(f.name == "launcher.log" for f in files)
    assert sum(len(p.read_text().splitlines()) for p in (tmp_path / "a").rglob("*.log")) == a["lines"]


def test_pyloop_baseline_extracts_rows(tmp_path: Path) -> None:
    info = generate(tmp_path / "g", ranks=8, lines=100, seed=1)
    n = bench.pyloop(str(tmp_path / "g"))
    assert 0 < n <= info["lines"]


def test_ingest_measure_counts_every_line(tmp_path: Path) -> None:
    # the in-process measure divides its CPU by the lines the generator wrote (every line read, none dropped)
    info = generate(tmp_path / "g", ranks=4, lines=200, seed=2)
    got = bench._ingest_cmd(str(tmp_path / "g"))
    assert got["lines"] == info["lines"] and got["cpu_s"] > 0
    assert got["us_per_line"] == pytest.approx(1e6 * got["cpu_s"] / info["lines"])


def test_bench_quick_runs(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    p = _bench(
        *["--quick", "--json", str(out), "--work", str(tmp_path / "w")],
        *["--diag-scale", "128", "--cores", "1"],
    )
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads(out.read_text())
    (run,) = rep["runs"]
    # the peer script (../shared/peers/expert_polars.py) runs where it is beside the repository
    assert set(run["results"]) == set(bench.ALL) - (set() if bench.PEER.is_file() else {"peer"})
    for r in run["results"].values():
        assert r["wall_s"] > 0 and r["lines_per_s"] > 0 and r["rss_mib"] > 0
        assert r["x_grep"] > 0
        assert (r["x_peer"] > 0 and r["x_peer_cpu"] > 0) if bench.PEER.is_file() else r["x_peer"] is None
    assert (rep["machine"]["cores_used"], rep["machine"]["pinned"]) == (1, "taskset -c 0-0")
    assert len(rep["loadavg_at_end"]) == 3
    assert run["results"]["diagnose_dir"].get("initiating_ok") is True
    assert run["results"]["diagnose_parquet"].get("initiating_ok") is True
    (scale,) = rep["diag_scale"]
    assert scale["ranks"] == 128 and scale["rows"] > 0 and scale["diagnose_s"] > 0
    assert "timeline" in p.stdout and "grep" in p.stdout
    assert run["results"]["ingest"]["us_per_line"] > 0 and "us CPU per line" in p.stdout


def test_bench_app_workload_in_another_logging_format(tmp_path: Path) -> None:
    """``--workloads app-hf``: the application job with its logging lines in the HF example scripts' format; the
    diagnosis names the rank the generator made fail (its OOM traceback)."""
    out = tmp_path / "bench.json"
    p = _bench(
        *["--quick", "--workloads", "app-hf", "--only", "grep,timeline,diagnose_dir"],
        *["--json", str(out), "--work", str(tmp_path / "w")],
    )
    assert p.returncode == 0, p.stderr[-3000:]
    (run,) = json.loads(out.read_text())["runs"]
    assert run["workload"] == "app-hf" and run["lines"] > 16 * 300
    assert set(run["results"]) == {"grep", "timeline", "diagnose_dir"}
    assert run["results"]["diagnose_dir"].get("initiating_ok") is True
    bad = _bench("--quick", "--workloads", "app-xml", timeout=60)
    assert bad.returncode == 2 and "unknown ['app-xml']" in bad.stderr
