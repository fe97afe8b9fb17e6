"""Progress callbacks of ``ingest``: one per file read, then one per phase after reading (issue #13 item 5)."""

from __future__ import annotations

import sys
from pathlib import Path

from correlator.discover import Source
from correlator.ingest import PHASES, ingest
from tests.conftest import CASES


def test_progress_per_file_and_each_phase_in_order(tmp_path: Path) -> None:
    sys.path.insert(0, str(CASES.parent.parent / "benchmarks"))
    from generate import generate

    generate(tmp_path / "job", ranks=6, lines=50, seed=2)
    files = sorted(p for p in (tmp_path / "job").rglob("*") if p.is_file())
    read: list[Source] = []
    found: list[list[Source]] = []
    phases: list[str] = []
    res = ingest(tmp_path / "job", progress=read.append, on_sources=found.append, on_phase=phases.append)
    assert len(found) == 1 and len(found[0]) == len(files)
    assert sorted(s.path for s in read) == files  # each file once
    assert phases == list(PHASES)
    assert res.table.height > 0
