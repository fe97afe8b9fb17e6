"""The rule engine every parser module uses: vectorized prefix stripping and message rules.

A :class:`Prefix` strips one layer of prefix (transport, tee, producer) from the ``body`` column and
stores its named groups in columns. A :class:`Rule` classifies a message: a cheap literal test selects
candidate rows, then one regex with named groups extracts fields. Both run as polars expressions over
whole columns (Rust regex, linear time); there is no Python loop per line.

Named groups map to event-table columns (``seq``, ``op``, ``timeout_ms`` …). Four group names are
converted: ``seq_hex`` (an NCCL opCount, hex) -> ``seq``; ``host_fqdn`` -> ``host`` cut at the first dot;
``ranks_spec`` (a rank list as the tool prints it: ``0-3,5``, ``[3,5]``, ``1, 3``) -> ``ranks_named``
(:func:`rank_list`); ``rank_stated`` / ``local_rank_stated`` -> ranks stated inside the message (used by
identity resolution).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import polars as pl

#: Types of the columns rules and prefixes may fill (everything else stays a string).
FIELD_TYPES: dict[str, pl.DataType] = {
    "seq": pl.Int64(),
    "seq_enqueued": pl.Int64(),
    "seq_completed": pl.Int64(),
    "numel": pl.Int64(),
    "timeout_ms": pl.Int64(),
    "elapsed_ms": pl.Int64(),
    "step": pl.Int64(),
    "world_size": pl.Int32(),
    "peer_rank": pl.Int32(),
    "exit_code": pl.Int32(),
    "pid": pl.Int64(),
    "rank_stated": pl.Int32(),
    "local_rank_stated": pl.Int32(),
    "c10_rank": pl.Int32(),
    "tee_local_rank": pl.Int32(),
    "xport_rank": pl.Int32(),
    "cuda_dev": pl.Int32(),
    "epoch_s": pl.Int64(),
    "pg_rank": pl.Int32(),
}

#: Columns a rule can set; the engine creates them (null) before the first rule runs.
RULE_FIELDS: tuple[str, ...] = (
    "kind",
    "severity",
    "layer",
    "pg",
    "seq",
    "seq_enqueued",
    "seq_completed",
    "op",
    "numel",
    "shape",
    "timeout_ms",
    "elapsed_ms",
    "step",
    "world_size",
    "peer_rank",
    "peer_addr",
    "exit_code",
    "signal",
    "exc_type",
    "pid",
    "rank_stated",
    "local_rank_stated",
    "host",
    "comm",
    "comm_id",
    "root_cause",
    "local_addr",
    "ranks_named",
    "peer_op",
    "peer_shape",
)

#: Most ranks one ``ranks_spec`` may name: a crafted ``tasks 0-4000000000`` must not expand into memory.
MAX_RANKS_NAMED = 1 << 17


def rank_list(spec: str | None) -> str | None:
    """A rank list as a tool prints it -> the ranks, ascending and unique, comma-separated (``ranks_named``).

    Slurm task lists (srun ``task_state.c``: ``0-7``, ``8-10,12-15``, ``[3,5]``) and c10d's monitoredBarrier
    list (``ProcessGroupGloo.cpp``: ``1, 3``). A part that is not a number or a range is skipped; None when
    nothing is left or the list names more than :data:`MAX_RANKS_NAMED` ranks (a range is never expanded
    past that)."""
    if spec is None:
        return None
    out: set[int] = set()
    for part in spec.strip().strip("[]").split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if dash and lo.isdigit() and hi.isdigit():
            a, b = int(lo), int(hi)
            if b - a + 1 + len(out) > MAX_RANKS_NAMED:
                return None
            out.update(range(a, b + 1))
        elif not dash and part.isdigit():
            out.add(int(part))
        if len(out) > MAX_RANKS_NAMED:
            return None
    return ",".join(map(str, sorted(out))) if out else None


#: Any character beyond ASCII, as a class both engines compile at once (written as a range up to U+10FFFF,
#: Python's ``re`` fills a table of the Basic Multilingual Plane: ~2.5 ms per class).
_NON_ASCII = r"[^\x00-\x7F]"
_ASCII_WORD = "0-9A-Za-z_"


def _class_end(pattern: str, i: int) -> int:
    """The index just past the character class that opens at ``pattern[i]`` (``[``); -1 when it is not closed
    or holds a nested class (Rust's regex nests classes; none of the parsers' patterns does)."""
    j = i + 1
    if pattern.startswith("^", j):
        j += 1
    if pattern.startswith("]", j):  # a literal ``]`` first in the class
        j += 1
    while j < len(pattern):
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            return -1
        if c == "]":
            return j + 1
        j += 1
    return -1


def _escapes(text: str, table: dict[str, str]) -> str:
    """``text`` (a class's inside) with each escape ``\\x`` whose ``x`` is a key of ``table`` replaced by its value."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(table.get(text[i + 1], text[i : i + 2]))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def ascii_classes(pattern: str) -> str:
    r"""``pattern`` with ``\d`` as ``[0-9]`` (``\D`` outside a class as ``[^0-9]``) and ``\w`` as an ASCII word
    character or any character beyond ASCII (``(?:[0-9A-Za-z_]|[^\x00-\x7F])``; a class holding ``\w``, such
    as ``[\w.-]``, as the same class in ASCII or a character beyond ASCII): the same matches on ASCII text, in
    Rust's regex (polars) and Python's ``re``, for a fraction of the cost. ``\w`` in a negated class and ``\W``
    stay as written; so does the pattern from a class that holds a nested class or is not closed on (none of
    the parsers' patterns has one; the engines report one not closed).

    Why: Rust's regex compiles Unicode ``\d`` and ``\w`` into large UTF-8 automata, and polars keeps 32
    compiled regexes per thread, so each slice of generic-path lines compiles its ~45 patterns again: a
    20-line slice of the 256-rank bench took ~85 ms, ~25 ms of it compiling (~7 ms with these classes).
    What changes off ASCII: a digit of another script is no longer ``\d`` (the lines these patterns read
    print numbers in ASCII, and a field cast to an integer read none such before either), and ``\w`` takes
    any character beyond ASCII, word or not (a logger or host name in another script still matches). Every
    :class:`Rule` and :class:`Prefix` pattern is written through this when built, and every pattern a parser
    module holds as text is where it is defined (``tests/test_ascii_classes.py`` walks the modules for one
    that is not; compiled ``re.Pattern`` objects, for Python's ``re`` only, may keep Unicode classes). A
    pattern that turns Unicode off (``(?-u``) stays as written: there ``[^\x00-\x7F]`` could match a byte of
    a character, which a regex over text may not."""
    if "(?-u" in pattern:
        return pattern
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            out.append(
                {"d": "[0-9]", "D": "[^0-9]", "w": f"(?:[{_ASCII_WORD}]|{_NON_ASCII})"}.get(
                    e, pattern[i : i + 2]
                )
            )
            i += 2
            continue
        if c == "[":
            end = _class_end(pattern, i)
            if end < 0:  # not closed (the regex engines say so) or nested: as written
                out.append(pattern[i:])
                break
            cls = pattern[i:end]
            if cls.startswith("[^"):
                out.append(_escapes(cls, {"d": "0-9"}))
            else:
                ascii_cls = _escapes(cls, {"d": "0-9", "w": _ASCII_WORD})
                has_w = _escapes(cls, {"w": ""}) != cls
                out.append(f"(?:{ascii_cls}|{_NON_ASCII})" if has_w else ascii_cls)
            i = end
            continue
        out.append(c)
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class Rule:
    """One message rule.

    ``literal`` must occur in the message for the rule to be tried (a fast substring scan);
    ``pattern`` (optional) is a regex whose named groups become columns (its ``\\d`` and ``\\w`` made
    ASCII: :func:`ascii_classes`). The first rule that matches a row classifies it; later rules never see
    it. ``source`` names the tool and version range the line comes from; ``example`` is a real (or
    reference-document) line the tests check the rule against.
    """

    name: str
    kind: str
    layer: str
    literal: str
    pattern: str | None = None
    severity: str | None = None
    source: str = ""
    example: str = ""
    set_fields: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.pattern:
            object.__setattr__(self, "pattern", ascii_classes(self.pattern))


@dataclass(frozen=True)
class Prefix:
    """One prefix layer: ``pattern`` is anchored at the start and must end with ``(?P<rest>.*)`` (its ``\\d`` and
    ``\\w`` made ASCII: :func:`ascii_classes`)."""

    name: str
    pattern: str
    layer: str | None = None
    source: str = ""
    example: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", ascii_classes(self.pattern))


@lru_cache(maxsize=1)
def defined() -> tuple[tuple[Rule, ...], tuple[Prefix, ...]]:
    """Every :class:`Rule` and :class:`Prefix` a module of the ``parsers`` package defines at module level (alone
    or in a list or tuple), each once, in module-name then attribute-name order: a rule added to a parser module
    is counted without being listed anywhere (``parsers.appfast``'s literals, the tests of every rule)."""
    import importlib
    import pkgutil

    import parsers

    rules: dict[int, Rule] = {}
    prefixes: dict[int, Prefix] = {}
    for info in sorted(pkgutil.iter_modules(parsers.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"parsers.{info.name}")
        for name in sorted(vars(mod)):
            val = getattr(mod, name)
            for v in val if isinstance(val, (list, tuple)) else [val]:
                if isinstance(v, Rule):
                    rules.setdefault(id(v), v)
                elif isinstance(v, Prefix):
                    prefixes.setdefault(id(v), v)
    return tuple(rules.values()), tuple(prefixes.values())


def _cast_fields(df: pl.DataFrame) -> pl.DataFrame:
    exprs = []
    for c in df.columns:
        if c == "seq_hex":
            exprs.append(pl.col(c).str.to_integer(base=16, strict=False).alias("seq"))
        elif c == "host_fqdn":
            exprs.append(pl.col(c).str.split(".").list.first().alias("host"))
        elif c == "ranks_spec":  # few rows (launcher / barrier lines): a Python function per row is fine
            # A list comprehension, not ``map_elements``: polars inspects the function's bytecode on each call
            # (its ``_utils.udfs``, ~13 ms to import on the first one) to suggest an expression instead.
            named = pl.Series("ranks_named", [rank_list(v) for v in df[c].to_list()], dtype=pl.String)
            exprs.append(pl.lit(named).alias("ranks_named"))
        elif c in FIELD_TYPES:
            exprs.append(pl.col(c).str.strip_chars().cast(FIELD_TYPES[c], strict=False))
        else:
            exprs.append(pl.col(c))
    return df.with_columns(exprs)


def _scatter_into(
    cur: pl.Series | None, idx: pl.Series, vals: pl.Series, n: int, name: str, only_null: bool
) -> pl.Series:
    """``cur`` (or an all-null column) with ``vals`` written at rows ``idx``; with ``only_null``,
    only where ``cur`` is still null (an outer layer's value is never overwritten)."""
    if cur is None:
        out = pl.Series(name, [None], dtype=vals.dtype).extend_constant(None, n - 1) if n else vals.clear()
        return out.scatter(idx, vals) if idx.len() else out
    vals = vals.cast(cur.dtype, strict=False)
    if only_null:
        keep = cur.gather(idx).is_null()
        if not keep.all():
            idx, vals = idx.filter(keep), vals.filter(keep)
    if idx.len() == 0:
        return cur
    return cur.clone().scatter(idx, vals)


_REST_TAIL = ("(?P<rest>.*)$", "(?P<rest>.*)")


def _head_pattern(pattern: str) -> str | None:
    """The prefix part of a :class:`Prefix` pattern (without its trailing ``(?P<rest>.*)$``), or None."""
    for tail in _REST_TAIL:
        if pattern.endswith(tail) and not pattern.endswith("\\" + tail):
            head = pattern[: -len(tail)]
            try:
                re.compile(head)
            except re.error:
                return None
            return head
    return None


def true_at(n: int, idx: pl.Series) -> pl.Series:
    """A boolean series of length ``n``, True at the positions ``idx`` (UInt32/Int64) and False elsewhere."""
    out = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    return out.scatter(idx, True) if idx.len() else out


#: Rows below which :func:`contains_parallel` runs one regex pass (splitting costs more than it saves).
_PARALLEL_MIN_ROWS = 100_000
#: Most parts of one parse step run at once (each holds its slice's intermediate columns: on a many-core
#: host, one per core would multiply the memory of a step by the cores).
MAX_PARALLEL = 4


def parallelism(tasks: int) -> int:
    """Threads for ``tasks`` parts of one step: polars' pool size, at most :data:`MAX_PARALLEL`, at least 1."""
    return max(1, min(pl.thread_pool_size(), MAX_PARALLEL, tasks))


def contains_parallel(text: pl.Series, pattern: str) -> pl.Series:
    """``text.str.contains(pattern)`` with the rows split into :func:`parallelism` parts.

    An eager ``Series.str.contains`` runs on one core; the parts, collected together
    (``pl.collect_all``), run on all of them. Same values and length as ``text``, named like it.
    Measured on the 4.9 M NCCL COLL lines of the 256-rank bench (``parsers.coll.FAST_COLL``, 2 cores):
    3.2 s in one pass, 1.6 s in two parts.
    """
    n = text.len()
    k = parallelism(n // _PARALLEL_MIN_ROWS)
    if k <= 1:
        return text.str.contains(pattern)
    step = -(-n // k)
    parts = pl.collect_all(
        [
            pl.LazyFrame({"t": text.slice(i, step)}).select(pl.col("t").str.contains(pattern))
            for i in range(0, n, step)
        ]
    )
    return pl.concat([f.to_series() for f in parts]).alias(text.name)


def _matches(text: pl.Series, pattern: str, mask: pl.Series | None) -> pl.Series:
    """``text.str.contains(pattern)`` where ``mask`` holds (False elsewhere and for nulls), with the regex run
    only on the rows ``mask`` allows: a prefix tried on a few rows (a c10d line's PG prefix, a lead glued
    before a record) costs a pass over those rows, not over all (the LEAD pattern, ``.{1,400}?`` before
    the record start, took 0.4 s per 200k lines on rows it could not apply to)."""
    if mask is None:
        return text.str.contains(pattern).fill_null(False)
    mask = mask.fill_null(False)
    if not mask.any():
        return mask
    if mask.all():
        return text.str.contains(pattern).fill_null(False)
    ok = text.filter(mask).str.contains(pattern).fill_null(False)
    return true_at(text.len(), mask.arg_true().filter(ok))


def strip_prefix(df: pl.DataFrame, prefix: Prefix, mask: pl.Series | None = None) -> pl.DataFrame:
    """Strip ``prefix`` from ``body`` where it matches (and ``mask`` allows).

    Named groups fill columns that are still null, so an outer layer's value is never overwritten by
    an inner one. A boolean column ``pfx_<name>`` records where the prefix was found.

    Cost: one ``is_match`` scan of ``body`` (of the rows ``mask`` allows, when given; no captures);
    captures run only on the matching rows.
    """
    body = df["body"]
    head = _head_pattern(prefix.pattern)
    # The match scan and the captures use one pattern string: polars caches a few compiled regexes per
    # thread, and the captures then reuse the scan's (a prefix head compiles in ~1 ms).
    whole = f"(?P<__all>{head})" if head else prefix.pattern
    matched = _matches(body, whole, mask)
    marker = f"pfx_{prefix.name}"
    groups = [g for g in re.compile(prefix.pattern).groupindex if g != "rest"]
    if not matched.any():
        return _none_stripped(df, [prefix])
    idx = matched.arg_true()
    sub = body.gather(idx)
    if head and not sub.str.contains("\n", literal=True).any():
        # No newline in the rows: ``(?P<rest>.*)$`` always matches the rest of the line, so the prefix
        # part alone decides the match (leftmost-first picks the same path) and ``rest`` is a slice.
        ext = sub.str.extract_groups(whole).struct.unnest()
        ext = ext.with_columns(sub.str.slice(ext["__all"].str.len_chars()).alias("rest"))
    else:
        ext = sub.str.extract_groups(prefix.pattern).struct.unnest()
        if head:  # the head matched but the whole pattern may not (a newline in the rest)
            ok = ext["rest"].is_not_null()
            if not ok.all():
                idx, ext = idx.filter(ok), ext.filter(ok)
                matched = true_at(df.height, idx)
                if idx.len() == 0:
                    return strip_prefix(df, prefix, mask=matched)
    fields = _cast_fields(ext.select(groups)) if groups else pl.DataFrame()
    n = df.height
    out: dict[str, pl.Series] = {"body": _scatter_into(body, idx, ext["rest"], n, "body", False)}
    for c in fields.columns:
        out[c] = _scatter_into(df[c] if c in df.columns else None, idx, fields[c], n, c, True)
    if prefix.layer:
        cur = df["layer"] if "layer" in df.columns else None
        out["layer"] = _scatter_into(
            cur,
            idx,
            pl.repeat(prefix.layer, idx.len(), dtype=pl.String, eager=True).alias("layer"),
            n,
            "layer",
            True,
        )
    prev = df[marker] if marker in df.columns else None
    out[marker] = matched if prev is None else (prev | matched)
    return df.with_columns([s.alias(name) for name, s in out.items()])


def unnamed(pattern: str) -> str:
    """``pattern`` with its named groups made plain groups (``(?P<name>`` -> ``(?:``), for a part of a longer
    regex: an alternation may not name a group twice, and a gate reads no capture."""
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


@lru_cache(maxsize=256)
def _gate_of(patterns: tuple[str, ...]) -> str:
    """One regex that matches wherever the head (:func:`_head_pattern`, else the whole pattern) of any of
    ``patterns`` matches, its named groups made plain (an alternation may not name a group twice)."""
    parts = []
    for p in patterns:
        h = _head_pattern(p) or p
        parts.append("(?:" + unnamed(h) + ")")
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def strip_prefixes(
    df: pl.DataFrame, prefixes: Sequence[Prefix], mask: pl.Series | None = None
) -> pl.DataFrame:
    """``strip_prefix(df, p, mask)`` for each ``p`` of ``prefixes`` in turn: the same frame, with fewer passes.

    Most rows hold none of a family's prefixes, or one: a pass per prefix tests every row against each of them.
    Here one alternation of the first half's heads splits the rows: the rows it does not match keep their
    ``body`` through the first half and are tested by the second half only; the halves split again the same
    way, down to one prefix, which :func:`strip_prefix` strips from the rows still in its set. A row is
    tested by a prefix's own regex only when no alternation ruled it out, so every prefix strips the same rows
    as one after the other: a row outside a set is one no prefix of the set can match (its body is the one
    the set's alternation was tested on until a prefix of the set strips it).
    Measured on an application-heavy job (8 ranks, 400k lines, ``benchmarks/generate.py --shape app``, one
    thread, load ~15 on 2 cores): ``parsers.strip_producers`` (its 18 producer prefixes, then the PG ones)
    0.58 / 0.50 / 0.49 s of CPU in three calls one prefix after the other, 0.47 / 0.39 / 0.36 s split so (the
    first call compiles the regexes; the rest is mostly the captures of the prefix most rows hold).
    """
    if mask is not None:
        mask = mask.fill_null(False)
    return _strip_split(df, list(prefixes), mask)


def _strip_split(df: pl.DataFrame, prefixes: list[Prefix], mask: pl.Series | None) -> pl.DataFrame:
    """:func:`strip_prefixes` of ``prefixes`` on the rows of ``mask`` (all rows when None), every row outside
    ``mask`` one that none of ``prefixes`` matches one after the other."""
    if mask is not None and not mask.any():
        return _none_stripped(df, prefixes)
    if len(prefixes) == 1:
        return strip_prefix(df, prefixes[0], mask=mask)
    half = len(prefixes) // 2
    lo, hi = prefixes[:half], prefixes[half:]
    in_lo = _matches(df["body"], _gate_of(tuple(p.pattern for p in lo)), mask)
    n = df.height
    df = _strip_split(df, lo, in_lo)
    if df.height != n:
        raise AssertionError("strip_prefix changed the rows")
    # Rows of ``mask`` the first half's alternation did not match still hold the body that was tested; the
    # others (whatever the first half did to them) are tested against the second half's alternation.
    if not in_lo.any():
        return _strip_split(df, hi, mask)
    again = _matches(df["body"], _gate_of(tuple(p.pattern for p in hi)), in_lo)
    rest = ~in_lo if mask is None else (mask & ~in_lo)
    return _strip_split(df, hi, rest | again)


def _none_stripped(df: pl.DataFrame, prefixes: list[Prefix]) -> pl.DataFrame:
    """``df`` as :func:`strip_prefix` of each of ``prefixes`` in turn leaves it where none matches: the columns
    of their named groups (nulls of the field's type) and their ``pfx_<name>`` markers (False) added where
    missing, in that order, with no pass over the rows. Of the 43 calls of :func:`_strip_split` in a slice of
    the bench's app job and its srun console, 28 are of a set no row is left for."""
    add: dict[str, pl.Expr] = {}
    have = set(df.columns)  # once: each ``df.columns`` builds the list of names anew
    for prefix in prefixes:
        for g in re.compile(prefix.pattern).groupindex:
            if g != "rest" and g not in have and g not in add:
                add[g] = pl.lit(None, dtype=FIELD_TYPES.get(g, pl.String())).alias(g)
        marker = f"pfx_{prefix.name}"
        if marker not in have and marker not in add:
            add[marker] = pl.lit(False).alias(marker)
    return df.with_columns(list(add.values())) if add else df


def ensure_columns(df: pl.DataFrame, names: tuple[str, ...] = RULE_FIELDS) -> pl.DataFrame:
    """Add every missing rule column as nulls of its type."""
    have = set(df.columns)
    add = [pl.lit(None, dtype=FIELD_TYPES.get(c, pl.String())).alias(c) for c in names if c not in have]
    return df.with_columns(add) if add else df


def apply_rules(
    df: pl.DataFrame, rules: list[Rule], text: str = "message", where: pl.Series | None = None
) -> pl.DataFrame:
    """Classify rows of ``df`` with ``rules`` (first match wins) and fill fields from named groups.

    Only rows whose ``kind`` is null (and, if given, where ``where`` is true) are considered. Returns
    ``df`` with ``kind``/``layer``/``severity`` and the rule fields filled where a rule matched.

    Cost: the rules work on the candidate subset only (unclaimed rows, ``where``, and, when every rule
    has a literal, rows holding any of the literals: one Aho-Corasick ``contains_any`` scan); each
    rule's literal is then tested on the rows still unclaimed, its regex match only on the rows holding
    its literal, and captures only on the rows that match. Updates are scattered into the columns (no
    join of the whole frame).
    """
    df = ensure_columns(df)
    if df.height == 0 or not rules:
        return df
    active = df["kind"].is_null()
    if where is not None:
        active = active & where.fill_null(False)
    lits = [r.literal for r in rules]
    txt_all = df[text]
    pos = active.arg_true()  # rows of df still open, as a shrinking subset
    if pos.len() == 0:  # nothing open (a ``where`` of another layer's rows): no scan of the text at all
        return df
    if all(lits):
        # The literal scan runs on the open rows only when they are few (a gather of half the rows costs
        # about what a scan of the other half saves).
        if pos.len() * 2 < df.height:
            pos = pos.filter(txt_all.gather(pos).str.contains_any(sorted(set(lits))).fill_null(False))
        else:
            pos = (active & txt_all.str.contains_any(sorted(set(lits))).fill_null(False)).arg_true()
        if pos.len() == 0:
            return df
    txt = txt_all.gather(pos).fill_null("")
    hits = _hits(rules, pos, txt)
    if not hits:
        return df
    return _write_hits(df, hits)


_Hit = tuple[Rule, pl.Series, pl.DataFrame]


def literals_in(text: pl.Series, literals: frozenset[str]) -> frozenset[str]:
    """The ``literals`` that occur in some row of ``text`` (case-sensitive substrings): every occurrence of each,
    overlapping ones included (one Aho-Corasick pass, ``str.extract_many(overlapping=True)``)."""
    found = text.str.extract_many(sorted(literals), overlapping=True).explode().drop_nulls()
    return frozenset(found.unique().to_list())


def _hits(rules: list[Rule], pos: pl.Series, txt: pl.Series) -> list[_Hit]:
    """For each rule in order (first match wins): the rows of ``df`` it claims among the open ones (``pos``,
    their text ``txt``) and the fields of its named groups there."""
    hits: list[_Hit] = []
    for rule in rules:
        if pos.len() == 0:
            break
        if rule.literal:
            loc = txt.str.contains(rule.literal, literal=True).arg_true()
        else:
            loc = pl.int_range(0, pos.len(), dtype=pl.UInt32, eager=True)
        if loc.len() == 0:
            continue
        fields = pl.DataFrame()
        if rule.pattern:
            sub = txt.gather(loc)
            ok = sub.str.contains(rule.pattern)  # a match scan (DFA) is cheaper than failed captures
            if not ok.any():
                continue
            if not ok.all():
                loc, sub = loc.filter(ok), sub.filter(ok)
            groups = list(re.compile(rule.pattern).groupindex)
            if groups:
                fields = _cast_fields(sub.str.extract_groups(rule.pattern).struct.unnest().select(groups))
        hits.append((rule, pos.gather(loc), fields))
        # Drop the claimed rows from the open subset.
        keep = pl.Series([True]).extend_constant(True, pos.len() - 1).scatter(loc, False)
        pos, txt = pos.filter(keep), txt.filter(keep)
    return hits


def _write_hits(df: pl.DataFrame, hits: list[_Hit]) -> pl.DataFrame:
    """``df`` with the rules' kind, rule name, layer, severity and fields scattered into the rows they
    claimed (fields only where the column is still null)."""
    n = df.height
    idx_all = pl.concat([h[1] for h in hits]).cast(pl.UInt32)

    kinds = pl.concat(
        [pl.Series([h[0].kind], dtype=pl.String).extend_constant(h[0].kind, h[1].len() - 1) for h in hits]
    )
    names = pl.concat(
        [pl.Series([h[0].name], dtype=pl.String).extend_constant(h[0].name, h[1].len() - 1) for h in hits]
    )
    layers = pl.concat(
        [pl.Series([h[0].layer], dtype=pl.String).extend_constant(h[0].layer, h[1].len() - 1) for h in hits]
    )
    sevs = pl.concat(
        [
            pl.Series([h[0].severity], dtype=pl.String).extend_constant(h[0].severity, h[1].len() - 1)
            for h in hits
        ]
    )
    out: dict[str, pl.Series] = {}
    # kind / rule: always the rule's (the rows were unclaimed). layer / severity: the rule's value wins
    # when it has one (a prefix's layer is replaced by the rule's).
    out["kind"] = _scatter_into(df["kind"], idx_all, kinds, n, "kind", False)
    out["rule"] = _scatter_into(
        df["rule"] if "rule" in df.columns else None, idx_all, names, n, "rule", False
    )
    for col, vals in (("layer", layers), ("severity", sevs)):
        keep = vals.is_not_null()
        out[col] = _scatter_into(df[col], idx_all.filter(keep), vals.filter(keep), n, col, False)
    # Fields from named groups and set_fields: fill only where the column is still null.
    per_col: dict[str, list[tuple[pl.Series, pl.Series]]] = {}
    for rule, idx, fields in hits:
        for c in fields.columns:
            if c in ("kind", "layer", "severity"):
                continue
            per_col.setdefault(c, []).append((idx, fields[c]))
        for c, val in rule.set_fields:
            per_col.setdefault(c, []).append((idx, pl.Series(c, [val]).extend_constant(val, idx.len() - 1)))
    for c, parts in per_col.items():
        idx = pl.concat([p[0] for p in parts]).cast(pl.UInt32)
        series = [p[1].alias(c) for p in parts]
        if len({x.dtype for x in series}) == 1:
            vals = pl.concat(series)
        else:  # different types from different rules: the common supertype, else strings
            try:
                vals = pl.concat([x.to_frame() for x in series], how="vertical_relaxed")[c]
            except pl.exceptions.PolarsError:
                vals = pl.concat([x.cast(pl.String) for x in series])
        keep = vals.is_not_null()
        if not keep.all():
            idx, vals = idx.filter(keep), vals.filter(keep)
        cur = out.get(c, df[c] if c in df.columns else None)
        out[c] = _scatter_into(cur, idx, vals.alias(c), n, c, True)
    return df.with_columns([s.alias(name) for name, s in out.items()])
