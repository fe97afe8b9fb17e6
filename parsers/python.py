"""Python tracebacks and exceptions, and the grouping of multi-line records.

A traceback (``Traceback (most recent call last):`` + indented frames + the exception line) becomes ONE
row; so do C++ exception texts (``Exception raised from … at …``, ``frame #N: …``, ``what():``) and any
indented continuation lines (the ChildFailedError ``[i]:`` blocks, torchelastic launch configs).
Grouping is done with vectorized shifts and cumulative sums within each stream, never a Python loop.
The exception line gives ``exc_type`` and the row's ``message``; rules then classify the message
(CUDA OOM and CUDA errors here, distributed errors in :mod:`parsers.c10d`, the rest ``python_exception``).
"""

from __future__ import annotations

import re

import polars as pl

from parsers.rules import Rule, ascii_classes

TB_START = "Traceback (most recent call last):"
#: An exception line at indentation 0: ``pkg.mod.SomeError: message`` (message optional).
EXC_LINE = ascii_classes(
    r"^(?P<exc_type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Fault|Warning)|[A-Za-z_][\w.]*\.[A-Z]\w*)(?::(?: (?P<exc_msg>.*))?)?$"
)
_CPP_CONT = ascii_classes(
    r"^(?:Exception raised from |frame #\d+: |\s*what\(\): |Last error:|ncclRemoteError|ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclInvalid)"
)

SRC = "CPython traceback (3.8 – 3.13) with torch excepthook prefixes"

RULES: list[Rule] = [
    Rule(
        "cuda_oom",
        "cuda_oom",
        "python",
        "OutOfMemoryError",
        r"^(?:[\w.]+\.)?OutOfMemoryError(?::|$)",
        "error",
        "torch.cuda.OutOfMemoryError, torch 1.13 – 2.13",
        "[rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 336.00 MiB. GPU  has a total "
        "capacity of 79.15 GiB of which 141.25 MiB is free.",
    ),
    Rule(
        "cuda_oom_text",
        "cuda_oom",
        "python",
        "CUDA out of memory",
        None,
        "error",
        "torch CUDA caching allocator",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)",
    ),
    Rule(
        "cuda_error",
        "cuda_error",
        "python",
        "CUDA error",
        r"CUDA error: (?P<cuda_msg>.*)",
        "error",
        "torch c10/cuda CUDAException, torch 1.x – 2.13",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ),
    Rule(
        "illegal_memory",
        "cuda_error",
        "python",
        "illegal memory access",
        None,
        "error",
        "CUDA runtime",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
    ),
    Rule(
        "device_assert",
        "cuda_error",
        "python",
        "device-side assert",
        None,
        "error",
        "CUDA runtime",
        "RuntimeError: CUDA error: device-side assert triggered",
    ),
]

#: A traceback whose exception line the excerpt lost (the paste ends inside the frames): still an exception.
CUT_TRACEBACK = Rule(
    "cut_traceback",
    "python_exception",
    "python",
    TB_START,
    r"^(?:\[rank\d+\]: )?Traceback \(most",
    "error",
    "CPython traceback cut before its exception line (pasted excerpts: diffusion-pipe#333)",
    'Traceback (most recent call last):\n  File "train.py", line 12, in <module>',
)

#: Applied after c10d's rules, to exception rows nothing more specific matched.
CATCH_ALL = Rule(
    "python_exception",
    "python_exception",
    "python",
    "",
    None,
    "error",
    SRC,
    "[rank2]: CorruptBatchError: corrupt sample in shard 17 (record 4093): expected 16 features, got 15",
)

TERMINATE = Rule(
    "cpp_terminate",
    "python_exception",
    "python",
    "terminate called after throwing",
    r"instance of '(?P<exc_type>[^']+)'",
    "fatal",
    "libstdc++ std::terminate",
    "terminate called after throwing an instance of 'c10::DistBackendError'",
)


_CANDIDATE = r"^(?:[ \t]|Traceback|" + _CPP_CONT[4:]


def group_records(df: pl.DataFrame, stream_keys: list[str]) -> pl.DataFrame:
    """Merge continuation rows into the record they continue (see :func:`_group_records`).

    Only files holding a continuation candidate (an indented line, a traceback, a C++ exception text, an
    exception line, a hard-wrapped line) go through the sort/window/join machinery; in a large job that is
    a handful of stderr and launcher files, while millions of NCCL lines are their own records.
    """
    body = pl.col("body")
    cand = df.select(
        (
            body.str.contains(_CANDIDATE) | pl.col("wrap_cont").fill_null(False) | body.str.contains(EXC_LINE)
        ).alias("c")
    )["c"]
    paths = df.filter(cand)["path"].unique()
    if paths.len() == 0:
        return df.with_columns(pl.col("body").alias("record"))
    inside = df["path"].is_in(paths.implode())
    if inside.all():
        return _group_records(df, stream_keys)
    # The row index must not start with ``__``: :func:`_group_records` drops such columns, and the sort below
    # then put the grouped files' rows (a null index) before all others instead of in input order.
    df = df.with_row_index("_grp_o2")
    grouped = _group_records(df.filter(inside), stream_keys)
    rest = df.filter(~inside).with_columns(pl.col("body").alias("record"))
    return pl.concat([grouped, rest], how="diagonal_relaxed").sort("_grp_o2").drop("_grp_o2")


