"""Why a verdict is less than certain: a closed vocabulary of reasons, each with a weight.

The rules (``initiators``, ``fr``, ``graph``, ``diagnose``) record what weakens their verdict as
:class:`Note` values — a :class:`Reason` member and the parameters its sentence needs — never as
English. The confidence is computed from the members alone (:func:`lower`, :meth:`Reason.weight`);
the English sentence (:meth:`Note.text`) is rendered only for the output (``Diagnosis.confidence_reasons``,
with the member names in ``Diagnosis.confidence_reason_codes``). Rewording a template cannot change a
score.

A weight is the confidence the reason takes off (``0.95`` is the start; see
``correlator.summary._confidence``). A weight of 0 marks a note that says how the initiating rank was
found without making the verdict weaker (a stall report, the ranks that waited for it).
"""

from __future__ import annotations

import enum
import string
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


class Reason(enum.Enum):
    """The closed vocabulary of confidence reasons. Each member is ``(weight, template, description)``:
    ``weight`` in [0, 1] is taken off the confidence, ``template`` is the English sentence with named
    ``str.format`` fields (:meth:`fields`), ``description`` (the member's ``__doc__``) says when a rule
    records it."""

    weight: float
    template: str
    description: str

    def __init__(self, weight: float, template: str, description: str) -> None:
        self.weight = weight
        self.template = template
        self.description = description
        self.__doc__ = description

    # -- how the initiating rank was found (the rules of correlator.initiators)
    EVEN_SPLIT = (
        0.3,
        "the ranks disagree evenly on the collective; no single odd one out",
        "Collective signatures differ but no side is a majority: the odd one out is a guess.",
    )
    CALL_SITE_ONLY = (
        0.15,
        "read from the tracebacks' calls into torch.distributed (no DETAIL): {odd}; the others {op} at {site}",
        "Without DETAIL: the ranks' tracebacks entered different collectives; the minority call site is odd.",
    )
    STACKS = (
        0.15,
        "read from the ranks' stack dumps: where each rank stood, not why it stayed there",
        "The initiator is the odd one out of every rank's stack dump (py-spy, faulthandler): where it stood.",
    )
    STACKS_NO_STALL = (
        0.15,
        "the logs do not show that the job had stopped advancing when the stacks were dumped",
        "Stack dumps name a rank, but no progress line says the job was stalled (it may be a snapshot of a running job).",
    )
    STACKS_INCOMPLETE = (
        0.15,
        "ranks {ranks} left no stack dump",
        "Stack dumps name a rank, but some ranks of the job have no dump (one of them may be the culprit).",
    )
    RAS_NAMED = (
        0.2,
        "named by {source} only ({state}); no log line of its own says what happened to it",
        "NCCL RAS / Inspector name the rank (dead, missing, behind) where the logs name no one: what, not why.",
    )
    RAS_DISAGREES = (
        0.15,
        "{text}",
        "NCCL RAS / Inspector and the logs disagree (RAS healthy while ranks timed out, or other ranks named).",
    )
    DISOWNED_BY_ALL = (
        0.1,
        "all {n} other ranks say their model differs from rank {peer}'s; rank {peer} is the one that differs",
        "Every rank but one states a disagreement with that one (DDP's check against rank 0): it is odd.",
    )
    CONFIG_LINE = (
        0.1,
        "the odd rank was found from its own configuration line, not from the collective itself",
        "A collective mismatch whose odd rank was found only by the configuration line it printed.",
    )
    COMMON_MODE = (
        0.05,
        "{n} ranks failed the same way at about the same time (common mode)",
        "Half the ranks or more raised the same exception together: a shared cause, not one initiator.",
    )
    INDEPENDENT_FAILURES = (
        0.15,
        "{n} ranks failed independently before any other rank reacted",
        "Several ranks have their own cause before the first reaction: all are named, none is first.",
    )
    EXIT_STATUS_ONLY = (
        0.15,
        "the initiating rank logged no error text, only an exit status",
        "The initiator is known only from a launcher's exit status (no exception, no error line).",
    )
    PEER_HOST_SILENT = (
        0.2,
        "the ranks of {host} stopped logging; they are named because the others lost their connection to it",
        "The others' network errors point at one host whose ranks logged nothing: named by the peers.",
    )
    NETWORK_ERRORS_TIED = (
        0.15,
        "several ranks saw network errors within the clock uncertainty",
        "The first network errors of several ranks lie within one second: which link failed first is open.",
    )
    BARRIER_RANK_MOVED_ON = (
        0.1,
        "the rank named by monitoredBarrier did not wait in the barrier: it ran a different collective",
        "monitoredBarrier named a rank that went on and failed elsewhere: a mismatch, read from the barrier.",
    )
    MINORITY_PROGRESS = (
        0.0,
        "the minority {side} (SeqNum {seq}); it ran a different sequence of collectives",
        "The minority by collective progress (timed out in, or went past, a SeqNum) is named (a note).",
    )
    STALL_REPORT = (
        0.0,
        "named by Horovod's stall report (the ranks that had not submitted the collective)",
        "Horovod's stall report named the initiating ranks (a note).",
    )
    STALL_READY_ELSEWHERE = (
        0.35,
        "the missing ranks were ready in a different collective",
        (
            "The stall report's missing ranks were ready in another collective (a mismatch). The weight is "
            "the one the former text match gave it (its sentence holds the word 'missing')."
        ),
    )
    BLAMED_BY_THE_OTHERS = (
        0.3,
        (
            "every other rank seen ({n}) says rank {peer}'s process or connection went away ({what}); nothing "
            "else says why"
        ),
        (
            "No rank reported a fault of its own, but every other rank's lines say one peer went away (NCCL's "
            "'Connection closed by localRank N', a closed gloo connection): that peer is named from their claims."
        ),
    )
    NAMED_BY_WAITERS = (
        0.0,
        "named by {n} waiting rank(s) ({voters}); it logged no error",
        "The ranks that waited name the rank they waited for; it reported no error (a note).",
    )
    FOUND_BY_SILENCE = (
        0.2,
        "the initiating rank logged no error; it was found by its silence",
        "The initiator is the rank that said nothing while the others timed out.",
    )
    UNNAMED_SIGKILL = (
        0.0,
        (
            "the launcher reports a worker killed by SIGKILL without naming it; the one silent rank is taken "
            "to be that worker"
        ),
        "A launcher's unnamed SIGKILL is attributed to the one silent rank (a note).",
    )
    LAGGING_SEQ = (
        0.15,
        "found by its lagging sequence number, not by an error",
        "The initiator is the rank behind on the collective sequence; it reported no error.",
    )
    INITIATOR_LEFT_NO_LOG = (
        0.35,
        "the initiating rank left no log at all; it is named because it is missing",
        "The initiator is a rank of the world with no log: named by its absence alone.",
    )
    ABSENT_FROM_EXCERPT = (
        0.0,
        (
            "the initiating rank is absent from the excerpt while the others report waiting; the excerpt "
            "may lack ranks"
        ),
        "In an excerpt without a world size, the rank missing from a block of timeouts is named (a note).",
    )
    RANK0_LIKELY = (
        0.0,
        "rank 0 is the likely one: {why}",
        "Rank 0, absent from the excerpt, is named for the stated reason ``why`` (a note).",
    )
    RANK0_PREFERRED = (
        0.0,
        "rank 0 preferred among the candidates: {why}",
        "Among several silent or absent candidates rank 0 is chosen for the stated reason ``why`` (a note).",
    )
    ODD_RANK_UNDETERMINED = (
        0.35,
        (
            "a collective mismatch was detected but the odd rank could not be determined; the silent ranks "
            "are only suspects"
        ),
        "A mismatch error was logged but no rule found the odd rank: the silent ranks are named instead.",
    )
    STOPPED_WHILE_HUNG = (
        0.6,
        "the job was stopped from outside after every rank had stopped advancing; no log line names the rank",
        "A job stopped from outside (SIGTERM/SIGINT to the launcher) after a silent hang: ``unknown``, no rank.",
    )
    STOPPED_FROM_OUTSIDE = (
        0.3,
        "the job was stopped from outside (SIGTERM/SIGINT to the launcher) while it ran; it may have been about to fail",
        "No rank failed and the ranks advanced until the launcher was stopped from outside: ``none``.",
    )
    NONE_EXPLAINS = (
        0.5,
        "ranks report faults but none explains the others",
        "Faults were found but no rule names an initiating rank (failure kind ``unknown``).",
    )
    NO_RANK_NAMED = (
        0.6,
        "the fault is on lines that name no rank; the initiating rank is unknown",
        "The fault lines carry no rank (an excerpt without prefixes): the fault is named, not the rank.",
    )
    # -- Flight Recorder (correlator.fr)
    NO_FR_DUMP = (
        0.05,
        "{who} left no Flight Recorder dump; where {it} stopped is unknown",
        "Ranks of the process group left no Flight Recorder dump (``it``: 'it' or 'they').",
    )
    FR_ALSO_NEVER_REACHED = (
        0.0,
        "{who} never reached pg {pg} seq {seq} either",
        "Besides the odd ranks, some ranks never reached the (pg, seq) in their dumps (a note).",
    )
    FR_SINGLE_MAJORITY = (
        0.2,
        "the Flight Recorder majority is a single rank",
        "The Flight Recorder majority the others are compared with is one rank.",
    )
    # -- the whole job (correlator.graph, correlator.diagnose)
    MISSING_LOGS = (
        0.05,
        "{missing} of {world} ranks left no log",
        "Ranks of the world left no log; none of them is an initiator.",
    )
    NO_LAUNCHER = (
        0.05,
        "no launcher output to confirm exit statuses",
        (
            "No launcher lines (torchelastic's, nor an exit report of srun, mpirun, DeepSpeed or "
            "Lightning, parsers.EXIT_REPORT_RULES): exit statuses and signals are unconfirmed."
        ),
    )
    IDENTITY_INFERRED = (
        0.1,
        "the initiating rank's identity is inferred (pid order / message text), not stated",
        "Every line of the initiator got its rank from pid order or message text, none from a prefix.",
    )
    CLOCKS_UNALIGNED = (
        0.1,
        "host clocks could not be aligned; ordering across hosts is uncertain",
        "A first-fault verdict across hosts whose clock offsets are uncertain by more than 5 s.",
    )
    LATER_ATTEMPTS_FAILED = (
        0.05,
        "{n} later attempt(s) also failed; the verdict is the first failed attempt's",
        "The job restarted and later attempts failed too; the top-level verdict is the first one's.",
    )

    NOTHING_RECOGNISED = (
        0.75,
        (
            "no line of these logs is one rankscope knows (no rank, no launcher, no distributed-training line)"
            "{fault}"
        ),
        (
            "Nothing in the input was recognised and no line names a rank next to a failure word: the verdict only "
            "says whether any line reads as a failure."
        ),
    )
    LAST_RESORT = (
        0.65,
        "no rule recognises this log; the rank is read from the words of one failure line that names it",
        "No parser recognised a fault; correlator.lastresort read the rank from a failure line's words.",
    )

    def fields(self) -> list[str]:
        """The named fields of :attr:`template`, in order."""
        return [f for _, f, _, _ in string.Formatter().parse(self.template) if f]

    def note(self, **params: Any) -> Note:
        """This reason with its parameters. Raises ``ValueError`` when ``params`` are not the template's
        fields."""
        if set(params) != set(self.fields()):
            raise ValueError(f"{self.name} takes {self.fields()}, got {sorted(params)}")
        return Note(self, params)


@dataclass(frozen=True)
class Note:
    """One recorded reason: the member and the values its sentence names."""

    reason: Reason
    params: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """The English sentence (output only; the confidence never reads it)."""
        return self.reason.template.format(**self.params)

    def to_dict(self) -> dict[str, Any]:
        """The note as JSON values: ``{"code": member name, "weight": its weight, "text": the sentence}``."""
        return {"code": self.reason.name, "weight": self.reason.weight, "text": self.text()}


def lower(base: float, notes: Iterable[Note]) -> float:
    """``base`` less the weight of each note's reason (unclamped, unrounded)."""
    for n in notes:
        base -= n.reason.weight
    return base


def texts(notes: Iterable[Note]) -> list[str]:
    """The English sentences of ``notes``, in order."""
    return [n.text() for n in notes]


def codes(notes: Iterable[Note]) -> list[str]:
    """The member names of ``notes``, in order (``Diagnosis.confidence_reason_codes``)."""
    return [n.reason.name for n in notes]
