"""Rules of ``correlator/faults.py`` on minimal event tables: the role of each fault row and srun task lists
(``ranks_named``, which ``parsers.system`` fills: tests/test_parsers.py). Expected values follow the module's documented precedence
(DESIGN.md: exceptions, CUDA and SIGKILL are causes; timeouts, closed connections and SIGTERM are effects)."""

from __future__ import annotations

from typing import Any

import pytest

from correlator.faults import fault_rows
from tests.test_diagnose_units import ev, table


def _role(**row: Any) -> str | None:
    kind = row.pop("kind")
    f = fault_rows(table([ev(0, kind, 1, **row)]))
    return f["role"][0] if f.height else None


@pytest.mark.parametrize(
    ("row", "role"),
    [
        ({"kind": "python_exception"}, "cause"),
        ({"kind": "cuda_oom"}, "cause"),
        ({"kind": "cuda_error"}, "cause"),
        ({"kind": "ddp_error"}, "cause"),
        ({"kind": "watchdog_hang"}, "cause"),
        ({"kind": "process_killed", "signal": "SIGKILL"}, "cause"),
        ({"kind": "process_killed"}, "cause"),
        # SIGTERM on a cause kind: the agent's kill, an effect
        ({"kind": "python_exception", "signal": "SIGTERM"}, "effect"),
        ({"kind": "process_killed", "signal": "SIGTERM"}, "effect"),
        # SIGABRT is the NCCL watchdog taking the process down: an exit
        ({"kind": "process_killed", "signal": "SIGABRT"}, "exit"),
        # launcher exit statuses
        ({"kind": "worker_failed", "exit_code": -9}, "cause"),
        ({"kind": "worker_failed", "signal": "SIGKILL"}, "cause"),
        ({"kind": "worker_failed", "exit_code": -11}, "cause"),
        ({"kind": "worker_failed", "exit_code": -7}, "cause"),
        ({"kind": "worker_failed", "exit_code": -4}, "cause"),
        ({"kind": "worker_failed", "exit_code": -8}, "cause"),
        ({"kind": "worker_failed", "signal": "SIGSEGV"}, "cause"),
        ({"kind": "process_exit", "exit_code": -11}, "cause"),
        ({"kind": "failure_entry", "exit_code": -9}, "cause"),
        ({"kind": "root_cause_entry", "exit_code": -9}, "cause"),
        ({"kind": "worker_failed", "exit_code": -15}, "effect"),
        ({"kind": "worker_failed", "signal": "SIGTERM"}, "effect"),
        ({"kind": "worker_failed", "exit_code": -2}, "effect"),
        ({"kind": "worker_failed", "exit_code": 1}, "exit"),
        ({"kind": "worker_failed", "exit_code": -6}, "exit"),
        ({"kind": "worker_failed"}, "exit"),
        ({"kind": "root_cause_entry", "exit_code": 1}, "exit"),
        ({"kind": "worker_failed", "exit_code": 0}, None),  # a clean exit is no fault: dropped
        ({"kind": "error_file"}, "exit"),
        ({"kind": "nccl_warn"}, "weak"),
        ({"kind": "store_error", "severity": "warning"}, "weak"),
        ({"kind": "store_error", "severity": "error"}, "effect"),
        ({"kind": "watchdog_timeout"}, "effect"),
        ({"kind": "gloo_connection_closed"}, "effect"),
        ({"kind": "nccl_net_error"}, "effect"),
        ({"kind": "worker_signalled", "signal": "SIGTERM"}, "effect"),
        ({"kind": "step_progress", "severity": "info"}, None),  # not a fault kind
    ],
    ids=lambda x: "-".join(f"{v}" for v in x.values()) if isinstance(x, dict) else str(x),
)
def test_role_of_one_fault_row(row: dict[str, Any], role: str | None) -> None:
    assert _role(**dict(row)) == role


