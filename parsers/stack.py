"""Stack dumps of live processes: ``py-spy dump`` and Python's ``faulthandler`` (issue #33).

A silent hang leaves no error line; what people collect then is every rank's stack. Two producers:

- **py-spy** (``py-spy dump --pid P``, py-spy 0.3 – 0.4.3, ``src/dump.rs`` ``write_traces`` / ``write_trace``)::

      Process 17607: /opt/venv/bin/python -u train.py --fault slow_read
      Python v3.11.7 (/usr/local/bin/python3.11)
      [Parent Process N: cmdline]                          (``--subprocesses`` only)

      Thread 17607 (idle): "MainThread"                    (``Thread {tid|0x..} ({idle|active|active+gil})[: "name"]``)
          RemoteShards.__getitem__ (train.py:91)           (``    {name} ({file}:{line})``; ``({file})`` when line 0)
              Arguments:                                   (``--locals``: ``        Arguments:`` / ``Locals:``,
                  i: 3                                      ``            name: repr``)

  ``--native`` interleaves native frames in the same ``    {name} ({file}:{line})`` shape.
- **faulthandler** (CPython ``Python/traceback.c``, 3.8 – 3.13: ``write_thread_id`` and ``dump_frame``), e.g.
  from ``faulthandler.register(signal.SIGUSR1, all_threads=True)`` and ``kill -USR1 PID``, written to the
  process's stderr (so inside a rank's log)::

      Thread 0x00007f... (most recent call first):         (other threads)
        File "/opt/app/train.py", line 91 in __getitem__
      Current thread 0x00007f... (most recent call first):
        File ".../dataloader.py", line 725 in __next__
      Stack (most recent call first):                      (``all_threads=False``)

Every physical line stays in exactly one row: the header and thread blocks of one dump are grouped into ONE
row of kind ``stack_dump`` (layer ``stack``; ``raw`` holds the whole dump, ``line_count`` its lines) by
:func:`dump_rows`. The row's ``pid`` is the dump's (py-spy), ``op`` the innermost collective the main
thread is in (``ALLREDUCE``, ``BARRIER``, ...; null when it is in none) and ``message`` where it stands
(:func:`place`). The rank comes from the file (``stacks/rank3.txt``, a rank's own ``stderr.log``), from a
rank stated in the dump's command line (``--local_rank=3``, ``RANK=3``), or from the pid
(``correlator.stacks.assign_ranks``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from parsers.rules import Rule, ascii_classes

KIND = "stack_dump"
LAYER = "stack"

#: ``Process 17607: /opt/venv/bin/python -u train.py …`` (py-spy dump.rs ``"Process {}: {}"``); a rank the
#: command line states: ``--local_rank=3`` / ``--local-rank 3`` (DeepSpeed and torch.distributed.launch pass
#: it), ``RANK=3`` (an ``env RANK=3 python …`` command line).
PYSPY_PROCESS = Rule(
    "pyspy_process",
    KIND,
    LAYER,
    "Process ",
    r"^(?:Parent )?Process (?P<pid>\d+): (?:.*?\bRANK=(?P<rank_stated>\d+)|.*?--local[_-]rank[= ](?P<local_rank_stated>\d+))?",
    "info",
    'py-spy 0.3 – 0.4.3 dump (src/dump.rs write_traces: "Process {}: {}"), captured stk-01',
    "Process 17607: /opt/venv/bin/python -u train.py --fault slow_read --fault-rank 1 --fault-step 4\n"
    "Python v3.11.7 (/usr/local/bin/python3.11)",
)
#: A py-spy thread block: ``Thread 17607 (idle): "MainThread"`` (dump.rs write_trace: ``"Thread {}{}: \"{}\""``,
#: status from stack_trace.rs ``status_str``; the id is the OS thread id, or ``{:#X}`` of the pthread id).
PYSPY_THREAD = Rule(
    "pyspy_thread",
    KIND,
    LAYER,
    "Thread ",
    r"^Thread (?:\d+|0x[0-9A-Fa-f]+) \((?:idle|active|active\+gil|gil)\)(?::|$)",
    "info",
    "py-spy 0.3 – 0.4.3 dump (src/dump.rs write_trace), captured stk-01",
    'Thread 17607 (idle): "MainThread"\n    RemoteShards.__getitem__ (train.py:91)',
)
#: A faulthandler thread block (CPython Python/traceback.c ``write_thread_id``: ``Current thread 0x%0*lx`` /
#: ``Thread 0x%0*lx`` + `` (most recent call first):``; ``Stack (most recent call first):`` without threads).
FH_THREAD = Rule(
    "faulthandler_thread",
    KIND,
    LAYER,
    "(most recent call first):",
    r"^(?:(?:Current thread|Thread) 0x[0-9a-fA-F]+|Stack) \(most recent call first\):(?:\n|$)",
    "info",
    "CPython 3.8 – 3.13 faulthandler (Python/traceback.c write_thread_id, dump_frame), captured stk-01",
    "Current thread 0x00007f7794be3b80 (most recent call first):\n"
    '  File "/opt/app/train.py", line 91 in __getitem__',
)
RULES = [PYSPY_PROCESS, PYSPY_THREAD, FH_THREAD]

#: torch's distributed debug server (``torch.distributed.debug.start_debug_server(dump_dir=…)``, torch 2.10+;
#: ``_debug_handlers.StacksHandler.dump`` / ``PySpyHandler.dump`` in 2.15) writes ``stacks_<%Y%m%d_%H%M%S>.txt``
#: and ``pyspy_dump_<…>.txt``: per rank ``=== Rank {i}: {addr} ===`` (``addr`` =
#: ``http://<host>:<port>/handler/dump_traceback?``, ``i`` the rank: ``fetch_all`` reads the store keys
#: ``rank0``… in order) and that rank's answer: ``faulthandler.dump_traceback(all_threads=True)`` (the C++
#: ``dump_traceback`` control-plane handler) or ``py-spy dump``. The dump after such a line is that rank's.
DEBUG_SERVER_RANK = re.compile(ascii_classes(r"^=== Rank (\d+): (\S+) ===$"))

_PYSPY_FRAME = re.compile(r"^    (?P<fn>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
_FH_FRAME = re.compile(r'^  File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<fn>.*)$')
_THREAD = re.compile(
    r'^Thread (?P<tid>\S+) \((?P<status>[^)]*)\)(?:: "(?P<name>.*)")?$'
    r"|^(?P<current>Current thread|Thread) (?P<ftid>0x[0-9a-fA-F]+) \(most recent call first\):$"
    r"|^(?P<stack>Stack) \(most recent call first\):$"
)

#: The communication functions of ``torch.distributed`` (their Python frame names; torch 1.x – 2.13), as the
#: innermost distributed call of a stack -> the op name c10d prints.
COLLECTIVES: dict[str, str] = {
    "all_reduce": "ALLREDUCE",
    "all_reduce_coalesced": "ALLREDUCE_COALESCED",
    "all_gather": "ALLGATHER",
    "all_gather_into_tensor": "_ALLGATHER_BASE",
    "all_gather_object": "ALLGATHER",
    "_all_gather_base": "_ALLGATHER_BASE",
    "reduce_scatter": "REDUCE_SCATTER",
    "reduce_scatter_tensor": "_REDUCE_SCATTER_BASE",
    "_reduce_scatter_base": "_REDUCE_SCATTER_BASE",
    "broadcast": "BROADCAST",
    "broadcast_object_list": "BROADCAST",
    "barrier": "BARRIER",
    "monitored_barrier": "BARRIER",
    "gather": "GATHER",
    "gather_object": "GATHER",
    "scatter": "SCATTER",
    "scatter_object_list": "SCATTER",
    "reduce": "REDUCE",
    "all_to_all": "ALLTOALL",
    "all_to_all_single": "ALLTOALL_BASE",
    "send": "SEND",
    "recv": "RECV",
    "isend": "SEND",
    "irecv": "RECV",
    "batch_isend_irecv": "BATCH_ISEND_IRECV",
    "wait": "WAIT",
}
#: Frames of installed libraries and of the interpreter, not of the job's own code (py-spy prints short
#: names: ``torch/distributed/distributed_c10d.py``, ``<frozen importlib._bootstrap>``, ``threading.py``).
_LIB = re.compile(
    r"(?:^|/)(?:site-packages|dist-packages|torch|lib/python3[.\d]*)/|^<frozen |^(?:threading|selectors|"
    r"socket|queue|subprocess|multiprocessing/[\w/]+|concurrent/[\w/]+|asyncio/[\w/]+)\.py$|^\S*\.so(?:\.\d+)*$|"
    r"^$"
)


@dataclass
class Frame:
    fn: str  #: as printed (py-spy qualifies methods: ``RemoteShards.__getitem__``)
    file: str  #: as printed (py-spy: short path; faulthandler: the full path)
    line: int | None

    @property
    def short(self) -> str:
        """``__getitem__ (train.py:91)``."""
        where = self.file.rsplit("/", 1)[-1] + (f":{self.line}" if self.line is not None else "")
        return f"{self.fn.rsplit('.', 1)[-1]} ({where})"

    @property
    def native(self) -> bool:
        """A native frame of ``py-spy dump --native`` (``pthread_cond_wait (libc.so.6)``, ``0x7efd… (libc.so.6)``)."""
        return bool(re.search(r"\.so(?:\.[\d.]+)?$", self.file)) or self.fn.startswith("0x")

    @property
    def own(self) -> bool:
        """A frame of the job's own code (not torch, not an installed package, not the interpreter)."""
        return not _LIB.search(self.file)


