"""Benchmark rankscope against text-tool baselines on the same generated log tree.

``uv run python benchmarks/bench.py`` (defaults: 16, 64 and 256 ranks x 20,000 lines, 3 rounds). In ONE
driver process, per size, the commands run one after the other and the rounds alternate (round 1: every
command once, round 2: every command again, ...), so a load change on a shared machine hits all commands
alike; the table gives medians. Every command is a child process, timed by wall clock, its peak RSS from
``/usr/bin/time -f %M`` (else ``getrusage(RUSAGE_CHILDREN)``):

- ``cat`` of every file (the I/O floor) and ``LC_ALL=C grep -rhoE 'opCount [0-9a-f]+'`` (one field, no
  structure: the speed floor of a text tool);
- ``pyloop``: a per-line Python ``re`` loop extracting the NCCL COLL fields and the progress step;
- ``peer``: ``../shared/peers/expert_polars.py DIR OUT.parquet`` (beside the repository; skipped with a
  note when absent), what an engineer who knows polars writes in an afternoon: the "what would a user pick
  instead" yardstick for ``timeline`` (issue #32 item 5);
- the product: ``rankscope timeline DIR -o t.parquet``, ``rankscope diagnose DIR`` (streamed or read whole
  as a user's run decides), ``rankscope diagnose t.parquet`` (diagnosis from the written table), ``rankscope
  events DIR --faults`` (``events``) and streaming ingest (``correlator.streaming.stream_ingest`` to parquet);
- ``ingest``: one in-process ``correlator.ingest.ingest`` after a warm-up one, its CPU per line read by the
  child itself (no start-up, no write): the parse's cost per line, the issue's "generic path <= 3 us of CPU
  per non-COLL line" on the application workloads.

Printed per command: median wall s, median CPU s (user + system of the child), lines/s, MB/s, median peak RSS,
RSS / input bytes, wall / grep wall, and wall and CPU / the peer's (each ratio of medians).
``--cores N`` runs every command under ``taskset -c 0-(N-1)`` (the machine's core count and the 1-minute load
at the start, at each run and at the end are recorded in the JSON and printed).
``--diag-scale 1024,4096,16384`` adds diagnosis on synthetic reduced tables (the rows streaming keeps for
diagnosis) of that many ranks, each in its own child process: time and peak RSS vs ranks.

Options: ``--sizes 16,64,256`` ``--lines 20000`` ``--rounds 3`` ``--only cat,grep,...`` ``--work DIR``
(where data is generated; kept with ``--keep``), ``--quick`` (tiny smoke run), ``--json FILE``, ``--ref DIR``
(another checkout with its own ``.venv``: its ``diagnose DIR``, ``timeline`` and ``plot`` run too, as
``diagnose_dir_ref``, ``timeline_ref`` and ``plot_ref``, alternating).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from generate import LOG_FORMATS, generate, generate_app

_COLL_RE = re.compile(
    r"NCCL INFO (?P<op>[A-Za-z]+): opCount (?P<seq>[0-9a-f]+) sendbuff \S+ recvbuff \S+ "
    r"count (?P<count>\d+) datatype \d+ op \d+ root -?\d+ comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<n>\d+)\]"
)
_STEP_RE = re.compile(r"\brank=(?P<rank>\d+) step=(?P<step>\d+)")
ALL = [
    "cat",
    "grep",
    "pyloop",
    "peer",
    "timeline",
    "diagnose_dir",
    "diagnose_parquet",
    "events",
    "plot",
    "streaming",
    "ingest",
]
#: The peer script (``../shared/peers/`` beside the repository).
PEER = REPO.parent / "shared" / "peers" / "expert_polars.py"
#: ``--cores N``: the prefix every command runs under (empty: all cores).
PIN: list[str] = []


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


def _ingest_cmd(root: str) -> dict[str, float]:
    """CPU of one in-process ``correlator.ingest.ingest`` of ``root`` (``time.process_time``, every thread of
    the process), after one warm-up ingest (page cache, first-call probes): the parse's cost per line without
    the start-up and the table's write (issue #32: the generic path <= 3 us of CPU per non-COLL line)."""
    from correlator.ingest import ingest

    ingest(root)
    c = time.process_time()
    res = ingest(root)
    cpu = time.process_time() - c
    lines = int(res.summary()["lines_read"])  # type: ignore[call-overload]
    return {"cpu_s": cpu, "lines": lines, "us_per_line": 1e6 * cpu / max(lines, 1)}


