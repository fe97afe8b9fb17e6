"""A tree of many tiny per-rank files (issue 35 item 3): what the fast paths for it changed is checked
against values computed here, independently of rankscope: the files found and their order and relative
paths (``os.walk`` + ``Path.parts``), each line read (Python's own split of the file), the rank of every
row (from the generator's layout), and that one command walks the folder once. No time is measured here
(speed: ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import polars as pl
import pytest

from correlator import discover as disc
from correlator import read as rd
from correlator.api import diagnose_path
from correlator.discover import discover, input_size, sharing_walks
from correlator.ingest import ingest
from correlator.limits import current
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from generate import RANKS_PER_NODE, generate_many_files

FILES = 2_000


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    root = tmp_path_factory.mktemp("tree")
    info = generate_many_files(root, FILES, "torchrun", seed=3)
    return root, info


def test_discovery_finds_every_file_in_path_order(tree: tuple[Path, dict[str, object]]) -> None:
    root, _info = tree
    expect = []
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath, n)
            expect.append((p.parts, p.relative_to(root).as_posix(), p.stat().st_size))
    expect.sort()
    sources, warnings = discover(root)
    assert not warnings
    assert [(s.path.parts, s.rel, s.size) for s in sources] == expect
    assert input_size(root) == sum(size for *_x, size in expect)
    by_rel = {s.rel: s for s in sources}
    s = by_rel["node-00003/attempt_0/5/stderr.log"]
    assert (s.layout, s.stream, s.local_rank, s.attempt, s.node_key) == (
        "torchrun_rank",
        "stderr",
        5,
        0,
        "node-00003",
    )


def test_one_command_walks_the_folder_once(
    tree: tuple[Path, dict[str, object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _info = tree
    calls = []
    real = disc._walk_rel
    monkeypatch.setattr(disc, "_walk_rel", lambda *a: calls.append(a) or real(*a))
    with sharing_walks():
        size = input_size(root)
        sources, _w = discover(root)
    assert len(calls) == 1 and size == sum(s.size for s in sources)
    discover(root)  # outside the block: walked again (a later command sees the folder as it is then)
    assert len(calls) == 2


def test_every_line_read_with_its_rank(tree: tuple[Path, dict[str, object]]) -> None:
    root, info = tree
    res = ingest(root)
    t = res.table
    expect = []
    for p in sorted(root.rglob("*.log")):
        rel = p.relative_to(root).as_posix()
        node, _attempt, local, _name = rel.split("/")
        rank = int(node.removeprefix("node-")) * RANKS_PER_NODE + int(local)
        lines = p.read_text().split("\n")[:-1]
        expect += [(rel, k + 1, line, rank) for k, line in enumerate(lines)]
    got = t.filter(pl.col("line_count") == 1).select("path", "line", "raw", "rank").sort("path", "line")
    records = t.filter(pl.col("line_count") > 1)  # the culprit's traceback: one row of several lines
    assert got.height + int(records["line_count"].sum()) == len(expect) == info["lines"]
    ex = pl.DataFrame(expect, schema=["path", "line", "raw", "rank"], orient="row")
    single = ex.join(got.select("path", "line"), on=["path", "line"], how="semi")
    assert got.cast({"rank": pl.Int64}).equals(single.cast({"rank": pl.Int64}).sort("path", "line"))
    assert res.lines_read == len(expect)
    d = diagnose_path(root).diagnosis
    assert d.initiating_ranks == [info["culprit"]]


def test_small_file_split_equals_the_polars_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    texts = ["", "\n", "a", "a\n", "\n\n", "x\ny", "x\ny\n", "one\n\ntwo\n\n"]
    alphabet = "ab \t\n=:[]"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(60))) for _ in range(200)]
    lim = current()
    for k, text in enumerate(texts):
        p = tmp_path / f"f{k}.log"
        p.write_text(text)
        fast = rd.read_lines(p, p.name, lim=lim)
        with monkeypatch.context() as m:
            m.setattr(rd, "_SMALL_TEXT", -1)  # the polars split for every file
            slow = rd.read_lines(p, p.name, lim=lim)
        expect = text.split("\n") if text else []
        if text.endswith("\n"):
            expect.pop()
        assert fast.lines.to_list() == slow.lines.to_list() == expect
        assert (fast.physical_lines, fast.skipped_lines, fast.warnings) == (
            slow.physical_lines,
            slow.skipped_lines,
            slow.warnings,
        )
        if fast.text_bytes is not None:
            assert fast.text_bytes == sum(len(x) + 1 for x in fast.lines.to_list())
