"""The NCCL COLL fast path (parsers.coll) gives exactly the rows the generic prefix + rule path gives.

Compared on a generated torchrun job (benchmarks/generate.py) plus files that mix COLL lines with what makes
a file's parse depend on all its lines (tee and srun prefixes, tracebacks, indented continuations, stamps),
and on every corpus case; the fast path must have been taken for the job's COLL lines.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import parsers
from correlator.ingest import ingest
from tests.conftest import CASES, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from generate import generate

_COLL = (
    "{h}:{p}:{p} [0] NCCL INFO AllReduce: opCount {n:x} sendbuff 0x7f3b52000000 recvbuff 0x7f3b52000000 "
    "count 1024 datatype 7 op 0 root 0 comm 0x55d0c3a4e2b0 [nranks=2] stream 0x55d0c2f1a9e0"
)
_INIT = (
    "{h}:{p}:{p} [0] NCCL INFO comm 0x55d0c3a4e2b0 rank {r} nranks 2 cudaDev 0 nvmlDev 0 busId 9c000 "
    "commId 0x3f9a6c1be27d4410 - Init COMPLETE"
)


def _mixed(root: Path) -> None:
    d = root / "mixed"
    d.mkdir(parents=True)
    c = lambda n, h="node-x", p=77: _COLL.format(h=h, p=p, n=n)
    (d / "rank0.log").write_text(
        "\n".join(
            [
                _INIT.format(h="node-x", p=77, r=0),
                c(1),
                c(2),
                (
                    "node-x:77:77 NCCL INFO Broadcast: opCount 3 sendbuff (nil) recvbuff 0x1 count 1 datatype 4 op 0 root 0 "
                    "comm 0x55d0c3a4e2b0 [nranks=2]"
                ),
                "[2026-11-29 22:00:01.000123] " + c(4),
                c(0xFFFFFFFFFFFFFFFFFF),
                c(5) + " trailing",
                # Not a pointer where NCCL prints one (hostile input): field names inside the buffer tokens.
                (
                    "node-x:77:77 [0] NCCL INFO AllReduce: opCount 9 sendbuff count recvbuff datatype count 5 "
                    "datatype 7 op 0 root 0 comm 0x55d0c3a4e2b0 [nranks=2]"
                ),
                "node-x:77:99 [0] enqueue.cc:1 NCCL WARN Cuda failure 'unspecified launch failure'",
                c(6),
                "",
            ]
        )
        + "\n"
    )
    (d / "rank1.log").write_text(
        "\n".join(
            [
                _INIT.format(h="node-y", p=88, r=1),
                c(1, "node-y", 88),
                "Traceback (most recent call last):",
                '  File "train.py", line 3, in <module>',
                c(2, "node-y", 88),
                "    indented after a COLL line",
                "RuntimeError: boom",
                c(3, "node-y", 88),
            ]
        )
        + "\n"
    )
    (d / "tee.log").write_text(
        "\n".join(
            [f"[default{i % 2}]:" + c(i, "node-z", 90 + i % 2) for i in range(6)] + [c(7, "node-z", 90)]
        )
        + "\n"
    )
    (d / "srun.log").write_text(
        "\n".join([f" {i % 2}: " + c(i, "node-w", 60 + i % 2) for i in range(6)] + [c(9, "node-w", 60)])
        + "\n"
    )
    # Files whose per-file decisions flip when their COLL lines are left out: tee share 3/8 (no hard-wrap
    # joining) vs 3/4; srun share 2/5 (labels kept) vs 2/2; a traceback of a producer's lines that a COLL
    # line interrupts.
    (d / "wrap.log").write_text(
        "\n".join(
            [c(i, "node-u", 40) for i in range(4)]
            + ["[default0]:hello ", "world wrapped", "[default1]:x", "[default0]:y"]
        )
        + "\n"
    )
    (d / "srunfew.log").write_text(
        "\n".join([" 0: hello", " 1: x"] + [c(i, "node-t", 30) for i in range(3)]) + "\n"
    )
    asc = "2026-11-29 22:00:01,000 ERROR "
    (d / "tbprod.log").write_text(
        "\n".join(
            [
                asc + "Traceback (most recent call last):",
                c(1, "node-s", 20),
                asc + '  File "x.py", line 1',
                asc + "ValueError: bad",
                c(2, "node-s", 20),
            ]
        )
        + "\n"
    )
    # Majorities count every COLL line (the fast rows enter identity as weighted summaries): rank 50's host
    # is gpu-a (5 lines) not gpu-b (2 lines), and its progress line takes it.
    warn = "gpu-b:71:71 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer gpu-c<4>"
    (d / "rank50.log").write_text(
        "\n".join(
            [c(i, "gpu-a", 70) for i in range(5)]
            + [warn, warn, "2026-11-29 22:00:05,000 INFO [trainer] rank=50 step=7 loss=1.0"]
        )
        + "\n"
    )
    (d / "plain.log").write_text("\n".join([c(i, "node-v", 50) for i in range(5)] + ["done "]) + "\n")


def _both(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    # The fast-path rows left after the generic slices took back their files' take their ``pg`` last.
    calls = {"rows": 0}
    real = parsers.coll.with_pg

    def spy(df: pl.DataFrame, m: dict[str, str]) -> pl.DataFrame:
        calls["rows"] += df.height
        return real(df, m)

    monkeypatch.setattr(parsers.coll, "with_pg", spy)
    fast = ingest(root).table
    monkeypatch.setattr(parsers, "fast_split", lambda df, on_rows=None: None)
    slow = ingest(root).table
    return fast, slow, calls["rows"]


def test_fast_path_equals_generic_on_generated_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generate(tmp_path / "job", ranks=8, lines=300, seed=3)
    _mixed(tmp_path / "job")
    monkeypatch.setattr(parsers.coll, "CHUNK_ROWS", 97)  # parsed in many chunks
    fast, slow, n_fast = _both(tmp_path / "job", monkeypatch)
    assert_frame_equal(fast, slow)
    n_coll = fast.filter(pl.col("kind") == "nccl_coll").height
    assert n_fast > 0.8 * n_coll  # the job's COLL lines went the fast way
    # Files with tee/srun prefixes or records kept every line on the generic path, and were still right.
    mixed = fast.filter(pl.col("path").str.starts_with("mixed/"))
    assert mixed.filter(pl.col("kind") == "nccl_coll").height >= 20
    r50 = fast.filter(pl.col("path") == "mixed/rank50.log")
    assert r50.filter(pl.col("kind") == "step_progress")["host"].to_list() == ["gpu-a"]


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "logs").is_dir()))
def test_fast_path_equals_generic_on_corpus(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow, _ = _both(CASES / case / "logs", monkeypatch)
    assert_frame_equal(fast, slow)


def test_buffers_that_are_not_pointers_take_the_generic_path() -> None:
    """The fast path finds each field by the first occurrence of its name, which holds because NCCL prints
    the buffers as pointers (``%p``: ``0x..`` or ``(nil)``); a line with a field name as a buffer token is
    left to the generic rule, which reads it by position."""
    ok = _COLL.format(h="node-x", p=7, n=3)
    nil = ok.replace("sendbuff 0x7f3b52000000", "sendbuff (nil)")
    odd = ok.replace("sendbuff 0x7f3b52000000 recvbuff 0x7f3b52000000", "sendbuff count recvbuff datatype")
    lines = pl.Series("raw", [ok, nil, odd])
    assert parsers.coll.fast_mask(lines).to_list() == [True, True, False]
    frame = pl.DataFrame(
        {"raw": lines, "body": lines, "path": ["r0.log"] * 3, "line": [1, 2, 3], "line_count": [1] * 3}
    )
    rows = parsers.parse_lines(frame)
    assert rows["kind"].to_list() == ["nccl_coll"] * 3
    assert rows["numel"].to_list() == [1024, 1024, 1024]
    assert rows["seq"].to_list() == [3, 3, 3]


def _lines_for_scan() -> list[str | None]:
    coll = [_COLL.format(h=f"node-{k % 3}", p=100 + k, n=k) for k in range(40)]
    other = [
        "[rank0]:[E1201 10:00:00.000000000 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective",
        _COLL.format(h="node-0", p=1, n=5) + " trailing",  # has the literal, not the shape
        "node-0:1:1 [0] NCCL INFO AllReduce: opCount 5 sendbuff 0x1 recvbuff 1 count 1",  # literal, cut short
        "",
        None,
    ]
    out: list[str | None] = []
    for k, line in enumerate(coll):
        out.append(line)
        if k % 4 == 0:
            out.append(other[(k // 4) % len(other)])
    return out


def test_fast_mask_in_parts_marks_exactly_the_whole_coll_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan in parts of 7 lines, each part's regex split across threads (parts of 3+ rows), marks the
    same lines as Python's ``re.fullmatch`` of the fast-path shape, and reports every line once."""
    import re

    from parsers import coll, rules

    lines = _lines_for_scan()
    monkeypatch.setattr(coll, "SCAN_ROWS", 7)
    monkeypatch.setattr(rules, "_PARALLEL_MIN_ROWS", 3)
    shape = re.compile(coll.FAST_COLL.removeprefix("(?-u)"))
    expected = [line is not None and coll.LITERAL in line and bool(shape.search(line)) for line in lines]
    assert 30 < sum(expected) < len(lines)
    reported: list[int] = []
    got = coll.fast_mask(pl.Series("raw", lines, dtype=pl.String), reported.append)
    assert got.to_list() == expected
    assert reported == [min(7, len(lines) - i) for i in range(0, len(lines), 7)]
    assert coll.fast_mask(pl.Series("raw", [], dtype=pl.String)).to_list() == []


