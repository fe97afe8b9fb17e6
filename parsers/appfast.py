"""The asctime fast path: plain Python ``logging`` lines, without the generic passes.

Most lines of an application-heavy log are the training script's own default-format logging lines
(``logging.basicConfig``; :data:`parsers.app.ASCTIME`, the last of ``parsers.PRODUCER_PREFIXES``)::

    2026-11-29 22:15:38,871 INFO [trainer] rank=3 step=1835 loss=2.0959 lr=3.0e-04

The generic path gives such a line, when nothing else touches it, the row this module builds directly: the
ASCTIME captures (``pyts``, ``sev_word`` -> ``severity``), ``message`` and ``record`` = the text after the
prefix, ``layer`` ``app``, and :func:`parsers.app.progress_fields`' ``step`` / ``rank_stated`` /
``world_size`` with kind ``step_progress`` or ``log`` (and :func:`parsers.c10d.stated_ranks`' columns).

A line takes this path when it qualifies: it is one physical line (``raw == body``, no newline, ``line_count``
1, no ``layer`` of its own), starts with ASCTIME's prefix, matches no earlier producer prefix, no transport /
tee / Ray worker prefix and no record start inside the line (:func:`_raw_gate`), and its message holds no
literal of any rule and no marker of a helper that reads across rows or adds columns (:data:`MESSAGE_MARKERS`).
A file all of whose lines (its generic-path lines: NCCL COLL fast-path lines are already apart) qualify takes it
whole: several helpers read across the rows of a file (hard wraps, record grouping, spawn blocks, snippets,
banners, stall lists, root causes, stack dumps, RAS JSON documents), and such a file gives none of them anything
to act on. In a file where some lines do not qualify (a stdout log that ends in a traceback), the qualifying
lines more than :data:`CONTEXT_LINES` lines away from all of those take it (:func:`split`): no helper reads
farther than that from a row, every chain of rows those helpers follow runs through lines that do not qualify
and stops at the first that does (kept), and the file's per-file decisions are kept off by :func:`_file_gate`
and the hard-wrap test (a file with a line that does not start like a log line stays whole). Leaving these
lines out of the generic lines changes no decision about the others (the slice-wide ones, the tee roles of
glued lines and the Ray worker prefix, are kept off by :func:`_raw_gate`). ``parsers.parse_lines_split``
takes these lines out before it slices the generic lines and merges their rows back in ``_pos`` order.
``tests/test_appfast.py`` checks the rows against the generic path's on every corpus case, on generated jobs
and on drawn files, whole and mixed.
"""

from __future__ import annotations

from functools import lru_cache

import polars as pl

from parsers import app, c10d, horovod, python, ray, spawn, stack, transport
from parsers.coll import DISTINCT, per_distinct
from parsers.rules import Prefix, _gate_of, _head_pattern, defined

#: Markers of the helpers that read across rows or make per-row decisions beyond the rules, tested on the
#: message (the text after the ASCTIME prefix). A line holding one keeps its whole file on the generic path.
#: Each helper that gets a new early-return test (a marker of the rows it acts on) must add it here.
MESSAGE_MARKERS: tuple[str, ...] = (
    python._CANDIDATE,  # python.group_records: indented lines, tracebacks, C++ exception continuations
    python.EXC_LINE,  # group_records (exception line ending a traceback), exception_fields, CATCH_ALL
    ray._SNIPPET,  # ray.dead_snippets / snippet_rows: ``[Rank 0 Error Snippet]:`` and the line after it
    ray._DIED,
    r"^\s*-{10,}\s*$",  # paddle.banner_rows: a dashed line near a Paddle error header
    horovod._ITEM,  # horovod.stall_items: a run of ``<rank>: [...]`` after ``Missing ranks:``
    horovod._HEAD,
    spawn._SPAWN_HEAD,  # spawn.spawn_child_rank: the block after ``-- Process N terminated …``
    stack.DEBUG_SERVER_RANK.pattern,  # stack.dump_rows: ``=== Rank N: addr ===`` above a dump
    "Root Cause",  # elastic.mark_root_cause: the entry after ChildFailedError's header
    r"^\{",  # ras.json_rows: a JSON document's first line
)

