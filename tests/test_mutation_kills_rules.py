"""Rules that the second and third mutation samples (benchmarks/MUTATION.md) found unpinned: one small table per
behaviour, the expected value read off the rows written in the test (event ids are row positions, see
``tests.test_diagnose_units.table``).

Each test states the behaviour of the rule it pins (docstrings of ``correlator/initiators.py``, ``disagreement.py``,
``silence.py``, ``attempt_evidence.py``, ``faults.py``, ``graph.py``, ``diagnose.py``); none asserts more than that
behaviour.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from correlator import build_graph, diagnose, disagreement, silence
from correlator import initiators as ini
from correlator.faults import fault_rows
from parsers.rules import rank_list
from tests.test_diagnose_units import ev, progress, table, timeout


def evidence_of(rows: list[dict[str, Any]], reverse: bool = False, **kw: Any) -> ini.Evidence:
    """The rules' input as ``graph.build_graph`` makes it, for one attempt on one clock (``tc`` = ``ts``);
    ``reverse``: the attempt's rows in reverse order (same event ids), as a table sorted otherwise holds them."""
    t = table(rows).with_columns(pl.col("ts").alias("tc"))
    t = t.reverse() if reverse else t
    f = fault_rows(t).filter(pl.col("role") != "weak").sort("tc", "event_id", nulls_last=True)
    fr = f.filter(pl.col("rank").is_not_null())
    seen = sorted(int(r) for r in t["rank"].drop_nulls().unique().to_list())
    args: dict[str, Any] = {
        "seen": seen,
        "missing": [],
        "signalled": set(),
        "first_signal": None,
        "launcher_present": False,
    }
    args.update(kw)
    return ini.Evidence(t, f, fr, **args)


# --- initiators.Evidence.own_error_ranks ------------------------------------------------------------------


def test_own_error_ranks_leave_out_the_agents_sigterm() -> None:
    rows = [
        timeout(0, 7),  # a timeout of its own
        ev(
            1, "worker_failed", 9, layer="elastic", exit_code=-15
        ),  # torchrun: exitcode -15 (SIGTERM by the agent)
        ev(
            2, "worker_signalled", 9, layer="elastic", signal="SIGTERM"
        ),  # the agent's "Sending process … SIGTERM"
        ev(3, "python_exception", 9, exc_type="KeyboardInterrupt", layer="python", signal="SIGTERM"),
        ev(4, "gloo_connection_closed", 8, layer="gloo"),  # a lost connection of its own
    ]
    assert evidence_of(rows).own_error_ranks() == {0, 4}


# --- initiators._rank0_reason --------------------------------------------------------------------------------


def test_rank0_reason_rooted_collective() -> None:
    e = evidence_of([progress(r, 1) for r in range(3)])
    assert (
        silence._rank0_reason(e, {"op": "broadcast"})
        == "rank 0 is the root of the broadcast the others wait in"
    )
    assert silence._rank0_reason(e, {"op": "ALLREDUCE"}) is None
    assert silence._rank0_reason(e, {}) is None


def test_rank0_reason_untagged_progress_bar() -> None:
    rows = [progress(r, 1) for r in range(3)]
    tagged = [*rows, ev(1, "progress_bar", 2, layer="app", severity="info", message=" 40%|####  | 4/10")]
    assert silence._rank0_reason(evidence_of(tagged), {}) is None  # a rank's own bar says nothing of rank 0
    untagged = [*rows, ev(None, "progress_bar", 2, layer="app", severity="info", message=" 40%|####  | 4/10")]
    assert (
        silence._rank0_reason(evidence_of(untagged), {})
        == "the untagged output (rank-0-only work, a progress bar) stops mid-work"
    )


def test_rank0_reason_named_by_the_waiting_ranks() -> None:
    rows = [progress(r, 1) for r in range(3)]
    names0 = [*rows, ev(2, "nccl_error", 5, layer="nccl", peer_rank=0, message="remote error from rank: 0")]
    assert silence._rank0_reason(evidence_of(names0), {}) == "the waiting ranks name rank 0"
    names1 = [*rows, ev(2, "nccl_error", 5, layer="nccl", peer_rank=1, message="remote error from rank: 1")]
    assert silence._rank0_reason(evidence_of(names1), {}) is None


def test_rank0_reason_store_lost_by_two_ranks() -> None:
    rows = [progress(r, 1) for r in range(3)]
    one = [*rows, ev(1, "store_error", 5, message="Connection reset by peer")]
    assert silence._rank0_reason(evidence_of(one), {}) is None
    two = [*one, ev(2, "store_error", 5, message="Connection reset by peer")]
    assert silence._rank0_reason(evidence_of(two), {}) == "2 ranks lost the TCPStore, which rank 0 hosts"


# --- initiators.unattributed -------------------------------------------------------------------------------


def test_rankless_exit_status_alone_is_an_unknown_fault() -> None:
    rows = [
        progress(0, 1),  # id 0
        ev(
            None, "worker_failed", 5, layer="system", exit_code=1, path="job.log", message="exit code 1"
        ),  # id 1
    ]
    G = build_graph(table(rows))
    assert (G.graph["initiators"], G.graph["initiator_basis"], G.graph["failure_kind"]) == (
        [],
        "fault without a rank",
        "unknown",
    )
    assert G.graph["focus"] == {"evidence": [1]}


