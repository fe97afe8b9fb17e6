"""``correlator/graph.py`` on minimal event tables: world size from evidence, failing attempts, host and local
rank per node, first fault per rank and the edge chosen for each collateral rank."""

from __future__ import annotations

from typing import Any

from correlator import build_graph
from correlator import graph as gm
from correlator.faults import failing_attempts
from tests.test_diagnose_units import ev, progress, table, timeout


def test_world_size_from_evidence() -> None:
    stated = [ev(r, "nccl_init", 0, layer="nccl", world_size=8, severity="info") for r in (0, 1)]
    assert gm._world_size(table(stated)) == 8
    # a rank above the stated size wins
    assert gm._world_size(table([*stated, ev(9, "log", 0, severity="info")])) == 10
    # per-rank files or folders: the highest rank + 1
    per_file = [ev(r, "log", 0, severity="info", rank_source="path") for r in (0, 3)]
    assert gm._world_size(table(per_file)) == 4
    # two per-rank folders at least: one rank's file alone says nothing of its peers
    assert gm._world_size(table([ev(2, "log", 0, severity="info", rank_source="folder+offset")])) is None
    assert (
        gm._world_size(table([ev(r, "log", 0, severity="info", rank_source="folder+offset") for r in (1, 2)]))
        == 3
    )
    # an excerpt of a combined stream states nothing about the ranks it lacks
    excerpt = [ev(r, "log", 0, severity="info", rank_source="prefix") for r in (0, 3)]
    assert gm._world_size(table(excerpt)) is None
    assert gm._world_size(table([ev(None, "log", 0, severity="info", world_size=4)])) == 4


def test_failing_attempts_ignore_weak_faults_and_clean_exits() -> None:
    rows = [
        ev(0, "nccl_warn", 1, attempt=0),
        ev(0, "worker_failed", 2, exit_code=0, layer="elastic", attempt=1),
        ev(1, "python_exception", 3, attempt=3),
        ev(1, "watchdog_timeout", 4, attempt=2),
        progress(0, 1),
    ]
    assert failing_attempts(table(rows)) == [2, 3]
    assert failing_attempts(table([progress(0, 1)])) == []


def test_node_attributes_host_by_majority_and_missing_ranks() -> None:
    rows = [
        ev(0, "log", 0, severity="info", host="node-a", local_rank=0),
        ev(0, "log", 1, severity="info", host="node-a", local_rank=0),
        ev(0, "log", 2, severity="info", host="other", local_rank=0),
        ev(1, "log", 0, severity="info", host="node-b", local_rank=None),
        ev(1, "nccl_init", 0, layer="nccl", world_size=3, severity="info", host=None),
    ]
    G = build_graph(table(rows))
    assert {r: (G.nodes[r]["host"], G.nodes[r]["local_rank"], G.nodes[r]["status"]) for r in G} == {
        0: ("node-a", 0, "clean"),
        1: ("node-b", None, "clean"),
        2: (None, None, "missing"),
    }
    assert (G.graph["world_size"], G.graph["missing"], G.graph["ranks_seen"]) == (3, [2], [0, 1])


def test_first_fault_puts_launcher_summaries_last() -> None:
    rows = [
        ev(0, "failure_entry", 1, layer="elastic", exit_code=1),  # id 0, stamped first but a summary
        ev(0, "python_exception", 5, exc_type="ValueError", layer="python"),  # id 1
        progress(1, 1),
    ]
    G = build_graph(table(rows))
    assert (G.nodes[0]["first_fault_kind"], G.nodes[0]["first_fault_event"]) == ("python_exception", 1)
    assert G.nodes[1].get("first_fault_kind") is None


def test_rank_named_only_by_the_launcher_becomes_a_node() -> None:
    msg = "srun: error: node-b: task 3: Exited with exit code 1"
    rows = [ev(r, "log", 0, severity="info", rank_source="transport_prefix") for r in range(3)]
    rows += [ev(None, "worker_failed", 9, layer="system", exit_code=1, message=msg, ranks_named="3")]
    G = build_graph(table(rows))
    assert G.graph["initiators"] == [3] and G.nodes[3]["status"] == "initiating"
    assert (G.nodes[3]["host"], G.nodes[3]["local_rank"], G.nodes[3]["first_fault_kind"]) == (
        None,
        None,
        "worker_failed",
    )


def _edge(rows: list[dict[str, Any]], r: int) -> tuple[str, int, Any, Any]:
    G = build_graph(table(rows))
    ex = G.nodes[r]["explained_by"]
    return ex["edge"], ex["rank"], ex["pg"], ex["seq"]


