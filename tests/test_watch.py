"""`rankscope watch`: the tail reader, a replayed captured job (hang and crash), the CLI, and a real live
torchrun job when the capture venv is present."""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import correlator
from correlator.cli import app
from correlator.tail import restart_line
from correlator.watch import Alert, Watcher, _Exec, parse_duration
from tests.conftest import late_configuration

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "fixtures" / "cases"
HANG = "cap-03-straggler-hang-plain"
CRASH = "cap-02-exception-before-collective-plain"


# ---------------------------------------------------------------- replay harness
def schedule(logs: Path) -> list[tuple[float, str, int, bytes]]:
    """Every physical line of the case as (seconds after the first stamp, path, line number, bytes).

    A line takes the time of the row (event) it belongs to; a row without a stamp of its own (a traceback in
    a per-rank stderr file) takes the earliest stamp of the same rank and kind elsewhere (its error.json,
    the launcher's tee copy), else the last stamp of the job. Times never go back within one file."""
    t = correlator.load(logs)
    t0, t1 = t["ts"].drop_nulls().min(), t["ts"].drop_nulls().max()
    if t0 is None:  # no stamp at all: everything at once
        t0 = t1 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        t = t.with_columns(pl.lit(t0).alias("ts"))
    key = pl.concat_str([pl.col("rank").cast(pl.String), pl.col("kind")], separator="|")
    known = dict(
        t.filter(pl.col("ts").is_not_null() & pl.col("rank").is_not_null())
        .group_by(key.alias("k"))
        .agg(pl.col("ts").min())
        .iter_rows()
    )
    t = t.with_columns(
        pl.when(pl.col("ts").is_null())
        .then(key.replace_strict(known, default=t1, return_dtype=t["ts"].dtype))
        .otherwise(pl.col("ts"))
        .alias("ts")
    )
    out: list[tuple[float, str, int, bytes]] = []
    for f in sorted(p for p in logs.rglob("*") if p.is_file()):
        rel = f.relative_to(logs).as_posix()
        rows = t.filter(pl.col("path") == rel).sort("line").select("line", "ts").rows()
        data = f.read_bytes()
        if rel.endswith(".json") or not data:  # error.json is written whole, at once
            ts = next((r[1] for r in rows if r[1] is not None), t0)
            out.append(((ts - t0).total_seconds(), rel, 0, data))
            continue
        cur, j, last = t0, 0, 0.0
        for i, ln in enumerate(data.splitlines(keepends=True), 1):
            while j < len(rows) and rows[j][0] <= i:
                cur = rows[j][1] if rows[j][1] is not None else cur
                j += 1
            last = max(last, (cur - t0).total_seconds())
            out.append((last, rel, i, ln))
    out.sort(key=lambda e: (e[0], e[1], e[2]))
    return out


class Replay:
    """Appends a case's lines into ``dest`` from a background thread, one tick of simulated time per step.

    The watcher's side calls :meth:`step`: the writer appends every line due by the current tick, then hands
    control back (queue hand-off, no sleeps); the test then runs one watcher pass with the clock at that tick.
    """

    def __init__(self, case: str, dest: Path, tick: float = 1.0) -> None:
        self.events = schedule(CASES / case / "logs")
        self.dest, self.tick, self.now = dest, tick, 0.0
        self.written = 0  # events appended so far
        self._go: queue.Queue[float | None] = queue.Queue()
        self._done: queue.Queue[int] = queue.Queue()
        self._thread = threading.Thread(target=self._writer, daemon=True)
        self._thread.start()

    def _writer(self) -> None:
        while (until := self._go.get()) is not None:
            while self.written < len(self.events) and self.events[self.written][0] <= until:
                _, rel, _, data = self.events[self.written]
                p = self.dest / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                with open(p, "ab") as fh:
                    fh.write(data)
                self.written += 1
            self._done.put(self.written)

    def step(self) -> int:
        """Append what is due at the current tick; returns the number of events written so far."""
        self._go.put(self.now)
        n = self._done.get(timeout=60)  # a guard against a dead writer thread, not a speed limit
        return n

    def advance(self) -> None:
        self.now += self.tick

    @property
    def finished(self) -> bool:
        return self.written >= len(self.events)

    def close(self) -> None:
        self._go.put(None)
        self._thread.join(timeout=60)

    def first_event(self, text: bytes) -> int:
        """Index of the first event whose bytes hold ``text``."""
        return next(i for i, e in enumerate(self.events) if text in e[3])


