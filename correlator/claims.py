"""Claims: what one rank's lines say about another rank, or about a collective the ranks share.

A rank that times out, loses a connection or fails a shape check rarely says anything about itself; it says
something about a *peer*. rankscope reads each such line as a typed :class:`Claim` and names the initiating
rank as the one the other ranks' claims point at, instead of crowning the rank that complained loudest.
The parsers already turn lines into events; this module only re-reads the event columns that carry a peer
(``peer_rank``, ``ranks_named``, ``peer_op``) or a collective (``pg``, ``seq``, ``op``, ``numel``), and keeps
each claim's ``event_id`` so evidence and edges point at real lines.

Kinds (:class:`ClaimKind`), with the lines that make them (every rule cited is in ``parsers/``):

- ``waits_for(rank, peer)``: the rank waits for that peer: a TCPStore that rank 0 hosts
  (``store_error``), ``Rank 3 failed to pass monitoredBarrier`` seen by rank 0 (``monitored_barrier_peer``),
  ``Failed to execute operation … from rank 0`` (``nccl_error``), Horovod's stall report of a rank that
  has not submitted the collective (``stall_missing``).
- ``blames(rank, peer)``: the rank says the peer *went away*: NCCL's ``[Service thread] Connection closed by
  localRank 7`` (INFO, every other local process logs it when one process dies), a gloo or NCCL connection
  closed by that peer, monitoredBarrier's list of ranks that never arrived.
- ``disagrees_with(rank, peer, what)``: the rank states that its collective or model differs from the
  peer's: DDP's ``params[0] in this process … appears not to match … process 0`` (``ddp_error``), a DETAIL
  ``Detected mismatch between collectives on ranks`` line (``collective_mismatch``).
- ``in_collective(rank, what)``: the rank stands in a collective: ``what`` is ``pg|seq|op|size`` from a
  DETAIL fingerprint or a watchdog timeout.
- ``exited(rank, what)``: a launcher or the rank reports its exit (``what`` = exit code or signal).

The procedure over claims that names an initiator (:func:`accused`): a peer that the claims of the *other*
ranks point at — each claimant counted once, whatever it repeats — is the initiator when at least two ranks
point at it, every rank seen but the peer is among them (or every rank that made a claim of that kind,
when more ranks point at it than at anyone else), and the peer has no cause of its own that would make it
a mere reporter. The counter-examples that shaped it are in ``docs/design.md`` §5 ("Claims").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

import polars as pl

from correlator.schema import Kind

__all__ = ["Accusation", "Claim", "ClaimKind", "accused", "extract"]


class ClaimKind(StrEnum):
    """What a line says about a peer or a collective (see the module docstring)."""

    WAITS_FOR = "waits_for"
    BLAMES = "blames"
    DISAGREES_WITH = "disagrees_with"
    IN_COLLECTIVE = "in_collective"
    EXITED = "exited"


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim: ``rank`` (the claimant; None for a launcher's or a coordinator's report) says ``kind``
    about ``peer`` (None: about no one in particular) — ``what`` is the collective, the exit status or the
    disagreement, as text — read from the line ``event_id``."""

    kind: ClaimKind
    rank: int | None
    peer: int | None
    what: str
    event_id: int


#: Event kinds whose ``peer_rank`` is the rank the reporter waits for.
WAITING_KINDS = (Kind.STORE_ERROR, Kind.MONITORED_BARRIER_PEER, Kind.NCCL_ERROR, Kind.STALL_MISSING)
#: Event kinds whose ``peer_rank`` is a peer whose process or connection went away.
LOSS_KINDS = (
    Kind.NCCL_PEER_CLOSED,
    Kind.GLOO_CONNECTION_CLOSED,
    Kind.NCCL_NET_ERROR,
    Kind.PEER_SHUTDOWN,
    Kind.ASYNC_ERROR,
)
#: Event kinds whose ``ranks_named`` lists ranks that never arrived.
MISSING_KINDS = (Kind.MONITORED_BARRIER_FAILED,)
#: Event kinds whose ``peer_rank`` is a rank the reporter disagrees with.
DISAGREEING_KINDS = (Kind.DDP_ERROR, Kind.COLLECTIVE_MISMATCH)
#: Event kinds that place their rank in a collective (pg, seq, op, size).
COLLECTIVE_KINDS = (Kind.COLLECTIVE_FINGERPRINT, Kind.WATCHDOG_TIMEOUT, Kind.COLLECTIVE_MISMATCH)

_COLS = ["event_id", "kind", "rank", "peer_rank", "ranks_named", "pg", "seq", "op", "numel", "shape"]


def _peer_global(t: pl.DataFrame) -> pl.Expr:
    """``peer_rank`` in the global numbering. NCCL's ``Connection closed by localRank N`` names a *local*
    rank of the reporter's node: the global peer is the reporter's rank less its local rank plus N where
    the reporter's local rank is known; where its rank came from the GPU index (a paste of one node, local
    numbering throughout) N already is in the numbering of the other ranks."""
    if "local_rank" not in t.columns:
        return pl.col("peer_rank")
    local = (pl.col("kind") == Kind.NCCL_PEER_CLOSED) & pl.col("local_rank").is_not_null()
    return (
        pl.when(local)
        .then(pl.col("rank") - pl.col("local_rank") + pl.col("peer_rank"))
        .otherwise(pl.col("peer_rank"))
    )


