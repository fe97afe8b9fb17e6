"""``correlator/diagnose.py`` on minimal event tables: the exact summary sentence, the confidence (0.95 less
the documented penalty of each reason), the evidence rows with their roles, the per-rank statuses and the
JSON contract. Each expected confidence is worked out in the comment next to it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl

from correlator import diagnose, summary
from correlator.quotes import first_line
from correlator.ranks import ranges
from correlator.schema import conform
from correlator.verdict import iso
from tests.test_diagnose_units import T0, ev, progress, table, timeout

NO_LAUNCHER = "no launcher output to confirm exit statuses"


def ev_rows(d: Any) -> list[tuple[int | None, str, str, str]]:
    return [(e.rank, e.kind, e.text, e.role) for e in d.evidence]


def test_crash_summary_confidence_and_evidence() -> None:
    rows = [progress(r, 9) for r in range(4)] + [
        ev(
            2,
            "cuda_oom",
            1,
            exc_type="torch.cuda.OutOfMemoryError",
            layer="python",
            message="torch.OutOfMemoryError: CUDA out of memory.\nTried to allocate 2.00 GiB",
        ),
        timeout(0, 100),
        timeout(1, 100),
        timeout(3, 100),
    ]
    d = diagnose(table(rows))
    assert d.summary == (
        "rank 2 (node-a) failed first: torch.cuda.OutOfMemoryError; 3 ranks timed out waiting for it "
        "in ALLREDUCE SeqNum 100."
    )
    assert d.confidence == 0.9  # 0.95 - 0.05 (no launcher)
    assert d.confidence_reasons == [NO_LAUNCHER]
    assert d.confidence_reason_codes == ["NO_LAUNCHER"]
    # a cuda_oom row is quoted by its message (first line only); a timeout by its raw line
    assert ev_rows(d) == [
        (2, "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory.", "initiating fault"),
        (0, "watchdog_timeout", "watchdog_timeout", "collateral: rank 0 waits for rank 2"),
    ]
    e = d.evidence[0]
    assert (e.path, e.line, e.ts) == ("rank2.log", 1, "2026-11-29T23:00:01Z")
    assert d.focus == {"pg": "0", "seq": 100, "op": "ALLREDUCE"}
    assert (d.initiating_ranks, d.collateral_ranks, d.clean_ranks, d.missing_ranks) == (
        [2],
        [0, 1, 3],
        [],
        [],
    )
    assert (d.world_size, d.ranks_seen, d.attempt, d.initiator_basis) == (
        None,
        [0, 1, 2, 3],
        0,
        "first fault",
    )
    pr = {s.rank: s for s in d.per_rank}
    assert (pr[2].status, pr[2].first_fault_kind, pr[2].first_fault_ts, pr[2].explained_by) == (
        "initiating",
        "cuda_oom",
        "2026-11-29T23:00:01Z",
        None,
    )
    assert (pr[0].status, pr[0].first_fault_ts, pr[0].first_fault_ts_quality) == (
        "collateral",
        "2026-11-29T23:10:00Z",
        "no_tz",
    )
    assert (
        pr[0].explained_by.rank,
        pr[0].explained_by.edge,
        pr[0].explained_by.pg,
        pr[0].explained_by.seq,
    ) == (2, "waits_for", "0", 100)
    assert (pr[0].host, pr[0].local_rank) == ("node-a", None)


def test_summary_names_host_and_local_rank() -> None:
    rows = [ev(r, "log", 0, severity="info", local_rank=r % 2, host=f"node-{'ab'[r // 2]}") for r in range(4)]
    rows += [ev(3, "python_exception", 1, exc_type="KeyError", layer="python", local_rank=1, host="node-b")]
    d = diagnose(table(rows))
    assert d.summary == "rank 3 (node-b, local rank 1) failed first: KeyError."
    assert [(s.rank, s.host, s.local_rank) for s in d.per_rank] == [
        (0, "node-a", 0),
        (1, "node-a", 1),
        (2, "node-b", 0),
        (3, "node-b", 1),
    ]
    assert d.clean_ranks == [0, 1, 2]


def test_silent_straggler_summary() -> None:
    d = diagnose(table([progress(r, 5) for r in range(4)] + [timeout(0, 40), timeout(1, 40), timeout(2, 40)]))
    assert d.summary == (
        "rank 3 (node-a) went silent (no error) while the others failed; 3 ranks timed out waiting "
        "for it in ALLREDUCE SeqNum 40."
    )
    assert d.confidence == 0.7  # 0.95 - 0.2 (silence) - 0.05 (no launcher)
    assert ev_rows(d) == [
        (3, "step_progress", "step=5", "last sign of life of rank 3"),
        (0, "watchdog_timeout", "watchdog_timeout", "collateral: rank 0 waits for rank 3"),
    ]


def test_several_silent_ranks_cap_the_confidence() -> None:
    # ranks 0-6 time out in SeqNum 3; 7 and 8 are silent and equally far behind: two suspects of nine
    rows = [progress(r, 1) for r in range(9)] + [timeout(r, 3) for r in range(7)]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [7, 8]
    assert d.confidence == 0.5  # 0.95 - 0.2 - 0.05 = 0.7, capped at 0.5 (2 * 4 < 9 ranks seen)
    rows = [progress(r, 1) for r in range(4)] + [timeout(r, 3) for r in range(2)]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [2, 3]
    assert d.confidence == 0.3  # capped at 0.3: 2 * 4 >= 4 ranks seen
    assert d.summary == (
        "rank 2 (node-a), rank 3 (node-a) went silent (no error) while the others failed; "
        "2 ranks timed out waiting for them in ALLREDUCE SeqNum 3."
    )


def test_behind_summary() -> None:
    rows = [ev(r, "collective_fingerprint", 1, seq=40, op="ALLREDUCE", numel=8) for r in (0, 1, 2)]
    rows += [ev(3, "collective_fingerprint", 1, seq=39, op="ALLREDUCE", numel=8)]
    rows += [timeout(r, 40) for r in (0, 1, 2)] + [timeout(3, 39)]
    d = diagnose(table(rows))
    assert d.summary == (
        "rank 3 (node-a) fell behind on the collective sequence; 3 ranks timed out waiting for it "
        "in ALLREDUCE SeqNum 40."
    )
    assert d.confidence == 0.75  # 0.95 - 0.15 (lagging) - 0.05


def test_bare_exit_summary() -> None:
    rows = [progress(r, 5) for r in range(3)] + [ev(1, "worker_failed", 9, layer="elastic", exit_code=1)]
    d = diagnose(table(rows))
    assert d.summary == "rank 1 (node-a) failed first: exit code 1."
    assert d.confidence == 0.8  # 0.95 - 0.15 (only an exit status); the launcher is present
    assert ev_rows(d) == [(1, "worker_failed", "worker_failed", "initiating fault")]
    assert d.clean_ranks == [0, 2] and d.collateral_ranks == []


def test_signal_exit_summary_and_launcher_evidence() -> None:
    rows = [progress(r, 3) for r in range(3)] + [ev(2, "worker_failed", 10, layer="elastic", exit_code=-11)]
    rows += [ev(r, "worker_signalled", 11, layer="elastic", signal="SIGTERM") for r in (0, 1)]
    d = diagnose(table(rows))
    assert (
        d.summary
        == "rank 2 (node-a) failed first: exit code -11 (SIGSEGV); 2 other ranks failed as a consequence."
    )
    assert d.confidence == 0.95
    assert ev_rows(d) == [
        (2, "worker_failed", "worker_failed", "initiating fault"),
        (0, "worker_signalled", "worker_signalled", "collateral: rank 0 killed by rank 2"),
    ]


def test_exception_with_launcher_report() -> None:
    rows = [progress(r, 3) for r in range(3)]
    rows += [
        ev(1, "python_exception", 6, exc_type="KeyError", layer="python", message="KeyError: 'label'"),
        ev(1, "worker_failed", 7, layer="elastic", exit_code=1),
        ev(
            1,
            "root_cause_entry",
            8,
            layer="elastic",
            exit_code=1,
            message="rank 1 (local_rank: 1) exitcode 1",
        ),
        ev(0, "worker_signalled", 7, layer="elastic", signal="SIGTERM"),
    ]
    d = diagnose(table(rows))
    assert d.summary == "rank 1 (node-a) failed first: KeyError; 1 other rank failed as a consequence."
    assert ev_rows(d) == [
        (1, "python_exception", "KeyError: 'label'", "initiating fault"),
        (1, "worker_failed", "worker_failed", "launcher"),
        (
            1,
            "root_cause_entry",
            "rank 1 (local_rank: 1) exitcode 1",
            "launcher (weak: torchrun's root cause is often wrong)",
        ),
        (0, "worker_signalled", "worker_signalled", "collateral: rank 0 killed by rank 1"),
    ]


def test_cuda_error_summary_quotes_the_message() -> None:
    msg = "CUDA error: an illegal memory access was encountered " + "x" * 100
    rows = [progress(r, 1) for r in range(2)] + [ev(1, "cuda_error", 2, layer="python", message=msg)]
    d = diagnose(table(rows))
    # no space in the last half of the 120 characters the headline keeps: a hard cut
    assert d.summary == f"rank 1 (node-a) failed first: {msg[:119]}…."
    assert d.failure_kind == "cuda_error"


def test_network_summaries() -> None:
    msg = "NET/IB : Got completion from peer 10.0.0.2 with error 12"
    rows = [
        ev(0, "nccl_net_error", 5, layer="nccl", host="node-a", peer_addr="10.0.0.2", message=msg),
        ev(1, "nccl_net_error", 5.5, layer="nccl", host="node-a", peer_addr="10.0.0.2", message=msg),
        ev(2, "log", 0, host="node-b", severity="info", local_addr="10.0.0.2"),
        ev(3, "log", 0, host="node-b", severity="info"),
    ]
    d = diagnose(table(rows))
    assert d.summary == (
        "rank 2 (node-b), rank 3 (node-b) became unreachable (their host stopped logging; the others "
        "lost their connections to it); 2 other ranks failed as a consequence."
    )
    assert d.confidence == 0.7  # 0.95 - 0.2 (stopped logging) - 0.05
    assert ev_rows(d) == [
        (0, "nccl_net_error", msg, "points at rank 2 (reported by rank 0)"),
        (2, "log", "log", "last sign of life of rank 2"),
        (3, "log", "log", "last sign of life of rank 3"),
    ]
    link = [
        ev(0, "nccl_net_error", 5, layer="nccl", message="NET/IB : a"),
        ev(1, "nccl_net_error", 5.4, layer="nccl", message="NET/IB : b"),
        ev(2, "nccl_net_error", 9, layer="nccl", message="NET/IB : c"),
        ev(3, "log", 0, severity="info"),
    ]
    d = diagnose(table(link))
    assert d.summary == "rank 0 (node-a), rank 1 (node-a) failed first; 1 other rank failed as a consequence."
    assert d.confidence == 0.75  # 0.95 - 0.15 (several ranks saw network errors) - 0.05


def test_barrier_summaries() -> None:
    rows = [progress(r, 3) for r in range(4)]
    rows += [
        ev(
            0,
            "monitored_barrier_failed",
            20,
            pg_rank=0,
            message="Ranks 2 failed to pass monitoredBarrier in 15000 ms",
            ranks_named="2",
        )
    ]
    d = diagnose(table(rows))
    assert (
        d.summary == "rank 2 (node-a) never reached the monitored barrier; 1 rank timed out waiting for it."
    )
    assert d.confidence == 0.9
    assert ev_rows(d)[0] == (2, "step_progress", "step=3", "last sign of life of rank 2")
    rows += [ev(2, "watchdog_timeout", 30, seq=5, pg="0", op="ALLREDUCE")]
    d = diagnose(table(rows))
    assert (
        d.summary
        == "rank 2 (node-a) never reached the monitored barrier; 1 other rank failed as a consequence."
    )
    assert d.confidence == 0.8  # 0.95 - 0.1 (did not wait in the barrier) - 0.05


def test_mismatch_summary_and_evidence() -> None:
    rows = [ev(r, "collective_fingerprint", 1, seq=12, op="ALLREDUCE", shape="[4]") for r in (0, 1, 2)]
    rows += [ev(3, "collective_fingerprint", 1, seq=12, op="BROADCAST", shape="[4]")]
    d = diagnose(table(rows))
    assert d.summary == "rank 3 (node-a) ran a different collective than the others."
    assert d.confidence == 0.9
    assert d.focus == {"pg": "0", "seq": 12, "majority": "ALLREDUCE [4]"}  # evidence and own are not exported
    # the initiator's own line, then the first three claims at that (pg, seq) (the fourth is its own line again)
    assert [e.role for e in d.evidence] == ["initiating fault"] + ["collective disagreement"] * 3
    assert [e.rank for e in d.evidence] == [3, 0, 1, 2]
    rows += [ev(r, "collective_mismatch", 2, seq=12, op="ALLREDUCE", peer_rank=3) for r in (0, 1, 2)]
    d = diagnose(table(rows))
    assert d.summary == (
        "rank 3 (node-a) ran a different collective than the others; 3 other ranks failed as a "
        "consequence in collective SeqNum 12."
    )


def test_even_split_confidence() -> None:
    rows = [
        ev(r, "collective_fingerprint", 1, seq=7, op="ALLREDUCE" if r < 2 else "BROADCAST", shape="[4]")
        for r in range(4)
    ]
    rows += [ev(r, "watchdog_timeout", 600) for r in range(4)]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [0, 1, 2, 3]
    assert d.confidence == 0.6  # 0.95 - 0.3 (evenly) - 0.05
    assert d.summary == "ranks 0-3 (node-a) ran a different collective than the others."


def test_common_mode_summary() -> None:
    rows = [
        ev(r, "python_exception", 1, exc_type="RuntimeError", layer="python", host=f"node-{r % 2}")
        for r in range(4)
    ]
    d = diagnose(table(rows))
    assert d.summary == "ranks 0-3 (node-0, node-1) failed first: RuntimeError."
    assert d.confidence == 0.85  # 0.95 - 0.05 (common mode) - 0.05


def test_independent_failures_confidence() -> None:
    rows = [progress(r, 3) for r in range(4)] + [
        ev(1, "python_exception", 2, exc_type="ValueError", layer="python"),
        ev(3, "cuda_error", 4, exc_type="RuntimeError", layer="python"),
        timeout(0, 20),
        timeout(2, 20),
    ]
    d = diagnose(table(rows))
    assert d.confidence == 0.75  # 0.95 - 0.15 (independently) - 0.05
    assert d.summary == (
        "rank 1 (node-a), rank 3 (node-a) failed first: ValueError; 2 ranks timed out waiting for "
        "them in ALLREDUCE SeqNum 20."
    )


def test_missing_rank_summary_and_confidence() -> None:
    rows = [ev(r, "nccl_init", 0, layer="nccl", world_size=4, severity="info") for r in (0, 1, 2)]
    rows += [timeout(r, 7) for r in (0, 1, 2)]
    d = diagnose(table(rows))
    assert d.summary == "rank 3 left no log; 3 ranks timed out waiting for it in ALLREDUCE SeqNum 7."
    assert d.confidence == 0.55  # 0.95 - 0.35 (missing) - 0.05
    assert (d.missing_ranks, d.initiating_ranks, d.clean_ranks) == ([], [3], [])
    rows = [ev(r, "nccl_init", 0, layer="nccl", world_size=6, severity="info") for r in range(4)]
    rows += [ev(1, "python_exception", 1, exc_type="ValueError", layer="python")]
    d = diagnose(table(rows))
    assert (d.missing_ranks, d.clean_ranks, d.world_size) == ([4, 5], [0, 2, 3], 6)
    assert d.confidence == 0.85  # 0.95 - 0.05 (left no log) - 0.05 (no launcher)


def test_no_failure_and_no_rank_summaries() -> None:
    d = diagnose(table([progress(r, 9) for r in range(2)]))
    assert (d.summary, d.confidence, d.evidence) == (
        "No failure found: 2 ranks, none reported a fault.",
        0.9,
        [],
    )
    d = diagnose(table([progress(0, 9)]))
    assert d.summary == "No failure found: 1 rank, none reported a fault."
    empty = diagnose(
        conform(pl.DataFrame({"rank": [], "kind": []}, schema={"rank": pl.Int32, "kind": pl.String}))
    )
    assert (empty.summary, empty.confidence) == ("No failure found: 0 ranks, none reported a fault.", 0.3)
    rankless = [
        ev(
            None,
            "python_exception",
            3,
            exc_type="ValueError",
            layer="python",
            path="job.log",
            line=7,
            message="ValueError: bad shard",
        )
    ]
    d = diagnose(table(rankless))
    assert d.summary == (
        "No rank could be named: the logs show ValueError at job.log:7, on a line that names no rank "
        "(failure kind rank_crash)."
    )
    assert d.confidence == 0.3  # 0.95 - 0.6 (name no rank) - 0.05
    assert ev_rows(d) == [(None, "python_exception", "ValueError: bad shard", "fault (no rank named)")]
    launcher = [
        progress(0, 1),
        ev(None, "launcher_error", 3, layer="elastic", message="RendezvousTimeoutError"),
    ]
    d = diagnose(table(launcher))
    assert d.summary == "Failure of kind launcher_error, but no rank could be named as its origin."
    assert d.confidence == 0.95


def test_later_failed_attempt_lowers_confidence() -> None:
    rows = [ev(1, "python_exception", 1, exc_type="ValueError", layer="python", attempt=0)]
    rows += [ev(r, "worker_signalled", 2, layer="elastic", attempt=0, signal="SIGTERM") for r in (0, 2)]
    rows += [ev(3, "python_exception", 100, exc_type="KeyError", layer="python", attempt=1)]
    rows += [ev(r, "worker_signalled", 101, layer="elastic", attempt=1, signal="SIGTERM") for r in (0, 1, 2)]
    d = diagnose(table(rows))
    assert d.confidence == 0.9  # 0.95 - 0.05 (a later attempt failed too)
    assert d.confidence_reasons == [
        "1 later attempt(s) also failed; the verdict is the first failed attempt's"
    ]
    assert d.confidence_reason_codes == ["LATER_ATTEMPTS_FAILED"]
    assert [a.confidence for a in d.attempts] == [0.9, 0.95]
    one = diagnose(table(rows), attempt=1)
    assert (one.attempt, one.confidence, one.confidence_reasons) == (1, 0.95, [])
    j = d.to_json()
    assert next(iter(j)) == "schema_version" and j["schema_version"] == 1
    assert [(a["attempt"], a["initiating_ranks"], a["confidence"]) for a in j["attempts"]] == [
        (0, [1], 0.9),
        (1, [3], 0.95),
    ]
    assert "per_rank" not in j["attempts"][0] and "attempts" not in j["attempts"][1]
    assert j["per_rank"][1] == {
        "rank": 1,
        "host": "node-a",
        "local_rank": None,
        "status": "initiating",
        "first_fault_ts": "2026-11-29T23:00:01Z",
        "first_fault_kind": "python_exception",
        "explained_by": None,
        "first_fault_ts_quality": "no_tz",
    }
    # an attempt with no fault of its own is diagnosed alone
    rows += [ev(0, "log", 200, severity="info", attempt=2)]
    two = diagnose(table(rows), attempt=2)
    assert (two.attempt, two.failure_kind, two.attempts) == (2, "none", [])
    single = diagnose(table(rows[:3]))
    assert single.attempts == [] and single.to_json()["attempts"] == []


def test_helpers() -> None:
    assert iso(None) is None
    assert iso(T0) == "2026-11-29T23:00:00Z"
    assert iso(T0 + dt.timedelta(microseconds=1500)) == "2026-11-29T23:00:00.001500Z"
    assert (
        iso(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))))
        == "2026-01-02T01:04:05Z"
    )
    assert iso("x") == "x"
    assert first_line("a\nb") == "a"
    assert first_line(None) == ""
    assert first_line("y" * 4000) == "y" * 4000
    assert first_line("y" * 4001) == "y" * 3999 + "…"
    assert first_line("abcdef", 4) == "abc…"
    assert [summary._signal_name(c) for c in (-11, -9, -15, -6, 0, 1, None, -999)] == [
        "SIGSEGV",
        "SIGKILL",
        "SIGTERM",
        "SIGABRT",
        None,
        None,
        None,
        None,
    ]
    assert summary._ranges([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8"


def test_confidence_penalties_add_up_and_floor() -> None:
    from correlator.confidence import Note, Reason
    from correlator.graph import Findings
    from correlator.verdict import Basis

    def conf(
        reasons: list[Reason],
        basis: str = "first fault",
        inits: tuple[int, ...] = (0,),
        kind: str = "rank_crash",
        seen: tuple[int, ...] = (0, 1),
    ) -> float:
        F = Findings(
            attempt=0,
            attempts=(0,),
            clocks={},
            world_size=None,
            ranks_seen=seen,
            missing=(),
            initiators=inits,
            basis=Basis(basis),
            failure_kind=kind,
            reasons=tuple(Note(r, {}) for r in reasons),
            focus={},
            signalled=(),
            launcher_present=True,
        )
        return summary._confidence(F)

    assert conf([]) == 0.95
    assert conf([Reason.CONFIG_LINE]) == 0.85
    assert conf([Reason.FOUND_BY_SILENCE, Reason.MISSING_LOGS]) == 0.7  # 0.95 - 0.2 - 0.05
    assert conf([Reason.INITIATOR_LEFT_NO_LOG]) == 0.6  # 0.95 - 0.35
    assert conf([Reason.MISSING_LOGS]) == 0.9
    assert conf([Reason.CLOCKS_UNALIGNED]) == 0.85
    assert conf([Reason.IDENTITY_INFERRED]) == 0.85
    assert conf([Reason.STALL_REPORT, Reason.NAMED_BY_WAITERS]) == 0.95  # notes take nothing off
    assert conf([Reason.NO_RANK_NAMED, Reason.NONE_EXPLAINS, Reason.INITIATOR_LEFT_NO_LOG]) == 0.05  # floor
    assert conf([], kind="none") == 0.9
    assert conf([], kind="none", seen=()) == 0.3
    assert conf([], basis="left no log", inits=(0, 1), seen=tuple(range(9))) == 0.5
    assert conf([], basis="left no log", inits=(0, 1), seen=tuple(range(8))) == 0.3
    assert conf([], basis="silent while the others failed", inits=(0,), seen=tuple(range(8))) == 0.95


def test_evidence_keeps_table_order_and_skips_duplicates() -> None:
    rows = [progress(r, 9) for r in range(3)] + [
        ev(2, "python_exception", 1, exc_type="ValueError", layer="python", message="ValueError: x"),
        ev(
            2,
            "python_exception",
            1,
            exc_type="ValueError",
            layer="python",
            message="ValueError: x",
            duplicate=True,
        ),
        timeout(0, 5),
        timeout(1, 5),
    ]
    d = diagnose(table(rows))
    assert [(e.rank, e.role) for e in d.evidence] == [
        (2, "initiating fault"),
        (0, "collateral: rank 0 waits for rank 2"),
    ]


def test_to_json_holds_plain_dicts_for_rows() -> None:
    rows = [progress(r, 9) for r in range(2)] + [
        ev(1, "python_exception", 1, exc_type="ValueError", layer="python")
    ]
    j = diagnose(table(rows)).to_json()
    assert [type(x) for x in j["evidence"]] == [dict]
    assert [type(x) for x in j["per_rank"]] == [dict, dict]
    assert j["evidence"][0]["role"] == "initiating fault"


def test_rankless_faults_kind_from_the_first_cause_and_all_quoted() -> None:
    rows = [
        ev(None, "python_exception", 3, exc_type="ValueError", layer="python", path="job.log"),  # id 0
        ev(None, "cuda_oom", 4, exc_type="torch.OutOfMemoryError", layer="python", path="job.log"),  # id 1
        ev(None, "cuda_error", 5, layer="python", path="job.log"),  # id 2
        ev(None, "python_exception", 6, exc_type="KeyError", layer="python", path="job.log"),
    ]  # id 3
    from correlator import build_graph

    G = build_graph(table(rows))
    # the first cause decides (a later CUDA OOM does not outrank it); three rows are quoted
    assert (G.graph["failure_kind"], G.graph["focus"]) == ("rank_crash", {"evidence": [0, 1, 2]})


def test_ranks_that_failed_without_a_named_initiator_are_unexplained_never_clean() -> None:
    # Every rank that logged times out in the same collective; nothing says who they waited for: no
    # initiating rank, and the ranks that timed out are not clean (a script reading clean_ranks would treat
    # them as healthy).
    rows = [progress(r, 1) for r in range(3)]
    rows += [timeout(r, 9) for r in (0, 1, 2)]
    d = diagnose(table(rows))
    assert d.initiating_ranks == []
    assert (d.unexplained_ranks, d.clean_ranks, d.collateral_ranks) == ([0, 1, 2], [], [])
    assert {s.rank: s.status for s in d.per_rank} == {0: "unexplained", 1: "unexplained", 2: "unexplained"}
    doc = d.to_json()
    assert doc["unexplained_ranks"] == [0, 1, 2] and doc["clean_ranks"] == []
    from correlator.report import render_markdown

    assert f"- failed, no initiator named: {ranges([0, 1, 2])}" in render_markdown(d)


def test_summary_states_a_timeout_only_where_the_ranks_logged_one() -> None:
    crash = [progress(r, 1) for r in range(3)] + [
        ev(0, "python_exception", 2, exc_type="ValueError", layer="python")
    ]
    # ranks 1 and 2 only exited with status 1 (pytorch 130113's ranks 0 and 2): neither a timeout nor a wait shows
    exits = [ev(r, "worker_failed", 5, layer="elastic", exit_code=1) for r in (1, 2)]
    d = diagnose(table(crash + exits))
    assert d.summary == "rank 0 (node-a) failed first: ValueError; 2 other ranks failed as a consequence."
    # one watchdog timeout each: they timed out waiting
    d = diagnose(table(crash + [timeout(r, 9) for r in (1, 2)]))
    assert d.summary.startswith("rank 0 (node-a) failed first: ValueError; 2 ranks timed out waiting for it")
    # a pending Flight Recorder entry shows a wait, not a timeout
    pending = [ev(r, "fr_waiting", 4, layer="fr", pg="0", seq=36) for r in (1, 2)]
    d = diagnose(table(crash + pending))
    assert d.summary.endswith("; 2 ranks waited for it in collective SeqNum 36.")


def test_evidence_keeps_a_long_line_whole_in_json_and_the_terminal_shows_a_cut() -> None:
    import io

    from rich.console import Console

    from correlator.report import render_text

    fp = "CollectiveFingerPrint(SequenceNumber=34, OpType={}, TensorShape=[2], TensorDtypes=Float, TensorDeviceTypes="
    # the fingerprint as torch 2.x prints it (cap-05 capture, TORCH_DISTRIBUTED_DEBUG=DETAIL)
    fp += "TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false (default), "
    fp += "pinned_memory=false (default), memory_format=(nullopt)))"
    msg = "RuntimeError: Detected mismatch between collectives on ranks. Rank 3 is running collective: "
    msg += fp.format("BROADCAST") + ", but Rank 0 is running collective: " + fp.format("ALLREDUCE") + "."
    assert 600 < len(msg) < 4000
    rows = [progress(r, 1) for r in range(4)] + [
        ev(3, "python_exception", 2, exc_type="RuntimeError", layer="python", message=msg)
    ]
    d = diagnose(table(rows))
    (init,) = [e for e in d.evidence if e.role == "initiating fault"]
    assert init.text == msg
    buf = io.StringIO()
    render_text(d, Console(file=buf, width=10_000, color_system=None))
    out = buf.getvalue()
    assert msg[:599] + "…" in out and msg not in out


def test_headline_cuts_a_long_message_at_a_word() -> None:
    from correlator.summary import _words

    msg = (
        "CUDA error: an illegal memory access was encountered CUDA kernel errors might be asynchronously reported "
        "at some other API call, so the stacktrace below might be incorrect."
    )
    assert _words(msg, 400) == msg
    cut = _words(msg, 60)
    assert cut == "CUDA error: an illegal memory access was encountered CUDA…"
    assert len(cut) <= 60
    # no space in the second half: a hard cut
    assert _words("x" * 100, 20) == "x" * 19 + "…"