@dataclass
class Thread:
    name: str  #: ``MainThread`` (py-spy's name), ``current`` / ``thread`` (faulthandler), ``stack``
    status: str  #: py-spy's ``idle`` / ``active`` / ``active+gil``; empty for faulthandler
    frames: list[Frame] = field(default_factory=list)  #: innermost first, as both tools print them


@dataclass
class Place:
    """Where one dump's main thread stands."""

    collective: str | None  #: the innermost torch.distributed communication function (``all_reduce``) or None
    op: str | None  #: that function as c10d names the op (``ALLREDUCE``)
    site: str | None  #: the job's own innermost frame, ``train.py:102`` (where it called the collective)
    frames: list[Frame]  #: the main thread's frames, innermost first
    thread: str

    @property
    def key(self) -> tuple[str | None, str | None]:
        """What ranks are compared by: (collective or the innermost function, the job's own call site)."""
        inner = self.collective or (self.frames[0].fn if self.frames else None)
        return inner, self.site

    def text(self, depth: int = 4) -> str:
        """``in all_reduce at train.py:102 (all_reduce ← wrapper ← sync_grads ← main)`` or ``not in a
        collective: __getitem__ (train.py:91) ← fetch (fetch.py:54) ← …``."""
        py = [f for f in self.frames if not f.native] or self.frames
        chain = " ← ".join(f.short for f in py[:depth])
        if len(py) > depth:
            chain += " ← …"
        if self.collective:
            return f"in {self.collective} at {self.site or '?'}: {chain}"
        return f"in no collective: {chain}" if chain else "no Python frame"


