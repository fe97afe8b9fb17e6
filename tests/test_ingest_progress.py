"""Progress callbacks of ``ingest``: one per file read, then one per phase after reading (issue #13 item 5)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from correlator.discover import Source
from correlator.ingest import IDENTITY, PARSING, PHASES, READING, SCANNING, ingest
from tests.conftest import CASES


def test_progress_per_file_and_each_phase_in_order(tmp_path: Path) -> None:
    sys.path.insert(0, str(CASES.parent.parent / "benchmarks"))
    from generate import generate

    generate(tmp_path / "job", ranks=6, lines=50, seed=2)
    files = sorted(p for p in (tmp_path / "job").rglob("*") if p.is_file())
    read: list[Source] = []
    found: list[list[Source]] = []
    phases: list[str] = []
    res = ingest(tmp_path / "job", progress=read.append, on_sources=found.append, on_phase=phases.append)
    assert len(found) == 1 and len(found[0]) == len(files)
    assert sorted(s.path for s in read) == files  # each file once
    assert phases == list(PHASES)
    assert res.table.height > 0


def _steps(calls: list[tuple[str, int, int]]) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for step, done, total in calls:
        out.setdefault(step, []).append((done, total))
    return out


def _check_monotone(steps: dict[str, list[tuple[int, int]]]) -> None:
    for step, seq in steps.items():
        totals = {t for _, t in seq}
        assert len(totals) == 1, (step, totals)  # one total per step
        dones = [d for d, _ in seq]
        assert dones == sorted(dones), step  # never backwards
        assert 0 <= dones[0] and dones[-1] == seq[-1][1], step  # ends at the total


def test_progress_within_steps_reading_bytes_and_parsing_lines(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``on_progress``: reading reports bytes per file and per MiB within a file; parsing reports lines
    after each chunk of NCCL COLL lines; every step ends at its total, in the order of the steps."""
    from correlator import read
    from parsers import coll

    sys.path.insert(0, str(CASES.parent.parent / "benchmarks"))
    from generate import generate

    info = generate(tmp_path / "job", ranks=4, lines=3000, seed=2)
    monkeypatch.setattr(read, "_CHUNK", 64 * 1024)  # several chunks per file
    monkeypatch.setattr(coll, "CHUNK_ROWS", 1000)  # several parse chunks
    monkeypatch.setattr(coll, "SCAN_ROWS", 2000)  # several scan parts
    calls: list[tuple[str, int, int]] = []
    res = ingest(tmp_path / "job", on_progress=lambda s, d, t: calls.append((s, d, t)))
    order = list(dict.fromkeys(s for s, _, _ in calls))
    assert order == [READING, *PHASES]
    steps = _steps(calls)
    _check_monotone(steps)
    files = [p for p in (tmp_path / "job").rglob("*") if p.is_file()]
    assert steps[READING][-1][1] == sum(p.stat().st_size for p in files) == info["bytes"]
    # More reading events than files: progress within the big files (64 KiB chunks of ~600 KB files).
    assert len(steps[READING]) > len(files) + 1
    n_lines = int(res.table["line_count"].sum())
    # The scan for fast-path lines counts every line, per part of 2,000 (ceil(n / 2000) parts), then the end.
    scan = steps[SCANNING]
    assert scan[-1] == (n_lines, n_lines)
    assert [d for d, _ in scan[1:-1]] == [min(n_lines, k * 2000) for k in range(1, -(-n_lines // 2000) + 1)]
    assert steps[PARSING][-1] == (n_lines, n_lines)
    # Per chunk of 1,000 fast-path lines: several events strictly inside the parse.
    inside = [d for d, t in steps[PARSING] if 0 < d < t]
    assert len(inside) >= 4
    # Identity merges the fast-path rows with the others column by column, with a report after each: one
    # per column of the merged frame (the table's columns, ``event_id`` aside, plus the few the later steps
    # drop), then the end.
    ident = steps[IDENTITY]
    merged = [d for d, _ in ident[:-1]]
    assert merged == list(range(1, ident[-1][1] + 1))
    assert ident[-1][1] >= res.table.width - 1


def test_progress_within_parsing_when_diagnosis_cuts_lines(tmp_path: Path) -> None:
    """With ``keep_coll`` the COLL lines are cut batch by batch while reading (the reading step still covers
    every byte); the parse step then counts only the lines left, and ends at them."""
    sys.path.insert(0, str(CASES.parent.parent / "benchmarks"))
    from generate import generate

    generate(tmp_path / "job", ranks=4, lines=600, seed=2)
    calls: list[tuple[str, int, int]] = []
    res = ingest(tmp_path / "job", keep_coll=4, on_progress=lambda s, d, t: calls.append((s, d, t)))
    steps = _steps(calls)
    _check_monotone(steps)
    files = [p for p in (tmp_path / "job").rglob("*") if p.is_file()]
    assert steps[READING][-1][1] == sum(p.stat().st_size for p in files)
    n_lines = int(res.table["line_count"].sum())
    assert res.coll_lines_dropped > n_lines  # most of the job's lines are COLL lines, cut
    assert steps[PARSING][-1] == (n_lines, n_lines)


def test_diagnose_path_progress_moves_within_parsing(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The CLI's callback (``correlator.api.Progress``) gets files while reading, then lines while parsing."""
    from correlator.api import diagnose_path
    from parsers import coll

    sys.path.insert(0, str(CASES.parent.parent / "benchmarks"))
    from generate import generate

    generate(tmp_path / "job", ranks=4, lines=3000, seed=2)
    monkeypatch.setattr(coll, "CHUNK_ROWS", 5)  # the few COLL lines diagnosis keeps: several chunks
    calls: list[tuple[str, int, int | None]] = []
    diagnose_path(tmp_path / "job", progress=lambda s, d, t: calls.append((s, d, t)))
    reading = [(d, t) for s, d, t in calls if s == READING]
    n_files = sum(1 for p in (tmp_path / "job").rglob("*") if p.is_file())
    assert reading[-1] == (n_files, n_files)
    parse = [(d, t) for s, d, t in calls if s == PARSING]
    dones = [d for d, _ in parse]
    assert dones == sorted(dones) and len({d for d in dones if 0 < d < parse[-1][1]}) >= 3
    assert parse[-1][0] == parse[-1][1]


def test_a_step_of_unknown_size_does_not_show_the_last_steps_count(monkeypatch: pytest.MonkeyPatch) -> None:
    # rich's Progress.update keeps the old total when given None: "reading timestamps" showed "0/5114628"
    # (the parse step's line count) before this was handled.
    import io
    import re
    import time

    from rich.console import Console

    from correlator.cli import common as commands

    buf = io.StringIO()
    monkeypatch.setattr(commands, "err", Console(file=buf, force_terminal=True, width=100))
    with commands.progress(False) as bar:
        assert bar is not None
        bar("parsing lines", 5, 10)
        time.sleep(0.4)  # rich redraws ~10 times a second from its own thread
        bar("writing t.parquet", 0, None)
        time.sleep(0.4)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())
    frames = [f for f in re.split(r"[\r\n]", text) if f.strip()]
    assert any("parsing lines" in f and "5/10" in f for f in frames)
    writing = [f for f in frames if "writing t.parquet" in f]
    assert writing
    assert all("/10" not in f and "0/?" in f for f in writing)


def test_files_read_ahead_on_threads_give_the_same_table_in_order_within_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files are read ahead on threads (``ingest._reads``): the table is the one a single reader gives, each
    file is handed on once and in path order, the bytes read but not handed on never exceed the window (or
    one file larger than it), and the bytes read never go back."""
    import importlib

    from correlator import read

    ing = importlib.import_module("correlator.ingest")  # the module: ``correlator.ingest`` names the function

    job = tmp_path / "job"
    # lines per file (~62 bytes a line; the window below is 8,000 bytes): some above the window alone, small
    # ones that fit in it together. Three files at once, unweighed, would hold ~16,600 bytes beyond the largest.
    sizes = [40, 3, 900, 5, 200, 200, 200, 2, 60, 700, 1, 30, 250, 8]
    for r, n in enumerate(sizes):
        d = job / f"rank{r}"
        d.mkdir(parents=True)
        (d / "stdout.log").write_text(
            "".join(
                f"2026-01-02 03:04:{k % 60:02d},000 INFO [trainer] rank={r} step={k} loss=0.5\n"
                for k in range(n)
            )
        )
    monkeypatch.setattr(read, "_CHUNK", 4096)  # progress within the larger files
    monkeypatch.setattr(ing, "parallelism", lambda tasks: 1)
    one = ing.ingest(job).table
    window = 8_000
    monkeypatch.setattr(ing, "READ_AHEAD_BYTES", window)
    monkeypatch.setattr(ing, "parallelism", lambda tasks: min(3, tasks))
    held: dict[str, int] = {}  # files read (or being read) and not handed on: their sizes
    most = [0]
    real = ing.source_frame

    def reading(src: Source, *args, **kwargs):  # type: ignore[no-untyped-def]
        held[src.rel] = src.size
        most[0] = max(most[0], sum(held.values()) - max(held.values()))
        return real(src, *args, **kwargs)

    handed: list[str] = []

    def hand(src: Source) -> None:
        handed.append(src.rel)
        del held[src.rel]

    calls: list[tuple[str, int, int]] = []
    monkeypatch.setattr(ing, "source_frame", reading)
    many = ing.ingest(job, progress=hand, on_progress=lambda s, d, t: calls.append((s, d, t))).table
    assert many.equals(one)
    assert handed == sorted(f"rank{r}/stdout.log" for r in range(len(sizes)))
    # Beyond the largest file held, at most the window is held.
    assert 0 < most[0] <= window
    reading_steps = _steps(calls)[READING]
    _check_monotone({READING: reading_steps})
    assert reading_steps[-1][1] == sum(p.stat().st_size for p in job.rglob("*.log"))
