"""The NCCL COLL fast path: the lines that make up 90 %+ of an ``NCCL_DEBUG=INFO`` log, in one regex pass.

``NCCL_DEBUG_SUBSYS=COLL`` prints one line per collective (NVIDIA NCCL 2.3.7 – 2.30.7, ``src/enqueue.cc``)::

    node-a:41237:41237 [0] NCCL INFO AllReduce: opCount 1f4 sendbuff 0x7f3b52000000 recvbuff 0x7f3b52000000 \
count 25165824 datatype 7 op 0 root 0 comm 0x55d0c3a4e2b0 [nranks=16] stream 0x55d0c2f1a9e0

A physical line that matches :data:`FAST_COLL` as a whole (no stamp, transport or tee prefix, nothing after
the stream) skips the generic prefix and rule machinery: one literal test and one anchored regex test pick
it, one split into space-separated tokens gives the NCCL prefix fields and the COLL rule's fields. The result is the same row the generic path gives (``parsers.nccl.PREFIX`` +
the ``nccl_coll`` rule); ``tests/test_ingest_fastpath.py`` checks that equivalence on every corpus case.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import polars as pl

from parsers.nccl import NCCL_OPS

#: One NCCL INFO COLL line, whole: the shape of ``parsers.nccl.PREFIX`` + the ``nccl_coll`` rule, in ASCII
#: classes only (a line with other characters in those places simply takes the generic path), which keeps the
#: regex a small DFA (3x faster than the Unicode classes).
FAST_COLL = (
    # (?-u): byte classes, the same matches on UTF-8 text (every class is ASCII), ~12 % faster.
    r"(?-u)^[A-Za-z0-9][A-Za-z0-9_.-]*:[0-9]+:[0-9]+ (?:\[[0-9]+\] )?NCCL INFO "
    r"[A-Za-z]+: opCount [0-9a-f]+ sendbuff [!-~]+ recvbuff [!-~]+ count [0-9]+ "
    r"datatype [0-9]+ op [0-9]+ root -?[0-9]+ comm 0x[0-9a-f]+ \[nranks=[0-9]+\](?: stream [!-~]+)?$"
)
#: Rows parsed at once (the token lists of a chunk are transient; ~100 MB per 250,000 lines).
CHUNK_ROWS = 250_000
#: Literal every fast-path line holds (a cheap pre-filter before the regex).
LITERAL = ": opCount "
#: Progress of the parse (set by ``correlator.ingest`` while it parses): called with the number of lines
#: of a chunk after each chunk is parsed (:func:`parse_fast`'s chunks and the slices of generic-path lines
#: of ``parsers.parse_lines_split``; the caller sums them), so a long parse reports as it goes.
ON_ROWS: ContextVar[Callable[[int], None] | None] = ContextVar("coll_on_rows", default=None)


def fast_mask(raw: pl.Series) -> pl.Series:
    """Per line: True where ``raw`` is a whole NCCL INFO COLL line of the fast-path shape."""
    lit = raw.str.contains(LITERAL, literal=True).fill_null(False)
    if not lit.any():
        return lit
    idx = lit.arg_true()
    ok = raw.gather(idx).str.contains(FAST_COLL).fill_null(False)
    return lit.scatter(idx.filter(~ok), False) if not ok.all() else lit


def parse_fast(df: pl.DataFrame, comm_pg: dict[str, str]) -> pl.DataFrame:
    """The parsed rows of fast-path lines (``df``: lines frame rows for which :func:`fast_mask` holds).

    ``comm_pg``: ``"host|pid|comm" -> commId`` from the Init lines (see ``parsers.nccl.resolve_comms``).
    Returns the source columns of ``df`` plus ``host, pid, cuda_dev, layer, kind, severity, rule, seq, op,
    numel, comm, world_size, pg, message, record`` (body and record are the text after ``NCCL INFO``).
    """
    if df.height > CHUNK_ROWS:  # the token lists are ~2x the text: bound them by parsing in chunks
        return pl.concat(
            [parse_fast(df.slice(i, CHUNK_ROWS), comm_pg) for i in range(0, df.height, CHUNK_ROWS)],
            how="vertical",
        )
    out = _parse_chunk(df, comm_pg)
    report = ON_ROWS.get()
    if report is not None:
        report(df.height)
    return out


def _parse_chunk(df: pl.DataFrame, comm_pg: dict[str, str]) -> pl.DataFrame:
    """:func:`parse_fast` of at most :data:`CHUNK_ROWS` rows."""
    # The line matched FAST_COLL whole, so its space-separated tokens are known by position (one split,
    # no captures): host:pid:tid [dev] NCCL INFO Op: opCount N sendbuff B recvbuff B count N datatype N
    # op N root N comm 0x.. [nranks=N] [stream 0x..].
    tok = df["raw"].str.split(" ")
    off = tok.list.get(1).str.starts_with("[").cast(pl.Int32)
    t = pl.DataFrame({"t": tok, "o": off, "raw": df["raw"]})
    at = lambda i: pl.col("t").list.get(pl.col("o") + i)
    hpt = pl.col("t").list.get(0).str.split(":")
    ext = t.select(
        hpt.list.get(0).alias("host"),
        hpt.list.get(1).cast(pl.Int64, strict=False).alias("pid"),
        pl.when(pl.col("o") == 1)
        .then(pl.col("t").list.get(1).str.slice(1).str.strip_suffix("]"))
        .cast(pl.Int32, strict=False)
        .alias("cuda_dev"),
        at(3).str.strip_suffix(":").alias("op"),
        at(5).str.to_integer(base=16, strict=False).alias("seq"),
        at(11).cast(pl.Int64, strict=False).alias("numel"),
        at(19).alias("comm"),
        at(20).str.slice(8).str.strip_suffix("]").cast(pl.Int32, strict=False).alias("world_size"),
        pl.col("raw").str.slice(pl.col("raw").str.find(" NCCL INFO ", literal=True) + 11).alias("rest"),
    )
    rest = ext["rest"]
    n = df.height
    pid = df["pid"].fill_null(ext["pid"]) if "pid" in df.columns else ext["pid"]
    out = df.drop([c for c in ("body", "layer", "pid") if c in df.columns]).with_columns(
        ext["host"].alias("host"),
        pid.alias("pid"),
        ext["cuda_dev"].alias("cuda_dev"),
        pl.lit("nccl", dtype=pl.String).alias("layer"),
        pl.lit("nccl_coll", dtype=pl.String).alias("kind"),
        pl.lit("info", dtype=pl.String).alias("severity"),
        pl.lit("nccl_coll", dtype=pl.String).alias("rule"),
        ext["seq"].alias("seq"),
        ext["op"].replace(NCCL_OPS).alias("op"),
        ext["numel"].alias("numel"),
        ext["comm"].alias("comm"),
        ext["world_size"].alias("world_size"),
        rest.alias("message"),
        rest.alias("record"),
    )
    key = pl.concat_str(
        [pl.col("host").fill_null(""), pl.col("pid").cast(pl.String).fill_null(""), pl.col("comm")],
        separator="|",
    )
    pg = (
        key.replace_strict(comm_pg, default=None, return_dtype=pl.String)
        if comm_pg
        else pl.lit(None, dtype=pl.String)
    )
    assert out.height == n
    return out.with_columns(pg.alias("pg"))


def comm_map(df: pl.DataFrame) -> dict[str, str]:
    """``"host|pid|comm" -> commId`` from the parsed Init lines of ``df`` (as ``parsers.nccl.resolve_comms``)."""
    if "comm" not in df.columns or "comm_id" not in df.columns:
        return {}
    key = pl.concat_str(
        [pl.col("host").fill_null(""), pl.col("pid").cast(pl.String).fill_null(""), pl.col("comm")],
        separator="|",
    )
    inits = df.filter(
        (pl.col("kind") == "nccl_init") & pl.col("comm_id").is_not_null() & pl.col("comm").is_not_null()
    )
    return dict(inits.select(key.alias("k"), "comm_id").unique(subset="k").iter_rows())
