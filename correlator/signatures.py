"""Known-failure signatures: match the event table against a library of documented failure patterns and
attach the ones that fit to the diagnosis (``Diagnosis.signatures``).

A signature says what a pattern of log events *means*, its usual root cause, the fix, how to confirm it
(a checklist), how to verify the fix, related signatures and upstream references. The built-in library is
``correlator/signatures.toml`` (the rule language is documented at the top of that file); users add their
own files with ``rankscope diagnose DIR --signatures my.toml``. A user signature with the id of a built-in
one replaces it.

API::

    sigs = load_signatures([Path("extra.toml")])   # built-in + user files; ValueError on a bad file
    hits = match(diagnosis, table, sigs)            # list of dicts, most specific first
    d = attach(diagnosis, table, extra)             # the verdict with signatures = match(...)

Matching is a pure function of the event table (and, secondarily, of the diagnosis: ``failure_kind`` and
``where`` rules). Rows marked ``duplicate`` are ignored. Each rule filters rows with polars expressions;
nothing re-reads files.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from correlator.schema import FAILURE_KINDS, Kind

#: ``position = "first_collective"`` means a SeqNum / opCount at or below this number.
FIRST_COLLECTIVE_MAX_SEQ = 4
#: At most this many event ids are listed per matched signature.
MAX_MATCHED_EVENTS = 200

_KINDS = frozenset(k.value for k in Kind)
_FAILURE_KINDS = frozenset(FAILURE_KINDS)
_ROLES = ("cause", "effect", "context")
_WHERE = ("initiating", "collateral", "any")
_POSITIONS = ("first_collective",)
#: Numeric columns that accept ``<column>_min`` / ``<column>_max`` bounds.
_NUMERIC = ("seq", "numel", "timeout_ms", "elapsed_ms", "step", "attempt", "exit_code", "world_size", "rank")
#: Columns ``differs`` may name.
_DIFFERS = ("numel", "shape", "op", "seq", "exc_type", "host", "timeout_ms", "exit_code")

_ROW_KEYS = {
    "kinds",
    "message_regex",
    "raw_regex",
    "exc_type_regex",
    "not_message_regex",
    "not_exc_type_regex",
    "op",
    "exit_code",
    "signal",
    "ranks",
    "where",
    "position",
    "rank_without_kinds",
    "peer_has_kinds",
    "layers",
} | {f"{c}_{b}" for c in _NUMERIC for b in ("min", "max")}
_GROUP_KEYS = {"min_count", "min_ranks", "max_ranks", "differs", "differs_capture"}
_DIAG_KEYS = {"failure_kind"}
_COMBINATORS = {"all_of", "any_of", "none_of"}
_RULE_KEYS = _ROW_KEYS | _GROUP_KEYS | _DIAG_KEYS | _COMBINATORS

_REQUIRED_TEXT = ("id", "title", "layer", "meaning", "root_cause", "fix", "verify")
_SIG_KEYS = set(_REQUIRED_TEXT) | {
    "confirm",
    "related",
    "references",
    "match",
    "role",
    "priority",
    "likely_failure_kind",
    "near_miss",
}


class SignatureError(ValueError):
    """A signature file is unreadable or invalid; the message names the file and the reason."""


@dataclass(frozen=True)
class Signature:
    """One known-failure signature (see ``signatures.toml`` for the meaning of each field)."""

    id: str
    title: str
    layer: str
    meaning: str
    root_cause: str
    fix: str
    confirm: tuple[str, ...]
    verify: str
    related: tuple[str, ...]
    references: tuple[str, ...]
    match: dict[str, Any]
    role: str = "cause"
    priority: int = 0
    likely_failure_kind: tuple[str, ...] = ()
    near_miss: str = ""
    source: str = ""
    specificity: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "layer": self.layer,
            "role": self.role,
            "meaning": self.meaning,
            "root_cause": self.root_cause,
            "fix": self.fix,
            "confirm": list(self.confirm),
            "verify": self.verify,
            "related": list(self.related),
            "references": list(self.references),
            "near_miss": self.near_miss,
            "likely_failure_kind": list(self.likely_failure_kind),
            "match": self.match,
            "source": self.source,
        }


# --------------------------------------------------------------------------------------------- loading


def builtin_path() -> Path:
    """Path of the built-in library (``correlator/signatures.toml``)."""
    try:
        p = resources.files("correlator").joinpath("signatures.toml")
        return Path(str(p))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - unusual packaging
        return Path(__file__).with_name("signatures.toml")


def _check_regex(pattern: Any, where: str) -> None:
    if not isinstance(pattern, str) or not pattern:
        raise SignatureError(f"{where}: must be a non-empty string (a regular expression)")
    try:
        pl.Series([""], dtype=pl.String).str.contains(pattern)
    except pl.exceptions.PolarsError as e:  # ComputeError for a bad pattern
        raise SignatureError(f"{where}: bad regular expression {pattern!r}: {e}") from None


def _str_list(v: Any, where: str) -> list[str]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise SignatureError(f"{where}: must be a string or a list of strings")
    return v


#: Integers a rule may hold: those of the event table's integer columns (Int64); TOML itself has no bound.
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


def _is_int(x: Any) -> bool:
    """An integer (not a bool) within Int64."""
    return isinstance(x, int) and not isinstance(x, bool) and _INT_MIN <= x <= _INT_MAX


def _int(v: Any, where: str) -> int:
    """``v`` when it is an integer within Int64; else :class:`SignatureError` naming ``where``."""
    if not _is_int(v):
        raise SignatureError(f"{where}: must be an integer from {_INT_MIN} to {_INT_MAX}")
    return int(v)


def _int_list(v: Any, where: str) -> list[int]:
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v]
    if not isinstance(v, list) or not all(_is_int(x) for x in v):
        raise SignatureError(
            f"{where}: must be an integer or a list of integers from {_INT_MIN} to {_INT_MAX}"
        )
    return v


def _validate_rule(rule: Any, where: str) -> int:
    """Check one rule (recursively); return its specificity (number of conditions)."""
    if not isinstance(rule, dict):
        raise SignatureError(f"{where}: a rule must be a table")
    unknown = set(rule) - _RULE_KEYS
    if unknown:
        raise SignatureError(
            f"{where}: unknown rule key(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(_RULE_KEYS))}"
        )
    if not rule:
        raise SignatureError(f"{where}: empty rule")
    score = 0
    for key, val in rule.items():
        w = f"{where}.{key}"
        if key in ("kinds", "rank_without_kinds", "peer_has_kinds"):
            bad = [k for k in _str_list(val, w) if k not in _KINDS]
            if bad:
                raise SignatureError(f"{w}: unknown event kind(s) {', '.join(bad)}")
            score += 1
        elif key in ("message_regex", "raw_regex", "exc_type_regex", "differs_capture"):
            _check_regex(val, w)
            score += 2
        elif key in ("not_message_regex", "not_exc_type_regex"):
            _check_regex(val, w)
            score += 1
        elif key in ("op", "signal", "layers"):
            _str_list(val, w)
            score += 1
        elif key in ("exit_code", "ranks"):
            _int_list(val, w)
            score += 1
        elif key == "where":
            if val not in _WHERE:
                raise SignatureError(f"{w}: must be one of {', '.join(_WHERE)}")
            score += 0 if val == "any" else 1
        elif key == "position":
            if val not in _POSITIONS:
                raise SignatureError(f"{w}: must be one of {', '.join(_POSITIONS)}")
            score += 1
        elif key in ("min_count", "min_ranks", "max_ranks") or key.endswith(("_min", "_max")):
            _int(val, w)
            score += 1
        elif key == "differs":
            bad = [c for c in _str_list(val, w) if c not in _DIFFERS]
            if bad:
                raise SignatureError(
                    f"{w}: cannot compare column(s) {', '.join(bad)}; use {', '.join(_DIFFERS)}"
                )
            score += 2
        elif key == "failure_kind":
            bad = [k for k in _str_list(val, w) if k not in _FAILURE_KINDS]
            if bad:
                raise SignatureError(f"{w}: unknown failure kind(s) {', '.join(bad)}")
            score += 1
        elif key in _COMBINATORS:
            if not isinstance(val, list) or not val:
                raise SignatureError(f"{w}: must be a non-empty list of rules")
            subs = [_validate_rule(r, f"{w}[{i}]") for i, r in enumerate(val)]
            # all_of adds its parts; any_of counts as its weakest branch; a none_of guard counts once.
            score += sum(subs) if key == "all_of" else (min(subs) if key == "any_of" else 1)
    return score


def _parse_signature(raw: Any, where: str, source: str) -> Signature:
    if not isinstance(raw, dict):
        raise SignatureError(f"{where}: each [[signature]] must be a table")
    unknown = set(raw) - _SIG_KEYS
    if unknown:
        raise SignatureError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for k in _REQUIRED_TEXT:
        if not isinstance(raw.get(k), str) or not raw[k].strip():
            raise SignatureError(f"{where}: missing or empty '{k}'")
    where = f"{where} ({raw['id']})"
    if "match" not in raw:
        raise SignatureError(f"{where}: missing [signature.match]")
    spec = _validate_rule(raw["match"], f"{where}.match")
    role = raw.get("role", "cause")
    if role not in _ROLES:
        raise SignatureError(f"{where}.role: must be one of {', '.join(_ROLES)}")
    priority = raw.get("priority", 0)
    _int(priority, f"{where}.priority")
    likely = _str_list(raw.get("likely_failure_kind", []), f"{where}.likely_failure_kind")
    bad = [k for k in likely if k not in _FAILURE_KINDS]
    if bad:
        raise SignatureError(f"{where}.likely_failure_kind: unknown failure kind(s) {', '.join(bad)}")
    near = raw.get("near_miss", "")
    if not isinstance(near, str):
        raise SignatureError(f"{where}.near_miss: must be a string")
    return Signature(
        id=raw["id"].strip(),
        title=raw["title"].strip(),
        layer=raw["layer"].strip(),
        meaning=raw["meaning"].strip(),
        root_cause=raw["root_cause"].strip(),
        fix=raw["fix"].strip(),
        confirm=tuple(_str_list(raw.get("confirm", []), f"{where}.confirm")),
        verify=raw["verify"].strip(),
        related=tuple(_str_list(raw.get("related", []), f"{where}.related")),
        references=tuple(_str_list(raw.get("references", []), f"{where}.references")),
        match=raw["match"],
        role=role,
        priority=priority,
        likely_failure_kind=tuple(likely),
        near_miss=near.strip(),
        source=source,
        specificity=spec,
    )


#: The built-in library ships with rankscope: not held to the limit of a user's file.
_BUILTIN_LIMIT = 64 << 20


def _load_file(path: Path, limit: int | None = None) -> list[Signature]:
    """The signatures of one TOML file, read with the small-file limit (``limit`` bytes; default
    ``RANKSCOPE_MAX_SMALL_KB``). Raises :class:`SignatureError` naming the file and the reason."""
    from correlator.smallfile import SmallFileError, read_small

    try:
        small = read_small(path, str(path), limit)
        if small.truncated:
            raise SignatureError(small.too_big(f"{path}: signature file"))
        data = tomllib.loads(small.data.decode("utf-8"))
    except SmallFileError as e:
        raise SignatureError(f"{e} (signature file)") from None
    except UnicodeDecodeError as e:
        raise SignatureError(f"{path}: not UTF-8 text ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise SignatureError(f"{path}: not valid TOML ({e})") from None
    sigs = data.get("signature")
    extra_top = set(data) - {"signature"}
    if extra_top:
        raise SignatureError(
            f"{path}: unknown top-level key(s) {', '.join(sorted(extra_top))}; "
            "signatures go in [[signature]] tables"
        )
    if not isinstance(sigs, list) or not sigs:
        raise SignatureError(f"{path}: no [[signature]] tables")
    out: list[Signature] = []
    seen: set[str] = set()
    for i, raw in enumerate(sigs):
        s = _parse_signature(raw, f"{path}: signature #{i + 1}", str(path))
        if s.id in seen:
            raise SignatureError(f"{path}: duplicate signature id {s.id!r}")
        seen.add(s.id)
        out.append(s)
    return out


@lru_cache(maxsize=1)
def _builtin_signatures() -> tuple[Signature, ...]:
    """The built-in library, read and checked once per process (it ships with the package and does not change
    while it runs): a diagnosis per case in one process (``rankscope eval``, the Python API) parsed its TOML
    each time, ~25 ms."""
    return tuple(_load_file(builtin_path(), _BUILTIN_LIMIT))


def load_signatures(extra: Iterable[Path | str] = ()) -> list[Signature]:
    """The built-in signatures plus those of each file in ``extra`` (later files override earlier ids).

    Raises ``SignatureError`` (a ``ValueError``) naming the file and the reason when a file is unreadable
    or invalid.
    """
    by_id: dict[str, Signature] = {s.id: s for s in _builtin_signatures()}
    for p in extra:
        for s in _load_file(Path(p)):
            by_id[s.id] = s
    return list(by_id.values())


@dataclass(frozen=True)
class TextPatterns:
    """What the regexes of a signature library read, one alternation per text column: ``message`` (every
    rule's ``message_regex``, which is matched on ``message``, else ``raw``) and ``raw`` (every
    ``raw_regex``); None where no rule has one. Plain strings, so that they pickle to the worker processes of
    streaming ingest. The rows the reduction for diagnosis would cut but :meth:`expr` holds for are kept whole
    (:func:`correlator.reduce.kept`): a signature matched on a reduced table sees every line its regexes
    would match in the whole one."""

    message: str | None
    raw: str | None

    def expr(self) -> pl.Expr:
        """True for a row whose text some rule's regex matches (null text: False). Needs ``message`` and
        ``raw`` (only ``raw`` when the library has no ``message_regex``)."""
        hits = []
        if self.message is not None:
            hits.append(_message_text().str.contains(self.message))
        if self.raw is not None:
            hits.append(pl.col("raw").fill_null("").str.contains(self.raw))
        return pl.any_horizontal(hits) if hits else pl.repeat(False, pl.len())

    @classmethod
    def of(cls, rules: Iterable[dict[str, Any]]) -> TextPatterns:
        """The patterns of ``rules`` (each rule's own regexes, not its sub-rules')."""
        rules = list(rules)
        return cls(
            _alternation(r["message_regex"] for r in rules if "message_regex" in r),
            _alternation(r["raw_regex"] for r in rules if "raw_regex" in r),
        )


def _message_text() -> pl.Expr:
    """The text a ``message_regex`` reads: ``message``, else ``raw`` (null: empty)."""
    return pl.coalesce(pl.col("message"), pl.col("raw")).fill_null("")


def _rules(rule: Any) -> Iterator[dict[str, Any]]:
    """``rule`` and its sub-rules (``all_of``, ``any_of``, ``none_of``; each is matched on the table by its
    own conditions), depth first."""
    if isinstance(rule, dict):
        yield rule
        for key in ("all_of", "any_of", "none_of"):
            for sub in rule.get(key, []):
                yield from _rules(sub)


def _alternation(patterns: Iterable[str]) -> str | None:
    """One regex matching where any of ``patterns`` does (each in its own group, so an inline flag such as
    ``(?i)`` stays within its pattern); None for none."""
    uniq = list(dict.fromkeys(patterns))
    return "|".join(f"(?:{p})" for p in uniq) if uniq else None


def text_patterns(
    kinds: Iterable[str], layers: Iterable[str] | None = None, sigs: Iterable[Signature] | None = None
) -> TextPatterns:
    """The :class:`TextPatterns` of the rules and sub-rules of ``sigs`` (default: the built-in library, built
    once per process) that can hold on a row of one of ``kinds`` and ``layers`` (None: of any layer): they
    name no kinds or one of them, no layers or one of them."""
    k, ly = frozenset(kinds), None if layers is None else frozenset(layers)
    if sigs is None:
        return _builtin_text(k, ly)
    return TextPatterns.of(
        r
        for s in sigs
        for r in _rules(s.match)
        if all(
            col not in r or want is None or not want.isdisjoint(_str_list(r[col], col))
            for col, want in (("kinds", k), ("layers", ly))
        )
    )


@lru_cache(maxsize=4)
def _builtin_text(kinds: frozenset[str], layers: frozenset[str] | None) -> TextPatterns:
    return text_patterns(kinds, layers, _builtin_signatures())


# --------------------------------------------------------------------------------------------- matching


@dataclass
class _Ctx:
    table: pl.DataFrame  # non-duplicate rows
    initiating: frozenset[int]
    collateral: frozenset[int]
    failure_kind: str
    #: The rows of ``table`` whose text the ``message_regex`` or ``raw_regex`` of a text-led rule matches
    #: (:func:`_text_led`; None: not narrowed): such a rule holds only on these rows, so it reads them
    #: instead of ``table``.
    text_table: pl.DataFrame | None = None


#: Row conditions that run a regex over text: applied after the others, to the rows those leave.
_TEXT_KEYS = frozenset(
    {"message_regex", "raw_regex", "exc_type_regex", "not_message_regex", "not_exc_type_regex"}
)


def _row_filters(rule: dict[str, Any], ctx: _Ctx) -> list[pl.Expr]:
    """The row filters of ``rule``, to apply one after the other (a row holds when every one is true; none
    when the rule has no row conditions): first one of its cheap conditions (kinds, layers, ranks, numbers),
    then its text regexes, so a regex reads only the rows the others left. The rows kept are those of the
    conjunction of every condition, nulls false. Measured on an application-heavy job (400k rows, one
    thread): the built-in library's match 0.66 s of CPU with one filter per rule, against ~0.05 s."""
    cheap = _row_expr({k: v for k, v in rule.items() if k not in _TEXT_KEYS}, ctx)
    text = _row_expr({k: v for k, v in rule.items() if k in _TEXT_KEYS}, ctx)
    return [e for e in (cheap, text) if e is not None]