def synthetic_reduced(ranks: int, seed: int = 0) -> pl.DataFrame:
    """A reduced table (what streaming keeps for diagnosis) for ``ranks`` ranks: a generated 64-rank job's
    reduced table tiled ``ranks / 64`` times (ranks, hosts, paths and pids shifted; one world). Every tile has
    its own failing rank, so the verdict is not scored; this measures diagnosis cost vs ranks."""
    import polars as pl

    from correlator.ingest import ingest
    from correlator.streaming import reduce_for_diagnosis

    base_ranks = min(64, ranks)
    tmp = tempfile.mkdtemp(prefix="rankscope-synth-")
    try:
        generate(os.path.join(tmp, "logs"), base_ranks, 200, seed=seed)
        base = reduce_for_diagnosis(ingest(os.path.join(tmp, "logs")).table)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    tiles = []
    for k in range(max(1, ranks // base_ranks)):
        tiles.append(
            base.with_columns(
                (pl.col("rank") + k * base_ranks).alias("rank"),
                (pl.col("host") + f"-t{k}").alias("host"),
                (pl.lit(f"t{k}/") + pl.col("path")).alias("path"),
                (pl.col("pid") + k * 1_000_000).alias("pid"),
                pl.when(pl.col("world_size").is_not_null())
                .then(pl.lit(ranks, dtype=pl.Int32))
                .alias("world_size"),
            )
        )
    t = pl.concat(tiles).sort("path", "line")
    return t.with_columns(pl.int_range(0, t.height, dtype=pl.Int64).alias("event_id"))


def _diag_scale_cmd(ranks: int) -> dict[str, float]:
    from correlator.diagnose import diagnose

    t = synthetic_reduced(ranks)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    d = diagnose(t)
    wall = time.perf_counter() - t0
    return {
        "ranks": ranks,
        "rows": t.height,
        "diagnose_s": wall,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_mib": before / 1024,
        "initiating": len(d.initiating_ranks),
    }


#: The children's environment: as a user's, with bytecode caching on. A machine that sets
#: PYTHONDONTWRITEBYTECODE (this one does) would otherwise compile the ~750 modules of every start anew
#: (0.6-0.8 s per run), which no second run of an ordinary install pays; :func:`warm_bytecode` fills the cache.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def warm_bytecode(pythons: list[str]) -> None:
    """One untimed ``python -m correlator --help`` per interpreter, so the timed runs start as a second run does."""
    for py in pythons:
        cwd = REF if REF is not None and py.startswith(str(REF)) else REPO
        subprocess.run(
            [py, "-m", "correlator", "--help"], cwd=cwd, env=CHILD_ENV, capture_output=True, check=False
        )


def _time_child(cmd: list[str], stdout_path: str | None = None, cwd: Path | str = REPO) -> dict[str, float]:
    """Run ``cmd`` in ``cwd``; return wall seconds and peak RSS (MiB) of the child."""
    gnu_time = os.path.exists("/usr/bin/time")
    fd, rss_file = tempfile.mkstemp(prefix="rss")
    os.close(fd)
    full = ["/usr/bin/time", "-f", "%M %U %S", "-o", rss_file, *PIN, *cmd] if gnu_time else [*PIN, *cmd]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(stdout_path or os.devnull, "w") as out:
        t0 = time.perf_counter()
        p = subprocess.run(
            full, stdout=out, stderr=subprocess.PIPE, cwd=cwd, text=True, check=False, env=CHILD_ENV
        )
        wall = time.perf_counter() - t0
    # grep exits 1 when nothing matched: not a failure for a timing
    if p.returncode not in (0, 1) or (p.returncode == 1 and cmd[0] != "env"):
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    rss_kib = 0.0
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds (user + system) of the child: on a shared, loaded machine a steadier figure than wall.
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    try:
        fields = Path(rss_file).read_text().split() if gnu_time else []
        rss_kib = float(fields[-3]) if len(fields) >= 3 else 0.0
    except (ValueError, IndexError):
        rss_kib = 0.0
    finally:
        os.unlink(rss_file)
    if not rss_kib:  # getrusage keeps the max over all children: only meaningful if it grew
        rss_kib = float(max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
    return {"wall_s": wall, "cpu_s": cpu, "rss_mib": rss_kib / 1024, "loadavg_1m": os.getloadavg()[0]}


#: ``--ref DIR``: another checkout (with its own ``.venv``) whose ``diagnose DIR``, ``timeline`` and ``plot``
#: run as ``*_ref``, alternating with this checkout's commands (a before/after on the same data and load).
REF: Path | None = None


#: The application-heavy workloads and the logging format of their Python lines (``generate.py --shape app
#: --log-format``): ``app`` the default asctime format, ``app-hf``, ``app-deepspeed``, ``app-hydra`` the others,
#: ``app-tee`` the default format on each node's tee'd console (``app-torn``: one of each ten bars of a rank
#: torn, the next line glued to it), ``app-srun`` in the job's ``srun --label`` output.
APP_WORKLOADS = {
    "app": "asctime",
    **{f"app-{f}": f for f in LOG_FORMATS if f != "asctime"},
    "app-tee": "asctime",
    "app-torn": "asctime",
    "app-srun": "asctime",
}
#: Application-heavy workloads written as each node's ``torchrun --tee 3`` console (``generate.py --tee``) ...
TEE_WORKLOADS = {"app-tee", "app-torn"}
#: ... those with torn progress bars, one of each ten of a rank (``generate.py --torn 10``) ...
TORN_WORKLOADS = {"app-torn": 10}
#: ... and as the job's ``srun --label`` output (``generate.py --srun``).
SRUN_WORKLOADS = {"app-srun"}
#: ``grep``'s pattern per workload: one field of the lines that make up the bulk of it.
GREP_FIELD = {"coll": "opCount [0-9a-f]+", **{w: "step=[0-9]+" for w in APP_WORKLOADS}}


def commands(root: str, work: str, workload: str = "coll") -> dict[str, list[str]]:
    py = sys.executable
    tl = os.path.join(work, "t.parquet")
    ref = (
        {
            "diagnose_dir_ref": [
                str(REF / ".venv" / "bin" / "python"),
                *["-m", "correlator", "diagnose", root, "--format", "json", "-q"],
            ],
            "timeline_ref": [
                str(REF / ".venv" / "bin" / "python"),
                *["-m", "correlator", "timeline", root, "-o", os.path.join(work, "t-ref.parquet"), "-q"],
            ],
            "plot_ref": [
                str(REF / ".venv" / "bin" / "python"),
                *["-m", "correlator", "plot", root, "-o", os.path.join(work, "p-ref.html"), "-q"],
            ],
        }
        if REF is not None
        else {}
    )
    peer = {"peer": [py, str(PEER), root, os.path.join(work, "peer.parquet")]} if PEER.is_file() else {}
    return (
        ref
        | peer
        | {
            "cat": ["sh", "-c", 'find "$1" -type f -exec cat {} + > /dev/null', "sh", root],
            "grep": ["env", "LC_ALL=C", "grep", "-rhoE", GREP_FIELD[workload], root],
            "pyloop": [py, str(HERE / "bench.py"), "--_pyloop", root],
            "timeline": [py, "-m", "correlator", "timeline", root, "-o", tl, "-q"],
            # as a user runs it: streamed or read whole as ``diagnose`` decides (correlator.api.want_streaming)
            "diagnose_dir": [py, "-m", "correlator", "diagnose", root, "--format", "json", "-q"],
            "diagnose_parquet": [py, "-m", "correlator", "diagnose", tl, "--format", "json", "-q"],
            # the first faults in the report's time: every row's time, a few rows printed
            "events": [py, "-m", "correlator", "events", root, "--faults", "--format", "json", "-q"],
            # the page of figures as a user asks for it (small logs: every line, else what diagnosis reads)
            "plot": [py, "-m", "correlator", "plot", root, "-o", os.path.join(work, "p.html"), "-q"],
            "streaming": [py, str(HERE / "bench.py"), "--_stream", root, os.path.join(work, "s.parquet")],
            "ingest": [py, str(HERE / "bench.py"), "--_ingest", root],
        }
    )


def measure(
    root: str, info: dict[str, object], which: list[str], work: str, rounds: int, workload: str = "coll"
) -> dict[str, dict]:
    nbytes = int(info["bytes"])  # type: ignore[arg-type]
    nlines = int(info["lines"])  # type: ignore[arg-type]
    cmds = commands(root, work, workload)
    warm_bytecode(sorted({c[0] for c in cmds.values() if c[0].endswith("python") or c[0] == sys.executable}))
    which = [w for w in which if w in cmds]  # (the peer only where its script is)
    runs: dict[str, list[dict[str, float]]] = {w: [] for w in which}
    for rnd in range(rounds):
        for name in which:
            if name == "diagnose_parquet" and not os.path.exists(os.path.join(work, "t.parquet")):
                continue
            cwd = REF if name.endswith("_ref") and REF is not None else REPO
            r = _time_child(cmds[name], os.path.join(work, f"{name}.out"), cwd)
            if name == "ingest":  # the child prints its own CPU per line
                try:
                    r["us_per_line"] = json.loads(Path(work, "ingest.out").read_text())["us_per_line"]
                except (OSError, ValueError, KeyError):
                    pass
            runs[name].append(r)
            print(
                f"  round {rnd + 1} {name:<17} {r['wall_s']:8.2f} s  cpu {r['cpu_s']:7.2f} s  "
                f"peak RSS {r['rss_mib']:8.0f} MiB  "
                f"(load {r['loadavg_1m']:.1f})",
                flush=True,
            )
    res: dict[str, dict] = {}
    for name, rs in runs.items():
        if not rs:
            continue
        wall = statistics.median(r["wall_s"] for r in rs)
        rss = statistics.median(r["rss_mib"] for r in rs)
        res[name] = {
            "wall_s": wall,
            "cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "rss_mib": rss,
            "rss_per_input": rss * 2**20 / nbytes,
            "lines_per_s": nlines / wall,
            "mb_per_s": nbytes / 1e6 / wall,
            "walls": [r["wall_s"] for r in rs],
            "loads": [r["loadavg_1m"] for r in rs],
        }
    g = res.get("grep", {}).get("wall_s")
    peer = res.get("peer", {})
    for r in res.values():
        r["x_grep"] = r["wall_s"] / g if g else None
        r["x_peer"] = r["wall_s"] / peer["wall_s"] if peer.get("wall_s") else None
        r["x_peer_cpu"] = r["cpu_s"] / peer["cpu_s"] if peer.get("cpu_s") else None
    if "ingest" in res:  # its own CPU per line, measured in the child (median of the rounds)
        got = [r["us_per_line"] for r in runs["ingest"] if "us_per_line" in r]
        if got:
            res["ingest"]["us_per_line"] = statistics.median(got)
    for name in ("diagnose_dir", "diagnose_dir_ref", "diagnose_parquet"):
        if name in res:
            try:
                d = json.loads(Path(work, f"{name}.out").read_text())
                res[name]["initiating_ok"] = d.get("initiating_ranks") == [info["culprit"]]
                res[name]["verdict"] = f"{d.get('initiating_ranks')} {d.get('failure_kind')}"
            except (OSError, ValueError):
                pass
    return res


def print_table(ranks: int, info: dict[str, object], res: dict[str, dict]) -> None:
    print(
        f"\n{ranks} ranks: {int(info['lines']):,} lines, {int(info['bytes']) / 1e6:,.0f} MB, {info['files']} files "
        f"(medians)",
        flush=True,
    )
    print(
        f"  {'command':<17} {'wall s':>8} {'cpu s':>7} {'K lines/s':>10} {'MB/s':>7} {'peak RSS MiB':>13} {'RSS/input':>9} "
        f"{'x grep':>7} {'x peer':>7} {'x peer cpu':>10}"
    )

    def ratio(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    for name, r in res.items():
        extra = f"  {r['verdict']}" if "verdict" in r else ""
        if "us_per_line" in r:
            extra += f"  in-process: {r['us_per_line']:.2f} us CPU per line"
        print(
            f"  {name:<17} {r['wall_s']:8.2f} {r['cpu_s']:7.2f} {r['lines_per_s'] / 1e3:10.1f} {r['mb_per_s']:7.1f} "
            f"{r['rss_mib']:13.0f} {r['rss_per_input']:9.2f} {ratio(r.get('x_grep')):>7} "
            f"{ratio(r.get('x_peer')):>7} {ratio(r.get('x_peer_cpu')):>10}{extra}",
            flush=True,
        )
    loads = [x for r in res.values() for x in r["loads"]]
    if loads:
        print(f"  1-minute load during the runs: {min(loads):.1f}-{max(loads):.1f}", flush=True)


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

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "cores_used": _cores_used(),
        "pinned": " ".join(PIN) or None,
        "bytecode": "cached (PYTHONDONTWRITEBYTECODE unset for the children, one untimed start first)",
        "mem_mib": mem,
        "python": platform.python_version(),
        "polars": pl.__version__,
        "os": platform.platform(),
        "loadavg_at_start": os.getloadavg(),
    }


def _cores_used() -> int:
    """The processors the commands may run on: the ``--cores`` pin, else this process's affinity."""
    if PIN:
        first, last = PIN[-1].split("-")
        return int(last) - int(first) + 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_pyloop"]:
        print(pyloop(argv[1]))
        return 0
    if argv[:1] == ["--_stream"]:
        print(_stream_cmd(argv[1], argv[2]))
        return 0
    if argv[:1] == ["--_ingest"]:
        print(json.dumps(_ingest_cmd(argv[1])))
        return 0
    if argv[:1] == ["--_diagscale"]:
        print(json.dumps(_diag_scale_cmd(int(argv[1]))))
        return 0
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", default="16,64,256", help="ranks per run, comma-separated")
    ap.add_argument("--lines", type=int, default=20000, help="lines per rank")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=",".join(ALL))
    ap.add_argument(
        "--diag-scale",
        default="",
        help="ranks for diagnosis on synthetic reduced tables, e.g. 1024,4096,16384",
    )
    ap.add_argument(
        "--workloads",
        default="coll",
        help="coll: the generator's COLL-heavy job; app: an application-heavy job (Python logging, warnings, "
        "tqdm, no NCCL line) in the plain attempt_0/<rank>/ layout (generate.py --shape app); app-hf, "
        "app-deepspeed, app-hydra: the same with its logging lines in that format; app-tee: the app job as each "
        "node's torchrun --tee 3 console (node-K/console.log, generate.py --tee); app-torn: the same with one of each "
        "ten progress bars of a rank torn, the next line glued to it (generate.py --torn 10); app-srun: as the job's srun "
        "--label output (slurm.out, generate.py --srun); comma-separated",
    )
    ap.add_argument(
        "--app-lines", type=int, default=0, help="lines per rank of the app workloads (0: --lines)"
    )
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny smoke run (16 ranks x 300 lines, 1 round)")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--ref",
        default=None,
        help="another checkout with a .venv: adds diagnose_dir_ref, timeline_ref and plot_ref (with --only, "
        "beside diagnose_dir, timeline and plot where it names them)",
    )
    ap.add_argument(
        "--cores", type=int, default=0, help="run every command under taskset -c 0-(N-1) (0: no pin)"
    )
    a = ap.parse_args(argv)
    global REF
    if a.cores:
        if not shutil.which("taskset"):
            ap.error("--cores needs taskset (util-linux)")
        if a.cores > (os.cpu_count() or 1):
            ap.error(f"--cores {a.cores}: this machine has {os.cpu_count()}")
        PIN[:] = ["taskset", "-c", f"0-{a.cores - 1}"]
    if a.ref:
        REF = Path(a.ref).resolve()
        ALL.extend(["diagnose_dir_ref", "timeline_ref", "plot_ref"])
    if a.quick:
        a.sizes, a.lines, a.rounds = "16", 300, 1
    which = [w for w in a.only.split(",") if w]
    if a.ref:  # --ref runs the other checkout's command beside each of ours that --only names
        which += [
            f"{w}_ref" for w in ("diagnose_dir", "timeline", "plot") if w in which and f"{w}_ref" not in which
        ]
    unknown = set(which) - set(ALL)
    if unknown:
        ap.error(f"--only: unknown {sorted(unknown)}; choose from {ALL}")
    bad = sorted({w for w in a.workloads.split(",") if w} - set(GREP_FIELD))
    if bad:
        ap.error(f"--workloads: unknown {bad}; choose from {sorted(GREP_FIELD)}")
    work = a.work or tempfile.mkdtemp(prefix="rankscope-bench-")
    os.makedirs(work, exist_ok=True)
    report: dict[str, object] = {"machine": machine(), "runs": [], "diag_scale": []}
    print("machine:", json.dumps(report["machine"]), flush=True)
    try:
        runs = [(w, int(x)) for w in a.workloads.split(",") if w for x in a.sizes.split(",") if x]
        for workload, ranks in runs:
            fmt = APP_WORKLOADS.get(workload)
            lines = a.app_lines or a.lines if fmt else a.lines
            data = os.path.join(work, f"logs-{workload}-{ranks}x{lines}")
            if not os.path.exists(data + ".json"):
                if fmt:
                    tee, srun = workload in TEE_WORKLOADS, workload in SRUN_WORKLOADS
                    torn = TORN_WORKLOADS.get(workload, 0)
                    info = generate_app(data, ranks, lines, seed=0, fmt=fmt, tee=tee, srun=srun, torn=torn)
                else:
                    info = generate(data, ranks, lines, seed=0)
                Path(data + ".json").write_text(json.dumps(info))
            else:
                info = json.loads(Path(data + ".json").read_text())
            print(
                f"\n{workload}: {ranks} ranks x ~{lines} lines: {info['lines']:,} lines, "
                f"{int(info['bytes']) / 1e6:,.0f} MB",
                flush=True,
            )
            res = measure(data, info, which, work, a.rounds, workload)
            print(f"workload {workload}", end="")
            print_table(ranks, info, res)
            report["runs"].append(
                {
                    "workload": workload,
                    "ranks": ranks,
                    "lines_per_rank": lines,
                    "lines": info["lines"],  # type: ignore[union-attr]
                    "bytes": info["bytes"],
                    "files": info["files"],
                    "results": res,
                }
            )
            if not a.keep:
                shutil.rmtree(data, ignore_errors=True)
                Path(data + ".json").unlink(missing_ok=True)
        for ranks in [int(x) for x in a.diag_scale.split(",") if x]:
            out = subprocess.run(
                [sys.executable, str(HERE / "bench.py"), "--_diagscale", str(ranks)],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            report["diag_scale"].append(r)  # type: ignore[union-attr]
            print(
                f"diagnose, synthetic reduced table, {ranks:>6} ranks ({r['rows']:,} rows): {r['diagnose_s']:.2f} s, "
                f"peak RSS {r['peak_rss_mib']:.0f} MiB (before diagnose {r['rss_before_mib']:.0f})",
                flush=True,
            )
    finally:
        if not a.keep and not a.work:
            shutil.rmtree(work, ignore_errors=True)
    report["loadavg_at_end"] = os.getloadavg()
    print(
        f"cores used {_cores_used()} of {os.cpu_count()}; load at end {report['loadavg_at_end']}", flush=True
    )
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
