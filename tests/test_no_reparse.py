"""The diagnosis reads the columns the parsers filled; it never parses message text again (issue 15 item 1).

An AST scan of the diagnosis steps: no ``re`` module, and no polars regex/substring method on a string column
(``.str.contains``/``extract``/``replace``…). A line's fields are parsed once, by its producer's rule in
``parsers/``. The one allowed use is named with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent / "correlator"
#: The steps after ingest that decide the verdict.
STEPS = (
    "align",
    "clock",
    "graph",
    "initiators",
    "attempt_evidence",
    "disagreement",
    "silence",
    "faults",
    "diagnose",
    "quotes",
    "summary",
    "confidence",
    "fr",
)
TEXT_METHODS = {
    "contains",
    "contains_any",
    "extract",
    "extract_all",
    "extract_groups",
    "extract_many",
    "replace",
    "replace_all",
    "replace_many",
    "find",
    "find_many",
    "count_matches",
    "starts_with",
    "ends_with",
    "split",
    "split_exact",
}
#: (module, function) -> why it may read text.
ALLOWED = {
    # compares whole application lines across ranks by template (digits masked): free text, not a field
    ("disagreement", "config_outlier"),
    # splits the ``ranks_named`` column (``1,3``), which parsers.rules.rank_list wrote: a column, not a message
    ("faults", "_expand_task_lists"),
    # one polars scan of each fault row's traceback for a frame of a collective (parsers.python's pattern, the
    # producer's rule): an exception raised inside a collective is the wait failing. A traceback-frame column
    # filled at parse time would remove it (issue #30 item 2 left that for the claims rewrite).
    ("faults", "_raised_by_wait"),
}


def _text_uses(tree: ast.Module) -> set[str]:
    """Names of the functions in ``tree`` that call a polars text method (``….str.<method>``) or import ``re``
    (``<module>`` for an import at module level)."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) and _imports_re(node):
            found.add("<module>")
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom) and _imports_re(node):
                found.add(fn.name)
            if (
                isinstance(node, ast.Attribute)
                and node.attr in TEXT_METHODS
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "str"
            ):
                found.add(fn.name)
    return found


def _imports_re(node: ast.Import | ast.ImportFrom) -> bool:
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return "re" in names


def test_diagnosis_steps_never_parse_text_again() -> None:
    found = {(mod, fn) for mod in STEPS for fn in _text_uses(ast.parse((ROOT / f"{mod}.py").read_text()))}
    assert found == ALLOWED


def test_the_scan_sees_a_reparse() -> None:
    """The scan is not blind: a ``.str.extract`` on ``message``, a local ``import re``, a module-level one."""
    src = (
        "import polars as pl\n\n"
        "def f(t):\n    return t.with_columns(pl.col('message').str.extract(r'rank (\\d+)'))\n\n"
        "def g(m):\n    import re\n    return re.search('x', m)\n\n"
        "def h(t):\n    return t.filter(pl.col('rank') == 1)\n"
    )
    assert _text_uses(ast.parse(src)) == {"f", "g"}
    assert _text_uses(ast.parse("import re\n")) == {"<module>"}