def _group_records(df: pl.DataFrame, stream_keys: list[str]) -> pl.DataFrame:
    """Merge continuation rows into the record they continue.

    ``df`` must be sorted by ``path`` and ``line``. Continuations: indented lines after a non-blank
    line; C++ exception continuation lines; the exception line that ends a traceback; lines the
    terminal hard-wrapped (``wrap_cont``). The record keeps the first row's columns, the sum of
    ``line_count``, ``raw`` joined with newlines, ``record`` (all bodies joined) and, for tracebacks,
    the exception line as ``message``.
    """
    keys = ["path", *stream_keys]
    body = pl.col("body")
    blank = body.str.len_chars() == 0
    indented = body.str.contains(r"^[ \t]") & ~body.str.contains(r"^[ \t]*$")
    produced = pl.col("layer").is_not_null()  # the line had its own producer prefix
    df = df.with_row_index("__ord").sort([*keys, "line", "__ord"], nulls_last=True)
    df = df.with_columns(
        (body == TB_START).alias("__tb"),
        indented.alias("__ind"),
        blank.alias("__blank"),
    )
    head = pl.col("__tb") | ~pl.col("__ind")
    df = df.with_columns(head.cum_sum().over(keys).alias("__seg"))
    df = df.with_columns(pl.col("__tb").first().over([*keys, "__seg"]).alias("__seg_tb"))
    prev_blank = pl.col("__blank").shift(1).over(keys).fill_null(True)
    prev_seg_tb = pl.col("__seg_tb").shift(1).over(keys).fill_null(False)
    exc_line = ~pl.col("__ind") & ~pl.col("__tb") & prev_seg_tb & body.str.contains(EXC_LINE)
    cpp_cont = body.str.contains(_CPP_CONT) & ~prev_blank
    cont = (
        (pl.col("__ind") & ~prev_blank & ~produced)
        | (pl.col("__ind") & ~prev_blank & produced & pl.col("__seg_tb"))
        | exc_line
        | (cpp_cont & ~produced)
        | pl.col("wrap_cont").fill_null(False)
    )
    df = df.with_columns(cont.alias("__cont"), exc_line.alias("__exc"))
    df = df.with_columns((~pl.col("__cont")).cum_sum().alias("__rec"))
    multi = df.filter(pl.col("__cont"))
    if multi.height == 0:
        out = df.with_columns(pl.col("body").alias("record"))
    else:
        agg = multi.group_by("__rec").agg(
            pl.col("raw").str.join("\n").alias("__raw_tail"),
            pl.col("body").str.join("\n").alias("__body_tail"),
            pl.col("line_count").sum().alias("__lc_tail"),
            pl.col("body").filter(pl.col("__exc")).last().alias("__exc_body"),
            pl.col("body").filter(pl.col("body").str.contains(r"^\s*what\(\):")).first().alias("__what"),
            pl.col("body").filter(pl.col("wrap_cont").fill_null(False)).str.join("").alias("__wrap"),
        )
        heads = df.filter(~pl.col("__cont")).join(agg, on="__rec", how="left", maintain_order="left")
        out = heads.with_columns(
            pl.when(pl.col("__raw_tail").is_not_null())
            .then(pl.col("raw") + "\n" + pl.col("__raw_tail"))
            .otherwise(pl.col("raw"))
            .alias("raw"),
            pl.when(pl.col("__body_tail").is_not_null())
            .then(pl.col("body") + "\n" + pl.col("__body_tail"))
            .otherwise(pl.col("body"))
            .alias("record"),
            (pl.col("line_count") + pl.col("__lc_tail").fill_null(0)).alias("line_count"),
            pl.when(pl.col("__exc_body").is_not_null())
            .then(pl.col("__exc_body"))
            .when(pl.col("__what").is_not_null())
            .then(pl.col("body") + " " + pl.col("__what").str.strip_chars())
            .when(pl.col("__wrap").fill_null("") != "")
            .then(pl.col("body") + pl.col("__wrap"))
            .otherwise(pl.col("body"))
            .alias("body"),
        )
    drop = [c for c in out.columns if c.startswith("__") and c != "__ord"]
    return out.drop(drop).sort("__ord").drop("__ord")