#: Markers tested on the whole line (before any prefix is stripped): a record starting inside the line
#: (``transport.LEAD``), a tee prefix glued inside it (``transport.split_glued_tee``, whose roles are those seen
#: in any file of the slice), Ray's worker prefix (``ray.strip_worker_prefix`` runs on a slice where any line
#: holds ``" pid="``, and adds columns).
RAW_MARKERS: tuple[str, ...] = (
    transport._RECORD_START,
    r"\[[A-Za-z_][A-Za-z_-]*?\d+\]:",
    " pid=",
)


@lru_cache(maxsize=1)
def rule_literals() -> tuple[str, ...]:
    """The literal of every :class:`Rule` of every parser module (message and record rules alike): a message
    holding one may be claimed by a rule, so its file stays generic. Two rules have none, and neither can
    claim a qualifying line: ``nccl_warn`` (rows with an NCCL WARN prefix) and ``python_exception`` (rows with an
    exception type, kept off by :data:`MESSAGE_MARKERS`)."""
    return tuple(sorted({r.literal for r in defined()[0] if r.literal}))


@lru_cache(maxsize=1)
def _raw_gate() -> str:
    """One regex for lines the generic path would treat otherwise than as a bare ASCTIME line: any producer
    prefix before ASCTIME, any transport / tee prefix (LEAD by its record starts, anywhere), Ray's worker prefix,
    and :data:`RAW_MARKERS`."""
    import parsers

    prods = parsers.PRODUCER_PREFIXES
    if prods[-1] is not app.ASCTIME or app.ASCTIME in prods[:-1]:
        raise AssertionError("asctime fast path: ASCTIME must be the last producer prefix, and only there")
    xport = [v for v in vars(transport).values() if isinstance(v, Prefix) and v is not transport.LEAD]
    heads = [p.pattern for p in (*prods[:-1], *xport, ray.PREFIX)]
    return "|".join([_gate_of(tuple(heads)), *(f"(?:{m})" for m in RAW_MARKERS)])


#: ASCTIME's prefix part (``rules.strip_prefix`` strips the text it matches, leftmost-first), as the two
#: patterns below read it: a change to ASCTIME must be made to them too.
_HEAD = (
    r"^(?P<pyts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?) (?:- )?(?:\[?(?P<sev_word>DEBUG|INFO|WARNING|WARN|"
    r"ERROR|CRITICAL)\]?(?: -)? )?"
)
if _head_pattern(app.ASCTIME.pattern) != _HEAD:
    raise AssertionError(
        "parsers.app.ASCTIME changed: parsers.appfast reads its captures by _STAMP and _LEVEL"
    )
#: A line this path takes starts with the stamp of ASCTIME in ASCII and a space: then ASCTIME's head matches it,
#: its stamp (``pyts``) is the text up to the first space after the seconds (the fraction's digits run up to
#: it, greedy), and what follows is the level part, at most 15 characters (:data:`_LEVEL`).
_STAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[,.][0-9]+)? "
#: ASCTIME's head after the stamp and its space, as a pattern of its own (the same alternatives, in order).
_LEVEL = r"^(?P<__lv>(?:- )?(?:\[?(?P<sev_word>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]?(?: -)? )?)"
_LEVEL_CHARS = 16


#: Lines of a mixed file kept on the generic path on each side of a line that does not qualify: every helper
#: that reads a neighbour reads at most two rows away (``ray``'s snippets: the next two rows), and every chain
#: of rows (a record, a stack dump, a spawn block, a stall list, a JSON document) runs through lines that do not
#: qualify and ends at the first one that does, which then stays generic.
CONTEXT_LINES = 2


