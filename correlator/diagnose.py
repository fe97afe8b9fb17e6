"""Diagnosis: read the verdict off the causal graph — initiating, collateral, clean and missing ranks,
the failure kind, the evidence lines and a confidence with the reasons that lowered it.

``diagnose(table)`` is a pure function of the event table. With several torchelastic attempts each
failing attempt is diagnosed (``Diagnosis.attempts``); the top-level verdict is the first failing
attempt's, because later attempts usually fail only as a consequence (a restart reading the dead
attempt's stale store addresses).
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

import networkx as nx
import polars as pl

from correlator import clock, confidence
from correlator.graph import build_graph, failing_attempts
from correlator.schema import Kind
from correlator.verdict import Basis, EdgeKind, FailureKind, Status

SCHEMA_VERSION = 1


@dataclass
class Evidence:
    """One log line that supports the verdict: ``path:line`` relative to the input directory.

    ``event_id``: the event table row it quotes (set where the evidence is chosen, so the plot, the trace and
    the report name the same row; ``None`` only for evidence made by hand). ``ts``: that row's own stamp
    (ISO 8601 UTC, not clock-corrected; ``None`` when the line has none)."""

    rank: int | None
    path: str
    line: int
    ts: str | None
    kind: str
    text: str
    role: str = ""
    event_id: int | None = None


@dataclass
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


@dataclass
class Explanation:
    rank: int
    edge: str
    pg: str | None = None
    seq: int | None = None


@dataclass
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


@dataclass
class Diagnosis:
    """The verdict for one attempt (and, at top level, for the job).

    ``confidence`` is in [0, 1]; ``confidence_reasons`` say in English what lowered it and
    ``confidence_reason_codes`` name the same reasons (:class:`correlator.confidence.Reason` members, one
    per sentence, in order; the confidence is computed from these alone). ``attempts`` holds the
    per-attempt verdicts when the job restarted. ``to_json()`` gives the documented JSON contract.
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

    def to_json(self) -> dict[str, Any]:
        """The JSON contract (``schema_version`` 1); extra keys may be added, none renamed."""
        from dataclasses import fields

        d: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        body: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "attempts":
                continue
            v = getattr(self, f.name)
            body[f.name] = (
                [asdict(x) for x in v] if f.name in ("evidence", "initiating_events", "per_rank") else v
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


def _evidence(table: pl.DataFrame, G: nx.DiGraph) -> list[Evidence]:
    ids: list[tuple[int, str]] = []
    for r in G.graph["initiators"]:
        ev = G.nodes[r].get("cause_event")
        if ev is not None:
            ids.append((ev, f"initiating fault of rank {r}"))
    focus = G.graph.get("focus") or {}
    # A rule that names the rank from the others' claims says what its evidence lines are (``evidence_role``).
    role = focus.get("evidence_role") or "collective disagreement"
    for ev in (focus.get("evidence") or [])[:3]:
        if G.graph["basis"] is Basis.STACKS:
            role = "a rank waiting in a collective"
        ids.append((ev, role if G.graph["initiators"] else "fault (no rank named)"))
    t = table.filter(~pl.col("duplicate") & (pl.col("attempt") == G.graph["attempt"]))  # this attempt's rows
    # A rank found by its silence: its last sign of life is the evidence.
    if G.graph["basis"].is_silence:
        quiet_kinds = [Kind.WORKER_SIGNALLED, Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY, Kind.BLANK]
        for r in G.graph["initiators"][:3]:
            last = t.filter((pl.col("rank") == r) & ~pl.col("kind").is_in(quiet_kinds)).sort(
                "ts", "event_id", nulls_last=False
            )
            if last.height:
                ids.append((int(last["event_id"][-1]), f"last sign of life of rank {r}"))
    # Launcher view of the initiators (exit status), then one line per explanation edge type.
    launch = t.filter(
        pl.col("rank").is_in(G.graph["initiators"])
        & pl.col("kind").is_in([Kind.WORKER_FAILED, Kind.ROOT_CAUSE_ENTRY])
    )
    for eid, kind in launch.select("event_id", "kind").head(2).iter_rows():
        ids.append(
            (
                eid,
                "launcher (weak: torchrun's root cause is often wrong)"
                if kind == Kind.ROOT_CAUSE_ENTRY
                else "launcher",
            )
        )
    seen_edges: set[str] = set()
    for a, b, data in sorted(G.edges(data=True), key=lambda e: (e[2]["edge"], e[0])):
        if data["edge"] in seen_edges:
            continue
        seen_edges.add(data["edge"])
        for ev in data["evidence"][:1]:
            ids.append((ev, f"collateral: rank {a} {data['edge'].replace('_', ' ')} rank {b}"))
    # NCCL RAS / Inspector reports (initiators._with_reports), after the logs' own evidence
    ids.extend((ev, r) for ev, r in focus.get("reports") or [])
    out: list[Evidence] = []
    done: set[int] = set()
    rows = {
        r["event_id"]: r
        for r in t.filter(pl.col("event_id").is_in([i for i, _ in ids])).iter_rows(named=True)
    }
    for eid, role in ids:
        if eid in done or eid not in rows:
            continue
        done.add(eid)
        r = rows[eid]
        if role.startswith("initiating fault of rank"):
            init = int(role.rsplit(" ", 1)[1])
            role = (
                "initiating fault"
                if r["rank"] == init
                else f"points at rank {init} (reported by rank {r['rank']})"
                if r["rank"] is not None
                else f"points at rank {init} ({r['layer']} report)"
            )
        use_message = (
            r["kind"]
            in (
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
            )
            or r["stream"] == "error_json"
        )
        text = r["message"] if use_message and r["message"] else r["raw"]
        out.append(
            Evidence(
                r["rank"], r["path"], r["line"], _iso(r["ts"]), r["kind"], _first_line(text), role, int(eid)
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
        e = next((e for e in own if e.role == "initiating fault"), None) or next(
            (e for e in own if e.role == f"last sign of life of rank {r}"), None
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
        out.append(InitiatingEvent(r, e.event_id, e.path, e.line, e.kind, e.role, _iso(tc), basis))
    return out


def _summary(G: nx.DiGraph, table: pl.DataFrame, collateral: list[int]) -> str:
    kind = G.graph["failure_kind"]
    inits = G.graph["initiators"]
    claim = (G.graph.get("focus") or {}).get("claim")
    if not inits and claim:  # a finding that names no rank but says why (a job stopped from outside)
        return str(claim)
    if kind == "none":
        n = len(G.graph["ranks_seen"])
        return f"No failure found: {n} rank{'' if n == 1 else 's'}, none reported a fault."
    if not inits:
        ev = (G.graph.get("focus") or {}).get("evidence") or []
        row = table.filter(pl.col("event_id") == ev[0]) if ev else table.clear()
        if row.height:
            r = row.row(0, named=True)
            what = r["exc_type"] or r["kind"].replace("_", " ")
            return (
                f"No rank could be named: the logs show {what} at {r['path']}:{r['line']}, on a line that names "
                f"no rank (failure kind {kind})."
            )
        focus = G.graph.get("focus") or {}
        faulty = sorted(r for r in G.nodes if G.nodes[r].get("first_fault_kind"))
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
        return f"Failure of kind {kind}, but no rank could be named as its origin."

    def who(r: int) -> str:
        n = G.nodes[r]
        bits = [
            b
            for b in (
                n.get("host"),
                f"local rank {n['local_rank']}" if n.get("local_rank") is not None else None,
            )
            if b
        ]
        return f"rank {r}" + (f" ({', '.join(bits)})" if bits else "")

    if len(inits) > 3:
        hosts = sorted({G.nodes[r].get("host") for r in inits if G.nodes[r].get("host")})
        names = f"ranks {_ranges(inits)}" + (f" ({', '.join(hosts)})" if hosts else "")
    else:
        names = ", ".join(who(r) for r in inits)
    ev = G.nodes[inits[0]].get("cause_event")
    what = ""
    if ev is not None:
        row = table.filter(pl.col("event_id") == ev)
        if row.height:
            r = row.row(0, named=True)
            if r["exc_type"]:
                what = r["exc_type"]
            elif r["exit_code"] is not None:
                sig = r["signal"] or _signal_name(r["exit_code"])
                what = f"exit code {r['exit_code']}" + (f" ({sig})" if sig else "")
            elif r["kind"] in (Kind.CUDA_ERROR, Kind.NCCL_NET_ERROR, Kind.WATCHDOG_HANG) and r["message"]:
                what = _words(_first_line(r["message"]), 120)
            else:
                what = r["kind"].replace("_", " ")
    basis: Basis = G.graph["basis"]
    verb = _VERBS.get(basis, "failed first")
    if kind == FailureKind.EARLY_EXIT:
        verb = "exited early while the others still waited"
    head = f"{names} {verb}" + (f": {what}" if what and basis.names_its_own_fault else "")
    focus = G.graph.get("focus") or {}
    if basis is Basis.STACKS and focus.get("claim"):
        head = f"{names} {'hung' if kind == 'straggler_hang' else 'entered another collective'}: {focus['claim']}"
    if basis is Basis.FLIGHT_RECORDER and focus.get("claim"):
        head = f"Flight Recorder: {focus['claim']}" + (
            f" ({names}: {what})" if what and not what.startswith("fr ") else ""
        )
    waits = [a for a, b, d in G.edges(data=True) if d["edge"] == EdgeKind.WAITS_FOR]
    tail = ""
    if collateral:
        seqs = {
            (
                d.get("pg"),
                d.get("seq"),
            )
            for _, _, d in G.edges(data=True)
            if d.get("seq") is not None
        }
        where = ""
        if focus.get("seq") is not None:
            where = f" in {focus.get('op') or 'collective'} SeqNum {focus['seq']}"
        elif len(seqs) == 1:
            where = f" in SeqNum {next(iter(seqs))[1]}"
        n = len(collateral)
        # "timed out waiting" only when each of them says it timed out, "waited" when each is shown waiting (a
        # pending Flight Recorder entry, a stall report); an exit status alone shows neither
        them = "them" if len(inits) > 1 else "it"
        if waits and len(waits) == n and all(G.nodes[r].get("timed_out") for r in waits):
            tail = f"; {n} rank{'s' if n > 1 else ''} timed out waiting for {them}{where}"
        elif waits and len(waits) == n and all(G.nodes[r].get("waited") for r in waits):
            tail = f"; {n} rank{'s' if n > 1 else ''} waited for {them}{where}"
        elif (
            (mism := [a for a, _, d in G.edges(data=True) if d["edge"] == "mismatch"])
            and len(mism) == n
            and all(G.nodes[r].get("waited") for r in mism)
        ):
            tail = f"; {n} rank{'s' if n > 1 else ''} waited for {them} in {focus.get('majority') or 'another collective'}"
        else:
            tail = f"; {n} other rank{'s' if n > 1 else ''} failed as a consequence{where}"
    return f"{head}{tail}."


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


def _confidence(G: nx.DiGraph) -> float:
    """0.95 less the weight of each reason's member (:class:`correlator.confidence.Reason`), never its
    English; then capped when several silent or absent ranks are equally suspect, and fixed for ``none``."""
    base = confidence.lower(0.95, G.graph["reasons"])
    inits, seen = G.graph["initiators"], G.graph["ranks_seen"]
    if G.graph["basis"] in (Basis.SILENT, Basis.NO_LOG) and len(inits) > 1:
        # Several ranks are equally suspect: the more of them, the less the verdict says.
        base = min(base, 0.3 if len(inits) * 4 >= max(len(seen), 1) else 0.5)
    if G.graph["failure_kind"] == "none":
        base = confidence.lower(0.9 if G.graph["ranks_seen"] else 0.3, G.graph["reasons"])
    return round(max(0.05, min(1.0, base)), 2)


def diagnose_attempt(table: pl.DataFrame, attempt: int | None = None) -> Diagnosis:
    """Diagnose one attempt (default: the first attempt with a fault)."""
    G = build_graph(table, attempt)
    # The stamp quality of each rank's first fault: a lookup of those few rows, not a dict of the table.
    firsts = [e for r in G.nodes if (e := G.nodes[r].get("first_fault_event")) is not None]
    quality = dict(
        table.filter(pl.col("event_id").is_in(firsts)).select("event_id", "ts_quality").iter_rows()
    )
    per_rank: list[RankStatus] = []
    groups: dict[str, list[int]] = {s: [] for s in Status}
    for r in sorted(G.nodes):
        n = G.nodes[r]
        status = n["status"]  # a faulty rank is never clean (graph.build_graph)
        groups.setdefault(status, []).append(r)
        ex = n.get("explained_by")
        per_rank.append(
            RankStatus(
                r,
                n.get("host"),
                n.get("local_rank"),
                status,
                _iso(n.get("first_fault_ts")),
                n.get("first_fault_kind"),
                Explanation(**ex) if ex else None,
                quality.get(n.get("first_fault_event")),
            )
        )
    seen = set(G.graph["ranks_seen"])  # a set: 10^5 clean ranks must not cost 10^10 list comparisons
    clean = [r for r in groups[Status.CLEAN] if r in seen]
    initiators = set(G.graph["initiators"])
    evidence = _evidence(table, G)
    d = Diagnosis(
        world_size=G.graph["world_size"],
        ranks_seen=G.graph["ranks_seen"],
        attempt=G.graph["attempt"],
        initiating_ranks=sorted(G.graph["initiators"]),
        collateral_ranks=sorted(groups[Status.COLLATERAL]),
        clean_ranks=clean,
        unexplained_ranks=sorted(groups[Status.UNEXPLAINED]),
        missing_ranks=[r for r in G.graph["missing"] if r not in initiators],
        failure_kind=G.graph["failure_kind"],
        confidence=_confidence(G),
        summary="",
        evidence=evidence,
        initiating_events=_initiating_events(table, evidence, G.graph["initiators"]),
        per_rank=per_rank,
        confidence_reasons=confidence.texts(G.graph["reasons"]),
        confidence_reason_codes=confidence.codes(G.graph["reasons"]),
        initiator_basis=G.graph["initiator_basis"],
        focus={
            k: v
            for k, v in (G.graph.get("focus") or {}).items()
            if k not in ("evidence", "own", "evidence_role", "host", "reports")
        },
    )
    d.summary = _summary(G, table, d.collateral_ranks)
    return d


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
    if len(per) > 1:
        later = [d for d in per if d.attempt > chosen.attempt and d.failure_kind != "none"]
        if later and attempt is None:
            note = confidence.Reason.LATER_ATTEMPTS_FAILED.note(n=len(later))
            chosen.confidence_reasons.append(note.text())
            chosen.confidence_reason_codes.append(note.reason.name)
            chosen.confidence = round(max(0.05, confidence.lower(chosen.confidence, [note])), 2)
        # A tree, not a cycle: the chosen attempt's entry is a copy of the verdict without ``attempts``.
        chosen.attempts = [copy.deepcopy(d) if d is chosen else d for d in per]
    return chosen