def test_duplicates_dropped_and_rankless_agent_rows_kept() -> None:
    rows = [
        ev(0, "python_exception", 1),
        ev(0, "python_exception", 1, duplicate=True),
        ev(None, "worker_signalled", 2, layer="elastic", signal="SIGTERM"),
        ev(1, "log", 3, severity="info"),
    ]
    f = fault_rows(table(rows))
    assert f["event_id"].to_list() == [0, 2]
    assert f["rank"].to_list() == [0, None]
    assert f["role"].to_list() == ["cause", "effect"]


def test_watchdog_hang_after_own_timeout_is_an_effect() -> None:
    rows = [
        ev(0, "watchdog_timeout", 10),
        ev(0, "watchdog_hang", 20),  # rank 0: the abort hanging
        ev(1, "watchdog_hang", 5),
        ev(1, "watchdog_timeout", 30),  # rank 1: hung before its own timeout
        ev(2, "watchdog_status", 10),
        ev(2, "watchdog_hang", 10),  # same second: not after
        ev(3, "watchdog_hang", 1),
    ]  # no timeout at all
    f = fault_rows(table(rows))
    roles = {(r, k): role for r, k, role in f.select("rank", "kind", "role").iter_rows()}
    assert roles[(0, "watchdog_hang")] == "effect"
    assert roles[(1, "watchdog_hang")] == "cause"
    assert roles[(2, "watchdog_hang")] == "cause"
    assert roles[(3, "watchdog_hang")] == "cause"
    # another rank's timeout does not make rank 3's hang late
    assert roles[(0, "watchdog_timeout")] == roles[(1, "watchdog_timeout")] == "effect"


def test_srun_task_list_expands_to_one_row_per_rank() -> None:
    msg = "srun: error: node-b: tasks 4-5,7: Exited with exit code 1"
    rows = [ev(r, "log", 0, severity="info", rank_source="transport_prefix") for r in range(8)]
    rows += [ev(None, "worker_failed", 9, layer="system", exit_code=1, message=msg, ranks_named="4,5,7")]
    f = fault_rows(table(rows))
    assert sorted(f["rank"].to_list()) == [4, 5, 7]
    assert set(f["rank_source"].to_list()) == {"srun_task"}
    assert set(f["event_id"].to_list()) == {8}
    assert set(f["role"].to_list()) == {"exit"}


def test_srun_task_list_untouched_when_a_launcher_ran_inside_the_tasks() -> None:
    msg = "srun: error: node-b: task 3: Exited with exit code 1"
    rows = [
        ev(0, "log", 0, severity="info", rank_source="path"),
        ev(None, "worker_failed", 9, layer="system", exit_code=1, message=msg, ranks_named="3"),
    ]
    # torchrun inside the srun task: task ids are nodes, not ranks
    f = fault_rows(table([*rows, ev(0, "log", 0, severity="info", layer="elastic", rank_source="path")]))
    assert f["rank"].to_list() == [None]
    # no launcher of its own: one task per rank, the task id is the rank
    f = fault_rows(table(rows))
    assert (f["rank"].to_list(), f["rank_source"].to_list()) == ([3], ["srun_task"])


def test_srun_rows_without_a_task_list_are_kept() -> None:
    rows = [
        ev(0, "log", 0, severity="info", rank_source="transport_prefix"),
        ev(
            None,
            "worker_failed",
            9,
            layer="system",
            exit_code=1,
            message="srun: error: node-b: task 1: Killed",
            ranks_named="1",
        ),
        ev(None, "job_cancelled", 9, layer="system", message="srun: Job step aborted"),
    ]
    f = fault_rows(table(rows))
    assert sorted(f["rank"].to_list(), key=lambda x: (x is None, x)) == [1, None]
    assert f.height == 2


def test_a_task_list_on_a_row_that_has_its_rank_or_is_not_the_launcher_is_not_expanded() -> None:
    base = [ev(r, "log", 0, severity="info", rank_source="transport_prefix") for r in range(4)]
    own = ev(2, "worker_failed", 9, layer="system", exit_code=1, ranks_named="0,1")
    other = ev(None, "monitored_barrier_failed", 9, layer="c10d", ranks_named="1,3")
    f = fault_rows(table([*base, own, other]))
    assert sorted(f["rank"].to_list(), key=lambda x: (x is None, x)) == [2, None]
