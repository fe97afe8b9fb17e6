"""Who started it: the ordered rules that name the initiating rank(s) of one attempt.

Each rule is a small function of the attempt's evidence (:class:`Evidence`) that either names initiators
(a :class:`Finding`) or passes; the first rule that names someone wins. The order encodes the field's
precedence (docs/design.md): an odd one out in a collective beats everything; then a rank's own exception,
CUDA error or SIGKILL; then a bare non-zero exit; then network errors; then the ranks a monitoredBarrier
names; and only then silence (a rank with no error that stopped advancing, exited early, or left no log).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from correlator import align, claims
from correlator.confidence import Note, Reason
from correlator.faults import FAILURE_KIND_OF
from correlator.schema import Kind
from correlator.verdict import Basis, FailureKind
from parsers import python

_SIG_KINDS = [Kind.COLLECTIVE_FINGERPRINT, Kind.WATCHDOG_TIMEOUT, Kind.COLLECTIVE_MISMATCH]
_SUMMARY = [Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY]


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


def divergence(t: pl.DataFrame) -> tuple[set[int], set[int], dict[str, Any]]:
    """Odd one out: ranks whose collective (op, shape/numel) differs from the majority at the same seq.

    Returns (minority, majority, info) for the earliest (pg, seq) where ranks disagree; empty sets if none.
    Claims come from DETAIL fingerprints, watchdog timeouts (op + NumelIn) and mismatch errors, which also
    state what the peer ran.
    """
    rows = t.filter(
        pl.col("kind").is_in(_SIG_KINDS) & pl.col("seq").is_not_null() & pl.col("rank").is_not_null()
    )
    if rows.height == 0:
        # Old watchdog lines name no SeqNum (torch <= 1.12: ``WorkNCCL(OpType=BROADCAST, Timeout(ms)=…)``): when each
        # rank timed out in one op only, those ops are compared as one collective (seq -1).
        # Likewise torch 2.0's DETAIL mismatch (``CollectiveFingerPrint(OpType=ALLREDUCE, …)`` with no
        # SequenceNumber): each rank's one mismatch line, and the op it says its peer runs.
        old = t.filter(
            pl.col("kind").is_in([Kind.WATCHDOG_TIMEOUT, Kind.COLLECTIVE_MISMATCH])
            & pl.col("op").is_not_null()
            & pl.col("rank").is_not_null()
        )
        if old.height and (old.group_by("rank").agg(pl.col("op").n_unique().alias("n"))["n"] == 1).all():
            rows = old.with_columns(
                pl.lit(-1, dtype=pl.Int64).alias("seq"),
                pl.lit(None, dtype=pl.Int64).alias("numel"),
                pl.lit(None, dtype=pl.String).alias("shape"),
            )
    claims: list[tuple[str, int, int, str, int]] = []  # pg, seq, rank, signature, event_id
    own_line: dict[tuple[str, int, int], int] = {}  # (pg, seq, rank) -> the rank's own line about it
    for r in rows.select(
        "kind", "pg", "seq", "rank", "peer_rank", "op", "shape", "numel", "peer_op", "peer_shape", "event_id"
    ).iter_rows(named=True):
        pg = r["pg"] or "0"
        size = r["shape"] if r["shape"] is not None else (str(r["numel"]) if r["numel"] is not None else "")
        sig = f"{r['op']}|{size}"
        own_line.setdefault((pg, r["seq"], r["rank"]), r["event_id"])
        claims.append((pg, r["seq"], r["rank"], sig, r["event_id"]))
        if r["kind"] == Kind.COLLECTIVE_MISMATCH:
            pop, pshape = r["peer_op"], r["peer_shape"]
            if r["peer_rank"] is not None and pop:
                claims.append((pg, r["seq"], r["peer_rank"], f"{pop}|{pshape or ''}", r["event_id"]))
    by_key: dict[tuple[str, int], dict[int, set[str]]] = {}
    ev: dict[tuple[str, int], list[int]] = {}
    sizeless = {(pg, seq) for pg, seq, _, sig, _ in claims if sig.endswith("|")}
    # A fingerprint states a shape (``TensorShape=[8]``), a watchdog line an element count (``NumelIn=8``): where
    # one key has both, shapes are compared as element counts.
    mixed = {(pg, seq) for pg, seq, _, sig, _ in claims if not sig.endswith("|") and "[" not in sig} & {
        (pg, seq) for pg, seq, _, sig, _ in claims if "[" in sig
    }
    for pg, seq, rank, sig, eid in claims:
        if (pg, seq) in sizeless:  # some claim has no shape: compare the op types only
            sig = sig.split("|")[0]
        elif (pg, seq) in mixed:
            sig = _as_numel(sig)
        by_key.setdefault((pg, seq), {}).setdefault(rank, set()).add(sig)
        ev.setdefault((pg, seq), []).append(eid)
    for key in sorted(by_key, key=lambda k: (k[1], k[0])):
        # A rank with two signatures at one (pg, seq) means lines of several process groups were mixed
        # (DETAIL fingerprints do not name their PG): that key says nothing reliable.
        if any(len(v) > 1 for v in by_key[key].values()):
            continue
        sigs = {r: next(iter(v)) for r, v in by_key[key].items()}
        counts = Counter(sigs.values())
        if len(counts) < 2:
            continue
        (top, ntop), *rest = counts.most_common()
        if rest and rest[0][1] == ntop:
            minority = set(sigs)  # a tie: nobody is the odd one out
            majority: set[int] = set()
        else:
            minority = {r for r, s in sigs.items() if s != top}
            majority = {r for r, s in sigs.items() if s == top}
        own = {r: own_line[(key[0], key[1], r)] for r in minority if (key[0], key[1], r) in own_line}
        return (
            minority,
            majority,
            {
                "pg": key[0],
                "seq": key[1],
                "majority": top.replace("|", " "),
                "evidence": ev[key][:8],
                "own": own,
            },
        )
    return set(), set(), {}


def _as_numel(sig: str) -> str:
    """``op|[2, 4]`` -> ``op|8`` (a shape's element count); other signatures unchanged."""
    op, _, size = sig.partition("|")
    dims = size.strip("[]").replace(" ", "").split(",") if size.startswith("[") else None
    if dims is None or not all(d.isdigit() for d in dims if d):
        return sig
    n = 1
    for d in dims:
        n *= int(d) if d else 1
    return f"{op}|{n}"


def odd_one_out(e: Evidence) -> Finding | None:
    """Collective mismatch or divergent shapes: the minority at the first disagreeing (pg, seq)."""
    minority, majority, div = divergence(e.t)
    if not minority or not (majority or e.causes.height == 0):
        return None
    inits = sorted(minority)
    found = Finding(
        inits,
        Basis.ODD_ONE_OUT,
        "collective_mismatch",
        focus=div,
        cause_event={r: div["own"].get(r, div["evidence"][0]) for r in inits},
    )
    if not majority:
        found.reasons.append(Reason.EVEN_SPLIT.note())
    return found


def config_odd_one_out(e: Evidence) -> Finding | None:
    """A mismatch was detected but the collectives do not say who is odd: compare what the ranks said
    about themselves (configuration lines every rank printed, where exactly one rank differs)."""
    if not e.fr.filter(pl.col("kind") == Kind.COLLECTIVE_MISMATCH).height:
        return None
    odd, ev_ids = config_outlier(e.t)
    if odd is None:
        return None
    return Finding(
        [odd],
        Basis.ODD_ONE_OUT,
        "collective_mismatch",
        {odd: ev_ids[0]},
        {"evidence": ev_ids},
        [Reason.CONFIG_LINE.note()],
    )


def call_site_odd_one_out(e: Evidence) -> Finding | None:
    """Without DETAIL nothing names the op a rank ran, but each rank's traceback does: the ranks that
    failed inside a collective are grouped by where their code called ``torch.distributed`` (file:line and
    the collective, :func:`parsers.python.call_site`). When every rank of the job failed inside a collective and a strict
    majority of three or more stands at one call site, the ranks elsewhere ran another collective: they are
    the odd ones out (a collective cannot complete without every member). Each rank's first fault row with
    a call site counts. A rank in no collective leaves the rule silent: it may be a straggler, and the
    minority may be waiting for it in a subgroup's collective."""
    # A traceback is a multi-line record: one-line rows (1M watchdog lines of a huge job) are not read.
    rows = e.fr.filter(pl.col("line_count") > 1).sort("tc", "event_id", nulls_last=True)
    if rows.height < 3:
        return None
    site: dict[int, tuple[str, str]] = {}
    eid: dict[int, int] = {}
    for r, raw, ev in rows.select("rank", "raw", "event_id").iter_rows():
        if r in site:
            continue
        cs = python.call_site(raw or "")
        if cs is not None:
            site[r], eid[r] = cs, ev
    counts = Counter(site.values())
    if len(site) < 3 or len(counts) < 2:
        return None
    # Every rank must stand in some collective: a rank that is in none may be the straggler the others wait
    # for, and a minority may then only be waiting in a subgroup's collective (cap-13).
    if not set(e.seen) <= set(site) or e.absent or (e.world is not None and len(site) < e.world):
        return None
    (top, ntop), *_ = counts.most_common()
    if 2 * ntop <= len(site):
        return None  # no strict majority: nobody is the odd one out
    odd = sorted(r for r, cs in site.items() if cs != top)
    return Finding(
        odd,
        Basis.ODD_CALL_SITE,
        "collective_mismatch",
        cause_event={r: eid[r] for r in odd},
        focus={
            "op": top[1],
            "majority": f"{top[1]} at {top[0]}",
            "evidence": [eid[r] for r in sorted(site)][:8],
        },
        reasons=[
            Reason.CALL_SITE_ONLY.note(
                odd="; ".join(f"rank {r} {site[r][1]} at {site[r][0]}" for r in odd), op=top[1], site=top[0]
            )
        ],
    )


def disowned_by_all(e: Evidence) -> Finding | None:
    """Every other rank says it disagrees with one peer: that peer is the odd one out.

    DDP checks each rank's model against rank 0's (reducer.cpp ``verify_params_across_processes``: ``[3]:
    params[0] in this process with sizes [64, 32] appears not to match sizes of the same param in process
    0``; ``_verify_param_shape_across_processes``: ``Rank 1 has 2 params, while rank 0 has inconsistent 4
    params``). One rank that differs complains alone and is its own initiator (:func:`first_causes`); when
    rank 0 is the one that differs, *every other* rank complains about it. So when the ranks that state a
    disagreement with peer P (``disagrees_with`` claims, :mod:`correlator.claims`) are all the ranks seen but
    P, two or more, P is named."""
    if e.absent:
        return None
    said = claims.extract(
        e.fr.filter(pl.col("kind") == Kind.DDP_ERROR), want=[claims.ClaimKind.DISAGREES_WITH]
    )
    acc = claims.accused(said, e.seen, kinds=[claims.ClaimKind.DISAGREES_WITH])
    if acc is None:
        return None
    p = acc.peer
    return Finding(
        [p],
        Basis.DISOWNED,
        "collective_mismatch",
        cause_event={p: acc.event_ids[0]},
        focus={"evidence": list(acc.event_ids[:8]), "evidence_role": f"disagrees with rank {p}"},
        reasons=[Reason.DISOWNED_BY_ALL.note(n=len(acc.claimants), peer=p)],
    )


def stack_dumps(e: Evidence) -> Finding | None:
    """Stack dumps of every rank (``py-spy dump``, ``faulthandler``): the ranks inside a collective wait for
    the ranks that are not in it, or that stand in another one (:func:`correlator.stacks.where_ranks_stand`).
    Only for a job the logs show stalled, or that they cannot tell about: in a running job's snapshot ranks
    stand in different places too."""
    from correlator import stacks

    is_stalled, why = stacks.stalled(e.t)
    if is_stalled is False:
        return None
    v = stacks.where_ranks_stand(e.t.filter(pl.col("kind") == Kind.STACK_DUMP), sorted({*e.seen, *e.missing}))
    if v is None:
        return None
    reasons = [Reason.STACKS.note()]
    if is_stalled is None:
        reasons.append(Reason.STACKS_NO_STALL.note())
    if v.missing:
        reasons.append(Reason.STACKS_INCOMPLETE.note(ranks=", ".join(map(str, v.missing))))
    claim = f"the stack dumps show where each rank stands: {v.text}" + (f" ({why})" if why else "")
    return Finding(
        v.initiators,
        Basis.STACKS,
        v.failure_kind,
        cause_event=v.cause_event,
        focus={"majority": v.majority, "evidence": v.evidence, "claim": claim, "waiting": v.waiting},
        reasons=reasons,
    )


def stopped_from_outside(e: Evidence) -> Finding | None:
    """The launcher was stopped from outside (SIGTERM / SIGINT to torchrun) and no rank reported a fault of its
    own (:func:`correlator.stacks.external_stop`): not a failure of the launcher, and the workers it then
    SIGTERMed did not fail either. ``none`` when the ranks advanced until the stop, ``unknown`` after a silent
    hang. Names no rank: :func:`find` returns it as it is."""
    from correlator import stacks

    stop = stacks.external_stop(e.f, e.fr, e.t)
    if stop is None:
        return None
    kind, claim = stop
    why = Reason.STOPPED_WHILE_HUNG if kind == "unknown" else Reason.STOPPED_FROM_OUTSIDE
    return Finding([], Basis.STOPPED, kind, focus={"claim": claim}, reasons=[why.note()])


def nccl_reports(e: Evidence) -> Finding | None:
    """NCCL RAS / Inspector name ranks dead, missing or behind (:func:`correlator.rasview.claims`) where the
    logs' own rules named no one: those ranks, if they are fewer than the others (a report that most of the
    job is missing says nothing about who started it)."""
    from correlator import rasview

    cs = rasview.claims(e.t, e.world or (len(e.seen) or None))
    said = rasview.named(cs)
    for state, kind in (
        ("dead", FailureKind.RANK_CRASH),
        ("missing", FailureKind.STRAGGLER_HANG),
        ("behind", FailureKind.STRAGGLER_HANG),
        ("late", FailureKind.STRAGGLER_HANG),
    ):
        ranks = said.get(state, [])
        n = max(e.world or 0, len(e.seen))
        if ranks and 2 * len(ranks) < max(n, 2):
            src = [c for c in cs if c.state == state and set(c.ranks) & set(ranks)]
            return Finding(
                ranks,
                Basis.RAS,
                kind,
                cause_event={r: src[0].event_id for r in ranks},
                focus={
                    "evidence": [c.event_id for c in src][:3],
                    "evidence_role": f"{src[0].source}: {state}",
                },
                reasons=[Reason.RAS_NAMED.note(source=src[0].source, state=state)],
            )
    return None


def _with_reports(e: Evidence, found: Finding) -> Finding:
    """Join the NCCL RAS / Inspector reports to the finding: their rows as evidence (``focus["reports"]``),
    and a :attr:`Reason.RAS_DISAGREES` note when they and the logs disagree (:func:`rasview.disagreement`)."""
    from correlator import rasview

    cs = rasview.claims(e.t, e.world or (len(e.seen) or None))
    if not cs:
        return found
    waiting = sorted(
        set(e.fr.filter(pl.col("kind").is_in(rasview.WAITING_KINDS))["rank"].to_list())
        - set(found.initiators)
    )
    text = rasview.disagreement(cs, found.initiators, waiting)
    if text is not None and found.basis is not Basis.RAS:
        found.reasons.append(Reason.RAS_DISAGREES.note(text=text))
    role = "NCCL report (disagrees with the logs)" if text else "NCCL report"
    found.focus = {**found.focus, "reports": [(c.event_id, f"{role}: {c.state}") for c in cs[:3]]}
    return found


def first_causes(e: Evidence) -> Finding | None:
    """Exceptions, CUDA errors, SIGKILL: every rank whose own cause came before anyone reacted."""
    causes = e.causes
    if not causes.height:
        return None
    t0 = causes["tc"].min()
    reactions = [x for x in (e.effects["tc"].min(), e.first_signal) if x is not None]
    # Independent failures happen before anyone reacted (the first timeout, error or SIGTERM on another rank).
    horizon = max(t0, min(reactions)) if t0 is not None and reactions else t0
    agent_failed = set(
        causes.filter(
            pl.col("kind").is_in([Kind.WORKER_FAILED, *_SUMMARY]) & (pl.col("stream") != "error_json")
        )["rank"].to_list()
    )
    first_cause = causes.group_by("rank", maintain_order=True).first()
    in_time = (pl.col("tc") <= horizon) if horizon is not None else pl.lit(True)
    # An unstamped cause can only be placed when nothing is stamped at all.
    unplaced = pl.col("tc").is_null() & pl.lit(horizon is None)
    chosen = first_cause.filter(
        in_time.fill_null(False) | unplaced | pl.col("rank").is_in(list(agent_failed))
    )
    inits = sorted(chosen["rank"].to_list())
    cause_event: dict[int, int] = {}
    pref = {Kind.WORKER_FAILED: 1, Kind.PROCESS_EXIT: 1, Kind.FAILURE_ENTRY: 2, Kind.ROOT_CAUSE_ENTRY: 3}
    for r in inits:
        # Prefer the rank's most specific cause (an exception over a bare exit status).
        own = causes.filter(pl.col("rank") == r).with_columns(
            pl.col("kind").replace_strict(pref, default=0, return_dtype=pl.Int8).alias("__p")
        )
        cause_event[r] = own.sort("__p", "tc", nulls_last=True, maintain_order=True)["event_id"][0]
    kinds = [_cause_kind(causes.filter(pl.col("rank") == r)) for r in inits]
    found = Finding(inits, Basis.FIRST_FAULT, Counter(kinds).most_common(1)[0][0], cause_event)
    if len(inits) > 1:
        excs = {causes.filter(pl.col("rank") == r)["exc_type"].drop_nulls().first() for r in inits}
        if len(inits) >= max(2, len(e.seen) // 2) and len(excs) <= 1:
            found.basis = Basis.COMMON_MODE
            found.reasons.append(Reason.COMMON_MODE.note(n=len(inits)))
        else:
            found.reasons.append(Reason.INDEPENDENT_FAILURES.note(n=len(inits)))
    return found


#: A process taken down by SIGABRT: how ProcessGroupNCCL's watchdog ends a rank after a collective timeout
#: (async error handling: torch 1.10 – 2.13, the default from 2.0), as torchrun reports it (``exitcode: -6``) or a
#: shell does (134).
_ABORTED = (pl.col("exit_code").is_in([-6, 134]) | (pl.col("signal") == "SIGABRT")).fill_null(False)
#: The NCCL watchdog's own timeout lines (gloo timeouts end no process by SIGABRT; graph._TIMEOUT_KINDS is wider).
_WATCHDOG_KINDS = [
    Kind.WATCHDOG_TIMEOUT,
    Kind.WATCHDOG_STATUS,
    Kind.WATCHDOG_TEARDOWN,
    Kind.HEARTBEAT_TIMEOUT,
]


def bare_exit(e: Evidence, aborts: bool = False) -> Finding | None:
    """A rank that just died (exit 1, -6 …) and said nothing else.

    While other ranks report collective timeouts, a bare SIGABRT exit is what the watchdog does to a rank
    whose own timeout lines are missing (a pasted excerpt): it is tried only after the rules that read the
    timeouts (``aborts=True``, :func:`bare_abort`), so a rank that never joined the collective is not
    outranked by one the watchdog took down."""
    explained = set(
        e.fr.filter(pl.col("role").is_in(["cause", "effect"]) & (pl.col("kind") != Kind.WORKER_SIGNALLED))[
            "rank"
        ].to_list()
    )
    exits = e.fr.filter((pl.col("role") == "exit") & ~pl.col("rank").is_in(list(explained)))
    if not aborts and e.fr.filter(pl.col("kind").is_in(_WATCHDOG_KINDS)).height:
        exits = exits.filter(~_ABORTED)
    if not exits.height:
        return None
    r = exits["rank"][0]
    return Finding(
        [r],
        Basis.EXIT_STATUS,
        "rank_crash",
        {r: exits["event_id"][0]},
        reasons=[Reason.EXIT_STATUS_ONLY.note()],
    )


def bare_abort(e: Evidence) -> Finding | None:
    """:func:`bare_exit` with SIGABRT exits, when no rule before it named anyone."""
    return bare_exit(e, aborts=True)


def network(e: Evidence) -> Finding | None:
    """Network errors with no crash behind them: a peer host that went away, or the first failing link."""
    net = e.fr.filter(pl.col("kind") == Kind.NCCL_NET_ERROR).sort("tc", "event_id", nulls_last=True)
    dead_host = unreachable_peer_host(e.t, net)
    if dead_host is not None:
        on_host = sorted(
            int(r) for r in e.t.filter(pl.col("host") == dead_host)["rank"].drop_nulls().unique().to_list()
        )
        own = set(e.effects.filter(pl.col("kind") != Kind.WORKER_SIGNALLED)["rank"].to_list())
        inits = [r for r in on_host if r not in own] or on_host
        return Finding(
            inits,
            Basis.PEER_HOST,
            "network_error",
            {r: net["event_id"][0] for r in inits},
            focus={"host": dead_host},
            reasons=[Reason.PEER_HOST_SILENT.note(host=dead_host)],
        )
    if not net.height:
        return None
    firsts = net.group_by("rank", maintain_order=True).first()
    t_first = firsts["tc"][0]
    tied = (
        firsts.filter(pl.col("tc") < t_first + dt.timedelta(seconds=1))
        if t_first is not None
        else firsts.head(1)
    )
    found = Finding(
        sorted(tied["rank"].to_list()),
        Basis.FIRST_NETWORK_ERROR,
        "network_error",
        dict(tied.select("rank", "event_id").iter_rows()),
    )
    if len(found.initiators) > 1:
        found.reasons.append(Reason.NETWORK_ERRORS_TIED.note())
    return found


def barrier_named(e: Evidence) -> Finding | None:
    """monitoredBarrier names the ranks that never arrived (in the numbering of the barrier's group: a
    reporter whose PG rank differs from its global rank reports sub-group ranks, mapped by offset)."""
    named: set[int] = set()
    for row in e.f.filter(pl.col("kind") == Kind.MONITORED_BARRIER_FAILED).iter_rows(named=True):
        shift = (
            (row["rank"] - row["pg_rank"]) if row["rank"] is not None and row["pg_rank"] is not None else 0
        )
        named.update(int(r) + shift for r in (row["ranks_named"] or "").split(",") if r)
    if not named:
        return None
    quiet = named - e.own_error_ranks()
    # A named rank that is stuck says nothing; one that went on and failed elsewhere ran another collective.
    found = Finding(
        sorted(quiet or named),
        Basis.BARRIER_NAMED,
        "straggler_hang" if quiet else "collective_mismatch",
    )
    if not quiet:
        found.reasons.append(Reason.BARRIER_RANK_MOVED_ON.note())
    return found


#: Collectives with a root: the root (``src``/``dst``) is rank 0 unless the code says otherwise.
_ROOTED_OPS = {"BROADCAST", "REDUCE", "SCATTER", "GATHER", "_BROADCAST_OOP", "_REDUCE_OOP"}
#: Effect kinds whose ``peer_rank`` names the rank the reporter waited for (a vote for the initiator).
_WAITING_FOR = [Kind.STORE_ERROR, Kind.MONITORED_BARRIER_PEER, Kind.NCCL_ERROR]
#: Effects that mean the peer process went away (not that it is slow).
_PEER_LOSS = [
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
        e.effects.filter(pl.col("kind").is_in(_WAITING_FOR)), want=[claims.ClaimKind.WAITS_FOR]
    )
    pairs = {(c.rank, c.peer) for c in said}
    return Counter(p for _, p in pairs if p is not None)


def minority_progress(e: Evidence) -> Finding | None:
    """The odd one out by progress: ranks timed out in (pg, seq) while other ranks of that group went past it
    (entered a later seq), or the reverse. A collective cannot complete without every member, so whichever side
    is the minority ran a different sequence of collectives (an extra one, or one skipped)."""
    waits = e.effects.filter((pl.col("kind") == Kind.WATCHDOG_TIMEOUT) & pl.col("seq").is_not_null())
    if not waits.height:
        return None
    waits = waits.with_columns(align.pg_key().alias("pgk"))
    (pg, seq), _n = Counter(waits.select("pgk", "seq").iter_rows()).most_common(1)[0]
    timed = set(waits.filter((pl.col("pgk") == pg) & (pl.col("seq") == seq))["rank"].to_list())
    prog = align.progress(e.t).filter(pl.col("pg") == pg)
    ahead = set(prog.filter((pl.col("entered") > seq) & ~pl.col("rank").is_in(list(timed)))["rank"].to_list())
    if not ahead or len(ahead) == len(timed):
        return None
    minority = timed if len(timed) < len(ahead) else ahead
    op = waits.filter(pl.col("seq") == seq)["op"].drop_nulls().first()
    side = (
        "timed out in a collective the others went past"
        if minority is timed
        else "went past the collective the others wait in"
    )
    ev = waits.filter(pl.col("rank").is_in(list(minority))).sort("tc", "event_id")
    cause = {
        r: int(ev.filter(pl.col("rank") == r)["event_id"][0])
        for r in minority
        if ev.filter(pl.col("rank") == r).height
    }
    return Finding(
        sorted(minority),
        Basis.ODD_ONE_OUT,
        "collective_mismatch",
        cause,
        focus={"pg": pg, "seq": seq, "op": op},
        reasons=[Reason.MINORITY_PROGRESS.note(side=side, seq=seq)],
    )


def stall_report(e: Evidence) -> Finding | None:
    """Horovod's stall report names who has (not) submitted the collective the others wait in.

    Missing ranks are named (``stall_missing``) or are the ranks of the world not listed as ready
    (``stall_ready``; the world from evidence, else the highest rank named + 1). When the missing ranks are
    ready on a different collective, they ran another op: the odd one out (a mismatch), else a straggler.
    ``focus["waiting"]`` lists the ranks that wait for them (collateral)."""
    rows = e.t.filter(
        pl.col("kind").is_in([Kind.STALL_READY, Kind.STALL_MISSING]) & pl.col("peer_rank").is_not_null()
    )
    if not rows.height:
        return None
    missing = set(rows.filter(pl.col("kind") == Kind.STALL_MISSING)["peer_rank"].to_list())
    ready = {
        pg: set(g["peer_rank"].to_list())
        for (pg,), g in rows.filter(pl.col("kind") == Kind.STALL_READY).group_by("pg", maintain_order=True)
    }
    kind, waiting = "straggler_hang", set()
    if ready:
        # The collective most ranks are ready in (ties: the first reported); its absentees are the suspects.
        main_pg = max(ready, key=lambda pg: (len(ready[pg]), -list(ready).index(pg)))
        waiting = ready[main_pg]
        named = set().union(*ready.values()) | missing | set(e.seen)
        world = e.world or (max(named) + 1)
        absent = set(range(world)) - waiting
        if not missing:
            missing = absent
        if any(other and other <= missing for pg, other in ready.items() if pg != main_pg):
            kind = "collective_mismatch"
    waiting |= set(rows["rank"].drop_nulls().to_list())  # the coordinator that reports the stall waits too
    missing -= waiting
    if not missing:
        return None
    ev = (
        rows.filter(pl.col("kind") == Kind.STALL_MISSING)
        if rows.filter(pl.col("kind") == Kind.STALL_MISSING).height
        else rows
    )
    first = int(ev.sort("tc", "event_id", nulls_last=True)["event_id"][0])
    op = rows["op"].drop_nulls().first()
    found = Finding(
        sorted(missing),
        Basis.STALL_REPORT,
        kind,
        {r: first for r in missing},
        focus={"op": op, "waiting": sorted(waiting - missing), "evidence": [first]},
        reasons=[Reason.STALL_REPORT.note()],
    )
    if kind == "collective_mismatch":
        found.reasons.append(Reason.STALL_READY_ELSEWHERE.note())
    return found


def named_by_waiters(e: Evidence) -> Finding | None:
    """The rank the waiting ranks name, when it reported no error of its own (it was busy or stuck)."""
    v = votes(e)
    if not v:
        return None
    own = e.own_error_ranks() | set(e.causes["rank"].to_list())
    (top, n), *rest = v.most_common()
    if top in own or (rest and rest[0][1] == n):
        return None
    voters = sorted(
        {r for r, p in e.effects.filter(pl.col("peer_rank") == top).select("rank", "peer_rank").iter_rows()}
    )
    ev = e.effects.filter((pl.col("peer_rank") == top) & pl.col("kind").is_in(_WAITING_FOR)).sort(
        "tc", "event_id"
    )
    return Finding(
        [top],
        Basis.NAMED_BY_WAITERS,
        "straggler_hang",
        {top: int(ev["event_id"][0])},
        reasons=[Reason.NAMED_BY_WAITERS.note(n=len(voters), voters=", ".join(map(str, voters)))],
    )


def blamed_by_the_others(e: Evidence) -> Finding | None:
    """No rank says what went wrong with itself, but every other rank says one peer went away: NCCL's proxy
    thread on each surviving local process logs ``[Service thread] Connection closed by localRank 7`` when
    process 7 dies (sgl-project/sglang#5013: 7 of 8 processes, no other line); a closed gloo connection
    that names its peer. The ``blames`` claims of every rank seen but one, two or more, name that one
    (:func:`correlator.claims.accused`); a rank with a cause of its own is never named this way."""
    said = claims.extract(e.t, want=[claims.ClaimKind.BLAMES])
    own = set(e.causes["rank"].to_list())
    acc = claims.accused(said, e.seen, kinds=[claims.ClaimKind.BLAMES], exclude=own)
    if acc is None:
        return None
    what = sorted({c.what for c in said if c.peer == acc.peer and c.kind == claims.ClaimKind.BLAMES})
    return Finding(
        [acc.peer],
        Basis.BLAMED,
        "rank_crash",
        {acc.peer: acc.event_ids[0]},
        focus={"evidence": list(acc.event_ids[:8]), "evidence_role": f"says rank {acc.peer} went away"},
        reasons=[Reason.BLAMED_BY_THE_OTHERS.note(n=len(acc.claimants), peer=acc.peer, what=", ".join(what))],
    )


def _prefer_rank0(e: Evidence, cand: list[int], focus: dict[str, Any]) -> tuple[list[int], str | None]:
    """Among several silent or absent candidates, rank 0 when the logs say why (the reason is returned):
    the collective everyone waits in has a root, the untagged (rank-0-only) output stops mid-work, or the
    waiting ranks name rank 0."""
    if len(cand) < 2 or 0 not in cand:
        return cand, None
    why = _rank0_reason(e, focus)
    return ([0], why) if why else (cand, None)


def _rank0_reason(e: Evidence, focus: dict[str, Any]) -> str | None:
    """Why rank 0 in particular would be the one the others wait for, if the logs say so."""
    if (focus.get("op") or "").upper() in _ROOTED_OPS:
        return f"rank 0 is the root of the {focus['op']} the others wait in"
    if e.t.filter((pl.col("kind") == Kind.PROGRESS_BAR) & pl.col("rank").is_null()).height:
        return "the untagged output (rank-0-only work, a progress bar) stops mid-work"
    if _untagged_work_before_faults(e):
        return "untagged application lines (rank-0-only logging, by convention) are the last work before the faults"
    if votes(e).get(0):
        return "the waiting ranks name rank 0"
    lost_store = e.effects.filter(pl.col("kind") == Kind.STORE_ERROR)["rank"].n_unique()
    if lost_store >= 2:
        return f"{lost_store} ranks lost the TCPStore, which rank 0 hosts"
    return None


#: Application lines: what a training script prints of its own (not a launcher, NCCL or c10d line).
_APP_WORK = [Kind.UNPARSED, Kind.LOG, Kind.PROGRESS_BAR, Kind.STEP_PROGRESS]


def _untagged_work_before_faults(e: Evidence) -> bool:
    """In a file whose other lines carry rank prefixes, an application line without one, just before the
    first fault of that file: training scripts log on rank 0 only (``if rank == 0: log(…)``; torchtune,
    Hugging Face and Lightning do so by default), so the last untagged line of work is rank 0's
    (pytorch/torchtune#2093: ``Getting full model state dict took 114.73 secs``, then ranks 4-5 time out)."""
    faults = e.fr.filter(pl.col("rank").is_not_null()).select("path", "event_id")
    if not faults.height:
        return False
    first = faults.group_by("path").agg(pl.col("event_id").min().alias("first"))
    work = (
        pl.col("rank").is_null() & pl.col("layer").is_in(["app", "unknown"]) & pl.col("kind").is_in(_APP_WORK)
    )
    # Per file, of the lines before its first fault that are untagged work or carry a rank, the last one must be
    # untagged work (nothing tagged in between): one plan over the table, not a filter per file.
    last = (
        e.t.lazy()
        .select("path", "event_id", "rank", work.alias("work"))
        .join(first.lazy(), on="path")
        .filter((pl.col("event_id") < pl.col("first")) & (pl.col("work") | pl.col("rank").is_not_null()))
        .group_by("path")
        .agg(pl.col("work").sort_by("event_id").last())
        .collect()
    )
    return bool(last["work"].any())


def silence(e: Evidence) -> Finding | None:
    """Silence is evidence: a rank with no error while the others time out, one behind on the collective
    sequence, one that left no log at all, or — in an excerpt whose world size is unknown — the rank absent
    from a block of timeouts. Among several candidates rank 0 is preferred only for a stated reason."""
    effects = e.effects
    if not effects.height:
        return None
    prog = align.progress(e.t)
    # A rank the watchdog took down (SIGABRT) while others time out timed out too, its lines cut: not silent.
    # A launcher line that lists its tasks (srun's ``tasks 0-2: Aborted``) counts once expanded to them
    # (``faults``: rank_source ``srun_task``); a rank it merely inherited is where the line was read.
    aborted = set(
        e.fr.filter(
            (pl.col("role") == "exit")
            & _ABORTED
            & (pl.col("ranks_named").is_null() | (pl.col("rank_source") == "srun_task"))
        )["rank"].to_list()
    )
    own = e.own_error_ranks()  # once, not per rank (a polars filter each: 10^5 ranks seen took minutes)
    silent = [r for r in e.seen if r not in own and r not in aborted]
    focus: dict[str, Any] = {}
    waited = effects.filter(pl.col("seq").is_not_null() | pl.col("op").is_not_null()).sort("tc", "event_id")
    if waited.height:
        w = waited.row(0, named=True)
        focus = {"pg": w["pg"] or "0", "seq": w["seq"], "op": w["op"]}
    behind = align.behind(prog)
    behind_ranks = sorted(set(behind["rank"].to_list())) if behind.height else []
    if silent:
        cand = silent
        if len(silent) > 1:
            # Compare progress within the group the others wait in; a silent rank with no progress there at all
            # is the furthest behind.
            pg = focus.get("pg") or "0"
            entered = dict(prog.filter(pl.col("pg") == pg).select("rank", "entered").iter_rows())
            if entered:
                low = min(entered.get(r, -1) for r in silent)
                cand = [r for r in silent if entered.get(r, -1) == low]
        found = Finding(
            sorted(cand),
            Basis.SILENT,
            "straggler_hang",
            focus=focus,
            reasons=[Reason.FOUND_BY_SILENCE.note()],
        )
        # Early exit needs the launcher's word on EVERY worker: torchrun's summary lists all that did not exit 0
        # and its agent signals all live ones; this rank was neither. A launcher that names only the first
        # failure (mpirun, mp.spawn, DeepSpeed's return-code line) says nothing about the others.
        # Of several silent ranks, one the launcher accounts for (SIGTERMed: alive at teardown) was waiting too;
        # the one it does not account for had exited 0 before (torch 2.15: rank 3 leaves the loop, rank 1 is
        # SIGTERMed silent, cap-t2150-early-exit-plain-r3).
        reported = e.f.filter(pl.col("kind").is_in([Kind.WORKER_SIGNALLED, *_SUMMARY]))
        failed = set(e.f.filter(pl.col("kind") == Kind.WORKER_FAILED)["rank"].drop_nulls().to_list())
        accounted = e.signalled | failed | set(reported["rank"].drop_nulls().to_list())
        unaccounted = [r for r in found.initiators if r not in accounted]
        if reported.height and unaccounted:
            found.initiators = unaccounted
            found.failure_kind = FailureKind.EARLY_EXIT
        # A launcher reported a worker killed (SIGKILL) without naming it: the one silent rank is that worker.
        unnamed_kill = e.f.filter(
            pl.col("rank").is_null()
            & pl.col("kind").is_in([Kind.WORKER_FAILED, Kind.PROCESS_EXIT])
            & ((pl.col("exit_code") == -9) | (pl.col("exit_code") == 137))
        )
        if unnamed_kill.height and len(found.initiators) == 1:
            found.failure_kind = "oom_kill"
            found.cause_event = {found.initiators[0]: int(unnamed_kill["event_id"][0])}
            found.reasons.append(Reason.UNNAMED_SIGKILL.note())
    elif behind_ranks:
        found = Finding(
            behind_ranks,
            Basis.BEHIND,
            "straggler_hang",
            focus=focus,
            reasons=[Reason.LAGGING_SEQ.note()],
        )
    elif e.missing:
        found = Finding(
            e.missing,
            Basis.NO_LOG,
            "straggler_hang",
            focus=focus,
            reasons=[Reason.INITIATOR_LEFT_NO_LOG.note()],
        )
    elif e.absent:
        # Absent ranks of an excerpt are candidates only when few (one missing from a block of timeouts) or when
        # rank 0 has a stated reason; many absent ranks were most likely just cut from the paste.
        why = _rank0_reason(e, focus) if 0 in e.absent else None
        # A lost peer (connection closed, remote process exited) with one rank absent: that rank is the peer.
        lost_peer = len(e.absent) == 1 and effects.filter(pl.col("kind").is_in(_PEER_LOSS)).height > 0
        if not why and not lost_peer and len(e.absent) * 3 > len(e.seen):
            return None
        found = Finding(
            e.absent,
            Basis.ABSENT,
            "straggler_hang",
            focus=focus,
            reasons=[Reason.ABSENT_FROM_EXCERPT.note()],
        )
        if why and len(e.absent) == 1:
            found.reasons.append(Reason.RANK0_LIKELY.note(why=why))
    else:
        return None
    chosen, why = _prefer_rank0(e, found.initiators, focus)
    if why:
        found.initiators = chosen
        found.reasons.append(Reason.RANK0_PREFERRED.note(why=why))
    if e.fr.filter(pl.col("kind") == Kind.COLLECTIVE_MISMATCH).height:
        found.failure_kind = "collective_mismatch"
        found.reasons.append(Reason.ODD_RANK_UNDETERMINED.note())
    return found


def flight_recorder(e: Evidence) -> Finding | None:
    """Flight Recorder dumps, aligned per (pg, seq) by :func:`correlator.fr.analyze`: the majority decides
    who ran a different op, other sizes/dtypes, skipped a collective, or never reached the seq. A rank that
    never reached it and raised on its own (text log) failed with its own kind; otherwise it is a straggler."""
    from correlator import fr

    v = fr.analyze(e.t)
    if v is None:
        return None
    kind, cause_event, claim = v.failure_kind, dict(v.cause_event), v.claim
    if v.kind in ("never_reached", "p2p_unmatched"):
        own = e.causes.filter(pl.col("rank").is_in(v.initiators))
        if own.height:  # it stopped because it failed: its own error is the cause, FR the evidence
            kind = _cause_kind(own)
            cause_event.update(
                own.group_by("rank", maintain_order=True).first().select("rank", "event_id").iter_rows()
            )
        else:
            # A dump holds no dump time, trigger or exception (FlightRecorderDetail.hpp dump_json/dump_dict)
            # and its frames are each collective's call stack when recorded: a rank that raised and one that
            # is slow or hung leave the same dump, so only where it stopped is known.
            claim += (
                f"; the dumps show where {'it' if len(v.initiators) == 1 else 'they'} stopped, not why "
                "(a rank that raised and one that is slow or hung leave the same dump)"
            )
    focus = {"pg": v.pg, "seq": v.seq, "op": v.op, "claim": claim, "fr": v.kind, "evidence": v.evidence}
    return Finding(sorted(v.initiators), Basis.FLIGHT_RECORDER, kind, cause_event, focus, list(v.reasons))


#: The rules in order of precedence; the first that names someone decides.
RULES: list[Callable[[Evidence], Finding | None]] = [
    flight_recorder,
    odd_one_out,
    config_odd_one_out,
    call_site_odd_one_out,
    disowned_by_all,
    stack_dumps,
    stopped_from_outside,
    first_causes,
    bare_exit,
    network,
    stall_report,
    barrier_named,
    named_by_waiters,
    blamed_by_the_others,
    nccl_reports,
    minority_progress,
    silence,
    bare_abort,
]


def find(e: Evidence) -> Finding:
    """Run :data:`RULES` in order (a job stopped from outside is returned without an initiator,
    :func:`stopped_from_outside`). Without an initiator: ``launcher_error`` when only the launcher
    failed, ``unknown`` when ranks report faults that explain nothing, else ``none``."""
    return _with_reports(e, _find(e))


def _find(e: Evidence) -> Finding:
    for rule in RULES:
        found = rule(e)
        if found is not None and found.basis is Basis.STOPPED and not found.initiators:
            # a job stopped after a hang: NCCL's own reports may still say which rank it waited for
            return nccl_reports(e) or found
        if found is not None and found.initiators:
            return found
    if e.f.filter(pl.col("kind").is_in([Kind.LAUNCHER_ERROR, Kind.STORE_ERROR, Kind.JOB_CANCELLED])).height:
        return Finding([], Basis.LAUNCHER, FailureKind.LAUNCHER_ERROR)
    if e.fr.height:
        found = Finding([], Basis.NOBODY, FailureKind.UNKNOWN, reasons=[Reason.NONE_EXPLAINS.note()])
        waited = e.effects.filter(pl.col("seq").is_not_null() | pl.col("op").is_not_null()).sort(
            "tc", "event_id"
        )
        if waited.height:
            w = waited.row(0, named=True)
            found.focus = {"pg": w["pg"] or "0", "seq": w["seq"], "op": w["op"]}
        if e.absent or e.missing:
            found.focus["candidates"] = e.absent or e.missing
        return found
    return unattributed(e) or Finding([], Basis.NOBODY, FailureKind.NONE)


def unattributed(e: Evidence) -> Finding | None:
    """Faults on lines no rank could be attached to (an excerpt without prefixes): name the fault, not a rank.

    The first cause (exception, CUDA error, kill) decides the failure kind; timeouts alone give ``unknown``.
    ``focus["evidence"]`` holds the fault rows, so the verdict can quote them."""
    rows = e.f.filter(pl.col("role").is_in(["cause", "effect", "exit"])).sort(
        "tc", "event_id", nulls_last=True
    )
    if not rows.height:
        return None
    causes = rows.filter(pl.col("role") == "cause")
    first = causes if causes.height else rows
    kind = _cause_kind(causes.head(1)) if causes.height else "unknown"
    return Finding(
        [],
        Basis.NO_RANK,
        kind,
        focus={"evidence": first["event_id"].head(3).to_list()},
        reasons=[Reason.NO_RANK_NAMED.note()],
    )


def unreachable_peer_host(t: pl.DataFrame, net: pl.DataFrame) -> str | None:
    """The host the first network errors point at, when no rank on that host reported a network error
    itself (the peer went away, rather than a link of one rank failing). Addresses map to hosts through
    NCCL ``Bootstrap : Using <if>:<ip>`` lines, or are host names already."""
    named = net.filter(pl.col("peer_addr").is_not_null())
    if named.height == 0:
        return None
    ip_host = dict(
        t.filter(pl.col("local_addr").is_not_null() & pl.col("host").is_not_null())
        .select("local_addr", "host")
        .unique(subset="local_addr")
        .iter_rows()
    )
    hosts = set(t["host"].drop_nulls().unique().to_list())
    addr = named["peer_addr"][0]
    host = ip_host.get(addr) or (addr.split(".")[0] if addr.split(".")[0] in hosts else None)
    if host is None or net.filter(pl.col("host") == host).height:
        return None
    return host


def config_outlier(t: pl.DataFrame) -> tuple[int | None, list[int]]:
    """The one rank whose application line differs in its numbers from the same line on every other rank.

    Lines are compared by template (digits masked); numbers that differ by construction on every rank (its
    rank, pid, ports) are masked out first. Returns (rank, [its event id, a majority event id]).
    """
    app = t.filter((pl.col("layer") == "app") & pl.col("rank").is_not_null())
    if app.height == 0 or app["rank"].n_unique() < 3:
        return None, []
    num = r"\d+(?:\.\d+)?"
    own = r"\b(?:\w*rank\w*|pid|port|master)[=:]\s*[\w.]*(?::\d+)?"
    app = app.with_columns(pl.col("message").str.replace_all(own, "").alias("message"))
    rows = (
        app.with_columns(
            pl.col("message").str.replace_all(num, "#").alias("tpl"),
            pl.col("message").str.extract_all(num).list.join(",").alias("vals"),
        )
        .group_by("tpl", "rank", maintain_order=True)
        .agg(pl.col("vals").first(), pl.col("event_id").first())
    )
    for _tpl, grp in rows.group_by("tpl", maintain_order=True):
        if grp.height < 3:
            continue
        counts = grp.group_by("vals").len().sort("len", descending=True)
        if counts.height == 2 and counts["len"][1] == 1 and counts["len"][0] == grp.height - 1:
            odd = grp.filter(pl.col("vals") == counts["vals"][1])
            ref = grp.filter(pl.col("vals") == counts["vals"][0])
            return int(odd["rank"][0]), [int(odd["event_id"][0]), int(ref["event_id"][0])]
    return None, []


def _cause_kind(rows: pl.DataFrame) -> str:
    kinds = rows["kind"].to_list()
    for k in (Kind.CUDA_OOM, Kind.CUDA_ERROR, Kind.DDP_ERROR, Kind.WATCHDOG_HANG, Kind.PYTHON_EXCEPTION):
        if k in kinds:
            return FAILURE_KIND_OF[k]
    if ((rows["exit_code"] == -9) | (rows["signal"] == "SIGKILL")).any():
        return "oom_kill"  # SIGKILL from outside: the host OOM killer, as a rule
    return "rank_crash"  # segfaults, bus errors, other signals