def replay(
    case: str, tmp: Path, stall: float = 5.0, until_exit: bool = True
) -> tuple[Watcher, list[tuple[int, Alert]], Replay]:
    """Replay ``case`` into ``tmp`` under a watcher driven one pass per tick; returns the alerts with the
    number of events written when each was raised. ``until_exit``: run until the launcher's exit (else
    until two passes after the last line)."""
    r = Replay(case, tmp)
    w = Watcher(
        tmp,
        stall=stall,
        clock=lambda: r.now,
        wallclock=lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=r.now),
    )
    got: list[tuple[int, Alert]] = []
    after = 0
    try:
        for _ in range(500):  # the case spans < 60 s of log time: bounded
            n = r.step()
            got += [(n, a) for a in w.poll()]
            after += r.finished
            if r.finished and (w.exited() if until_exit else after > 2):
                break
            r.advance()
    finally:
        r.close()
    assert r.finished and (w.exited() or not until_exit), "the replay did not reach the launcher's exit"
    return w, got, r


def _no_ids(v: object) -> object:
    """``v`` without ``event_id`` keys: a row id of the table the verdict was made from, and watch's table
    is numbered in the order its lines arrived, not as one batch load numbers them."""
    if isinstance(v, dict):
        return {k: _no_ids(x) for k, x in v.items() if k != "event_id"}
    if isinstance(v, list):
        return [_no_ids(x) for x in v]
    return v


def _no_sigs(d: dict) -> str:
    return json.dumps(_no_ids({k: v for k, v in d.items() if k != "signatures"}), sort_keys=True, default=str)


def test_replay_hang_alerts_straggler_before_any_timeout(tmp_path: Path) -> None:
    w, got, r = replay(HANG, tmp_path)
    kinds = [(a.alert, a.rank) for _, a in got]
    # rank 3 sleeps in step 4; ranks 0-2 wait in all_reduce. First alert: the stalled job's odd one out,
    # raised while no timeout line had been written yet.
    assert kinds[0] == ("stalled", 3)
    first_timeout = r.first_event(b"Timed out waiting")
    assert got[0][0] <= first_timeout
    assert got[0][1].evidence.endswith("attempt_0/3/stdout.log:8")
    # Then the diagnosis names rank 3 (silent while the others timed out); no other rank is ever named.
    assert ("initiator", 3) in kinds
    assert kinds.index(("initiator", 3)) == 1
    init = next(a for _, a in got if a.alert == "initiator")
    assert init.kind == "straggler_hang" and init.signature == "silent-straggler-hang"
    assert {a.rank for _, a in got} == {3}
    # The incremental verdict of the last pass is the batch verdict on the same files.
    want = correlator.diagnose(correlator.load(tmp_path)).to_json()
    assert _no_sigs(w.diagnosis.to_json()) == _no_sigs(want)
    assert want["initiating_ranks"] == [3] and want["failure_kind"] == "straggler_hang"


def test_replay_crash_alerts_initiator_once(tmp_path: Path) -> None:
    w, got, r = replay(CRASH, tmp_path)
    assert [(a.alert, a.rank) for _, a in got] == [("initiator", 1)]
    a = got[0][1]
    assert a.kind == "python_exception"
    assert a.evidence and a.evidence.split(":")[0].endswith(
        ("attempt_0/1/stderr.log", "attempt_0/1/error.json")
    )
    assert a.verdict["failure_kind"] == "rank_crash" and a.verdict["initiating_ranks"] == [1]
    # raised before torchrun's ChildFailedError summary was written
    assert got[0][0] <= r.first_event(b"ChildFailedError")
    want = correlator.diagnose(correlator.load(tmp_path)).to_json()
    assert _no_sigs(w.diagnosis.to_json()) == _no_sigs(want)
    prom = w.prometheus_text(job="j")
    assert 'rankscope_initiating_rank{training_job="j",rank="1",failure_kind="rank_crash"} 1' in prom
    assert 'rankscope_ranks_seen{training_job="j"} 4' in prom
    assert "# TYPE rankscope_last_progress_age_seconds gauge" in prom