def _row_expr(rule: dict[str, Any], ctx: _Ctx) -> pl.Expr | None:
    """The row filter of ``rule`` (None when the rule has no row conditions)."""
    conds: list[pl.Expr] = []
    for key, val in rule.items():
        if key == "kinds":
            conds.append(pl.col("kind").is_in(_str_list(val, key)))
        elif key == "layers":
            conds.append(pl.col("layer").is_in(_str_list(val, key)))
        elif key == "message_regex":
            conds.append(_message_text().str.contains(val))
        elif key == "raw_regex":
            conds.append(pl.col("raw").fill_null("").str.contains(val))
        elif key == "exc_type_regex":
            conds.append(pl.col("exc_type").fill_null("").str.contains(val))
        elif key == "not_message_regex":
            conds.append(~_message_text().str.contains(val))
        elif key == "not_exc_type_regex":
            conds.append(~pl.col("exc_type").fill_null("").str.contains(val))
        elif key == "op":
            conds.append(pl.col("op").is_in(_str_list(val, key)))
        elif key == "signal":
            conds.append(pl.col("signal").is_in(_str_list(val, key)))
        elif key == "exit_code":
            conds.append(pl.col("exit_code").is_in(_int_list(val, key)))
        elif key == "ranks":
            conds.append(pl.col("rank").is_in(_int_list(val, key)))
        elif key == "where":
            if val == "initiating":
                conds.append(pl.col("rank").is_in(list(ctx.initiating)))
            elif val == "collateral":
                conds.append(pl.col("rank").is_in(list(ctx.collateral)))
        elif key == "position":
            conds.append(pl.col("seq").is_not_null() & (pl.col("seq") <= FIRST_COLLECTIVE_MAX_SEQ))
        elif key == "rank_without_kinds":
            bad = ctx.table.filter(pl.col("kind").is_in(_str_list(val, key)) & pl.col("rank").is_not_null())
            conds.append(pl.col("rank").is_not_null() & ~pl.col("rank").is_in(bad["rank"].unique().to_list()))
        elif key == "peer_has_kinds":
            has = ctx.table.filter(pl.col("kind").is_in(_str_list(val, key)) & pl.col("rank").is_not_null())
            conds.append(pl.col("peer_rank").is_in(has["rank"].unique().to_list()))
        elif key.endswith("_min") and key[:-4] in _NUMERIC:
            conds.append(pl.col(key[:-4]) >= val)
        elif key.endswith("_max") and key[:-4] in _NUMERIC:
            conds.append(pl.col(key[:-4]) <= val)
    if not conds:
        return None
    expr = conds[0]
    for c in conds[1:]:
        expr = expr & c
    return expr.fill_null(False)