def test_rankless_unstamped_cause_comes_after_the_stamped_ones() -> None:
    rows = [
        ev(None, "cuda_oom", 0, exc_type="torch.OutOfMemoryError", layer="python", path="job.log"),  # id 0
        ev(None, "python_exception", 3, exc_type="ValueError", layer="python", path="job.log"),  # id 1
    ]
    rows[0]["ts"] = None  # a traceback line with no stamp: its place in time is unknown
    G = build_graph(table(rows))
    assert (G.graph["failure_kind"], G.graph["focus"]) == ("rank_crash", {"evidence": [1, 0]})


def test_rankless_causes_at_one_time_keep_line_order_whatever_the_row_order() -> None:
    rows = [
        ev(None, "python_exception", 3, exc_type="ValueError", layer="python", path="job.log"),  # id 0
        ev(None, "cuda_oom", 3, exc_type="torch.OutOfMemoryError", layer="python", path="job.log"),  # id 1
        ev(None, "cuda_error", 3, layer="python", path="job.log"),  # id 2
    ]
    for t in (table(rows), table(rows).reverse()):
        G = build_graph(t)
        assert (G.graph["failure_kind"], G.graph["focus"]) == ("rank_crash", {"evidence": [0, 1, 2]})


# --- initiators.config_outlier ----------------------------------------------------------------------------


def _app(r: int, msg: str, sec: float = 0, **kw: Any) -> dict[str, Any]:
    return ev(r, "log", sec, layer="app", severity="info", message=msg, **kw)


def test_config_outlier_reads_application_lines_only() -> None:
    same = [_app(r, "model hidden=32 layers=4") for r in range(4)]  # ids 0-3: no rank differs
    # the watchdog's timing numbers differ on one rank by nature: not a configuration line
    timing = [
        ev(r, "log", 1, layer="c10d", severity="info", message=f"ran for {600100 + (50 if r == 2 else 0)} ms")
        for r in range(4)
    ]
    assert disagreement.config_outlier(table(same + timing)) == (None, [])
    # application lines that name no rank are not any rank's configuration
    rankless = [_app(None, f"model hidden={32 if i == 0 else 48} layers=4") for i in range(3)]  # type: ignore[arg-type]
    assert disagreement.config_outlier(table(same[:2] + rankless)) == (None, [])


def test_config_outlier_skips_a_line_too_few_ranks_printed() -> None:
    rows = [_app(r, "tokenizer vocab=50257") for r in (0, 1)]  # ids 0-1: only two ranks printed it
    rows += [_app(r, f"model hidden={48 if r == 2 else 32}", 1) for r in range(4)]  # ids 2-5
    assert disagreement.config_outlier(table(rows)) == (2, [4, 2])


def test_config_outlier_first_template_in_log_order_decides() -> None:
    rows = []
    for i in range(12):  # twelve lines every rank printed; in each, another rank differs
        odd = i % 4
        rows += [_app(r, f"setting{'x' * i} value={7 if r == odd else 3}", i) for r in range(4)]
    assert disagreement.config_outlier(table(rows)) == (0, [0, 1])


# --- parsers.rules.rank_list (the task lists faults._expand_task_lists reads) ------------------------------


def test_task_ids_skip_what_is_not_a_range() -> None:
    # the task-list pattern admits any run of digits, commas and dashes: a part that is not a range is skipped
    assert rank_list("1-2-3,5") == "5"
    assert rank_list("4-,6") == "6"
    assert rank_list("-4,6") == "6"


# --- initiators.votes / named_by_waiters --------------------------------------------------------------------


def test_votes_count_waiting_kinds_once_per_voter_never_oneself() -> None:
    rows = [progress(r, 1) for r in range(4)]
    rows += [
        ev(1, "nccl_error", 5, layer="nccl", peer_rank=0),  # "remote error detected from rank: 0"
        ev(1, "store_error", 6, peer_rank=0),  # the same voter again: counted once
        ev(2, "gloo_connection_closed", 5, layer="gloo", peer_rank=3),  # a lost link is not a wait for rank 3
        ev(3, "store_error", 5, peer_rank=3),  # a rank never votes for itself
    ]
    assert ini.votes(evidence_of(rows)) == {0: 1}


def test_named_by_waiters_names_the_rank_two_waiters_name() -> None:
    rows = [progress(r, 1) for r in range(4)]  # ids 0-3
    rows += [
        ev(3, "store_error", 3, message="Connection reset by peer"),  # id 4: names nobody
        ev(
            1, "nccl_error", 5, layer="nccl", peer_rank=0, message="remote error detected from rank: 0"
        ),  # id 5
        ev(2, "store_error", 6, peer_rank=0, message="retrieving ncclUniqueId from [0]"),  # id 6
    ]
    found = ini.named_by_waiters(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.basis, found.failure_kind, found.cause_event) == (
        [0],
        "named by the ranks waiting for it",
        "straggler_hang",
        {0: 5},
    )
    assert [n.text() for n in found.reasons] == ["named by 2 waiting rank(s) (1, 2); it logged no error"]


