"""Diagnosis on small hand-built event tables: one test per edge type and per failure kind."""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl

from correlator import build_graph, diagnose
from correlator.schema import conform

T0 = dt.datetime(2026, 11, 29, 23, 0, 0, tzinfo=dt.UTC)


def ev(rank: int | None, kind: str, sec: float = 0, **kw: Any) -> dict[str, Any]:
    row = {
        "rank": rank,
        "kind": kind,
        "ts": T0 + dt.timedelta(seconds=sec),
        "ts_quality": "no_tz",
        "layer": kw.pop("layer", "c10d"),
        "severity": "error",
        "path": f"rank{rank}.log",
        "line": 1,
        "line_count": 1,
        "message": kw.pop("message", kind),
        "attempt": kw.pop("attempt", 0),
        "duplicate": False,
        "host": kw.pop("host", "node-a"),
        "stream": "stderr",
    }
    row.update(kw)
    row["raw"] = row["message"]
    return row


def table(rows: list[dict[str, Any]]) -> pl.DataFrame:
    df = pl.DataFrame(rows, infer_schema_length=None)
    return conform(df.with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64)))


def progress(rank: int, step: int, sec: float = 0) -> dict[str, Any]:
    return ev(rank, "step_progress", sec, layer="app", severity="info", step=step, message=f"step={step}")


def timeout(rank: int, seq: int, sec: float = 600, op: str = "ALLREDUCE", numel: int = 8) -> dict[str, Any]:
    return ev(
        rank,
        "watchdog_timeout",
        sec,
        seq=seq,
        op=op,
        numel=numel,
        timeout_ms=600000,
        elapsed_ms=600100,
        pg="0",
    )


def test_crash_then_timeouts_waits_for_edges() -> None:
    rows = [progress(r, 9) for r in range(4)] + [
        ev(2, "cuda_oom", 1, exc_type="torch.cuda.OutOfMemoryError", layer="python"),
        timeout(0, 100),
        timeout(1, 100),
        timeout(3, 100),
    ]
    d = diagnose(table(rows))
    assert (d.initiating_ranks, d.collateral_ranks, d.failure_kind) == ([2], [0, 1, 3], "cuda_oom")
    G = build_graph(table(rows))
    assert {(a, b, e["edge"], e["seq"]) for a, b, e in G.edges(data=True)} == {
        (0, 2, "waits_for", 100),
        (1, 2, "waits_for", 100),
        (3, 2, "waits_for", 100),
    }


def test_silent_straggler_is_the_initiator() -> None:
    rows = [progress(r, 5) for r in range(4)] + [timeout(0, 40), timeout(1, 40), timeout(2, 40)]
    d = diagnose(table(rows))
    assert (d.initiating_ranks, d.collateral_ranks, d.failure_kind) == ([3], [0, 1, 2], "straggler_hang")
    assert any("silence" in r for r in d.confidence_reasons)
    assert d.confidence_reasons == [
        "the initiating rank logged no error; it was found by its silence",
        "no launcher output to confirm exit statuses",
    ]


def test_straggler_behind_on_sequence_even_with_its_own_timeout() -> None:
    rows = [
        ev(r, "collective_fingerprint", 1, seq=40, op="ALLREDUCE", numel=8, layer="c10d") for r in (0, 1, 2)
    ]
    rows += [ev(3, "collective_fingerprint", 1, seq=39, op="ALLREDUCE", numel=8)]
    rows += [timeout(r, 40) for r in (0, 1, 2)] + [timeout(3, 39)]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [3] and d.failure_kind == "straggler_hang"