def test_edge_type_per_collateral_rank() -> None:
    crash = [ev(0, "python_exception", 1, exc_type="ValueError", layer="python"), progress(3, 1)]
    assert _edge([*crash, timeout(1, 9)], 1) == ("waits_for", 0, "0", 9)
    assert _edge([*crash, ev(1, "gloo_timeout", 5)], 1) == ("waits_for", 0, None, None)
    assert _edge([*crash, ev(1, "heartbeat_timeout", 5)], 1) == ("waits_for", 0, None, None)
    assert _edge([*crash, ev(1, "gloo_connection_closed", 5)], 1) == ("peer_error", 0, None, None)
    assert _edge([*crash, ev(1, "store_error", 5)], 1) == ("peer_error", 0, None, None)
    assert _edge([*crash, ev(1, "nccl_error", 5)], 1) == ("peer_error", 0, None, None)
    assert _edge([*crash, ev(1, "worker_signalled", 5, layer="elastic", signal="SIGTERM")], 1) == (
        "killed_by",
        0,
        None,
        None,
    )
    assert _edge([*crash, ev(1, "worker_failed", 5, layer="elastic", exit_code=-15)], 1) == (
        "killed_by",
        0,
        None,
        None,
    )
    assert _edge([*crash, ev(1, "watchdog_teardown", 5)], 1) == ("waits_for", 0, None, None)
    # a timeout with a seq but no PG is reported in PG "0"
    assert _edge([*crash, dict(timeout(1, 9), pg=None)], 1) == ("waits_for", 0, "0", 9)


def test_edge_target_is_the_initiator_the_rank_names() -> None:
    rows = [
        ev(0, "python_exception", 1, exc_type="ValueError", layer="python"),
        ev(2, "python_exception", 1, exc_type="ValueError", layer="python"),
        progress(3, 1),
        progress(4, 1),
        progress(5, 1),
        ev(1, "gloo_connection_closed", 5, peer_rank=2),
        ev(3, "gloo_connection_closed", 5),
        ev(4, "gloo_connection_closed", 5, peer_rank=5),
    ]
    G = build_graph(table(rows))
    assert G.graph["initiators"] == [0, 2]
    assert [G.nodes[r]["explained_by"]["rank"] for r in (1, 3, 4)] == [2, 0, 0]
    assert G.nodes[5]["status"] == "clean"


def test_store_wait_that_ran_out_waits_for_the_rank_that_never_set_the_key() -> None:
    crash = [ev(0, "python_exception", 1, exc_type="ValueError", layer="python"), progress(3, 1)]
    # c10d's store_wait_input line states the timeout it waited ("... timeout 1800000ms"): a wait
    assert _edge([*crash, ev(1, "store_error", 5, timeout_ms=1_800_000)], 1) == ("waits_for", 0, None, None)
    # a store error without a timeout (connection reset/refused) stays a peer error
    assert _edge([*crash, ev(1, "store_error", 5)], 1) == ("peer_error", 0, None, None)


def test_pending_flight_recorder_dump_waits_even_when_the_launcher_signals_it_later() -> None:
    crash = [ev(2, "python_exception", 1, exc_type="ValueError", layer="python"), progress(3, 1)]
    rows = [
        *crash,
        ev(0, "fr_waiting", 4, layer="fr", pg="0", seq=36),
        ev(0, "worker_signalled", 6, layer="elastic", signal="SIGTERM"),
    ]
    assert _edge(rows, 0) == ("waits_for", 2, "0", 36)


def test_stall_report_ranks_in_a_collective_mismatch_are_explained_by_the_mismatch() -> None:
    from pathlib import Path

    import correlator

    case = Path(__file__).parent.parent / "fixtures/cases/real-horovod-336-stall-rank3-different-op-4r/logs"
    d = correlator.diagnose(correlator.load(case)).to_json()
    assert (d["failure_kind"], d["initiating_ranks"]) == ("collective_mismatch", [3])
    got = {p["rank"]: (p["explained_by"] or {}).get("edge") for p in d["per_rank"] if p["rank"] != 3}
    # the thread's Horovod stall report: ranks 0-2 submitted other allreduces than rank 3
    assert got == {0: "mismatch", 1: "mismatch", 2: "mismatch"}


def test_monitored_barrier_peer_waits_unless_the_coordinator_crashed() -> None:
    # Rank 0 coordinates the gloo monitoredBarrier; rank 2 never arrives (silent), rank 0 reports it, and
    # rank 1 "successfully reached monitoredBarrier, but received errors ... from rank 0": it waited for 2.
    barrier = [
        progress(0, 1),
        progress(1, 1),
        progress(2, 1),
        progress(0, 3),
        progress(1, 3),
        ev(0, "monitored_barrier_failed", 6, ranks_named="2", peer_rank=2, timeout_ms=30_000, pg_rank=0),
        ev(1, "monitored_barrier_peer", 6, peer_rank=0),
    ]
    G = build_graph(table(barrier))
    assert G.graph["initiators"] == [2]
    assert G.nodes[1]["explained_by"]["edge"] == "waits_for"
    assert G.nodes[1]["explained_by"]["rank"] == 2
    # rank 0 itself crashed (an exception of its own): rank 1's error is the connection rank 0 closed
    crashed = [
        progress(0, 1),
        progress(1, 1),
        ev(0, "python_exception", 2, exc_type="ValueError", layer="python"),
        ev(1, "monitored_barrier_peer", 6, peer_rank=0),
    ]
    assert _edge(crashed, 1) == ("peer_error", 0, None, None)
    # next to another peer kind (a closed gloo connection) the peer error stays
    alive = [progress(0, 1), progress(1, 1), progress(2, 1), progress(0, 3), progress(1, 3)]
    both = [
        *alive,
        ev(0, "monitored_barrier_failed", 6, ranks_named="2", peer_rank=2, timeout_ms=30_000, pg_rank=0),
        ev(1, "monitored_barrier_peer", 6, peer_rank=0),
        ev(1, "gloo_connection_closed", 6),
    ]
    assert _edge(both, 1)[0] == "peer_error"