def test_named_by_waiters_passes_on_a_tie_and_on_a_rank_with_its_own_error() -> None:
    rows = [progress(r, 1) for r in range(4)]
    tie = [*rows, ev(1, "store_error", 5, peer_rank=0), ev(2, "store_error", 5, peer_rank=3)]
    assert ini.named_by_waiters(evidence_of(tie)) is None
    own = [*rows, ev(1, "store_error", 5, peer_rank=0), ev(0, "python_exception", 4, layer="python")]
    assert ini.named_by_waiters(evidence_of(own)) is None


# --- initiators.barrier_named ----------------------------------------------------------------------------------


def test_barrier_report_without_a_group_rank_names_global_ranks() -> None:
    rows = [progress(r, 1) for r in range(4)]
    msg = "Rank 2 failed to pass monitoredBarrier in 1800000 ms"
    rows += [ev(0, "monitored_barrier_failed", 5, message=msg, pg_rank=None, ranks_named="2")]
    found = ini.barrier_named(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.failure_kind) == ([2], "straggler_hang")
    # ``Ranks 1, 3 failed to pass monitoredBarrier``: both named (third sample)
    rows[-1] = dict(
        rows[-1], message="Ranks 1, 3 failed to pass monitoredBarrier in 1800000 ms", ranks_named="1,3"
    )
    two = ini.barrier_named(evidence_of(rows))
    assert two is not None and (two.initiators, two.failure_kind) == ([1, 3], "straggler_hang")


# --- initiators.minority_progress --------------------------------------------------------------------------------


def _fp(r: int, seq: int, sec: float = 1, pg: str | None = None) -> dict[str, Any]:
    return ev(r, "collective_fingerprint", sec, layer="c10d", severity="info", seq=seq, op="ALLREDUCE", pg=pg)


def test_minority_that_timed_out_in_a_collective_the_others_went_past() -> None:
    rows = [_fp(r, q) for r in (1, 2, 3) for q in (5, 6)]  # ids 0-5
    rows += [timeout(0, 5)]  # id 6
    found = ini.minority_progress(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.basis, found.failure_kind, found.cause_event) == (
        [0],
        "odd one out",
        "collective_mismatch",
        {0: 6},
    )
    assert found.focus == {"pg": "0", "seq": 5, "op": "ALLREDUCE"}
    assert [n.text() for n in found.reasons] == [
        (
            "the minority timed out in a collective the others went past (SeqNum 5); it ran a different sequence "
            "of collectives"
        )
    ]


def test_minority_that_went_past_the_collective_the_others_wait_in() -> None:
    rows = [_fp(3, 5), _fp(3, 6)] + [timeout(r, 5) for r in (0, 1, 2)]
    found = ini.minority_progress(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.cause_event) == ([3], {})  # it has no timeout line of its own
    assert [n.text() for n in found.reasons] == [
        (
            "the minority went past the collective the others wait in (SeqNum 5); it ran a different sequence of "
            "collectives"
        )
    ]


def test_minority_progress_needs_a_minority_and_a_watchdog_timeout() -> None:
    even = [_fp(r, q) for r in (2, 3) for q in (5, 6)] + [timeout(r, 5) for r in (0, 1)]
    assert ini.minority_progress(evidence_of(even)) is None  # two against two: nobody is the odd one out
    # an async error at a seq is not a timeout in it
    other = [_fp(r, q) for r in (1, 2, 3) for q in (5, 6)] + [ev(0, "async_error", 9, seq=5, op="ALLREDUCE")]
    assert ini.minority_progress(evidence_of(other)) is None


def test_minority_progress_counts_the_timed_out_ranks_of_one_group() -> None:
    rows = [_fp(r, q, pg="0") for r in (3, 4, 5, 6) for q in (5, 6)]
    rows += [timeout(0, 5), timeout(1, 5)]
    rows += [dict(timeout(2, 5), pg="1")]  # another group's SeqNum 5
    found = ini.minority_progress(evidence_of(rows))
    assert found is not None and found.initiators == [0, 1]


# --- initiators.silence -------------------------------------------------------------------------------------


def test_silence_compares_progress_in_the_group_the_others_wait_in() -> None:
    rows = [dict(timeout(r, 10), pg="1") for r in (0, 1)]
    rows += [_fp(2, 10, pg="1"), _fp(3, 9, pg="1"), _fp(2, 4, pg="0"), _fp(3, 5, pg="0")]
    found = ini.silence(evidence_of(rows))
    assert found is not None and (found.initiators, found.focus["pg"]) == ([3], "1")


