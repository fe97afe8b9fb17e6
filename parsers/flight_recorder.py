"""PyTorch Flight Recorder (FR) dumps: find them, load them safely, turn them into event-table rows.

FR is c10d's per-rank ring buffer of collectives (``torch/csrc/distributed/c10d/FlightRecorder*.hpp``,
``FlightRecorderDetail.hpp``; before torch 2.6 ``TraceUtils.h`` / ``NCCLUtils.hpp``). It is turned on by
``TORCH_FR_BUFFER_SIZE=N`` (older name ``TORCH_NCCL_TRACE_BUFFER_SIZE``, both read by torch 2.13) and
written one file per rank, named ``<prefix><rank>``: ProcessGroupNCCL dumps on a watchdog timeout with
``TORCH_NCCL_DUMP_ON_TIMEOUT=1`` to ``TORCH_FR_DUMP_TEMP_FILE`` (older ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``;
default ``/tmp/nccl_trace_rank_`` per the FR tutorial); any backend (gloo too) dumps on demand with
``torch._C._distributed_c10d._dump_fr_trace()`` (pickle bytes) or ``_dump_fr_trace_json()`` (JSON bytes,
no stack frames).

Layout (read by field name, never by position; ``version`` "2.x" only says which fields may be there):

- top level: ``version``; ``pg_config`` {pg name: {name, desc, ranks "[0, 1]"}}; ``pg_status``
  {pg id (string): {last_enqueued_collective, last_started_collective, last_completed_collective}} (JSON
  writes these numbers as strings); ``entries`` (absent in JSON when empty); ``comm_lib_version``;
  NCCL only: ``nccl_comm_state``.
- entry: ``record_id``, ``pg_id``, ``process_group`` (name, desc) — a tuple in pickle, a list in JSON —,
  ``collective_seq_id``, ``p2p_seq_id``, ``op_id``, ``profiling_name`` (``gloo:all_reduce``,
  ``nccl:send 0->1``), ``time_created_ns`` (wall clock, ns), ``input_sizes``/``output_sizes`` (one list
  per tensor), ``input_dtypes``/``output_dtypes`` (``Float``), ``state`` (scheduled | started |
  completed; gloo always says scheduled), ``time_discovered_started_ns``/``time_discovered_completed_ns``
  (null in pickle, 0 in JSON when unknown), ``retired``, ``timeout_ms``, ``is_p2p``, ``duration_ms``
  (only with ``TORCH_NCCL_ENABLE_TIMING``), ``thread_id``/``thread_name`` (newer), ``frames`` (pickle only,
  [{name, filename, line}], innermost first).

Layouts seen: 2.2 (TraceUtils.h, torch ≈2.4), 2.4 (FlightRecorder.hpp, torch 2.5–2.6), 2.5 (the FR
tutorial's example), 2.8 (the analyzer's tests, ``test/distributed/flight_recorder/test_fr_analysis.py``),
2.10 (captured here, torch 2.13). Quirks tolerated: gloo keys ``pg_config`` by ``''`` while its entries
say pg ``'0'``; numbers as strings; tuples or lists; a single dtype string instead of a list; missing
``frames``, ``pg_status``, ``entries``.

Safety: JSON goes through :mod:`json`; pickle ONLY through :class:`SafeUnpickler`, which refuses every
global (a dump holds only dicts, lists, tuples, strings, numbers, booleans and None). A crafted pickle
gives :class:`FlightRecorderError`; no code runs.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: File names torch uses: the default prefixes, or any TORCH_FR_DUMP_TEMP_FILE prefix, then the rank.
KNOWN_PREFIX_RE = re.compile(r"^(?:nccl_trace_rank_|fr_rank_|fr_trace_rank_)(\d+)(?:\.json|\.pkl|\.pickle)?$")
RANK_SUFFIX_RE = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)(?P<ext>\.json|\.pkl|\.pickle|\.bin)?$")
#: Largest dump read (a 20,000-entry NCCL dump with C++ stacks is far below this).
MAX_DUMP_BYTES = 1 << 30
_HEAD = 4096


class FlightRecorderError(ValueError):
    """A file that should be a Flight Recorder dump cannot be read as one (the message names the file)."""


class SafeUnpickler(pickle.Unpickler):
    """Unpickler that admits builtin containers and scalars only: every global is refused.

    FR pickles (``pickle_str`` of a ``c10::Dict``) use no globals at all, so refusing them costs nothing and
    means a crafted file (``__reduce__`` to ``os.system``) cannot run code: it raises instead.
    """

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused persistent id")


def sniff(path: Path) -> str | None:
    """``"pickle"`` or ``"json"`` when the file's first bytes look like an FR dump, else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return None
    if head[:2] == b"\x80\x02" or head[:1] == b"\x80":
        if b"version" in head and (b"pg_config" in head or b"entries" in head):
            return "pickle"
        return None
    text = head.lstrip()
    if text[:1] == b"{" and any(
        k in text for k in (b'"comm_lib_version"', b'"collective_seq_id"', b'"pg_config"', b'"pg_status"')
    ):
        return "json"
    return None


