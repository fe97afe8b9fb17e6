"""The application fast path (parsers.appfast) gives exactly the rows the generic prefix + rule path gives.

Compared (``parsers.APP_FAST`` on against off: same columns, types, values and order) on every corpus case, on
a generated application job (``benchmarks/generate.py --shape app``, in each of its logging formats) plus files
that mix asctime lines with what must keep a line or a file generic, on drawn files of application logging lines
(asctime, Hydra, DeepSpeed, HF, bracketed asctime) whose messages hold rule literals, rule examples, helper
markers, tracebacks, indented lines, tqdm bars and tee prefixes, and on drawn files of runs of such lines between
the lines and blocks of other producers; the fast path must have been taken.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from polars.testing import assert_frame_equal

set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "rankscope-hypothesis"))

import parsers
from correlator.ingest import ingest
from correlator.schema import PARSE_KEEP
from parsers import appfast
from parsers.rules import defined
from tests.conftest import CASES, DRAWN, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from generate import generate_app


@pytest.fixture(autouse=True, scope="module")
def _fast_path_at_any_size() -> Iterator[None]:
    """The fast path is compared with the generic path here on inputs of every size: the size below which a
    parse does not try it (``parsers.APP_FAST_MIN_LINES``) is 0 in this module."""
    was = parsers.APP_FAST_MIN_LINES
    parsers.APP_FAST_MIN_LINES = 0
    yield
    parsers.APP_FAST_MIN_LINES = was


def test_a_parse_of_fewer_lines_than_the_threshold_does_not_try_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``parsers.APP_FAST_MIN_LINES``: a parse of fewer generic-path lines goes to the generic path alone (the
    fast path's split is not called), from that many on it is tried; the table is the same either way."""
    generate_app(tmp_path / "job", ranks=2, lines=60, seed=3)
    n = ingest(tmp_path / "job").lines_read
    calls: list[int] = []
    real = parsers._app_split

    def spy(lines: pl.DataFrame) -> tuple[pl.Series, pl.DataFrame] | None:
        calls.append(lines.height)
        return real(lines)

    monkeypatch.setattr(parsers, "_app_split", spy)
    tables = []
    for least in (n + 1, n):
        monkeypatch.setattr(parsers, "APP_FAST_MIN_LINES", least)
        tables.append(ingest(tmp_path / "job").table)
    assert calls == [n]  # the second parse only, all its lines (no NCCL COLL line)
    assert_frame_equal(tables[0], tables[1])


