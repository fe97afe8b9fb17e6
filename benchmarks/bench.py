"""Benchmark rankscope against two baselines on the same generated log tree.

``uv run python benchmarks/bench.py`` (defaults: the target size, 256 ranks x 20,000 lines, then a
scaling table at 64 / 256 / 1,024 ranks). Every command runs as a child process, timed by wall clock,
with its peak RSS read from ``/usr/bin/time -f %M`` (else ``getrusage(RUSAGE_CHILDREN)``):

- ``rankscope timeline DIR -o x.parquet`` (the full event table) and ``rankscope diagnose DIR``;
- ``rankscope timeline --streaming`` equivalent (``correlator.streaming.stream_ingest``);
- ``grep -rhoE 'opCount [0-9a-f]+' DIR`` (one field, no structure: the speed floor of a text tool);
- a hand-written per-line Python loop: ``re`` over every line of every file, extracting the same NCCL COLL
  fields (op, opCount, count, comm, nranks) and the progress step.

Options: ``--ranks 256 --lines 20000`` (main run), ``--scale 64,256,1024`` and ``--scale-bytes`` (input
size per scaling point, default 200 MB: lines per rank are scaled down as ranks go up), ``--work DIR``
(where data is generated, default a temp dir; removed afterwards unless ``--keep``), ``--quick`` (a tiny
smoke run), ``--json FILE`` (write the measurements).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from generate import generate

_COLL_RE = re.compile(r"NCCL INFO (?P<op>[A-Za-z]+): opCount (?P<seq>[0-9a-f]+) sendbuff \S+ recvbuff \S+ "
                      r"count (?P<count>\d+) datatype \d+ op \d+ root -?\d+ comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<n>\d+)\]")
_STEP_RE = re.compile(r"\brank=(?P<rank>\d+) step=(?P<step>\d+)")


def pyloop(root: str) -> int:
    """The baseline a person writes first: open every file, regex every line (the fields rankscope extracts)."""
    rows: list[tuple] = []
    for dirpath, _dirs, files in os.walk(root):
        for fn in files:
            with open(os.path.join(dirpath, fn), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    m = _COLL_RE.search(line)
                    if m:
                        rows.append((fn, m["op"], int(m["seq"], 16), int(m["count"]), m["comm"], int(m["n"])))
                        continue
                    m = _STEP_RE.search(line)
                    if m:
                        rows.append((fn, "step", int(m["step"]), int(m["rank"]), None, None))
    return len(rows)


def _stream_cmd(root: str, out: str) -> int:
    from correlator.streaming import stream_ingest

    _table, summary = stream_ingest(root, out)
    return int(summary["rows"])  # type: ignore[arg-type]


def _time_child(cmd: list[str], stdout_path: str | None = None) -> dict[str, float]:
    """Run ``cmd``; return wall seconds and peak RSS (MiB) of the child."""
    gnu_time = shutil.which("time") if os.path.exists("/usr/bin/time") else None
    fd, rss_file = tempfile.mkstemp(prefix="rss")
    os.close(fd)
    full = ["/usr/bin/time", "-f", "%M", "-o", rss_file, *cmd] if gnu_time else cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(stdout_path or os.devnull, "w") as out:
        t0 = time.perf_counter()
        p = subprocess.run(full, stdout=out, stderr=subprocess.PIPE, cwd=REPO, text=True, check=False)
        wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    rss_kib: float
    try:
        rss_kib = float(Path(rss_file).read_text().split()[-1]) if gnu_time else 0.0
    except (ValueError, IndexError):
        rss_kib = 0.0
    finally:
        os.unlink(rss_file)
    if not rss_kib:  # getrusage keeps the max over all children: only meaningful if it grew
        rss_kib = float(max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
    return {"wall_s": wall, "rss_mib": rss_kib / 1024}


def measure(root: str, info: dict[str, object], which: list[str], work: str) -> dict[str, dict[str, float]]:
    py = sys.executable
    nbytes = int(info["bytes"])  # type: ignore[arg-type]
    nlines = int(info["lines"])  # type: ignore[arg-type]
    cmds = {
        "timeline": [py, "-m", "correlator", "timeline", root, "-o", os.path.join(work, "t.parquet"), "-q"],
        "diagnose": [py, "-m", "correlator", "diagnose", root, "--format", "json", "-q"],
        "streaming": [py, str(HERE / "bench.py"), "--_stream", root, os.path.join(work, "s.parquet")],
        "grep": ["grep", "-rhoE", "opCount [0-9a-f]+", root],
        "pyloop": [py, str(HERE / "bench.py"), "--_pyloop", root],
    }
    res: dict[str, dict[str, float]] = {}
    for name in which:
        r = _time_child(cmds[name], os.path.join(work, f"{name}.out"))
        r["loadavg_1m"] = os.getloadavg()[0]
        r["lines_per_s"] = nlines / r["wall_s"]
        r["mb_per_s"] = nbytes / 1e6 / r["wall_s"]
        res[name] = r
        print(f"  {name:<10} {r['wall_s']:8.2f} s  {r['lines_per_s'] / 1e3:9.1f} K lines/s  {r['mb_per_s']:8.1f} MB/s  "
              f"peak RSS {r['rss_mib']:8.0f} MiB  (load {r['loadavg_1m']:.1f})", flush=True)
    if "diagnose" in res:
        try:
            d = json.loads(Path(work, "diagnose.out").read_text())
            res["diagnose"]["initiating_ok"] = float(d.get("initiating_ranks") == [info["culprit"]])
            print(f"  diagnose says initiating {d.get('initiating_ranks')} ({d.get('failure_kind')}); "
                  f"culprit {info['culprit']}", flush=True)
        except (OSError, ValueError):
            pass
    return res


def machine() -> dict[str, object]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    import polars as pl

    return {"cpu": cpu, "cores": os.cpu_count(), "mem_mib": mem, "python": platform.python_version(),
            "polars": pl.__version__, "os": platform.platform()}


def _ratios(r: dict[str, dict[str, float]]) -> None:
    if "timeline" not in r:
        return
    tl = r["timeline"]["wall_s"]
    parts = []
    if "grep" in r:
        parts.append(f"timeline / grep wall = {tl / r['grep']['wall_s']:.2f}x")
    if "pyloop" in r:
        parts.append(f"timeline speed-up over the per-line Python loop = {r['pyloop']['wall_s'] / tl:.3f}x")
    if "streaming" in r and "grep" in r:
        parts.append(f"streaming / grep wall = {r['streaming']['wall_s'] / r['grep']['wall_s']:.2f}x")
    print("  " + "; ".join(parts), flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_pyloop"]:
        print(pyloop(argv[1]))
        return 0
    if argv[:1] == ["--_stream"]:
        print(_stream_cmd(argv[1], argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--scale", default="64,256,1024", help="ranks of the scaling table ('' to skip)")
    ap.add_argument("--scale-bytes", type=float, default=200e6, help="input bytes per scaling point")
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny smoke run (16 ranks x 300 lines, no scaling)")
    ap.add_argument("--only", default="timeline,diagnose,streaming,grep,pyloop")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.quick:
        a.ranks, a.lines, a.scale = 16, 300, ""
    which = [w for w in a.only.split(",") if w]
    work = a.work or tempfile.mkdtemp(prefix="rankscope-bench-")
    os.makedirs(work, exist_ok=True)
    report: dict[str, object] = {"machine": machine(), "runs": []}
    print("machine:", json.dumps(report["machine"]), flush=True)
    try:
        points = [(a.ranks, a.lines, which)]
        for s in [int(x) for x in a.scale.split(",") if x]:
            # ~200 bytes per line: lines per rank so the tree is about --scale-bytes.
            lines = max(200, int(a.scale_bytes / 200 / s))
            points.append((s, lines, [w for w in which if w in ("timeline", "diagnose", "streaming", "grep")]))
        for ranks, lines, what in points:
            data = os.path.join(work, f"logs-{ranks}x{lines}")
            if not os.path.exists(data):
                info = generate(data, ranks, lines, seed=0)
                Path(data + ".json").write_text(json.dumps(info))
            else:
                info = json.loads(Path(data + ".json").read_text())
            print(f"\n{ranks} ranks x ~{lines} lines: {info['lines']:,} lines, {int(info['bytes']) / 1e6:,.0f} MB, "
                  f"{info['files']} files", flush=True)
            r = measure(data, info, what, work)
            _ratios(r)
            report["runs"].append({"ranks": ranks, "lines_per_rank": lines, "lines": info["lines"],  # type: ignore[union-attr]
                                   "bytes": info["bytes"], "results": r})
            if not a.keep:
                shutil.rmtree(data, ignore_errors=True)
    finally:
        if not a.keep and not a.work:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
