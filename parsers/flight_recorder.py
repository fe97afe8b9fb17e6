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
global (a dump holds only dicts, lists, tuples, strings, numbers, booleans and None) and any container as a
dict key or set member (hashing one shared many times over through the memo never ends). A crafted pickle
gives :class:`FlightRecorderError`; no code runs. A loaded dump is then read field by field, each checked
for its type and size before it is converted (a text field is a string of at most :data:`MAX_TEXT`
characters or a number, a number is finite and fits 64 bits, a list is bounded); an entry with a field
that is neither is skipped with a warning that names the file. Nothing shared is expanded: the work spent
reading a dump is bounded by its size in bytes (:data:`WORK_PER_BYTE`), so a pickle whose memo makes a
small file stand for a huge tree (a "billion laughs") is refused instead of read.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import os
import pickle
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

#: File names torch uses: the default prefixes, or any TORCH_FR_DUMP_TEMP_FILE prefix, then the rank.
KNOWN_PREFIX_RE = re.compile(r"^(?:nccl_trace_rank_|fr_rank_|fr_trace_rank_)(\d+)(?:\.json|\.pkl|\.pickle)?$")
RANK_SUFFIX_RE = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)(?P<ext>\.json|\.pkl|\.pickle|\.bin)?$")
#: Largest dump read (a 20,000-entry NCCL dump with C++ stacks is far below this).
MAX_DUMP_BYTES = 1 << 30
_HEAD = 4096
#: Longest text field read (a profiling name, a state, a PG name or description, a dtype, a frame's name or
#: file); longer makes the entry skipped. Below Python's 4,300-digit limit on int() of a string.
MAX_TEXT = 4096
#: Most tensors (or dtypes) per entry, dimensions per tensor, frames per entry, ranks per PG.
MAX_TENSORS = 1 << 20
MAX_DIMS = 256
MAX_FRAMES = 1 << 16
MAX_RANKS = 1 << 24
#: Work allowed reading one dump: WORK_PER_BYTE units per byte of the file, at least WORK_FLOOR. An entry
#: costs ENTRY_COST, each list item or dict item looked at one, each character of text kept one; a real dump
#: spends a few units per byte, a "billion laughs" through the pickle memo far more.
WORK_PER_BYTE = 64
WORK_FLOOR = 1 << 22
ENTRY_COST = 256
#: Entries skipped with a warning of their own; the rest are counted in one.
MAX_ENTRY_WARNINGS = 5


class FlightRecorderError(ValueError):
    """A file that should be a Flight Recorder dump cannot be read as one (the message names the file)."""


#: What a dict key or a set member may be: hashing these costs their size, once.
_KEY_TYPES = (str, int, float, bool, bytes, type(None))


class SafeUnpickler(pickle._Unpickler):
    """Unpickler that admits builtin containers and scalars only: every global is refused, and so is a
    container (a tuple, a frozenset) as a dict key or set member.

    FR pickles (``pickle_str`` of a ``c10::Dict``) use no globals at all, so refusing them costs nothing and
    means a crafted file (``__reduce__`` to ``os.system``) cannot run code: it raises instead. Their keys are
    strings. A tuple key could be a tree shared through the memo (hashed in time exponential in the file's
    size) or nested a million deep (hashed by C recursion that overflows the stack): refused before it is
    hashed. This is the pure-Python unpickler (the C one cannot be checked opcode by opcode); it builds no
    structure recursively, so depth alone costs only memory.
    """

    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(pickle._Unpickler.dispatch)

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused persistent id")

    @staticmethod
    def _keys(keys: Any) -> None:
        for k in keys:
            if not isinstance(k, _KEY_TYPES):
                raise pickle.UnpicklingError(f"refused a {type(k).__name__} as a dict key or set member")

    def _refuse(self) -> None:
        raise pickle.UnpicklingError("refused an object-building opcode (a dump holds plain data only)")

    def _setitem(self) -> None:
        self._keys(self.stack[-2:-1])  # type: ignore[attr-defined]
        pickle._Unpickler.load_setitem(self)  # type: ignore[attr-defined]

    def _setitems(self) -> None:  # after MARK, self.stack holds only the items
        self._keys(self.stack[0::2])  # type: ignore[attr-defined]
        pickle._Unpickler.load_setitems(self)  # type: ignore[attr-defined]

    def _dict(self) -> None:
        self._keys(self.stack[0::2])  # type: ignore[attr-defined]
        pickle._Unpickler.load_dict(self)  # type: ignore[attr-defined]

    def _set_items(self) -> None:
        self._keys(self.stack)  # type: ignore[attr-defined]

    def _additems(self) -> None:
        self._set_items()
        pickle._Unpickler.load_additems(self)  # type: ignore[attr-defined]

    def _frozenset(self) -> None:
        self._set_items()
        pickle._Unpickler.load_frozenset(self)  # type: ignore[attr-defined]

    dispatch[pickle.SETITEM[0]] = _setitem
    dispatch[pickle.SETITEMS[0]] = _setitems
    dispatch[pickle.DICT[0]] = _dict
    dispatch[pickle.ADDITEMS[0]] = _additems
    dispatch[pickle.FROZENSET[0]] = _frozenset
    for _op in (pickle.REDUCE, pickle.BUILD, pickle.INST, pickle.OBJ, pickle.NEWOBJ, pickle.NEWOBJ_EX):
        dispatch[_op[0]] = _refuse
    del _op


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
    try:
        version = _text(obj.get("version"), "'version'")
    except _Refused as e:
        raise FlightRecorderError(f"{p}: not a Flight Recorder dump ({e})") from None
    if not re.match(r"^[12]\.\d+$", version):
        raise FlightRecorderError(f"{p}: Flight Recorder layout version {version[:20]!r} not supported (2.x)")
    if not isinstance(obj.get("entries", []), (list, tuple)):
        raise FlightRecorderError(f"{p}: 'entries' is not a list")
    return obj