def rank_from_name(name: str) -> int | None:
    """``nccl_trace_rank_3`` / ``fr_rank_3.json`` / ``<any prefix>3`` -> 3."""
    m = RANK_SUFFIX_RE.match(name)
    return int(m.group("rank")) if m else None


def candidate(name: str) -> bool:
    """Whether a file name can be ``<prefix><rank>`` (only those are sniffed: text logs end in .log etc.)."""
    if KNOWN_PREFIX_RE.match(name):
        return True
    m = RANK_SUFFIX_RE.match(name)
    return bool(m and m.group("prefix") and not m.group("prefix").endswith("."))


def detect(path: Path) -> tuple[str, int] | None:
    """(format, rank) when ``path`` is an FR dump (by name and content), else None."""
    if not candidate(path.name):
        return None
    fmt = sniff(path)
    rank = rank_from_name(path.name)
    if fmt is None or rank is None:
        return None
    return fmt, rank


def load_dump(path: str | os.PathLike[str], fmt: str | None = None) -> dict[str, Any]:
    """Read one dump into plain Python objects. Raises :class:`FlightRecorderError` with the file's name
    on anything that is not an FR dump: a refused global, a truncated pickle, bad JSON, a wrong shape."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_DUMP_BYTES:
            raise FlightRecorderError(f"{p}: {size} bytes, larger than {MAX_DUMP_BYTES}; not read")
        data = p.read_bytes()
    except OSError as e:
        raise FlightRecorderError(f"{p}: cannot read ({e.strerror or e})") from None
    fmt = fmt or sniff(p) or ("json" if data.lstrip()[:1] == b"{" else "pickle")
    try:
        if fmt == "json":
            obj = json.loads(data.decode("utf-8", errors="replace"))
        else:
            obj = SafeUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as e:
        raise FlightRecorderError(
            f"{p}: not loaded: {e} (a Flight Recorder dump holds no globals; nothing was run)"
        ) from None
    except (
        ValueError,
        EOFError,
        TypeError,
        IndexError,
        KeyError,
        AttributeError,
        RecursionError,
        MemoryError,
        OverflowError,
    ) as e:
        raise FlightRecorderError(
            f"{p}: not a readable Flight Recorder {fmt} dump ({type(e).__name__}: {str(e)[:120]})"
        ) from None
    if not isinstance(obj, dict) or "version" not in obj:
        raise FlightRecorderError(f"{p}: not a Flight Recorder dump (no top-level 'version')")
    version = str(obj.get("version"))
    if not re.match(r"^[12]\.\d+$", version):
        raise FlightRecorderError(f"{p}: Flight Recorder layout version {version[:20]!r} not supported (2.x)")
    if not isinstance(obj.get("entries", []), (list, tuple)):
        raise FlightRecorderError(f"{p}: 'entries' is not a list")
    return obj


def _int(v: Any) -> int | None:
    if type(v) is int and -(2**63) <= v < 2**63:  # the common case first
        return v
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**63 else None
    if isinstance(v, float) and not math.isnan(v) and abs(v) < 2**63:
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"\s*-?\d{1,19}\s*", v):
        return _int(int(v))
    return None


def _sizes(v: Any) -> list[list[int]]:
    if not isinstance(v, (list, tuple)):
        return []
    if all(type(t) is list and all(type(d) is int for d in t) for t in v):  # the common case first
        return [list(t) for t in v]
    out = []
    for t in v:
        if isinstance(t, (list, tuple)):
            out.append([x for x in (_int(d) for d in t) if x is not None])
        elif _int(t) is not None:  # a flat size list: one tensor
            return [[x for x in (_int(d) for d in v) if x is not None]]
    return out


def _dtypes(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v] if v else []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    return []


#: FR profiling names -> the upper-case OpType c10d prints (``OpType=ALLREDUCE``).
OP_TYPES = {
    "all_reduce": "ALLREDUCE",
    "allreduce": "ALLREDUCE",
    "broadcast": "BROADCAST",
    "_broadcast_oop": "BROADCAST",
    "reduce": "REDUCE",
    "_reduce_oop": "REDUCE",
    "all_gather": "ALLGATHER",
    "_all_gather_base": "_ALLGATHER_BASE",
    "all_gather_into_tensor_coalesced": "ALLGATHER_COALESCED",
    "ALLGATHER_coalesced": "ALLGATHER_COALESCED",
    "reduce_scatter": "REDUCE_SCATTER",
    "_reduce_scatter_base": "_REDUCE_SCATTER_BASE",
    "reduce_scatter_tensor_coalesced": "REDUCE_SCATTER_COALESCED",
    "REDUCE_SCATTER_coalesced": "REDUCE_SCATTER_COALESCED",
    "allreduce_coalesced": "ALLREDUCE_COALESCED",
    "gather": "GATHER",
    "scatter": "SCATTER",
    "all_to_all": "ALLTOALL",
    "all_to_all_single": "ALLTOALL_BASE",
    "alltoall_base": "ALLTOALL_BASE",
    "barrier": "BARRIER",
    "send": "SEND",
    "recv": "RECV",
    "recvAnysource": "RECVANYSOURCE",
    "coalesced": "COALESCED",
}


def op_of(profiling_name: str) -> tuple[str, str, str | None]:
    """``gloo:all_reduce`` -> (``gloo``, ``all_reduce``, None); ``nccl:send 0->1`` -> (nccl, send, ``0->1``)."""
    backend, _, rest = profiling_name.partition(":") if ":" in profiling_name else ("", "", profiling_name)
    parts = rest.split(" ", 1)
    return backend, parts[0], parts[1] if len(parts) > 1 else None


def op_type(name: str) -> str:
    return OP_TYPES.get(name, name.upper())


@dataclass
class Entry:
    """One FR entry, normalized. Sizes are one list per tensor; times are ns since the epoch or None."""

    index: int
    record_id: int | None
    pg: str
    pg_id: int | None
    pg_desc: str
    collective_seq_id: int | None
    p2p_seq_id: int | None
    is_p2p: bool
    name: str  # the FR op name: all_reduce, broadcast, send …
    backend: str
    profiling_name: str
    input_sizes: list[list[int]]
    output_sizes: list[list[int]]
    input_dtypes: list[str]
    output_dtypes: list[str]
    state: str | None
    time_created_ns: int | None
    time_started_ns: int | None
    time_completed_ns: int | None
    duration_ms: float | None
    timeout_ms: int | None
    frames: list[dict[str, Any]]

    @property
    def seq(self) -> int | None:
        return self.p2p_seq_id if self.is_p2p else self.collective_seq_id

    @property
    def numel(self) -> int:
        total = 0
        for s in self.input_sizes:
            n = 1
            for d in s:
                n *= d
            total += n
        return total

    @property
    def shape(self) -> str:
        if len(self.input_sizes) == 1:
            return "[" + ", ".join(map(str, self.input_sizes[0])) + "]"
        return "[" + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in self.input_sizes) + "]"

    def user_frame(self) -> str | None:
        """The innermost frame outside torch itself: where the training script called the collective."""
        for f in self.frames:
            fn = str(f.get("filename", ""))
            if "/torch/" not in fn and not fn.startswith("<"):
                return f"{f.get('name', '?')} at {fn}:{f.get('line', '?')}"
        return None


@dataclass
class Dump:
    """One rank's dump: its entries (in record order), pg_status per pg name, the ranks of each PG."""

    path: Path
    rel: str
    rank: int
    version: str
    fmt: str
    entries: list[Entry]
    status: dict[str, dict[str, int | None]] = field(default_factory=dict)  # pg name -> last_* seqs
    pg_ranks: dict[str, list[int]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _ranks(v: Any) -> list[int]:
    if isinstance(v, (list, tuple)):
        return [x for x in (_int(r) for r in v) if x is not None]
    if isinstance(v, str):
        return [int(x) for x in re.findall(r"-?\d+", v)]
    return []


def parse_dump(obj: dict[str, Any], path: Path, rel: str, rank: int, fmt: str) -> Dump:
    """Normalize a loaded dump (see the module docstring for the layout and the quirks tolerated)."""
    d = Dump(path, rel, rank, str(obj.get("version")), fmt, [])
    pgid_to_name: dict[str, str] = {}
    for i, e in enumerate(obj.get("entries") or []):
        if not isinstance(e, dict):
            d.warnings.append(f"{rel}: entry {i} is not a record; skipped")
            continue
        pgv = e.get("process_group")
        pg_id = _int(e.get("pg_id"))
        if isinstance(pgv, (list, tuple)) and pgv:
            pg, desc = str(pgv[0]), str(pgv[1]) if len(pgv) > 1 else ""
        else:
            pg, desc = (str(pg_id) if pg_id is not None else "0"), ""
        if pg_id is not None:
            pgid_to_name.setdefault(str(pg_id), pg)
        pname = str(e.get("profiling_name") or "")
        backend, name, _meta = op_of(pname)
        is_p2p = e.get("is_p2p")
        is_p2p = bool(is_p2p) if isinstance(is_p2p, bool) else name in ("send", "recv", "recvAnysource")
        started = _int(e.get("time_discovered_started_ns")) or None  # JSON writes 0 for "unknown"
        completed = _int(e.get("time_discovered_completed_ns")) or None
        dur = e.get("duration_ms")
        frames = e.get("frames")
        d.entries.append(
            Entry(
                index=i,
                record_id=_int(e.get("record_id")),
                pg=pg,
                pg_id=pg_id,
                pg_desc=desc,
                collective_seq_id=_int(e.get("collective_seq_id")),
                p2p_seq_id=_int(e.get("p2p_seq_id")),
                is_p2p=is_p2p,
                name=name,
                backend=backend,
                profiling_name=pname,
                input_sizes=_sizes(e.get("input_sizes")),
                output_sizes=_sizes(e.get("output_sizes")),
                input_dtypes=_dtypes(e.get("input_dtypes")),
                output_dtypes=_dtypes(e.get("output_dtypes")),
                state=str(e["state"]) if e.get("state") is not None else None,
                time_created_ns=_int(e.get("time_created_ns")),
                time_started_ns=started,
                time_completed_ns=completed,
                duration_ms=float(dur)
                if isinstance(dur, (int, float)) and not isinstance(dur, bool)
                else None,
                timeout_ms=_int(e.get("timeout_ms")),
                frames=[f for f in frames if isinstance(f, dict)]
                if isinstance(frames, (list, tuple))
                else [],
            )
        )
    status = obj.get("pg_status")
    if isinstance(status, dict):
        for k, v in status.items():
            if not isinstance(v, dict):
                continue
            name = pgid_to_name.get(str(k), str(k))
            d.status[name] = {
                key: _int(v.get(f"last_{key}_collective")) for key in ("enqueued", "started", "completed")
            }
    config = obj.get("pg_config")
    if isinstance(config, dict):
        for k, v in config.items():
            if isinstance(v, dict):
                # gloo records the default PG under name '' while its entries say '0'
                name = str(v.get("name", k)) or str(k) or "0"
                d.pg_ranks[name or "0"] = _ranks(v.get("ranks"))
    return d


def read(path: Path, rel: str, rank: int | None = None, fmt: str | None = None) -> Dump:
    """Load and normalize one dump; ``rank`` defaults to the one in the file name."""
    r = rank if rank is not None else rank_from_name(path.name)
    if r is None:
        raise FlightRecorderError(f"{rel}: no rank in the file name (torch names dumps <prefix><rank>)")
    return parse_dump(load_dump(path, fmt), path, rel, r, fmt or sniff(path) or "pickle")


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _ts(ns: int | None) -> dt.datetime | None:
    if ns is None or not (0 < ns < 2**62):
        return None
    return _EPOCH + dt.timedelta(microseconds=ns // 1000)  # exact: no float rounding of the ns stamp


def rows(d: Dump) -> list[dict[str, Any]]:
    """Event-table rows of one dump: one ``fr_collective`` per entry, then one ``fr_status`` (or
    ``fr_waiting`` when the rank had enqueued a collective it never completed; seq = the first not completed) per
    process group."""
    out: list[dict[str, Any]] = []
    world = len(d.pg_ranks.get("0") or d.pg_ranks.get("") or []) or None
    for e in d.entries:
        where = e.user_frame()
        seq_txt = f"{'p2p ' if e.is_p2p else ''}seq {e.seq}"
        msg = (
            f"{e.profiling_name} pg {e.pg} {seq_txt} record_id {e.record_id} {e.shape} "
            f"{','.join(e.input_dtypes)} {e.state or ''}"
        ).rstrip() + (f" in {where}" if where else "")
        raw = {k: v for k, v in e.__dict__.items() if k not in ("frames", "index")}
        if e.is_p2p:  # the peer in ``nccl:send 0->1`` is a rank of the PG: its ranks map it to a global rank
            raw["pg_ranks"] = d.pg_ranks.get(e.pg) or []
        out.append(
            {
                "path": d.rel,
                "line": e.index + 1,
                "line_count": 0,
                "rank": d.rank,
                "rank_source": "file",
                "attempt": 0,
                "stream": "fr_dump",
                "ts": _ts(e.time_created_ns),
                "ts_quality": "exact" if e.time_created_ns else "missing",
                "layer": "fr",
                "severity": "info",
                "kind": "fr_collective",
                "pg": e.pg,
                "seq": e.seq,
                "op": op_type(e.name),
                "numel": e.numel,
                "shape": e.shape,
                "dtypes": ",".join(e.input_dtypes) or None,
                "state": e.state,
                "record_id": e.record_id,
                "ts_end": _ts(e.time_completed_ns),
                "timeout_ms": e.timeout_ms,
                "world_size": world,
                "elapsed_ms": int(e.duration_ms) if e.duration_ms is not None else None,
                "message": msg,
                "raw": json.dumps(raw, default=str),
                "duplicate": False,
            }
        )
    last_ts = max((e.time_created_ns for e in d.entries if e.time_created_ns), default=None)
    for i, (pg, st) in enumerate(sorted(d.status.items())):
        enq, comp = st.get("enqueued"), st.get("completed")
        waiting = enq is not None and comp is not None and enq > comp
        kind = "fr_waiting" if waiting else "fr_status"
        msg = (
            f"Flight Recorder pg_status pg {pg}: last enqueued {enq}, last started {st.get('started')}, "
            f"last completed {comp}" + (f" (stuck in seq {comp + 1})" if waiting and comp is not None else "")
        )
        out.append(
            {
                "path": d.rel,
                "line": len(d.entries) + i + 1,
                "line_count": 0,
                "rank": d.rank,
                "rank_source": "file",
                "attempt": 0,
                "stream": "fr_dump",
                "ts": _ts(last_ts),
                "ts_quality": "inherited" if last_ts else "missing",
                "layer": "fr",
                "severity": "warning" if waiting else "info",
                "kind": kind,
                "pg": pg,
                "seq": comp + 1 if waiting and comp is not None else None,
                "seq_enqueued": enq,
                "seq_completed": comp,
                "world_size": world,
                "message": msg,
                "raw": json.dumps({"pg_status": {pg: st}, "version": d.version}),
                "duplicate": False,
            }
        )
    return out
