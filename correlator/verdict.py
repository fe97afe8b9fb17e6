"""The verdict's closed vocabularies (failure kinds, how the initiator was found, rank status, edge kinds, fault
roles, why a line is quoted) and its frozen records (:class:`Diagnosis` with its :class:`Evidence`,
:class:`InitiatingEvent` and :class:`RankStatus` rows).

Every member is a :class:`enum.StrEnum` whose value is the string the JSON contract has always carried
(``failure_kind``, ``initiator_basis``, ``per_rank[].status``, a graph edge's ``edge``, a fault row's
``role``), so the output is unchanged while the code compares members, never English text. The rules
(:mod:`correlator.initiators`, :mod:`correlator.graph`) produce members; the reports (:mod:`correlator.diagnose`,
``plot``, ``perfetto``) read them.

This module imports nothing of the project: every layer may use it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "FAILURE_KINDS",
    "SCHEMA_VERSION",
    "Basis",
    "Cite",
    "Diagnosis",
    "EdgeKind",
    "Evidence",
    "Explanation",
    "FailureKind",
    "InitiatingEvent",
    "RankStatus",
    "Role",
    "Status",
    "iso",
]


class FailureKind(StrEnum):
    """What went wrong, as the verdict's ``failure_kind`` says it."""

    RANK_CRASH = "rank_crash"  #: a rank's own exception or a crash (segfault, bus error, abort)
    STRAGGLER_HANG = (
        "straggler_hang"  #: a rank stopped advancing (stuck, slow, or silent) while others waited
    )
    COLLECTIVE_MISMATCH = "collective_mismatch"  #: ranks ran different collectives, sizes or sequences
    NETWORK_ERROR = "network_error"  #: a link or a peer host went away
    OOM_KILL = "oom_kill"  #: SIGKILL from outside (the host OOM killer, as a rule)
    CUDA_OOM = "cuda_oom"  #: CUDA out of memory
    CUDA_ERROR = "cuda_error"  #: another CUDA / device error (illegal access, Xid, ECC)
    EARLY_EXIT = "early_exit"  #: a rank exited 0 while the others still waited in a collective
    LAUNCHER_ERROR = "launcher_error"  #: the launcher, the store or the scheduler failed, no rank did
    NONE = "none"  #: no failure found
    UNKNOWN = "unknown"  #: ranks report faults that explain nothing, or none could be attributed


#: The failure kinds in their documented order (the JSON vocabulary, ``rankscope eval`` labels).
FAILURE_KINDS: tuple[str, ...] = tuple(k.value for k in FailureKind)


class Basis(StrEnum):
    """How the initiating rank was found: the rule of :mod:`correlator.initiators` that named it (or why none
    was). The value is the verdict's ``initiator_basis`` text; :meth:`text` fills in the host of
    :attr:`PEER_HOST`."""

    FLIGHT_RECORDER = "Flight Recorder"
    ODD_ONE_OUT = "odd one out"
    ODD_CALL_SITE = "odd one out by call site"
    DISOWNED = "disowned by all the others"
    STACKS = "stack dumps"
    RAS = "named by NCCL RAS / Inspector"
    STOPPED = "stopped from outside"
    FIRST_FAULT = "first fault"
    COMMON_MODE = "common mode"
    EXIT_STATUS = "exit status"
    PEER_HOST = "peer host unreachable"
    FIRST_NETWORK_ERROR = "first network error"
    STALL_REPORT = "named by the stall report"
    BARRIER_NAMED = "named by monitoredBarrier"
    NAMED_BY_WAITERS = "named by the ranks waiting for it"
    BLAMED = "blamed by the others"
    SILENT = "silent while the others failed"
    BEHIND = "behind on the collective sequence"
    NO_LOG = "left no log"
    ABSENT = "absent from the excerpt"
    LAUNCHER = "launcher"
    NO_RANK = "fault without a rank"
    LAST_RESORT = "named in an unrecognised failure line"
    NOTHING_RECOGNISED = "nothing recognised"
    NOBODY = ""

    def text(self, host: str | None = None) -> str:
        """The ``initiator_basis`` text: the value, with the host for :attr:`PEER_HOST`
        (``peer host node-b unreachable``)."""
        if self is Basis.PEER_HOST and host:
            return f"peer host {host} unreachable"
        return self.value

    @property
    def is_silence(self) -> bool:
        """Found by what a rank did *not* say (silence, lag, a missing log, a barrier it never reached, a host
        that stopped logging): its last sign of life is the evidence."""
        return self in (Basis.SILENT, Basis.BEHIND, Basis.BARRIER_NAMED, Basis.PEER_HOST)

    @property
    def names_its_own_fault(self) -> bool:
        """The initiator's own fault line says what went wrong (the verdict quotes it)."""
        return self in (Basis.FIRST_FAULT, Basis.COMMON_MODE, Basis.EXIT_STATUS)