def test_silent_rank_of_an_unnamed_sigkill_is_that_worker() -> None:
    rows = [progress(r, 5) for r in range(4)]  # ids 0-3
    rows += [timeout(r, 50) for r in (0, 1, 2)]  # ids 4-6
    rows += [ev(None, "worker_failed", 601, layer="system", exit_code=137, message="exit code 137")]  # id 7
    found = ini.silence(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.failure_kind, found.cause_event) == ([3], "oom_kill", {3: 7})
    assert [n.reason.name for n in found.reasons] == ["FOUND_BY_SILENCE", "UNNAMED_SIGKILL"]
    # two silent ranks: the kill cannot be placed on either
    two = ini.silence(
        evidence_of([r for r in rows if not (r["rank"] == 2 and r["kind"] == "watchdog_timeout")])
    )
    assert two is not None and (two.initiators, two.failure_kind) == ([2, 3], "straggler_hang")


def test_absent_ranks_of_an_excerpt_need_few_absent_or_a_reason() -> None:
    # ranks 0 and 5 of a pasted excerpt time out in a broadcast; 1-4 are absent: most likely cut from the paste
    many = [timeout(r, 3, op="BROADCAST") for r in (0, 5)]
    assert ini.silence(evidence_of(many)) is None
    # one rank absent between two that time out: too few lines to say it is the one
    one = [timeout(r, 3) for r in (0, 2)]
    assert ini.silence(evidence_of(one)) is None
    # ... unless the others lost their connection to a peer
    lost = [*one, ev(2, "gloo_connection_closed", 4, layer="gloo")]
    found = ini.silence(evidence_of(lost))
    assert found is not None
    assert (found.initiators, found.basis) == ([1], "absent from the excerpt")
    assert [n.reason.name for n in found.reasons] == ["ABSENT_FROM_EXCERPT"]


# --- initiators.network --------------------------------------------------------------------------------------


def test_first_network_error_is_a_stamped_one() -> None:
    rows = [progress(r, 1) for r in range(3)]  # ids 0-2
    rows += [ev(1, "nccl_net_error", 0, layer="nccl", message="NET/IB : Got completion with error")]  # id 3
    rows += [ev(2, "nccl_net_error", 5, layer="nccl", message="NET/IB : Got completion with error")]  # id 4
    rows[3]["ts"] = None  # rank 1's line has no stamp: it cannot be placed first
    found = ini.network(evidence_of(rows))
    assert found is not None and (found.initiators, found.cause_event) == ([2], {2: 4})


def test_unstamped_network_errors_name_the_first_in_line_order() -> None:
    rows = [progress(r, 1) for r in range(3)]  # ids 0-2
    rows += [
        ev(r, "nccl_net_error", 0, layer="nccl", message="NET/Socket : Connection closed") for r in (2, 1)
    ]
    for row in rows[3:]:
        row["ts"] = None  # ids 3 (rank 2), 4 (rank 1)
    found = ini.network(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.basis, found.cause_event) == ([2], "first network error", {2: 3})


# --- initiators.stall_report -----------------------------------------------------------------------------------


def _ready(ranks: tuple[int, ...], tensor: str, sec: float = 60) -> list[dict[str, Any]]:
    """One Horovod ``[ready ranks: …]`` report of the coordinator (rank 0): one row per named rank."""
    return [
        ev(
            0,
            "stall_ready",
            sec,
            layer="app",
            severity="warning",
            peer_rank=p,
            pg=f"horovod:{tensor}",
            op="ALLREDUCE",
        )
        for p in ranks
    ]


def test_stall_report_names_the_rank_not_ready() -> None:
    rows = [progress(r, 1) for r in range(4)] + _ready((0, 1, 2), "grad_0")  # ids 0-3, 4-6
    found = ini.stall_report(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.basis, found.failure_kind, found.cause_event) == (
        [3],
        "named by the stall report",
        "straggler_hang",
        {3: 4},
    )
    assert found.focus == {"op": "ALLREDUCE", "waiting": [0, 1, 2], "evidence": [4]}
    assert [n.reason.name for n in found.reasons] == ["STALL_REPORT"]
    # rows of one report share their stamp: the first row (line order) is the evidence, whatever the row order
    again = ini.stall_report(evidence_of(rows, reverse=True))
    assert again is not None and again.cause_event == {3: 4}


def test_stall_report_missing_rank_ready_elsewhere_ran_another_collective() -> None:
    rows = [progress(r, 1) for r in range(4)] + _ready((0, 1, 2), "grad_0") + _ready((3,), "loss_0")
    found = ini.stall_report(evidence_of(rows))
    assert found is not None and (found.initiators, found.failure_kind) == ([3], "collective_mismatch")
    assert [n.reason.name for n in found.reasons] == ["STALL_REPORT", "STALL_READY_ELSEWHERE"]
    # a ready rank that is ready on another tensor too says nothing about the missing one
    also = [progress(r, 1) for r in range(4)] + _ready((0, 1, 2), "grad_0") + _ready((0,), "loss_0")
    found = ini.stall_report(evidence_of(also))
    assert found is not None and (found.initiators, found.failure_kind) == ([3], "straggler_hang")


def test_stall_report_reads_only_stall_rows() -> None:
    rows = [progress(r, 1) for r in range(4)] + _ready((0, 1, 2), "grad_0")
    rows += [ev(3, "store_error", 61, peer_rank=0, message="retrieving ncclUniqueId from [0]")]
    found = ini.stall_report(evidence_of(rows))
    assert found is not None and found.initiators == [3]


