"""Wall time of rankscope on huge trees (issue 35 item 3): many tiny files, many distinct ranks.

``uv run python benchmarks/tree_bench.py --base /tmp/base --data /tmp/treebench``

``--base``: a copy of the baseline's ``correlator`` and ``parsers`` (``git archive <commit> correlator parsers
| tar -x -C /tmp/base``), run in the same session, one command after the other, so each figure is also given
as a ratio to the baseline's. Inputs are written by ``generate.py`` (``--shape files`` / ``--shape ranks``)
under ``--data`` once. A run past ``--timeout`` seconds is stopped and shown as ``>timeout``. Prints one
JSON object per run, then a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from generate import generate_many_files, generate_many_ranks


def _run(cwd: Path, args: list[str], timeout: int) -> tuple[float | None, int | None, float]:
    """(wall seconds or None past ``timeout``, exit code, CPU seconds user + system of the child)."""
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "correlator", *args],
            check=False,
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(cwd)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None, None, float("nan")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return time.perf_counter() - t, p.returncode, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--files", default="20000,200000", help="tree sizes (tiny torchrun files)")
    ap.add_argument("--ranks", default="50000,1000000", help="distinct ranks named in one log")
    ap.add_argument("--commands", default="diagnose,timeline")
    ap.add_argument("--timeout", type=int, default=150)
    ap.add_argument("--skip-base-above", type=int, default=10**9, help="no baseline run past this size")
    a = ap.parse_args(argv)
    inputs = []
    for n in [int(x) for x in a.files.split(",") if x]:
        d = a.data / f"files-{n}"
        if not d.exists():
            generate_many_files(d, n)
        inputs.append((f"{n:,} files", d, n))
    for n in [int(x) for x in a.ranks.split(",") if x]:
        d = a.data / f"ranks-{n}"
        if not d.exists():
            generate_many_ranks(d, n)
        inputs.append((f"{n:,} ranks", d, n))
    rows = []
    out = a.data / "out"
    out.mkdir(exist_ok=True)
    for label, d, n in inputs:
        for cmd in a.commands.split(","):
            args = (
                [cmd, str(d), "-q"]
                if cmd != "timeline"
                else [cmd, str(d), "-o", str(out / "t.parquet"), "-q"]
            )
            head, rc, hcpu = _run(REPO, args, a.timeout)
            skip = n > a.skip_base_above
            base, brc, bcpu = (None, None, float("nan")) if skip else _run(a.base, args, a.timeout)
            rec = {
                "head_cpu_s": round(hcpu, 1),
                "base_cpu_s": round(bcpu, 1),
                "input": label,
                "command": cmd,
                "head_s": head,
                "head_rc": rc,
                "base_s": base,
                "base_rc": brc,
                "per_item_ms": None if head is None else round(head / n * 1000, 3),
                "load": round(os.getloadavg()[0], 1),
            }
            print(json.dumps(rec), flush=True)
            rows.append(rec)

    def fmt(s: float | None, skipped: bool) -> str:
        return "not run" if skipped else f">{a.timeout}" if s is None else f"{s:.1f}"

    print(
        "\n| input | command | baseline s | head s | head / baseline | baseline CPU s | head CPU s | "
        "head ms per file or rank | load (1 min) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r, (_l, _d, n) in zip(rows, [i for i in inputs for _ in a.commands.split(",")]):
        skipped = n > a.skip_base_above
        h, b = r["head_s"], r["base_s"]
        ratio = "—" if h is None or skipped else f"<{h / a.timeout:.2f}" if b is None else f"{h / b:.2f}"
        print(
            f"| {r['input']} | `{r['command']}` | {fmt(b, skipped)} | {fmt(h, False)} | {ratio} | "
            f"{r['base_cpu_s']} | {r['head_cpu_s']} | "
            f"{r['per_item_ms'] if r['per_item_ms'] is not None else '—'} | {r['load']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
