"""The asctime fast path: files made only of plain Python ``logging`` lines, without the generic passes.

Most lines of an application-heavy log are the training script's own default-format logging lines
(``logging.basicConfig``; :data:`parsers.app.ASCTIME`, the last of ``parsers.PRODUCER_PREFIXES``)::

    2026-11-29 22:15:38,871 INFO [trainer] rank=3 step=1835 loss=2.0959 lr=3.0e-04

The generic path gives such a line, when nothing else touches it, the row this module builds directly: the
ASCTIME captures (``pyts``, ``sev_word`` -> ``severity``), ``message`` and ``record`` = the text after the
prefix, ``layer`` ``app``, and :func:`parsers.app.progress_fields`' ``step`` / ``rank_stated`` /
``world_size`` with kind ``step_progress`` or ``log`` (and :func:`parsers.c10d.stated_ranks`' columns).

A file takes this path only when EVERY line of it (of its generic-path lines: NCCL COLL fast-path lines are
already apart) qualifies (:func:`split`): the line is one physical line (``raw == body``, no newline,
``line_count`` 1, no ``layer`` of its own), starts with ASCTIME's prefix, matches no earlier producer prefix,
no transport / tee / Ray worker prefix and no record start inside the line (:func:`_raw_gate`), and its message
holds no literal of any rule and no marker of a helper that reads across rows or adds columns
(:data:`MESSAGE_MARKERS`). Whole files, because several helpers read across the rows of a file (hard wraps,
record grouping, spawn blocks, snippets, banners, stall lists, root causes): a file of such lines only gives
none of them anything to act on, and leaving it out of the generic lines changes no decision about the other
files (the per-file shares and windows are per file; the slice-wide ones, the tee roles of glued lines and the
Ray worker prefix, are kept off by :func:`_raw_gate`). ``parsers.parse_lines_split`` takes these files out
before it slices the generic lines and merges their rows back in ``_pos`` order. ``tests/test_appfast.py`` checks the rows against the
generic path's on every corpus case, on generated jobs and on drawn files.
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


def split(lines: pl.DataFrame) -> tuple[pl.Series, pl.DataFrame] | None:
    """``(mask, captures)``: the rows of ``lines`` (a lines frame: ``path, raw, body, line_count`` + source
    columns) whose files take the asctime fast path, and for those rows (in order) ``pyts``, ``sev_word`` and
    ``rest`` (the message); None when no file does."""
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
    rows = ~path.is_in(path.filter(~ok).unique().implode())
    if not rows.any():
        return None
    sub = raw.filter(rows)
    bad = sub.str.contains(_raw_gate()).fill_null(True)
    # ASCTIME's captures without a regex per line: the stamp up to the first space after the seconds, then
    # the level part, read once per distinct window of its 16 characters (a few distinct in a file).
    sp = sub.str.slice(19).str.find(" ", literal=True)
    tail = sub.str.slice(sp + 20)
    lv = per_distinct(
        tail.str.slice(0, _LEVEL_CHARS), pl.col(DISTINCT).str.extract_groups(_LEVEL).struct.unnest()
    )
    ext = pl.DataFrame({"pyts": sub.str.slice(0, sp + 19), "sev_word": lv["sev_word"]})
    rest = tail.str.slice(lv["__lv"].str.len_chars())
    markers = "|".join(f"(?:{m})" for m in MESSAGE_MARKERS)
    bad = bad | rest.str.contains_any(list(rule_literals())).fill_null(True) | rest.str.contains(markers)
    bad = bad.fill_null(True)
    if bad.any():
        keep = ~path.filter(rows).is_in(path.filter(rows).filter(bad).unique().implode())
        if not keep.any():
            return None
        rows = rows.scatter(rows.arg_true().filter(~keep), False)
        ext, rest = ext.filter(keep), rest.filter(keep)
    caps = pl.DataFrame({"pyts": ext["pyts"], "sev_word": ext["sev_word"], "rest": rest})
    return rows, caps


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