# --- quotes._quotes / summary._summary ------------------------------------------------------------------------------


def _roles(d: Any) -> list[tuple[int | None, str, int, str]]:
    return [(e.rank, e.path, e.line, e.role) for e in d.evidence]


def test_evidence_quotes_two_launcher_lines() -> None:
    rows = [progress(r, 1) for r in range(4)]  # ids 0-3
    rows += [ev(r, "python_exception", 1, exc_type="ValueError", layer="python") for r in (1, 3)]  # ids 4, 5
    rows += [
        ev(1, "worker_failed", 9, layer="elastic", exit_code=1, path="launcher.log", line=10),  # id 6
        ev(3, "worker_failed", 9, layer="elastic", exit_code=1, path="launcher.log", line=11),  # id 7
        ev(1, "root_cause_entry", 9, layer="elastic", exit_code=1, path="launcher.log", line=12),  # id 8
    ]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [1, 3]
    assert [(e.path, e.line) for e in d.evidence if e.role.startswith("launcher")] == [
        ("launcher.log", 10),
        ("launcher.log", 11),
    ]


def test_evidence_one_line_per_edge_type_from_the_lowest_rank() -> None:
    rows = [progress(r, 1) for r in range(5)]  # ids 0-4
    rows += [ev(2, "cuda_oom", 1, exc_type="torch.OutOfMemoryError", layer="python")]  # id 5
    rows += [
        dict(timeout(3, 100, sec=600), line=3),
        dict(ev(0, "gloo_connection_closed", 605, layer="gloo"), line=4),
        dict(ev(4, "gloo_connection_closed", 606, layer="gloo"), line=5),
        dict(timeout(1, 100, sec=610), line=6),
    ]
    d = diagnose(table(rows))
    assert [role for *_, role in _roles(d) if role.startswith("collateral")] == [
        "collateral: rank 0 peer error rank 2",
        "collateral: rank 1 waits for rank 2",
    ]


def test_last_sign_of_life_is_the_latest_in_time_of_the_ranks_files() -> None:
    rows = [progress(r, 1) for r in range(3)]  # ids 0-2
    rows += [
        ev(3, "log", 8, layer="app", severity="info", path="rank3.err", line=1, message="loss=1.2")
    ]  # id 3
    rows += [
        ev(3, "log", 5, layer="app", severity="info", path="rank3.out", line=1, message="step 4")
    ]  # id 4
    rows += [timeout(r, 5) for r in (0, 1, 2)]
    d = diagnose(table(rows))
    assert d.initiating_ranks == [3]
    assert [(rank, path) for rank, path, _, role in _roles(d) if role == "last sign of life of rank 3"] == [
        (3, "rank3.err")
    ]


def test_last_sign_of_life_at_one_stamp_is_the_last_line() -> None:
    rows = [progress(r, 1) for r in range(3)]  # ids 0-2
    rows += [ev(3, "log", 8, layer="app", severity="info", line=n, message=f"line {n}") for n in (1, 2)]
    rows += [timeout(r, 5) for r in (0, 1, 2)]
    for t in (table(rows), table(rows).reverse()):
        d = diagnose(t)
        assert [line for _, _, line, role in _roles(d) if role == "last sign of life of rank 3"] == [2]


def test_error_json_evidence_quotes_the_message_not_the_json() -> None:
    rows = [progress(r, 1) for r in range(2)]
    rows += [
        ev(
            1,
            "error_file",
            3,
            layer="elastic",
            stream="error_json",
            path="error.json",
            message="ValueError: boom",
        )
    ]
    rows[-1]["raw"] = '{"message": {"message": "ValueError: boom", "extraInfo": {"timestamp": "1700000000"}}}'
    d = diagnose(table(rows))
    assert [(e.path, e.text, e.role) for e in d.evidence] == [
        ("error.json", "ValueError: boom", "initiating fault")
    ]


def test_summary_names_a_rankless_fault_by_its_kind() -> None:
    rows = [ev(None, "cuda_error", 3, layer="python", path="job.log", line=7)]
    assert diagnose(table(rows)).summary == (
        "No rank could be named: the logs show cuda error at job.log:7, on a line that names no rank "
        "(failure kind cuda_error)."
    )


def test_summary_of_faults_no_rank_explains() -> None:
    d = diagnose(table([timeout(r, 5) for r in (0, 1)]))
    assert (d.failure_kind, d.summary) == (
        "unknown",
        "Ranks 0-1 failed in ALLREDUCE SeqNum 5; no rank in these logs explains them.",
    )
    # an excerpt of ranks 0 and 3: the one they waited for may be among those it lacks
    d = diagnose(table([timeout(r, 5, op=None) for r in (0, 3)]))  # type: ignore[arg-type]
    assert d.summary == (
        "Ranks 0, 3 failed in a collective SeqNum 5; the rank they waited for is not in these logs "
        "(candidates: ranks 1-2)."
    )