def threads(raw: str) -> list[Thread]:
    """The thread blocks of one dump record (py-spy or faulthandler), in the order printed."""
    out: list[Thread] = []
    for line in raw.split("\n"):
        line = re.sub(r"^\[(?:default)?\d+\]:", "", line.rstrip("\r"))  # a torchrun --tee copy
        m = _THREAD.match(line)
        if m:
            if m["stack"]:
                out.append(Thread("stack", ""))
            elif m["current"]:
                out.append(Thread("current" if m["current"] == "Current thread" else "thread", ""))
            else:
                out.append(Thread(m["name"] or m["tid"], m["status"]))
            continue
        if not out:
            continue
        f = _PYSPY_FRAME.match(line)
        if f and not line.startswith("     "):
            out[-1].frames.append(Frame(f["fn"], f["file"], int(f["line"]) if f["line"] else None))
            continue
        f = _FH_FRAME.match(line)
        if f:
            out[-1].frames.append(Frame(f["fn"], f["file"], int(f["line"]) if f["line"].isdigit() else None))
    return out


def main_thread(ts: list[Thread]) -> Thread | None:
    """The thread that runs the training loop: the one whose outermost frame is ``<module>`` (a script's main
    thread; ``--native`` adds libc frames below it), else py-spy's ``MainThread``, else faulthandler's current thread, else the first."""
    for t in ts:
        if any(f.fn == "<module>" for f in t.frames):
            return t
    for name in ("MainThread", "current", "stack"):
        for t in ts:
            if t.name == name:
                return t
    return ts[0] if ts else None


def place(raw: str) -> Place | None:
    """Where the main thread of the dump ``raw`` stands; None when the record holds no thread."""
    t = main_thread(threads(raw))
    if t is None:
        return None
    coll = None
    site = None
    for i, f in enumerate(t.frames):
        name = f.fn.rsplit(".", 1)[-1]
        if name in COLLECTIVES and "torch/distributed/" in f.file:
            coll = name
            site = next((g for g in t.frames[i + 1 :] if g.own), None)
            break
    if coll is None:
        site = next((g for g in t.frames if g.own), None)
    where = None if site is None else f"{site.file.rsplit('/', 1)[-1]}:{site.line}"
    return Place(coll, COLLECTIVES.get(coll) if coll else None, where, t.frames, t.name)


def _groups(path: list[str], kind: list[str | None], body: list[str], stream: list[str]) -> list[list[int]]:
    """Rows that form one dump: a ``stack_dump`` row followed by the rows that continue it (py-spy's
    ``Python v…`` / ``Parent Process`` lines, blank lines and further thread blocks of the same stream)."""
    groups: list[list[int]] = []
    cur: list[int] | None = None
    for i, k in enumerate(kind):
        same = cur is not None and path[cur[0]] == path[i] and stream[cur[0]] == stream[i]
        if k == KIND:
            header = body[i].startswith("Process ")
            if same and not header and cur is not None:
                cur.append(i)
                continue
            cur = [i]
            groups.append(cur)
            continue
        if (
            same
            and cur is not None
            and (body[i].strip() == "" or body[i].startswith(("Python v", "Parent Process ")))
        ):
            cur.append(i)
            continue
        cur = None
    # trailing blank lines belong to the next row, not the dump
    for g in groups:
        while len(g) > 1 and body[g[-1]].strip() == "":
            g.pop()
    return groups


