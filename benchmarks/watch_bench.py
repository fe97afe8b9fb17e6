"""Per-pass cost of ``rankscope watch`` against the bytes appended since the last pass.

``uv run python benchmarks/watch_bench.py`` (defaults: 64 ranks, 8 per node, 40 NCCL COLL lines per rank
per pass at 1x, then 4x and 16x; 6 timed passes per point). A temp tree shaped like a ``torchrun --log-dir``
of a NCCL job (``node-NNNN/torchrun_logs/<run>/attempt_0/<local_rank>/stdout.log``, line shapes as
``benchmarks/generate.py`` writes them: the NCCL_DEBUG=INFO init banner, then ``NCCL_DEBUG_SUBSYS=COLL``
lines ``AllReduce: opCount N sendbuff … comm 0x… [nranks=64]`` and one progress line per step) is followed
by one :class:`correlator.watch.Watcher`. Before every timed pass each rank's file gets ``k`` new lines
(untimed); the pass is timed by ``time.process_time()`` (CPU of every thread of this process: polars runs
its own threads), with the watcher's own split (read / parse / table = store + identity / diagnose).

Reported: CPU seconds per pass, CPU per MB appended, a least-squares line ``cpu = a + b * MB`` over all
points, and what that line means for following a job at full speed: the largest append rate that keeps
one pass per ``--interval`` under one core (``(interval - a) / b`` MB per interval). ``--json FILE`` writes
the measurements. CPU time is used rather than wall time because the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from correlator.watch import Watcher

_OPS = [
    ("AllReduce", 25165824, 7),
    ("AllGather", 4194304, 7),
    ("ReduceScatter", 4194304, 7),
    ("Broadcast", 1024, 9),
]


class Job:
    """A synthetic running job: ``ranks`` files that grow by ``append(k)`` lines each."""

    def __init__(self, root: Path, ranks: int, per_node: int = 8, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.files: list[Path] = []
        self.tails: list[tuple[str, str]] = []
        self.seq = [0] * ranks
        self.step = 0
        comm_id = f"0x{rng.getrandbits(64):016x}"
        for r in range(ranks):
            node, lr = divmod(r, per_node)
            host, pid = f"node-{node:04d}", 40000 + r
            d = root / host / "torchrun_logs" / "4711_abcdefgh" / "attempt_0" / str(lr)
            d.mkdir(parents=True, exist_ok=True)
            comm = f"0x55{rng.getrandbits(40):010x}"
            pfx = f"{host}:{pid}:{pid} [{lr}] NCCL INFO "
            tpfx = f"{host}:{pid}:{pid + 7} [{lr}] NCCL INFO "
            banner = [
                (
                    f"2026-11-29 23:08:30,{lr:03d} INFO [trainer] rank={r} step=- starting worker pid={pid} local_rank={lr} "
                    f"group_rank={node} world_size={ranks} master=node-0000:29500 attempt=0 torch=2.5.1+cu124"
                ),
                pfx + f"Bootstrap : Using eth0:192.0.2.{10 + node}<0>",
                pfx + "NCCL version 2.21.5+cuda12.4",
                tpfx
                + f"ncclCommInitRank comm {comm} rank {r} nranks {ranks} cudaDev {lr} nvmlDev {lr} busId "
                f"{0x18 + 0x10 * lr:x}000 commId {comm_id} - Init START",
                tpfx
                + f"comm {comm} rank {r} nRanks {ranks} nNodes {ranks // per_node} localRanks {per_node} "
                f"localRank {lr} MNNVL 0",
                tpfx
                + f"ncclCommInitRank comm {comm} rank {r} nranks {ranks} cudaDev {lr} nvmlDev {lr} busId "
                f"{0x18 + 0x10 * lr:x}000 commId {comm_id} - Init COMPLETE",
            ]
            f = d / "stdout.log"
            f.write_text("\n".join(banner) + "\n")
            self.files.append(f)
            buf = f"0x7f{rng.getrandbits(36):09x}000"
            self.tails.append(
                (
                    pfx,
                    (
                        f" sendbuff {buf} recvbuff {buf} count {{n}} datatype {{dt}} op 0 root 0 comm {comm} "
                        f"[nranks={ranks}] stream 0x55{rng.getrandbits(40):010x}"
                    ),
                )
            )

    def append(self, k: int) -> int:
        """``k`` new lines on every rank (one progress line per 40 collectives); returns the bytes written."""
        total = 0
        for r, f in enumerate(self.files):
            pfx, tail = self.tails[r]
            out = []
            for _ in range(k):
                s = self.seq[r]
                if s % 40 == 39:
                    out.append(
                        f"2026-11-29 23:{10 + s // 2400 % 50:02d}:{s // 40 % 60:02d},000 INFO [trainer] rank={r} "
                        f"step={s // 40} loss=2.3456 avg_loss=2.3501 lr=0.0003 step_time=1.650s"
                    )
                op, n, dtp = _OPS[s % len(_OPS)]
                out.append(f"{pfx}{op}: opCount {s:x}" + tail.format(n=n, dt=dtp))
                self.seq[r] = s + 1
            data = ("\n".join(out) + "\n").encode()
            with open(f, "ab") as fh:
                fh.write(data)
            total += len(data)
        return total


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--lines", type=int, default=40, help="lines per rank per pass at 1x")
    ap.add_argument("--scales", default="1,4,16,1", help="the last 1x: same cost after more history")
    ap.add_argument("--passes", type=int, default=6, help="timed passes per point")
    ap.add_argument(
        "--interval", type=float, default=2.0, help="watch --interval for the full-speed estimate"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="watch-bench-"))
    try:
        job = Job(root, args.ranks)
        w = Watcher(root, stall=1e9)
        w.poll()
        for _ in range(3):  # warm up: the store reaches its steady size
            job.append(args.lines)
            w.poll()
        points = []
        scales = [0] + [int(x) for x in args.scales.split(",")]
        for scale in scales:
            cpu, nbytes, stages = [], [], []
            for _ in range(args.passes):
                b = job.append(args.lines * scale) if scale else 0
                c0 = time.process_time()
                w.poll()
                cpu.append(time.process_time() - c0)
                nbytes.append(b)
                stages.append(dict(w.timings))
            med = statistics.median(cpu)
            p = {
                "scale": scale,
                "lines_per_pass": args.lines * scale * args.ranks,
                "bytes_per_pass": statistics.fmean(nbytes),
                "cpu_s_median": round(med, 4),
                "cpu_s_min": round(min(cpu), 4),
                "cpu_s_max": round(max(cpu), 4),
                "stages_median": {k: round(statistics.median(s[k] for s in stages), 4) for k in stages[0]},
                "store_rows": w.store.height if w.store is not None else 0,
                "mb_read_so_far": round(w.bytes_read / 1e6, 2),
            }
            points.append(p)
            mb = p["bytes_per_pass"] / 1e6
            print(
                f"{scale:>3}x: {p['lines_per_pass']:>7} lines {mb:7.2f} MB per pass -> CPU {med:6.3f} s "
                f"(min {min(cpu):.3f}, max {max(cpu):.3f}); {('%.3f s/MB' % (med / mb)) if mb else 'idle pass'}; "
                f"stages {p['stages_median']}; store {p['store_rows']} rows; {p['mb_read_so_far']} MB read so far",
                flush=True,
            )
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (shared machine)")
        xs = [p["bytes_per_pass"] / 1e6 for p in points]
        ys = [p["cpu_s_median"] for p in points]
        a, b = fit(xs, ys)
        rate_mb = (args.interval - a) / b / args.interval
        line_bytes = points[-1]["bytes_per_pass"] / max(points[-1]["lines_per_pass"], 1)
        per_rank = rate_mb * 1e6 / line_bytes / args.ranks
        print(
            f"fit: cpu = {a:.3f} s + {b:.3f} s/MB; one core keeps up with {rate_mb:.2f} MB/s "
            f"= {rate_mb * 1e6 / line_bytes:,.0f} lines/s = {per_rank:,.0f} NCCL COLL lines/s per rank "
            f"({args.ranks} ranks, --interval {args.interval:g}s)"
        )
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "ranks": args.ranks,
                        "interval_s": args.interval,
                        "points": points,
                        "fit": {"a_s": a, "b_s_per_mb": b},
                        "one_core_mb_per_s": rate_mb,
                        "one_core_lines_per_s_per_rank": per_rank,
                        "python": platform.python_version(),
                        "machine": platform.machine(),
                    },
                    indent=2,
                )
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