def test_rank_that_exited_zero_early() -> None:
    rows = [progress(r, 5) for r in range(4)] + [
        ev(
            None,
            "worker_signalled",
            601,
            layer="elastic",
            pid=11,
            signal="SIGTERM",
            message="Sending process 11 closing signal SIGTERM",
        ),
        timeout(0, 50),
        timeout(1, 50),
        timeout(2, 50),
    ]
    rows[-4]["rank"] = 0
    d = diagnose(table(rows))
    assert (d.initiating_ranks, d.failure_kind) == ([3], "early_exit")
    assert {s.explained_by.edge for s in d.per_rank if s.explained_by} == {"exited_before"}


def test_two_ranks_failing_independently() -> None:
    rows = [progress(r, 3) for r in range(4)] + [
        ev(1, "python_exception", 2, exc_type="ValueError", layer="python"),
        ev(3, "cuda_error", 4, exc_type="RuntimeError", layer="python"),
        timeout(0, 20),
        timeout(2, 20),
    ]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [1, 3] and d.collateral_ranks == [0, 2]
    assert any("independently" in r for r in d.confidence_reasons)
    assert d.confidence_reasons[0] == "2 ranks failed independently before any other rank reacted"


def test_common_mode_failure_names_all() -> None:
    rows = [
        ev(
            r,
            "python_exception",
            1,
            exc_type="RuntimeError",
            layer="python",
            message="RuntimeError: segfault in kernel",
        )
        for r in range(4)
    ]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [0, 1, 2, 3] and any("common mode" in r for r in d.confidence_reasons)
    assert d.confidence_reasons[0] == "4 ranks failed the same way at about the same time (common mode)"


def test_missing_rank_log_is_suspect() -> None:
    rows = [ev(r, "nccl_init", 0, layer="nccl", world_size=4, severity="info") for r in (0, 1, 2)]
    rows += [timeout(r, 7) for r in (0, 1, 2)]
    d = diagnose(table(rows))
    assert d.world_size == 4 and d.initiating_ranks == [3] and d.failure_kind == "straggler_hang"
    assert d.confidence < 0.7
    assert d.confidence == 0.55  # 0.95 - 0.35 (named because it is missing) - 0.05 (no launcher output)


def test_mismatch_odd_one_out() -> None:
    rows = [ev(r, "collective_fingerprint", 1, seq=12, op="ALLREDUCE", shape="[4]") for r in (0, 1, 2)]
    rows += [ev(3, "collective_fingerprint", 1, seq=12, op="BROADCAST", shape="[4]")]
    rows += [ev(r, "collective_mismatch", 2, seq=12, op="ALLREDUCE", peer_rank=3) for r in (0, 1, 2)]
    d = diagnose(table(rows))
    assert (d.initiating_ranks, d.collateral_ranks, d.failure_kind) == ([3], [0, 1, 2], "collective_mismatch")
    assert {s.explained_by.edge for s in d.per_rank if s.explained_by} == {"mismatch"}


def test_divergent_numel_in_watchdog_timeouts() -> None:
    rows = [timeout(r, 2, op="_ALLGATHER_BASE", numel=5242880) for r in range(8) if r != 5]
    rows += [timeout(5, 2, op="_ALLGATHER_BASE", numel=5505024)]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [5] and d.failure_kind == "collective_mismatch"


def test_sigkill_and_killed_by_edges() -> None:
    rows = [progress(r, 3) for r in range(4)]
    rows += [ev(2, "worker_failed", 10, layer="elastic", exit_code=-9, pid=12)]
    rows += [ev(r, "worker_signalled", 10, layer="elastic", signal="SIGTERM", pid=10 + r) for r in (0, 1, 3)]
    d = diagnose(table(rows))
    assert (d.initiating_ranks, d.collateral_ranks, d.failure_kind) == ([2], [0, 1, 3], "oom_kill")
    assert {s.explained_by.edge for s in d.per_rank if s.explained_by} == {"killed_by"}


