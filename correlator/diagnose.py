"""Diagnosis: read the verdict off the causal graph — initiating, collateral, clean and missing ranks,
the failure kind, the evidence lines and a confidence with the reasons that lowered it.

``diagnose(table)`` is a pure function of the event table. With several torchelastic attempts each
failing attempt is diagnosed (``Diagnosis.attempts``); the top-level verdict is the first failing
attempt's, because later attempts usually fail only as a consequence (a restart reading the dead
attempt's stale store addresses).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import polars as pl

from correlator import clock, confidence
from correlator.graph import Findings, analyze, failing_attempts
from correlator.schema import Kind
from correlator.verdict import Basis, Cite, EdgeKind, FailureKind, Status

SCHEMA_VERSION = 1


#: Fields of the records that stay out of the JSON contract (typed twins of a text field).
_NOT_JSON = frozenset({"cite"})


def _record(x: Any) -> dict[str, Any]:
    return {k: v for k, v in asdict(x).items() if k not in _NOT_JSON}


@dataclass(frozen=True)
class Evidence:
    """One log line that supports the verdict: ``path:line`` relative to the input directory.

    ``event_id``: the event table row it quotes (set where the evidence is chosen, so the plot, the trace and
    the report name the same row; ``None`` only for evidence made by hand). ``ts``: that row's own stamp
    (ISO 8601 UTC, not clock-corrected; ``None`` when the line has none). ``role``: why it is quoted, in
    words (``initiating fault``, ``last sign of life of rank 3``, ``collateral: rank 1 waits for rank 0``…);
    ``cite``: the same as a :class:`correlator.verdict.Cite` member (what code reads; not in the JSON)."""

    rank: int | None
    path: str
    line: int
    ts: str | None
    kind: str
    text: str
    role: str = ""
    event_id: int | None = None
    cite: Cite | None = None


@dataclass(frozen=True)
class InitiatingEvent:
    """The event that shows an initiating rank's fault, as the evidence quotes it, and the one time of it.

    ``event_id``: its event table row (the same as the quoting evidence row's ``event_id``). ``role``: that
    evidence row's role: ``initiating fault``, or ``last sign of life of rank N`` for a rank found by its
    silence. ``ts``: ISO 8601 UTC, clock-corrected (:func:`correlator.clock.shown_times`): where the report
    states it and where the plot and the Perfetto trace place it. ``ts_basis``: ``stamp`` (its own stamp),
    ``stamp above`` (no stamp of its own: the nearest stamped line above it in its file, a lower bound),
    ``stamp below`` (an upper bound), or ``None`` with ``ts`` (its file has no stamp, or the logs carry
    fewer than two distinct stamps)."""

    rank: int
    event_id: int
    path: str
    line: int
    kind: str
    role: str
    ts: str | None = None
    ts_basis: str | None = None
    cite: Cite | None = None


@dataclass(frozen=True)
class Explanation:
    rank: int
    edge: str
    pg: str | None = None
    seq: int | None = None


@dataclass(frozen=True)
class RankStatus:
    rank: int
    host: str | None
    local_rank: int | None
    status: str  # initiating | collateral | unexplained | clean | missing
    first_fault_ts: str | None = None
    first_fault_kind: str | None = None
    explained_by: Explanation | None = None
    #: ``inherited`` when the fault line had no stamp of its own (the time is an earlier line's: a lower bound)
    first_fault_ts_quality: str | None = None


@dataclass(frozen=True)
class Diagnosis:
    """The verdict for one attempt (and, at top level, for the job).

    ``confidence`` is in [0, 1]; ``confidence_reasons`` say in English what lowered it and
    ``confidence_reason_codes`` name the same reasons (:class:`correlator.confidence.Reason` members, one
    per sentence, in order; the confidence is computed from these alone). ``attempts`` holds the
    per-attempt verdicts when the job restarted. ``to_json()`` gives the documented JSON contract.
    Frozen: a changed verdict is a new record (:func:`dataclasses.replace`, :meth:`with_signatures`).
    """

    world_size: int | None
    ranks_seen: list[int]
    attempt: int
    initiating_ranks: list[int]
    collateral_ranks: list[int]
    clean_ranks: list[int]
    missing_ranks: list[int]
    failure_kind: str
    confidence: float
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    #: Ranks that failed (a fault of their own) while no initiating rank was named: not collateral of anyone
    #: the diagnosis knows, and never clean.
    unexplained_ranks: list[int] = field(default_factory=list)
    initiating_events: list[InitiatingEvent] = field(default_factory=list)
    per_rank: list[RankStatus] = field(default_factory=list)
    confidence_reasons: list[str] = field(default_factory=list)
    confidence_reason_codes: list[str] = field(default_factory=list)
    initiator_basis: str = ""
    focus: dict[str, Any] = field(default_factory=dict)
    attempts: list[Diagnosis] = field(default_factory=list)
    signatures: list[dict[str, Any]] = field(default_factory=list)
    #: The causal analysis this verdict was read from (:func:`correlator.graph.analyze`; ``None`` for a
    #: verdict no rule made): what ``graph`` and ``plot`` draw. Not part of the JSON contract.
    findings: Findings | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The JSON contract (``schema_version`` 1); extra keys may be added, none renamed."""
        from dataclasses import fields

        d: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        body: dict[str, Any] = {}
        for f in fields(self):
            if f.name in ("attempts", "findings"):
                continue
            v = getattr(self, f.name)
            body[f.name] = (
                [_record(x) for x in v] if f.name in ("evidence", "initiating_events", "per_rank") else v
            )
        # This verdict's own attempt is rendered from this verdict (its signatures, its confidence), the others
        # from their own results.
        body["attempts"] = [
            {k: v for k, v in a.to_json().items() if k not in ("attempts", "schema_version", "per_rank")}
            for a in self.attempts
            if a.attempt != self.attempt
        ] + (
            [{k: v for k, v in body.items() if k not in ("per_rank",)}]
            if any(a.attempt == self.attempt for a in self.attempts)
            else []
        )
        body["attempts"].sort(key=lambda a: a["attempt"])
        d.update(body)
        return d


def _iso(ts: Any) -> str | None:
    if ts is None:
        return None
    if isinstance(ts, dt.datetime):
        return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")
    return str(ts)


#: Characters of a quoted line the evidence keeps (the JSON carries this much; the terminal report shows less).
EVIDENCE_TEXT_LIMIT = 4000


def _first_line(text: str | None, limit: int = EVIDENCE_TEXT_LIMIT) -> str:
    """The first line of ``text``, cut to ``limit`` characters with a final "…" (a long mismatch line or a
    JSON record keeps its tail: the other rank's collective comes last)."""
    s = (text or "").split("\n")[0]
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _words(s: str, limit: int) -> str:
    """``s`` cut to at most ``limit`` characters at a word boundary, with "…" when cut (for the headline)."""
    if len(s) <= limit:
        return s
    head = s[: limit - 1]
    cut = head.rsplit(" ", 1)[0] if " " in head[limit // 2 :] else head
    return cut.rstrip(" ,;:") + "…"


#: Kinds whose parsed ``message`` is quoted rather than the raw line (the exception text, the entry, the dump).
_MESSAGE_KINDS = frozenset(
    {
        Kind.PYTHON_EXCEPTION,
        Kind.CUDA_OOM,
        Kind.CUDA_ERROR,
        Kind.FAILURE_ENTRY,
        Kind.ROOT_CAUSE_ENTRY,
        Kind.FR_COLLECTIVE,
        Kind.FR_STATUS,
        Kind.FR_WAITING,
        Kind.STACK_DUMP,
        Kind.RAS_DEAD,
        Kind.RAS_MISSING,
        Kind.RAS_MISMATCH,
        Kind.RAS_OK,
        Kind.INSPECTOR_OP,
    }
)
#: Keys of a rule's focus that stay out of the verdict's ``focus`` (evidence ids and words, the host, reports).
_NOT_IN_FOCUS = frozenset({"evidence", "own", "evidence_role", "host", "reports"})


@dataclass(frozen=True)
class _Quote:
    """An evidence line chosen by :func:`_evidence`: the row, why (``cite``), the rank it is about and the
    role text a rule gave (``RULE``)."""

    event_id: int
    cite: Cite
    about: int | None = None
    text: str = ""


def _role(q: _Quote, row: dict[str, Any]) -> str:
    """The evidence row's ``role`` words, from its typed reason (never parsed back)."""
    if q.cite is Cite.INITIATING_FAULT:
        if row["rank"] == q.about:
            return "initiating fault"
        if row["rank"] is None:  # a report that names the rank (NCCL RAS, Inspector)
            return f"points at rank {q.about} ({row['layer']} report)"
        return f"points at rank {q.about} (reported by rank {row['rank']})"
    if q.cite is Cite.LAST_SIGN_OF_LIFE:
        return f"last sign of life of rank {q.about}"
    return q.text


def _quotes(t: pl.DataFrame, F: Findings) -> list[_Quote]:
    """Which rows the verdict quotes, in order: each initiator's fault, the naming rule's lines, the last sign
    of life of a rank found by its silence, the launcher's view of the initiators, one line per edge kind.
    ``t``: the attempt's rows without duplicates."""
    out: list[_Quote] = []
    for r in F.initiators:
        ev = F.ranks[r].cause_event
        if ev is not None:
            out.append(_Quote(ev, Cite.INITIATING_FAULT, r))
    # A rule that names the rank from the others' claims says what its evidence lines are (``evidence_role``).
    role = F.focus.get("evidence_role") or "collective disagreement"
    if F.basis is Basis.STACKS:
        role = "a rank waiting in a collective"
    for ev in (F.focus.get("evidence") or [])[:3]:
        out.append(
            _Quote(ev, Cite.RULE, text=role)
            if F.initiators
            else _Quote(ev, Cite.NO_RANK, text=Cite.NO_RANK.value)
        )
    # A rank found by its silence: its last sign of life is the evidence.
    if F.basis.is_silence:
        quiet_kinds = [Kind.WORKER_SIGNALLED, Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY, Kind.BLANK]
        for r in F.initiators[:3]:
            last = t.filter((pl.col("rank") == r) & ~pl.col("kind").is_in(quiet_kinds)).sort(
                "ts", "event_id", nulls_last=False
            )
            if last.height:
                out.append(_Quote(int(last["event_id"][-1]), Cite.LAST_SIGN_OF_LIFE, r))
    # Launcher view of the initiators (exit status), then one line per explanation edge type.
    launch = t.filter(
        pl.col("rank").is_in(F.initiators) & pl.col("kind").is_in([Kind.WORKER_FAILED, Kind.ROOT_CAUSE_ENTRY])
    )
    for eid, kind in launch.select("event_id", "kind").head(2).iter_rows():
        weak = kind == Kind.ROOT_CAUSE_ENTRY
        text = "launcher (weak: torchrun's root cause is often wrong)" if weak else "launcher"
        out.append(_Quote(eid, Cite.LAUNCHER, text=text))
    seen_edges: set[str] = set()
    for e in sorted(F.edges, key=lambda e: (e.kind, e.src)):
        if e.kind in seen_edges:
            continue
        seen_edges.add(e.kind)
        for ev in e.evidence[:1]:
            text = f"collateral: rank {e.src} {e.kind.replace('_', ' ')} rank {e.dst}"
            out.append(_Quote(ev, Cite.COLLATERAL, e.src, text))
    # NCCL RAS / Inspector reports (initiators._with_reports), after the logs' own evidence
    out.extend(_Quote(ev, Cite.REPORT, text=role) for ev, role in F.focus.get("reports") or [])
    return out


def _evidence(table: pl.DataFrame, F: Findings) -> list[Evidence]:
    """The verdict's evidence lines (:func:`_quotes`), each row once, with its quoted text."""
    t = table.filter(~pl.col("duplicate") & (pl.col("attempt") == F.attempt))  # this attempt's rows
    quotes = _quotes(t, F)
    rows = {
        r["event_id"]: r
        for r in t.filter(pl.col("event_id").is_in([q.event_id for q in quotes])).iter_rows(named=True)
    }
    out: list[Evidence] = []
    done: set[int] = set()
    for q in quotes:
        if q.event_id in done or q.event_id not in rows:
            continue
        done.add(q.event_id)
        r = rows[q.event_id]
        cite = q.cite
        if cite is Cite.INITIATING_FAULT and r["rank"] != q.about:
            cite = Cite.POINTS_AT
        use_message = r["kind"] in _MESSAGE_KINDS or r["stream"] == "error_json"
        text = r["message"] if use_message and r["message"] else r["raw"]
        out.append(
            Evidence(
                r["rank"],
                r["path"],
                r["line"],
                _iso(r["ts"]),
                r["kind"],
                _first_line(text),
                _role(q, r),
                int(q.event_id),
                cite,
            )
        )
    return out


def _initiating_events(
    table: pl.DataFrame, evidence: list[Evidence], initiators: list[int]
) -> list[InitiatingEvent]:
    """Per initiating rank (in rank order), the evidence row that shows its fault: its ``initiating fault``
    line, else its ``last sign of life``; with the time :func:`correlator.clock.shown_times` gives that row.
    A rank the evidence quotes no line of (it left no log, or another rank reported its fault) has none."""
    chosen: list[tuple[int, Evidence]] = []
    for r in sorted(initiators):
        own = [e for e in evidence if e.rank == r and e.event_id is not None]
        e = next((e for e in own if e.cite is Cite.INITIATING_FAULT), None) or next(
            (e for e in own if e.cite is Cite.LAST_SIGN_OF_LIFE), None
        )
        if e is not None:
            chosen.append((r, e))
    if not chosen:
        return []
    times, _base = clock.shown_times(table, paths=sorted({e.path for _, e in chosen}))
    at = {
        eid: (tc, basis)
        for eid, tc, basis in times.filter(pl.col("event_id").is_in([e.event_id for _, e in chosen]))
        .select("event_id", "tc", "ts_basis")
        .iter_rows()
    }
    out = []
    for r, e in chosen:
        assert e.event_id is not None
        tc, basis = at.get(e.event_id, (None, None))
        out.append(InitiatingEvent(r, e.event_id, e.path, e.line, e.kind, e.role, _iso(tc), basis, e.cite))
    return out


def _summary(F: Findings, table: pl.DataFrame, collateral: list[int]) -> str:
    """The verdict's one-sentence summary: who, how found, what, and what the others did."""
    kind = F.failure_kind
    claim = F.focus.get("claim")
    if not F.initiators and claim:  # a finding that names no rank but says why (a job stopped from outside)
        return str(claim)
    if kind == "none":
        n = len(F.ranks_seen)
        return f"No failure found: {n} rank{'' if n == 1 else 's'}, none reported a fault."
    if not F.initiators:
        return _summary_nobody(F, table)
    return f"{_head(F, table)}{_tail(F, collateral)}."


def _row(table: pl.DataFrame, event_id: int | None) -> dict[str, Any] | None:
    """The table row ``event_id`` as a dict (``None`` when absent)."""
    if event_id is None:
        return None
    row = table.filter(pl.col("event_id") == event_id)
    return row.row(0, named=True) if row.height else None


def _summary_nobody(F: Findings, table: pl.DataFrame) -> str:
    """The summary when no rank could be named: the fault line that names none, or the faulty ranks and the
    collective they waited in."""
    focus = F.focus
    ev = focus.get("evidence") or []
    r = _row(table, ev[0]) if ev else None
    if r is not None:
        what = r["exc_type"] or r["kind"].replace("_", " ")
        return (
            f"No rank could be named: the logs show {what} at {r['path']}:{r['line']}, on a line that names "
            f"no rank (failure kind {F.failure_kind})."
        )
    faulty = sorted(r for r, n in F.ranks.items() if n.first_fault_kind)
    if faulty:
        where = f" in {focus.get('op') or 'a collective'}" + (
            f" SeqNum {focus['seq']}" if focus.get("seq") is not None else ""
        )
        cands = focus.get("candidates") or []
        tail = (
            f"; the rank they waited for is not in these logs (candidates: ranks {_ranges(cands)})"
            if cands
            else "; no rank in these logs explains them"
        )
        return f"Ranks {_ranges(faulty)} failed{where if focus else ''}{tail}."
    return f"Failure of kind {F.failure_kind}, but no rank could be named as its origin."


def _who(F: Findings, r: int) -> str:
    n = F.ranks[r]
    bits = [b for b in (n.host, f"local rank {n.local_rank}" if n.local_rank is not None else None) if b]
    return f"rank {r}" + (f" ({', '.join(bits)})" if bits else "")


def _what(row: dict[str, Any] | None) -> str:
    """What the initiator's fault row says went wrong: the exception type, the exit status, the message."""
    if row is None:
        return ""
    if row["exc_type"]:
        return str(row["exc_type"])
    if row["exit_code"] is not None:
        sig = row["signal"] or _signal_name(row["exit_code"])
        return f"exit code {row['exit_code']}" + (f" ({sig})" if sig else "")
    if row["kind"] in (Kind.CUDA_ERROR, Kind.NCCL_NET_ERROR, Kind.WATCHDOG_HANG) and row["message"]:
        return _words(_first_line(row["message"]), 120)
    return str(row["kind"]).replace("_", " ")


def _head(F: Findings, table: pl.DataFrame) -> str:
    """The summary's first clause: the initiators, what they did (by the rule that found them) and what."""
    inits = list(F.initiators)
    if len(inits) > 3:
        hosts = sorted({h for r in inits if (h := F.ranks[r].host)})
        names = f"ranks {_ranges(inits)}" + (f" ({', '.join(hosts)})" if hosts else "")
    else:
        names = ", ".join(_who(F, r) for r in inits)
    row = _row(table, F.ranks[inits[0]].cause_event)
    what = _what(row)
    basis = F.basis
    verb = _VERBS.get(basis, "failed first")
    if F.failure_kind == FailureKind.EARLY_EXIT:
        verb = "exited early while the others still waited"
    head = f"{names} {verb}" + (f": {what}" if what and basis.names_its_own_fault else "")
    claim = F.focus.get("claim")
    if basis is Basis.STACKS and claim:
        hung = F.failure_kind == FailureKind.STRAGGLER_HANG
        head = f"{names} {'hung' if hung else 'entered another collective'}: {claim}"
    if basis is Basis.FLIGHT_RECORDER and claim:
        # the cause row's own words, unless it is a Flight Recorder row itself (its kind says "fr …")
        own = what and not (
            row is not None
            and not row["exc_type"]
            and row["exit_code"] is None
            and str(row["kind"]).startswith("fr_")
        )
        head = f"Flight Recorder: {claim}" + (f" ({names}: {what})" if own else "")
    return head


def _tail(F: Findings, collateral: list[int]) -> str:
    """The summary's second clause: what the collateral ranks did, and in which collective."""
    if not collateral:
        return ""
    focus = F.focus
    waits = [e.src for e in F.edges if e.kind == EdgeKind.WAITS_FOR]
    seqs = {(e.pg, e.seq) for e in F.edges if e.seq is not None}
    where = ""
    if focus.get("seq") is not None:
        where = f" in {focus.get('op') or 'collective'} SeqNum {focus['seq']}"
    elif len(seqs) == 1:
        where = f" in SeqNum {next(iter(seqs))[1]}"
    n = len(collateral)
    s = "s" if n > 1 else ""
    # "timed out waiting" only when each of them says it timed out, "waited" when each is shown waiting (a
    # pending Flight Recorder entry, a stall report); an exit status alone shows neither
    them = "them" if len(F.initiators) > 1 else "it"
    if waits and len(waits) == n and all(F.ranks[r].timed_out for r in waits):
        return f"; {n} rank{s} timed out waiting for {them}{where}"
    if waits and len(waits) == n and all(F.ranks[r].waited for r in waits):
        return f"; {n} rank{s} waited for {them}{where}"
    mism = [e.src for e in F.edges if e.kind == EdgeKind.MISMATCH]
    if mism and len(mism) == n and all(F.ranks[r].waited for r in mism):
        return f"; {n} rank{s} waited for {them} in {focus.get('majority') or 'another collective'}"
    return f"; {n} other rank{s} failed as a consequence{where}"


#: What the summary says the initiators did, by how they were found (default: "failed first").
_VERBS: dict[Basis, str] = {
    Basis.ODD_ONE_OUT: "ran a different collective than the others",
    Basis.ODD_CALL_SITE: "called a different collective than the others (read from the tracebacks)",
    Basis.DISOWNED: "differs from all the other ranks (each of them says so)",
    Basis.SILENT: "went silent (no error) while the others failed",
    Basis.BEHIND: "fell behind on the collective sequence",
    Basis.BARRIER_NAMED: "never reached the monitored barrier",
    Basis.NO_LOG: "left no log",
    Basis.PEER_HOST: "became unreachable (their host stopped logging; the others lost their connections to it)",
}


def _ranges(nums: list[int]) -> str:
    from correlator.ranks import ranges

    return ranges(nums)


def _signal_name(code: int | None) -> str | None:
    """torchrun's negative exit codes are signal numbers: -11 -> SIGSEGV."""
    import signal

    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return None


def _confidence(F: Findings) -> float:
    """0.95 less the weight of each reason's member (:class:`correlator.confidence.Reason`), never its
    English; then capped when several silent or absent ranks are equally suspect, and fixed for ``none``."""
    base = confidence.lower(0.95, list(F.reasons))
    inits, seen = F.initiators, F.ranks_seen
    if F.basis in (Basis.SILENT, Basis.NO_LOG) and len(inits) > 1:
        # Several ranks are equally suspect: the more of them, the less the verdict says.
        base = min(base, 0.3 if len(inits) * 4 >= max(len(seen), 1) else 0.5)
    if F.failure_kind == "none":
        base = confidence.lower(0.9 if F.ranks_seen else 0.3, list(F.reasons))
    return round(max(0.05, min(1.0, base)), 2)


def _per_rank(F: Findings, table: pl.DataFrame) -> list[RankStatus]:
    """One :class:`RankStatus` per rank of the attempt, in rank order, with the stamp quality of its first
    fault (a lookup of those few rows, not a dict of the table)."""
    firsts = [n.first_fault_event for n in F.ranks.values() if n.first_fault_event is not None]
    quality = dict(
        table.filter(pl.col("event_id").is_in(firsts)).select("event_id", "ts_quality").iter_rows()
    )
    out = []
    for r in sorted(F.ranks):
        n = F.ranks[r]
        ex = n.explanation()
        out.append(
            RankStatus(
                r,
                n.host,
                n.local_rank,
                n.status,  # a faulty rank is never clean (graph.analyze)
                _iso(n.first_fault_ts),
                n.first_fault_kind,
                Explanation(**ex) if ex else None,
                quality.get(n.first_fault_event),
            )
        )
    return out


def diagnose_attempt(table: pl.DataFrame, attempt: int | None = None) -> Diagnosis:
    """Diagnose one attempt (default: the first attempt with a fault): :func:`correlator.graph.analyze`,
    then the verdict read off its records."""
    return verdict(analyze(table, attempt), table)


def verdict(F: Findings, table: pl.DataFrame) -> Diagnosis:
    """The verdict on one attempt from its causal analysis ``F`` and the event table it was made from (for
    the quoted lines and their times)."""
    groups: dict[str, list[int]] = {s: [] for s in Status}
    for r in sorted(F.ranks):
        groups[F.ranks[r].status].append(r)
    seen = set(F.ranks_seen)  # a set: 10^5 clean ranks must not cost 10^10 list comparisons
    initiators = set(F.initiators)
    evidence = _evidence(table, F)
    collateral = sorted(groups[Status.COLLATERAL])
    return Diagnosis(
        world_size=F.world_size,
        ranks_seen=list(F.ranks_seen),
        attempt=F.attempt,
        initiating_ranks=sorted(F.initiators),
        collateral_ranks=collateral,
        clean_ranks=[r for r in groups[Status.CLEAN] if r in seen],
        unexplained_ranks=sorted(groups[Status.UNEXPLAINED]),
        missing_ranks=[r for r in F.missing if r not in initiators],
        failure_kind=F.failure_kind,
        confidence=_confidence(F),
        summary=_summary(F, table, collateral),
        evidence=evidence,
        initiating_events=_initiating_events(table, evidence, list(F.initiators)),
        per_rank=_per_rank(F, table),
        confidence_reasons=confidence.texts(list(F.reasons)),
        confidence_reason_codes=confidence.codes(list(F.reasons)),
        initiator_basis=F.initiator_basis,
        focus={k: v for k, v in F.focus.items() if k not in _NOT_IN_FOCUS},
        findings=F,
    )


def diagnose(table: pl.DataFrame, attempt: int | None = None) -> Diagnosis:
    """Diagnose the job: every failing attempt, with the first one's verdict on top.

    ``table`` is the event table (``correlator.load``). ``attempt`` selects one attempt's verdict for the
    top level instead of the first failing one. Never raises on an empty table (the verdict is ``none``).
    """
    attempts = failing_attempts(table)
    if not attempts or (attempt is not None and attempt not in attempts):
        return diagnose_attempt(table, attempt)
    per = [diagnose_attempt(table, a) for a in attempts]
    chosen = next((d for d in per if d.attempt == attempt), None) if attempt is not None else None
    if chosen is None:
        chosen = next((d for d in per if d.failure_kind != "none"), per[0])
    if len(per) == 1:
        return chosen
    later = [d for d in per if d.attempt > chosen.attempt and d.failure_kind != "none"]
    if later and attempt is None:
        note = confidence.Reason.LATER_ATTEMPTS_FAILED.note(n=len(later))
        chosen = replace(
            chosen,
            confidence_reasons=[*chosen.confidence_reasons, note.text()],
            confidence_reason_codes=[*chosen.confidence_reason_codes, note.reason.name],
            confidence=round(max(0.05, confidence.lower(chosen.confidence, [note])), 2),
        )
    # A tree, not a cycle: the chosen attempt's entry is the verdict without ``attempts``.
    return replace(chosen, attempts=[chosen if d.attempt == chosen.attempt else d for d in per])