def test_cli_until_exit_prints_what_diagnose_prints(tmp_path: Path) -> None:
    logs = CASES / CRASH / "logs"
    prom = tmp_path / "job.prom"
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "watch",
            str(logs),
            "--until-exit",
            "--interval",
            "10ms",
            "--format",
            "json",
            "--prometheus",
            str(prom),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    alerts = [json.loads(ln) for ln in lines[:-1]]
    assert [(a["alert"], a["rank"]) for a in alerts] == [("initiator", 1)]
    assert set(alerts[0]) >= {"time", "alert", "rank", "host", "kind", "signature", "evidence", "verdict"}
    diag = runner.invoke(app, ["diagnose", str(logs), "--format", "json", "-q"])
    assert json.loads(lines[-1]) == json.loads(diag.stdout)
    text = prom.read_text()
    assert "# HELP rankscope_ranks_seen" in text and 'rankscope_watch_exited{training_job="logs"} 1' in text
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed over
    # text mode: the verdict is render_text's, as `diagnose` prints it
    res_t = runner.invoke(app, ["watch", str(logs), "--until-exit", "--interval", "10ms", "-q"])
    diag_t = runner.invoke(app, ["diagnose", str(logs), "-q"])
    assert res_t.exit_code == 0
    assert res_t.stdout.endswith(diag_t.stdout)


def test_cli_rejects_bad_duration(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["watch", str(tmp_path), "--interval", "soon"])
    assert res.exit_code != 0


# ---------------------------------------------------------------- tail reader
def _w(tmp: Path) -> tuple[Watcher, list[float]]:
    now = [0.0]
    return Watcher(tmp, stall=10, clock=lambda: now[0]), now


def _rows(w: Watcher, path: str) -> pl.DataFrame:
    return w.table.filter(pl.col("path") == path).sort("line")


def test_tail_partial_lines_truncation_and_rotation(tmp_path: Path) -> None:
    w, _ = _w(tmp_path)
    w.poll()  # empty directory: waits
    f = tmp_path / "rank0.log"
    f.write_bytes(b"2026-11-30 00:19:00,701 INFO [trainer] rank=0 step=0 loss=1.0\n2026-11-30 00:19:01,0")
    w.poll()
    assert _rows(w, "rank0.log")["line"].to_list() == [1]  # the partial second line is held back
    with open(f, "ab") as fh:
        fh.write(b"00 INFO [trainer] rank=0 step=1 loss=0.9\r\n")
    w.poll()
    t = _rows(w, "rank0.log")
    assert t["line"].to_list() == [1, 2] and t["step"].to_list() == [0, 1]
    assert t["raw"][1] == "2026-11-30 00:19:01,000 INFO [trainer] rank=0 step=1 loss=0.9"  # CR dropped
    # truncation (copytruncate): read again from the start
    f.write_bytes(b"2026-11-30 00:19:05,000 INFO [trainer] rank=0 step=7 loss=0.5\n")
    w.poll()
    assert any("truncated" in m for m in w.warnings)
    assert _rows(w, "rank0.log")["step"].to_list() == [7]
    # rotation: the file is renamed and a new one created; the old inode keeps its offset (no re-read)
    os.rename(f, tmp_path / "rank0.log.1")
    with open(tmp_path / "rank0.log.1", "ab") as fh:
        fh.write(b"2026-11-30 00:19:06,000 INFO [trainer] rank=0 step=8 loss=0.4\n")
    f.write_bytes(b"2026-11-30 00:19:07,000 INFO [trainer] rank=0 step=9 loss=0.3\n")
    w.poll()
    steps = w.table.filter(pl.col("kind") == "step_progress")["step"].to_list()
    assert sorted(steps) == [7, 8, 9]  # each line once; the truncated lines are gone, as from the file
    assert any("renamed" in m for m in w.warnings)


def test_traceback_split_across_passes_is_one_record(tmp_path: Path) -> None:
    w, _ = _w(tmp_path)
    f = tmp_path / "rank2.log"
    lines = [
        b"[rank2]: Traceback (most recent call last):\n",
        b'[rank2]:   File "/opt/app/train.py", line 9, in <module>\n',
        b"[rank2]:     main()\n",
        b"[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n",
    ]
    for ln in lines:
        with open(f, "ab") as fh:
            fh.write(ln)
        w.poll()
    t = _rows(w, "rank2.log")
    assert t.height == 1 and t["line_count"].to_list() == [4]
    assert t["kind"].to_list() == ["cuda_error"] and t["rank"].to_list() == [2]


def test_restart_line_keeps_open_records() -> None:
    # one stream: restart at its last record
    assert restart_line([(1, 1, ()), (2, 1, ()), (3, 4, ())], 1) == 2  # one context row before it
    # two interleaved streams: stream a's multi-line record starting at 2 may still run past 5
    rows = [(1, 1, ("a",)), (2, 3, ("a",)), (5, 1, ("b",)), (6, 1, ("b",)), (8, 1, ("a",))]
    assert restart_line(rows, 1) <= 2
    assert restart_line([], 7) == 7


