"""What the verdict on one attempt quotes from the event table: the step between the causal analysis
(:func:`correlator.graph.analyze`) and the verdict's wording (:mod:`correlator.summary`).

:func:`gather` is the one place where the diagnosis reads rows of the table after the analysis: the evidence
lines (which rows, why each is quoted, their text), the initiating events with the one time the report, the
plot and the Perfetto trace show (:func:`correlator.clock.shown_times`), the rows the summary names and the
stamp quality of each rank's first fault. Pure function of the table and the :class:`~correlator.graph.Findings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from correlator import clock
from correlator.schema import Kind
from correlator.verdict import Basis, Cite, Evidence, InitiatingEvent, iso

if TYPE_CHECKING:
    from correlator.graph import Findings


@dataclass(frozen=True)
class Quoted:
    """The rows the verdict on one attempt quotes (:func:`gather`).

    ``evidence``: the evidence lines in the order the verdict lists them. ``initiating_events``: per
    initiating rank (rank order) the evidence row that shows its fault, with its clock-corrected time.
    ``rows``: event id -> row (all columns) of the rows the summary names: the first initiator's cause row and
    the first evidence row of the naming rule. ``ts_quality``: event id of each rank's first fault -> that
    row's ``ts_quality`` (``inherited`` when the line had no stamp of its own)."""

    evidence: tuple[Evidence, ...] = ()
    initiating_events: tuple[InitiatingEvent, ...] = ()
    rows: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    ts_quality: Mapping[int, str | None] = field(default_factory=dict)


def gather(table: pl.DataFrame, F: Findings) -> Quoted:
    """The rows of ``table`` (the event table ``F`` was made from) that the verdict on ``F.attempt`` quotes.
    Reads only the rows it quotes (a lookup by event id), never a dict of the whole table."""
    t = table.filter(~pl.col("duplicate") & (pl.col("attempt") == F.attempt))  # this attempt's rows
    evidence = _evidence(t, _quotes(t, F))
    named = [F.ranks[F.initiators[0]].cause_event] if F.initiators else []
    named += (F.focus.get("evidence") or [])[:1]
    firsts = [n.first_fault_event for n in F.ranks.values() if n.first_fault_event is not None]
    wanted = sorted({int(e) for e in [*named, *firsts] if e is not None})
    rows: dict[int, dict[str, Any]] = {}
    for r in table.filter(pl.col("event_id").is_in(wanted)).iter_rows(named=True):
        rows.setdefault(int(r["event_id"]), r)  # the first row of an id, as a lookup by id gives it
    return Quoted(
        evidence=tuple(evidence),
        initiating_events=tuple(_initiating_events(table, evidence, list(F.initiators))),
        rows={e: rows[e] for e in named if e is not None and e in rows},
        ts_quality={e: rows[e]["ts_quality"] for e in firsts if e in rows},
    )


#: Characters of a quoted line the evidence keeps (the JSON carries this much; the terminal report shows less).
EVIDENCE_TEXT_LIMIT = 4000


def first_line(text: str | None, limit: int = EVIDENCE_TEXT_LIMIT) -> str:
    """The first line of ``text``, cut to ``limit`` characters with a final "…" (a long mismatch line or a
    JSON record keeps its tail: the other rank's collective comes last)."""
    s = (text or "").split("\n")[0]
    return s if len(s) <= limit else s[: limit - 1] + "…"


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


def _evidence(t: pl.DataFrame, quotes: list[_Quote]) -> list[Evidence]:
    """The evidence lines of ``quotes`` (:func:`_quotes`), each row once, with its quoted text.
    ``t``: the attempt's rows without duplicates."""
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
                iso(r["ts"]),
                r["kind"],
                first_line(text),
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
    times, base = clock.shown_times(table, paths=sorted({e.path for _, e in chosen}))
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
        if base == "event order":  # no time axis: the row's file may well have a stamp, the logs not two
            basis = base
        out.append(InitiatingEvent(r, e.event_id, e.path, e.line, e.kind, e.role, iso(tc), basis, e.cite))
    return out