def test_summary_names_a_cause_without_exception_or_exit_code_by_its_kind() -> None:
    rows = [progress(r, 1) for r in range(3)]
    rows += [ev(1, "process_killed", 1, layer="system", signal="SIGKILL", message="Killed")]
    rows += [timeout(r, 5) for r in (0, 2)]
    d = diagnose(table(rows))
    assert (d.failure_kind, d.summary) == (
        "oom_kill",
        "rank 1 (node-a) failed first: process killed; 2 ranks timed out waiting for it in ALLREDUCE SeqNum 5.",
    )


# --- initiators.divergence ------------------------------------------------------------------------------------


def test_old_watchdog_lines_without_seqnum_are_compared_as_one_collective() -> None:
    # torch <= 1.12: ``WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000)`` names no SeqNum and no size
    rows = [timeout(r, 0, op="ALLREDUCE" if r == 3 else "BROADCAST", numel=None) for r in range(4)]  # type: ignore[arg-type]
    for row in rows:
        row["seq"] = None
    minority, majority, info = disagreement.divergence(table(rows))
    assert (minority, majority, info["seq"], info["majority"], info["own"]) == (
        {3},
        {0, 1, 2},
        -1,
        "BROADCAST",
        {3: 3},
    )
    # a rank that timed out in two ops: the lines cannot be matched up
    two = [*rows, dict(rows[0], op="ALLREDUCE")]
    assert disagreement.divergence(table(two)) == (set(), set(), {})


def test_divergence_first_disagreement_by_seqnum_then_group() -> None:
    rows = [dict(timeout(r, 7, op="BROADCAST" if r == 3 else "ALLREDUCE"), pg="0") for r in range(4)]
    rows += [dict(timeout(r, 3, op="BROADCAST" if r == 2 else "ALLREDUCE"), pg="1") for r in range(4)]
    minority, _, info = disagreement.divergence(table(rows))
    assert (minority, info["pg"], info["seq"]) == ({2}, "1", 3)


# --- initiators.flight_recorder ---------------------------------------------------------------------------


def test_flight_recorder_rule_passes_the_dump_verdict_through() -> None:
    import correlator
    from correlator import fr
    from tests.conftest import CASES

    for case in ("fr-05-exception-fsdp2-dumps-only", "fr-05-exception-fsdp2"):
        t = correlator.load(CASES / case / "logs")
        v = fr.analyze(t)
        assert v is not None and (v.kind, v.initiators) == ("never_reached", [2])
        G = build_graph(t)
        focus = G.graph["focus"]
        assert (G.graph["initiators"], G.graph["initiator_basis"]) == ([2], "Flight Recorder")
        assert {k: focus[k] for k in ("pg", "seq", "op", "fr", "evidence")} == {
            "pg": v.pg,
            "seq": v.seq,
            "op": v.op,
            "fr": v.kind,
            "evidence": v.evidence,
        }
        own = t.filter(
            (pl.col("rank") == 2) & (pl.col("kind") == "python_exception") & ~pl.col("duplicate")
        ).sort("ts", "event_id", nulls_last=True)
        if own.height:  # with its text log: rank 2 raised; its exception is the cause, FR the evidence
            assert (G.graph["failure_kind"], focus["claim"]) == ("rank_crash", v.claim)
            assert G.nodes[2]["cause_event"] == own["event_id"][0]
        else:
            assert G.graph["failure_kind"] == v.failure_kind
            assert focus["claim"] == (
                f"{v.claim}; the dumps show where it stopped, not why "
                "(a rank that raised and one that is slow or hung leave the same dump)"
            )
            assert G.nodes[2]["cause_event"] == v.cause_event[2]


# --- faults.fault_rows: the scheduler's teardown ------------------------------------------------------------


def test_kill_after_the_scheduler_cancelled_the_job_is_the_teardown() -> None:
    log = "slurm-1234.out"
    rows = [
        ev(
            1, "process_killed", 1, layer="system", signal="SIGKILL", path=log, message="task 1: Killed"
        ),  # id 0
        ev(
            None,
            "job_cancelled",
            5,
            layer="system",
            path=log,
            message="slurmstepd: *** STEP 1234.0 CANCELLED AT",
        ),
        ev(
            2, "process_killed", 6, layer="system", signal="SIGKILL", path=log, message="task 2: Killed"
        ),  # id 2
    ]
    f = fault_rows(table(rows)).sort("event_id")
    assert list(zip(f["event_id"], f["kind"], f["role"], strict=True)) == [
        (0, "process_killed", "cause"),
        (1, "job_cancelled", "effect"),
        (2, "worker_signalled", "effect"),
    ]


# --- initiators.first_causes -------------------------------------------------------------------------------


def test_first_cause_event_is_the_most_specific_even_when_a_summary_is_stamped_earlier() -> None:
    # torchrun's failure summary is stamped in whole seconds (05), the traceback that it summarises at 05.6
    rows = [progress(r, 3) for r in range(3)]  # ids 0-2
    rows += [
        ev(1, "failure_entry", 5, layer="elastic", exit_code=-9, path="launcher.log"),  # id 3
        ev(1, "cuda_error", 5.6, exc_type="RuntimeError", layer="python"),  # id 4
    ]
    G = build_graph(table(rows))
    assert (G.graph["initiators"], G.graph["failure_kind"]) == ([1], "cuda_error")
    assert G.nodes[1]["cause_event"] == 4