class _Refused(ValueError):
    """A field of the wrong type or size (the message says which and why)."""


def _what(v: Any) -> str:
    """What a refused value is, without converting it (it may be huge or shared many times over)."""
    if isinstance(v, str):
        return f"a string of {len(v)} characters"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"an integer of {v.bit_length()} bits"
    if isinstance(v, float):
        return f"the number {v!r}"  # inf, nan: short
    if isinstance(v, (list, tuple, dict)):
        return f"a {type(v).__name__} of {len(v)} items"
    return f"a {type(v).__name__}"


class _Work:
    """The work left for reading one dump (see :data:`WORK_PER_BYTE`); spent, the dump is not read."""

    def __init__(self, limit: int, rel: str) -> None:
        self.limit = self.left = limit
        self.rel = rel

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise FlightRecorderError(
                f"{self.rel}: not read: it stands for more data than a dump of its size can hold "
                f"(past {self.limit} units of work; shared references in a crafted pickle?)"
            )


_NO_BUDGET = _Work(1 << 62, "")


def _text(v: Any, what: str, work: _Work = _NO_BUDGET) -> str:
    """A text field as ``str(v)``, when ``v`` is a string of at most :data:`MAX_TEXT` characters, None, a
    bool, an int that fits 64 bits or a finite float; else :class:`_Refused` (nothing is converted)."""
    if type(v) is str:
        if len(v) > MAX_TEXT:
            raise _Refused(f"{what} is {_what(v)}, longer than {MAX_TEXT}")
        work.spend(len(v))
        return v
    if (
        v is None
        or isinstance(v, bool)
        or (isinstance(v, int) and -(2**63) <= v < 2**63)
        or (isinstance(v, float) and math.isfinite(v))
    ):
        return str(v)
    raise _Refused(f"{what} is {_what(v)}, not text")


def _items(v: list[Any] | tuple[Any, ...], most: int, what: str, work: _Work) -> None:
    """Check a list's length before walking it, and pay for walking it."""
    if len(v) > most:
        raise _Refused(f"{what} is {_what(v)}, more than {most}")
    work.spend(len(v))


def _int(v: Any) -> int | None:
    if type(v) is int and -(2**63) <= v < 2**63:  # the common case first
        return v
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**63 else None
    if isinstance(v, float) and not math.isnan(v) and abs(v) < 2**63:
        return int(v)
    if isinstance(v, str) and len(v) <= 256 and re.fullmatch(r"\s*-?\d{1,19}\s*", v):
        return _int(int(v))
    return None


