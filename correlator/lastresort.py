"""The last-resort reading of a log no parser recognised: a rank named next to a failure word.

A log from a launcher or framework rankscope was not taught (PaddlePaddle's ``paddle.distributed.launch``:
``ABORT!!! Out of all 4 trainers, the trainer process with rank=[3] was aborted``; a home-grown launcher's
``worker 5 died with signal 9``) holds no line any parser turns into a fault, yet a person reading it knows
the answer. Such input used to be refused (exit 2, "no distributed-training log lines recognised").

:func:`read` looks in every line for a *failure word* (abort, fail, error, exception, killed, died,
crash, timeout, hang, missing, a signal, a non-zero exit) and a *rank mention* (``rank 3``, ``rank=[3]``,
``ranks: 1, 3``, ``Missing ranks: 1, 3``, ``trainer 3``, ``worker 3``, ``process 3``, ``local_rank 3``).
The first such line (by time where lines carry stamps, else by file and line) names the initiating
rank(s): the ranks it mentions, less the rank that printed it when it names others. The verdict says
plainly that it is a reading of words, at low confidence (:attr:`correlator.confidence.Reason.LAST_RESORT`).

Input with no failure word next to a rank is not refused either (:func:`unrecognised`): the first line with a
failure word is quoted in an ``unknown`` verdict that names no rank; text with no failure word at all gives
``none``. Both at confidence 0.2 or less (:attr:`correlator.confidence.Reason.NOTHING_RECOGNISED`). Only input
with no text at all is refused (``correlator.api.check_recognised``).
"""

from __future__ import annotations

import re

import polars as pl

from correlator import confidence, limits
from correlator.verdict import Basis, Cite, Diagnosis, Evidence, InitiatingEvent, RankStatus

__all__ = ["read", "unrecognised"]

#: A failure word. Case-insensitive, whole words.
FAILURE_RE = (
    r"(?i)\b(?:abort(?:ed|ing)?|ABORT!+|fail(?:s|ed|ure)?|errors?|exception|killed|died|dead|crash(?:ed)?"
    r"|timed?[ -]?out|timeout|hang(?:s|ing)?|hung|stuck|missing|segmentation fault|segfault"
    r"|sig(?:kill|segv|abrt|bus|term|ill|fpe)|signal \d+|exit(?:ed)?(?: with)? (?:code|status):? ?-?[1-9]\d*)"
)
#: A rank mention: the word, then one number or a list (``rank=[3]``, ``ranks: 1, 3``, ``trainer 3``).
_MENTION = re.compile(
    r"(?i)\b(?P<word>local_rank|ranks?|trainers?|workers?|process(?:es)?)\s*(?:=|:|#|\bno\.?)?\s*"
    r"\[?\s*(?P<nums>\d{1,7}(?:\s*,\s*\d{1,7})*)\s*\]?"
)
#: Hang words: the named rank stopped rather than crashed.
_HANG_RE = re.compile(r"(?i)\b(?:timed?[ -]?out|timeout|hang(?:s|ing)?|hung|stuck|missing)\b")
#: ``process`` / ``worker`` numbers above this are pids, not ranks.
_MAX_PROCESS_NUMBER = 4096


def _mentioned(text: str, cap: int) -> list[int]:
    """The ranks ``text`` mentions, in order, without repeats (numbers past ``cap`` are not ranks)."""
    out: list[int] = []
    for m in _MENTION.finditer(text):
        word = m.group("word").lower()
        top = cap if word.startswith(("rank", "local_rank", "trainer")) else min(cap, _MAX_PROCESS_NUMBER)
        for n in re.findall(r"\d+", m.group("nums")):
            r = int(n)
            if r < top and r not in out:
                out.append(r)
    return out


def read(table: pl.DataFrame) -> Diagnosis | None:
    """A low-confidence verdict from the first line that names a rank next to a failure word, or None
    when no line does. ``table``: the event table (columns ``event_id``, ``path``, ``line``, ``rank``,
    ``ts``, ``kind``, ``raw``, ``attempt``)."""
    if table.is_empty():
        return None
    hits = (
        table.lazy()
        .filter(pl.col("raw").str.contains(FAILURE_RE) & pl.col("raw").str.contains(_MENTION.pattern))
        .sort(["ts", "path", "line"], nulls_last=True)
        .select("event_id", "path", "line", "rank", "ts", "kind", "raw", "attempt")
        .head(1000)
        .collect()
    )
    cap = limits.current().max_world
    for row in hits.iter_rows(named=True):
        named = _mentioned(str(row["raw"]), cap)
        speaker = row["rank"]
        if speaker is not None and any(r != speaker for r in named):
            named = [r for r in named if r != speaker]
        if named:
            return _verdict(row, sorted(named))
    return None


