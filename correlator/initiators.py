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

import polars as pl

from correlator import align, claims
from correlator.attempt_evidence import (
    ABORTED,
    SUMMARY_KINDS,
    WAITING_FOR,
    Evidence,
    Finding,
    votes,
)
from correlator.confidence import Reason
from correlator.disagreement import (
    call_site_odd_one_out,
    config_odd_one_out,
    odd_one_out,
)
from correlator.faults import FAILURE_KIND_OF
from correlator.schema import Kind
from correlator.silence import silence
from correlator.verdict import Basis, FailureKind


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
            pl.col("kind").is_in([Kind.WORKER_FAILED, *SUMMARY_KINDS]) & (pl.col("stream") != "error_json")
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


#: The NCCL watchdog's own timeout lines (gloo timeouts end no process by SIGABRT; Kind.TIMED_OUT is wider).
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
        exits = exits.filter(~ABORTED)
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
    ev = e.effects.filter((pl.col("peer_rank") == top) & pl.col("kind").is_in(WAITING_FOR)).sort(
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


def _cause_kind(rows: pl.DataFrame) -> str:
    kinds = rows["kind"].to_list()
    for k in (Kind.CUDA_OOM, Kind.CUDA_ERROR, Kind.DDP_ERROR, Kind.WATCHDOG_HANG, Kind.PYTHON_EXCEPTION):
        if k in kinds:
            return FAILURE_KIND_OF[k]
    if ((rows["exit_code"] == -9) | (rows["signal"] == "SIGKILL")).any():
        return "oom_kill"  # SIGKILL from outside: the host OOM killer, as a rule
    return "rank_crash"  # segfaults, bus errors, other signals