def _sizes(v: Any, what: str = "sizes", work: _Work = _NO_BUDGET) -> list[list[int]]:
    if not isinstance(v, (list, tuple)):
        return []
    _items(v, MAX_TENSORS, what, work)
    for t in v:
        if isinstance(t, (list, tuple)):
            _items(t, MAX_DIMS, f"a tensor's {what}", work)
    if all(type(t) is list and all(type(d) is int for d in t) for t in v):  # the common case first
        return [list(t) for t in v]
    out = []
    for t in v:
        if isinstance(t, (list, tuple)):
            out.append([x for x in (_int(d) for d in t) if x is not None])
        elif _int(t) is not None:  # a flat size list: one tensor
            if len(v) > MAX_DIMS:
                raise _Refused(f"{what} is {_what(v)}, more than {MAX_DIMS}")
            return [[x for x in (_int(d) for d in v) if x is not None]]
    return out


def _dtypes(v: Any, what: str = "dtypes", work: _Work = _NO_BUDGET) -> list[str]:
    if isinstance(v, str):
        return [_text(v, what, work)] if v else []
    if isinstance(v, (list, tuple)):
        _items(v, MAX_TENSORS, what, work)
        return [_text(x, f"an item of {what}", work) for x in v]
    return []


def _duration(v: Any) -> float | None:
    """``duration_ms``: a finite number that fits 64 bits as an int (``rows`` writes ``int()`` of it)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    if (isinstance(v, float) and not math.isfinite(v)) or not -(2**63) < v < 2**63:
        raise _Refused(f"'duration_ms' is {_what(v)}, not a finite number of 64 bits")
    return float(v)


def _frames(v: Any, seen: dict[int, str | None], work: _Work) -> list[dict[str, Any]]:
    """The dict frames of ``v``, each with a text ``name``, ``filename`` and ``line`` where it has them;
    torch shares one frame among entries, so each is checked once (``seen``: id -> None, or what is wrong)."""
    if not isinstance(v, (list, tuple)):
        return []
    _items(v, MAX_FRAMES, "'frames'", work)
    out = []
    for f in v:
        if not isinstance(f, dict):
            continue
        if id(f) not in seen:
            seen[id(f)] = None
            try:
                for key in ("name", "filename", "line"):
                    if key in f:
                        _text(f[key], f"a frame's {key!r}", work)
            except _Refused as why:
                seen[id(f)] = str(why)
        bad = seen[id(f)]
        if bad is not None:
            raise _Refused(bad)
        out.append(f)
    return out


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
    def numel(self) -> int | None:
        """Elements of the inputs (the product of each input's sizes, summed); None past a signed 64-bit
        integer (the event table's ``numel``): no real tensor holds 2**63 elements."""
        total = 0
        for s in self.input_sizes:
            n = 1
            for d in s:
                n *= d
            total += n
        return total if -(2**63) <= total < 2**63 else None

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


def _ranks(v: Any, work: _Work = _NO_BUDGET) -> list[int]:
    if isinstance(v, (list, tuple)):
        _items(v, MAX_RANKS, "'ranks'", work)
        return [x for x in (_int(r) for r in v) if x is not None]
    if isinstance(v, str):
        if len(v) > 8 * MAX_RANKS:
            raise _Refused(f"'ranks' is {_what(v)}, longer than {8 * MAX_RANKS}")
        work.spend(len(v))
        found = re.findall(r"-?\d+", v)
        if any(len(x) > 20 for x in found):
            raise _Refused("'ranks' holds a number longer than 20 digits")
        return [int(x) for x in found]
    return []


def parse_dump(
    obj: dict[str, Any], path: Path, rel: str, rank: int, fmt: str, size: int | None = None
) -> Dump:
    """Normalize a loaded dump (see the module docstring for the layout and the quirks tolerated).

    Every field is checked for its type and size before it is converted: an entry with a field that is
    neither is skipped with a warning naming the file (the first :data:`MAX_ENTRY_WARNINGS`, then one
    count), and so is a ``pg_status`` or ``pg_config`` item. Work beyond what ``size`` (the file's bytes;
    by default its size on disk) allows raises :class:`FlightRecorderError`: the dump is not read."""
    if size is None:
        try:
            size = path.stat().st_size
        except OSError:
            size = MAX_DUMP_BYTES
    work = _Work(max(WORK_FLOOR, WORK_PER_BYTE * size), rel)
    try:
        version = _text(obj.get("version"), "'version'", work)
    except _Refused as why:
        raise FlightRecorderError(f"{rel}: not a Flight Recorder dump ({why})") from None
    d = Dump(path, rel, rank, version, fmt, [])
    pgid_to_name: dict[str, str] = {}
    seen_frames: dict[int, str | None] = {}
    skipped = 0

    def skip(what: str, reason: str) -> None:
        nonlocal skipped
        skipped += 1
        if skipped <= MAX_ENTRY_WARNINGS:
            d.warnings.append(f"{rel}: {what} {reason}; skipped")

    entries = obj.get("entries") or []
    if not isinstance(entries, (list, tuple)):
        raise FlightRecorderError(f"{rel}: 'entries' is not a list")
    for i, e in enumerate(entries):
        work.spend(ENTRY_COST)
        if not isinstance(e, dict):
            skip(f"entry {i}", "is not a record")
            continue
        try:
            entry = _entry(i, e, work, seen_frames)
        except _Refused as why:
            skip(f"entry {i}:", str(why))
            continue
        if entry.pg_id is not None:
            pgid_to_name.setdefault(str(entry.pg_id), entry.pg)
        d.entries.append(entry)
    status = obj.get("pg_status")
    if isinstance(status, dict):
        for k, v in status.items():
            work.spend(1)
            if not isinstance(v, dict):
                continue
            try:
                key_text = _text(k, "its key", work)
            except _Refused as why:
                skip("a 'pg_status' item:", str(why))
                continue
            name = pgid_to_name.get(key_text, key_text)
            d.status[name] = {
                key: _int(v.get(f"last_{key}_collective")) for key in ("enqueued", "started", "completed")
            }
    config = obj.get("pg_config")
    if isinstance(config, dict):
        for k, v in config.items():
            work.spend(1)
            if isinstance(v, dict):
                try:
                    # gloo records the default PG under name '' while its entries say '0'
                    key_text = _text(k, "its key", work)
                    name = _text(v.get("name", k), "'name'", work) or key_text or "0"
                    d.pg_ranks[name or "0"] = _ranks(v.get("ranks"), work)
                except _Refused as why:
                    skip("a 'pg_config' item:", str(why))
    if skipped > MAX_ENTRY_WARNINGS:
        d.warnings.append(
            f"{rel}: {skipped - MAX_ENTRY_WARNINGS} more entries or items skipped (not records, or a field "
            "of the wrong type or size)"
        )
    return d


def _entry(i: int, e: dict[Any, Any], work: _Work, seen_frames: dict[int, str | None]) -> Entry:
    """One entry, every field checked before it is converted (:class:`_Refused` says which is wrong)."""
    pgv = e.get("process_group")
    pg_id = _int(e.get("pg_id"))
    if isinstance(pgv, (list, tuple)) and pgv:
        pg = _text(pgv[0], "'process_group' name", work)
        desc = _text(pgv[1], "'process_group' description", work) if len(pgv) > 1 else ""
    else:
        pg, desc = (str(pg_id) if pg_id is not None else "0"), ""
    pname = _text(e.get("profiling_name") or "", "'profiling_name'", work)
    backend, name, _meta = op_of(pname)
    is_p2p = e.get("is_p2p")
    is_p2p = bool(is_p2p) if isinstance(is_p2p, bool) else name in ("send", "recv", "recvAnysource")
    started = _int(e.get("time_discovered_started_ns")) or None  # JSON writes 0 for "unknown"
    completed = _int(e.get("time_discovered_completed_ns")) or None
    state = e.get("state")
    return Entry(
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
        input_sizes=_sizes(e.get("input_sizes"), "'input_sizes'", work),
        output_sizes=_sizes(e.get("output_sizes"), "'output_sizes'", work),
        input_dtypes=_dtypes(e.get("input_dtypes"), "'input_dtypes'", work),
        output_dtypes=_dtypes(e.get("output_dtypes"), "'output_dtypes'", work),
        state=_text(state, "'state'", work) if state is not None else None,
        time_created_ns=_int(e.get("time_created_ns")),
        time_started_ns=started,
        time_completed_ns=completed,
        duration_ms=_duration(e.get("duration_ms")),
        timeout_ms=_int(e.get("timeout_ms")),
        frames=_frames(e.get("frames"), seen_frames, work),
    )


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
    huge = [e.index for e in d.entries if e.numel is None]
    if huge:
        d.warnings.append(
            f"{d.rel}: {len(huge)} entr{'y' if len(huge) == 1 else 'ies'} (the first: entry {huge[0]}) with input "
            "sizes of 2**63 elements or more; their numel left empty"
        )
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