def _group_ok(rule: dict[str, Any], rows: pl.DataFrame) -> bool:
    if rows.height < rule.get("min_count", 1):
        return False
    n_ranks = rows["rank"].drop_nulls().n_unique()
    if "min_ranks" in rule and n_ranks < rule["min_ranks"]:
        return False
    if "max_ranks" in rule and n_ranks > rule["max_ranks"]:
        return False
    for col in _str_list(rule.get("differs", []), "differs"):
        if rows[col].drop_nulls().n_unique() < 2:
            return False
    if "differs_capture" in rule:
        caps = rows.select(
            pl.coalesce(pl.col("message"), pl.col("raw")).str.extract(rule["differs_capture"], 1)
        )
        if caps.to_series().drop_nulls().n_unique() < 2:
            return False
    return True


def _eval(rule: dict[str, Any], ctx: _Ctx) -> tuple[bool, set[int]]:
    """Whether ``rule`` holds, and the event ids of the rows that made it hold."""
    events: set[int] = set()
    if "failure_kind" in rule and ctx.failure_kind not in _str_list(rule["failure_kind"], "failure_kind"):
        return False, events
    filters = _row_filters(rule, ctx)
    has_group = any(k in rule for k in _GROUP_KEYS)
    if filters or has_group:
        rows = ctx.text_table if ctx.text_table is not None and _text_led(rule) else ctx.table
        for f in filters:
            rows = rows.filter(f)
        if rows.height == 0 or not _group_ok(rule, rows):
            return False, events
        events.update(rows["event_id"].to_list())
    for sub in rule.get("all_of", []):
        ok, ev = _eval(sub, ctx)
        if not ok:
            return False, set()
        events |= ev
    if "any_of" in rule:
        hit = False
        for sub in rule["any_of"]:
            ok, ev = _eval(sub, ctx)
            if ok:
                hit = True
                events |= ev
        if not hit:
            return False, set()
    for sub in rule.get("none_of", []):
        ok, _ = _eval(sub, ctx)
        if ok:
            return False, set()
    return True, events


