"""One reducer, one kind vocabulary: the rows of an event table that diagnosis needs.

The kinds are declared once on :class:`correlator.schema.Kind` (``Kind.ROUTINE``, ``Kind.SEQUENCED``,
``Kind.TAIL``, ``Kind.WATCH_ROUTINE``); streaming ingest (``correlator.batch``, ``correlator.streaming``),
the diagnosis of a parquet table (``correlator.api``) and the live watcher (``correlator.watch``) reduce
with the functions here:

- every row except the routine families is kept whole (faults, launcher/agent output, NCCL init/abort,
  rendezvous, the application's own non-progress lines, unparsed lines …);
- ``Kind.SEQUENCED`` rows (NCCL COLL and DETAIL fingerprints): the last ``keep_last`` per (rank, process
  group) — the highest sequence numbers a rank entered, which is what alignment, clock offsets and the
  straggler rules use;
- ``Kind.TAIL`` rows: progress (``step_progress``), the last ``keep_last`` per rank; NCCL INFO chatter
  (kind ``log``, layer ``nccl``), except the rows that state a world size or map addresses to hosts
  (:data:`NCCL_KEEP`), the last ``keep_last`` per rank;
- a training script's own lines (:func:`app_lines`: its log lines, progress bars and unparsed lines), the
  first :data:`APP_HEAD` and the last :data:`APP_TAIL` per rank (or file) and kind: an application-heavy
  job is mostly such lines, and diagnosis reads them near the faults (the last work before them) and at the
  start (a configuration printed per rank);
- of the rows above cut by their position (application, progress and chatter lines, :data:`TEXT_KINDS`),
  every one that a signature's regex could match is kept whole (:func:`signature_text`), so that a
  signature matched on the reduced table sees the lines it would match in the whole one.

:func:`reduce_for_diagnosis` and :func:`kept`/:func:`select` work on finished tables (top-k of top-k's
compose over batches and row-group chunks); :func:`reduce_store` is the watcher's reduction of its store of
parsed lines before identity (per file, stream and kind, the first ``head`` and the last ``keep_last``
routine rows, ``Kind.WATCH_ROUTINE``).

Where the rows reduced together hold a collective mismatch, the first line of each template per rank (or file)
is kept whole too (:func:`template_firsts`): diagnosis then compares the configuration lines ranks printed.
Positions (first, last, top-k) are counted apart for duplicates (a tee'd console's copies, which diagnosis
never reads), so that the rows it reads are those it would read without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from correlator.schema import Kind

if TYPE_CHECKING:
    from collections.abc import Iterable

    from correlator.signatures import Signature, TextPatterns

#: How many of the last rows per group the reduced table keeps (``keep_last``; ``ingest(keep_coll=...)``).
KEEP_LAST = 4
#: Of a training script's own lines (:func:`app_lines`), the first and the last this many per rank (or
#: file) and kind are kept. Measured: with only the last 4 kept (and no first), the verdicts of all 255
#: corpus cases, their graphs and, on the whole table, their signatures were byte-identical.
APP_HEAD = 16
APP_TAIL = 64
#: The kinds and layers of :func:`app_lines`.
APP_KINDS = (Kind.LOG, Kind.PROGRESS_BAR, Kind.UNPARSED)
APP_LAYERS = ("app", "unknown")
#: Kinds of the rows the reduction cuts by their text's position (application lines, progress lines, NCCL INFO
#: chatter), of which a signature's line is kept whole (:func:`signature_text`). The NCCL COLL and DETAIL
#: rows (cut by sequence number) are not read: they can be millions, and no built-in signature's rule held on
#: one that the reduction cut (the 255 corpus cases and the bench's COLL job, 2026-12-06).
TEXT_KINDS = (*APP_KINDS, Kind.STEP_PROGRESS)
#: NCCL INFO chatter that is kept whole: it maps addresses to hosts (peer errors name an address).
NCCL_KEEP = ("Bootstrap", "NET/IB : Using", "NET/Socket : Using", "Using network")
#: Numbers a rank states of itself by construction (its rank, pid, ports): not part of a line's template.
OWN_NUMBERS = r"\b(?:\w*rank\w*|pid|port|master)[=:]\s*[\w.]*(?::\d+)?"
#: A number in a line: masked (``#``) in its template.
NUMBER = r"\d+(?:\.\d+)?"
#: Of the templates of a group's application lines (:func:`template_firsts`), the first this many to appear.
TEMPLATES = 256


def nccl_topology(message: pl.Expr) -> pl.Expr:
    """NCCL INFO lines of :data:`NCCL_KEEP` (address-to-host maps, network choice) among ``message``."""
    return message.str.contains_any(list(NCCL_KEEP)).fill_null(False)


def app_lines() -> pl.Expr:
    """A training script's own routine lines: kinds :data:`APP_KINDS` of layers :data:`APP_LAYERS` that
    state no world size (reads ``kind, layer, world_size``)."""
    return (
        pl.col("kind").is_in(list(APP_KINDS))
        & pl.col("layer").is_in(list(APP_LAYERS))
        & pl.col("world_size").is_null()
    ).fill_null(False)


def without_own_numbers(message: pl.Expr) -> pl.Expr:
    """``message`` without the numbers a rank states of itself (:data:`OWN_NUMBERS`: ``rank=3``, ``pid=…``,
    ``port …``)."""
    return message.str.replace_all(OWN_NUMBERS, "")


def line_template(message: pl.Expr) -> pl.Expr:
    """The template of a line's ``message``: without :data:`OWN_NUMBERS`, every :data:`NUMBER` masked as
    ``#`` (``plain model hidden=48, params=1012`` -> ``plain model hidden=#, params=#``). Lines of one template
    on every rank are compared by :func:`correlator.disagreement.config_outlier`."""
    return without_own_numbers(message).str.replace_all(NUMBER, "#")


def holds_mismatch(t: pl.LazyFrame | pl.DataFrame) -> bool:
    """Whether ``t`` holds a collective mismatch (``Kind.COLLECTIVE_MISMATCH``): then diagnosis compares the
    first line of each template per rank (:func:`correlator.disagreement.config_odd_one_out`), which the
    reduction keeps (:func:`template_firsts`). Reads ``kind``."""
    hit = t.lazy().filter(pl.col("kind") == Kind.COLLECTIVE_MISMATCH).select(pl.len()).collect().item()
    return bool(hit)


def template_firsts(t: pl.LazyFrame, ident: str, groups: list[pl.Expr] | None = None) -> pl.Series:
    """The ``ident`` values of the first row (lowest ``ident``) of each line template (:func:`line_template`)
    per group among the rows of layer app of :data:`TEXT_KINDS` that are not duplicates, of at most
    :data:`TEMPLATES` templates per group (the first to appear). ``groups``: default the rank, else the file
    (``rank``; ``path`` where no rank). Reads ``kind, layer, duplicate`` (where there is one), ``message`` and
    the group columns of those rows only.

    :func:`correlator.disagreement.config_outlier` compares the first line of each template per rank (a
    configuration line where one rank differs, cap-07: ``hidden=48, … params=1012`` against 676 on the
    others): that line may be anywhere in a rank's log, not only among the first or last the reduction keeps.
    The first of a template in a whole table is the first in the part that holds it, and among the first
    :data:`TEMPLATES` there: this composes over batches and chunks as the top-k's do."""
    by = (
        groups
        if groups is not None
        else [pl.col("rank"), pl.when(pl.col("rank").is_null()).then(pl.col("path"))]
    )
    names = [f"__g{i}" for i in range(len(by))]
    app = (pl.col("layer") == "app") & pl.col("kind").is_in(list(TEXT_KINDS))
    if "duplicate" in t.collect_schema().names():  # diagnosis reads no duplicate (a tee'd console's copy)
        app &= ~pl.col("duplicate").fill_null(False)
    # the templates of those rows only (0.12-0.2 s for the 360k of the bench's 8-rank application job, 2 cores),
    # then each step on the result of the one before
    tpl = (
        t.filter(app)
        .select(
            ident,
            *[g.alias(n) for g, n in zip(by, names, strict=True)],
            line_template(pl.col("message")).alias("__tpl"),
        )
        .collect(engine="streaming")
    )
    firsts = tpl.filter(pl.col(ident) == pl.col(ident).min().over(*names, "__tpl"))
    return firsts.filter(pl.col(ident).rank("ordinal").over(names) <= TEMPLATES)[ident]