class _Spy:
    """Counts the rows :func:`parsers.appfast.rows` is given (the probe of ``parsers._app_schema`` aside)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows = 0
        real = appfast.rows

        def spy(lines: pl.DataFrame, caps: pl.DataFrame) -> appfast.Rows:
            if lines["path"].first() != "probe.log":
                self.rows += lines.height
            return real(lines, caps)

        monkeypatch.setattr(appfast, "rows", spy)


def _both(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    spy = _Spy(monkeypatch)
    fast = ingest(root).table
    monkeypatch.setattr(parsers, "APP_FAST", False)
    slow = ingest(root).table
    monkeypatch.setattr(parsers, "APP_FAST", True)
    return fast, slow, spy.rows


_ASC = "2026-11-29 22:00:{s:02d},{ms:03d} {lvl} "
#: An NCCL COLL line of the COLL fast path's shape (``parsers.coll``), opCount ``n``.
_COLL = (
    "node-a:11:11 [0] NCCL INFO AllReduce: opCount {n:x} sendbuff 0x7f3b52000000 recvbuff 0x7f3b52000000 "
    "count 1024 datatype 7 op 0 root 0 comm 0x5a1 [nranks=2] stream 0x5b2"
)


def _bars_and_warnings(root: Path) -> int:
    """The lines of the generated job's stderr logs that take the fast path, read off the files: the tqdm bars
    and warnings more than ``appfast.CONTEXT_LINES`` (2) lines above the first line that is neither (the
    watchdog error or the traceback at each file's end)."""
    n = 0
    for f in sorted(root.glob("attempt_0/*/stderr.log")):
        lines = f.read_text().splitlines()
        first = next(i for i, x in enumerate(lines) if not x.startswith(("Epoch ", "/opt/venv/")))
        assert all(not x.startswith(("Epoch ", "/opt/venv/")) for x in lines[first:])
        n += first - 2
    return n


def _asc(i: int, msg: str, lvl: str = "INFO") -> str:
    return _ASC.format(s=i % 60, ms=(i * 37) % 1000, lvl=lvl) + msg


def _mixed(root: Path) -> None:
    """Files of asctime lines, each with one thing that keeps it (and only it) generic, and clean ones."""
    d = root / "mixed"
    d.mkdir(parents=True)
    clean = [_asc(i, f"[trainer] rank=5 step={i} loss=1.5 world_size=8") for i in range(6)]
    odd = {
        "clean.log": [],
        "clean_err.log": [_asc(7, "[x] rank 5 failed on rank 5", "ERROR")],
        "traceback.log": [
            "Traceback (most recent call last):",
            '  File "t.py", line 3, in f',
            "ValueError: x",
        ],
        "indented.log": [_asc(7, "header"), "    continued"],
        # a traceback logged line by line, cut before its exception line: one record on the generic path
        "tbprod.log": [
            _asc(7, "Traceback (most recent call last):", "ERROR"),
            _asc(7, '  File "x.py", line 1, in f', "ERROR"),
            _asc(7, "    loss.backward()", "ERROR"),
        ],
        "tee.log": ["[default0]:" + _asc(7, "step=3")],
        "glued.log": [_asc(7, "progress x[default0]:hello")],
        "lead.log": [_asc(7, "bar 10%|# [rank0]:[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:2901] boom")],
        "bar.log": [_asc(7, "Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s]")],
        "exc.log": [_asc(7, "RuntimeError: CUDA error: an illegal memory access was encountered")],
        "spawn.log": [_asc(7, "-- Process 1 terminated with the following error:"), "Traceback (most recent"],
        "plain.log": ["a line that does not start like a log line"],
        "raypid.log": [_asc(7, "(RayTrainWorker pid=77) hello")],
        "nccl.log": ["node-a:1:1 [0] NCCL INFO cudaDriverVersion 12020"],
        # another application prefix: its captures (usts, logger) are null in every other file
        "hf.log": ["11/29/2026 22:00:07 - INFO - __main__ - step 7 done"],
    }
    for name, extra in odd.items():
        (d / name).write_text("\n".join([*clean, *extra, *clean]) + "\n")


def test_fast_path_equals_generic_on_generated_app_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    generate_app(tmp_path / "job", ranks=2, lines=3000, seed=5)
    _mixed(tmp_path / "job")
    fast, slow, n_fast = _both(tmp_path / "job", monkeypatch)
    assert_frame_equal(fast, slow)
    stdout = fast.filter(pl.col("path").str.ends_with("stdout.log"))
    # Both ranks' stdout files and the two clean files and hf.log took the fast path whole. Of the other mixed files
    # (6 asctime lines, the odd lines, 6 asctime lines), those that may be split gave the asctime lines more
    # than two lines from every odd line: 4 + 4 each, and indented.log (its header is an asctime line) 5 + 4.
    # raypid (a Ray worker tag behind the prefix) stays whole; so does plain: its line after one as long as the
    # file's longest lines, all of one length, may be a hard wrap (and is one). tee.log's tee'd line is no wrap,
    # but stays generic: glued.log holds a tee prefix inside a line, so no tee'd line takes the fast path.
    split = {"traceback", "tbprod", "bar", "exc", "spawn", "nccl", "glued", "lead", "tee"}
    # Rank 0's stderr (bars and warnings, a watchdog error at its end) and rank 1's (the same, a traceback at its
    # end): the lines more than two lines above the first that is neither. Rank 1's warnings, one text, are its
    # longest lines: no terminal width, each a row of its own (the generic path took the bar after each for a
    # hard wrap's tail, and kept the file whole).
    err0 = fast.filter(pl.col("path") == "attempt_0/0/stderr.log")
    assert err0["kind"][-1] == "watchdog_timeout" and err0["line_count"].sum() == err0.height
    warns = slow.filter((pl.col("path") == "attempt_0/1/stderr.log") & pl.col("raw").str.starts_with("/opt"))
    assert warns.height > 100 and warns["line_count"].max() == 1
    assert n_fast == stdout.height + 24 + 1 + 13 + 8 * len(split) + 9 + _bars_and_warnings(tmp_path / "job")
    assert stdout.height > 0.6 * fast.filter(pl.col("path").str.starts_with("attempt_")).height
    clean = fast.filter(pl.col("path") == "mixed/clean_err.log")
    assert clean["kind"].to_list()[:2] == ["step_progress"] * 2
    assert clean["step"].to_list()[:3] == [0, 1, 2]
    assert clean["world_size"].to_list()[:2] == [8, 8]
    assert clean["severity"].to_list()[5:8] == ["info", "error", "info"]
    assert clean["message"][6] == "[x] rank 5 failed on rank 5"


@pytest.mark.parametrize("fmt", ["hf", "deepspeed", "hydra"])
def test_fast_path_equals_generic_on_other_logging_formats(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated job with its Python lines in the HF example scripts', DeepSpeed's or Hydra's format: every
    stdout line takes the fast path, and the stderr lines as in the asctime job (the same bars and warnings)."""
    generate_app(tmp_path / "job", ranks=2, lines=3000, seed=5, fmt=fmt)
    fast, slow, n_fast = _both(tmp_path / "job", monkeypatch)
    assert_frame_equal(fast, slow)
    stdout = fast.filter(pl.col("path").str.ends_with("stdout.log"))
    assert n_fast == stdout.height + _bars_and_warnings(tmp_path / "job")
    # HF Trainer's metrics dicts (1 of each 10 lines of the hf job) have no prefix: no layer, no stamp
    dicts = 2 * 300 if fmt == "hf" else 0
    assert stdout["layer"].value_counts().sort("layer").rows() == [
        (x, n) for x, n in (("app", stdout.height - dicts), ("unknown", dicts)) if n
    ]
    assert stdout["ts"].null_count() == 0
    # of each 10 lines, 4 trainer lines and 1 eval line name a step: 3000 lines a rank, 2 ranks
    assert stdout.filter(pl.col("kind") == "step_progress").height == 2 * 1500


@pytest.mark.parametrize(
    ("layout", "stated", "column"),
    [
        ("tee", r"^\[default(\d)\]:", "local_rank"),
        ("srun", r"^(\d+): ", "rank"),
        ("srun,tee", r"^\d+: \[default(\d)\]:", "local_rank"),
    ],
)
def test_fast_path_equals_generic_on_a_combined_console(
    layout: str, stated: str, column: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen ranks' lines interleaved (``generate.py --shape app``, two nodes) as each node's console of
    ``torchrun --tee 3`` prints them (``--tee``: behind ``[default<N>]:``), as ``srun --label`` writes the job's
    output (``--srun``: behind ``R: ``), or both (``srun -l torchrun --tee 3``: each node's console behind its
    label), with the culprit's error and the others' watchdog lines: the same rows, each with the (local) rank
    its prefix states, and the prefixed application lines took the fast path, but for those near the error
    lines."""
    generate_app(tmp_path / "job", ranks=16, lines=400, seed=3, **dict.fromkeys(layout.split(","), True))
    fast, slow, n_fast = _both(tmp_path / "job", monkeypatch)
    assert_frame_equal(fast, slow)
    assert fast.select((pl.col(column) == pl.col("raw").str.extract(stated, 1).cast(pl.Int32)).all()).item()
    assert n_fast > 0.9 * fast.height


def test_a_teed_console_with_torn_bars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight ranks' tee'd console where one of each ten progress bars of a rank was printed without its newline
    (``generate.py --torn 10``: the console's next line is glued to it): the generic path splits each glued line
    into one row per tee'd line, and the tee'd lines away from those take the fast path, with the same rows."""
    info = generate_app(tmp_path / "job", ranks=8, lines=600, seed=3, tee=True, torn=10)
    fast, slow, n_fast = _both(tmp_path / "job", monkeypatch)
    assert_frame_equal(fast, slow)
    text = (tmp_path / "job" / "node-0" / "console.log").read_text().splitlines()
    glued = [x for x in text if "it/s][default" in x]
    # Each glued line is split where a tee prefix follows a bar: one row more per glued prefix, but where the
    # text glued starts with a space (a traceback's frame line: it joins the record of its stream).
    new = sum(len(re.findall(r"it/s\]\[default\d\]:(?!\s)", x)) for x in glued)
    assert glued and fast.filter(pl.col("line_count") == 0).height == new > len(glued)
    assert fast["line_count"].sum() == len(text) == info["lines"]
    assert 0.5 * fast.height < n_fast < fast.height - len(glued)


def test_fast_path_in_parts_equals_generic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many lines: the split and the rows of the fast path run in parts on threads (the split in parts of whole
    files: here a rank's two files, the other rank's, the mixed files), and give the rows of one part."""
    generate_app(tmp_path / "job", ranks=2, lines=3000, seed=7)
    _mixed(tmp_path / "job")
    whole, _, n_whole = _both(tmp_path / "job", monkeypatch)
    calls: list[int] = []
    real = appfast.split

    def spy(lines: pl.DataFrame, glued: bool | None = None, workers: int = 1) -> object:
        calls.append(lines.height)
        return real(lines, glued, workers)

    monkeypatch.setattr(appfast, "split", spy)
    monkeypatch.setattr(parsers, "APP_PART_ROWS", 1500)
    monkeypatch.setattr(parsers, "parallelism", lambda tasks: max(1, min(4, tasks)))
    parts, slow, n_parts = _both(tmp_path / "job", monkeypatch)
    assert sorted(c for c in calls if c > 100) == [
        200,
        3002,
        3005,
    ]  # threads, any order (the probe aside)
    assert_frame_equal(parts, slow)
    assert_frame_equal(parts, whole)
    assert n_parts == n_whole


@pytest.mark.parametrize("layout", ["tee", "srun"])
def test_one_file_classified_in_parts_of_rows(
    layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One file (a node's tee'd console, or the job's ``srun --label`` output) holding all the lines: its lines
    are classified in parts of rows on threads (``appfast._classify``), and give the rows of one part, which
    equal the generic path's."""
    generate_app(tmp_path / "job", ranks=8, lines=500, seed=11, **{layout: True})
    assert len([p for p in (tmp_path / "job").rglob("*") if p.is_file()]) == 1
    whole, slow, n_whole = _both(tmp_path / "job", monkeypatch)
    parts: list[int] = []
    real = appfast._classify

    def spy(body: pl.Series, one: pl.Series, workers: int) -> object:
        if workers == 1:
            parts.append(body.len())
        return real(body, one, workers)

    monkeypatch.setattr(appfast, "_classify", spy)
    monkeypatch.setattr(appfast, "_CLASSIFY_MIN_ROWS", 100)
    monkeypatch.setattr(parsers, "APP_PART_ROWS", 100)
    monkeypatch.setattr(parsers, "parallelism", lambda tasks: max(1, min(3, tasks)))
    got, _, n_parts = _both(tmp_path / "job", monkeypatch)
    lines = sum(1 for _ in next(p for p in (tmp_path / "job").rglob("*") if p.is_file()).open())
    # three parts of one third of the lines each (the last less), and the probe's one line in one part
    assert sorted(parts, reverse=True)[:3] == [-(-lines // 3)] * 2 + [lines - 2 * -(-lines // 3)]
    assert_frame_equal(got, whole)
    assert_frame_equal(got, slow)
    assert n_parts == n_whole > 0.9 * whole.height


def test_fast_path_rows_merged_by_a_sort_equal_generic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the fast-path rows come in more runs between generic rows than ``parsers._INTERLEAVE_MAX_RUNS``,
    the two parts are merged by one sort: the same rows."""
    generate_app(tmp_path / "job", ranks=2, lines=3000, seed=5)
    _mixed(tmp_path / "job")
    monkeypatch.setattr(parsers, "_INTERLEAVE_MAX_RUNS", 1)
    fast, slow, n_fast = _both(tmp_path / "job", monkeypatch)
    assert_frame_equal(fast, slow)
    assert n_fast > 0


def test_fast_path_equals_generic_on_asctime_only_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job of asctime files only: every slice is fast-path rows, none generic."""
    d = tmp_path / "job"
    d.mkdir()
    for r in range(3):
        (d / f"rank{r}.log").write_text(
            "\n".join(
                _asc(i, f"[trainer] rank={r} step={i} loss=0.1", "WARNING" if i % 3 else "INFO")
                for i in range(40)
            )
            + "\n"
        )
    fast, slow, n_fast = _both(d, monkeypatch)
    assert_frame_equal(fast, slow)
    assert n_fast == 120
    assert fast["rank"].unique().sort().to_list() == [0, 1, 2]
    assert fast["severity"].value_counts().sort("severity")["count"].to_list() == [
        3 * 14,
        3 * 26,
    ]  # i % 3 == 0: 14 of 40


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "logs").is_dir()))
def test_fast_path_equals_generic_on_corpus(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow, _ = _both(CASES / case / "logs", monkeypatch)
    assert_frame_equal(fast, slow)


_RULES = list(defined()[0])
#: What drawn messages are made of: plain text the fast path takes, and everything that must keep a file generic.
_PLAIN = [
    "[trainer] rank=3 step=1835 loss=2.0959 lr=3.0e-04",
    "[eval] step=0 val_loss=2.7558 accuracy=0.618",
    "[data] worker 2 prefetched shard 2308 (1024 samples)",
    "world_size=16 ",
    "global_step: 12 ",
    "iteration 7/100 ",
    "[RANK 4] ",
    "{'loss': 2.3456, 'grad_norm': 1.25, 'learning_rate': 4.9e-05, 'epoch': 0.01}",
    "",
    " ",
]
_SPECIAL = [
    *sorted({r.literal for r in _RULES if r.literal}),
    *sorted({r.example for r in _RULES if r.example}),
    "Traceback (most recent call last):",
    '  File "t.py", line 3, in f',
    "    indented",
    "ValueError: bad value",
    "Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s]",
    "[rank3]:",
    "[default1]:",
    "x[default0]:y",
    "[Rank 0,2 Error Snippet]:",
    "A worker health check failed.",
    "----------------------------------------------",
    "Missing ranks:",
    "0: [allreduce.weight]",
    "-- Process 1 terminated with the following error:",
    "=== Rank 2: 10.0.0.1:5000 ===",
    "Root Cause (first observed failure):",
    '{"communicators": []}',
    "(RayTrainWorker pid=77) ",
]
_PREFIXES = [
    "2026-11-29 22:00:01,234 INFO ",
    "2026-11-29 22:00:01,234 WARNING ",
    "2026-11-29 22:00:01,234 ERROR ",
    "2026-11-29 22:00:01,234 CRITICAL ",
    "2026-11-29 22:00:01.234 - DEBUG - ",
    "2026-11-29T22:00:01 [WARN] ",
    "2026-11-29 22:00:01 ",
    "[2026-11-29 22:00:01,234][trainer][INFO] - ",
    "[2026-11-29 22:00:01,234] [ERROR] [engine.py:12:step] ",
    "11/29/2026 22:00:01 - WARNING - __main__ - ",
    "[2026-11-29 22:00:01,234] INFO ",
    "[2026-11-29 22:00:01] ",
    # behind torchrun's tee
    "[default0]:2026-11-29 22:00:01,234 INFO ",
    "[worker12]:[2026-11-29 22:00:01,234][trainer][INFO] - ",
    "[default1]:",
    # prefixes the fast path does not take
    "2024-11-29T22:58:55.104211337Z ",
    "[rank3]:2026-11-29 22:00:01,234 INFO ",
    "[rank: 1] ",
    "",
]
#: The application logging prefixes of ``_PREFIXES`` (asctime, Hydra, DeepSpeed, HF, bracketed asctime).
_APP = _PREFIXES[:12]

_line = st.tuples(
    st.sampled_from(_APP) | st.sampled_from(_PREFIXES),
    st.lists(st.sampled_from(_PLAIN), min_size=0, max_size=3),
    st.lists(st.sampled_from(_SPECIAL), max_size=1) | st.just([]),
).map(lambda t: t[0] + "".join(t[1]) + "".join(t[2]))
_file = st.lists(_line, min_size=1, max_size=6) | st.lists(
    st.tuples(st.sampled_from(_APP), st.sampled_from(_PLAIN)).map("".join), min_size=1, max_size=6
)


def _frame(files: list[list[str]]) -> pl.DataFrame:
    rows = [(f"f{k}.log", i + 1, text) for k, lines in enumerate(files) for i, text in enumerate(lines)]
    return pl.DataFrame(
        {
            "raw": [r[2] for r in rows],
            "path": [r[0] for r in rows],
            "line": [r[1] for r in rows],
            "line_count": [1] * len(rows),
            "body": [r[2] for r in rows],
            "pid": [None] * len(rows),
            "layer": [None] * len(rows),
        },
        schema_overrides={"line_count": pl.Int32, "pid": pl.Int64, "layer": pl.String},
    )


def _compare(frame: pl.DataFrame) -> tuple[pl.Series, pl.DataFrame] | None:
    """Asserts that ``frame`` parses to the same rows with the fast path on and off; gives its split."""
    keep = list(PARSE_KEEP)
    parsers.APP_FAST = True
    try:
        got = appfast.split(frame)
        fast = parsers.parse_lines(frame, keep=keep)
        parsers.APP_FAST = False
        slow = parsers.parse_lines(frame, keep=keep)
    finally:
        parsers.APP_FAST = True
    assert_frame_equal(fast, slow)
    return got


_TAKEN = {
    "files": 0,
    "examples": 0,
    "mixed_files": 0,
    "mixed_examples": 0,
    "srun_examples": 0,
    "srun_lines": 0,
}


@DRAWN
@given(st.lists(_file, min_size=1, max_size=4))
def test_drawn_asctime_files_parse_as_on_the_generic_path(files: list[list[str]]) -> None:
    frame = _frame(files)
    got = _compare(frame)
    _TAKEN["examples"] += 1
    if got is not None:
        _TAKEN["files"] += frame.filter(got[0])["path"].n_unique()


def test_drawn_files_took_the_fast_path() -> None:
    """The drawn files above did reach the fast path (so their comparison tested it)."""
    if _TAKEN["examples"] == 0:
        pytest.skip("run with the drawn-files test")
    assert _TAKEN["files"] >= _TAKEN["examples"] // 2


#: torchrun's tee prefixes of a few local ranks (and none), before a drawn line of a mixed file
_TEES = ["", "", "", "[default0]:", "[default1]:", "[default2]:", "[trainer1]:"]
_asc_line = st.tuples(st.sampled_from(_TEES), st.sampled_from(_APP), st.sampled_from(_PLAIN)).map("".join)
#: Files of srun-labelled lines (the label stripped where half of a file's lines or more have one), with
#: blocks of one task that do not qualify
_SRUN_BLOCKS = [
    ["1: Traceback (most recent call last):", '1:   File "t.py", line 3, in f', "1: ValueError: x"],
    ["0: [default1]:Traceback (most recent call last):", "0: [default1]:ValueError: x"],
    ["3: Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s]"],
    ["2: [rank2]:[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:2901] [PG 0 Rank 2] Timeout"],
]
_srun_line = st.tuples(
    st.sampled_from(["0: ", " 1: ", "12: ", "1: [default0]:", ""]),
    st.sampled_from(_APP),
    st.sampled_from(_PLAIN),
).map("".join)
_srun_file = st.lists(
    st.lists(_srun_line, min_size=1, max_size=12) | st.sampled_from(_SRUN_BLOCKS), min_size=1, max_size=4
).map(lambda segs: [x for seg in segs for x in seg])
#: Whole lines and blocks that do not qualify, as they come in logs, besides the drawn special lines above:
#: lines of other producers and blocks that start like log lines (a file holding them may be split) ...
_BLOCKS = [
    [
        "Traceback (most recent call last):",
        '  File "t.py", line 3, in f',
        "    loss.backward()",
        "ValueError: x",
    ],
    ["[Rank 0,2 Error Snippet]:", "RuntimeError: boom"],
    ["{'loss': 2.3456, 'epoch': 0.01}", "{", "  'a': 1", "}", "{ "],
    ["", ""],
    ["node-a:11:11 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"],
    # NCCL COLL lines (their own fast path, in a file all of whose lines start like log lines)
    [_COLL.format(n=1)],
    [_COLL.format(n=2), _COLL.format(n=3)],
    ["RuntimeError: boom", _COLL.format(n=4)],
    [
        "E1129 23:08:36.778382 77 ProcessGroupNCCL.cpp:2901] [PG 0 Rank 1] Watchdog caught collective operation timeout"
    ],
    ["[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:2901] [PG 0 Rank 1] Timeout"],
    # lines as long as a file's long lines, all of one length, then lines that may be hard wraps
    [_asc(1, "a" * 60), _asc(2, "b" * 60), _asc(3, "c" * 60), "the wrapped tail of the line above"],
    ["w" * 90, "v" * 90, "u" * 90, "continued", "Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s]"],
    ["[default0]:" + "t" * 80, "[default1]:" + "t" * 80, "[default0]:" + "t" * 80, "tail "],
    # tee'd blocks of one local rank, c10d's excepthook, a tee'd line glued to another
    [
        "[default1]:Traceback (most recent call last):",
        '[default1]:  File "t.py", line 3, in f',
        "[default1]:ValueError: x",
    ],
    [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "t.py", line 3, in f',
        "[rank1]: ValueError: x",
    ],
    [
        "[default0]:Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s][default1]:[E1129 23:08:36.778382438 x.cpp:1] y"
    ],
    # ... and glued to a line without prefix, its role (trainer) at a line start in the drawn lines only
    ["Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s][trainer1]:" + _asc(5, "[trainer] step=5")],
    ["[default2]:"],
    # c10d lines behind their rank prefix, the file's longest, all of one length (no wrap follows them)
    [
        f"[rank{r}]:[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:2901] [PG 0 Rank {r}] Watchdog timeout"
        for r in range(3)
    ],
    # transport prefixes stripped by their share of a file's lines (which keep their file whole)
    ["0: hello world", "1: srun task says hi"],
    ["node-a7: hello"],
    ["[13]: x", "[14]: y"],
]
#: ... and those that keep their file whole (lines that do not start like a log line, a transport prefix).
_WHOLE = [
    [
        "-- Process 1 terminated with the following error:",
        "Traceback (most recent call last):",
        "  x",
        "E: y",
    ],
    ["Missing ranks:", "0: [allreduce.weight]", "1: [allreduce.bias]"],
    ["{", '  "communicators": []', "}"],
    [
        "Process 77: python train.py",
        "Python v3.11.4 (/usr/bin/python3)",
        "",
        'Thread 77 (idle): "MainThread"',
    ],
    ["a line that does not start like a log line"],
    ["[rank1]:[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:2901] [PG 0 Rank 1] Timeout"],
    ["Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s]"],
    ["/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:560: UserWarning: slow"],
]
_run = st.lists(_asc_line, min_size=1, max_size=12)
_segment = _run | _run | st.sampled_from(_BLOCKS) | _line.map(lambda x: [x])
_segments = st.lists(_segment, min_size=2, max_size=8) | st.tuples(
    st.lists(_segment, min_size=1, max_size=4), st.sampled_from(_WHOLE), st.lists(_segment, max_size=4)
).map(lambda t: [*t[0], t[1], *t[2]])
_mixed_file = _segments.map(lambda segs: [x for seg in segs for x in seg])


@DRAWN
@given(st.lists(_mixed_file, min_size=1, max_size=3))
def test_drawn_mixed_files_parse_as_on_the_generic_path(files: list[list[str]]) -> None:
    """Files of runs of asctime lines between lines and blocks that do not qualify: the lines a split file
    gives the fast path change no row."""
    frame = _frame(files)
    got = _compare(frame)
    _TAKEN["mixed_examples"] += 1
    if got is not None:
        taken = frame.filter(got[0])["path"].unique()
        left = frame.filter(~got[0])["path"].unique()
        _TAKEN["mixed_files"] += taken.filter(taken.is_in(left.implode())).len()


@DRAWN
@given(st.lists(_srun_file | _mixed_file, min_size=1, max_size=3))
def test_drawn_srun_files_parse_as_on_the_generic_path(files: list[list[str]]) -> None:
    """Files of srun-labelled lines (with and without a tee prefix behind the label, some unlabelled) beside
    mixed files: the same rows."""
    frame = _frame(files)
    got = _compare(frame)
    _TAKEN["srun_examples"] += 1
    if got is not None:
        _TAKEN["srun_lines"] += int(frame.filter(got[0])["raw"].str.contains(r"^ *\d+: ").sum())


def test_drawn_srun_files_took_the_fast_path() -> None:
    """Labelled lines of the drawn files above did take the fast path."""
    if _TAKEN["srun_examples"] == 0:
        pytest.skip("run with the drawn srun-files test")
    assert _TAKEN["srun_lines"] >= _TAKEN["srun_examples"] // 4


def test_drawn_mixed_files_were_split() -> None:
    """Some drawn mixed files above were split (so their comparison tested the split)."""
    if _TAKEN["mixed_examples"] == 0:
        pytest.skip("run with the drawn mixed-files test")
    assert _TAKEN["mixed_files"] >= _TAKEN["mixed_examples"] // 4


def test_a_mixed_file_keeps_two_lines_around_what_does_not_qualify() -> None:
    """In a stdout log of asctime lines with a traceback, the asctime lines more than two lines away from the
    traceback take the fast path; so does a line without a prefix, unless the generic path takes it for a hard
    wrap (after a line as long as the file's long lines, all of one length): then its file takes none."""
    asc = [_asc(i, f"[trainer] rank=1 step={i} loss=0.5") for i in range(12)]
    wide = [_asc(i, f"[trainer] rank=1 step={i % 10} loss=0.5 lr=3.0e-04 grad_norm=1.25") for i in range(12)]
    assert {len(x) for x in wide} == {87}
    tb = ["Traceback (most recent call last):", '  File "t.py", line 3, in f', "ValueError: x"]
    frame = _frame([[*asc[:6], *tb, *asc[6:]], [*asc, "plain text line"], asc, [*wide, "plain text line"]])
    got = appfast.split(frame)
    assert got is not None
    mask, caps = got
    taken = (
        frame.with_columns(mask.alias("m")).group_by("path").agg(pl.col("line").filter(pl.col("m")).sort())
    )
    assert dict(taken.rows()) == {
        "f0.log": [1, 2, 3, 4, 12, 13, 14, 15],
        "f1.log": list(range(1, 14)),
        "f2.log": list(range(1, 13)),
        "f3.log": [],
    }
    assert caps.height == 33
    assert caps["rest"][4] == "[trainer] rank=1 step=8 loss=0.5"
    assert caps.filter(pl.col("bare"))["rest"].to_list() == ["plain text line"]
    rows = parsers.parse_lines(frame, keep=list(PARSE_KEEP))
    assert rows.filter(pl.col("path") == "f3.log")["line_count"].to_list()[-2:] == [1, 2]  # the wrap


def test_files_with_coll_lines_are_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank's stdout whose asctime lines come between NCCL COLL lines is split as any mixed file, its
    distances counted without the COLL lines (which take their own fast path), also where the generic path
    takes the COLL lines back into its lines (a record candidate in the file: an exception line, a traceback
    logged through ``logging``)."""
    init = ["node-a:11:11 [0] NCCL INFO comm 0x5a1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"]
    body = [x for i in range(10) for x in (_asc(i, f"[trainer] rank=0 step={i} loss=1.5"), _COLL.format(n=i))]
    odd = {
        "exc": "RuntimeError: boom",
        "tbasc": _asc(7, "Traceback (most recent call last):", "ERROR"),
        "excasc": _asc(7, "RuntimeError: CUDA error: an illegal memory access was encountered", "ERROR"),
    }
    (tmp_path / "plain.log").write_text("\n".join(init + body) + "\n")
    for name, line in odd.items():
        (tmp_path / f"{name}.log").write_text("\n".join([*init, *body[:10], line, *body[10:]]) + "\n")
    fast, slow, n_fast = _both(tmp_path, monkeypatch)
    assert_frame_equal(fast, slow)
    assert fast.filter(pl.col("kind") == "nccl_coll").height == 40
    # Without the COLL lines, plain.log is the Init line then 10 asctime lines: those 3 or more lines past it,
    # 8. Each other file: the Init line, 5 asctime lines, the odd line, 5 asctime lines: the 3rd asctime line
    # (3 lines from both) and the last three, 4.
    assert n_fast == 8 + 3 * 4


def test_teed_lines_take_the_fast_path_counted_per_stream() -> None:
    """Lines behind torchrun's tee prefix take the fast path as the text behind it would, with the tee's local
    rank. In a console of four local ranks' lines with a traceback of local rank 1 at lines 11-13 (tee'd lines:
    their rows are local rank 1's, and its first line's may be one without a tee rank, none here), a line is
    kept generic within two lines of it in the file (9, 10, 14, 15), or in local rank 1's stream: its last two
    lines before the traceback and first two after it (6, 10, 17, 21). Of two files holding a bar then a line
    without prefix, where half of the lines are tee'd, the one whose bar ends in a space stays whole (the plain
    line may be a hard wrap); the other's lines all take the fast path."""
    asc = [f"[default{i % 4}]:" + _asc(i, f"[trainer] step={i}") for i in range(20)]
    tb = [
        "[default1]:Traceback (most recent call last):",
        '[default1]:  File "t.py", line 3, in f',
        "[default1]:ValueError: x",
    ]
    bar = "[default1]:Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s]"
    wraps = [*asc[:10], bar + " ", "plain", *asc[10:]]
    frame = _frame([asc, [*asc[:10], *tb, *asc[10:]], [*asc[:10], bar, "plain", *asc[10:]], wraps])
    got = _compare(frame)
    assert got is not None
    taken = (
        frame.with_columns(got[0].alias("m")).group_by("path").agg(pl.col("line").filter(pl.col("m")).sort())
    )
    assert dict(taken.rows()) == {
        "f0.log": list(range(1, 21)),
        "f1.log": [1, 2, 3, 4, 5, 7, 8, 16, 18, 19, 20, 22, 23],
        "f2.log": list(range(1, 23)),
        "f3.log": [],
    }
    stated = [i % 4 for i in range(20)]
    # f1's lines 1-5, 7, 8, 16, 18-20, 22, 23
    f1 = [stated[i] for i in (0, 1, 2, 3, 4, 6, 7, 12, 14, 15, 16, 18, 19)]
    assert got[1]["tee_local_rank"].to_list() == [*stated, *f1, *stated[:10], 1, None, *stated[10:]]
    assert got[1]["rest"][1] == "[trainer] step=1"


def test_a_glued_tee_prefix_keeps_a_witness_of_each_role() -> None:
    """A tee prefix glued inside a line (the generic path splits the line there, at a role seen at a line start
    in its slice of files, here only in another file): that line stays generic, and so does, in each file, the
    first tee'd line of each role that qualifies, so the lines left see the same roles. A witness is a tee'd
    line: with it, two lines on either side stay generic in the file and in its local rank's stream (in f0,
    lines 1-3 and local rank 0's lines 5 and 9). Without the glued line, every line qualifies."""
    asc = [f"[default{i % 4}]:" + _asc(i, f"[trainer] step={i}") for i in range(20)]
    other = [f"[worker{i % 2}]:" + _asc(i, f"[trainer] step={i}") for i in range(12)]
    glued = _asc(1, "x[worker1]:y")  # the role only f2 holds at a line start
    frame = _frame([asc, [glued], [*other, *asc[:4]]])
    got = _compare(frame)
    assert got is not None
    taken = (
        frame.with_columns(got[0].alias("m")).group_by("path").agg(pl.col("line").filter(pl.col("m")).sort())
    )
    # f2: worker's first line (1) and default's (13) kept, both of local rank 0 (a stream is a local rank,
    # whatever the role), with two lines on either side in the file (2, 3; 11, 12, 14, 15) and in that stream
    # (3, 5 after line 1; 9, 11 before line 13).
    assert dict(taken.rows()) == {
        "f0.log": [4, 6, 7, 8, *range(10, 21)],
        "f1.log": [],
        "f2.log": [4, 6, 7, 8, 10, 16],
    }
    got = _compare(_frame([asc, [*other, *asc[:4]]]))
    assert got is not None and got[0].all()


def test_the_streams_of_a_line_that_does_not_qualify() -> None:
    """``appfast._touched`` names every stream (srun label / tee local rank) of the rows the generic path makes of
    a tee'd line that does not qualify, or none (null: every stream) where it cannot: each line below, parsed on
    the generic path alone, gives rows whose streams are among those it names. A bar chain glued to other ranks'
    lines (``…it/s][default0]:``), records starting inside a line, a role other than ``default`` (a record after
    it is cut off at once), an srun label, c10d's excepthook inside the tee; a line without a tee prefix is not
    known."""
    bar = "Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s]"
    watchdog = "[rank1]:[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:2901] [PG 0 Rank 1] Watchdog timeout"
    lines = [
        f"[default6]:{bar}[default0]:{bar}[default1]:" + _asc(3, "step=3"),
        "[default1]:Traceback (most recent call last):",
        f"[default2]:{bar} {watchdog}",
        "[trainer3]:Traceback (most recent call last):",
        f'[trainer3]:{bar}[trainer1]:  File "t.py", line 3, in f',
        "[default0]:[rank0]: Traceback (most recent call last):",
        "[trainer3]:foo [default0]:bar",
        f"[default2]:{bar}x[rank2]:[E1129 23:08:36.778382438 x.cpp:1] y",
        "RuntimeError: boom",
    ]
    srun = [f"{j % 2}: {x}" for j, x in enumerate(lines[:8])]  # every line labelled: the labels are stripped
    stated = {  # null: not known
        "a.log": [
            ["/6", "/0", "/1", None],
            ["/1", None],
            ["/2", "/1", None],
            ["/3", None],
            ["/3", "/1", None],
            ["/0", None],
            ["/3", "/0", None],
            ["/2", None],
            None,
        ],
        "b.log": [
            ["0/6", "0/0", "0/1", "0/"],
            ["1/1", "1/"],
            ["0/2", "0/1", "0/"],
            ["1/3", "1/"],
            ["0/3", "0/1", "0/"],
            ["1/0", "1/"],
            ["0/3", "0/0", "0/"],
            ["1/2", "1/"],
        ],
    }
    frame = _frame([lines, srun]).with_columns(pl.col("path").replace({"f0.log": "a.log", "f1.log": "b.log"}))
    rows = _generic_rows(frame)
    for name, want in stated.items():
        f = frame.filter(pl.col("path") == name)
        body = f["raw"].str.replace(r"^\d: ", "") if name == "b.log" else f["raw"]
        label = f["raw"].str.extract(r"^(\d): ", 1)
        lr = body.str.extract(r"^\[[a-z]+(\d+)\]:", 1).cast(pl.Int32)
        got = appfast._touched(pl.DataFrame({"body": body, "l": label, "t": lr})).to_list()
        assert [None if g is None else sorted(g, key=str) for g in got] == [
            None if w is None else sorted(w, key=str) for w in want
        ]
        # every row the generic path makes of a line is in a stream named for it
        made = rows.filter(pl.col("path") == name)
        assert made.height > f.height  # lines cut into rows of several streams
        _assert_rows_in_streams(made, got)


def _generic_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows the generic path alone makes of ``frame``."""
    parsers.APP_FAST = False
    try:
        return parsers.parse_lines(frame, keep=list(PARSE_KEEP))
    finally:
        parsers.APP_FAST = True


def _assert_rows_in_streams(rows: pl.DataFrame, named: list[list[str | None] | None]) -> None:
    """Each of ``rows`` (of one file) is in one of the streams ``named`` for its line (``<srun label>/<tee local
    rank>``, null for neither), or none is named (every stream)."""
    for line, lab, t in rows.select("line", "srun_label", "tee_local_rank").rows():
        s = None if lab is None and t is None else f"{lab or ''}/{'' if t is None else t}"
        assert named[line - 1] is None or s in named[line - 1], (line, s, named[line - 1])


#: Pieces of drawn tee'd lines: text, bars, tee-like prefixes of several roles (glued or after a space),
#: record starts of other producers
_PIECES = [
    "x",
    " ",
    "Epoch 0:  10%|#     | 1/10 [00:01<00:10, 1.0it/s]",
    "[default0]:",
    "[default3]:",
    "[rank1]:",
    "[trainer2]:",
    "[rankx4]:",
    "Traceback (most recent call last):",
    "[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:2901] ",
    "node-a:1:1 [0] NCCL INFO x",
    _asc(2, "step=2"),
]
_teed_line = st.tuples(
    st.sampled_from(["[default1]:", "[default2]:", "[trainer3]:", "[worker0]:"]),
    st.lists(st.sampled_from(_PIECES), max_size=5).map("".join),
).map("".join)


@DRAWN
@given(st.lists(_teed_line, min_size=1, max_size=6), st.booleans())
def test_drawn_lines_make_rows_in_the_streams_named(lines: list[str], labelled: bool) -> None:
    """Every row the generic path makes of a drawn tee'd line (behind an srun label or not) is in one of the
    streams ``appfast._touched`` names for it (or it names none)."""
    raw = [f"{j % 3}: {x}" for j, x in enumerate(lines)] if labelled else lines
    rows = _generic_rows(_frame([raw]))
    label = pl.Series(
        [str(j % 3) for j in range(len(lines))] if labelled else [None] * len(lines), dtype=pl.String
    )
    lr = pl.Series(lines).str.extract(r"^\[[a-z]+(\d+)\]:", 1).cast(pl.Int32)
    _assert_rows_in_streams(
        rows, appfast._touched(pl.DataFrame({"body": lines, "l": label, "t": lr})).to_list()
    )


def test_srun_labelled_lines_take_the_fast_path_where_the_label_is_stripped() -> None:
    """Lines behind Slurm's ``srun --label`` take the fast path, their rows with the label, in a file where the
    generic path strips the labels (half of its non-blank lines hold one) and still would without the lines that
    leave; distances are counted per task (and tee'd local rank behind the label). Four tasks' lines with a
    traceback of task 2 at lines 11-13 keep each task's last two lines before it and first two after it (lines
    3-10 and 14-21); a file of sbatch's unlabelled lines around labelled ones takes them all; a file of 3
    labelled and 4 unlabelled lines, where the labels are not stripped, takes none."""
    asc = [f"{i % 4}: " + _asc(i, f"[trainer] step={i}") for i in range(20)]
    tb = ["2: Traceback (most recent call last):", '2:   File "t.py", line 3, in f', "2: ValueError: x"]
    frame = _frame(
        [
            asc,
            [*asc[:10], *tb, *asc[10:]],
            ["sbatch: starting", *asc, "sbatch: done", "x", "y"],
            [*asc[:3], "plain", "more plain", "a", "b"],
        ]
    )
    got = _compare(frame)
    assert got is not None
    taken = (
        frame.with_columns(got[0].alias("m")).group_by("path").agg(pl.col("line").filter(pl.col("m")).sort())
    )
    assert dict(taken.rows()) == {
        "f0.log": list(range(1, 21)),
        "f1.log": [1, 2, 22, 23],
        "f2.log": list(range(1, 25)),
        "f3.log": [],
    }
    assert got[1]["srun_label"].to_list()[:4] == ["0", "1", "2", "3"]
    assert got[1]["rest"][0] == "[trainer] step=0"
    # the lines that leave would leave the labels under half of the lines left: the file stays whole
    assert _compare(_frame([[*asc[:8], "a", "b", "c", "d", "e", "f", "g", "h", "i"]])) is None


def test_lines_of_transport_prefixes_kept_by_share_keep_their_file_whole() -> None:
    """Slurm's ``srun --label``, pdsh's host and the tee's ``[<rank>]:`` are stripped only in a file where enough
    of the generic path's lines hold one (half of them; 30% for ``[<rank>]:``). Two such lines after ten asctime
    lines are 2 of 12 there: taking the asctime lines away from them (all but the last two) would make them 2 of
    4, and they would lose their text to a label. Such a file stays whole, also behind kubectl's stamp."""
    asc = [_asc(i, f"[trainer] rank=0 step={i}") for i in range(10)]
    tails = (
        ["0: hello world", "1: srun task says hi"],
        ["node-a7: hello", "node-b7: hi"],
        ["[13]: x", "[14]: y"],
        ["2024-11-29T22:58:55.104211337Z 0: hello", "2024-11-29T22:58:55.104211337Z 1: hi"],
    )
    for tail in tails:
        got = _compare(_frame([[*asc, *tail], asc]))
        assert got is not None
        assert got[0].to_list() == [False] * 12 + [True] * 10
    # one such line keeps its file whole too
    assert _compare(_frame([[*asc, "RuntimeError: boom", "0: hello"]])) is None


def test_files_of_one_kind_of_line() -> None:
    """Jobs whose fast-path lines are all of one kind (no line with a level word, no stamp, no logger): the rows
    are the generic path's, and the fast path took every line."""
    bars = [f"Epoch 0:  {k}0%|#     | {k}/10 [00:0{k}<00:10, 1.0it/s]" for k in range(1, 6)]
    for files in (
        [bars, ["plain output of a print", "another"]],
        [[_asc(i, "step=1") for i in range(4)]],
        [["11/29/2026 22:00:01 - INFO - __main__ - step 7 done"] * 3],
    ):
        frame = _frame(files)
        got = _compare(frame)
        assert got is not None and got[0].all()


def test_qualifying_lines_and_files() -> None:
    """Which lines take the fast path: plain asctime lines and lines of the other application logging prefixes
    (Hydra, DeepSpeed, the HF example scripts, bracketed asctime), nothing a rule or helper reads."""
    ok = [_asc(1, "[trainer] rank=3 step=9 loss=1.0"), _asc(2, "", "DEBUG"), "2026-11-29 22:00:01 plain"]
    other = [
        "[2026-11-29 22:00:01,234][trainer][INFO] - rank: 2, epoch: 0/500, total step: 32",
        "[2026-11-29 22:00:01,234] [WARNING] [engine.py:256:step] rank=1 step=3 world_size=8",
        "11/29/2026 22:00:01 - INFO - __main__ - step 7 done",
        "[2026-11-29 22:00:01,234] INFO iteration 120 loss 2.31",
    ]
    frame = _frame(
        [
            ok,
            [*ok, "Traceback (most recent call last):"],
            [*ok, _asc(3, "Epoch 0:  10%|#  | 1/10 [00:01<00:10, 1.0it/s]")],
            # Hydra's prefix, then a message that ASCTIME (a later producer prefix) would strip again
            [*ok, "[2026-11-29 22:00:01,234][trainer][INFO] - 2026-11-29 22:00:01,234 INFO step 3"],
            [*ok, "2024-11-29T22:58:55.104211337Z " + ok[0]],  # kubectl's stamp, a transport prefix
            [*ok, _asc(4, "  indented message")],
            other,
        ]
    )
    got = appfast.split(frame)
    assert got is not None
    mask, caps = got
    # f0 and f6 whole; of the others, each with one line that does not qualify at its end, the first line (more
    # than two lines away from it).
    taken = frame.filter(mask).group_by("path", maintain_order=True).agg("line")
    assert taken.rows() == [
        ("f0.log", [1, 2, 3]),
        *[(f"f{k}.log", [1]) for k in range(1, 6)],
        ("f6.log", [1, 2, 3, 4]),
    ]
    assert caps.columns == ["pyts", "usts", "logger", "sev_word", "rest", "bare"]
    first = ("2026-11-29 22:00:01,037", None, None, "INFO", "[trainer] rank=3 step=9 loss=1.0", False)
    assert caps.rows() == [
        first,
        ("2026-11-29 22:00:02,074", None, None, "DEBUG", "", False),
        ("2026-11-29 22:00:01", None, None, None, "plain", False),
        *[first] * 5,
        ("2026-11-29 22:00:01,234", None, "trainer", "INFO", "rank: 2, epoch: 0/500, total step: 32", False),
        (
            "2026-11-29 22:00:01,234",
            None,
            "engine.py:256:step",
            "WARNING",
            "rank=1 step=3 world_size=8",
            False,
        ),
        (None, "11/29/2026 22:00:01", "__main__", "INFO", "step 7 done", False),
        ("2026-11-29 22:00:01,234", None, None, "INFO", "iteration 120 loss 2.31", False),
    ]
    out = parsers.parse_lines(frame, keep=list(PARSE_KEEP))
    assert out.filter(pl.col("path") == "f0.log").select(
        "kind", "severity", "step", "rank_stated", "layer"
    ).rows() == [
        ("step_progress", "info", 9, 3, "app"),
        ("log", "debug", None, None, "app"),
        ("log", "unknown", None, None, "app"),
    ]
    assert out.filter(pl.col("path") == "f6.log").select(
        "kind", "severity", "step", "rank_stated", "world_size", "layer"
    ).rows() == [
        # app.STEP_RE and RANK_RE take ``step: 32`` and ``rank: 2``
        ("step_progress", "info", 32, 2, None, "app"),
        ("step_progress", "warning", 3, 1, 8, "app"),
        ("step_progress", "info", 7, None, None, "app"),
        ("step_progress", "info", 120, None, None, "app"),
    ]


def _near_by_definition(files: pl.DataFrame) -> list[bool]:
    """``appfast._near`` by its definition, one line at a time: a line that does not qualify is near; a line
    that qualifies is near where one that does not lies within ``CONTEXT_LINES`` of it in its file, or in its
    stream: one that has the line's stream among its ``t`` (or no ``t``) with fewer than ``CONTEXT_LINES`` lines
    of that stream that qualify between the two. Only where some line that qualifies has a stream."""
    k = appfast.CONTEXT_LINES
    rows = files.rows(named=True)
    by_stream = any(r["s"] is not None for r in rows if not r["o"])
    out = []
    for i, r in enumerate(rows):
        hit = r["o"]
        for j, b in enumerate(rows):
            if hit:
                break
            if not b["o"] or b["path"] != r["path"]:
                continue
            if abs(i - j) <= k:
                hit = True
            elif by_stream and (b["t"] is None or r["s"] in b["t"]):
                lo, hi = min(i, j), max(i, j)
                between = sum(
                    1
                    for m in range(lo + 1, hi)
                    if not rows[m]["o"] and rows[m]["path"] == r["path"] and rows[m]["s"] == r["s"]
                )
                hit = between < k
        out.append(hit)
    return out


_STREAMS = st.sampled_from([None, "0/", "0/1", "/2", "/3"])
_near_line = st.one_of(
    st.tuples(st.just(False), _STREAMS, st.none()),
    st.tuples(st.just(True), st.none(), st.none() | st.lists(_STREAMS, min_size=1, max_size=3)),
)


@settings(DRAWN, max_examples=max(DRAWN.max_examples, 400))  # each example takes ~10 ms; 40 miss cases
@given(st.lists(st.lists(_near_line, max_size=14), min_size=1, max_size=3))
def test_drawn_near_is_its_definition(
    files: list[list[tuple[bool, str | None, list[str | None] | None]]],
) -> None:
    """``appfast._near`` (counted from the lines that do not qualify) on drawn files of lines that qualify (with
    a stream or none) and lines that do not (with the streams they touch, or null: every stream): the lines its
    definition names, read one line at a time."""
    frame = pl.DataFrame(
        {
            "path": [f"f{n}.log" for n, lines in enumerate(files) for _ in lines],
            "o": [o for lines in files for o, _, _ in lines],
            "s": [s for lines in files for _, s, _ in lines],
            "t": [t for lines in files for _, _, t in lines],
        },
        schema={"path": pl.String, "o": pl.Boolean, "s": pl.String, "t": pl.List(pl.String)},
    )
    assert appfast._near(frame).to_list() == _near_by_definition(frame)


def test_message_gate_is_the_literals_and_the_markers() -> None:
    """``appfast._message_gate``, one regex, holds where a message holds a rule literal (``contains_any``, as
    substrings) or a helper marker: on every line of the corpus cases, and on each literal inside text, with its
    first or last character cut (which may hold another), and with a regex meta character beside it."""
    lits = list(appfast.rule_literals())
    lines = [
        line
        for f in sorted(CASES.rglob("*"))
        if f.is_file() and f.suffix in (".log", ".txt", "") and f.stat().st_size < 2_000_000
        for line in f.read_text(errors="replace").splitlines()
    ]
    probes = [
        p for x in lits for p in (f"at {x} end", x[1:], x[:-1], f"({x}", f"{x}.*", x.replace(" ", "  "))
    ]
    text = pl.Series([*lines, *probes])
    for bar in (True, False):
        want = [x for x in lits if bar or x != appfast._BAR_LITERAL]
        expect = (text.str.contains_any(want) | text.str.contains(appfast._MARKERS)).fill_null(True)
        got = text.str.contains(appfast._message_gate(bar=bar)).fill_null(True)
        assert got.to_list() == expect.to_list()
    assert len(lines) > 10_000 and expect.sum() > 1000
    assert pl.Series([f"at {x} end" for x in lits]).str.contains(appfast._message_gate()).all()


def test_the_probe_parses_alike_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job of application lines only takes the generic rows' columns and types from the parse of
    ``parsers._PROBE`` (``parsers._app_schema``, which no longer checks the fast path at run time): for each
    lines schema the ingest hands it (per-rank files, a tee'd console, one file read from a pipe's spool), the
    fast path gives the probe's rows exactly as the generic path does (``parsers.check_app_probe``)."""
    seen: set[tuple[object, ...]] = set()
    real = parsers._app_schema

    def spy(lines_schema: tuple[tuple[str, pl.DataType], ...], cols: tuple[str, ...]) -> pl.Schema:
        seen.add((lines_schema, cols))
        return real(lines_schema, cols)

    monkeypatch.setattr(parsers, "_app_schema", spy)
    lines = [_asc(i, f"[trainer] rank={i % 2} step={i} loss=0.1") for i in range(40)]
    (tmp_path / "files").mkdir()
    for r in range(2):
        (tmp_path / "files" / f"rank{r}.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "tee").mkdir()
    (tmp_path / "tee" / "console.log").write_text(
        "\n".join(f"[default{i % 2}]:{x}" for i, x in enumerate(lines))
    )
    (tmp_path / "one.log").write_text("\n".join(lines) + "\n")
    for root in ("files", "tee", "one.log"):
        ingest(tmp_path / root)
    assert seen  # (one schema for all three today)
    for lines_schema, cols in seen:
        parsers.check_app_probe(lines_schema, cols)  # type: ignore[arg-type]
    # a fast path that differs from the generic one fails the check
    fast = appfast.parse
    monkeypatch.setattr(
        appfast, "parse", lambda *a: fast(*a).with_columns(pl.col("severity").str.to_uppercase())
    )
    with pytest.raises(AssertionError, match="rows differ"):
        parsers.check_app_probe(*next(iter(seen)))  # type: ignore[arg-type]
