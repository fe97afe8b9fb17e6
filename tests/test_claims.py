"""Claims (correlator.claims): what a rank's lines say about a peer, and the peer the others point at.

The lines are real: NCCL's proxy thread line from sgl-project/sglang#5013 (7 of 8 local processes log it
when local rank 7 dies), DDP's shape check from reducer.cpp. Expected values are read off the lines.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

import correlator
from correlator import claims
from correlator.claims import Claim, ClaimKind

CLOSED = "node-a:{pid}:{tid} [{dev}] NCCL INFO [Service thread] Connection closed by localRank {peer}"


def _lines(devs: list[int], peer: int) -> str:
    return "\n".join(CLOSED.format(pid=338 + d, tid=1212 + d, dev=d, peer=peer) for d in devs) + "\n"


def test_every_other_process_saying_local_rank_7_closed_names_rank_7(tmp_path: Path) -> None:
    (tmp_path / "console.log").write_text(_lines([5, 6, 3, 2, 1, 4, 0], 7))
    d = correlator.diagnose(correlator.load(tmp_path))
    assert d.initiating_ranks == [7]
    assert d.failure_kind == "rank_crash"
    assert "BLAMED_BY_THE_OTHERS" in d.confidence_reason_codes
    assert d.confidence < 0.8  # a reading of the others' claims, nothing from rank 7 itself
    assert d.evidence[0].role.startswith("points at rank 7")


def test_half_the_ranks_blaming_a_peer_names_no_one_by_blame(tmp_path: Path) -> None:
    # ranks 0-3 seen; only 0 and 1 say local rank 3 closed: rank 2 says nothing about it.
    (tmp_path / "console.log").write_text(_lines([0, 1], 3) + CLOSED.format(pid=9, tid=9, dev=2, peer=0))
    d = correlator.diagnose(correlator.load(tmp_path))
    assert "BLAMED_BY_THE_OTHERS" not in d.confidence_reason_codes


def _table(rows: list[dict[str, object]]) -> pl.DataFrame:
    base = {
        "event_id": 0,
        "kind": "log",
        "rank": None,
        "local_rank": None,
        "peer_rank": None,
        "duplicate": False,
    }
    return pl.DataFrame([{**base, "event_id": i, **r} for i, r in enumerate(rows)])


def test_local_peer_maps_to_the_global_numbering_of_the_reporter() -> None:
    # rank 9 is local rank 1 of its node (ranks 8-15): its node's local rank 3 is global rank 11.
    t = _table(
        [
            {"kind": "nccl_peer_closed", "rank": 9, "local_rank": 1, "peer_rank": 3},
            {"kind": "nccl_peer_closed", "rank": 5, "peer_rank": 3},  # rank from the GPU index: local already
            {"kind": "store_error", "rank": 2, "peer_rank": 0},
            {"kind": "ddp_error", "rank": 1, "peer_rank": 0},
            {"kind": "ddp_error", "rank": 1, "peer_rank": 1},  # about itself: dropped
            {"kind": "nccl_peer_closed", "rank": 4, "peer_rank": 4, "duplicate": True},
        ]
    )
    assert claims.extract(t) == [
        Claim(ClaimKind.BLAMES, 9, 11, "nccl_peer_closed", 0),
        Claim(ClaimKind.BLAMES, 5, 3, "nccl_peer_closed", 1),
        Claim(ClaimKind.WAITS_FOR, 2, 0, "store_error", 2),
        Claim(ClaimKind.DISAGREES_WITH, 1, 0, "ddp_error", 3),
    ]


def test_monitored_barrier_list_and_exits_are_claims() -> None:
    t = _table([{"kind": "monitored_barrier_failed", "rank": 0, "ranks_named": "2,3"}])
    exits = pl.DataFrame({"rank": [2], "exit_code": [-9], "signal": [None], "event_id": [7]})
    assert claims.extract(t, exits) == [
        Claim(ClaimKind.BLAMES, 0, 2, "monitored_barrier_failed", 0),
        Claim(ClaimKind.BLAMES, 0, 3, "monitored_barrier_failed", 0),
        Claim(ClaimKind.EXITED, 2, None, "-9", 7),
    ]


def _blame(rank: int | None, peer: int, eid: int) -> Claim:
    return Claim(ClaimKind.BLAMES, rank, peer, "x", eid)


def test_accused_needs_two_claimants_no_tie_and_every_other_rank() -> None:
    three = [_blame(0, 3, 5), _blame(1, 3, 2), _blame(2, 3, 9), _blame(1, 3, 11)]
    acc = claims.accused(three, seen=[0, 1, 2])
    assert acc is not None
    assert (acc.peer, acc.claimants, acc.event_ids) == (3, (0, 1, 2), (2, 5, 9, 11))
    assert claims.accused(three, seen=[0, 1, 2, 4]) is None  # rank 4 says nothing about 3
    assert claims.accused(three, seen=[0, 1, 2, 4], whole=False) is not None
    assert claims.accused(three, seen=[0, 1, 2], exclude=[3]) is None  # 3 has a cause of its own
    assert claims.accused([_blame(0, 3, 1)], seen=[0]) is None  # one claimant is not "the others"
    tie = [_blame(0, 3, 1), _blame(1, 3, 2), _blame(2, 4, 3), _blame(5, 4, 4)]
    assert claims.accused(tie, seen=[0, 1, 2, 5], whole=False) is None
    # waits_for claims are not counted when only blames are asked for
    waits = [Claim(ClaimKind.WAITS_FOR, r, 0, "store_error", r) for r in (1, 2, 3)]
    assert claims.accused(waits, seen=[1, 2, 3], kinds=[ClaimKind.BLAMES]) is None
    assert claims.accused(waits, seen=[1, 2, 3], kinds=[ClaimKind.WAITS_FOR]).peer == 0  # type: ignore[union-attr]


def test_extract_builds_only_the_claim_kinds_asked_for() -> None:
    t = _table(
        [
            {"kind": "store_error", "rank": 2, "peer_rank": 0},
            {"kind": "nccl_peer_closed", "rank": 5, "peer_rank": 3},
            {"kind": "watchdog_timeout", "rank": 1, "seq": 7, "pg": "0", "op": "ALLREDUCE"},
        ]
    )
    assert [c.kind for c in claims.extract(t)] == [
        ClaimKind.WAITS_FOR,
        ClaimKind.BLAMES,
        ClaimKind.IN_COLLECTIVE,
    ]
    assert claims.extract(t, want=[ClaimKind.BLAMES]) == [
        Claim(ClaimKind.BLAMES, 5, 3, "nccl_peer_closed", 1)
    ]