def signature_patterns(sigs: Iterable[Signature] | None = None) -> TextPatterns:
    """The text patterns of the signatures ``sigs`` (default: the built-in library) whose rows the reduction
    keeps whole: the regexes of every rule that can hold on a row of :data:`TEXT_KINDS`."""
    from correlator import signatures

    return signatures.text_patterns(TEXT_KINDS, None, sigs)


def signature_text(t: pl.LazyFrame, ident: str, text: TextPatterns | None = None) -> pl.Series:
    """The ``ident`` values of the rows of ``t`` of :data:`TEXT_KINDS` whose text ``text`` matches (default:
    :func:`signature_patterns` of the built-in library); reads ``message`` and ``raw`` of those rows only."""
    pats = text if text is not None else signature_patterns()
    # a frame of key columns only (a test's, a projection) has no text there
    missing = [c for c in ("message", "raw") if c not in t.collect_schema().names()]
    t = t.with_columns(pl.lit(None, pl.String).alias(c) for c in missing)
    # Two steps: the text regexes read only the rows of these kinds (one lazy plan would fuse both filters into
    # one predicate and run the regexes over every row: 0.055 s against 0.011 s on a 320k-row COLL table).
    rows = t.filter(pl.col("kind").is_in(list(TEXT_KINDS))).select(ident, "message", "raw").collect()
    return rows.filter(pats.expr())[ident]


