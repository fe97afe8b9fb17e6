"""The event table: one row per input log line or multi-line record, from every rank.

This module is the single definition of the table every other step reads. ``POLARS_SCHEMA`` holds the
column types, ``EVENT_SCHEMA`` the same as an Arrow schema (built on first use); ``COLUMN_DOCS`` documents each column (type, unit, meaning); ``Kind`` is the closed
vocabulary of the ``kind`` column. The table is written as-is by ``rankscope timeline -o x.parquet``.

Line accounting: every physical input line belongs to exactly one row. ``line`` is the 1-based number
of the first physical line of the row in ``path`` and ``line_count`` the number of physical lines it
covers, so ``sum(line_count)`` over the rows of a file equals the file's line count. A physical line
that holds output of two ranks (torchrun's tee can glue a torn line to another rank's line) is split
into several rows; the extra rows have ``line_count`` 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, ClassVar

import polars as pl

if TYPE_CHECKING:
    import pyarrow as pa

from correlator import verdict


class Layer(StrEnum):
    """Which producer wrote the line."""

    NCCL = "nccl"  #: NCCL_DEBUG output (``host:pid:tid [dev] NCCL INFO|WARN``)
    C10D = "c10d"  #: PyTorch C++ (c10 logging / glog): ProcessGroupNCCL, ProcessGroupGloo, TCPStore, DDP
    ELASTIC = "elastic"  #: torchrun / torchelastic agent and its error.json files
    PYTHON = "python"  #: Python tracebacks and exceptions
    APP = "app"  #: the training script's own logging (progress, steps)
    SYSTEM = "system"  #: kernel, scheduler and launcher-transport lines (Killed, Xid, srun, slurmstepd)
    FR = "fr"  #: PyTorch Flight Recorder dumps (pickle or JSON, one per rank): entries and pg_status, not lines
    STACK = (
        "stack"  #: stack dumps of live processes: ``py-spy dump``, Python ``faulthandler`` (parsers.stack)
    )
    UNKNOWN = "unknown"  #: no rule recognized the line


class Severity(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    FATAL = "fatal"
    UNKNOWN = "unknown"


class TsQuality(StrEnum):
    """How much of ``ts`` was written in the line itself."""

    EXACT = "exact"  #: full date and time zone in the line (kubectl ``Z`` stamps, epoch seconds)
    NO_TZ = "no_tz"  #: full date, no zone: taken as UTC unless ``--tz`` says otherwise
    NO_YEAR = "no_year"  #: month/day only (c10, glog < 0.6, torch._logging): year inferred from the directory
    INHERITED = "inherited"  #: no stamp: the previous stamp of the same stream
    MISSING = "missing"  #: no stamp and nothing before it in the stream


#: The verdict's closed vocabulary of failure kinds (``Diagnosis.failure_kind``; signatures and corpus
#: labels use the same names).
#: The failure kinds (``correlator.verdict.FailureKind``, the one definition).
FAILURE_KINDS = verdict.FAILURE_KINDS


class Kind(StrEnum):
    """Closed vocabulary of event kinds (the ``kind`` column).

    Fault kinds are listed in ``FAULT_KINDS``; of those, ``EFFECT_KINDS`` are usually consequences of
    another rank's fault (timeouts, closed connections, teardown) rather than causes.
    """

    # -- structure and noise
    BLANK = "blank"  #: an empty line
    UNPARSED = "unparsed"  #: no rule understood the line ("lines not understood" in summaries)
    LOG = "log"  #: a recognized log prefix with no message rule of interest (ordinary INFO output)
    # -- application
    STEP_PROGRESS = (
        "step_progress"  #: a training-progress line that names the step (``step=5``, ``iteration 5``)
    )
    PROGRESS_BAR = (
        "progress_bar"  #: an unfinished tqdm bar (``Map:  70%|███  | 7/10 [29:58<12:05, …]``); elapsed_ms
    )
    # -- NCCL (NCCL_DEBUG)
    NCCL_VERSION = "nccl_version"  #: ``NCCL version 2.x.y+cudaA.B``
    NCCL_INIT = "nccl_init"  #: ``comm 0x… rank R nranks N cudaDev D … - Init START|COMPLETE``
    NCCL_COLL = "nccl_coll"  #: ``AllReduce: opCount N … comm 0x… [nranks=N]`` (NCCL_DEBUG_SUBSYS=COLL)
    NCCL_ABORT = "nccl_abort"  #: ``comm 0x… rank R … - Abort COMPLETE`` / ``Destroy COMPLETE``
    NCCL_PEER_CLOSED = "nccl_peer_closed"  #: ``[Service thread] Connection closed by localRank N`` (INFO); ``peer_rank`` = N, LOCAL
    NCCL_NET_ERROR = (
        "nccl_net_error"  #: WARN naming a peer: NET/IB completion error, socket recv/close failures
    )
    NCCL_WARN = "nccl_warn"  #: any other NCCL WARN line
    # -- c10d / ProcessGroupNCCL / ProcessGroupGloo / TORCH_DISTRIBUTED_DEBUG
    COLLECTIVE_FINGERPRINT = (
        "collective_fingerprint"  #: DETAIL ``Running collective: CollectiveFingerPrint(…)``
    )
    WATCHDOG_TIMEOUT = (
        "watchdog_timeout"  #: ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…)``
    )
    WATCHDOG_STATUS = (
        "watchdog_status"  #: ``Timeout at NCCL work: N, last enqueued … last completed …`` (all eras)
    )
    WATCHDOG_TEARDOWN = "watchdog_teardown"  #: "taking the entire process down", "watchdog thread terminated"
    HEARTBEAT_TIMEOUT = (
        "heartbeat_timeout"  #: dump-signal lines: a collective timeout seen here or on another rank
    )
    WATCHDOG_HANG = (
        "watchdog_hang"  #: "Heartbeat monitor timed out", "watchdog got stuck": a CUDA/NCCL call hung HERE
    )
    ASYNC_ERROR = "async_error"  #: ``Collective WorkNCCL(…) raised the following async exception``
    COLLECTIVE_MISMATCH = "collective_mismatch"  #: ``Detected mismatch between collectives on ranks``
    MONITORED_BARRIER_FAILED = (
        "monitored_barrier_failed"  #: ``Ranks X failed to pass monitoredBarrier`` (names X)
    )
    MONITORED_BARRIER_PEER = "monitored_barrier_peer"  #: non-zero ranks: "check rank 0 logs for faulty rank"
    DDP_ERROR = "ddp_error"  #: DDP reducer errors (unused parameters, inconsistent params across ranks)
    GLOO_CONNECTION_CLOSED = (
        "gloo_connection_closed"  #: gloo ``Connection closed by peer [ip]:port`` / read errors
    )
    GLOO_TIMEOUT = "gloo_timeout"  #: gloo ``Timed out waiting Nms for recv/send operation to complete``
    STORE_ERROR = "store_error"  #: TCPStore / rendezvous: socket timeouts, connect failures, ``wait timeout``
    NCCL_ERROR = "nccl_error"  #: PyTorch-reported NCCL error (``NCCL error in: …``, ``DistBackendError``)
    # -- Horovod
    STALL_READY = "stall_ready"  #: Horovod stall report: rank ``peer_rank`` HAS submitted collective ``pg`` (``[ready ranks: …]``)
    PEER_SHUTDOWN = (
        "peer_shutdown"  #: Horovod "has been shut down … caused by an exception on one of the ranks" (effect)
    )
    STALL_MISSING = "stall_missing"  #: Horovod stall report: rank ``peer_rank`` has NOT submitted ``pg`` (``[missing ranks: …]``)
    # -- Python
    PYTHON_EXCEPTION = (
        "python_exception"  #: an uncaught exception (traceback record) not covered by a finer kind
    )
    CUDA_OOM = "cuda_oom"  #: ``torch.cuda.OutOfMemoryError`` / ``CUDA out of memory``
    CUDA_ERROR = "cuda_error"  #: ``CUDA error: …``, illegal memory access, NCCL ``Cuda failure``, Xid
    # -- launcher (torchrun / torchelastic)
    WORKER_FAILED = "worker_failed"  #: ``failed (exitcode: N) local_rank: L (pid: P) of binary``
    WORKER_SIGNALLED = (
        "worker_signalled"  #: ``Sending process P closing signal SIGTERM`` (the agent kills a worker)
    )
    FAILURE_ENTRY = (
        "failure_entry"  #: one ``[i]:`` block of the ChildFailedError summary (rank, exit code, pid)
    )
    ROOT_CAUSE_ENTRY = (
        "root_cause_entry"  #: the ``Root Cause (first observed failure)`` block (weak evidence)
    )
    ERROR_FILE = "error_file"  #: a worker's ``error.json`` written by ``@record``
    LAUNCHER_ERROR = (
        "launcher_error"  #: the agent's own failure (ChildFailedError traceback, rendezvous errors)
    )
    RENDEZVOUS = "rendezvous"  #: rendezvous results and worker-group state lines
    RESTART = "restart"  #: ``Worker group FAILED. N/M attempts left; will restart worker group``
    # -- PyTorch Flight Recorder dumps (parsers.flight_recorder, correlator.fr); rows cover no physical line
    #: one FR entry: pg, seq (collective_seq_id / p2p_seq_id), op, numel, shape, dtypes, state, record_id; message
    #: ``<profiling_name> pg P seq S record_id R <sizes> <dtypes> <state> in <top user frame>`` (no frame in JSON dumps)
    FR_COLLECTIVE = "fr_collective"
    FR_STATUS = "fr_status"  #: a dump's ``pg_status`` of one PG: last enqueued / completed seq (seq_enqueued, seq_completed)
    FR_WAITING = (
        "fr_waiting"  #: the same, for a rank left inside a collective (seq = that collective): an effect
    )
    # -- stack dumps of live processes (parsers.stack, correlator.stacks)
    #: one process's stack dump (``py-spy dump``: ``Process P: …`` + its thread blocks; ``faulthandler``: its
    #: ``Current thread … (most recent call first):`` blocks), one row covering all its lines; ``pid``, ``op`` =
    #: the innermost torch.distributed call of its main thread (``ALLREDUCE``, ``BARRIER``; null when none),
    #: ``message`` = where it stands (``in all_reduce at train.py:102: all_reduce (distributed_c10d.py:3252) ← …``)
    STACK_DUMP = "stack_dump"
    # -- NCCL RAS (parsers.ras; a client's report, no rank of its own): ranks_named = the communicator ranks
    #: the block names, peer_addr = the processes (``<node> pid <pid>``), pg = the communicator hash
    RAS_DEAD = "ras_dead"  #: ``DEAD`` block / monitor ``PEER_DEAD``: processes the RAS network considers dead
    RAS_MISSING = "ras_missing"  #: ``#g-c (hash) INCOMPLETE``: ranks missing from a communicator's data
    RAS_MISMATCH = "ras_mismatch"  #: ``#g-c (hash) MISMATCH``: ranks that disagree (status, operation counts; seq = lowest)
    RAS_OK = "ras_ok"  #: a RAS status report whose communicators are all ``OK`` (text table row, JSON with no missing rank)
    #: one NCCL Inspector record (``coll_perf`` / ``p2p_perf``): pg = communicator id, seq = coll_sn, op, ``duration_ms``
    INSPECTOR_OP = "inspector_op"
    # -- system
    PROCESS_KILLED = "process_killed"  #: ``Killed``, OOM killer, ``srun: … task N: Killed|Out Of Memory``
    PROCESS_EXIT = "process_exit"  #: scheduler-reported exit (``srun: error: … Exited with exit code N``)
    JOB_CANCELLED = "job_cancelled"  #: ``slurmstepd: … CANCELLED AT … DUE TO …``

    # -- the kind sets that reduce a table (declared once; set below the class, see correlator.reduce)
    #: kinds routine at volume, reduced by ``correlator.reduce`` (``log`` only when it is NCCL INFO chatter)
    ROUTINE: ClassVar[frozenset[str]]
    #: routine kinds with a sequence number: their last rows per (rank, process group) are kept
    SEQUENCED: ClassVar[frozenset[str]]
    #: routine kinds whose last rows per rank are kept (progress; ``log`` = NCCL INFO chatter)
    TAIL: ClassVar[frozenset[str]]
    #: the kinds a live watcher also reduces in its store (structure and noise: blank and unparsed lines)
    WATCH_ROUTINE: ClassVar[frozenset[str]]

    # -- the kind sets that give a fault row its role (correlator.faults; declared once, set below the class)
    #: a rank's own trouble: exceptions, CUDA errors, SIGKILL, DDP's own errors, a watchdog hang
    CAUSE: ClassVar[frozenset[str]]
    #: a launcher's exit report of a worker (its role follows the exit status and signal)
    EXIT: ClassVar[frozenset[str]]
    #: effects that point at a peer rather than at a collective
    PEER: ClassVar[frozenset[str]]
    #: effects that say the rank itself ran out a timeout (not only that it waited or was torn down)
    TIMED_OUT: ClassVar[frozenset[str]]


#: The words users filter by (``rankscope events --kind WORD``) -> the kinds they cover. A line's words are
#: not always its row's kind: ``NCCL watchdog thread terminated with exception: [Rank 1] Watchdog caught
#: collective operation timeout: …`` is the teardown that follows the timeout (``watchdog_teardown``), so
#: ``watchdog_timeout`` covers the whole timeout report — the timeout line, the status line, the teardown.
#: Any kind name still means that kind (and only it, unless it is an alias here). Words are matched after
#: :func:`kind_word` (case, spaces and hyphens do not matter: ``"Watchdog timeout"``).
KIND_ALIASES: dict[str, frozenset[str]] = {
    "watchdog_timeout": frozenset({Kind.WATCHDOG_TIMEOUT, Kind.WATCHDOG_STATUS, Kind.WATCHDOG_TEARDOWN}),
    "watchdog": frozenset(
        {
            Kind.WATCHDOG_TIMEOUT,
            Kind.WATCHDOG_STATUS,
            Kind.WATCHDOG_TEARDOWN,
            Kind.WATCHDOG_HANG,
            Kind.HEARTBEAT_TIMEOUT,
        }
    ),
    "timeout": frozenset(
        {
            Kind.WATCHDOG_TIMEOUT,
            Kind.WATCHDOG_STATUS,
            Kind.WATCHDOG_TEARDOWN,
            Kind.HEARTBEAT_TIMEOUT,
            Kind.GLOO_TIMEOUT,
        }
    ),
    "oom": frozenset({Kind.CUDA_OOM}),
    "out_of_memory": frozenset({Kind.CUDA_OOM}),
    "exception": frozenset({Kind.PYTHON_EXCEPTION}),
    "traceback": frozenset({Kind.PYTHON_EXCEPTION}),
    "mismatch": frozenset({Kind.COLLECTIVE_MISMATCH}),
    "killed": frozenset({Kind.PROCESS_KILLED, Kind.WORKER_SIGNALLED}),
}


def kind_word(word: str) -> str:
    """A word as typed -> the form kinds and aliases are written in (``"Watchdog timeout"`` ->
    ``watchdog_timeout``)."""
    return "_".join(word.strip().lower().replace("-", " ").split())


def kinds_by_count(counts: Mapping[str, int]) -> dict[str, int]:
    """Rows per kind, most first, kinds of one count by name: the same order whatever order ``counts`` came in
    (a ``group_by``'s groups, the batches of a streamed table), for the summary's ``rows_by_kind``."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def resolve_kinds(words: list[str]) -> tuple[set[str], list[str]]:
    """The kinds ``words`` cover (:data:`KIND_ALIASES`, else the kind of that name) and the words that are
    neither an alias nor a kind."""
    names = {m.value for m in Kind}
    kinds: set[str] = set()
    unknown: list[str] = []
    for w in words:
        k = kind_word(w)
        if k in KIND_ALIASES:
            kinds |= KIND_ALIASES[k]
        elif k in names:
            kinds.add(k)
        else:
            unknown.append(w)
    return kinds, unknown


#: Kinds that mean something went wrong on the rank that logged them.
FAULT_KINDS: frozenset[str] = frozenset(
    {
        Kind.NCCL_NET_ERROR,
        Kind.NCCL_WARN,
        Kind.WATCHDOG_TIMEOUT,
        Kind.WATCHDOG_STATUS,
        Kind.WATCHDOG_TEARDOWN,
        Kind.HEARTBEAT_TIMEOUT,
        Kind.WATCHDOG_HANG,
        Kind.ASYNC_ERROR,
        Kind.COLLECTIVE_MISMATCH,
        Kind.MONITORED_BARRIER_FAILED,
        Kind.MONITORED_BARRIER_PEER,
        Kind.DDP_ERROR,
        Kind.GLOO_CONNECTION_CLOSED,
        Kind.GLOO_TIMEOUT,
        Kind.STORE_ERROR,
        Kind.NCCL_ERROR,
        Kind.PYTHON_EXCEPTION,
        Kind.CUDA_OOM,
        Kind.CUDA_ERROR,
        Kind.WORKER_FAILED,
        Kind.WORKER_SIGNALLED,
        Kind.FAILURE_ENTRY,
        Kind.ERROR_FILE,
        Kind.PROCESS_KILLED,
        Kind.PROCESS_EXIT,
        Kind.JOB_CANCELLED,
        Kind.LAUNCHER_ERROR,
        Kind.PEER_SHUTDOWN,
        Kind.FR_WAITING,
    }
)

#: Fault kinds that are usually the consequence of another rank's failure.
EFFECT_KINDS: frozenset[str] = frozenset(
    {
        Kind.WATCHDOG_TIMEOUT,
        Kind.WATCHDOG_STATUS,
        Kind.WATCHDOG_TEARDOWN,
        Kind.HEARTBEAT_TIMEOUT,
        Kind.ASYNC_ERROR,
        Kind.MONITORED_BARRIER_FAILED,
        Kind.MONITORED_BARRIER_PEER,
        Kind.GLOO_CONNECTION_CLOSED,
        Kind.GLOO_TIMEOUT,
        Kind.STORE_ERROR,
        Kind.NCCL_ERROR,
        Kind.WORKER_SIGNALLED,
        Kind.NCCL_WARN,
        Kind.JOB_CANCELLED,
        Kind.LAUNCHER_ERROR,
        Kind.PEER_SHUTDOWN,
        Kind.FR_WAITING,
    }
)

#: Kinds any program's output can produce (blank lines, lines no rule understood, a generic log prefix,
#: progress lines and bars). Every other kind is a line of a distributed-training tool (NCCL, c10d, gloo,
#: Horovod, a launcher, a Flight Recorder dump) or a fault; input holding none of them, no rank and no
#: launcher line is refused (``correlator.api.check_recognised``).
GENERIC_KINDS: frozenset[str] = frozenset(
    {Kind.BLANK, Kind.UNPARSED, Kind.LOG, Kind.STEP_PROGRESS, Kind.PROGRESS_BAR}
)

Kind.SEQUENCED = frozenset({Kind.NCCL_COLL, Kind.COLLECTIVE_FINGERPRINT})
Kind.TAIL = frozenset({Kind.STEP_PROGRESS, Kind.LOG})
Kind.ROUTINE = Kind.SEQUENCED | Kind.TAIL
Kind.WATCH_ROUTINE = Kind.ROUTINE | {Kind.BLANK, Kind.UNPARSED}
Kind.CAUSE = frozenset(
    {
        Kind.PYTHON_EXCEPTION,
        Kind.CUDA_OOM,
        Kind.CUDA_ERROR,
        Kind.PROCESS_KILLED,
        Kind.DDP_ERROR,
        Kind.WATCHDOG_HANG,
    }
)
Kind.EXIT = frozenset({Kind.WORKER_FAILED, Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY, Kind.PROCESS_EXIT})
Kind.PEER = frozenset(
    {
        Kind.GLOO_CONNECTION_CLOSED,
        Kind.NCCL_NET_ERROR,
        Kind.NCCL_PEER_CLOSED,
        Kind.MONITORED_BARRIER_PEER,
        Kind.STORE_ERROR,
        Kind.NCCL_ERROR,
    }
)
Kind.TIMED_OUT = frozenset(
    {
        Kind.WATCHDOG_TIMEOUT,
        Kind.WATCHDOG_STATUS,
        Kind.GLOO_TIMEOUT,
        Kind.MONITORED_BARRIER_FAILED,
        Kind.HEARTBEAT_TIMEOUT,
    }
)

#: (column, type, documentation). The order is the column order of the table. The types are polars'; the
#: Arrow ones (:data:`EVENT_SCHEMA`) follow from them.
COLUMNS: list[tuple[str, pl.DataType, str]] = [
    ("event_id", pl.Int64(), "Row id, unique in the table; evidence and graph edges refer to it."),
    ("path", pl.String(), "Source file, relative to the directory given to rankscope."),
    (
        "line",
        pl.Int64(),
        (
            "1-based number of the row's first physical line in `path` (a Flight Recorder row: the "
            "entry's position in the dump, then its pg_status rows)."
        ),
    ),
    (
        "line_count",
        pl.Int32(),
        (
            "Physical lines this row covers (0 for the extra parts of a split line and for "
            "Flight Recorder rows: a dump is not read as lines)."
        ),
    ),
    (
        "rank",
        pl.Int32(),
        "Global rank that produced the line; null when unknown (agent lines, unmapped NCCL).",
    ),
    (
        "rank_source",
        pl.String(),
        (
            "How `rank` was resolved: c10d_prefix, excepthook_prefix, tee+offset, path, file_name, "
            "nccl_pid, launcher, pid_order, pid_gap, message, transport_prefix, file, gpu_index (see "
            "correlator/identity.py); pid: a stack dump placed by its pid (correlator/stacks.py)."
        ),
    ),
    ("local_rank", pl.Int32(), "Local rank on its node (torchrun folder name, `[defaultN]:` tee prefix)."),
    ("host", pl.String(), "Short host name (FQDNs are cut at the first dot); null when unknown."),
    ("pid", pl.Int64(), "Process id from the line (NCCL prefix, launcher lines, glog field)."),
    (
        "attempt",
        pl.Int32(),
        "torchelastic restart attempt (`attempt_N` folder, agent restarts); 0 by default.",
    ),
    (
        "stream",
        pl.String(),
        "stdout | stderr | launcher | combined | nccl_file | error_json | syslog | fr_dump | unknown.",
    ),
    (
        "ts",
        pl.Datetime("us", "UTC"),
        (
            "Event time, UTC, microseconds. c10 stamps keep whole seconds only "
            "(their 9 fraction digits come from a monotonic clock, not wall time)."
        ),
    ),
    ("ts_quality", pl.String(), "exact | no_tz | no_year | inherited | missing (see TsQuality)."),
    (
        "layer",
        pl.String(),
        "nccl | c10d | elastic | python | app | system | fr | ras | stack | unknown (see Layer).",
    ),
    ("severity", pl.String(), "debug | info | warning | error | fatal | unknown."),
    ("kind", pl.String(), "Event kind from the closed vocabulary `Kind`."),
    (
        "pg",
        pl.String(),
        (
            "Process group: c10d PG GUID/name (`0` = default PG), NCCL commId / comm pointer, or "
            "`horovod:<tensor>` for a Horovod collective."
        ),
    ),
    (
        "seq",
        pl.Int64(),
        (
            "Collective sequence number: c10d SeqNum (decimal), NCCL opCount (hex in the log) or a "
            "Flight Recorder entry's collective_seq_id (p2p_seq_id for send/recv)."
        ),
    ),
    (
        "seq_enqueued",
        pl.Int64(),
        "Last enqueued work SeqNum from watchdog status lines or a dump's pg_status.",
    ),
    (
        "seq_completed",
        pl.Int64(),
        "Last completed work SeqNum from watchdog status lines or a dump's pg_status.",
    ),
    (
        "op",
        pl.String(),
        (
            "Collective op type, upper case as c10d prints it (ALLREDUCE, BROADCAST, …); for a stack dump "
            "the collective its main thread is in."
        ),
    ),
    ("numel", pl.Int64(), "Number of elements in the collective's input (NumelIn / NCCL count)."),
    (
        "shape",
        pl.String(),
        (
            "Tensor shape from DETAIL fingerprints, e.g. `[32, 16]`; for a Flight Recorder entry "
            "its input sizes (one tensor: `[32, 16]`, several: `[[32], [4]]`)."
        ),
    ),
    (
        "dtypes",
        pl.String(),
        "Input dtypes of a Flight Recorder entry, comma-separated as torch names them (`Float`).",
    ),
    (
        "state",
        pl.String(),
        "Flight Recorder entry state: scheduled | started | completed (gloo: always scheduled).",
    ),
    (
        "record_id",
        pl.Int64(),
        (
            "Flight Recorder entry id within its rank's dump (`record_id`); `line` is its "
            "1-based position in the dump."
        ),
    ),
    (
        "ts_end",
        pl.Datetime("us", "UTC"),
        (
            "End of a Flight Recorder entry (`time_discovered_completed_ns`), "
            "UTC; null when unknown (always for gloo)."
        ),
    ),
    ("timeout_ms", pl.Int64(), "Configured timeout in milliseconds (Timeout(ms)=…, monitoredBarrier, gloo)."),
    (
        "elapsed_ms",
        pl.Int64(),
        "How long the work ran before timing out, milliseconds (a progress bar: its elapsed time).",
    ),
    ("step", pl.Int64(), "Training step / iteration number from progress lines."),
    ("world_size", pl.Int32(), "World size stated by the line (NCCL nranks, torchrun summaries, app lines)."),
    (
        "pg_rank",
        pl.Int32(),
        "The logging rank's rank WITHIN the process group (`[Rank r]`, `[PG … Rank r]`).",
    ),
    (
        "peer_rank",
        pl.Int32(),
        (
            "Rank named by the line as the other side (mismatch, monitoredBarrier, NCCL); in the "
            "numbering of the line's process group."
        ),
    ),
    (
        "ranks_named",
        pl.String(),
        (
            "Every rank a line names as a group, ascending, comma-separated (`1,3`): srun's `tasks 0-3`, "
            "monitoredBarrier's `Ranks 1, 3 failed to pass`. In the numbering of the line (srun: task ids)."
        ),
    ),
    (
        "peer_op",
        pl.String(),
        "Collective the other rank was running, as a mismatch states it (`but Rank 0 is running … OpType=X`).",
    ),
    ("peer_shape", pl.String(), "Tensor shape of that other rank's collective (`[4, 2]`), when stated."),
    ("peer_addr", pl.String(), "Peer address named by the line (`192.0.2.11<44871>`, `[ip]:port`, host)."),
    (
        "local_addr",
        pl.String(),
        "This process's own address stated by the line (NCCL `Bootstrap : Using eth0:ip`).",
    ),
    ("exit_code", pl.Int32(), "Process exit code; negative means killed by that signal (-9 SIGKILL)."),
    ("signal", pl.String(), "Signal name (SIGKILL, SIGTERM, …) sent to or received by the process."),
    ("exc_type", pl.String(), "Exception type of a traceback or error line (`torch.cuda.OutOfMemoryError`)."),
    ("message", pl.String(), "The message with transport, tee and producer prefixes stripped (first line)."),
    ("raw", pl.String(), "The row's physical line(s) exactly as read (decoded as UTF-8 with replacement)."),
    (
        "duplicate",
        pl.Boolean(),
        (
            "True when the row is a torchrun --tee copy of a line that a per-rank file "
            "also holds; diagnosis skips duplicates, the table keeps them."
        ),
    ),
]

COLUMN_DOCS: dict[str, str] = {name: doc for name, _, doc in COLUMNS}

#: The event-table columns as polars dtypes, in order.
POLARS_SCHEMA: dict[str, pl.DataType] = {name: typ for name, typ, _ in COLUMNS}

#: The free-text columns of the table: nearly every value is distinct.
TEXT_COLUMNS: tuple[str, ...] = ("message", "raw")


@cache
def _arrow_schemas() -> tuple[pa.Schema, pa.Schema]:
    """:data:`EVENT_SCHEMA` and :data:`WRITE_SCHEMA`, built on first use: pyarrow (and numpy, which it loads)
    take ~0.15 s to import, and ``rankscope diagnose`` never hands a table to Arrow."""
    import pyarrow as pa

    arrow = {
        pl.Int64(): pa.int64(),
        pl.Int32(): pa.int32(),
        pl.String(): pa.string(),
        pl.Boolean(): pa.bool_(),
        pl.Datetime("us", "UTC"): pa.timestamp("us", tz="UTC"),
    }
    event = pa.schema([pa.field(name, arrow[typ]) for name, typ in POLARS_SCHEMA.items()])
    write = pa.schema(
        [pa.field(f.name, pa.string_view() if f.type == pa.string() else f.type) for f in event]
    )
    return event, write


def __getattr__(name: str) -> pa.Schema:
    """The Arrow schemas, built on first use (:func:`_arrow_schemas`).

    ``EVENT_SCHEMA``: the Arrow schema of the event table (``COLUMNS``' types; ``string``, ``int64``,
    ``int32``, ``bool``, ``timestamp[us, tz=UTC]``).

    ``WRITE_SCHEMA``: the Arrow schema event tables are handed to a parquet writer in: ``EVENT_SCHEMA`` with
    polars' own string layout (``string_view``), so no string is copied on the way. Files are written
    without an Arrow schema (``store_schema=False``, in :func:`parquet_options`): readers take the column
    types from the parquet types, which gives ``EVENT_SCHEMA`` back exactly (``string`` for UTF8,
    ``timestamp[us, tz=UTC]`` for UTC-adjusted stamps)."""
    if name == "EVENT_SCHEMA":
        return _arrow_schemas()[0]
    if name == "WRITE_SCHEMA":
        return _arrow_schemas()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_write_arrow(df: pl.DataFrame) -> pa.Table:
    """``df`` (an event table, see :func:`conform`) as an Arrow table of ``WRITE_SCHEMA``, sharing polars'
    buffers (no copy). One 32 MiB batch of the 256-rank bench, one core: conversion + write 0.113 s, against
    0.147 s through ``large_string`` and a cast to ``string`` (two copies of the text)."""
    write = _arrow_schemas()[1]
    arrow = conform(df).to_arrow(compat_level=pl.CompatLevel.newest())
    return arrow if arrow.schema.equals(write) else arrow.cast(write)


def parquet_options() -> dict[str, object]:
    """Keyword arguments of ``pyarrow.parquet.ParquetWriter`` / ``write_table`` for event-table files (tables
    of ``WRITE_SCHEMA``, see :func:`to_write_arrow`).

    No stored Arrow schema; zstd; dictionary encoding for the string columns other than :data:`TEXT_COLUMNS` (few distinct values:
    paths, hosts, kinds, ops), plain for the free text and the numbers; min/max statistics for every column
    but the free text (readers skip row groups by ``kind``, ``rank``, ``seq``, ``event_id``; nobody filters
    on the min or max of a log line). Measured on one 32 MiB batch of the 256-rank bench (160k rows, one
    core): 0.104 s and 1.85 MB, against 0.133 s and 2.43 MB with pyarrow's defaults (a dictionary tried on
    every column, statistics on all); the values read back are the same.
    """
    return {
        "store_schema": False,
        "compression": "zstd",
        "use_dictionary": [
            name for name, typ in POLARS_SCHEMA.items() if typ == pl.String() and name not in TEXT_COLUMNS
        ],
        "write_statistics": [name for name in POLARS_SCHEMA if name not in TEXT_COLUMNS],
    }


#: Columns that live only between parsing and the event table (issue 13: "the intermediate columns declared
#: in one place"), next to the event-table columns they feed: ``(name, doc)``. What the steps after
#: ``parsers.parse_lines`` read: identity (source and prefix ranks), timestamps (the stamp parts), tee
#: de-duplication (``record``). Every other parser column is dropped right after parsing, and these are
#: dropped once the event table is built (``conform``). All are strings unless the doc says otherwise.
INTERMEDIATE: list[tuple[str, str]] = [
    # source (correlator.discover.Source)
    (
        "layout",
        "How the path says who wrote the file: ``torchrun_rank``, ``rank_file``, ``task_file`` (a sibling name's task id), ``nccl_file``, ``stream``.",
    ),
    ("src_rank", "Rank stated by the file's path (``rank3.log``, ``attempt_0/3/``), Int32."),
    ("src_local_rank", "Local rank stated by the path, Int32."),
    ("src_host", "Host stated by a node-like folder name (``node-07/``); never an arbitrary folder."),
    ("src_attempt", "Restart attempt stated by the path (``attempt_N``), Int32."),
    ("node_key", "Folder that groups the files of one node (for local rank -> rank)."),
    # identity evidence (correlator.identity)
    ("c10_rank", "Rank of a c10d ``[rank N]:`` / ``[RankN]:`` line prefix."),
    ("tee_local_rank", "Local rank of a torchrun ``--tee`` prefix (``[default0]:``), Int32."),
    (
        "xport_rank",
        "Rank of a launcher transport prefix (OpenMPI ``[job,R]<stderr>:``, ``[rank R]``, ``[R]:``).",
    ),
    ("xport_host", "Pod of a ``kubectl logs --prefix`` line (``[pod/NAME/container]``)."),
    ("srun_label", "Task label of a Slurm ``srun --label`` prefix ``R: ``."),
    (
        "hook_rank",
        "Rank of a c10d excepthook prefix (its own stream), carried over the traceback block it opens.",
    ),
    (
        "local_rank_stated",
        "Local rank a message states (NCCL ``localRank N``, DeepSpeed ``--local_rank=N``), Int32.",
    ),
    (
        "rank_stated",
        "Rank a message states in its text (NCCL ``comm 0x.. rank 3 nranks 8``, ``Rank 3 ...``), Int32.",
    ),
    ("msg_rank", "Rank a fault message names as its own (``[PG 0 Rank 3]``, ``aborted on rank 3``), Int32."),
    ("msg_pg", "Process group id of that ``[PG n Rank r]`` (the rank is then within the PG)."),
    (
        "gpu_index",
        "CUDA device a CUDA error names (``(GPU 3;``, ``GPU 3 has a total capacity``, ``cuda:3``), Int32.",
    ),
    ("cuda_dev", "NCCL ``cudaDev N`` of an init/COLL line (local GPU)."),
    # stamp parts (parsers.timestamps.build_ts)
    ("xport_ts", "RFC 3339 stamp a transport adds (kubectl ``--timestamps``: ``2024-05-01T12:00:00.123Z``)."),
    (
        "mpi_ctime",
        "ctime stamp before an OpenMPI ``--timestamp-output`` prefix (``Wed May  1 12:00:00 2024``).",
    ),
    ("nccl_ts", "Stamp at the head of a NCCL line (``NCCL_DEBUG_TIMESTAMP_FORMAT``)."),
    ("pyts", "Python ``logging`` asctime (``2024-05-01 12:00:00,123``)."),
    ("cf_time", "``time : 2024-05-01_12:00:00`` of a torchrun ChildFailedError failure table."),
    ("usts", "US-order stamp of an app logger line ``05/01/2024 12:00:00 - INFO - name - ...``."),
    ("mmdd", "glog month+day (``I0501``) of a c10d line."),
    ("hms", "glog time of day ``12:00:00`` of a c10d line."),
    ("yyyy", "Year of a glog-with-year stamp."),
    ("mm", "Month of a split stamp."),
    ("dd", "Day of a split stamp."),
    ("usec", "Microseconds of a glog stamp."),
    ("epoch_s", "Seconds since the epoch of a torchrun ``error.json`` ``timestamp``, Int64."),
    # records and error.json
    ("record", "Multi-line record key (traceback / table block) for tee de-duplication."),
    ("exit_code_json", "Exit code read from a torchrun ``error.json`` file, Int32."),
]
#: The intermediate column names, in order.
INTERMEDIATE_COLUMNS: tuple[str, ...] = tuple(name for name, _ in INTERMEDIATE)
#: What ``parsers.parse_lines`` hands on: the event-table columns plus the intermediate ones.
PARSE_KEEP: tuple[str, ...] = tuple(dict.fromkeys([*POLARS_SCHEMA, *INTERMEDIATE_COLUMNS]))


def conform(df: pl.DataFrame) -> pl.DataFrame:
    """Return ``df`` with exactly the event-table columns, in order, with their types.

    Missing columns are added as nulls; extra columns are dropped. Raises ``polars`` cast errors
    only on a programming error (a column holding text that cannot be its type).
    """
    exprs = []
    for name, dtype in POLARS_SCHEMA.items():
        if name in df.columns:
            exprs.append(pl.col(name).cast(dtype))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(exprs)


def empty_table() -> pl.DataFrame:
    """An event table with no rows."""
    return pl.DataFrame(schema=POLARS_SCHEMA)
