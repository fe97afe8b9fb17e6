"""The verdict read off the records: from the causal analysis of each attempt (:class:`~correlator.graph.Findings`)
and the rows it quotes (:class:`~correlator.quotes.Quoted`), the :class:`~correlator.verdict.Diagnosis`: the
initiating, collateral, clean and missing ranks, the summary sentence, the per-rank statuses and the confidence
with the reasons that lowered it. Reads no event table: the last step of :func:`correlator.diagnose.diagnose`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from correlator import confidence
from correlator.quotes import first_line
from correlator.schema import Kind
from correlator.verdict import Basis, Diagnosis, EdgeKind, Explanation, FailureKind, RankStatus, Status, iso

if TYPE_CHECKING:
    from correlator.graph import Findings
    from correlator.quotes import Quoted

#: Keys of a rule's focus that stay out of the verdict's ``focus`` (evidence ids and words, the host, reports).
_NOT_IN_FOCUS = frozenset({"evidence", "own", "evidence_role", "host", "reports"})


def _words(s: str, limit: int) -> str:
    """``s`` cut to at most ``limit`` characters at a word boundary, with "…" when cut (for the headline)."""
    if len(s) <= limit:
        return s
    head = s[: limit - 1]
    cut = head.rsplit(" ", 1)[0] if " " in head[limit // 2 :] else head
    return cut.rstrip(" ,;:") + "…"


def _summary(F: Findings, Q: Quoted, collateral: list[int]) -> str:
    """The verdict's one-sentence summary: who, how found, what, and what the others did."""
    kind = F.failure_kind
    claim = F.focus.get("claim")
    if not F.initiators and claim:  # a finding that names no rank but says why (a job stopped from outside)
        return str(claim)
    if kind == "none":
        n = len(F.ranks_seen)
        return f"No failure found: {n} rank{'' if n == 1 else 's'}, none reported a fault."
    if not F.initiators:
        return _summary_nobody(F, Q)
    return f"{_head(F, Q)}{_tail(F, collateral)}."


def _summary_nobody(F: Findings, Q: Quoted) -> str:
    """The summary when no rank could be named: the fault line that names none, or the faulty ranks and the
    collective they waited in."""
    focus = F.focus
    ev = focus.get("evidence") or []
    r = Q.rows.get(ev[0]) if ev else None
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


def _what(row: Mapping[str, Any] | None) -> str:
    """What the initiator's fault row says went wrong: the exception type, the exit status, the message."""
    if row is None:
        return ""
    if row["exc_type"]:
        return str(row["exc_type"])
    if row["exit_code"] is not None:
        sig = row["signal"] or _signal_name(row["exit_code"])
        return f"exit code {row['exit_code']}" + (f" ({sig})" if sig else "")
    if row["kind"] in (Kind.CUDA_ERROR, Kind.NCCL_NET_ERROR, Kind.WATCHDOG_HANG) and row["message"]:
        return _words(first_line(row["message"]), 120)
    return str(row["kind"]).replace("_", " ")


def _head(F: Findings, Q: Quoted) -> str:
    """The summary's first clause: the initiators, what they did (by the rule that found them) and what."""
    inits = list(F.initiators)
    if len(inits) > 3:
        hosts = sorted({h for r in inits if (h := F.ranks[r].host)})
        names = f"ranks {_ranges(inits)}" + (f" ({', '.join(hosts)})" if hosts else "")
    else:
        names = ", ".join(_who(F, r) for r in inits)
    ev = F.ranks[inits[0]].cause_event
    row = Q.rows.get(ev) if ev is not None else None
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


def _per_rank(F: Findings, Q: Quoted) -> list[RankStatus]:
    """One :class:`RankStatus` per rank of the attempt, in rank order, with the stamp quality of its first
    fault (:attr:`Quoted.ts_quality`)."""
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
                iso(n.first_fault_ts),
                n.first_fault_kind,
                Explanation(**ex) if ex else None,
                Q.ts_quality.get(n.first_fault_event) if n.first_fault_event is not None else None,
            )
        )
    return out


def attempt_verdict(F: Findings, Q: Quoted) -> Diagnosis:
    """The verdict on one attempt from its causal analysis ``F`` and the rows it quotes ``Q``
    (:func:`correlator.quotes.gather` on the same table)."""
    groups: dict[str, list[int]] = {s: [] for s in Status}
    for r in sorted(F.ranks):
        groups[F.ranks[r].status].append(r)
    seen = set(F.ranks_seen)  # a set: 10^5 clean ranks must not cost 10^10 list comparisons
    initiators = set(F.initiators)
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
        summary=_summary(F, Q, collateral),
        evidence=list(Q.evidence),
        initiating_events=list(Q.initiating_events),
        per_rank=_per_rank(F, Q),
        confidence_reasons=confidence.texts(list(F.reasons)),
        confidence_reason_codes=confidence.codes(list(F.reasons)),
        initiator_basis=F.initiator_basis,
        focus={k: v for k, v in F.focus.items() if k not in _NOT_IN_FOCUS},
        findings=F,
    )


def job_verdict(found: Sequence[Findings], quoted: Sequence[Quoted], attempt: int | None = None) -> Diagnosis:
    """The job's verdict from each analysed attempt (``found``, in attempt order, with the rows each quotes):
    the verdict on ``attempt`` when given, else on the first attempt that failed, with every failing attempt's
    verdict in ``attempts`` when there are several. A later attempt that failed too lowers the confidence
    (:attr:`correlator.confidence.Reason.LATER_ATTEMPTS_FAILED`): it usually failed as a consequence."""
    per = [attempt_verdict(F, Q) for F, Q in zip(found, quoted, strict=True)]
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