def kept(
    t: pl.LazyFrame | pl.DataFrame,
    order: str,
    keep_last: int,
    ident: str | None = None,
    chatter: pl.Expr | None = None,
    frame: bool = False,
    *,
    evidence: pl.Expr,
) -> pl.LazyFrame:
    """The ``ident`` (default ``order``) values of the rows of ``t`` the reduced table keeps: the rows kept
    whole, the last ``keep_last`` sequence rows per (rank or file, process group) by (``seq``, ``order``),
    the last ``keep_last`` tail rows per (rank or file, kind) by ``order``, and of the application lines
    (:func:`app_lines`) the first :data:`APP_HEAD` and last :data:`APP_TAIL` per (rank or file, kind) by
    ``order``; of the tail rows and application lines, those ``evidence`` holds for are kept whole (a test
    on the key columns, e.g. ``ident`` among the values :func:`signature_text` found). Positions count the
    duplicates (a tee'd console's copies of lines, ``duplicate``) apart from the other rows: diagnosis reads
    none of them, and where a console's copies come after the files' lines, they took a rank's last
    positions (cap-07 with the console named to sort last: of each rank's 103 script lines diagnosis reads,
    21 were kept, and its last sign of life was an early line).

    Works on the key columns only (``kind, layer, rank, path, pg, seq, world_size, duplicate`` where there is
    one, ``message``; ``message`` is read for NCCL INFO chatter rows only) and sorts only numbers, never the
    wide table. ``chatter``: the NCCL INFO chatter test when it was decided beforehand (then ``message`` is
    not read)."""
    kind, layer = pl.col("kind"), pl.col("layer")
    nccl_chatter = (
        chatter
        if chatter is not None
        else (
            (kind == "log")
            & (layer == "nccl")
            & pl.col("world_size").is_null()
            & ~nccl_topology(pl.col("message"))
        )
    )
    seqish = kind.is_in(list(Kind.SEQUENCED))
    tails = ((kind == "step_progress") | nccl_chatter) & ~evidence.fill_null(False)
    is_coll = kind == "nccl_coll"
    cols = dict.fromkeys([order, ident or order])
    t = t.lazy()
    dup = pl.col("duplicate").fill_null(False) if "duplicate" in t.collect_schema().names() else pl.lit(False)
    base = t.select(
        *cols,
        pl.col("seq"),
        kind.alias("__k"),
        seqish.alias("__s"),
        tails.alias("__t"),
        (app_lines() & ~evidence.fill_null(False)).alias("__a"),
        pl.col("rank").alias("__wr"),
        pl.when(pl.col("rank").is_null()).then(pl.col("path")).alias("__wp"),
        is_coll.alias("__c"),
        dup.alias("__d"),
        # NCCL COLL rows without a commId are one group of their own; other rows without a PG are the default PG.
        pl.when(is_coll).then(pl.col("pg")).otherwise(pl.coalesce(pl.col("pg"), pl.lit("0"))).alias("__pg"),
    )
    kept = select(base, order, keep_last)
    return kept if frame else kept.select(ident or order)


def select(base: pl.LazyFrame, order: str, keep_last: int) -> pl.LazyFrame:
    """The kept rows of a key frame made by :func:`kept` (all its columns). Applying it again to the union
    of its results over parts of a table gives its result over the whole table (top-k of top-k's)."""
    whole = base.filter(~pl.col("__s") & ~pl.col("__t") & ~pl.col("__a"))
    # The last keep_last by (seq, order), a missing seq lowest: a top-k per group, no sort of the rows.
    seq_key = pl.col("seq").fill_null(-(2**63))
    groups = ("__wr", "__wp", "__c", "__pg", "__d")
    seq_rows = (
        base.filter(pl.col("__s"))
        # Only rows whose seq reaches the group's keep_last-th largest seq (counted with repeats) can be
        # among its last keep_last by (seq, order): a cheap window test first, so the top-k over every
        # column runs on a few rows per group (0.41 s -> 0.21 s on the 4.9 M COLL rows of the 256-rank bench).
        .filter(seq_key >= seq_key.top_k(keep_last).min().over(groups))
        .group_by(*groups)
        .agg(pl.all().top_k_by([seq_key, pl.col(order)], keep_last))
        .explode(pl.all().exclude(groups))  # type: ignore[arg-type]
    )
    tail_rows = (
        base.filter(pl.col("__t"))
        .group_by("__wr", "__wp", "__k", "__d")
        .agg(pl.all().top_k_by(order, keep_last))
        .explode(pl.all().exclude("__wr", "__wp", "__k", "__d"))  # type: ignore[arg-type]
    )
    # The first APP_HEAD and last APP_TAIL application lines per group: ranks within the group (a first or
    # last within a part of the table is one within the whole, so this composes as the top-k's do).
    app_groups = ("__wr", "__wp", "__k", "__d")
    app_rows = base.filter(pl.col("__a")).filter(
        (pl.col(order).rank("ordinal").over(app_groups) <= APP_HEAD)
        | (pl.col(order).rank("ordinal", descending=True).over(app_groups) <= APP_TAIL)
    )
    cols = base.collect_schema().names()
    parts = [whole, seq_rows, tail_rows, app_rows]
    return pl.concat([p.select(cols) for p in parts], how="vertical")


