"""The NCCL COLL fast path: the lines that make up 90 %+ of an ``NCCL_DEBUG=INFO`` log, in one regex pass.

``NCCL_DEBUG_SUBSYS=COLL`` prints one line per collective (NVIDIA NCCL 2.3.7 – 2.30.7, ``src/enqueue.cc``)::

    node-a:41237:41237 [0] NCCL INFO AllReduce: opCount 1f4 sendbuff 0x7f3b52000000 recvbuff 0x7f3b52000000 \
count 25165824 datatype 7 op 0 root 0 comm 0x55d0c3a4e2b0 [nranks=16] stream 0x55d0c2f1a9e0

A physical line that matches :data:`FAST_COLL` as a whole (no stamp, transport or tee prefix, nothing after
the stream) skips the generic prefix and rule machinery: one literal test and one anchored regex test pick
it; its fields are slices between literal finds (the part before ``NCCL INFO`` and the communicator's
tail, which repeat, are parsed once per distinct value), giving the NCCL prefix fields and the COLL rule's
fields. The result is the same row the generic path gives (``parsers.nccl.PREFIX`` +
the ``nccl_coll`` rule); ``tests/test_ingest_fastpath.py`` checks that equivalence on every corpus case.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar

import polars as pl

from parsers.nccl import COMM_KEY, NCCL_OPS, comm_map
from parsers.rules import contains_parallel, parallelism

#: One NCCL INFO COLL line, whole: the shape of ``parsers.nccl.PREFIX`` + the ``nccl_coll`` rule, in ASCII
#: classes only (a line with other characters in those places simply takes the generic path), which keeps the
#: regex a small DFA (3x faster than the Unicode classes).
FAST_COLL = (
    # (?-u): byte classes, the same matches on UTF-8 text (every class is ASCII), ~12 % faster.
    r"(?-u)^[A-Za-z0-9][A-Za-z0-9_.-]*:[0-9]+:[0-9]+ (?:\[[0-9]+\] )?NCCL INFO "
    # Buffers as glibc prints a pointer (``%p``): then no token before ``count`` can be a field name, so the
    # fields are found by the first occurrence of their name (:func:`_parse_chunk`).
    r"[A-Za-z]+: opCount [0-9a-f]+ sendbuff (?:0x[0-9a-f]+|\(nil\)) recvbuff (?:0x[0-9a-f]+|\(nil\)) count [0-9]+ "
    r"datatype [0-9]+ op [0-9]+ root -?[0-9]+ comm 0x[0-9a-f]+ \[nranks=[0-9]+\](?: stream [!-~]+)?$"
)
#: Rows parsed at once (the field slices of a chunk are transient).
CHUNK_ROWS = 250_000
#: Lines :func:`fast_mask` tests at once (a progress report after each part).
SCAN_ROWS = 1_000_000
#: Literal every fast-path line holds (a cheap pre-filter before the regex).
LITERAL = ": opCount "
#: Progress of the parse (set by ``correlator.ingest`` while it parses): called with the number of lines
#: of a chunk after each chunk is parsed (:func:`parse_fast_rows`' chunks and the slices of generic-path lines
#: of ``parsers.parse_lines_split``; the caller sums them), so a long parse reports as it goes.
ON_ROWS: ContextVar[Callable[[int], None] | None] = ContextVar("coll_on_rows", default=None)


def fast_mask(raw: pl.Series, on_rows: Callable[[int], None] | None = None) -> pl.Series:
    """Per line: True where ``raw`` is a whole NCCL INFO COLL line of the fast-path shape (same length).

    The lines are tested :data:`SCAN_ROWS` at a time, the regex on all cores
    (:func:`parsers.rules.contains_parallel`); ``on_rows(n)`` is called after each part with its
    number of lines, so the scan of a big job reports as it goes.
    """
    parts = []
    for i in range(0, raw.len(), SCAN_ROWS):
        part = raw.slice(i, SCAN_ROWS)
        lit = part.str.contains(LITERAL, literal=True).fill_null(False)
        if lit.any():
            # ``filter``, not ``gather``: a lines frame is one chunk per file, and a gather of strings across
            # many chunks copies their text (4 s for the 4.9 M COLL lines of the 256-rank bench, against 0.05 s).
            ok = contains_parallel(part.filter(lit), FAST_COLL).fill_null(False)
            if not ok.all():
                lit = lit.scatter(lit.arg_true().filter(~ok), False)
        parts.append(lit)
        if on_rows is not None:
            on_rows(part.len())
    if not parts:
        return pl.Series(raw.name, [], dtype=pl.Boolean)
    return parts[0] if len(parts) == 1 else pl.concat(parts)


def parse_fast_rows(df: pl.DataFrame, report: Callable[[int], None] | None = None) -> pl.DataFrame:
    """The parsed rows of fast-path lines (``df``: lines frame rows for which :func:`fast_mask` holds), but
    their ``pg``: the source columns of ``df`` plus ``host, pid, cuda_dev, layer, kind, severity, rule, seq,
    op, numel, comm, world_size, message, record`` (message and record are the text after ``NCCL INFO``).
    ``pg`` needs the communicator map of the Init lines, which the generic path finds: :func:`with_pg` adds it
    once that is known, so the rows can be built while the generic path runs.
    ``report(rows)``: called after each chunk of :data:`CHUNK_ROWS` is parsed (:data:`ON_ROWS` when None).
    Each row is built from its own line, so the rows of a subset of ``df`` are those rows of the result."""
    report = report if report is not None else ON_ROWS.get()
    if df.height <= CHUNK_ROWS:
        out = _parse_chunk(df)
        if report is not None:
            report(df.height)
        return out
    # Chunks bound the transient slices and give progress reports; they are parsed on a thread each (up to
    # ``rules.parallelism``: an eager polars call runs on one core and releases the GIL), and reported and
    # concatenated in order. 256-rank bench, 4.9 M lines, 2 cores: 7.9 s one chunk after another, 5.7 s.
    starts = range(0, df.height, CHUNK_ROWS)
    parts = []
    with ThreadPoolExecutor(max_workers=parallelism(len(starts))) as pool:
        futures = [pool.submit(_parse_chunk, df.slice(i, CHUNK_ROWS)) for i in starts]
        for f in futures:
            parts.append(f.result())
            if report is not None:
                report(parts[-1].height)
    return pl.concat(parts, how="vertical")


def with_pg(rows: pl.DataFrame, comm_pg: dict[str, str]) -> pl.DataFrame:
    """``rows`` (of :func:`parse_fast_rows`) with ``pg``: the commId ``comm_pg`` (``"host|pid|comm" -> commId``
    from the Init lines, :func:`parsers.nccl.comm_map`) gives their key (``parsers.nccl.COMM_KEY``), null where
    none."""
    pg = (
        COMM_KEY.replace_strict(comm_pg, default=None, return_dtype=pl.String)
        if comm_pg
        else pl.lit(None, dtype=pl.String)
    )
    return rows.with_columns(pg.alias("pg"))


#: The column :func:`per_distinct` names its values.
DISTINCT = "__v"


def per_distinct(values: pl.Series, *exprs: pl.Expr) -> pl.DataFrame:
    """``exprs`` (over column :data:`DISTINCT`) evaluated once per distinct value of ``values`` and joined
    back: one row per value, in order. For columns of a few distinct values (a process's line head, a
    communicator's tail), where a regex per row would cost a full pass over the text."""
    table = pl.DataFrame({DISTINCT: values.unique()}).with_columns(*exprs)
    return pl.DataFrame({DISTINCT: values}).join(table, on=DISTINCT, how="left", maintain_order="left")


def between(text: pl.Expr, start: str, end: str) -> pl.Expr:
    """The text between the first ``start`` and the first ``end`` in ``text`` (literals; ``end`` must
    follow ``start``, as the fields of a line that matched :data:`FAST_COLL` do)."""
    a = text.str.find(start, literal=True) + len(start)
    return text.str.slice(a, text.str.find(end, literal=True) - a)


def _parse_chunk(df: pl.DataFrame) -> pl.DataFrame:
    """:func:`parse_fast_rows` of at most :data:`CHUNK_ROWS` rows."""
    # The line matched FAST_COLL whole: ``host:pid:tid [dev] NCCL INFO Op: opCount N sendbuff B recvbuff B
    # count N datatype N op N root N comm 0x.. [nranks=N] [stream 0x..]``. Its tokens hold no space and B is
    # a pointer, so the first occurrence of each field name is that field: the fields are slices between
    # literal finds (no regex, no token lists: a split into tokens cost 2x the whole parse). The part
    # before ``NCCL INFO`` and the one from ``comm`` on repeat for every line of a process and communicator:
    # they are parsed once per distinct value and joined back.
    raw = df["raw"]
    at = raw.str.find(" NCCL INFO ", literal=True)
    rest = raw.str.slice(at + 11)
    h = per_distinct(
        raw.str.slice(0, at),
        pl.col(DISTINCT).str.extract(r"^([^:]*)", 1).alias("host"),
        pl.col(DISTINCT).str.extract(r"^[^:]*:([0-9]+)", 1).cast(pl.Int64, strict=False).alias("pid"),
        pl.col(DISTINCT).str.extract(r" \[([0-9]+)\]$", 1).cast(pl.Int32, strict=False).alias("cuda_dev"),
    )
    r = pl.col("rest")
    ext = pl.DataFrame({"rest": rest}).select(
        r.str.slice(0, r.str.find(":", literal=True)).alias("op"),
        between(r, " opCount ", " sendbuff ").str.to_integer(base=16, strict=False).alias("seq"),
        between(r, " count ", " datatype ").cast(pl.Int64, strict=False).alias("numel"),
        r.str.slice(r.str.find(" comm ", literal=True) + 6).alias("tail"),
    )
    t = per_distinct(
        ext["tail"],
        pl.col(DISTINCT).str.extract(r"^([^ ]+)", 1).alias("comm"),
        pl.col(DISTINCT)
        .str.extract(r"^[^ ]+ \[nranks=([0-9]+)\]", 1)
        .cast(pl.Int32, strict=False)
        .alias("world_size"),
    )
    n = df.height
    pid = df["pid"].fill_null(h["pid"]) if "pid" in df.columns else h["pid"]
    out = df.drop([c for c in ("body", "layer", "pid") if c in df.columns]).with_columns(
        h["host"].alias("host"),
        pid.alias("pid"),
        h["cuda_dev"].alias("cuda_dev"),
        pl.lit("nccl", dtype=pl.String).alias("layer"),
        pl.lit("nccl_coll", dtype=pl.String).alias("kind"),
        pl.lit("info", dtype=pl.String).alias("severity"),
        pl.lit("nccl_coll", dtype=pl.String).alias("rule"),
        ext["seq"].alias("seq"),
        ext["op"].replace(NCCL_OPS).alias("op"),
        ext["numel"].alias("numel"),
        t["comm"].alias("comm"),
        t["world_size"].alias("world_size"),
        rest.alias("message"),
        rest.alias("record"),
    )
    assert out.height == n
    return out


__all__ = [
    "CHUNK_ROWS",
    "DISTINCT",
    "FAST_COLL",
    "LITERAL",
    "ON_ROWS",
    "SCAN_ROWS",
    "between",
    "comm_map",
    "fast_mask",
    "parse_fast_rows",
    "per_distinct",
    "with_pg",
]
