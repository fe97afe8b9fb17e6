"""The initiator rules of ``correlator/initiators.py`` and the graph they give (``correlator/graph.py``), on
minimal event tables: for each rule the initiating ranks, the basis, the failure kind, each initiator's key
event, the collective in focus, the reasons and every edge with its evidence row.

Event ids are the row positions of the table (``tests.test_diagnose_units.table``), so each expected id is read
off the row list written in the test.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from correlator import build_graph, disagreement
from correlator import initiators as ini
from tests.test_diagnose_units import ev, progress, table, timeout

NO_LAUNCHER = "no launcher output to confirm exit statuses"


def graph_of(rows: list[dict[str, Any]], attempt: int | None = None) -> Any:
    return build_graph(table(rows), attempt)


def verdict(G: Any) -> tuple[list[int], str, str, list[str]]:
    reasons = [n.text() for n in G.graph["reasons"]]
    return G.graph["initiators"], G.graph["initiator_basis"], G.graph["failure_kind"], reasons


def edges(G: Any) -> list[tuple[int, int, str, str | None, int | None, list[int]]]:
    return sorted((a, b, e["edge"], e["pg"], e["seq"], e["evidence"]) for a, b, e in G.edges(data=True))


def test_first_fault_cuda_oom_then_timeouts() -> None:
    rows = [progress(r, 9) for r in range(4)] + [  # ids 0-3
        ev(2, "cuda_oom", 1, exc_type="torch.cuda.OutOfMemoryError", layer="python"),  # id 4
        timeout(0, 100),
        timeout(1, 100),
        timeout(3, 100),
    ]  # ids 5, 6, 7
    G = graph_of(rows)
    assert verdict(G) == ([2], "first fault", "cuda_oom", [NO_LAUNCHER])
    assert G.graph["focus"] == {"pg": "0", "seq": 100, "op": "ALLREDUCE"}
    assert G.nodes[2]["cause_event"] == 4 and G.nodes[2]["status"] == "initiating"
    assert edges(G) == [
        (0, 2, "waits_for", "0", 100, [5]),
        (1, 2, "waits_for", "0", 100, [6]),
        (3, 2, "waits_for", "0", 100, [7]),
    ]
    assert [G.nodes[r]["explained_by"] for r in (0, 1, 3)] == [
        {"rank": 2, "edge": "waits_for", "pg": "0", "seq": 100}
    ] * 3
    assert (G.nodes[0]["first_fault_kind"], G.nodes[0]["first_fault_event"]) == ("watchdog_timeout", 5)
    assert (G.graph["missing"], G.graph["signalled"], G.graph["launcher_present"]) == ([], [], False)


def test_first_fault_prefers_the_exception_over_the_exit_status() -> None:
    rows = [progress(r, 3) for r in range(3)]  # ids 0-2
    rows += [
        ev(1, "worker_failed", 5, layer="elastic", exit_code=1),  # id 3, earlier than the exception line
        ev(1, "python_exception", 6, exc_type="KeyError", layer="python"),  # id 4
        ev(0, "worker_signalled", 7, layer="elastic", signal="SIGTERM"),  # id 5
        ev(2, "worker_signalled", 7, layer="elastic", signal="SIGTERM"),
    ]  # id 6
    G = graph_of(rows)
    assert verdict(G) == ([1], "first fault", "rank_crash", [])
    assert G.nodes[1]["cause_event"] == 4
    assert edges(G) == [(0, 1, "killed_by", None, None, [5]), (2, 1, "killed_by", None, None, [6])]
    assert G.graph["signalled"] == [0, 2] and G.graph["launcher_present"] is True


def test_cause_after_the_first_reaction_is_not_an_initiator() -> None:
    rows = [
        ev(0, "python_exception", 1, exc_type="ValueError", layer="python"),  # id 0
        timeout(1, 5, sec=2),  # id 1: rank 1 reacted at 2 s
        ev(2, "python_exception", 3, exc_type="RuntimeError", layer="python"),  # id 2: after the reaction
        ev(3, "python_exception", 2, exc_type="RuntimeError", layer="python"),
    ]  # id 3: at the reaction: in time
    G = graph_of(rows)
    inits, basis, kind, reasons = verdict(G)
    assert (inits, basis, kind) == ([0, 3], "first fault", "rank_crash")
    assert reasons == ["2 ranks failed independently before any other rank reacted", NO_LAUNCHER]
    assert G.nodes[2]["status"] == "collateral" and G.nodes[2]["explained_by"]["rank"] == 0


def test_common_mode_needs_half_the_ranks_and_one_exception_type() -> None:
    same = [ev(r, "python_exception", 1, exc_type="RuntimeError", layer="python") for r in range(4)]
    G = graph_of(same)
    assert verdict(G) == (
        [0, 1, 2, 3],
        "common mode",
        "rank_crash",
        ["4 ranks failed the same way at about the same time (common mode)", NO_LAUNCHER],
    )
    mixed = [
        ev(r, "python_exception", 1, exc_type="RuntimeError" if r else "KeyError", layer="python")
        for r in range(4)
    ]
    assert verdict(graph_of(mixed))[1:3] == ("first fault", "rank_crash")
    assert verdict(graph_of(mixed))[3][0] == "4 ranks failed independently before any other rank reacted"
    # two of eight: not common mode even with one exception type
    few = [progress(r, 1) for r in range(8)] + [
        ev(r, "python_exception", 1, exc_type="RuntimeError", layer="python") for r in (2, 5)
    ]
    assert verdict(graph_of(few))[:2] == ([2, 5], "first fault")


def test_cause_kind_precedence() -> None:
    def kind(*extra: dict[str, Any]) -> str:
        return ini._cause_kind(table(list(extra)))

    assert kind(ev(0, "python_exception", 1), ev(0, "cuda_oom", 2)) == "cuda_oom"
    assert kind(ev(0, "python_exception", 1), ev(0, "cuda_error", 2)) == "cuda_error"
    assert kind(ev(0, "ddp_error", 1), ev(0, "python_exception", 2)) == "collective_mismatch"
    assert kind(ev(0, "watchdog_hang", 1), ev(0, "python_exception", 2)) == "straggler_hang"
    assert kind(ev(0, "python_exception", 1)) == "rank_crash"
    assert kind(ev(0, "worker_failed", 1, exit_code=-9)) == "oom_kill"
    assert kind(ev(0, "process_killed", 1, signal="SIGKILL")) == "oom_kill"
    assert kind(ev(0, "worker_failed", 1, exit_code=-11)) == "rank_crash"


def test_sigsegv_exit_is_a_cause_and_others_were_killed_by_it() -> None:
    rows = [progress(r, 3) for r in range(3)] + [
        ev(2, "worker_failed", 10, layer="elastic", exit_code=-11)
    ]  # id 3
    rows += [ev(r, "worker_signalled", 11, layer="elastic", signal="SIGTERM") for r in (0, 1)]  # ids 4, 5
    G = graph_of(rows)
    assert verdict(G) == ([2], "first fault", "rank_crash", [])
    assert G.nodes[2]["cause_event"] == 3
    assert edges(G) == [(0, 2, "killed_by", None, None, [4]), (1, 2, "killed_by", None, None, [5])]


def test_bare_exit_status() -> None:
    rows = [progress(r, 5) for r in range(3)] + [
        ev(1, "worker_failed", 9, layer="elastic", exit_code=1)
    ]  # id 3
    G = graph_of(rows)
    assert verdict(G) == (
        [1],
        "exit status",
        "rank_crash",
        ["the initiating rank logged no error text, only an exit status"],
    )
    assert G.nodes[1]["cause_event"] == 3 and edges(G) == []
    assert [G.nodes[r]["status"] for r in (0, 1, 2)] == ["clean", "initiating", "clean"]


def test_bare_exit_of_a_rank_that_also_timed_out_is_not_the_initiator() -> None:
    rows = [
        timeout(0, 4, sec=5),
        ev(0, "worker_failed", 9, layer="elastic", exit_code=1),
        ev(1, "worker_failed", 9, layer="elastic", exit_code=1),
        progress(2, 1),
    ]
    assert verdict(graph_of(rows))[:2] == ([1], "exit status")


def test_network_peer_host_unreachable() -> None:
    msg = "NET/IB : Got completion from peer 10.0.0.2 with error 12"
    rows = [
        ev(0, "nccl_net_error", 5, layer="nccl", host="node-a", peer_addr="10.0.0.2", message=msg),  # id 0
        ev(1, "nccl_net_error", 5.5, layer="nccl", host="node-a", peer_addr="10.0.0.2", message=msg),  # id 1
        ev(2, "log", 0, host="node-b", severity="info", local_addr="10.0.0.2"),  # id 2
        ev(3, "log", 0, host="node-b", severity="info"),
    ]  # id 3
    G = graph_of(rows)
    assert verdict(G) == (
        [2, 3],
        "peer host node-b unreachable",
        "network_error",
        [
            (
                "the ranks of node-b stopped logging; they are named because the others lost their "
                "connection to it"
            ),
            NO_LAUNCHER,
        ],
    )
    assert (G.nodes[2]["cause_event"], G.nodes[3]["cause_event"]) == (0, 0)
    assert edges(G) == [(0, 2, "peer_error", None, None, [0]), (1, 2, "peer_error", None, None, [1])]
    t = table(rows)
    assert ini.unreachable_peer_host(t, t.filter(pl.col("kind") == "nccl_net_error")) == "node-b"
    # a host name as the address; a host that logged the error itself is not unreachable
    by_name = [dict(rows[0], peer_addr="node-b.cluster"), rows[3]]
    tb = table(by_name)
    assert ini.unreachable_peer_host(tb, tb.filter(pl.col("kind") == "nccl_net_error")) == "node-b"
    both = rows + [ev(3, "nccl_net_error", 6, layer="nccl", host="node-b", message="NET/IB : error")]
    tb = table(both)
    assert ini.unreachable_peer_host(tb, tb.filter(pl.col("kind") == "nccl_net_error")) is None
    unnamed = [dict(rows[0], peer_addr=None), rows[2]]
    tb = table(unnamed)
    assert ini.unreachable_peer_host(tb, tb.filter(pl.col("kind") == "nccl_net_error")) is None


def test_first_network_error_ties_within_a_second() -> None:
    rows = [
        ev(0, "nccl_net_error", 5, layer="nccl", message="NET/IB : a"),  # id 0
        ev(1, "nccl_net_error", 5.4, layer="nccl", message="NET/IB : b"),  # id 1: within 1 s
        ev(2, "nccl_net_error", 9, layer="nccl", message="NET/IB : c"),  # id 2: later
        ev(3, "log", 0, severity="info"),
    ]
    G = graph_of(rows)
    assert verdict(G) == (
        [0, 1],
        "first network error",
        "network_error",
        ["several ranks saw network errors within the clock uncertainty", NO_LAUNCHER],
    )
    assert (G.nodes[0]["cause_event"], G.nodes[1]["cause_event"]) == (0, 1)
    assert edges(G) == [(2, 0, "peer_error", None, None, [2])]
    one = graph_of([rows[0], dict(rows[1], ts=rows[1]["ts"].replace(second=7)), rows[3]])
    assert verdict(one) == ([0], "first network error", "network_error", [NO_LAUNCHER])


def test_monitored_barrier_names_a_stuck_rank() -> None:
    rows = [progress(r, 3) for r in range(4)]  # ids 0-3
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
    G = graph_of(rows)
    assert verdict(G) == ([2], "named by monitoredBarrier", "straggler_hang", [NO_LAUNCHER])
    assert edges(G) == [(0, 2, "waits_for", None, None, [4])]


def test_monitored_barrier_group_ranks_are_shifted_to_global_ranks() -> None:
    rows = [progress(r, 3) for r in range(4, 8)]
    rows += [
        ev(
            4,
            "monitored_barrier_failed",
            20,
            pg_rank=0,
            message="Ranks 1 failed to pass monitoredBarrier in 15000 ms",
            ranks_named="1",
        )
    ]
    assert verdict(graph_of(rows))[:3] == ([5], "named by monitoredBarrier", "straggler_hang")


def test_monitored_barrier_named_rank_that_failed_elsewhere_ran_another_collective() -> None:
    rows = [progress(r, 3) for r in range(4)]
    rows += [
        ev(
            0,
            "monitored_barrier_failed",
            20,
            pg_rank=0,
            message="Ranks 2 failed to pass monitoredBarrier in 15000 ms",
            ranks_named="2",
        ),
        ev(2, "watchdog_timeout", 30, seq=5, pg="0", op="ALLREDUCE"),
    ]  # id 5
    G = graph_of(rows)
    assert verdict(G) == (
        [2],
        "named by monitoredBarrier",
        "collective_mismatch",
        [
            ("the rank named by monitoredBarrier did not wait in the barrier: it ran a different collective"),
            NO_LAUNCHER,
        ],
    )
    assert edges(G) == [(0, 2, "mismatch", None, None, [4])]


def test_silent_rank_is_the_straggler() -> None:
    rows = [progress(r, 5) for r in range(4)] + [timeout(0, 40), timeout(1, 40), timeout(2, 40)]
    G = graph_of(rows)
    assert verdict(G) == (
        [3],
        "silent while the others failed",
        "straggler_hang",
        ["the initiating rank logged no error; it was found by its silence", NO_LAUNCHER],
    )
    assert G.graph["focus"] == {"pg": "0", "seq": 40, "op": "ALLREDUCE"}
    assert edges(G) == [
        (0, 3, "waits_for", "0", 40, [4]),
        (1, 3, "waits_for", "0", 40, [5]),
        (2, 3, "waits_for", "0", 40, [6]),
    ]


def test_of_several_silent_ranks_the_one_furthest_behind() -> None:
    rows = [
        ev(r, "collective_fingerprint", 1, seq=s, op="ALLREDUCE", numel=8, pg="0")
        for r, s in ((0, 10), (1, 10), (2, 9))
    ]
    rows += [timeout(0, 10, sec=600, numel=8), ev(2, "log", 2, severity="info")] + [progress(3, 1)]
    G = graph_of(rows)
    # ranks 1, 2, 3 are silent; rank 3 entered nothing in PG 0 (-1), rank 2 entered 9, rank 1 entered 10
    assert verdict(G)[:3] == ([3], "silent while the others failed", "straggler_hang")


def test_early_exit_needs_the_launcher() -> None:
    rows = [progress(r, 5) for r in range(4)]
    rows += [
        ev(0, "worker_signalled", 601, layer="elastic", signal="SIGTERM"),  # id 4
        timeout(0, 50),
        timeout(1, 50),
        timeout(2, 50),
    ]  # ids 5, 6, 7
    G = graph_of(rows)
    assert verdict(G)[:3] == ([3], "silent while the others failed", "early_exit")
    assert edges(G) == [
        (0, 3, "exited_before", "0", 50, [5]),
        (1, 3, "exited_before", "0", 50, [6]),
        (2, 3, "exited_before", "0", 50, [7]),
    ]
    # rank 0 only signalled by the agent (no error of its own) is silent too, but the agent's SIGTERM says it was
    # alive at teardown (waiting); rank 3, which no launcher line accounts for, had exited 0 before. This test
    # first asserted ([0, 3], straggler_hang); the torch 2.15 capture cap-t2150-early-exit-plain-r3 (rank 3 leaves
    # the loop, rank 1 is SIGTERMed silent) shows the SIGTERMed silent rank is collateral.
    signalled = [r for i, r in enumerate(rows) if i != 5]
    assert verdict(graph_of(signalled))[:3] == ([3], "silent while the others failed", "early_exit")
    # with no launcher line at all nothing says who exited: both silent ranks stay candidates
    unsignalled = [r for i, r in enumerate(rows) if i not in (4, 5)]
    assert verdict(graph_of(unsignalled))[:3] == ([0, 3], "silent while the others failed", "straggler_hang")
    no_launcher = [progress(r, 5) for r in range(4)] + [timeout(0, 50), timeout(1, 50), timeout(2, 50)]
    assert verdict(graph_of(no_launcher))[2] == "straggler_hang"


def test_behind_on_the_collective_sequence() -> None:
    rows = [ev(r, "collective_fingerprint", 1, seq=40, op="ALLREDUCE", numel=8) for r in (0, 1, 2)]
    rows += [ev(3, "collective_fingerprint", 1, seq=39, op="ALLREDUCE", numel=8)]
    rows += [timeout(r, 40) for r in (0, 1, 2)] + [timeout(3, 39)]  # ids 4-7
    G = graph_of(rows)
    assert verdict(G) == (
        [3],
        "behind on the collective sequence",
        "straggler_hang",
        ["found by its lagging sequence number, not by an error", NO_LAUNCHER],
    )
    assert G.graph["focus"] == {"pg": "0", "seq": 40, "op": "ALLREDUCE"}
    assert edges(G) == [
        (0, 3, "waits_for", "0", 40, [4]),
        (1, 3, "waits_for", "0", 40, [5]),
        (2, 3, "waits_for", "0", 40, [6]),
    ]


def test_missing_rank_is_named_when_everyone_timed_out() -> None:
    rows = [ev(r, "nccl_init", 0, layer="nccl", world_size=4, severity="info") for r in (0, 1, 2)]
    rows += [timeout(r, 7) for r in (0, 1, 2)]
    G = graph_of(rows)
    assert verdict(G) == (
        [3],
        "left no log",
        "straggler_hang",
        ["the initiating rank left no log at all; it is named because it is missing", NO_LAUNCHER],
    )
    assert (G.graph["world_size"], G.graph["missing"], G.graph["ranks_seen"]) == (4, [3], [0, 1, 2])
    assert G.nodes[3]["status"] == "initiating"


def test_missing_ranks_lower_confidence_when_someone_else_is_named() -> None:
    rows = [ev(r, "nccl_init", 0, layer="nccl", world_size=6, severity="info") for r in range(4)]
    rows += [ev(1, "python_exception", 1, exc_type="ValueError", layer="python")]
    G = graph_of(rows)
    assert verdict(G) == ([1], "first fault", "rank_crash", ["2 of 6 ranks left no log", NO_LAUNCHER])
    assert [G.nodes[r]["status"] for r in range(6)] == [
        "clean",
        "initiating",
        "clean",
        "clean",
        "missing",
        "missing",
    ]


def test_odd_one_out_by_op_and_by_shape() -> None:
    rows = [ev(r, "collective_fingerprint", 1, seq=12, op="ALLREDUCE", shape="[4]") for r in (0, 1, 2)]
    rows += [ev(3, "collective_fingerprint", 1, seq=12, op="BROADCAST", shape="[4]")]  # id 3
    G = graph_of(rows + [timeout(r, 12, numel=None) for r in (0, 1, 2)])  # type: ignore[arg-type]
    assert verdict(G) == ([3], "odd one out", "collective_mismatch", [NO_LAUNCHER])
    # the timeouts state no size: the ops are compared, not the shapes
    assert G.graph["focus"] == {
        "pg": "0",
        "seq": 12,
        "majority": "ALLREDUCE",
        "evidence": [0, 1, 2, 3, 4, 5, 6],
        "own": {3: 3},
    }
    assert G.nodes[3]["cause_event"] == 3
    assert edges(G) == [
        (0, 3, "mismatch", "0", 12, [4]),
        (1, 3, "mismatch", "0", 12, [5]),
        (2, 3, "mismatch", "0", 12, [6]),
    ]
    shape = [
        ev(r, "collective_fingerprint", 1, seq=3, op="ALLGATHER", shape="[8]" if r != 1 else "[9]")
        for r in range(4)
    ]
    assert verdict(graph_of(shape))[:3] == ([1], "odd one out", "collective_mismatch")


def test_divergence_details() -> None:
    rows = [ev(r, "collective_fingerprint", 1, seq=5, op="ALLREDUCE", shape="[4]") for r in (0, 1, 2)]
    rows += [ev(3, "collective_fingerprint", 1, seq=5, op="ALLREDUCE", shape="[5]")]
    rows += [
        ev(r, "collective_fingerprint", 2, seq=6, op="ALLREDUCE" if r else "BROADCAST", shape="[4]")
        for r in range(4)
    ]
    minority, majority, info = disagreement.divergence(table(rows))
    assert (minority, majority) == ({3}, {0, 1, 2})  # the earliest seq that disagrees
    assert info == {"pg": "0", "seq": 5, "majority": "ALLREDUCE [4]", "evidence": [0, 1, 2, 3], "own": {3: 3}}
    # a claim without a size at seq 5: op types only there (they agree); seq 6 still compares shapes
    rows[0] = dict(rows[0], shape=None)
    minority, majority, info = disagreement.divergence(table(rows))
    assert (minority, majority, info["seq"], info["majority"]) == ({0}, {1, 2, 3}, 6, "ALLREDUCE [4]")
    assert (info["evidence"], info["own"]) == ([4, 5, 6, 7], {0: 4})
    # a rank with two signatures at one key (mixed process groups): the key says nothing
    mixed = [
        ev(0, "collective_fingerprint", 1, seq=5, op="ALLREDUCE", shape="[4]"),
        ev(0, "collective_fingerprint", 1, seq=5, op="BROADCAST", shape="[4]"),
        ev(1, "collective_fingerprint", 1, seq=5, op="ALLREDUCE", shape="[4]"),
    ]
    assert disagreement.divergence(table(mixed)) == (set(), set(), {})
    assert disagreement.divergence(table([progress(0, 1)])) == (set(), set(), {})


def test_mismatch_message_states_what_the_peer_ran() -> None:
    msg = (
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint("
        "SequenceNumber=9, OpType=ALLREDUCE, TensorShape=[4]), but Rank 2 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=9, OpType=BROADCAST, TensorShape=[4])."
    )
    rows = [
        ev(
            0,
            "collective_mismatch",
            1,
            seq=9,
            op="ALLREDUCE",
            shape="[4]",
            peer_rank=2,
            peer_op="BROADCAST",
            peer_shape="[4]",
            message=msg,
        ),
        ev(1, "collective_fingerprint", 1, seq=9, op="ALLREDUCE", shape="[4]"),
        progress(2, 1),
    ]
    minority, majority, info = disagreement.divergence(table(rows))
    assert (minority, majority, info["own"]) == ({2}, {0, 1}, {})
    G = graph_of(rows)
    assert verdict(G)[:3] == ([2], "odd one out", "collective_mismatch")
    assert G.nodes[2]["cause_event"] == 0  # no line of its own: the first claim's row


def test_even_disagreement_names_everyone_with_a_reason() -> None:
    rows = [
        ev(r, "collective_fingerprint", 1, seq=7, op="ALLREDUCE" if r < 2 else "BROADCAST", shape="[4]")
        for r in range(4)
    ]
    rows += [ev(r, "watchdog_timeout", 600) for r in range(4)]
    G = graph_of(rows)
    assert verdict(G) == (
        [0, 1, 2, 3],
        "odd one out",
        "collective_mismatch",
        ["the ranks disagree evenly on the collective; no single odd one out", NO_LAUNCHER],
    )
    # with a cause on some rank, an even split is no odd one out: the cause decides
    # (the exception is rank 1's earlier line: a line after its own timeout would be that wait raising)
    crash = rows[:4] + [ev(1, "python_exception", 0.5, exc_type="ValueError", layer="python")] + rows[4:]
    assert verdict(graph_of(crash))[:2] == ([1], "first fault")


def test_config_line_names_the_odd_rank() -> None:
    rows = [
        ev(
            r,
            "log",
            0,
            layer="app",
            severity="info",
            message=f"rank={r} pid={100 + r} model hidden={48 if r == 1 else 32} params={1012 if r == 1 else 676}",
        )
        for r in range(4)
    ]  # ids 0-3
    rows += [
        ev(2, "collective_mismatch", 5, message="Received data size doesn't match expected size.")
    ]  # id 4
    rows += [ev(r, "worker_signalled", 6, layer="elastic", signal="SIGTERM") for r in (0, 1, 3)]
    assert disagreement.config_outlier(table(rows)) == (1, [1, 0])
    G = graph_of(rows)
    assert verdict(G) == (
        [1],
        "odd one out",
        "collective_mismatch",
        ["the odd rank was found from its own configuration line, not from the collective itself"],
    )
    assert G.nodes[1]["cause_event"] == 1
    # two ranks differ: no single outlier; fewer than three ranks: none
    two = [
        dict(r, message=r["message"].replace("hidden=32", "hidden=48", 1)) if r["rank"] == 3 else r
        for r in rows[:4]
    ]
    assert disagreement.config_outlier(table(two)) == (None, [])
    assert disagreement.config_outlier(table(rows[:2])) == (None, [])


def test_mismatch_without_an_odd_rank_names_suspects() -> None:
    rows = [progress(r, 3) for r in range(4)]
    rows += [ev(2, "collective_mismatch", 5, message="op.preamble.length <= op.nbytes. 384 vs 256.")]
    rows += [ev(r, "worker_signalled", 6, layer="elastic", signal="SIGTERM") for r in (0, 1, 3)]
    inits, basis, kind, reasons = verdict(graph_of(rows))
    assert (basis, kind) == ("silent while the others failed", "collective_mismatch")
    assert 2 not in inits
    assert reasons == [
        "the initiating rank logged no error; it was found by its silence",
        (
            "a collective mismatch was detected but the odd rank could not be determined; "
            "the silent ranks are only suspects"
        ),
    ]


def test_no_initiator_outcomes() -> None:
    launcher = [
        progress(0, 1),
        ev(None, "launcher_error", 3, layer="elastic", message="RendezvousTimeoutError"),
    ]
    assert verdict(graph_of(launcher)) == ([], "launcher", "launcher_error", [])
    clean = [progress(r, 1) for r in range(2)]
    assert verdict(graph_of(clean)) == ([], "", "none", [])
    rankless = [
        ev(None, "python_exception", 3, exc_type="ValueError", layer="python", path="job.log"),  # id 0
        ev(None, "watchdog_timeout", 5, path="job.log"),
    ]  # id 1
    G = graph_of(rankless)
    assert verdict(G) == (
        [],
        "fault without a rank",
        "rank_crash",
        ["the fault is on lines that name no rank; the initiating rank is unknown", NO_LAUNCHER],
    )
    assert G.graph["focus"] == {"evidence": [0]}
    timeouts_only = graph_of([rankless[1]])
    assert verdict(timeouts_only)[2] == "unknown" and timeouts_only.graph["focus"] == {"evidence": [0]}


def test_identity_from_pid_order_lowers_confidence() -> None:
    rows = [
        ev(0, "python_exception", 1, exc_type="ValueError", layer="python", rank_source="pid_order"),
        ev(1, "log", 0, severity="info", rank_source="path"),
    ]
    assert verdict(graph_of(rows))[3] == [
        NO_LAUNCHER,
        "the initiating rank's identity is inferred (pid order / message text), not stated",
    ]
    stated = [dict(rows[0], rank_source="path"), rows[1]]
    assert verdict(graph_of(stated))[3] == [NO_LAUNCHER]


def test_teardown_makes_the_silent_ranks_collateral() -> None:
    rows = [progress(r, 1) for r in range(4)]
    rows += [
        ev(1, "python_exception", 2, exc_type="KeyError", layer="python"),  # id 4
        ev(None, "job_cancelled", 4, layer="system", message="srun: Job step aborted"),
    ]  # id 5
    G = graph_of(rows)
    assert edges(G) == [
        (0, 1, "killed_by", None, None, [5]),
        (2, 1, "killed_by", None, None, [5]),
        (3, 1, "killed_by", None, None, [5]),
    ]


def test_attempt_selection_and_world_size() -> None:
    rows = [
        ev(1, "python_exception", 1, exc_type="ValueError", layer="python", attempt=1),
        ev(0, "log", 0, severity="info", attempt=0),
        ev(2, "log", 0, severity="info", attempt=1),
    ]
    G = graph_of(rows)
    assert G.graph["attempt"] == 1 and G.graph["attempts"] == [1] and G.graph["ranks_seen"] == [1, 2]
    assert graph_of(rows, attempt=0).graph["initiators"] == []
    clean = [ev(0, "log", 0, severity="info", attempt=3), ev(1, "log", 0, severity="info", attempt=2)]
    assert graph_of(clean).graph["attempt"] == 2