#: Row conditions other than the positive text regexes.
_CHEAP_KEYS = _ROW_KEYS - {"message_regex", "raw_regex"}


def _text_led(rule: dict[str, Any]) -> bool:
    """A rule whose only row conditions are text: ``message_regex`` or ``raw_regex`` (and their negations,
    ``exc_type_regex``); it would run its regex over every row of the table."""
    return ("message_regex" in rule or "raw_regex" in rule) and _CHEAP_KEYS.isdisjoint(
        k for k in rule if k not in ("not_message_regex", "not_exc_type_regex", "exc_type_regex")
    )


def _context(diagnosis: Any, table: pl.DataFrame, sigs: list[Signature] | None = None) -> _Ctx:
    """The matching context; with ``sigs`` (the library matched), ``text_table``: one pass of the
    alternation of their text-led rules' regexes over every row, instead of a pass per rule (the built-in
    library's ``match``: 0.22 -> 0.13 s on the bench's 320k-row COLL table, 0.17 -> 0.08 s on its 400k-row
    application table; 2 cores, 2026-12-06)."""
    t = table
    if "duplicate" in t.columns:
        t = t.filter(~pl.col("duplicate").fill_null(False))
    text = None
    if sigs is not None:
        text = t.filter(TextPatterns.of(r for s in sigs for r in _rules(s.match) if _text_led(r)).expr())
    return _Ctx(
        table=t,
        initiating=frozenset(getattr(diagnosis, "initiating_ranks", None) or ()),
        collateral=frozenset(getattr(diagnosis, "collateral_ranks", None) or ()),
        failure_kind=str(getattr(diagnosis, "failure_kind", None) or "unknown"),
        text_table=text,
    )