def dump_rows(df: pl.DataFrame, stream_keys: list[str]) -> pl.DataFrame:
    """One row per dump: its header and thread rows merged into the first (``raw`` and ``record`` joined,
    ``line_count`` summed); ``op`` and ``message`` from :func:`place`. A ``Process`` line that no thread block
    or ``Python v`` line follows is not a py-spy header: its kind is cleared (later rules may claim it)."""
    if "kind" not in df.columns or not (df["kind"] == KIND).any():
        return df
    paths = df.filter(pl.col("kind") == KIND)["path"].unique()
    inside = df["path"].is_in(paths.implode())
    sub = df.with_row_index("__sr").filter(inside)
    keys = [k for k in stream_keys if k in sub.columns]
    stream = (
        sub.select(pl.concat_str([pl.col(k).cast(pl.String).fill_null("") for k in keys], separator="\t"))
        .to_series()
        .to_list()
        if keys
        else [""] * sub.height
    )
    groups = _groups(sub["path"].to_list(), sub["kind"].to_list(), sub["body"].to_list(), stream)
    raw = sub["raw"].to_list()
    rec = sub["record"].to_list() if "record" in sub.columns else sub["body"].to_list()
    lc = sub["line_count"].to_list()
    body = sub["body"].to_list()
    heads, drops, new_raw, new_rec, new_lc, ops, msgs, bad = [], [], [], [], [], [], [], []
    # the rank of the debug server's ``=== Rank N: addr ===`` line above each row, within its file
    server_rank: list[int | None] = []
    last: int | None = None
    for i, b in enumerate(body):
        if i and sub["path"][i] != sub["path"][i - 1]:
            last = None
        m = DEBUG_SERVER_RANK.match(b.strip())
        if m:
            last = int(m[1])
        server_rank.append(last)
    stated: list[int | None] = []
    for g in groups:
        h = g[0]
        if body[h].startswith("Process ") and (
            len(g) == 1 or not any(body[j].startswith("Python v") for j in g)
        ):
            bad.append(h)
            continue
        text = "\n".join(rec[j] for j in g)
        p = place(text)
        heads.append(h)
        drops.extend(g[1:])
        new_raw.append("\n".join(raw[j] for j in g))
        new_rec.append(text)
        new_lc.append(sum(lc[j] for j in g))
        ops.append(None if p is None else p.op)
        who = "py-spy dump" if body[h].startswith("Process ") else "stack dump"
        if p is not None and p.thread not in ("current", "stack", "thread"):
            who += f", thread {p.thread}"
        msgs.append(f"{who}: {'no thread' if p is None else p.text()}")
        stated.append(server_rank[h])
    sr = sub["__sr"]
    n = df.height
    out = df
    if bad:
        idx = sr.gather(bad)
        out = out.with_columns(
            out["kind"].scatter(idx, None),
            out["layer"].scatter(idx, None)
            if "layer" in out.columns
            else pl.lit(None, dtype=pl.String).alias("layer"),
        )
        if "rule" in out.columns:
            out = out.with_columns(out["rule"].scatter(idx, None))
    if heads:
        idx = sr.gather(heads)
        upd = {
            "raw": out["raw"].scatter(idx, pl.Series(new_raw, dtype=pl.String)),
            "line_count": out["line_count"].scatter(idx, pl.Series(new_lc).cast(out["line_count"].dtype)),
            "message": out["message"].scatter(idx, pl.Series(msgs, dtype=pl.String)),
            "op": out["op"].scatter(idx, pl.Series(ops, dtype=pl.String)),
        }
        if "record" in out.columns:
            upd["record"] = out["record"].scatter(idx, pl.Series(new_rec, dtype=pl.String))
        if any(r is not None for r in stated):
            base = (
                out["rank_stated"].cast(pl.Int32)
                if "rank_stated" in out.columns
                else pl.Series("rank_stated", [None] * n, dtype=pl.Int32)
            )
            ss = pl.Series(stated, dtype=pl.Int32)
            upd["rank_stated"] = base.scatter(idx, ss.fill_null(base.gather(idx)))
        out = out.with_columns([s.alias(k) for k, s in upd.items()])
    if drops:
        keep = pl.Series([True] * n).scatter(sr.gather(drops), False)
        out = out.filter(keep)
    return out
