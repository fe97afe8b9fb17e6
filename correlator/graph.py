"""The causal graph: ranks as nodes, typed edges "A's trouble is explained by B" carrying evidence.

Edge types (``edge`` attribute), always from the affected rank to the rank that explains it:
- ``waits_for``: A timed out in (pg, seq) that B never entered, or B is behind on that PG;
- ``peer_error``: A's network/store error names B (address, local rank, PG rank);
- ``mismatch``: A and B ran different collectives or shapes at the same seq (B is the odd one out);
- ``killed_by``: the launcher signalled A after B failed;
- ``exited_before``: B exited — even cleanly, code 0 — while A still waited for it.

Each edge has ``evidence`` (event ids of the rows that justify it), and ``pg``/``seq`` when known.
The graph's own attributes (``G.graph``) record the attempt, world size, the initiating ranks with the
way they were found (``initiator_basis``), the failure kind and the reasons that lower confidence
(``reasons``: :class:`correlator.confidence.Note` values, not English).
Pure function of the event table; :mod:`correlator.initiators` names who started it,
:mod:`correlator.quotes` and :mod:`correlator.summary` read the verdict off its records.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

import parsers
from correlator import clock
from correlator import initiators as initiators_mod
from correlator.confidence import Reason
from correlator.faults import failing_attempts, fault_rows
from correlator.schema import Kind
from correlator.verdict import Basis, EdgeKind, FailureKind, Role, Status

if TYPE_CHECKING:
    import networkx as nx

    from correlator.confidence import Note


def _world_size(t: pl.DataFrame) -> int | None:
    """World size from evidence (docs/design.md rule 16): a size a line states (NCCL ``nranks``, ``world_size=``,
    torchrun's ``global_world_sizes``), or — when the logs are one file or folder per rank — the highest
    rank seen + 1 (two such files at least: one rank's file alone says nothing of its peers). A pasted excerpt of a
    combined stream states nothing about the ranks it lacks: None."""
    stated = t["world_size"]
    ws = stated.drop_nulls()
    seen = t["rank"].drop_nulls()
    best = int(ws.max()) if ws.len() else None  # type: ignore[arg-type]
    top = int(seen.max()) + 1 if seen.len() else None  # type: ignore[arg-type]
    if best is None:
        per_rank = (
            t.filter(pl.col("rank_source").is_in(["path", "file", "file_name", "folder+offset"]))[
                "rank"
            ].n_unique()
            >= 2
        )
        return top if per_rank else None
    return max(best, top or 0)


@dataclass(frozen=True)
class Edge:
    """One edge of the causal graph: ``src``'s trouble is explained by ``dst`` (collateral -> initiator).

    ``evidence``: event ids of the rows that justify it (the first is quoted). ``pg``/``seq``: the collective
    (process group name, SeqNum) when the rows name one."""

    src: int
    dst: int
    kind: EdgeKind
    pg: str | None = None
    seq: int | None = None
    evidence: tuple[int, ...] = ()


@dataclass(frozen=True)
class RankFacts:
    """What the analysis found for one rank of the attempt.

    ``status``: its part in the failure. ``first_fault_*``: its first fault row (kind, clock-corrected time,
    event id), ``None`` without one. ``cause_event``: for an initiating rank, the row that shows its fault.
    ``explained_by``: for a collateral rank, its edge. ``timed_out`` / ``waited``: its own lines say it ran
    out a timeout / that it waited (what the summary may state; ``None`` where no rule looked)."""

    rank: int
    host: str | None = None
    local_rank: int | None = None
    status: Status = Status.CLEAN
    first_fault_kind: str | None = None
    first_fault_ts: dt.datetime | None = None
    first_fault_event: int | None = None
    cause_event: int | None = None
    explained_by: Edge | None = None
    timed_out: bool | None = None
    waited: bool | None = None

    def explanation(self) -> dict[str, Any] | None:
        """``explained_by`` as the JSON contract's ``{rank, edge, pg, seq}`` (``pg`` "0", the default group,
        when the rows name a SeqNum but no group)."""
        e = self.explained_by
        if e is None:
            return None
        return {
            "rank": e.dst,
            "edge": e.kind,
            "pg": (e.pg or "0") if e.seq is not None else e.pg,
            "seq": e.seq,
        }


@dataclass(frozen=True)
class Findings:
    """The causal analysis of one attempt: a pure function of the event table (:func:`analyze`).

    ``ranks``: every rank of the attempt (seen, missing, or named only by a launcher), in the order found.
    ``edges``: collateral -> initiator. ``initiators`` with the rule that named them (``basis``), the
    ``failure_kind``, the ``reasons`` that lower confidence (:class:`correlator.confidence.Note`), and the
    ``focus`` the rule reported (the collective, claim, evidence event ids, …). The mappings are plain dicts
    (a verdict is copied and compared field by field); nothing changes them after :func:`analyze`.
    :meth:`to_networkx` gives the graph for export; the diagnosis reads these records."""

    attempt: int
    attempts: tuple[int, ...]
    clocks: Mapping[str, Mapping[str, Any]]
    world_size: int | None
    ranks_seen: tuple[int, ...]
    missing: tuple[int, ...]
    initiators: tuple[int, ...]
    basis: Basis
    failure_kind: str
    reasons: tuple[Note, ...]
    focus: Mapping[str, Any]
    signalled: tuple[int, ...]
    launcher_present: bool
    ranks: Mapping[int, RankFacts] = field(default_factory=dict)
    edges: tuple[Edge, ...] = ()

    @property
    def initiator_basis(self) -> str:
        """The verdict's ``initiator_basis`` text (:meth:`correlator.verdict.Basis.text`)."""
        return self.basis.text(self.focus.get("host"))

    def to_networkx(self) -> nx.DiGraph:
        """The causal graph for export and drawing: nodes are ranks with ``host``, ``local_rank``, ``status``,
        ``first_fault_kind``, ``first_fault_ts``, ``first_fault_event`` (and ``cause_event``,
        ``explained_by``, ``timed_out``, ``waited`` where set); edges carry ``edge``, ``pg``, ``seq``,
        ``evidence``; ``G.graph`` the attempt's attributes."""
        import networkx as nx

        G = nx.DiGraph(
            attempt=self.attempt,
            attempts=list(self.attempts),
            clocks={h: dict(c) for h, c in self.clocks.items()},
        )
        for r, n in self.ranks.items():
            attrs: dict[str, Any] = {"host": n.host, "local_rank": n.local_rank, "status": n.status}
            if n.first_fault_kind is not None:
                attrs.update(
                    first_fault_kind=n.first_fault_kind,
                    first_fault_ts=n.first_fault_ts,
                    first_fault_event=n.first_fault_event,
                )
            if n.status is Status.INITIATING:
                attrs["cause_event"] = n.cause_event
            if n.timed_out is not None:
                attrs["timed_out"] = n.timed_out
            if n.waited is not None:
                attrs["waited"] = n.waited
            if n.explained_by is not None:
                attrs["explained_by"] = n.explanation()
            G.add_node(r, **attrs)
        for e in self.edges:
            G.add_edge(e.src, e.dst, edge=e.kind, pg=e.pg, seq=e.seq, evidence=list(e.evidence))
        G.graph.update(
            world_size=self.world_size,
            ranks_seen=list(self.ranks_seen),
            missing=list(self.missing),
            initiators=list(self.initiators),
            basis=self.basis,
            initiator_basis=self.initiator_basis,
            failure_kind=self.failure_kind,
            reasons=list(self.reasons),
            focus=dict(self.focus),
            signalled=list(self.signalled),
            launcher_present=self.launcher_present,
        )
        return G


def build_graph(table: pl.DataFrame, attempt: int | None = None) -> nx.DiGraph:
    """The causal graph of one attempt (default: the first attempt with a fault), for export:
    :func:`analyze` drawn as a networkx ``DiGraph`` (:meth:`Findings.to_networkx`).

    Nodes are global ranks (ints) with attributes ``host``, ``local_rank``, ``status``
    (initiating | collateral | unexplained | clean | missing), ``first_fault_kind``, ``first_fault_ts``,
    ``first_fault_event`` and ``explained_by``. See the module docstring for edges and graph attributes.
    """
    return analyze(table, attempt).to_networkx()


class _Draft:
    """The mutable draft :func:`analyze` fills in rule by rule, frozen into :class:`Findings` at the end:
    rank -> fields of :class:`RankFacts` (insertion order kept), (src, dst) -> :class:`Edge`."""

    def __init__(self) -> None:
        self.ranks: dict[int, dict[str, Any]] = {}
        self.edges: dict[tuple[int, int], Edge] = {}

    def add(self, r: int, status: Status, host: str | None = None, local_rank: int | None = None) -> None:
        self.ranks[r] = {"host": host, "local_rank": local_rank, "status": status}

    def edge(self, e: Edge) -> None:
        self.edges[(e.src, e.dst)] = e
        self.ranks[e.src]["explained_by"] = e

    def drop_edges_from(self, r: int) -> None:
        for k in [k for k in self.edges if k[0] == r]:
            del self.edges[k]

    def frozen(self) -> tuple[dict[int, RankFacts], tuple[Edge, ...]]:
        return {r: RankFacts(r, **f) for r, f in self.ranks.items()}, tuple(self.edges.values())


def analyze(table: pl.DataFrame, attempt: int | None = None) -> Findings:
    """The causal analysis of one attempt (default: the first attempt with a fault): who started it
    (:func:`correlator.initiators.find`), the edge that explains every other faulty rank, each rank's status
    and the reasons that lower confidence. Pure function of the event table."""
    t_all = table.filter(~pl.col("duplicate"))
    attempts = failing_attempts(t_all)
    if attempt is None:
        attempt = attempts[0] if attempts else int(t_all["attempt"].drop_nulls().min() or 0)  # type: ignore[arg-type]
    t = t_all.filter(pl.col("attempt") == attempt)
    clocks = clock.estimate(t)
    t = t.with_columns(clock.attempt_times(t))  # one attempt: the same correction as ``clocks``
    G = _Draft()

    world = _world_size(t_all)
    seen = sorted(int(r) for r in t["rank"].drop_nulls().unique().to_list())
    missing = sorted(set(range(world or 0)) - set(seen)) if world else []
    _add_ranks(G, t, seen, missing)

    f = fault_rows(t)
    f = (
        f.with_columns(clock.corrected(f, clocks).alias("tc"))
        .filter(pl.col("role") != Role.WEAK)
        .sort("tc", "event_id", nulls_last=True)
    )
    fr = f.filter(pl.col("rank").is_not_null())
    _add_first_faults(G, fr)

    signal_rows = f.filter(pl.col("kind") == Kind.WORKER_SIGNALLED)
    first_signal = signal_rows["tc"].min() if signal_rows.height else None
    signalled = set(signal_rows["rank"].drop_nulls().to_list()) | set(
        f.filter((pl.col("exit_code") == -15) | (pl.col("signal") == "SIGTERM"))["rank"]
        .drop_nulls()
        .to_list()
    )
    # launcher output: torchelastic's own lines, or a launcher's exit report (srun's task exits and signals,
    # mpirun's abort, DeepSpeed's return code, …: parsers.EXIT_REPORT_RULES) — either confirms exit statuses
    launcher_present = t.filter(pl.col("layer") == "elastic").height > 0 or parsers.exit_reports(t).height > 0

    evidence = initiators_mod.Evidence(
        t, f, fr, seen, missing, signalled, first_signal, launcher_present, world
    )
    found = initiators_mod.find(evidence)
    initiators, basis, failure_kind = found.initiators, found.basis, found.failure_kind
    cause_event, focus, reasons = found.cause_event, dict(found.focus), list(found.reasons)

    if not focus.get("seq") and initiators:
        focus = {**focus, **_waited_collective(fr, initiators)}
    for r in initiators:
        if r not in G.ranks:
            G.add(r, Status.MISSING)
        G.ranks[r]["status"] = Status.INITIATING
        G.ranks[r]["cause_event"] = cause_event.get(r)

    _add_edges(G, fr, initiators, failure_kind, signalled)
    _add_named_waiters(G, initiators, failure_kind, focus)
    # The launcher tore the whole job down (mpirun abort, scheduler cancel, DeepSpeed killing subprocesses):
    # ranks that said nothing were killed as a consequence too.
    teardown = f.filter(
        pl.col("kind").is_in([Kind.JOB_CANCELLED])
        | ((pl.col("kind") == Kind.WORKER_SIGNALLED) & pl.col("rank").is_null())
    )
    if initiators and teardown.height:
        ev_id = teardown["event_id"][0]
        for r in seen:
            if G.ranks[r]["status"] == Status.CLEAN:
                G.ranks[r]["status"] = Status.COLLATERAL
                G.edge(Edge(r, initiators[0], EdgeKind.KILLED_BY, evidence=(ev_id,)))

    reasons += _attempt_reasons(t, initiators, basis, failure_kind, missing, world, launcher_present, clocks)

    # A rank with a fault of its own is never clean: collateral of the initiators (even when no rule gave it
    # an edge), or, when no initiator is named, unexplained.
    # A job stopped from outside: the workers the launcher then SIGTERMed did not fail (issue #33).
    stopped = basis is Basis.STOPPED
    for n in G.ranks.values():
        if stopped and n.get("first_fault_kind") == Kind.WORKER_SIGNALLED:
            continue
        if n["status"] == Status.CLEAN and n.get("first_fault_kind"):
            n["status"] = Status.COLLATERAL if initiators else Status.UNEXPLAINED
    ranks, edges = G.frozen()
    return Findings(
        attempt=attempt,
        attempts=tuple(attempts),
        clocks={h: dict(c.__dict__) for h, c in clocks.items()},
        world_size=world,
        ranks_seen=tuple(seen),
        missing=tuple(missing),
        initiators=tuple(initiators),
        basis=basis,
        failure_kind=failure_kind,
        reasons=tuple(reasons),
        focus=focus,
        signalled=tuple(sorted(signalled)),
        launcher_present=launcher_present,
        ranks=ranks,
        edges=edges,
    )


def _add_ranks(G: _Draft, t: pl.DataFrame, seen: list[int], missing: list[int]) -> None:
    """One entry per rank seen or missing, with its host and local rank (the most frequent of its rows)."""
    hosts = dict(
        t.filter(pl.col("rank").is_not_null() & pl.col("host").is_not_null())
        .group_by("rank")
        .agg(pl.col("host").mode().first())
        .iter_rows()
    )
    locals_ = dict(
        t.filter(pl.col("rank").is_not_null() & pl.col("local_rank").is_not_null())
        .group_by("rank")
        .agg(pl.col("local_rank").mode().first())
        .iter_rows()
    )
    missing_set = set(missing)  # a set: a world of 10^5 ranks must not cost 10^10 list comparisons
    for r in sorted(set(seen) | missing_set):
        G.add(r, Status.MISSING if r in missing_set else Status.CLEAN, hosts.get(r), locals_.get(r))


def _add_first_faults(G: _Draft, fr: pl.DataFrame) -> None:
    """Each rank's first fault (kind, corrected time, event id); the launcher's summary blocks (whole-second,
    written at the end) come last. A rank named only by a launcher (an srun task list) is added."""
    summary_last = pl.col("kind").is_in([Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY]).cast(pl.Int8)
    first = (
        fr.sort(summary_last, "tc", "event_id", nulls_last=True).group_by("rank", maintain_order=True).first()
    )
    for row in first.iter_rows(named=True):
        if row["rank"] not in G.ranks:  # it left no line of its own
            G.add(row["rank"], Status.CLEAN)
        G.ranks[row["rank"]].update(
            first_fault_kind=row["kind"], first_fault_ts=row["tc"], first_fault_event=row["event_id"]
        )


def _waited_collective(fr: pl.DataFrame, initiators: list[int]) -> dict[str, Any]:
    """The collective the others were stuck in: the (pg, seq) most ranks' timeouts name (``{}`` if none)."""
    waited = fr.filter(
        (pl.col("role") == Role.EFFECT) & pl.col("seq").is_not_null() & ~pl.col("rank").is_in(initiators)
    )
    if not waited.height:
        return {}
    # Ties (as many ranks in two PGs at one seq) go to the first (pg, seq): fr is in time, then event, order.
    top = (
        waited.group_by(pl.coalesce(pl.col("pg"), pl.lit("0")).alias("pg"), "seq", maintain_order=True)
        .agg(pl.col("rank").n_unique().alias("n"), pl.col("op").drop_nulls().first())
        .sort("n", "seq", descending=[True, False], maintain_order=True)
        .row(0, named=True)
    )
    return {"pg": top["pg"], "seq": top["seq"], "op": top["op"]}


def _add_named_waiters(G: _Draft, initiators: list[int], failure_kind: str, focus: dict[str, Any]) -> None:
    """Ranks a rule names as waiting for the initiators (a stall report's ready ranks, a stack dump) without a
    fault row of their own become collateral; in a collective mismatch they waited inside the other collective
    (Horovod's stall report of ops that differ), so the edge is the mismatch."""
    waiting_edge = (
        EdgeKind.MISMATCH if failure_kind == FailureKind.COLLECTIVE_MISMATCH else EdgeKind.WAITS_FOR
    )
    for r in focus.get("waiting") or []:
        if r in initiators:
            continue
        if r not in G.ranks:
            G.add(r, Status.CLEAN)
        n = G.ranks[r]
        # torn down by the launcher (its only fault), but a rule saw it waiting for the initiator (a stack dump)
        killed = n.get("first_fault_kind") == Kind.WORKER_SIGNALLED
        if killed:
            G.drop_edges_from(r)
        if n["status"] in (Status.CLEAN, Status.MISSING) or killed:
            n["status"] = Status.COLLATERAL
            n["waited"] = True  # the rule that names it says it is waiting
            G.edge(
                Edge(
                    r,
                    initiators[0],
                    waiting_edge,
                    pg=focus.get("pg"),
                    evidence=tuple((focus.get("evidence") or [])[:1]),
                )
            )


def _attempt_reasons(
    t: pl.DataFrame,
    initiators: list[int],
    basis: Basis,
    failure_kind: str,
    missing: list[int],
    world: int | None,
    launcher_present: bool,
    clocks: Mapping[str, clock.HostClock],
) -> list[Note]:
    """The reasons that lower confidence in any verdict of the attempt: logs missing, no launcher output,
    ranks known only by inference, clocks that disagree by more than 5 s when the first fault decides."""
    reasons: list[Note] = []
    if missing and initiators and not set(initiators) & set(missing):
        reasons.append(Reason.MISSING_LOGS.note(missing=len(missing), world=world))
    if not launcher_present and failure_kind not in ("none",):
        reasons.append(Reason.NO_LAUNCHER.note())
    inferred = ["pid_order", "pid_gap", "message"]
    mine = t.filter(pl.col("rank").is_in(initiators))
    if (
        mine.filter(pl.col("rank_source").is_in(inferred)).height
        and mine.filter(~pl.col("rank_source").is_in(inferred)).height == 0
    ):
        reasons.append(Reason.IDENTITY_INFERRED.note())
    uncertain = [c for c in clocks.values() if c.uncertainty_s > 5]
    if uncertain and len(initiators) > 0 and basis is Basis.FIRST_FAULT:
        reasons.append(Reason.CLOCKS_UNALIGNED.note())
    return reasons


def _add_edges(
    G: _Draft,
    fr: pl.DataFrame,
    initiators: list[int],
    failure_kind: str,
    signalled: set[int],
) -> None:
    """Give every faulty non-initiating rank the edge that explains it.

    One sort of the fault rows ``fr`` (``faults.fault_rows``: with ``role`` and ``tc``), then plain Python per
    rank: a rank has a handful of fault rows, and a polars call per rank made this step the slowest of the
    diagnosis at 16,384 ranks (benchmarks/RESULTS.md)."""
    if not initiators:
        return
    target_default = initiators[0]
    inits = set(initiators)
    # ranks whose own trouble is a crash (a cause), for the monitoredBarrier coordinator test below
    crashed = set(fr.filter(pl.col("role") == Role.CAUSE)["rank"].drop_nulls().to_list())
    order = [int(x) for x in fr["rank"].unique(maintain_order=True).drop_nulls().to_list()]
    per_rank: dict[int, list[dict[str, Any]]] = {}
    cols = ["rank", "kind", "peer_rank", "pg", "seq", "timeout_ms", "event_id"]
    for row in (
        fr.filter(~pl.col("rank").is_in(initiators))
        .sort(
            "rank",
            pl.col("kind").is_in([Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY]).cast(pl.Int8),
            "tc",
            "event_id",
            nulls_last=True,
        )
        .select(cols)
        .iter_rows(named=True)
    ):
        per_rank.setdefault(row["rank"], []).append(row)
    for r in order:
        if r in inits or r not in per_rank:
            continue
        rows = per_rank[r]
        firstrow = rows[0]
        named = [x["peer_rank"] for x in rows if x["peer_rank"] is not None and x["peer_rank"] in inits]
        target = named[0] if named else target_default
        kinds = {x["kind"] for x in rows}
        with_seq = [x for x in rows if x["seq"] is not None]
        pg = with_seq[0]["pg"] if with_seq else None
        seq = with_seq[0]["seq"] if with_seq else None
        coordinators = {x["peer_rank"] for x in rows if x["kind"] == Kind.MONITORED_BARRIER_PEER} - {None}
        # a store wait that ran out its timeout waited for a key the other rank never set (c10d "Timeout: ...
        # waiting for key", store_wait_input), not a broken connection
        store_timeout = any(x["kind"] == Kind.STORE_ERROR and x["timeout_ms"] is not None for x in rows)
        timed_out = bool(kinds & Kind.TIMED_OUT) or store_timeout
        assumed = False  # the edge is waits_for only because nothing else explains the rank
        if failure_kind == "collective_mismatch":
            edge = EdgeKind.MISMATCH
        elif failure_kind == "early_exit":
            edge = EdgeKind.EXITED_BEFORE
        elif (
            timed_out or Kind.FR_WAITING in kinds
        ):  # FR: its dump is pending at a seq the initiator did not reach
            edge = EdgeKind.WAITS_FOR
        elif kinds & Kind.PEER == {Kind.MONITORED_BARRIER_PEER} and not coordinators & crashed:
            # "successfully reached monitoredBarrier, but received errors ... from rank 0": rank 0 (the
            # barrier's coordinator, the row's peer_rank) answered with its own timeout, so this rank waited
            # (through rank 0) for the rank that never arrived; only a coordinator that crashed (a fault of
            # role cause) makes it a broken connection
            edge = EdgeKind.WAITS_FOR
        elif kinds & Kind.PEER:
            edge = EdgeKind.PEER_ERROR
        elif r in signalled or Kind.WORKER_SIGNALLED in kinds:
            edge = EdgeKind.KILLED_BY
        else:
            edge, assumed = EdgeKind.WAITS_FOR, True
        n = G.ranks[r]
        n["status"] = Status.COLLATERAL
        # what the summary may state: the rank's own lines say it timed out / that it waited
        n["timed_out"] = timed_out
        n["waited"] = edge == EdgeKind.WAITS_FOR and not assumed
        G.edge(
            Edge(
                r,
                target,
                edge,
                pg=pg,
                seq=seq,
                evidence=(firstrow["event_id"],),
            )
        )