class Status(StrEnum):
    """A rank's part in the failure (``per_rank[].status``)."""

    INITIATING = "initiating"
    COLLATERAL = "collateral"
    UNEXPLAINED = "unexplained"
    CLEAN = "clean"
    MISSING = "missing"


class EdgeKind(StrEnum):
    """Why a collateral rank failed, as an edge of the causal graph (collateral -> initiator)."""

    WAITS_FOR = "waits_for"  #: it timed out or waited in a collective the initiator never joined
    PEER_ERROR = "peer_error"  #: it lost its connection to the initiator, or got its error
    KILLED_BY = "killed_by"  #: the launcher tore it down because the initiator failed
    EXITED_BEFORE = "exited_before"  #: the initiator exited first and the rank failed after
    MISMATCH = "mismatch"  #: it ran the majority's collective while the initiator ran another


class Role(StrEnum):
    """A fault row's role (:func:`correlator.faults.fault_rows`)."""

    CAUSE = "cause"  #: exceptions, CUDA errors, SIGKILL: trouble of the rank's own
    EFFECT = "effect"  #: timeouts, closed connections, SIGTERM by the agent: usually another rank's doing
    EXIT = "exit"  #: an exit status with no signal or text
    WEAK = "weak"  #: a bare warning: trouble only when something else failed too


class Cite(StrEnum):
    """Why the verdict quotes an evidence line (``Evidence.cite``, ``InitiatingEvent.cite``); the line's
    ``role`` text is written from it and never read back."""

    INITIATING_FAULT = "initiating fault"  #: the initiating rank's own fault line
    POINTS_AT = "points at"  #: another rank's line that shows the initiator's fault
    LAST_SIGN_OF_LIFE = "last sign of life"  #: a rank found by its silence: its last line
    RULE = "rule"  #: the line the naming rule read (a disagreement, a claim, a stack dump)
    NO_RANK = "fault (no rank named)"  #: a fault line while no rank could be named
    LAUNCHER = "launcher"  #: the launcher's view of an initiating rank (its exit status)
    COLLATERAL = "collateral"  #: one line per kind of edge that explains a collateral rank
    REPORT = "report"  #: an NCCL RAS / Inspector report row (after the logs' own evidence)


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
    ``stamp below`` (an upper bound), ``event order`` with no ``ts`` (the logs carry fewer than two distinct
    stamps: no time is worth stating), or ``None`` with no ``ts`` (its file has no stamp)."""

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
    #: verdict no rule made): what ``graph`` and ``plot`` draw. Not part of the JSON contract. A
    #: :class:`correlator.graph.Findings`, typed ``Any`` here: this module imports nothing of the project.
    findings: Any = field(default=None, repr=False, compare=False)

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


def iso(ts: Any) -> str | None:
    """A time as the records state it: ISO 8601 UTC with microseconds when there are any (``None`` stays
    ``None``; a value that is no datetime is written as ``str``)."""
    if ts is None:
        return None
    if isinstance(ts, dt.datetime):
        return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")
    return str(ts)
