"""``parsers.rules.ascii_classes``: a rule's or prefix's ``\\d`` and ``\\w`` written as ASCII classes match what the
pattern matched on ASCII text, in Python's ``re`` and in polars (Rust's regex) alike, and every :class:`Rule` and
:class:`Prefix` of the parsers holds its pattern so written."""

from __future__ import annotations

import re

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.rules import Prefix, Rule, ascii_classes, defined
from tests.conftest import DRAWN

W = r"(?:[0-9A-Za-z_]|[^\x00-\x7F])"


def test_the_rewrites_inside_and_outside_classes() -> None:
    assert ascii_classes(r"^\d+:\w+$") == rf"^[0-9]+:{W}+$"
    # a class holding \w: the class in ASCII, or a character beyond ASCII
    assert ascii_classes(r"[\w.-]+ [^\d\s]") == r"(?:[0-9A-Za-z_.-]|[^\x00-\x7F])+ [^0-9\s]"
    assert ascii_classes(r"\D\W") == r"[^0-9]\W"  # \W stays
    assert ascii_classes(r"[^\D][^\w ]") == r"[^\D][^\w ]"  # complements and \w inside a negated class stay
    assert ascii_classes(r"\\d \[\d\]") == r"\\d \[[0-9]\]"  # an escaped backslash, escaped brackets
    assert ascii_classes(r"[]\d]x") == r"[]0-9]x"  # a literal ] first in a class
    assert ascii_classes(r"[^]\d]x") == r"[^]0-9]x"
    assert ascii_classes(r"\d[a[\d]]\d") == r"[0-9][a[\d]]\d"  # from a nested class on: as written
    assert ascii_classes(r"\d^[\d+") == r"[0-9]^[\d+"  # from a class not closed on: as written
    assert ascii_classes(r"\s\S\b\B\p{L}\x41") == r"\s\S\b\B\p{L}\x41"  # other escapes stay
    assert ascii_classes(r"(?-u)\d\w") == r"(?-u)\d\w"  # Unicode off: as written


def test_every_rule_and_prefix_pattern_is_written_in_ascii_classes() -> None:
    """Made so when the object is built: writing it again changes nothing (a pattern with a ``\\d`` left would)."""
    rules, prefixes = defined()
    pats = [r.pattern for r in rules if r.pattern] + [p.pattern for p in prefixes]
    assert len(pats) > 100
    assert [p for p in pats if ascii_classes(p) != p] == []
    assert Prefix("x", r"^\d+ (?P<rest>.*)$").pattern == r"^[0-9]+ (?P<rest>.*)$"
    assert Rule("x", "log", "app", "x", pattern=r"x(?P<n>\d+)").pattern == r"x(?P<n>[0-9]+)"


def test_every_module_level_pattern_of_the_parsers_is_written_in_ascii_classes() -> None:
    """The patterns a parser module holds as text (those it hands to polars besides its rules and prefixes: line
    starts, record starts, exception lines, the application fast path's gates and fields, tee and srun heads, ...)
    are written so too, each where it is defined; a new one written with ``\\d`` or ``\\w`` fails here. Compiled
    ``re.Pattern`` objects run in Python's ``re`` only and may keep Unicode classes, but for one whose text the
    application fast path's markers join (``stack.DEBUG_SERVER_RANK``: a marker must match what its helper matches)."""
    import importlib
    import pkgutil

    import parsers
    from parsers import appfast, stack

    texts: dict[str, str] = {}
    names = ["parsers", *(info.name for info in pkgutil.walk_packages(parsers.__path__, "parsers."))]
    for name in names:
        mod = importlib.import_module(name)
        texts.update(
            {f"{name}.{k}": v for k, v in vars(mod).items() if isinstance(v, str) and not k.startswith("__")}
        )
    # the ones a slice compiled before this test covered the whole package, and the fast path's fields
    for known in (
        "parsers._KNOWN_START",
        "parsers.transport._RECORD_START",
        "parsers.app.STEP_RE",
        "parsers.appfast._MARKERS",
    ):
        assert known in texts
    assert sorted(k for k, v in texts.items() if ascii_classes(v) != v) == []
    assert ascii_classes(stack.DEBUG_SERVER_RANK.pattern) == stack.DEBUG_SERVER_RANK.pattern
    assert stack.DEBUG_SERVER_RANK.pattern in appfast._MARKERS


_ATOMS = [
    r"\d", r"\w", r"\D", r"\W", r"\s", "a", "Z", "_", "-", ":", " ", r"\.", ".",
    r"[\w.-]", r"[^\d]", r"[\d:]", r"[a-c\d]", r"[^\w ]", r"(?:\d|x)", r"(\w)",
]  # fmt: skip
_PATTERNS = st.builds(
    lambda anchor, parts: anchor + "".join(a + q for a, q in parts),
    st.sampled_from(["", "^"]),
    st.lists(
        st.tuples(st.sampled_from(_ATOMS), st.sampled_from(["", "+", "*", "?", "{2}"])),
        min_size=1,
        max_size=6,
    ),
)
_ASCII_TEXT = st.text(alphabet="aZ_-.: x09\t", max_size=12)
_ANY_TEXT = st.text(alphabet="aZ_-.: x09\té训١\u00a0—", max_size=12)


@settings(DRAWN, max_examples=max(DRAWN.max_examples, 300))  # ~3 ms an example
@given(_PATTERNS, st.lists(_ASCII_TEXT, min_size=1, max_size=8), st.lists(_ANY_TEXT, min_size=1, max_size=8))
def test_ascii_classes_match_as_the_pattern_did_on_ascii_text(
    pattern: str, ascii_texts: list[str], any_texts: list[str]
) -> None:
    """On ASCII text the written pattern matches where the pattern did (Python's ``re``, Unicode classes) and
    polars agrees; on any text, polars and Python agree on the written pattern (both engines read it alike)."""
    written = ascii_classes(pattern)
    before = [bool(re.search(pattern, t)) for t in ascii_texts]
    assert [bool(re.search(written, t)) for t in ascii_texts] == before
    assert pl.Series(ascii_texts).str.contains(written).to_list() == before
    assert pl.Series(any_texts).str.contains(written).to_list() == [
        bool(re.search(written, t)) for t in any_texts
    ]


def test_beyond_ascii_a_word_class_takes_any_character_and_a_digit_only_ascii() -> None:
    """What the rewrite changes off ASCII, as its docstring says: a name in another script is still ``\\w``; a
    digit of another script is no longer ``\\d``."""
    s = pl.Series(["训练", "worker—1", "１２", "12"])
    assert s.str.contains(ascii_classes(r"^\w+$")).to_list() == [True, True, True, True]
    assert s.str.contains(ascii_classes(r"^\d+$")).to_list() == [False, False, False, True]
    assert s.str.contains(r"^\d+$").to_list() == [False, False, True, True]  # Unicode \d: what changed