#: The event kinds each claim kind is read from.
_SOURCES: dict[ClaimKind, tuple[str, ...]] = {
    ClaimKind.WAITS_FOR: WAITING_KINDS,
    ClaimKind.BLAMES: (*LOSS_KINDS, *MISSING_KINDS),
    ClaimKind.DISAGREES_WITH: DISAGREEING_KINDS,
    ClaimKind.IN_COLLECTIVE: COLLECTIVE_KINDS,
    ClaimKind.EXITED: (),
}


def extract(
    t: pl.DataFrame, exits: pl.DataFrame | None = None, want: Iterable[ClaimKind] | None = None
) -> list[Claim]:
    """The claims of an event table ``t`` (an attempt's rows; duplicates are skipped), in ``event_id``
    order, plus one ``exited`` claim per row of ``exits`` (fault rows with role ``exit``/``cause`` that
    carry an exit code or a signal). A claim about oneself is dropped (a rank cannot wait for itself).
    ``want``: only these claim kinds (default all); only the rows they are read from are visited, so a rule
    that asks for ``blames`` never builds a claim per watchdog line of a huge job."""
    wanted = set(ClaimKind) if want is None else set(want)
    kinds = sorted({k for c in wanted for k in _SOURCES[c]})
    cols = [c for c in _COLS if c in t.columns]
    rows = t.filter(pl.col("kind").is_in(kinds))
    if "duplicate" in rows.columns:
        rows = rows.filter(~pl.col("duplicate"))
    rows = rows.with_columns(_peer_global(rows).cast(pl.Int64).alias("peer_rank")).select(cols)
    out: list[Claim] = []
    for r in rows.iter_rows(named=True):
        k, rank, peer, eid = r["kind"], r["rank"], r["peer_rank"], int(r["event_id"])
        if k in WAITING_KINDS and peer is not None and ClaimKind.WAITS_FOR in wanted:
            out.append(Claim(ClaimKind.WAITS_FOR, rank, peer, k, eid))
        if k in LOSS_KINDS and peer is not None and ClaimKind.BLAMES in wanted:
            out.append(Claim(ClaimKind.BLAMES, rank, peer, k, eid))
        if k in MISSING_KINDS and ClaimKind.BLAMES in wanted:
            for p in (r["ranks_named"] or "").split(","):
                if p.strip().lstrip("-").isdigit():
                    out.append(Claim(ClaimKind.BLAMES, rank, int(p), k, eid))
        if k in DISAGREEING_KINDS and peer is not None and ClaimKind.DISAGREES_WITH in wanted:
            out.append(Claim(ClaimKind.DISAGREES_WITH, rank, peer, k, eid))
        if (
            k in COLLECTIVE_KINDS
            and rank is not None
            and r.get("seq") is not None
            and ClaimKind.IN_COLLECTIVE in wanted
        ):
            size = r["shape"] if r.get("shape") is not None else (r.get("numel") or "")
            what = f"{r.get('pg') or '0'}|{r['seq']}|{r.get('op') or ''}|{size}"
            out.append(Claim(ClaimKind.IN_COLLECTIVE, rank, None, what, eid))
    if exits is not None and exits.height and ClaimKind.EXITED in wanted:
        for rank, code, sig, eid in exits.select("rank", "exit_code", "signal", "event_id").iter_rows():
            if rank is not None and (code is not None or sig is not None):
                out.append(Claim(ClaimKind.EXITED, rank, None, str(sig or code), int(eid)))
    out = [c for c in out if c.peer is None or c.peer != c.rank]
    out.sort(key=lambda c: c.event_id)
    return out


@dataclass(frozen=True, slots=True)
class Accusation:
    """The peer the others' claims point at: ``peer``, the ranks that point at it (``claimants``, sorted),
    the claim kinds used, and the claims' event ids in order (the first is the earliest line)."""

    peer: int
    claimants: tuple[int, ...]
    kinds: tuple[ClaimKind, ...]
    event_ids: tuple[int, ...]


def accused(
    claims: Iterable[Claim],
    seen: Iterable[int],
    kinds: Iterable[ClaimKind] = (ClaimKind.BLAMES, ClaimKind.WAITS_FOR),
    exclude: Iterable[int] = (),
    whole: bool = True,
) -> Accusation | None:
    """The one peer that the claims of ``kinds`` by the other ranks point at, or None.

    Each claimant counts once per peer. The peer with the most claimants wins when it has two or more and
    no other peer has as many; with ``whole`` (the default) every rank of ``seen`` but the peer must be a
    claimant too — a peer that half the job names may be one of several that went away. Ranks in
    ``exclude`` (those with a cause of their own, whose claims are then their own fault's) are never named.
    Claims without a claimant rank (a coordinator's report) count as one claimant, ``-1``."""
    want = set(kinds)
    by_peer: dict[int, set[int]] = {}
    ids: dict[int, list[int]] = {}
    used: dict[int, set[ClaimKind]] = {}
    for c in claims:
        if c.kind not in want or c.peer is None:
            continue
        by_peer.setdefault(c.peer, set()).add(-1 if c.rank is None else c.rank)
        ids.setdefault(c.peer, []).append(c.event_id)
        used.setdefault(c.peer, set()).add(c.kind)
    if not by_peer:
        return None
    ranked = sorted(by_peer.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    peer, who = ranked[0]
    if len(who) < 2 or (len(ranked) > 1 and len(ranked[1][1]) == len(who)) or peer in set(exclude):
        return None
    others = set(seen) - {peer}
    if whole and not others <= who:
        return None
    return Accusation(
        peer,
        tuple(sorted(who)),
        tuple(sorted(used[peer])),
        tuple(sorted(ids[peer])),
    )
