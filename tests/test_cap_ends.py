"""A file past the size cap or the line cap keeps its head and its tail, each line with its own number.

A failed job's log ends in its failure: a file cut at the cap that kept its head only lost exactly that (a
tee'd console of 11 MB under a 1 MiB cap was diagnosed "No failure found" at confidence 0.90). The expected
lines are computed here from the bytes written: line ``k`` of a file of numbered lines says ``k``.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from pathlib import Path

import polars as pl
import pytest

from correlator.ingest import ingest
from correlator.read import HEAD_SHARE, read_lines
from tests.conftest import run_cli
from tests.hostile_inputs import RANK0, RANK1, write

MIB = 1 << 20


def numbered(n: int, width: int = 60) -> bytes:
    """``n`` lines, line ``k`` (from 1) reading ``line k`` padded to ``width`` characters."""
    return "".join(f"line {k}".ljust(width, ".") + "\n" for k in range(1, n + 1)).encode()


def check_numbers(res) -> list[tuple[int, list[str]]]:  # type: ignore[no-untyped-def]
    """Each run of ``res.parts()`` as (first line, its lines), every line saying its own number."""
    runs = [(first, list(lines)) for first, lines in res.parts()]
    for first, lines in runs:
        for k, text in enumerate(lines):
            assert text.split(".")[0] == f"line {first + k}", (first, k, text)
    return runs


def test_plain_file_past_the_size_cap_keeps_head_and_tail(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "1")
    data = numbered(60_000)  # 61 bytes a line: 3.66 MB
    n = write(tmp_path / "big.log", data)
    res = read_lines(tmp_path / "big.log", "big.log")
    (h, head), (t, tail) = check_numbers(res)
    line = len(data) // n
    # whole lines of the first quarter of the cap, and of the last three quarters
    assert h == 1 and len(head) == (MIB // HEAD_SHARE) // line
    assert t + len(tail) - 1 == n and len(tail) == (MIB - MIB // HEAD_SHARE) // line
    left = n - len(head) - len(tail)
    assert res.physical_lines == n and res.skipped_lines == left
    assert {"path": "big.log", "bytes": left * line, "lines": left, "reason": "file size cap"} in res.skipped
    assert any(
        w.startswith(f"big.log: {len(data)} bytes, past the file size cap (1 MiB")
        and f"to line {len(head)}, from line {t})" in w
        for w in res.warnings
    ), res.warnings


def test_line_cap_keeps_head_and_tail(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKSCOPE_MAX_LINES", "1000")
    write(tmp_path / "many.log", numbered(5000, 20))
    res = read_lines(tmp_path / "many.log", "many.log")
    (h, head), (t, tail) = check_numbers(res)
    assert (h, len(head), t, len(tail)) == (1, 250, 4251, 750)
    assert res.physical_lines == 5000 and res.skipped_lines == 4000
    entry = next(e for e in res.skipped if e["reason"] == "line cap")
    assert entry["lines"] == 4000 and entry["bytes"] == 4000 * 21  # 20 characters and a newline each


def test_both_caps_number_every_line_kept(tmp_path, monkeypatch):
    # The size cap keeps ~17k lines of 61 bytes, the line cap 1,000 of them: its cut spans the size cap's gap.
    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "1")
    monkeypatch.setenv("RANKSCOPE_MAX_LINES", "1000")
    write(tmp_path / "big.log", numbered(60_000))
    res = read_lines(tmp_path / "big.log", "big.log")
    (h, head), (t, tail) = check_numbers(res)
    assert (h, len(head), t + len(tail) - 1, len(tail)) == (1, 250, 60_000, 750)
    assert res.physical_lines == 60_000 and res.skipped_lines == 59_000
    assert sum(int(e["lines"] or 0) for e in res.skipped) == 59_000


def test_line_cap_within_head_and_tail_keeps_the_gap(tmp_path, monkeypatch):
    # Long lines first, short ones after: the size cap's head holds few lines, so a line cap can keep that head,
    # the size cap's gap where it is, the first 10 lines of its tail, then a gap of its own and the last lines.
    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "1")
    long = numbered(10_000, 200)
    short = "".join(f"line {k}".ljust(20, ".") + "\n" for k in range(10_001, 110_001)).encode()
    write(tmp_path / "big.log", long + short)
    whole = read_lines(tmp_path / "big.log", "big.log")
    (_, head), (_, tail) = check_numbers(whole)
    assert len(head) < len(tail) // 10
    cap = HEAD_SHARE * (len(head) + 10)
    monkeypatch.setenv("RANKSCOPE_MAX_LINES", str(cap))
    res = read_lines(tmp_path / "big.log", "big.log")
    runs = check_numbers(res)
    assert [len(r) for _, r in runs] == [len(head), 10, cap - len(head) - 10]
    assert runs[1][0] == 110_000 - len(tail) + 1 and runs[-1][0] + len(runs[-1][1]) - 1 == 110_000
    assert res.physical_lines == 110_000 and res.skipped_lines == 110_000 - cap


def test_ingest_numbers_the_tail_and_counts_every_line(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "1")
    root = tmp_path / "logs"
    n = write(root / "rank0.log", numbered(60_000))
    res = ingest(root)
    t = res.table
    assert res.lines_read == n == int(t["line_count"].sum()) + res.skipped_lines
    said = t["raw"].str.extract(r"^line (\d+)", 1).cast(pl.Int64)
    assert (said == t["line"]).all() and t["line"].max() == n and t["line"].min() == 1
    assert t["line"].is_sorted() and t["event_id"].to_list() == list(range(t.height))


def _job(root: Path, filler: int) -> None:
    """The hostile suite's 2-rank job (rank 1 raises, rank 0's watchdog times out waiting for it), rank 1's
    traceback after ``filler`` lines of training progress."""
    write(root / "rank0.log", RANK0)
    steps = "".join(f"[rank1]: step {k} loss=0.{k % 10000:04d}\n" for k in range(filler))
    write(root / "rank1.log", steps + RANK1)


def _verdict(root: Path, monkeypatch, capsys) -> dict:  # type: ignore[no-untyped-def]
    code, out, err = run_cli(["diagnose", root, "-f", "json"], monkeypatch, capsys)
    assert code == 0 and "Traceback (most recent call last):\n  File" not in err, err
    return json.loads(out)


def test_the_failure_at_the_end_of_a_capped_file_is_diagnosed(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    _job(root, 100_000)  # rank1.log: ~3.4 MB, its traceback in the last 3 lines
    want = _verdict(root, monkeypatch, capsys)
    assert want["initiating_ranks"] == [1] and want["collateral_ranks"] == [0]
    assert [(e["path"], e["line"]) for e in want["initiating_events"]] == [("rank1.log", 100_001)]
    for env in ({"RANKSCOPE_MAX_FILE_MB": "1"}, {"RANKSCOPE_MAX_LINES": "5000"}):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        got = _verdict(root, monkeypatch, capsys)
        assert got["initiating_ranks"] == [1] and got["collateral_ranks"] == [0], (env, got)
        first = [(e["path"], e["line"], e["kind"]) for e in got["initiating_events"]]
        assert first == [(e["path"], e["line"], e["kind"]) for e in want["initiating_events"]], (env, got)
        for k in env:
            monkeypatch.delenv(k)


@pytest.mark.parametrize("kind", ["gzip", "bz2", "xz", "zstd"])
def test_compressed_file_past_the_size_cap_keeps_head_and_tail(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "1")
    data = numbered(60_000)
    if kind == "zstd":
        import pyarrow as pa

        buf = pa.BufferOutputStream()
        with pa.CompressedOutputStream(buf, "zstd") as f:
            f.write(data)
        packed = buf.getvalue().to_pybytes()
    else:
        packed = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind](data)
    name = f"big.log.{ {'gzip': 'gz', 'bz2': 'bz2', 'xz': 'xz', 'zstd': 'zst'}[kind] }"
    write(tmp_path / name, packed)
    res = read_lines(tmp_path / name, name)
    plain = read_lines(write_plain(tmp_path, data), "big.log")
    runs, want = check_numbers(res), check_numbers(plain)
    assert [(f, len(r)) for f, r in runs] == [(f, len(r)) for f, r in want]  # the plain file's ends
    assert (res.physical_lines, res.skipped_lines) == (60_000, plain.skipped_lines)
    assert any(f"{name}: {len(data)} bytes, past the file size cap" in w for w in res.warnings), res.warnings


def write_plain(tmp_path: Path, data: bytes) -> Path:
    write(tmp_path / "big.log", data)
    return tmp_path / "big.log"


def test_line_cap_of_a_file_with_crlf_and_colour_codes(tmp_path, monkeypatch):
    # The lines kept are rewritten as any file's are (CRLF ends, colour codes removed); the skipped entry counts
    # the bytes of the lines left out as the file holds them (text and CRLF).
    monkeypatch.setenv("RANKSCOPE_MAX_LINES", "100")
    data = "".join(f"\x1b[32mline {k}\x1b[0m\r\n" for k in range(1, 1001)).encode()
    write(tmp_path / "crlf.log", data)
    res = read_lines(tmp_path / "crlf.log", "crlf.log")
    (h, head), (t, tail) = check_numbers(res)
    assert (h, len(head), t, len(tail)) == (1, 25, 926, 75)
    assert all("\r" not in x and "\x1b" not in x for x in head + tail)
    entry = next(e for e in res.skipped if e["reason"] == "line cap")
    left = data.splitlines(keepends=True)[25:925]
    assert entry["lines"] == 900 and entry["bytes"] == sum(len(x) - 1 for x in left) + 900


@pytest.mark.parametrize("enc", ["utf-16", "utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("packed", [False, True])
def test_utf16_file_past_the_size_cap_keeps_head_and_tail(tmp_path, monkeypatch, enc, packed):
    # A UTF-16 file's newline is two bytes, at an even offset: the cuts keep whole code units, and the bytes
    # 0A 00 / 00 0A at odd offsets (the chars ਐĀਐ: U+0A10 U+0100 U+0A10) and a surrogate pair (U+1F600) are
    # not newlines. The tail, which has no BOM, is decoded as the head is.
    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "1")
    n, width = 20_000, 60
    text = "".join(f"line {k}".ljust(width, ".") + "ਐĀਐ\U0001f600\n" for k in range(1, n + 1))
    data = text.encode(enc)
    per_line = len(data[2:] if enc == "utf-16" else data) // n  # 2 bytes per char, 4 for U+1F600
    name = "win.log.gz" if packed else "win.log"
    write(tmp_path / name, gzip.compress(data) if packed else data)
    res = read_lines(tmp_path / name, name)
    (h, head), (t, tail) = check_numbers(res)
    assert all(x.endswith("ਐĀਐ\U0001f600") for x in head + tail)
    bom = 2 if enc == "utf-16" else 0
    assert h == 1 and len(head) == (MIB // HEAD_SHARE - bom) // per_line
    assert t + len(tail) - 1 == n and len(tail) == (MIB - MIB // HEAD_SHARE) // per_line
    left = n - len(head) - len(tail)
    assert res.physical_lines == n and res.skipped_lines == left
    assert {"path": name, "bytes": left * per_line, "lines": left, "reason": "file size cap"} in res.skipped
    assert [w for w in res.warnings if "UTF-16" in w] == [f"{name}: UTF-16 text ({enc}); decoded"]
    assert not any("no newline" in w for w in res.warnings), res.warnings


def test_redacted_copy_of_a_capped_file_says_which_lines_it_left_out(tmp_path, monkeypatch):
    from correlator.redact import redact_dir

    monkeypatch.setenv("RANKSCOPE_MAX_LINES", "1000")
    write(tmp_path / "in" / "many.log", numbered(5000, 20))
    stats = redact_dir(tmp_path / "in", tmp_path / "out")
    copy = (tmp_path / "out" / "many.log").read_text().splitlines()
    # lines 1-250 and 4251-5000 kept (test_line_cap_keeps_head_and_tail), one line between them
    assert copy[:250] == [f"line {k}".ljust(20, ".") for k in range(1, 251)]
    assert (
        copy[250]
        == "[rankscope redact: lines 251-4250 of the original (4000 lines) left out by a cap, not copied]"
    )
    assert copy[251:] == [f"line {k}".ljust(20, ".") for k in range(4251, 5001)]
    assert stats.lines == 1000 and stats.files == 1
    assert stats.skipped == ["many.log: line cap, not copied"]


OOM = "[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory.\n"


def _oom_log(n: int = 60_000) -> bytes:
    """``n`` lines of rank 0's training progress (~3 MB for 60,000), then rank 1's CUDA OOM as the last line."""
    return ("".join(f"[rank0]: step {i} loss 0.5 some padding text here\n" for i in range(n)) + OOM).encode()


def _pack(tmp_path: Path, kind: str, members: dict[str, bytes]) -> Path:
    import io
    import tarfile
    import zipfile

    if kind == "zip":
        dest = tmp_path / "job.zip"
        with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                zf.writestr(name, data)
        return dest
    dest = tmp_path / "job.tar.gz"
    with tarfile.open(dest, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return dest


def _numbered_text(res) -> dict[int, str]:  # type: ignore[no-untyped-def]
    """The non-empty lines of ``res`` by line number, each checked to say its own number."""
    got = {first + k: text for first, lines in res.parts() for k, text in enumerate(lines) if text}
    assert all(text.split(".")[0] == f"line {k}" for k, text in got.items())
    return got


@pytest.mark.parametrize("kind", ["tar.gz", "zip", "stdin"])
def test_the_oom_at_the_end_of_a_capped_member_or_stdin_is_diagnosed(tmp_path, monkeypatch, capsys, kind):
    """A member or standard input past the size cap keeps its head and tail as a file does: the CUDA OOM
    that a 3 MB log ends in is found under a 1 MiB cap, at its line number in the log, and --exit-code
    fails the job."""
    import subprocess
    import sys

    data = _oom_log()
    n = data.count(b"\n")
    assert len(data) > 2 * MIB
    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "1")
    if kind == "stdin":
        p = subprocess.run(
            [sys.executable, "-m", "correlator", "diagnose", "-", "-f", "json", "--exit-code"],
            input=data,
            capture_output=True,
            check=False,
            timeout=300,
        )
        code, out, err = p.returncode, p.stdout.decode(), p.stderr.decode()
        where = "stdin"
    else:
        arc = _pack(tmp_path, kind, {"rank0.log": data})
        code, out, err = run_cli(["diagnose", arc, "-f", "json", "--exit-code"], monkeypatch, capsys)
        where = f"{arc.name}!/rank0.log"
    got = json.loads(out)
    assert got["failure_kind"] == "cuda_oom" and got["initiating_ranks"] == [1], (got, err)
    assert [(e["path"], e["line"]) for e in got["initiating_events"]] == [(where, n)]
    assert code not in (0, 2, 3), err  # the failure's exit status, not "clean"
    assert f"{where}: {len(data)} bytes, past the file size cap (1 MiB" in err
    assert "lines between them (from line" in err and "left out" in err
    # once: the reader finds the copy past the cap too, and its warning (the copy's sizes) is left out
    assert err.count("past the file size cap") == 1, err


def test_a_capped_member_is_copied_bounded_with_its_line_numbers(tmp_path, monkeypatch):
    """The unpacked copy of a member past the cap reads, line for line, as the member itself would (the
    same tail at the same line numbers, every line counted) and takes at most twice the cap on disk; a
    member whose middle holds more lines than that allows says by how much later line numbers are lower."""
    from correlator import archive

    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "1")
    data = numbered(60_000)
    empties = b"line 1\n" + b"\n" * (3 * MIB) + b"last line\n"  # 3 Mi lines between its first and last
    arc = _pack(tmp_path, "tar.gz", {"big.log": data, "empties.log": empties})
    plain = read_lines(write_plain(tmp_path, data), "big.log")
    notes: list[str] = []
    with archive.opened(arc, notes) as root:
        copy = root / "job.tar.gz!" / "big.log"
        assert copy.stat().st_size < 2 * MIB
        res = read_lines(copy, "big.log")
        # the empty lines that stand for those left out may be read next to head or tail: the others are
        # the lines the member itself gives, at the same numbers
        assert _numbered_text(res) == _numbered_text(plain)
        assert max(_numbered_text(res)) == 60_000 and res.physical_lines == 60_000
        other = root / "job.tar.gz!" / "empties.log"
        assert other.stat().st_size <= 2 * MIB + 100
        assert read_lines(other, "empties.log").lines.to_list()[-1] == "last line"
    assert any(n.startswith(f"job.tar.gz!/big.log: {len(data)} bytes, past the file size cap") for n in notes)
    lower = [n for n in notes if n.startswith("job.tar.gz!/empties.log:")]
    import re

    left = re.search(r"the (\d+) lines between them", lower[0]) if lower else None
    assert left and int(left[1]) > MIB, notes  # more lines left out than empty lines written
    assert f"are {int(left[1]) - MIB} lower than in the input" in lower[0], notes


def test_a_flood_of_newlines_past_the_line_cap_keeps_its_ends(tmp_path, monkeypatch):
    # 100,000 empty lines then the failure: the line cap's head (250 empty lines) and tail (749 empty lines and
    # the failure at line 100,001), the lines between counted, each one byte (its newline)
    monkeypatch.setenv("RANKSCOPE_MAX_LINES", "1000")
    write(tmp_path / "nl.log", b"\n" * 100_000 + b"[rank0]: RuntimeError: boom\n")
    res = read_lines(tmp_path / "nl.log", "nl.log")
    (h, head), (t, tail) = [(first, list(lines)) for first, lines in res.parts()]
    assert (h, len(head), t, len(tail)) == (1, 250, 100_001 - 749, 750)
    assert head == [""] * 250 and tail == [""] * 749 + ["[rank0]: RuntimeError: boom"]
    assert (res.physical_lines, res.skipped_lines) == (100_001, 99_001)
    assert {"path": "nl.log", "bytes": 99_001, "lines": 99_001, "reason": "line cap"} in res.skipped
