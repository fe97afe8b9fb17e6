"""Diagnosis: the verdict on the job from its event table, in three steps that each read what the one
before wrote.

1. :func:`correlator.faults.failing_attempts`, then :func:`correlator.graph.analyze` of each: the causal
   analysis of each failing attempt (who started it, the edge that explains every other faulty rank, the
   reasons that lower confidence) as frozen records.
2. :func:`correlator.quotes.gather`: the rows the verdict quotes (evidence lines, the initiating events with
   their one shown time, the rows the summary names).
3. :func:`correlator.summary.job_verdict`: the :class:`~correlator.verdict.Diagnosis` read off those records.

``diagnose(table)`` is a pure function of the event table. With several torchelastic attempts each failing
attempt is diagnosed (``Diagnosis.attempts``); the top-level verdict is the first failing attempt's, because
later attempts usually fail only as a consequence (a restart reading the dead attempt's stale store addresses).
The records (:class:`Diagnosis`, :class:`Evidence`, …) live in :mod:`correlator.verdict`.
"""

from __future__ import annotations

import polars as pl

from correlator.faults import failing_attempts
from correlator.graph import analyze
from correlator.quotes import gather
from correlator.summary import job_verdict
from correlator.verdict import SCHEMA_VERSION, Diagnosis, Evidence, Explanation, InitiatingEvent, RankStatus

__all__ = [
    "SCHEMA_VERSION",
    "Diagnosis",
    "Evidence",
    "Explanation",
    "InitiatingEvent",
    "RankStatus",
    "diagnose",
]


def diagnose(table: pl.DataFrame, attempt: int | None = None) -> Diagnosis:
    """Diagnose the job: every failing attempt, with the first one's verdict on top.

    ``table`` is the event table (``correlator.load``). ``attempt`` selects one attempt's verdict for the
    top level instead of the first failing one. Never raises on an empty table (the verdict is ``none``).
    """
    failed = failing_attempts(table)
    # every failing attempt; the one asked for alone when it has no fault; the first when none failed
    attempts = failed if failed and (attempt is None or attempt in failed) else [attempt]
    found = [analyze(table, a) for a in attempts]
    quoted = [gather(table, F) for F in found]
    return job_verdict(found, quoted, attempt)
