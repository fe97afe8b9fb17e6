"""Issue #15 item 4: each trust defect on a minimal input written here (the expected values follow from
reading the lines)."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import polars as pl
import pytest

import correlator
from correlator.faults import fault_rows
from tests.test_diagnose_units import ev, table

DUMP = (
    "[rank{r}]:[E703 21:51:54.112142364 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
    "Received a dump signal due to a collective timeout from {src} and we will try our best to dump the debug "
    "info. Last enqueued NCCL work: 56116, last completed NCCL work: 56115.This is most likely caused by "
    "incorrect usages of collectives"
)


def _load(root: Path, text: str, name: str = "console.log") -> pl.DataFrame:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text + "\n")
    return correlator.load(root)


# --- c. the heartbeat monitor's "collective timeout from  rank N" names N ---------------------------------


@pytest.mark.parametrize(("src", "peer"), [(" rank 7", 7), ("this local rank", None)])
def test_dump_signal_captures_the_rank_that_timed_out(tmp_path: Path, src: str, peer: int | None) -> None:
    # getNCCLWatchdogTimeoutErrorMsg(c10::str(" rank ", timeOutRank)): "from  rank 7" (two spaces)
    t = _load(tmp_path, DUMP.format(r=6, src=src))
    assert t.select("rank", "kind", "peer_rank", "seq_enqueued", "seq_completed").rows() == [
        (6, "heartbeat_timeout", peer, 56116, 56115)
    ]


# --- a. exits past 128 and the launcher's SIGTERM / SIGHUP are effects --------------------------------------


@pytest.mark.parametrize("code", [129, 143, 137])
def test_exit_past_128_is_an_effect_and_not_the_initiator(tmp_path: Path, code: int) -> None:
    pfx = "ERROR:torch.distributed.elastic.multiprocessing.api:"
    text = "\n".join(
        [
            f"{pfx}failed (exitcode: {code}) local_rank: 0 (pid: 4241) of binary: /usr/bin/python",
            f"{pfx}failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python",
        ]
    )
    t = _load(tmp_path, text)
    assert fault_rows(t).sort("rank").select("rank", "role").rows() == [(0, "effect"), (1, "exit")]
    assert correlator.diagnose(t).initiating_ranks == [1]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_launcher_signal_is_an_effect(sig: str) -> None:
    assert fault_rows(table([ev(0, "worker_failed", 1, signal=sig)]))["role"].to_list() == ["effect"]


# --- b. the host comes from evidence, never from an arbitrary folder name -----------------------------------

WD = (
    "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600060 "
    "milliseconds before timing out."
)
NCCL_WARN = "trn-17:4242:4300 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion with error 12"


@pytest.mark.parametrize(
    ("rel", "text", "host"),
    [
        ("exp/llama-7b-sft/notes.txt", WD, None),  # an experiment folder is no host
        ("runs/2024-05-01/rank0.log", WD, None),  # nor is a date folder
        ("node-3/console.log", WD, "node-3"),  # a node folder is
        ("host-x/console.log", WD, "host-x"),
        ("exp/llama-7b-sft/notes.txt", NCCL_WARN, "trn-17"),  # NCCL's host:pid:tid prefix names the host
    ],
)
def test_host_comes_from_evidence_not_any_folder(
    tmp_path: Path, rel: str, text: str, host: str | None
) -> None:
    t = _load(tmp_path, text, rel)
    assert t["host"].unique().to_list() == [host]


# --- d. --attempt N shows attempt N's errors ---------------------------------------------------------------

RESTART = Path(__file__).parent.parent / "fixtures/cases/cap-12-elastic-restart/logs"


def _launcher_lines(pattern: str) -> list[int]:
    """1-based numbers of the launcher.log lines matching ``pattern`` (read here, not by rankscope)."""
    lines = (RESTART / "launcher.log").read_text().splitlines()
    return [i for i, line in enumerate(lines, 1) if re.search(pattern, line)]


@pytest.mark.parametrize("attempt", [0, 1])
def test_attempt_option_shows_that_attempts_errors(attempt: int) -> None:
    from typer.testing import CliRunner

    from correlator.cli import app

    # torchrun logged no restart line: attempt 1 begins at the first worker line that says attempt=1.
    boundary = _launcher_lines(r"attempt=1 ")[0]
    failed = {  # the launcher's "failed (exitcode: N) local_rank: R" lines of this attempt: line -> (rank, code)
        n: (int(m[2]), int(m[1]))
        for n in _launcher_lines(r"failed \(exitcode: ")
        if (n > boundary) == (attempt == 1)
        for m in [
            re.search(
                r"exitcode: (-?\d+)\) local_rank: (\d+)",
                (RESTART / "launcher.log").read_text().splitlines()[n - 1],
            )
        ]
        if m
    }
    assert failed == ({76: (1, -6)} if attempt == 0 else {135: (0, 1)})  # what the log says
    r = CliRunner().invoke(app, ["diagnose", str(RESTART), "--attempt", str(attempt), "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["attempt"] == attempt
    launcher = [e["line"] for e in d["evidence"] if e["path"] == "launcher.log"]
    assert launcher and all((n > boundary) == (attempt == 1) for n in launcher)
    assert set(failed) <= set(launcher)  # the attempt's own exit statuses are shown
    folders = {e["path"].split("/")[2] for e in d["evidence"] if e["path"].startswith("torchrun_logs/")}
    assert folders == {f"attempt_{attempt}"}
    # Attempt 1: ranks 0 and 1 fail in init_process_group (their error.json), ranks 2 and 3 are SIGTERMed.
    status = {p["rank"]: p["status"] for p in d["per_rank"]}
    assert status == (
        {0: "collateral", 1: "initiating", 2: "collateral", 3: "collateral"}
        if attempt == 0
        else {0: "initiating", 1: "initiating", 2: "collateral", 3: "collateral"}
    )


# --- e. one time for the report, the plot and the Perfetto trace --------------------------------------------

CASES = Path(__file__).parent.parent / "fixtures/cases"


def _us(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1_000_000)


STAMPED = [
    c.name for c in sorted(CASES.iterdir()) if (c / "logs").is_dir() and (c / "expected.json").is_file()
]


def _expected_time(t: pl.DataFrame, event_id: int) -> tuple[dt.datetime | None, str | None]:
    """The time of row ``event_id`` worked out here from the table and the clock offsets: its own
    clock-corrected stamp, else that of the nearest stamped line above it in its file (by line), else of the
    nearest below; offsets per attempt (``clock.estimate`` over the attempt's non-duplicate rows)."""
    from correlator import clock

    rows = t.filter(~pl.col("duplicate") & (pl.col("kind") != "blank"))
    me = rows.filter(pl.col("event_id") == event_id).row(0, named=True)
    part = rows.filter(pl.col("attempt") == me["attempt"]) if rows["attempt"].n_unique() > 1 else rows
    offsets = clock.estimate(part)

    def corrected(r: dict[str, object]) -> dt.datetime:
        off = offsets[r["host"]].offset_s if r["host"] in offsets else 0.0  # type: ignore[index]
        return r["ts"] - dt.timedelta(microseconds=int(off * 1e6))  # type: ignore[operator, return-value]

    if me["ts"] is not None:
        return corrected(me), "stamp"
    same = rows.filter((pl.col("path") == me["path"]) & pl.col("ts").is_not_null())
    key = (me["line"], me["event_id"])
    above = [r for r in same.iter_rows(named=True) if (r["line"], r["event_id"]) < key]
    below = [r for r in same.iter_rows(named=True) if (r["line"], r["event_id"]) > key]
    if above:
        r = max(above, key=lambda r: (r["line"], r["event_id"]))
        # The row above belongs to its own attempt's clock.
        return _expected_time(t, r["event_id"])[0], "stamp above"
    if below:
        r = min(below, key=lambda r: (r["line"], r["event_id"]))
        return _expected_time(t, r["event_id"])[0], "stamp below"
    return None, None


def _us_exact(d: dt.datetime) -> int:
    return (d - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)


@pytest.mark.parametrize("case", STAMPED)
def test_initiating_fault_at_one_time_in_report_plot_and_trace(case: str) -> None:
    """Each initiating event the diagnosis names is the evidence row of that event id, stated at the time
    the table and the clock give that row, and the report, the Perfetto trace and the plot put it there."""
    from rich.console import Console

    from correlator.perfetto import to_trace
    from correlator.plot import timeline_data
    from correlator.report import render_text

    t = correlator.load(CASES / case / "logs")
    if t.filter(~pl.col("duplicate") & (pl.col("kind") != "blank"))["ts"].drop_nulls().n_unique() < 2:
        pytest.skip("no time axis: the logs carry fewer than two distinct stamps")
    d = correlator.diagnose(t)
    doc = d.to_json()
    evidence = {e["event_id"]: e for e in doc["evidence"]}
    assert all(isinstance(i, int) for i in evidence), "every evidence row names its event id"
    for e in doc["evidence"]:  # the row it quotes is the one its event id names
        row = t.filter(pl.col("event_id") == e["event_id"]).row(0, named=True)
        assert (row["rank"], row["path"], row["line"], row["kind"]) == (
            e["rank"],
            e["path"],
            e["line"],
            e["kind"],
        )
    # Every initiating rank with a line of its own in the evidence has its initiating event, and only those.
    own = {
        e["rank"]
        for e in doc["evidence"]
        if e["rank"] in doc["initiating_ranks"]
        and (e["role"] == "initiating fault" or e["role"] == f"last sign of life of rank {e['rank']}")
    }
    assert [i["rank"] for i in doc["initiating_events"]] == sorted(own)
    trace = to_trace(t, d)
    instants = {
        e["args"]["event_id"]: e for e in trace["traceEvents"] if e["ph"] == "i" and "event_id" in e["args"]
    }
    rows, base, t0 = timeline_data(t, d)
    assert base == "time"
    text = Console(width=400, record=True)
    render_text(d, text)
    report = text.export_text()
    stated_us = []
    for i in doc["initiating_events"]:
        ev = evidence[i["event_id"]]
        assert (i["path"], i["line"], i["kind"], i["role"]) == (
            ev["path"],
            ev["line"],
            ev["kind"],
            ev["role"],
        )
        want, basis = _expected_time(t, i["event_id"])
        assert i["ts_basis"] == basis
        if want is None:
            assert i["ts"] is None
            continue
        us = _us_exact(want)
        assert _us_exact(dt.datetime.fromisoformat(i["ts"])) == us  # what the diagnosis states
        drawn = instants[i["event_id"]]
        assert drawn["args"].get("initiating") and drawn["ts"] == us and drawn["tid"] == i["rank"] + 1
        assert rows.filter(pl.col("event_id") == i["event_id"])["tc"].to_list() == [us]
        shown = want.strftime("%Y-%m-%d %H:%M:%S.") + f"{want.microsecond // 1000:03d}"
        assert f"rank {i['rank']}: " in report and shown in report
        stated_us.append(us)
    if stated_us and len(doc["initiating_events"]) == len(doc["initiating_ranks"]):
        assert t0 == min(stated_us)  # the plot's zero is the initiating event


def test_a_third_stamped_is_still_a_time_axis() -> None:
    from correlator.perfetto import prepare

    t = correlator.load(CASES / "cap-12-elastic-restart" / "logs")
    # Keep the stamp of every third row only (by event id); the others have none.
    t = t.with_columns(pl.when(pl.col("event_id") % 3 == 0).then(pl.col("ts")).otherwise(None).alias("ts"))
    stamped = t.filter(~pl.col("duplicate"))["ts"].drop_nulls().len()
    assert 0.25 < stamped / t.filter(~pl.col("duplicate")).height < 0.4
    rows, base = prepare(t)
    assert base == "time"
    assert rows["tc"].n_unique() > 1  # a time axis with more than one moment on it


def test_unstamped_initiating_line_is_stated_at_the_stamp_above_it_everywhere() -> None:
    """recon-04: rank 5's OOM traceback (from node-a.console.log:200) has no stamp; the last stamped line above it
    is line 4, ``W0211 02:31:40.000000`` (torchrun, year 2025 from the job's other stamps), and the job's two
    hosts share no collective, so no clock offset. The report, Markdown, HTML page, trace and plot all say so."""
    from rich.console import Console

    from correlator.perfetto import to_trace
    from correlator.plot import report_html, timeline_data
    from correlator.report import render_markdown, render_text

    logs = CASES / "recon-04-cuda-oom-rank5-watchdog-600s-global-prefix-16r" / "logs"
    lines = (logs / "node-a.console.log").read_text().splitlines()
    stamped_above = [i for i, s in enumerate(lines[:199], 1) if re.match(r"[IWEF]\d{4} \d\d:\d\d:\d\d", s)]
    assert stamped_above[-1] == 4 and lines[3].startswith("W0211 02:31:40.000000")
    # Line 200 opens rank 5's traceback; the record runs to its OutOfMemoryError line, none of it stamped.
    end = next(i for i, s in enumerate(lines, 1) if "OutOfMemoryError" in s)
    assert "Traceback" in lines[199] and end > 200
    assert not any(re.search(r"\d\d:\d\d:\d\d", s) for s in lines[199:end])
    t = correlator.load(logs)
    d = correlator.diagnose(t)
    [e] = d.initiating_events
    assert (e.rank, e.path, e.line, e.kind, e.role) == (
        5,
        "node-a.console.log",
        200,
        "cuda_oom",
        "initiating fault",
    )
    assert (e.ts, e.ts_basis) == ("2025-02-11T02:31:40Z", "stamp above")
    quoted = next(x for x in d.evidence if x.role == "initiating fault")
    assert (quoted.event_id, quoted.ts) == (e.event_id, None)  # the evidence row is that event, unstamped
    shown = "rank 5: cuda_oom at ≥ 2025-02-11 02:31:40.000"
    con = Console(width=400, record=True)
    render_text(d, con)
    assert shown in con.export_text()
    assert f"- initiating event: {shown}" in render_markdown(d)
    import html

    import networkx as nx

    assert html.escape(shown) in report_html(t, d, nx.DiGraph())
    us = int(dt.datetime(2025, 2, 11, 2, 31, 40, tzinfo=dt.UTC).timestamp()) * 1_000_000
    [mark] = [x for x in to_trace(t, d)["traceEvents"] if x.get("args", {}).get("initiating")]
    assert (mark["ts"], mark["tid"], mark["args"]["event_id"], mark["args"]["ts_inferred"]) == (
        us,
        6,
        e.event_id,
        True,
    )
    _rows, _base, t0 = timeline_data(t, d)
    assert t0 == us


def test_every_attempts_evidence_names_its_event_row() -> None:
    """cap-12 restarted once: both attempts' evidence rows (top level and nested) carry the event id of the
    table row they quote, and each attempt names its initiating events by evidence row."""
    t = correlator.load(RESTART)
    doc = correlator.diagnose(t).to_json()
    assert [a["attempt"] for a in doc["attempts"]] == [0, 1]
    for d in [doc, *doc["attempts"]]:
        assert d["evidence"]
        for e in d["evidence"]:
            row = t.filter(pl.col("event_id") == e["event_id"]).row(0, named=True)
            assert (row["rank"], row["path"], row["line"], row["kind"], row["attempt"]) == (
                e["rank"],
                e["path"],
                e["line"],
                e["kind"],
                d["attempt"],
            )
        quoted = {e["event_id"]: e for e in d["evidence"]}
        assert d["initiating_events"]
        for i in d["initiating_events"]:
            assert quoted[i["event_id"]]["role"] == i["role"] == "initiating fault"
            assert i["rank"] in d["initiating_ranks"]


def test_an_initiating_event_without_a_time_axis_says_why() -> None:
    # public-02: rank 2's OOM has no stamp of its own, and the only stamps in the logs are two Hydra lines of
    # one time (23:04:07,257): no time axis, though the OOM's file has stamps; the report says so
    from correlator.report import initiating_lines

    t = correlator.load(CASES / "public-02-oom-rank2-multinode-timeouts" / "logs")
    stamps = t.filter(~pl.col("duplicate") & (pl.col("kind") != "blank"))["ts"].drop_nulls()
    assert stamps.n_unique() == 1 and stamps.len() >= 1
    d = correlator.diagnose(t)
    (e,) = d.initiating_events
    assert (e.rank, e.ts, e.ts_basis) == (2, None, "event order")
    assert (
        t.filter((pl.col("path") == e.path) & pl.col("ts").is_not_null()).height >= 1
    )  # its file has a stamp
    assert initiating_lines(d) == [
        f"rank 2: cuda_oom at no known time (the logs carry fewer than two distinct stamps) — {e.path}:{e.line}"
    ]