# --- third sample (2026-12-05, the modules split from initiators.py) ----------------------------------------------


def test_divergence_compares_a_fingerprint_shape_with_a_watchdog_numel() -> None:
    # DETAIL fingerprints state a shape (``TensorShape=[32, 16]``: 512 elements), watchdog lines an element count
    # (``NumelIn=512``): at one (pg, seq) both are compared as element counts. Rank 3 timed out with 1024.
    rows = [
        ev(r, "collective_fingerprint", 1, seq=40, op="ALLREDUCE", shape="[32, 16]", pg="0") for r in (0, 1)
    ]
    rows += [timeout(2, 40, numel=512), timeout(3, 40, numel=1024)]
    minority, majority, info = disagreement.divergence(table(rows))
    assert (minority, majority, info["majority"], info["own"]) == ({3}, {0, 1, 2}, "ALLREDUCE 512", {3: 3})


def _untagged_file(path: str, sec: float = 0) -> list[dict[str, Any]]:
    """torchtune#2093 in short: a file of rank-prefixed lines, rank 0's untagged log line of work, then the
    timeouts of ranks 2 and 3 (the untagged line is application output: layer ``app``)."""
    init = "ProcessGroupNCCL initialization options: size: 4"
    work = "INFO:torchtune.utils._logging:Getting full model state dict took 114.73 secs"
    return [
        *(ev(r, "log", sec, severity="info", path=path, message=init) for r in range(4)),
        ev(None, "log", sec + 1, layer="app", severity="info", path=path, message=work),
        *(dict(timeout(r, 28956, sec + 600), path=path) for r in (2, 3)),
    ]


def test_rank0_reason_untagged_application_line_before_the_faults() -> None:
    e = evidence_of(_untagged_file("combined.log"))
    assert silence._rank0_reason(e, {}) == (
        "untagged application lines (rank-0-only logging, by convention) are the last work before the faults"
    )
    # the same file with a tagged line between the untagged work and the faults: nothing says rank 0
    rows = _untagged_file("combined.log")
    rows.insert(5, ev(1, "log", 2, severity="info", path="combined.log", message="rank 1 saved shard 1"))
    assert silence._rank0_reason(evidence_of(rows), {}) is None


def test_untagged_work_before_the_faults_of_one_file_is_enough() -> None:
    # a.log ends its work untagged before its first fault; b.log (later in the table) has a tagged line there
    b = [
        ev(1, "log", 0, severity="info", path="b.log", message="rank 1 saved shard 1"),
        dict(timeout(1, 28956, 600), path="b.log"),
    ]
    assert silence._untagged_work_before_faults(evidence_of([*_untagged_file("a.log"), *b]))
    assert not silence._untagged_work_before_faults(evidence_of(b))


def test_a_silent_rank_the_launcher_lists_failed_is_accounted_for() -> None:
    # torchrun's agent: ``failed (exitcode: -15) local_rank: 1`` (SIGTERMed: alive at teardown, no error of its
    # own) and its SIGTERM to rank 0; rank 3 is in no launcher line: it had exited early. Ranks 0 and 2 time out.
    rows = [progress(r, 5) for r in range(4)]  # ids 0-3
    rows += [timeout(0, 50), timeout(2, 50)]  # ids 4, 5
    rows += [
        ev(0, "worker_signalled", 601, layer="elastic", signal="SIGTERM"),  # id 6
        ev(1, "worker_failed", 601, layer="elastic", exit_code=-15),  # id 7
    ]
    found = silence.silence(evidence_of(rows))
    assert found is not None and (found.initiators, found.failure_kind) == ([3], "early_exit")


def test_silent_rank_of_an_unnamed_kill_by_exit_code_minus_9() -> None:
    # torchrun's ``exitcode: -9`` without a rank (as 137 in test_silent_rank_of_an_unnamed_sigkill_is_that_worker)
    rows = [progress(r, 5) for r in range(4)]  # ids 0-3
    rows += [timeout(r, 50) for r in (0, 1, 2)]  # ids 4-6
    rows += [ev(None, "worker_failed", 601, layer="elastic", exit_code=-9, message="exitcode: -9")]  # id 7
    found = silence.silence(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.failure_kind, found.cause_event) == ([3], "oom_kill", {3: 7})


def test_a_kill_the_launcher_names_is_not_put_on_the_silent_rank() -> None:
    # srun names task 2 (``task 2: Exited with exit code 137``): the kill is rank 2's, not silent rank 3's
    rows = [progress(r, 5) for r in range(4)]  # ids 0-3
    rows += [timeout(r, 50) for r in (0, 1)]  # ids 4, 5
    rows += [ev(2, "process_exit", 601, layer="system", exit_code=137, message="Exited with exit code 137")]
    found = silence.silence(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.failure_kind, found.cause_event) == ([3], "straggler_hang", {})


