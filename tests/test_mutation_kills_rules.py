"""Rules that the third mutation run (benchmarks/MUTATION.md) found unpinned: one small table per behaviour, the
expected value read off the rows written in the test (event ids are row positions, see
``tests.test_diagnose_units.table``).

Each test states the behaviour of the rule it pins (docstrings of ``correlator/initiators.py``, ``faults.py``,
``graph.py``, ``diagnose.py``); none asserts more than that behaviour.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from correlator import build_graph
from correlator import initiators as ini
from correlator.faults import _task_ids, fault_rows
from tests.test_diagnose_units import ev, progress, table, timeout


def evidence_of(rows: list[dict[str, Any]], **kw: Any) -> ini.Evidence:
    """The rules' input as ``graph.build_graph`` makes it, for one attempt on one clock (``tc`` = ``ts``)."""
    t = table(rows).with_columns(pl.col("ts").alias("tc"))
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
        ev(1, "worker_failed", 9, layer="elastic", exit_code=-15),  # torchrun: exitcode -15 (SIGTERM by the agent)
        ev(2, "worker_signalled", 9, layer="elastic", signal="SIGTERM"),  # the agent's "Sending process … SIGTERM"
        ev(3, "python_exception", 9, exc_type="KeyboardInterrupt", layer="python", signal="SIGTERM"),
        ev(4, "gloo_connection_closed", 8, layer="gloo"),  # a lost connection of its own
    ]
    assert evidence_of(rows).own_error_ranks() == {0, 4}


# --- initiators._rank0_reason --------------------------------------------------------------------------------


def test_rank0_reason_rooted_collective() -> None:
    e = evidence_of([progress(r, 1) for r in range(3)])
    assert ini._rank0_reason(e, {"op": "broadcast"}) == "rank 0 is the root of the broadcast the others wait in"
    assert ini._rank0_reason(e, {"op": "ALLREDUCE"}) is None
    assert ini._rank0_reason(e, {}) is None


def test_rank0_reason_untagged_progress_bar() -> None:
    rows = [progress(r, 1) for r in range(3)]
    tagged = [*rows, ev(1, "progress_bar", 2, layer="app", severity="info", message=" 40%|####  | 4/10")]
    assert ini._rank0_reason(evidence_of(tagged), {}) is None  # a rank's own bar says nothing of rank 0
    untagged = [*rows, ev(None, "progress_bar", 2, layer="app", severity="info", message=" 40%|####  | 4/10")]
    assert (
        ini._rank0_reason(evidence_of(untagged), {})
        == "the untagged output (rank-0-only work, a progress bar) stops mid-work"
    )


def test_rank0_reason_named_by_the_waiting_ranks() -> None:
    rows = [progress(r, 1) for r in range(3)]
    names0 = [*rows, ev(2, "nccl_error", 5, layer="nccl", peer_rank=0, message="remote error from rank: 0")]
    assert ini._rank0_reason(evidence_of(names0), {}) == "the waiting ranks name rank 0"
    names1 = [*rows, ev(2, "nccl_error", 5, layer="nccl", peer_rank=1, message="remote error from rank: 1")]
    assert ini._rank0_reason(evidence_of(names1), {}) is None


def test_rank0_reason_store_lost_by_two_ranks() -> None:
    rows = [progress(r, 1) for r in range(3)]
    one = [*rows, ev(1, "store_error", 5, message="Connection reset by peer")]
    assert ini._rank0_reason(evidence_of(one), {}) is None
    two = [*one, ev(2, "store_error", 5, message="Connection reset by peer")]
    assert ini._rank0_reason(evidence_of(two), {}) == "2 ranks lost the TCPStore, which rank 0 hosts"


# --- initiators.unattributed -------------------------------------------------------------------------------


def test_rankless_exit_status_alone_is_an_unknown_fault() -> None:
    rows = [
        progress(0, 1),  # id 0
        ev(None, "worker_failed", 5, layer="system", exit_code=1, path="job.log", message="exit code 1"),  # id 1
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
    assert ini.config_outlier(table(same + timing)) == (None, [])
    # application lines that name no rank are not any rank's configuration
    rankless = [_app(None, f"model hidden={32 if i == 0 else 48} layers=4") for i in range(3)]  # type: ignore[arg-type]
    assert ini.config_outlier(table(same[:2] + rankless)) == (None, [])


def test_config_outlier_skips_a_line_too_few_ranks_printed() -> None:
    rows = [_app(r, "tokenizer vocab=50257") for r in (0, 1)]  # ids 0-1: only two ranks printed it
    rows += [_app(r, f"model hidden={48 if r == 2 else 32}", 1) for r in range(4)]  # ids 2-5
    assert ini.config_outlier(table(rows)) == (2, [4, 2])


def test_config_outlier_first_template_in_log_order_decides() -> None:
    rows = []
    for i in range(12):  # twelve lines every rank printed; in each, another rank differs
        odd = i % 4
        rows += [_app(r, f"setting{'x' * i} value={7 if r == odd else 3}", i) for r in range(4)]
    assert ini.config_outlier(table(rows)) == (0, [0, 1])


# --- faults._task_ids ---------------------------------------------------------------------------------------


def test_task_ids_skip_what_is_not_a_range() -> None:
    # the task-list pattern admits any run of digits, commas and dashes: a part that is not a range is skipped
    assert _task_ids("1-2-3,5") == [5]
    assert _task_ids("4-,6") == [6]
    assert _task_ids("-4,6") == [6]
