"""Shared paths and settings for the tests."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "fixtures" / "cases"
#: The drawing settings of the property tests: reproducible, no stored examples, 40 examples unless
#: ``RANKSCOPE_HYPOTHESIS_EXAMPLES`` says how many.
DRAWN = settings(
    database=None,
    derandomize=True,
    max_examples=int(os.environ.get("RANKSCOPE_HYPOTHESIS_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SHARED_REAL = REPO.parent / "shared" / "real-logs"

#: Real logs from real failed jobs (copied from shared/real-logs into the corpus).
REAL_CASES = sorted(p for p in CASES.iterdir() if p.name.startswith(("gloo-", "public-")))

#: The verdict fields a streamed table split into batches must keep (the whole JSON also holds event ids and
#: stamp qualities that the batches assign on their own).
#: A user signature file (``--signatures``) of one signature: ``.format(id=..., match=<TOML of its rule>)``.
USER_SIGNATURE = """
[[signature]]
id = "{id}"
title = "t"
layer = "c10d"
meaning = "m"
root_cause = "r"
fix = "f"
verify = "v"
confirm = ["c"]
related = []
references = []
[signature.match]
{match}
"""

VERDICT_KEYS = [
    "initiating_ranks",
    "collateral_ranks",
    "clean_ranks",
    "missing_ranks",
    "failure_kind",
    "world_size",
    "ranks_seen",
]


@pytest.fixture(scope="session")
def cases_dir() -> Path:
    return CASES


def run_cli(
    args: list[object], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """Run the CLI in-process the way the console script does; return (exit code, stdout, stderr)."""
    from correlator import cli

    monkeypatch.setattr(sys, "argv", ["rankscope", *map(str, args)])
    code = 0
    try:
        cli.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def small_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated 8-rank torchrun job, ~300 lines per rank, 3 nodes (``benchmarks/generate.py``, seed 7)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from generate import generate

    out = tmp_path_factory.mktemp("gen") / "logs"
    generate(out, ranks=8, lines=300, seed=7)
    return out


def late_configuration(dst: Path) -> Path:
    """cap-07 (rank 3 builds its model with ``hidden=48``, the others 32; gloo's size check fails on rank 2;
    the only evidence for rank 3 is its configuration line, ``plain model hidden=48 … params=1012``) with 20
    lines of the script before each rank's configuration line and 80 after it, in its stdout and in the
    tee'd console (launcher.log): the line is neither among a rank's first ``APP_HEAD`` application lines
    nor among its last ``APP_TAIL``, as in a script that logs its setup at length."""
    shutil.copytree(CASES / "cap-07-shape-divergence-plain" / "logs", dst)
    conf = re.compile(r"^((?:\[default\d\]:)?\S+ \S+ INFO )\[trainer\] rank=(\d) step=- plain model")
    for f in [*dst.rglob("stdout.log"), dst / "launcher.log"]:
        out: list[str] = []
        for line in f.read_text().splitlines():
            m = conf.match(line)
            if m:
                head, r = m[1], m[2]
                out += [f"{head}[data] rank={r} step=- indexing shard {k} of 20" for k in range(20)]
                out.append(line)
                out += [f"{head}[data] rank={r} step=- prefetched batch {k}" for k in range(80)]
            else:
                out.append(line)
        f.write_text("\n".join(out) + "\n")
    return dst