def test_silence_focus_is_the_first_collective_waited_in_time() -> None:
    # rank 0's file comes first in the table but its timeout (seq 51) is later than rank 1's (seq 50)
    rows = [progress(r, 5) for r in range(3)]  # ids 0-2
    rows += [timeout(0, 51, 700, op="BROADCAST"), timeout(1, 50, 600)]  # ids 3, 4
    found = silence.silence(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.focus) == ([2], {"pg": "0", "seq": 50, "op": "ALLREDUCE"})


def test_silence_focus_of_a_rank_without_a_log_and_of_an_absent_rank() -> None:
    waited = {"pg": "0", "seq": 50, "op": "ALLREDUCE"}
    no_log = silence.silence(evidence_of([timeout(r, 50) for r in range(3)], missing=[3], world=4))
    assert no_log is not None and (no_log.initiators, no_log.basis, no_log.focus) == (
        [3],
        "left no log",
        waited,
    )
    # an excerpt: ranks 0 and 2 time out, rank 2 lost its connection to a peer, rank 1 left no line
    rows = [timeout(0, 50), timeout(2, 50), ev(2, "gloo_connection_closed", 601, layer="gloo")]
    absent = silence.silence(evidence_of(rows))
    assert absent is not None
    assert (absent.initiators, absent.basis, absent.focus) == ([1], "absent from the excerpt", waited)


def test_nccl_reports_number_a_communicator_of_the_seen_ranks_size_as_the_job() -> None:
    # world size unknown (no init line): 4 ranks seen, and a RAS communicator of size 4 misses its rank 3
    rows = [progress(r, 5) for r in range(4)]  # ids 0-3
    rows += [
        ev(
            None,
            "ras_missing",
            700,
            layer="ras",
            severity="warning",
            path="ras.txt",
            pg="0x5f1e",
            ranks_named="3",
            world_size=4,
            message="#0-0 (5f1e) INCOMPLETE",
        )
    ]  # id 4
    found = ini.nccl_reports(evidence_of(rows))
    assert found is not None
    assert (found.initiators, found.failure_kind, found.cause_event) == ([3], "straggler_hang", {3: 4})
    assert found.focus == {"evidence": [4], "evidence_role": "NCCL RAS: missing"}
    assert [n.text() for n in found.reasons] == [
        "named by NCCL RAS only (missing); no log line of its own says what happened to it"
    ]
    # a report that half the job is missing says nothing about who started it
    rows[-1] = dict(rows[-1], ranks_named="2,3")
    assert ini.nccl_reports(evidence_of(rows)) is None


def test_blamed_by_the_others_names_the_peer_every_other_rank_lost() -> None:
    # sgl-project/sglang#5013 in short: NCCL's ``[Service thread] Connection closed by localRank 9`` on ranks 0-7,
    # a closed gloo connection to rank 9 on rank 8; rank 9 says nothing
    rows = [progress(r, 5) for r in range(10)]  # ids 0-9
    rows += [
        ev(r, "nccl_peer_closed", 60, layer="nccl", peer_rank=9, message="Connection closed by localRank 9")
        for r in range(8)
    ]  # ids 10-17
    rows += [
        ev(8, "gloo_connection_closed", 61, layer="gloo", peer_rank=9, message="Connection closed by peer")
    ]
    found = ini.blamed_by_the_others(evidence_of(rows))
    named = ([9], "blamed by the others", "rank_crash", {9: 10})
    assert (
        found is not None and (found.initiators, found.basis, found.failure_kind, found.cause_event) == named
    )
    assert found.focus == {"evidence": list(range(10, 18)), "evidence_role": "says rank 9 went away"}
    said = (
        "every other rank seen (9) says rank 9's process or connection went away "
        "(gloo_connection_closed, nccl_peer_closed); nothing else says why"
    )
    assert [n.text() for n in found.reasons] == [said]


def test_disowned_by_all_names_the_rank_every_other_rank_disagrees_with() -> None:
    # reducer.cpp verify_params_across_processes on ranks 1-3: ``[r]: params[0] in this process with sizes [64, 32]
    # appears not to match sizes of the same param in process 0.``; rank 0 builds its model and says nothing
    said = "params[0] in this process with sizes [64, 32] appears not to match sizes of the same param in process 0."
    rows = [ev(0, "log", 0, severity="info", message="building model")]  # id 0
    rows += [
        ev(r, "ddp_error", 5 + r, layer="python", peer_rank=0, message=f"[{r}]: {said}") for r in (1, 2, 3)
    ]
    found = ini.disowned_by_all(evidence_of(rows))
    named = ([0], "disowned by all the others", "collective_mismatch", {0: 1})
    assert (
        found is not None and (found.initiators, found.basis, found.failure_kind, found.cause_event) == named
    )
    assert found.focus == {"evidence": [1, 2, 3], "evidence_role": "disagrees with rank 0"}
    assert [n.text() for n in found.reasons] == [
        "all 3 other ranks say their model differs from rank 0's; rank 0 is the one that differs"
    ]