def exception_fields(df: pl.DataFrame) -> pl.DataFrame:
    """Fill ``exc_type`` from exception lines (the message of a traceback record, or a bare line)."""
    ext = pl.col("message").str.extract(EXC_LINE, 1)
    return df.with_columns(pl.coalesce(pl.col("exc_type"), ext).alias("exc_type"))


def cut_message(df: pl.DataFrame) -> pl.DataFrame:
    """The message of a cut traceback: the deepest frame the excerpt kept (its last line)."""
    if "rule" not in df.columns:
        return df
    cut = pl.col("rule") == CUT_TRACEBACK.name
    last = pl.col("record").str.split("\n").list.last().str.strip_chars()
    return df.with_columns(
        pl.when(cut)
        .then(pl.lit("traceback cut before its exception line; last line: ") + last)
        .otherwise(pl.col("message"))
        .alias("message")
    )


#: A Python traceback frame: ``  File "/opt/app/train.py", line 226, in main`` (CPython 3.x traceback module).
_FRAME_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>[^\s]+)')
#: Frames of installed libraries and of the interpreter, not of the job's own code.
_LIB_FRAME_RE = re.compile(r"(?:/site-packages/|/dist-packages/|/lib/python3[.\d]*/|^<frozen |/torch/)")


#: The collective API of a framework, as a traceback frame's file: torch's ``distributed_c10d.py`` (torch 1.x -
#: 2.15); PaddlePaddle's ``paddle/distributed/communication/<op>.py`` (2.5 - 3.3: ``all_reduce.py`` defines
#: ``all_reduce``, ``broadcast.py`` ``broadcast``; ``communication/stream/`` holds their inner layer).
_COLLECTIVE_API_RE = re.compile(
    r"(?:distributed_c10d\.py$|/paddle/distributed/communication/(?!stream/)\w+\.py$)"
)


def call_site(raw: str) -> tuple[str, str] | None:
    """Where a traceback entered a framework's collectives: ``("train.py:226", "broadcast")`` — the job's own
    innermost frame before the collective API frame, and that frame's function (the collective called). The
    API frame is torch's innermost ``distributed_c10d.py`` frame, or PaddlePaddle's outermost
    ``paddle/distributed/communication/<op>.py`` frame (:data:`_COLLECTIVE_API_RE`; a real Paddle 3.3.1
    traceback: ``paddle_train.py:77`` -> ``communication/broadcast.py … in broadcast`` -> ``stream/…``). None
    when the traceback has no such frame or no frame of the job's own code before it. ``raw``: the
    traceback record as the table holds it (``[rankN]:`` prefixes are ignored)."""
    frames = [(m["file"], m["line"], m["fn"]) for m in _FRAME_RE.finditer(raw)]
    api = [i for i, f in enumerate(frames) if _COLLECTIVE_API_RE.search(f[0])]
    if not api:
        return None
    torch = [i for i in api if frames[i][0].endswith("distributed_c10d.py")]
    i = torch[-1] if torch else api[0]
    own = [f for f in frames[:i] if not _LIB_FRAME_RE.search(f[0])]
    if not own:
        return None
    file, line, _fn = own[-1]
    return f"{file.rsplit('/', 1)[-1]}:{line}", frames[i][2]


#: A traceback frame inside a communication function of torch.distributed (``File ".../distributed_c10d.py",
#: line 3504, in broadcast_object_list``; torch 1.x - 2.15 keep the collectives and their object helpers
#: there). Setup functions (``init_process_group``, ``new_group``) are not waits and do not match.
COLLECTIVE_FRAME_RE = ascii_classes(
    r'distributed_c10d\.py", line \d+, in (?:_?(?:all_?reduce|all_?gather|reduce_scatter|broadcast|barrier|'
    r"monitored_barrier|gather|scatter|send|recv|isend|irecv|all_to_all|reduce|batch_isend_irecv)\w*|"
    r"_tensor_to_object|_object_to_tensor|wait)\b"
    # PaddlePaddle 2.5 - 3.3: paddle/distributed/communication/<op>.py and its stream/ layer (cap-paddle-05)
    r'|/paddle/distributed/communication/(?:stream/)?\w+\.py", line \d+, in _?(?:all_?reduce|all_?gather|'
    r"reduce_scatter|broadcast|barrier|gather|scatter|send|recv|isend|irecv|all_?to_?all|reduce)\w*\b"
    # Horovod 0.16 - 0.28: horovod/{torch,tensorflow,mxnet}/mpi_ops.py (horovod#2907, OpenNMT-tf#985)
    r'|/horovod/\w+/(?:mpi_ops|__init__)\.py", line \d+, in _?(?:allreduce|allgather|broadcast|alltoall|'
    r"reducescatter|grouped_allreduce|synchronize|join|barrier)\w*\b"
)
