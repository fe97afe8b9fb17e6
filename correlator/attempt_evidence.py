"""What the initiator rules read and return: one attempt's :class:`Evidence` (its rows, fault rows, ranks seen
and missing, the launcher's signals) and a rule's :class:`Finding` (initiating ranks, how they were found, the
failure kind, the collective in focus, the reasons that lower confidence), with the kind sets and the vote count
several rules share.

The rules live in :mod:`correlator.initiators` (their order), :mod:`correlator.disagreement` (the odd one out)
and :mod:`correlator.silence` (ranks found by what they did not say).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from correlator import claims
from correlator.confidence import Note
from correlator.schema import Kind
from correlator.verdict import Basis

SIG_KINDS = [Kind.COLLECTIVE_FINGERPRINT, Kind.WATCHDOG_TIMEOUT, Kind.COLLECTIVE_MISMATCH]


SUMMARY_KINDS = [Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY]


@dataclass
class Evidence:
    """What the rules read. ``t``: the attempt's rows (no duplicates) with corrected time ``tc``;
    ``f``: its fault rows (with ``role``); ``fr``: the fault rows that have a rank."""

    t: pl.DataFrame
    f: pl.DataFrame
    fr: pl.DataFrame
    seen: list[int]
    missing: list[int]
    signalled: set[int]
    first_signal: Any
    launcher_present: bool
    #: world size from evidence (None: unknown, e.g. a pasted excerpt)
    world: int | None = None

    @property
    def absent(self) -> list[int]:
        """Ranks below the highest rank seen that left no line, when the world size is unknown (an excerpt)."""
        if self.world is not None or not self.seen:
            return []
        return sorted(set(range(max(self.seen) + 1)) - set(self.seen))

    @property
    def causes(self) -> pl.DataFrame:
        return self.fr.filter(pl.col("role") == "cause")

    @property
    def effects(self) -> pl.DataFrame:
        return self.fr.filter(pl.col("role") == "effect")

    def own_error_ranks(self) -> set[int]:
        """Ranks with an error of their own (being SIGTERMed by the agent is not one)."""
        terminated = (pl.col("exit_code") == -15).fill_null(False) | (
            pl.col("signal") == "SIGTERM"
        ).fill_null(False)
        own = self.effects.filter((pl.col("kind") != Kind.WORKER_SIGNALLED) & ~terminated)
        return set(own["rank"].to_list())


@dataclass
class Finding:
    """Initiating ranks, how they were found (``basis``), the failure kind, each initiator's key event,
    the collective in focus and the reasons that lower confidence."""

    initiators: list[int]
    basis: Basis
    failure_kind: str
    cause_event: dict[int, int] = field(default_factory=dict)
    focus: dict[str, Any] = field(default_factory=dict)
    reasons: list[Note] = field(default_factory=list)


#: A process taken down by SIGABRT: how ProcessGroupNCCL's watchdog ends a rank after a collective timeout
#: (async error handling: torch 1.10 – 2.13, the default from 2.0), as torchrun reports it (``exitcode: -6``) or a
#: shell does (134).
ABORTED = (pl.col("exit_code").is_in([-6, 134]) | (pl.col("signal") == "SIGABRT")).fill_null(False)


#: Collectives with a root: the root (``src``/``dst``) is rank 0 unless the code says otherwise.
ROOTED_OPS = {"BROADCAST", "REDUCE", "SCATTER", "GATHER", "_BROADCAST_OOP", "_REDUCE_OOP"}


#: Effect kinds whose ``peer_rank`` names the rank the reporter waited for (a vote for the initiator).
WAITING_FOR = [Kind.STORE_ERROR, Kind.MONITORED_BARRIER_PEER, Kind.NCCL_ERROR]


#: Effects that mean the peer process went away (not that it is slow).
PEER_LOSS = [
    Kind.GLOO_CONNECTION_CLOSED,
    Kind.NCCL_NET_ERROR,
    Kind.NCCL_PEER_CLOSED,
    Kind.ASYNC_ERROR,
    Kind.NCCL_ERROR,
    Kind.PEER_SHUTDOWN,
]


def votes(e: Evidence) -> Counter[int]:
    """Ranks named by waiting ranks as the one they wait for ("ncclUniqueId from [0]", "errors … from rank 0",
    "remote error detected from rank: 2"): the ``waits_for`` claims of the effect rows
    (:mod:`correlator.claims`), counted once per voter; the voters' own ranks are never candidates."""
    said = claims.extract(
        e.effects.filter(pl.col("kind").is_in(WAITING_FOR)), want=[claims.ClaimKind.WAITS_FOR]
    )
    pairs = {(c.rank, c.peer) for c in said}
    return Counter(p for _, p in pairs if p is not None)
