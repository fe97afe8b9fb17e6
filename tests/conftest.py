"""Shared paths for the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "fixtures" / "cases"
SHARED_REAL = REPO.parent / "shared" / "real-logs"

#: Real logs from real failed jobs (copied from shared/real-logs into the corpus).
REAL_CASES = sorted(p for p in CASES.iterdir() if p.name.startswith(("gloo-", "public-")))


@pytest.fixture(scope="session")
def cases_dir() -> Path:
    return CASES