def match(diagnosis: Any, table: pl.DataFrame, sigs: list[Signature] | None = None) -> list[dict[str, Any]]:
    """The signatures (default: the built-in library) whose rules hold on ``table``, most specific first.

    Ranking: root causes before effects before context; then the rule's specificity (number of conditions)
    plus its ``priority``, plus a bonus when the diagnosis's ``failure_kind`` is one the signature lists as
    likely; then the id. Each result is a dict with ``id, title, layer, role, meaning, root_cause, fix,
    confirm, verify, related, references, matched_events, matched_ranks, score``.
    """
    if sigs is None:
        sigs = load_signatures()
    ctx = _context(diagnosis, table, sigs)
    hits: list[tuple[tuple[int, int, str], dict[str, Any]]] = []
    for s in sigs:
        ok, events = _eval(s.match, ctx)
        if not ok:
            continue
        score = s.specificity + s.priority + (3 if ctx.failure_kind in s.likely_failure_kind else 0)
        ev = sorted(events)
        ranks = (
            sorted(
                {
                    int(r)
                    for r in ctx.table.filter(pl.col("event_id").is_in(ev))["rank"].drop_nulls().to_list()
                }
            )
            if ev
            else []
        )
        d = {
            "id": s.id,
            "title": s.title,
            "layer": s.layer,
            "role": s.role,
            "meaning": s.meaning,
            "root_cause": s.root_cause,
            "fix": s.fix,
            "confirm": list(s.confirm),
            "verify": s.verify,
            "related": list(s.related),
            "references": list(s.references),
            "matched_events": ev[:MAX_MATCHED_EVENTS],
            "matched_ranks": ranks,
            "score": score,
        }
        hits.append(((_ROLES.index(s.role), -score, s.id), d))
    hits.sort(key=lambda h: h[0])
    return [d for _, d in hits]