def _verdict(row: dict[str, object], ranks: list[int]) -> Diagnosis:
    text = str(row["raw"]).strip()
    kind = "straggler_hang" if _HANG_RE.search(text) else "rank_crash"
    ts = row["ts"].isoformat() if hasattr(row["ts"], "isoformat") else None  # type: ignore[union-attr]
    where = f"{row['path']}:{row['line']}"
    note = confidence.Reason.LAST_RESORT.note()
    ev = [
        Evidence(
            rank=r,
            path=str(row["path"]),
            line=int(row["line"]),  # type: ignore[call-overload]
            ts=ts,
            kind=str(row["kind"]),
            text=text[:300],
            role="initiating fault",
            event_id=int(row["event_id"]),  # type: ignore[call-overload]
            cite=Cite.INITIATING_FAULT,
        )
        for r in ranks
    ]
    who = f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
    return Diagnosis(
        world_size=None,
        ranks_seen=ranks,
        attempt=int(row["attempt"] or 0),  # type: ignore[call-overload]
        initiating_ranks=ranks,
        collateral_ranks=[],
        clean_ranks=[],
        missing_ranks=[],
        failure_kind=kind,
        confidence=round(max(0.05, confidence.lower(0.95, [note]) - 0.1 * (len(ranks) - 1)), 2),
        summary=f"{who} named in a failure line no rule recognises ({where}): {text[:160]}",
        evidence=ev,
        initiating_events=[
            InitiatingEvent(
                r, e.event_id or 0, e.path, e.line, e.kind, e.role, ts, "stamp" if ts else None, e.cite
            )
            for r, e in zip(ranks, ev, strict=True)
        ],
        per_rank=[RankStatus(r, None, None, "initiating") for r in ranks],
        confidence_reasons=confidence.texts([note]),
        confidence_reason_codes=confidence.codes([note]),
        initiator_basis=Basis.LAST_RESORT,
    )


def unrecognised(table: pl.DataFrame) -> Diagnosis:
    """The verdict for text nothing recognised and :func:`read` could not name a rank in: ``unknown`` (no
    rank named) quoting the first line with a failure word, or ``none`` when no line has one. ``table`` as
    for :func:`read`."""
    hits = (
        table.lazy()
        .filter(pl.col("raw").str.contains(FAILURE_RE))
        .sort(["ts", "path", "line"], nulls_last=True)
        .select("event_id", "path", "line", "rank", "ts", "kind", "raw", "attempt")
        .head(1)
        .collect()
    )
    row = hits.row(0, named=True) if hits.height else None
    text = str(row["raw"]).strip() if row else ""
    where = f"{row['path']}:{row['line']}" if row else ""
    note = confidence.Reason.NOTHING_RECOGNISED.note(
        fault=f"; {where} reads as a failure but names no rank" if row else "; no line reads as a failure"
    )
    ts = row["ts"].isoformat() if row and hasattr(row["ts"], "isoformat") else None
    ev = (
        [
            Evidence(
                rank=row["rank"],
                path=str(row["path"]),
                line=int(row["line"]),
                ts=ts,
                kind=str(row["kind"]),
                text=text[:300],
                role=Cite.NO_RANK.value,
                event_id=int(row["event_id"]),
                cite=Cite.NO_RANK,
            )
        ]
        if row
        else []
    )
    return Diagnosis(
        world_size=None,
        ranks_seen=[],
        attempt=int(row["attempt"] or 0) if row else 0,
        initiating_ranks=[],
        collateral_ranks=[],
        clean_ranks=[],
        missing_ranks=[],
        failure_kind="unknown" if row else "none",
        confidence=round(confidence.lower(0.95, [note]), 2),
        summary=(
            f"a failure with no rank named ({where}): {text[:160]}; no line is one rankscope recognises"
            if row
            else "no failure found, and no line is one rankscope recognises (no rank, no launcher output)"
        ),
        evidence=ev,
        confidence_reasons=confidence.texts([note]),
        confidence_reason_codes=confidence.codes([note]),
        initiator_basis=Basis.NOTHING_RECOGNISED,
    )