@lru_cache(maxsize=1)
def _file_gate() -> str:
    """One regex for the lines that keep a whole mixed file on the generic path, because a decision about every
    line of the file counts them: a transport / tee prefix (``_mark_wraps``' per-file tee share; a stripped
    prefix can leave a body that does not start like a log line, a possible hard wrap, see :func:`split`), a tee
    prefix glued inside the line and Ray's worker prefix (slice-wide, :data:`RAW_MARKERS`), and Paddle's launcher
    prefixes (``paddle.console_streams`` gives every unprefixed line of such a file a local rank). Not LEAD, the
    text before a record start inside a line: it leaves the record start, a log line's start, and acts on its
    line alone."""
    from parsers import paddle

    xport = [v for v in vars(transport).values() if isinstance(v, Prefix) and v is not transport.LEAD]
    heads = [p.pattern for p in (*xport, ray.PREFIX, *paddle.PREFIXES)]
    markers = [m for m in RAW_MARKERS if m != transport._RECORD_START]
    return "|".join([_gate_of(tuple(heads)), *(f"(?:{m})" for m in markers)])


def split(lines: pl.DataFrame, whole_only: pl.Series | None = None) -> tuple[pl.Series, pl.DataFrame] | None:
    """``(mask, captures)``: the rows of ``lines`` (a lines frame: ``path, raw, body, line_count`` + source
    columns) that take the asctime fast path, and for those rows (in order) ``pyts``, ``sev_word`` and
    ``rest`` (the message); None when none do.

    A file all of whose lines qualify takes it whole. In a file where some lines do not (a traceback at the end
    of a stdout log), the qualifying lines farther than :data:`CONTEXT_LINES` from every line that does not
    take it, unless the file holds a line of :func:`_file_gate` or a line that does not start like a log line
    (a possible hard wrap: the wrap width is measured on every line of the file), or its path is in
    ``whole_only`` (files with NCCL COLL fast-path lines, which the generic path may take back between its
    lines)."""
    if lines.height == 0 or not {"raw", "body", "path", "line_count"} <= set(lines.columns):
        return None
    raw = lines["raw"]
    ok = raw.str.contains(_STAMP) & (lines["body"] == raw) & (lines["line_count"] == 1)
    ok = ok & ~raw.str.contains("\n", literal=True)
    if "layer" in lines.columns:
        ok = ok & lines["layer"].is_null()
    if "layout" in lines.columns:
        ok = ok & (lines["layout"] != "error_json").fill_null(True)
    ok = ok.fill_null(False)
    path = lines["path"]
    if path.null_count() or not ok.any():
        return None
    at = ok.arg_true()
    sub = raw.gather(at)
    bad = sub.str.contains(_raw_gate()).fill_null(True)
    # ASCTIME's captures without a regex per line: the stamp up to the first space after the seconds, then
    # the level part, read once per distinct window of its 16 characters (a few distinct in a file).
    sp = sub.str.slice(19).str.find(" ", literal=True)
    tail = sub.str.slice(sp + 20)
    lv = per_distinct(
        tail.str.slice(0, _LEVEL_CHARS), pl.col(DISTINCT).str.extract_groups(_LEVEL).struct.unnest()
    )
    rest = tail.str.slice(lv["__lv"].str.len_chars())
    markers = "|".join(f"(?:{m})" for m in MESSAGE_MARKERS)
    bad = bad | rest.str.contains_any(list(rule_literals())).fill_null(True) | rest.str.contains(markers)
    bad = bad.fill_null(True)
    qual = ok.scatter(at.filter(bad), False) if bad.any() else ok
    if not qual.any():
        return None
    take = qual
    if not qual.all():
        mixed = path.filter(~qual).unique()
        mixed = mixed.filter(mixed.is_in(path.filter(qual).unique().implode()))
        take = _mixed_rows(lines, qual, mixed, whole_only)
        if not take.any():
            return None
    keep = take.gather(at)
    caps = pl.DataFrame({"pyts": sub.str.slice(0, sp + 19), "sev_word": lv["sev_word"], "rest": rest}).filter(
        keep
    )
    return take, caps