def attach(diagnosis: Any, table: pl.DataFrame, extra: Iterable[Path | str] = ()) -> Any:
    """``diagnosis`` (a :class:`correlator.diagnose.Diagnosis`) with its ``signatures`` set to the matching signatures (built-in library plus ``extra``
    files): a new record, the verdict given is not changed.

    The top-level verdict is matched against the whole table; each per-attempt verdict in
    ``diagnosis.attempts`` (a restarted job) against the rows of its own attempt.
    """
    sigs = load_signatures(list(extra))

    def rows(a: Any) -> pl.DataFrame:
        return table.filter(pl.col("attempt") == a.attempt) if "attempt" in table.columns else table

    return replace(
        diagnosis,
        signatures=match(diagnosis, table, sigs),
        attempts=[replace(a, signatures=match(a, rows(a), sigs)) for a in diagnosis.attempts],
    )


def find(sigs: list[Signature], sig_id: str) -> Signature | None:
    return next((s for s in sigs if s.id == sig_id), None)


def close_ids(sigs: list[Signature], sig_id: str, n: int = 5) -> list[str]:
    """Up to ``n`` ids of ``sigs`` that ``sig_id`` may have meant: those holding each of its words (any
    case; ``-``, ``_`` and spaces alike), in library order, then the ones :func:`difflib.get_close_matches`
    finds (a typo)."""
    import difflib

    words = [w for w in re.split(r"[-_\s]+", sig_id.lower()) if w]
    ids = [s.id for s in sigs]
    hits = [i for i in ids if words and all(w in i.lower() for w in words)]
    hits += difflib.get_close_matches("-".join(words), ids, n=n, cutoff=0.6)
    return list(dict.fromkeys(hits))[:n]


# --------------------------------------------------------------------------------------------- CLI


def explain_text(s: Signature) -> str:
    """The full, plain-text description of one signature (``rankscope explain ID``)."""
    lines = [f"{s.id}: {s.title}", f"layer: {s.layer}   role: {s.role}"]
    if s.likely_failure_kind:
        lines.append(f"usual failure kind: {', '.join(s.likely_failure_kind)}")
    lines += [
        "",
        "What it means:",
        f"  {s.meaning}",
        "",
        "Root cause:",
        f"  {s.root_cause}",
        "",
        "Fix:",
        f"  {s.fix}",
    ]
    if s.confirm:
        lines += ["", "Confirm:"] + [f"  - {c}" for c in s.confirm]
    lines += ["", "Verify:", f"  {s.verify}"]
    if s.near_miss:
        lines += ["", "Not to be confused with:", f"  {s.near_miss}"]
    if s.related:
        lines += ["", f"Related: {', '.join(s.related)}"]
    if s.references:
        lines += ["", "References:"] + [f"  {r}" for r in s.references]
    lines += ["", "Match rule:", "  " + json.dumps(s.match, sort_keys=True)]
    return "\n".join(lines)