def reduce_for_diagnosis(
    table: pl.DataFrame,
    keep_last: int = KEEP_LAST,
    text: TextPatterns | None = None,
    templates: bool | None = None,
) -> pl.DataFrame:
    """The rows of ``table`` that diagnosis needs (see the module docstring); same schema, same order.
    ``text``: the signature patterns whose lines are kept whole (default: the built-in library's, see
    :func:`signature_text`). ``templates``: whether the first line of each template is kept whole
    (:func:`template_firsts`); default: when ``table`` holds a collective mismatch (:func:`holds_mismatch`),
    the only time diagnosis reads them. A batch of a job keeps them (``True``): the mismatch may be in
    another batch, and diagnosis reduces the batches' union again, which drops them where none held one."""
    if table.height == 0:
        return table
    t = table.with_row_index("__i")
    ev = signature_text(t.lazy(), "__i", text)
    if templates or (templates is None and holds_mismatch(table)):
        ev = pl.concat([ev, template_firsts(t.lazy(), "__i")])
    rows = kept(t, "__i", keep_last, evidence=pl.col("__i").is_in(ev.implode())).collect()["__i"].sort()
    return table[rows]


def reduce_store(
    store: pl.DataFrame, keys: list[str], keep_last: int, head: int, text: TextPatterns | None = None
) -> pl.DataFrame:
    """The watcher's store of parsed lines (sorted by file ``wsrc`` and ``line``) reduced: every row kept
    but the routine ones (``Kind.WATCH_ROUTINE``; of ``log`` rows only NCCL INFO chatter, as in
    :func:`kept`), of which the first ``head`` and the last ``keep_last`` per ``keys`` are kept, and a training
    script's own lines (:func:`app_lines`), of which the first :data:`APP_HEAD` and the last
    :data:`APP_TAIL` per ``keys`` are kept; of both, a row of :data:`TEXT_KINDS` whose text ``text`` matches
    is kept whole (see :func:`signature_text`), and where the store holds a collective mismatch, the first
    line of each template per ``keys`` (:func:`template_firsts`). Positions count the application lines of a
    group apart from its other rows."""
    kind = pl.col("kind")
    topo = (
        (kind == Kind.LOG)
        & (pl.col("layer") == "nccl")
        & (pl.col("world_size").is_not_null() | nccl_topology(pl.col("message")))
    )
    log_kept = (kind == Kind.LOG) & ((pl.col("layer") != "nccl") | topo).fill_null(True)
    store = store.sort("wsrc", "line", maintain_order=True).with_row_index("__w")
    said = signature_text(store.lazy(), "__w", text)
    if holds_mismatch(store):
        said = pl.concat([said, template_firsts(store.lazy(), "__w", [pl.col(k) for k in keys])])
    said_rows = pl.col("__w").is_in(said.implode())
    app = app_lines() & ~said_rows
    routine = kind.is_in(list(Kind.WATCH_ROUTINE)) & ~log_kept & ~app_lines() & ~said_rows
    groups = [*keys, "__a"]
    idx = pl.int_range(pl.len()).over(groups)
    n = pl.len().over(groups)
    keep = (
        pl.when(pl.col("__a"))
        .then((idx < APP_HEAD) | (idx >= n - APP_TAIL))
        .when(routine)
        .then((idx < head) | (idx >= n - keep_last))
        .otherwise(True)
    )
    return store.with_columns(app.alias("__a")).filter(keep).drop("__w", "__a")


__all__ = [
    "APP_HEAD",
    "APP_KINDS",
    "APP_LAYERS",
    "APP_TAIL",
    "KEEP_LAST",
    "NCCL_KEEP",
    "NUMBER",
    "OWN_NUMBERS",
    "TEMPLATES",
    "TEXT_KINDS",
    "app_lines",
    "holds_mismatch",
    "kept",
    "line_template",
    "nccl_topology",
    "reduce_for_diagnosis",
    "reduce_store",
    "select",
    "signature_patterns",
    "signature_text",
    "template_firsts",
    "without_own_numbers",
]