def test_peer_error_edge_and_network_kind() -> None:
    rows = [
        ev(
            11,
            "nccl_net_error",
            5,
            layer="nccl",
            peer_addr="192.0.2.11",
            message="NET/IB: Got completion from peer",
        )
    ]
    rows += [ev(r, "gloo_connection_closed", 9, peer_rank=11) for r in (0, 1)]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [11] and d.failure_kind == "network_error"
    assert {s.explained_by.edge for s in d.per_rank if s.explained_by} == {"peer_error"}


def test_monitored_barrier_names_the_stuck_rank() -> None:
    rows = [progress(r, 3) for r in range(4)]
    rows += [
        ev(
            0,
            "monitored_barrier_failed",
            20,
            pg_rank=0,
            peer_rank=2,
            message="Ranks 2 failed to pass monitoredBarrier in 15000 ms",
            ranks_named="2",
        )
    ]
    rows += [ev(r, "monitored_barrier_peer", 20, peer_rank=0) for r in (1, 3)]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [2] and d.failure_kind == "straggler_hang"


def test_clean_run_and_empty_table() -> None:
    d = diagnose(table([progress(r, 9) for r in range(4)]))
    assert (d.failure_kind, d.initiating_ranks, d.clean_ranks) == ("none", [], [0, 1, 2, 3])
    empty = diagnose(
        conform(pl.DataFrame({"rank": [], "kind": []}, schema={"rank": pl.Int32, "kind": pl.String}))
    )
    assert empty.failure_kind == "none"
    assert (empty.initiating_ranks, empty.ranks_seen, empty.confidence) == ([], [], 0.3)


def test_first_failed_attempt_is_the_verdict() -> None:
    rows = [ev(1, "python_exception", 1, exc_type="ValueError", layer="python", attempt=0)]
    rows += [ev(r, "worker_signalled", 2, layer="elastic", attempt=0, signal="SIGTERM") for r in (0, 2)]
    rows += [ev(3, "python_exception", 100, exc_type="KeyError", layer="python", attempt=1)]
    rows += [ev(r, "worker_signalled", 101, layer="elastic", attempt=1, signal="SIGTERM") for r in (0, 1, 2)]
    d = diagnose(table(rows))
    assert d.attempt == 0 and d.initiating_ranks == [1]
    assert [a.attempt for a in d.attempts] == [0, 1] and d.attempts[1].initiating_ranks == [3]
    js = d.to_json()
    assert [a["attempt"] for a in js["attempts"]] == [0, 1]
    assert diagnose(table(rows), attempt=1).initiating_ranks == [3]


def test_mismatch_detected_but_odd_rank_unknown_is_said_honestly() -> None:
    rows = [progress(r, 3) for r in range(4)]
    rows += [
        ev(
            2,
            "collective_mismatch",
            5,
            message="op.preamble.length <= op.nbytes. 384 vs 256. Received data size "
            "doesn't match expected size.",
        )
    ]
    rows += [ev(r, "worker_signalled", 6, layer="elastic", signal="SIGTERM") for r in (0, 1, 3)]
    d = diagnose(table(rows))
    assert d.failure_kind == "collective_mismatch" and 2 not in d.initiating_ranks
    assert any("could not be determined" in r for r in d.confidence_reasons) and d.confidence < 0.8
    # 0.95 - 0.2 (silence) - 0.35 (odd rank could not be determined) = 0.4, capped at 0.3: three suspects of four
    assert d.confidence == 0.3


def test_config_line_names_the_odd_rank() -> None:
    rows = [
        ev(
            r,
            "log",
            0,
            layer="app",
            severity="info",
            message=f"rank={r} model hidden={48 if r == 1 else 32} params={1012 if r == 1 else 676}",
        )
        for r in range(4)
    ]
    rows += [ev(2, "collective_mismatch", 5, message="Received data size doesn't match expected size.")]
    rows += [ev(r, "worker_signalled", 6, layer="elastic", signal="SIGTERM") for r in (0, 1, 3)]
    d = diagnose(table(rows))
    assert (d.initiating_ranks, d.failure_kind) == ([1], "collective_mismatch")
