"""One pipeline, one answer: ``correlator.diagnose_path`` (what :func:`correlator.open_job` calls) carries
what the CLI prints, checks its input like the CLI; no module below the CLI imports the CLI. That the job's JSON
is byte for byte what ``rankscope diagnose -f json`` prints, in every input mode: tests/test_job.py; that
every mode prints the whole table's verdict, on every corpus case: tests/test_reduced_diagnosis.py."""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import networkx as nx
import pytest
from typer.testing import CliRunner

import correlator
from correlator.cli import app
from correlator.ingest import ingest
from tests.conftest import CASES

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
PUBLIC02 = CASES / "public-02-oom-rank2-multinode-timeouts" / "logs"


def test_result_carries_signatures_and_skipped() -> None:
    """What the CLI used to add itself is in the API's result: the skipped list and the signatures."""
    got = correlator.diagnose_path(PUBLIC02)
    doc = got.to_dict()
    assert doc["skipped"] == [dict(e) for e in ingest(PUBLIC02).skipped]
    assert list(doc)[-1] == "skipped"
    assert "signatures" in doc
    assert doc["signatures"] == json.loads(json.dumps(got.diagnosis.to_json(), default=str))["signatures"]


def test_tz_on_a_parquet_table_is_a_warning_not_silence(tmp_path: Path) -> None:
    """A parquet table's stamps were made UTC when it was written: ``--tz`` cannot change them, and says so
    (it used to be ignored without a word); the verdict is the one without it."""
    pq = tmp_path / "t.parquet"
    assert runner.invoke(app, ["timeline", str(PUBLIC02), "-o", str(pq), "-q"]).exit_code == 0
    seen: list[list[str]] = []
    with_tz = correlator.diagnose_path(pq, tz="Europe/Berlin", on_warnings=seen.append)
    assert [w for w in with_tz.warnings if w.startswith("--tz Europe/Berlin not applied")]
    assert seen == [with_tz.warnings]
    plain = correlator.diagnose_path(pq)
    assert plain.warnings == [] and plain.diagnosis.to_json() == with_tz.diagnosis.to_json()


def test_unknown_attempt_names_the_attempts_that_exist() -> None:
    attempts = ingest(PUBLIC02).summary()["attempts"]
    with pytest.raises(correlator.InputError) as e:
        correlator.diagnose_path(PUBLIC02, attempt=99)
    assert (
        str(e.value) == f"--attempt 99: no such attempt in these logs (attempts, counted from 0: {attempts})"
    )
    r = runner.invoke(app, ["diagnose", str(PUBLIC02), "--attempt", "99"])
    assert isinstance(r.exception, correlator.InputError) and str(r.exception) == str(e.value)


def test_missing_path_and_bad_tz_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(correlator.InputError, match="no such file or directory"):
        correlator.diagnose_path(tmp_path / "nope")
    with pytest.raises(correlator.InputError, match="unknown time zone"):
        correlator.diagnose_path(PUBLIC02, tz="Mars/Olympus")
    with pytest.raises(correlator.InputError, match="--fr .*no such file"):
        correlator.diagnose_path(PUBLIC02, fr=tmp_path / "nope")


# ---- layering -----------------------------------------------------------------------------------------------


def _imports(path: Path) -> set[str]:
    """Every ``correlator`` module ``path`` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "correlator")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "correlator":
                found.update(f"correlator.{a.name}" for a in node.names)
            elif node.module.startswith("correlator."):
                found.add(node.module)
    return found


MODULES = sorted((REPO / "correlator").rglob("*.py")) + sorted((REPO / "parsers").glob("*.py"))
#: The command line: the package correlator/cli/ and ``python -m correlator``.
CLI = REPO / "correlator" / "cli"


def _module(p: Path) -> str:
    """The dotted name of the module in file ``p`` (a package's ``__init__.py``: the package)."""
    parts = p.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_layer_check_sees_imports() -> None:
    """The AST scan finds what it must (else the tests below could not fail)."""
    assert "correlator.cli" in _imports(REPO / "correlator" / "__main__.py")
    assert "correlator.job" in _imports(REPO / "correlator" / "cli" / "watch.py")  # inside the command
    assert "correlator.report" in _imports(REPO / "correlator" / "api.py")  # a lazy import inside a method


def test_only_the_cli_entry_points_import_the_cli() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for p in MODULES
        if p != REPO / "correlator" / "__main__.py" and not p.is_relative_to(CLI)
        if any(m == "correlator.cli" or m.startswith("correlator.cli.") for m in _imports(p))
    ]
    assert offenders == []


def test_no_import_circles_in_correlator() -> None:
    g = nx.DiGraph()
    names = {_module(p) for p in (REPO / "correlator").rglob("*.py")}
    for p in (REPO / "correlator").rglob("*.py"):
        name = _module(p)
        for m in _imports(p):
            if m != name and m in names:
                g.add_edge(name, m)
    g.remove_node("correlator")  # the package re-exports the API; every module is under it
    cycles = sorted(sorted(c) for c in nx.simple_cycles(g))
    assert cycles == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_module_imports(path: Path) -> None:
    name = _module(path)
    if name == "correlator.__main__":
        pytest.skip("runs the CLI on import")
    assert importlib.import_module(name).__name__ == name


def test_a_parquet_timeline_from_before_a_column_was_added_says_so(tmp_path: Path) -> None:
    import polars as pl

    from correlator.api import check_parquet
    from correlator.errors import InputError

    t = correlator.load(CASES / "cap-03-straggler-hang-plain" / "logs")
    old = tmp_path / "old.parquet"
    t.drop("ranks_named", "peer_op").write_parquet(old)
    with pytest.raises(InputError, match=r"missing column\(s\) ranks_named, peer_op \(written by an older"):
        check_parquet(old)
    other = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(other)
    with pytest.raises(InputError, match=r"missing column") as e:
        check_parquet(other)
    assert "older rankscope" not in str(e.value)
