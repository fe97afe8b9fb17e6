"""A bad-input suite that is run, not read (issue 16).

1. Every command on every generated hostile folder (``tests/hostile_inputs.py``), in-process with a hang
   guard (SIGALRM) per command: exit code in {0, 1, 2}, no traceback, no internal error, no raw control
   character on stdout/stderr, and the line balance ``lines_read == sum(line_count) + skipped_lines``.
   The caps are lowered (``SUITE_ENV``) so that the bombs stop after a few MiB; ``plot`` (matplotlib,
   slow to start) runs on a few inputs only. Peak RSS of the test process stays below ``RSS_BOUND_MIB``.
2. A hypothesis property over generated trees (encodings, compressions, line shapes, line ends): every
   line written is accounted for, ``lines_read`` equals the count computed here from the lines generated.
3. Two runs as real processes with a subprocess timeout: a FIFO and a gzip bomb are handled in seconds.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import re
import resource
import signal
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from correlator.ingest import ingest
from tests.conftest import run_cli
from tests.hostile_inputs import BUILDERS, SUITE_ENV

#: Hang guard per command (not a speed check: a hang would otherwise stall CI forever).
HANG_GUARD_S = 90
RSS_BOUND_MIB = 4096
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_PLOT_ON = {"base", "terminal_escapes", "huge_numbers"}


class _Hang(BaseException):
    pass


def _alarm(_sig: int, _frame: object) -> None:
    raise _Hang()


def _run(args: list[object], mp: pytest.MonkeyPatch, cap: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_GUARD_S)
    try:
        return run_cli(args, mp, cap)
    except _Hang:
        pytest.fail(f"hang: {args[0]} ran past {HANG_GUARD_S} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def suite_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in SUITE_ENV.items():
        monkeypatch.setenv(k, v)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_command_on_every_bad_input(name, tmp_path, monkeypatch, capsys, suite_env):
    root = tmp_path / "logs"
    root.mkdir()
    try:
        expected = BUILDERS[name](root)
    except (OSError, ImportError) as e:  # a FIFO or symlink this platform cannot make
        pytest.skip(f"cannot build {name}: {e}")
    res = ingest(root)
    covered = int(res.table["line_count"].sum() or 0)
    assert res.lines_read == covered + res.skipped_lines, (name, res.lines_read, covered, res.skipped_lines)
    if expected is not None:
        assert res.lines_read == expected, (name, res.lines_read, expected, res.warnings)
    out = tmp_path / "out"
    out.mkdir()
    case = tmp_path / "cases" / "c1"
    case.mkdir(parents=True)
    os.symlink(root, case / "logs")
    (case / "expected.json").write_text(
        json.dumps({"initiating_ranks": [1], "collateral_ranks": [0], "failure_kind": "rank_crash"})
    )
    commands: list[list[object]] = [
        ["diagnose", root, "-f", "json"],
        ["diagnose", root],
        ["timeline", root, "-o", out / "t.parquet"],
        ["events", root, "-n", "0"],
        ["graph", root, "-o", out / "g.json"],
        ["redact", root, "-o", out / "copy"],
        ["eval", tmp_path / "cases"],
    ]
    if name in _PLOT_ON:
        commands.append(["plot", root, "-o", out / "p.html"])
    for args in commands:
        code, o, e = _run(args, monkeypatch, capsys)
        assert code in (0, 1, 2), (name, args[0], code, e[-2000:])
        assert "Traceback (most recent call last)" not in e and "internal error" not in e, (
            name,
            args[0],
            e[-2000:],
        )
        bad = _RAW_CONTROL.findall(o + e)
        assert not bad, (name, args[0], sorted(set(bad)))
        if args[0] == "diagnose" and "json" in args and code == 0:
            d = json.loads(o)
            assert sum(int(x["lines"] or 0) for x in d["skipped"]) == res.skipped_lines
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 < RSS_BOUND_MIB


# ------------------------------------------------------------------------------------- property: balance

_WORDS = st.sampled_from(
    [
        "[rank0]: step 1 loss=0.5",
        "[rank1]: RuntimeError: boom",
        "NCCL INFO comm 0x1 rank 0",
        "",
        "caf\u00e9 \u2713",
        "2026-11-29 23:08:40,000 INFO rank=0 step=3",
    ]
)
_SHAPE = st.one_of(
    _WORDS.map(str.encode),
    st.builds(lambda w, n: (w * n).encode(), _WORDS, st.integers(100, 400)),  # long (past a 1 KiB cap)
    _WORDS.map(lambda w: b"\x00" * 32 + w.encode()),  # NUL run
    _WORDS.map(lambda w: b"\x1b[31m" + w.encode() + b"\x1b[0m\x1b]0;t\x07"),  # colour + OSC
    st.just(b"caf\xe9 invalid \xc3\x28 utf-8"),
    st.just(bytes(range(1, 9)) * 64),  # a binary line
)
_FILE = st.tuples(
    st.lists(_SHAPE, max_size=60),
    st.sampled_from(["utf8", "utf16"]),
    st.sampled_from(["none", "gz", "bz2", "xz", "gz-no-suffix"]),
    st.sampled_from(["\n", "\r\n", "none"]),
)


def _bytes_of(lines: list[bytes], enc: str, end: str) -> tuple[bytes, int]:
    if enc == "utf16":
        lines = [
            ln.decode("utf-8", "replace").encode("ascii", "replace")
            for ln in lines
            if b"\x00" not in ln and not any(b < 9 for b in ln)
        ]
    sep = b"\r\n" if end == "\r\n" else b"\n"
    body = sep.join(lines) + (sep if lines and end != "none" else b"")
    n = body.count(b"\n") + (0 if body.endswith(b"\n") or not body else 1)  # physical lines, by definition
    if enc == "utf16" and body:  # (a BOM alone is not generated: as bytes it is one line of U+FFFD)
        body = body.decode("ascii").encode("utf-16")
    return body, n


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(files=st.lists(_FILE, min_size=1, max_size=5))
def test_every_line_is_accounted_for(files, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("RANKSCOPE_MAX_LINE_KB", "1")
    root = tmp_path_factory.mktemp("tree") / "logs"
    want = 0
    for i, (lines, enc, comp, end) in enumerate(files):
        data, n = _bytes_of(lines, enc, end)
        name = f"d{i % 2}/f{i}.rank{i % 3}.log"
        if comp in ("gz", "gz-no-suffix"):
            data = gzip.compress(data)
            name += ".gz" if comp == "gz" else ".1"
        elif comp == "bz2":
            data, name = bz2.compress(data), name + ".bz2"
        elif comp == "xz":
            data, name = lzma.compress(data), name + ".xz"
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        want += n
    if want == 0:
        return  # a tree of empty files is a usage error (covered in test_bad_input)
    try:
        res = ingest(root)
    except Exception as e:  # noqa: BLE001 - only "nothing readable" may stop ingest
        assert "no log lines" in str(e), e
        return
    covered = int(res.table["line_count"].sum() or 0)
    assert res.lines_read == covered + res.skipped_lines
    assert res.lines_read == want, (res.lines_read, want, res.warnings)


# --------------------------------------------------------------------------------------- real processes


@pytest.mark.parametrize("build", ["fifo", "gz_bomb_newlines"])
def test_fifo_and_bomb_as_a_process(build, tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    BUILDERS[build](root)
    env = {**os.environ, "RANKSCOPE_MAX_LINES": "100000"}
    p = subprocess.run(
        [sys.executable, "-m", "correlator", "diagnose", str(root), "-f", "json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    d = json.loads(p.stdout)
    assert d["initiating_ranks"] == [1] and d["skipped"], d