@pytest.mark.parametrize("min_rows", [1, 3, 1000])
def test_contains_parallel_equals_one_pass(min_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    from parsers import rules

    monkeypatch.setattr(rules, "_PARALLEL_MIN_ROWS", min_rows)
    lines = _lines_for_scan()
    pattern = r"opCount [0-9a-f]*[05] "
    expected = [None if line is None else bool(re.search(pattern, line)) for line in lines]
    got = rules.contains_parallel(pl.Series("raw", lines, dtype=pl.String), pattern)
    assert got.name == "raw" and got.to_list() == expected


def test_a_prefix_under_a_mask_is_tested_on_the_masked_rows_only() -> None:
    """``strip_prefix(mask=...)`` strips where the mask holds and the prefix matches, nowhere else (the regex
    runs on the masked rows alone); values computed by hand."""
    from parsers.c10d import PG_PREFIX
    from parsers.rules import strip_prefix

    body = [
        "[PG ID 0 PG GUID 0(default_pg) Rank 3] Timeout at NCCL work: 5",  # masked, matches
        "[PG ID 0 PG GUID 0(default_pg) Rank 3] Timeout at NCCL work: 6",  # not masked
        "no prefix here",  # masked, no match
        None,  # masked, null
    ]
    df = pl.DataFrame({"body": body})
    out = strip_prefix(df, PG_PREFIX, mask=pl.Series([True, False, True, True]))
    assert out["pfx_pg"].to_list() == [True, False, False, False]
    assert out["body"].to_list() == ["Timeout at NCCL work: 5", body[1], body[2], None]
    none = strip_prefix(df, PG_PREFIX, mask=pl.Series([False, False, None, False]))
    assert none["pfx_pg"].to_list() == [False] * 4 and none["body"].to_list() == body
