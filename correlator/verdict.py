"""The verdict's closed vocabularies: failure kinds, how the initiator was found, rank status, edge kinds, fault roles.

Every member is a :class:`enum.StrEnum` whose value is the string the JSON contract has always carried
(``failure_kind``, ``initiator_basis``, ``per_rank[].status``, a graph edge's ``edge``, a fault row's
``role``), so the output is unchanged while the code compares members, never English text. The rules
(:mod:`correlator.initiators`, :mod:`correlator.graph`) produce members; the reports (:mod:`correlator.diagnose`,
``plot``, ``perfetto``) read them.

This module imports nothing of the project: every layer may use it.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FAILURE_KINDS", "Basis", "Cite", "EdgeKind", "FailureKind", "Role", "Status"]


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