def _mixed_rows(
    lines: pl.DataFrame, qual: pl.Series, mixed: pl.Series, whole_only: pl.Series | None
) -> pl.Series:
    """``qual`` (the qualifying lines) where their file qualifies whole, or is one of the ``mixed`` files
    (paths) that may be split and the line lies farther than :data:`CONTEXT_LINES` from every line that does
    not qualify (see :func:`split`); False elsewhere."""
    import parsers

    path = lines["path"]
    take = qual & ~path.is_in(mixed.implode())
    if whole_only is not None and whole_only.len():
        mixed = mixed.filter(~mixed.is_in(whole_only.implode()))
    if mixed.len() == 0:
        return take
    in_mixed = path.is_in(mixed.implode())
    other = lines.filter(in_mixed & ~qual)["path", "raw"]
    text = other["raw"]
    plain = ~text.str.contains(parsers._KNOWN_START).fill_null(True) & (text.str.len_chars() > 0)
    blocked = other["path"].filter(plain | text.str.contains(_file_gate()).fill_null(True)).unique()
    if blocked.len():
        in_mixed = in_mixed & ~path.is_in(blocked.implode())
    if not in_mixed.any():
        return take
    at = in_mixed.arg_true()
    near = (
        pl.DataFrame({"p": path.gather(at), "o": ~qual.gather(at)})
        .select(
            pl.any_horizontal(
                [
                    pl.col("o").shift(k).over("p").fill_null(False)
                    for k in range(-CONTEXT_LINES, CONTEXT_LINES + 1)
                ]
            )
        )
        .to_series()
    )
    return take.scatter(at, qual.gather(at) & ~near)


def parse(lines: pl.DataFrame, caps: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """The rows of the fast-path lines ``lines`` (with :func:`split`'s ``caps``, row for row), with exactly
    the columns and types of ``schema`` (the generic path's, ``parsers._app_schema``): the source columns as
    they are, the columns set below, every other column null (the generic path sets none of them on such a
    line; ``parsers._app_schema`` checks that on a line of each shape)."""
    import parsers

    rest = caps["rest"]
    # parsers.strip_producers' ``psev``, then classify's coalesce with ``unknown`` (no rule sets a severity)
    sev = (
        caps["sev_word"]
        .replace_strict(parsers._SEV, default=None, return_dtype=pl.String)
        .fill_null("unknown")
    )
    step = rest.str.extract(app.STEP_RE, 1).cast(pl.Int64, strict=False)
    set_cols: dict[str, pl.Series] = {
        "body": rest,
        "message": rest,
        "record": rest,
        "pyts": caps["pyts"],
        "sev_word": caps["sev_word"],
        "severity": sev,
        "step": step,
        "rank_stated": rest.str.extract(app.RANK_RE, 1).cast(pl.Int32, strict=False),
        "world_size": rest.str.extract(app.WORLD_RE, 1).cast(pl.Int32, strict=False),
    }
    # app.progress_fields: an app row no rule claimed is ``step_progress`` with a step, else ``log``
    set_cols["kind"] = (
        pl.DataFrame({"s": step})
        .select(pl.when(pl.col("s").is_not_null()).then(pl.lit("step_progress")).otherwise(pl.lit("log")))
        .to_series()
    )
    # Null columns as broadcast literals: ``pl.repeat(None, …)`` gives all-null columns that a later rechunk
    # materializes (16 bytes a row for a string: +270 MB peak on the 400k-line app job).
    lits = {"layer": pl.lit("app", dtype=pl.String)}
    out = lines.select([c for c in schema if c in lines.columns and c not in set_cols and c not in lits])
    out = out.with_columns([s.alias(name) for name, s in set_cols.items() if name in schema])
    out = out.with_columns(
        [lits.get(c, pl.lit(None, dtype=d)).alias(c) for c, d in schema.items() if c not in out.columns]
    )
    out = out.select([pl.col(c).cast(d) for c, d in schema.items()])
    need = ("record", "message", "severity", "kind", "layer", "rank_stated")
    if {"msg_rank", "msg_pg", "gpu_index"} & set(schema) and set(need) <= set(schema):
        # the rank an error line names as its own (identity evidence), as the generic path's last steps
        got = c10d.stated_ranks(out.select(need))
        out = out.with_columns(
            [got[c].cast(schema[c]) for c in ("msg_rank", "msg_pg", "gpu_index") if c in schema]
        )
    return out


__all__ = ["MESSAGE_MARKERS", "RAW_MARKERS", "parse", "rule_literals", "split"]