def test_stall_rules_silent_rank_and_collective_straggler(tmp_path: Path) -> None:
    w, now = _w(tmp_path)
    files = {r: tmp_path / f"rank{r}.log" for r in range(4)}
    step = 0

    def write(ranks: list[int]) -> None:
        for r in ranks:
            with open(files[r], "a") as fh:
                fh.write(f"2026-11-30 00:19:{step:02d},000 INFO [trainer] rank={r} step={step} loss=1.0\n")

    alerts: list[Alert] = []
    for step in range(4):
        write([0, 1, 2, 3])
        alerts += w.poll()
        now[0] += 5
    for step in range(4, 12):  # rank 2 stops; the others keep advancing
        write([0, 1, 3])
        alerts += w.poll()
        now[0] += 5
    silent = [a for a in alerts if a.alert == "silent"]
    assert [a.rank for a in silent] == [2]
    assert silent[0].evidence == "rank2.log:4"
    assert 2 in w.behind
    assert re.search(r'^rankscope_ranks_behind\{training_job="[^"]+"\} 1$', w.prometheus_text(), re.MULTILINE)


def test_parse_duration() -> None:
    assert parse_duration("2s") == 2 and parse_duration("500ms") == 0.5 and parse_duration("1m") == 60
    assert parse_duration("120") == 120 and parse_duration("1.5h") == 5400
    for bad in ("", "fast", "-1s", "0s"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_exec_runs_in_background_with_timeout(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    warnings: list[str] = []
    ex = _Exec(f"cat > {out}", 30, warnings.append)
    ex.submit('{"alert": "initiator", "rank": 1}')
    ex.close()
    assert json.loads(out.read_text()) == {"alert": "initiator", "rank": 1}
    slow = _Exec("sleep 30", 0.2, warnings.append)
    slow.submit("{}")  # returns at once
    slow.close(wait_s=30)
    assert any("timed out" in m for m in warnings)


# ---------------------------------------------------------------- a real live job
VENV = ROOT / ".venv-capture"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(
    not (VENV / "bin" / "torchrun").exists(),
    reason="needs the capture venv with torch (.venv-capture, see fixtures/capture/README.md)",
)
def test_live_torchrun_hang_alert_before_pg_timeout(tmp_path: Path) -> None:
    """A real 4-rank gloo job in which rank 3 sleeps in step 4 with a 300 s process-group timeout: the
    watcher (stall 3 s) names rank 3 while the job is still hung, before any timeout is logged."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TORCH", "NCCL", "MASTER_", "RANKSCOPE_"))
    }
    env.update(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", PATH=f"{VENV / 'bin'}:{env.get('PATH', '')}")
    cmd = [
        str(VENV / "bin" / "torchrun"),
        "--nproc-per-node",
        "4",
        "--master-port",
        str(_free_port()),
        "--log-dir",
        str(tmp_path / "torchrun_logs"),
        "--redirects",
        "3",
        "--tee",
        "3",
        "train.py",
        "--fault",
        "hang",
        "--fault-rank",
        "3",
        "--fault-step",
        "4",
        "--pg-timeout",
        "300",
        "--hang-seconds",
        "600",
    ]
    with open(tmp_path / "launcher.log", "wb") as out:
        job = subprocess.Popen(
            cmd,
            cwd=ROOT / "fixtures" / "capture",
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    w = Watcher(tmp_path, stall=3.0)
    alert = None
    try:
        deadline = time.monotonic() + 240  # guard against a job that never starts; the PG timeout is 300 s
        while time.monotonic() < deadline and job.poll() is None:
            hits = [a for a in w.poll() if a.rank == 3 and a.alert in ("stalled", "straggler", "silent")]
            if hits:
                alert = hits[0]
                break
            time.sleep(0.5)
        faults = w.table.filter(
            pl.col("kind").is_in(["gloo_timeout", "watchdog_timeout", "monitored_barrier_failed"])
        )
        still_running = job.poll() is None
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGTERM)
            try:
                job.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
    assert alert is not None, f"no alert on rank 3; alerts state: {w.status_line()}"
    assert still_running and faults.height == 0, "the job's own timeout fired first"
    assert alert.evidence is not None and (
        "attempt_0/3/" in alert.evidence or alert.evidence.startswith("launcher.log")
    )
    assert "step 4" in alert.reason


def test_ctrl_c_prints_the_verdict_so_far_and_exits_130(tmp_path: Path) -> None:
    """SIGINT to a real `rankscope watch` process: the verdict on the files as they are, exit status 130."""
    import shutil
    import sys

    logs = tmp_path / "logs"
    shutil.copytree(CASES / CRASH / "logs", logs)
    p = subprocess.Popen(
        [sys.executable, "-m", "correlator", "watch", str(logs), "--interval", "100ms"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: queue.Queue[str | None] = queue.Queue()
    err: list[str] = []

    def pump() -> None:  # one reader per pipe (readline + communicate would lose read-ahead data)
        for line in p.stdout:
            out.put(line)
        out.put(None)

    threads = [
        threading.Thread(target=pump, daemon=True),
        threading.Thread(target=lambda: err.extend(p.stderr), daemon=True),
    ]
    for t in threads:
        t.start()
    try:
        first = out.get(
            timeout=120
        )  # the first alert: the watcher is in its loop (a guard, not a speed limit)
        assert first is not None and "ALERT initiator: rank 1" in first, "".join(err)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    for t in threads:
        t.join(timeout=60)
    rest = "".join(iter(lambda: out.get(timeout=10) or "", ""))
    assert p.returncode == 130, "".join(err)
    assert rest.lstrip().startswith("VERDICT  rank 1 (local rank 1) failed first: CorruptBatchError"), (
        rest[-500:],
        "".join(err)[-2000:],
    )
    assert "interrupted; verdict so far" in "".join(err)


def test_restart_line_ignores_a_stream_that_stopped_long_ago() -> None:
    rows = [(1, 1, ("quiet",))] + [(i, 1, ("busy",)) for i in range(2, 1000)]
    assert restart_line(rows, 1) == 998  # the busy stream's last record, one context row before it


def test_collective_every_rank_but_one_entered(tmp_path: Path) -> None:
    """NCCL COLL lines (NCCL_DEBUG_SUBSYS=COLL): ranks 0-2 enter opCount 0xa, rank 3 stays at 0x9."""
    w, now = _w(tmp_path)
    comm_id = "0x7a1b2c3d4e5f6a7b"
    for r in range(4):
        pfx = f"node-a:{4000 + r}:{4000 + r} [{r}] NCCL INFO "
        comm = f"0x55aa{r:08x}"
        init = (
            f"{pfx}ncclCommInitRank comm {comm} rank {r} nranks 4 cudaDev {r} nvmlDev {r} busId 1{r}000 "
            f"commId {comm_id} - Init COMPLETE"
        )
        last = 0x9 if r == 3 else 0xA
        colls = [
            f"{pfx}AllReduce: opCount {s:x} sendbuff 0x7f0000 recvbuff 0x7f0000 count 1024 datatype 7 op 0 root 0 "
            f"comm {comm} [nranks=4] stream 0x55bb"
            for s in range(last + 1)
        ]
        (tmp_path / f"nccl.node-a.{4000 + r}.log").write_text("\n".join([init, *colls]) + "\n")
    assert w.poll() == []
    now[0] += 11  # nothing more is written for longer than --stall (10 s)
    alerts = w.poll()
    assert [(a.alert, a.rank) for a in alerts] == [("straggler", 3)]
    assert "SeqNum 9" in alerts[0].reason and "entered SeqNum 10" in alerts[0].reason
    assert alerts[0].evidence == "nccl.node-a.4003.log:11"
    assert w.poll() == []  # once per episode


def test_backlog_is_read_in_bounded_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from correlator import watch

    monkeypatch.setattr(watch, "MAX_PASS_BYTES", 200)
    lines = [f"2026-11-30 00:19:{s:02d},000 INFO [trainer] rank=0 step={s} loss=1.0\n" for s in range(10)]
    (tmp_path / "rank0.log").write_text("".join(lines))
    (tmp_path / "rank1.log").write_text("".join(ln.replace("rank=0", "rank=1") for ln in lines))
    w, _ = _w(tmp_path)
    passes = 0
    while True:
        w.poll()
        passes += 1
        assert w.bytes_read <= passes * 200
        if not w.backlog:
            break
    assert passes > 3
    assert w.lines_read == 20
    t = w.table.filter(pl.col("kind") == "step_progress")
    # every line was read once; the reduced store keeps the first 2 and last 4 progress rows per file
    assert sorted(t.filter(pl.col("rank") == 1)["step"].to_list()) == [0, 1, 6, 7, 8, 9]


def test_store_keeps_first_last_and_signature_application_lines(tmp_path: Path) -> None:
    """A training script's own log lines, appended over several passes: the store keeps the first 16 and the
    last 64 of the file, the one in the middle a built-in signature's regex matches (a checkpoint save), and
    every line of another producer (the launcher's) whole."""
    lines = [
        f"2026-11-30 00:19:{i % 60:02d},000 INFO [data] prefetched shard {i} of the dataset"
        for i in range(300)
    ]
    lines[150] = "2026-11-30 00:21:30,000 INFO [trainer] Saving checkpoint to /ckpt/step_000150"
    lines[200] = "INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group"
    f = tmp_path / "rank0.log"
    w, _ = _w(tmp_path)
    for lo in range(0, 300, 70):  # appended as a job writes, five passes
        with f.open("a") as out:
            out.write("\n".join(lines[lo : lo + 70]) + "\n")
        w.poll()
    assert w.lines_read == 300
    assert w.store is not None
    kinds = dict(w.store.select("line", "kind").iter_rows())
    assert kinds[151] == "log" and kinds[201] == "log"  # (lines count from 1)
    app_lines = [n for n in range(1, 301) if n not in (151, 201)]
    assert sorted(kinds) == sorted([*app_lines[:16], *app_lines[-64:], 151, 201])


@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_signal_to_the_process_group_of_uv_run_prints_the_verdict(
    tmp_path: Path, signame: str, code: int
) -> None:
    """The README's `uv run rankscope watch DIR`, signalled as a terminal does (Ctrl-C: SIGINT to the whole
    foreground process group; `timeout`, a closed terminal and `kill -- -PGID` likewise). `uv run` forwards
    the signal to its child as well, so the watcher gets it twice: it must still print the verdict so far
    and exit 128 + the signal. Before, SIGINT printed "interrupted; verdict so far:" and nothing else, and
    SIGTERM ended as "internal error: _Stop: 143" (exit 3)."""
    import shutil

    uv = shutil.which("uv")
    if uv is None or not (ROOT / ".venv" / "bin" / "rankscope").exists():
        pytest.skip("needs uv and the project's .venv (uv sync)")
    logs = tmp_path / "logs"
    shutil.copytree(CASES / CRASH / "logs", logs)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    p = subprocess.Popen(
        [uv, "run", "--no-sync", "rankscope", "watch", str(logs), "--interval", "100ms"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, which the signal goes to as a whole
    )
    try:
        assert p.stdout is not None
        first = p.stdout.readline()  # the first alert: the watcher is in its loop
        assert "ALERT initiator: rank 1" in first
        os.killpg(p.pid, getattr(signal, signame))
        rest, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == code, err[-2000:]
    assert "interrupted; verdict so far:" in err
    assert "internal error" not in err
    assert rest.lstrip().startswith("VERDICT  rank 1 (local rank 1) failed first: CorruptBatchError"), (
        rest[-500:],
        err[-2000:],
    )


#: Exit reports as launchers print them, each a real line: the srun ones are Slurm's ``task_state.c`` format
#: (``"%s: %s %s: %s%s"``, host, ``task``/``tasks``, task list, ``strsignal``, `` (core dumped)``) with the
#: host of issue 34; the others are copied from the captured cases named.
_EXIT_LINES = [
    "srun: error: node17: tasks 0-1: Aborted (core dumped)",
    "srun: error: node17: task 2: Terminated",
    "srun: Force Terminated StepId=3.0",  # cap-24-srun-per-rank-sigkill
    "srun: error: node-a: task 1: Killed",  # cap-32-srun-per-rank-hang
    "mpirun noticed that process rank 2 with PID 0 on node node-a exited on signal 9 (Killed).",  # cap-31
    "  Process name: [[11413,1],3]",  # cap-21-mpirun-tag-exception (mpirun's abort help text)
    (
        "[2026-12-01 19:08:33,669] [ERROR] [launch.py:259:sigkill_handler] ['/opt/venv/bin/python3', '-u', "
        "'train.py', '--local_rank=3'] exits with return code = 1"
    ),  # cap-27-deepspeed-exception
    (
        "[rank: 1] Child process with PID 11896 terminated with code -9. Forcefully terminating all other "
        "processes to avoid zombies 🧟"
    ),  # cap-30-lightning-ddp-sigkill
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",  # torchrun (worked before)
]


@pytest.mark.parametrize("line", _EXIT_LINES)
def test_until_exit_stops_on_every_launcher_exit_report(tmp_path: Path, line: str) -> None:
    """`--until-exit` stops once a launcher's exit report is logged and a pass after it read nothing new.
    Before, only torchrun's ChildFailedError, srun's `Exited with exit code` and cancellations counted: a job
    whose tasks srun reports killed by a signal (what the NCCL watchdog's abort leaves) was followed forever."""
    log = tmp_path / "slurm-884213.out"
    log.write_text(
        "0: [rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
        "Connection closed by peer [127.0.0.1]:61675.\n"
    )
    w, _ = _w(tmp_path)
    w.poll()
    w.poll()
    assert not w.exited() and w.exit_seen is None
    with log.open("a") as fh:
        fh.write(line + "\n")
    w.poll()
    assert w.exit_seen == "slurm-884213.out:2"
    assert not w.exited()  # the pass that read the report; the next quiet one ends the watch
    w.poll()
    assert w.exited()


def test_until_exit_cli_stops_on_srun_signal_reports(tmp_path: Path) -> None:
    """The CLI: `watch --until-exit` on a job whose srun reports tasks killed by signals ends by itself with
    the final verdict (`--max-passes` only bounds a regression: it would otherwise run forever)."""
    (tmp_path / "slurm-884213.out").write_text(
        "0: [rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
        "Connection closed by peer [127.0.0.1]:61675.\n"
        "srun: error: node17: tasks 0-1: Aborted (core dumped)\n"
        "srun: error: node17: task 2: Terminated\n"
        "srun: Force Terminated StepId=884213.0\n"
    )
    res = CliRunner().invoke(
        app, ["watch", str(tmp_path), "--until-exit", "--interval", "10ms", "--max-passes", "50"]
    )
    assert res.exit_code == 0, res.output
    assert "the launcher exited (slurm-884213.out:2); final verdict:" in res.stderr


# ---------------------------------------------------------------- the table: ingest's steps after parsing
def test_watcher_table_is_built_by_ingests_steps(tmp_path: Path) -> None:
    """The watcher turns its parsed lines into the table with ingest's own steps after parsing
    (``correlator.ingest.table_from_parsed``), so a value no real job has is capped as ingest caps it: a
    stray ``[rank99999]:`` in a 2-rank job (more than 4x the stated world size) names no rank, with the
    warning, instead of a rank 99,999 for the alerts and the verdict to size their work by."""
    (tmp_path / "rank0.log").write_text("[rank0]: step 1\n")
    (tmp_path / "rank1.log").write_text("[rank1]: step 1\n")
    (tmp_path / "stray.log").write_text(
        "[rank99999]: one stray line\n"
        "node-a:1:2 [0] NCCL INFO comm 0x5555 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
    )
    w = Watcher(tmp_path, stall=10)
    w.poll()
    assert w.ranks_seen() == [0, 1]
    assert any("rank 99999" in x for x in w.warnings), w.warnings
    stray = w.table.filter(pl.col("raw").str.contains("stray line"))
    assert stray.height == 1 and stray["rank"][0] is None
    n = len(w.warnings)
    (tmp_path / "rank0.log").write_text("[rank0]: step 1\n[rank0]: step 2\n")
    w.poll()  # the store is turned into the table again: the warning is not repeated
    assert len(w.warnings) == n


def test_watcher_gives_stack_dumps_named_by_pid_their_rank() -> None:
    """py-spy dumps named by pid only (``py-spy-19317.txt``) take the rank of that pid from the launcher's
    lines, in the watcher's table as in ingest's (``stacks.assign_ranks``, one of ingest's steps after
    parsing): the trainer's lines state ``rank=0 … pid=19317`` … ``rank=3 … pid=19320``."""
    w = Watcher(CASES / "stk-02-checkpoint-write-hang-pid-names" / "logs", stall=10)
    w.poll()
    dumps = w.table.filter(pl.col("kind") == "stack_dump").sort("path")
    assert dumps["path"].to_list() == [f"py-spy-{p}.txt" for p in range(19317, 19321)]
    assert dumps["rank"].to_list() == [0, 1, 2, 3]


def test_store_keeps_the_first_line_of_each_template_where_a_mismatch_is(tmp_path: Path) -> None:
    """cap-07 with each rank's configuration line in the middle of its script's lines
    (``tests.conftest.late_configuration``): the store holds a collective mismatch, so it keeps the first line
    of each template per file and prefix rank: each rank's configuration line, in its stdout and in the
    console (it cut them before). The same job without its mismatch keeps none of them."""
    root = late_configuration(tmp_path / "logs")
    w = Watcher(root, stall=10, clock=lambda: 0.0)
    w.poll()
    assert w.store is not None
    conf = w.store.filter(pl.col("message").str.contains("plain model hidden="))
    assert conf.height == 8  # 4 ranks, each in its stdout and in launcher.log
    # the same job without its mismatch: the store keeps none of them
    for f in root.rglob("*"):
        if f.is_file():
            lines = f.read_text().splitlines(keepends=True)
            f.write_text("".join(x for x in lines if "EnforceNotMet" not in x and "preamble" not in x))
    calm = Watcher(root, stall=10, clock=lambda: 0.0)
    calm.poll()
    assert calm.store is not None
    assert "collective_mismatch" not in calm.store["kind"].to_list()
    assert calm.store.filter(pl.col("message").str.contains("plain model hidden=")).height == 0


# ---------------------------------------------------------------- arguments refused, metrics file written safely
def test_cli_refuses_a_prometheus_file_inside_the_watched_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--prometheus DIR/x.prom`` would be read back as a log on every pass: exit 2 with a line that says
    so, before any pass; outside the folder it is written."""
    from tests.conftest import run_cli

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.log").write_text("[rank0]: step 1\n")
    code, out, err = run_cli(
        ["watch", logs, "--prometheus", logs / "x.prom", "--max-passes", "1"], monkeypatch, capsys
    )
    flat = " ".join(err.split())
    assert code == 2 and f"--prometheus {logs / 'x.prom'}: inside the input folder" in flat, err
    assert sorted(p.name for p in logs.iterdir()) == ["rank0.log"] and out == ""
    code, _, err = run_cli(
        ["watch", logs / "rank0.log", "--prometheus", logs / "rank0.log"], monkeypatch, capsys
    )
    assert code == 2 and "the output is the input itself" in err
    code, _, err = run_cli(
        ["watch", logs, "--prometheus", tmp_path / "x.prom", "--max-passes", "1", "-q"], monkeypatch, capsys
    )
    assert code == 0 and "rankscope_ranks_seen" in (tmp_path / "x.prom").read_text(), err


def test_cli_says_that_watch_does_not_read_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``watch -`` said "-: no such file or directory"; it says that watch follows files, not a stream."""
    from tests.conftest import run_cli

    code, out, err = run_cli(["watch", "-", "--max-passes", "1"], monkeypatch, capsys)
    flat = " ".join(err.split())
    assert code == 2 and out == "", err
    assert "not standard input" in flat and "rankscope diagnose -" in flat and "no such file" not in flat


def test_write_prometheus_never_follows_a_planted_link(tmp_path: Path) -> None:
    """The temporary file is a fresh name created exclusively (the old one, ``.<name>.<pid>.tmp``, could be a
    link planted beforehand, and the write followed it); it does not end in .prom (a collector reading
    ``*.prom`` never sees it half-written); the metrics file gets the usual mode, and nothing is left behind."""
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    prom_dir = tmp_path / "textfile"
    prom_dir.mkdir()
    (prom_dir / f".job.prom.{os.getpid()}.tmp").symlink_to(victim)
    w = Watcher(tmp_path / "victim", stall=10)
    w.write_prometheus(prom_dir / "job.prom", job="j")
    w.write_prometheus(prom_dir / "job.prom", job="j")  # again, over the first one
    assert victim.read_text() == "keep me\n"
    text = (prom_dir / "job.prom").read_text()
    assert 'rankscope_ranks_seen{training_job="j"}' in text
    mask = os.umask(0)
    os.umask(mask)
    assert (prom_dir / "job.prom").stat().st_mode & 0o777 == 0o666 & ~mask
    assert sorted(p.name for p in prom_dir.iterdir()) == [f".job.prom.{os.getpid()}.tmp", "job.prom"]
    (prom_dir / "link.prom").symlink_to(victim)  # a link at the name itself is replaced, not written through
    w.write_prometheus(prom_dir / "link.prom")
    assert victim.read_text() == "keep me\n" and not (prom_dir / "link.prom").is_symlink()


def test_write_prometheus_leaves_no_temporary_file_when_the_write_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = Watcher(tmp_path, stall=10)

    def fail(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="No space left"):
        w.write_prometheus(tmp_path / "m.prom")
    assert list(tmp_path.iterdir()) == []


def test_watch_help_keeps_the_exit_status_paragraph_whole() -> None:
    """The exit-status paragraph is wrapped to the terminal as one paragraph, not broken where the source
    line ended ("… ran out); 130 after Ctrl-C" alone on a line)."""
    r = CliRunner().invoke(app, ["watch", "--help"], terminal_width=80)
    lines = [ln.strip() for ln in r.output.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Exit status:"))
    para = lines[start : lines.index("", start)]
    assert " ".join(para).endswith("forwards the signal a second time). 2 on bad arguments.")
    assert all(len(ln) > 60 for ln in para[:-1]), para
