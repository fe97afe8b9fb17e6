"""Hostile input (issue 16): each defect found is pinned here on a minimal input written by the test.

Every check asserts the documented outcome (exit code, warning naming the file and the reason, the
``skipped`` entry, the line balance ``lines_read == sum(line_count) + skipped_lines``), with expected
line counts computed here from the bytes written.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import zlib
from pathlib import Path

import polars as pl
import pytest

from correlator.discover import discover, input_size
from correlator.ingest import ingest
from correlator.read import read_lines
from tests.conftest import run_cli
from tests.hostile_inputs import BASE_LINES, base, nlines, write


def balanced(root: Path, expected: int | None = None):  # type: ignore[no-untyped-def]
    res = ingest(root)
    covered = int(res.table["line_count"].sum() or 0)
    assert res.lines_read == covered + res.skipped_lines, (
        res.lines_read,
        covered,
        res.skipped_lines,
        res.warnings,
    )
    assert res.skipped_lines == sum(int(e["lines"] or 0) for e in res.skipped), res.skipped
    if expected is not None:
        assert res.lines_read == expected, (res.lines_read, expected, res.warnings)
    return res


def warned(res, name: str, *words: str) -> str:  # type: ignore[no-untyped-def]
    ws = [w for w in res.warnings if name in w and all(x in w for x in words)]
    assert ws, (name, words, res.warnings)
    return ws[0]


def cli_ok(args: list[object], mp, cap, want: int = 0) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    code, out, err = run_cli(args, mp, cap)
    assert "Traceback (most recent call last)" not in err and "internal error" not in err, err
    assert code == want, (code, out[-1500:], err[-1500:])
    return out, err


def same_verdict(root: Path, mp, cap) -> dict:  # type: ignore[no-untyped-def]
    out, _ = cli_ok(["diagnose", root, "-f", "json"], mp, cap)
    d = json.loads(out)
    assert d["initiating_ranks"] == [1] and d["collateral_ranks"] == [0], d
    return d


# ---------------------------------------------------------------------------------------- compression


def test_gzip_damaged_mid_stream_keeps_the_prefix(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    text = "".join(f"[rank0]: step {i} loss=0.{i:04d}\n" for i in range(20000)).encode()
    gz = bytearray(gzip.compress(text))
    mid = len(gz) // 2
    gz[mid : mid + 32] = b"\x00" * 32
    write(root / "late.log.gz", bytes(gz))
    # independently: what zlib yields byte by byte before it raises
    d, got = zlib.decompressobj(16 + zlib.MAX_WBITS), []
    for i in range(len(gz)):
        try:
            got.append(d.decompress(bytes(gz[i : i + 1])))
        except zlib.error:
            break
    want = nlines(b"".join(got))
    res = balanced(root)
    n = res.lines_read - BASE_LINES
    assert 0.9 * want <= n <= want + 1, (n, want)
    warned(res, "late.log.gz", "damaged gzip")
    assert any(e["path"] == "late.log.gz" and "damaged" in str(e["reason"]) for e in res.skipped)
    same_verdict(root, monkeypatch, capsys)


@pytest.mark.parametrize("kind", ["gzip", "bz2", "xz"])
def test_decompression_bomb_stops_with_a_message_rest_diagnosed(kind, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    payload = b"A" * (48 << 20)
    comp = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind](payload)
    write(root / f"bomb.log.{ {'gzip': 'gz', 'bz2': 'bz2', 'xz': 'xz'}[kind] }", comp)
    res = balanced(root)
    w = warned(res, "bomb.log", "stopped reading")
    assert "compression ratio above 500:1" in w or "size cap" in w, w
    entry = next(e for e in res.skipped if str(e["path"]).startswith("bomb.log"))
    assert entry["lines"] is None and entry["bytes"] is not None
    _, err = cli_ok(["diagnose", root], monkeypatch, capsys)
    assert "bomb.log" in err and "stopped reading" in " ".join(err.split())
    same_verdict(root, monkeypatch, capsys)


def test_gzip_of_newlines_stops_at_the_caps(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANKSCOPE_MAX_LINES", "50000")
    root = tmp_path / "logs"
    base(root)
    write(root / "empty-lines.log.gz", gzip.compress(b"\n" * (20 << 20), compresslevel=9))
    res = balanced(root)
    warned(res, "empty-lines.log.gz", "compression ratio")
    warned(res, "empty-lines.log.gz", "line cap")
    cap_entry = next(e for e in res.skipped if e["reason"] == "line cap")
    assert cap_entry["lines"] == res.lines_read - BASE_LINES - 50000
    same_verdict(root, monkeypatch, capsys)


def test_raised_size_cap_reads_more(tmp_path, monkeypatch):
    root = tmp_path / "logs"
    base(root)
    data = b"".join(f"[rank0]: line {i}\n".encode() for i in range(200_000))
    write(root / "big.rank0.log", data)
    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "1")
    small = balanced(root)
    warned(small, "big.rank0.log", "file size cap")
    monkeypatch.setenv("RANKSCOPE_MAX_FILE_MB", "16")
    balanced(root, BASE_LINES + nlines(data))


def test_zstd_and_compressed_data_without_suffix(tmp_path):
    import pyarrow as pa

    root = tmp_path / "logs"
    base(root)
    data = b"".join(f"[rank0]: z {i}\n".encode() for i in range(40))
    buf = pa.BufferOutputStream()
    with pa.CompressedOutputStream(buf, "zstd") as f:
        f.write(data)
    write(root / "a.rank0.log.zst", buf.getvalue().to_pybytes())
    write(root / "rotated.rank0.log.1", gzip.compress(data))
    write(root / "rotated.rank0.log.2", bz2.compress(data))
    write(root / "rotated.rank0.log.3", lzma.compress(data))
    res = balanced(root, BASE_LINES + 4 * 40)
    warned(res, "rotated.rank0.log.1", "gzip-compressed data without")
    warned(res, "rotated.rank0.log.3", "xz-compressed")
    assert res.table.filter(pl.col("path") == "a.rank0.log.zst")["raw"].to_list()[-1] == "[rank0]: z 39"


# -------------------------------------------------------------------------------------------- shapes


def test_long_line_kept_truncated_marked_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKSCOPE_MAX_LINE_KB", "4")
    root = tmp_path / "logs"
    base(root)
    n = write(root / "wide.rank0.log", "[rank0]: " + "y" * 10_000 + "\n[rank0]: short\n")
    res = balanced(root, BASE_LINES + n)
    raw = res.table.filter(pl.col("path") == "wide.rank0.log").sort("line")["raw"].to_list()
    assert raw[0].startswith("[rank0]: yyy") and raw[0].endswith("…[truncated: line of 10009 bytes]")
    assert raw[1] == "[rank0]: short"
    warned(res, "wide.rank0.log", "1 line(s) longer than 4096 bytes")
    assert any(e["reason"] == "line truncated" and e["bytes"] == 10009 - 4096 for e in res.skipped)


def test_utf16_with_and_without_bom(tmp_path):
    root = tmp_path / "logs"
    base(root)
    write(root / "bom.rank1.log", "[rank1]: with bom\n[rank1]: ü\n".encode("utf-16"))
    write(root / "le.rank1.log", "[rank1]: little endian\n".encode("utf-16-le"))
    write(root / "be.rank1.log", "[rank1]: big endian\n".encode("utf-16-be"))
    res = balanced(root, BASE_LINES + 4)
    raw = set(res.table["raw"].to_list())
    assert {"[rank1]: with bom", "[rank1]: ü", "[rank1]: little endian", "[rank1]: big endian"} <= raw


def test_nul_head_sparse_hole_and_binary_region(tmp_path):
    root = tmp_path / "logs"
    base(root)
    n = write(root / "head.rank0.log", b"\x00" * 100_000 + b"[rank0]: after a NUL head\n")
    p = root / "sparse.rank0.log"
    with open(p, "wb") as f:
        f.write(b"[rank0]: before the hole\n")
        f.seek(16 << 20)
        f.write(b"[rank0]: after the hole\n")
    n += nlines(p.read_bytes())
    text = b"".join(f"[rank0]: text {i}\n".encode() for i in range(20000))
    blob = bytes(range(1, 9)) * 20000 + b"\n"
    n += write(root / "mixed.rank0.log", text + blob + text)
    res = balanced(root, BASE_LINES + n)
    raw = res.table["raw"].to_list()
    assert (
        "[rank0]: after a NUL head" in raw
        and "[rank0]: after the hole" in raw
        and "[rank0]: before the hole" in raw
    )
    mixed = res.table.filter(pl.col("path") == "mixed.rank0.log")
    assert mixed.height >= 0.9 * 2 * 20000  # the text around the blob is kept (judged in ~64 KiB regions)
    assert any(e["path"] == "mixed.rank0.log" and e["reason"] == "binary content" for e in res.skipped)


def test_a_last_line_of_only_nuls_without_newline_is_still_a_line(tmp_path):
    """Found by ``test_hostile_suite.test_every_line_is_accounted_for``: ``text\\n`` + 32 NULs (no newline
    after them) is 2 physical lines; dropping the NULs left ``text\\n``, read as 1."""
    root = tmp_path / "logs"
    base(root)
    data = b"[rank0]: step 1 loss=0.5\n" + b"\x00" * 32
    assert nlines(data) == 2
    n = write(root / "tail.rank0.log", data)
    res = balanced(root, BASE_LINES + n)
    rows = res.table.filter(pl.col("path") == "tail.rank0.log").sort("line")
    assert rows["raw"].to_list() == ["[rank0]: step 1 loss=0.5", ""]
    warned(res, "tail.rank0.log", "NUL bytes dropped")
    warned(res, "tail.rank0.log", "no newline")


def test_cr_only_line_endings(tmp_path):
    root = tmp_path / "logs"
    base(root)
    write(root / "mac.rank1.log", b"[rank1]: one\r[rank1]: two\r[rank1]: three\r")
    res = balanced(root)
    assert res.table.filter(pl.col("path") == "mac.rank1.log")["raw"].to_list() == [
        "[rank1]: one",
        "[rank1]: two",
        "[rank1]: three",
    ]
    warned(res, "mac.rank1.log", "CR-only")


def test_file_that_shrinks_grows_or_vanishes(tmp_path, monkeypatch):
    import correlator.read as rd

    p = tmp_path / "rank0.log"
    data = b"[rank0]: a\n[rank0]: b\n"
    p.write_bytes(data)
    real = os.fstat

    def bigger(fd):  # type: ignore[no-untyped-def]
        st = real(fd)
        return os.stat_result((st.st_mode, *list(st)[1:6], st.st_size + 100, *list(st)[7:]))

    monkeypatch.setattr(rd.os, "fstat", bigger)
    r = read_lines(p, "rank0.log")
    assert r.lines.to_list() == ["[rank0]: a", "[rank0]: b"] and any("shrank" in w for w in r.warnings)

    def smaller(fd):  # type: ignore[no-untyped-def]
        st = real(fd)
        return os.stat_result((st.st_mode, *list(st)[1:6], 11, *list(st)[7:]))

    monkeypatch.setattr(rd.os, "fstat", smaller)
    r = read_lines(p, "rank0.log")
    assert r.lines.to_list() == ["[rank0]: a"] and any("grew while read" in w for w in r.warnings)
    monkeypatch.setattr(rd.os, "fstat", real)
    r = read_lines(tmp_path / "gone.log", "gone.log")
    assert r.lines.len() == 0 and r.skipped[0]["reason"] == "vanished before it was read"


# --------------------------------------------------------------------------------------------- trees


def test_symlink_fanout_walks_each_real_path_once(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    for name in ("a", "b", "c", "d"):
        os.symlink(".", root / name)
    os.symlink("rank0.log", root / "again.log")
    sources, warnings = discover(root)
    assert sorted(s.rel for s in sources) == ["rank0.log", "rank1.log"], [s.rel for s in sources]
    assert input_size(root) == (root / "rank0.log").stat().st_size + (root / "rank1.log").stat().st_size
    assert any("again.log" in w and "same file" in w for w in warnings)
    balanced(root, BASE_LINES)
    same_verdict(root, monkeypatch, capsys)


def test_symlinks_out_of_dir_not_followed_unless_asked(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "rank1.log").write_text("[rank1]: outside\n")
    os.symlink(tmp_path / "elsewhere" / "rank1.log", root / "out.rank1.log")
    os.symlink("/proc/self/environ", root / "environ.log")
    os.symlink("/dev/zero", root / "zero.log")
    res = balanced(root, BASE_LINES)
    for name in ("out.rank1.log", "environ.log", "zero.log"):
        warned(res, name, "outside the input folder")
        assert any(e["path"] == name and e["reason"] == "symlink outside the input" for e in res.skipped)
    monkeypatch.setenv("SECRET_MARKER_FOR_TEST", "do-not-print-me")
    out, _ = cli_ok(["events", root, "-n", "0"], monkeypatch, capsys)
    assert "do-not-print-me" not in out and "outside" not in out
    out, err = cli_ok(["events", root, "-n", "0", "--follow-symlinks"], monkeypatch, capsys)
    assert "[rank1]: outside" in out or "outside" in out
    assert "zero.log" in " ".join(err.split()) and "character device" in " ".join(err.split())


def test_fifo_skipped_with_a_reason_in_the_json(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    os.mkfifo(root / "pipe.rank1.log")
    d = same_verdict(root, monkeypatch, capsys)
    assert {"path": "pipe.rank1.log", "bytes": None, "lines": 0, "reason": "not a regular file"} in d[
        "skipped"
    ]
    r = read_lines(root / "pipe.rank1.log", "pipe.rank1.log")  # opened non-blocking, never hangs
    assert r.skipped[0]["reason"] == "not a regular file" and "FIFO" in r.warnings[0]


# ------------------------------------------------------------------------------------------- values


def test_huge_ranks_and_world_sizes(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    n = write(root / "rank99999999999.log", "[rank1]: rank past int32 in the file name\n")
    n += write(
        root / "stray.log",
        "[rank99999]: one stray line\n"
        "node-a:1:2 [0] NCCL INFO comm 0x5555 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n",
    )
    res = balanced(root, BASE_LINES + n)
    assert res.table["rank"].max() <= 1
    warned(res, "", "rank 99999", "stated world size 2")
    same_verdict(root, monkeypatch, capsys)
    write(
        root / "big.log",
        "node-b:1:2 [0] NCCL INFO comm 0x6666 rank 0 nranks 100000 cudaDev 0 busId 1000 - Init COMPLETE\n"
        "node-b:1:2 [0] NCCL INFO comm 0x7777 rank 0 nranks 10000000 cudaDev 0 busId 1000 - Init COMPLETE\n",
    )
    res = balanced(root)
    warned(res, "", "world size of 0 or above 262144")
    out, _ = cli_ok(["diagnose", root, "-f", "json"], monkeypatch, capsys)
    assert json.loads(out)["world_size"] == 100000  # the plausible one stays, the 10^7 one is dropped


def test_out_of_range_values_become_nulls(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    n = write(
        root / "odd.rank0.log",
        "1970-01-01 00:00:00,000 INFO rank=0 epoch\n2100-12-31 23:59:59,999 INFO rank=0 future\n"
        "36812-02-20 00:00:00,000 INFO rank=0 far future\n"
        "[rank0]:[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=99999999999999999999999, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=99999999999999999999) ran for 99999999999999999999 milliseconds before timing out.\n",
    )
    for i, stamp in enumerate(("1099511627776000", "-5", "99999999999999999999999")):
        n += write(
            root / "run" / "attempt_0" / str(i) / "error.json",
            json.dumps(
                {
                    "message": {
                        "message": "RuntimeError: x",
                        "extraInfo": {"py_callstack": "", "timestamp": stamp},
                    }
                }
            ),
        )
    res = balanced(root, BASE_LINES + n)
    ts = res.table["ts"].drop_nulls()
    assert ts.len() == 0 or ts.dt.year().max() <= 2100
    for fmt in ("table", "json", "csv"):
        cli_ok(["events", root, "-n", "0", "-f", fmt], monkeypatch, capsys)
    out = tmp_path / "t.parquet"
    cli_ok(["timeline", root, "-o", out, "-q"], monkeypatch, capsys)
    cli_ok(["events", root, "-n", str(10**30)], monkeypatch, capsys)


# ------------------------------------------------------------------------------- inputs that claim to be ours


def test_parquet_given_to_diagnose_is_validated(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    good = tmp_path / "t.parquet"
    cli_ok(["timeline", root, "-o", good, "-q"], monkeypatch, capsys)
    pl.DataFrame({"a": [1]}).write_parquet(tmp_path / "cols.parquet")
    t = pl.read_parquet(good)
    t.with_columns(pl.col("rank").cast(pl.String)).write_parquet(tmp_path / "types.parquet")
    data = good.read_bytes()
    (tmp_path / "trunc.parquet").write_bytes(data[: len(data) // 2])
    flipped = bytearray(data)
    for i in range(len(flipped) // 3, len(flipped) // 3 + 64):
        flipped[i] ^= 0xFF
    (tmp_path / "pages.parquet").write_bytes(bytes(flipped))
    for name, words in (
        ("cols", "missing column"),
        ("types", "rank is String"),
        ("trunc", "parquet"),
        ("pages", "parquet"),
    ):
        _, err = cli_ok(["diagnose", tmp_path / f"{name}.parquet"], monkeypatch, capsys, want=2)
        assert words in " ".join(err.split()), (name, err)


def test_rust_panic_is_exit_2_with_a_message(tmp_path, monkeypatch, capsys):
    import importlib

    ingest_mod = importlib.import_module(
        "correlator.ingest"
    )  # the module (``correlator.ingest`` is also a function)
    root = tmp_path / "logs"
    base(root)

    def boom(*_a, **_k):  # type: ignore[no-untyped-def]
        raise pl.exceptions.PanicException("index out of bounds")

    # `rankscope diagnose` ingests through correlator.batch.ingest_batch, which calls correlator.ingest.ingest
    monkeypatch.setattr(ingest_mod, "ingest", boom)
    _, err = cli_ok(["diagnose", root], monkeypatch, capsys, want=2)
    assert "index out of bounds" in err and "error:" in err


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ('{"initiating_ranks": "1", "collateral_ranks": []}', "initiating_ranks"),
        ('{"initiating_ranks": [1], "collateral_ranks": [true]}', "collateral_ranks"),
        ('{"initiating_ranks": [1], "collateral_ranks": [0], "failure_kind": 7}', "failure_kind"),
        ('{"initiating_ranks": [1]}', "collateral_ranks"),
        ("[" * 10_000 + "]" * 10_000, "nested too deeply"),
        ('{"initiating_ranks": [99999999999999999999], "collateral_ranks": []}', "initiating_ranks"),
    ],
)
def test_eval_malformed_expected_json_names_the_field(doc, field, tmp_path, monkeypatch, capsys):
    case = tmp_path / "cases" / "c1"
    base(case / "logs")
    (case / "expected.json").write_text(doc)
    _, err = cli_ok(["eval", tmp_path / "cases"], monkeypatch, capsys, want=2)
    assert field in err, err


def test_signature_files_that_are_not_files(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    os.mkfifo(tmp_path / "sigs.toml")
    for p in (Path("/dev/zero"), tmp_path / "sigs.toml"):
        _, err = cli_ok(["diagnose", root, "--signatures", p], monkeypatch, capsys, want=2)
        assert "not a regular file" in err
    (tmp_path / "deep.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    cli_ok(["diagnose", root, "--signatures", tmp_path / "deep.toml"], monkeypatch, capsys, want=2)


# ------------------------------------------------------------------------------------------- outputs


@pytest.mark.parametrize("cmd", ["timeline", "graph", "plot"])
def test_output_inside_or_equal_to_the_input_is_refused(cmd, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    ext = {"timeline": "parquet", "graph": "json", "plot": "html"}[cmd]
    for dst in (root / f"x.{ext}", root / "sub" / f"x.{ext}"):
        _, err = cli_ok([cmd, root, "-o", dst], monkeypatch, capsys, want=2)
        assert "inside the input folder" in " ".join(err.split()), err
    _, err = cli_ok(["timeline", root / "rank0.log", "-o", root / "rank0.log"], monkeypatch, capsys, want=2)
    assert "the input itself" in " ".join(err.split())
    assert sorted(p.name for p in root.iterdir()) == ["rank0.log", "rank1.log"]


def test_full_disk_leaves_no_partial_file(tmp_path, monkeypatch, capsys):
    import errno

    root = tmp_path / "logs"
    base(root)
    out = tmp_path / "out" / "t.parquet"
    out.parent.mkdir()

    def full(self, path, *a, **k):  # type: ignore[no-untyped-def]
        Path(path).write_bytes(b"PAR1 partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    _, err = cli_ok(["timeline", root, "-o", out], monkeypatch, capsys, want=2)
    assert "No space left" in err
    assert list(out.parent.iterdir()) == []


def test_terminal_escapes_never_reach_the_terminal(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    write(root / "\x1b]0;owned\x07title.log", "[rank1]: \x1b]52;c;ZXZpbA==\x07 clipboard \x9b2J\n")
    write(root / "line\nbreak.log", "[rank1]: x\n")
    os.mkfifo(root / "\x1b[2Jfifo.log")
    for args in (["events", root, "-n", "0"], ["diagnose", root], ["events", root, "-f", "csv", "-n", "0"]):
        out, err = cli_ok(args, monkeypatch, capsys)
        for text in (out, err):
            assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, (args, text[:500])
        assert "line\nbreak" not in out + err


def test_skipped_list_in_timeline_summary_and_json(tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    base(root)
    n = write(root / "core.bin", bytes(range(256)) * 64)
    _, err = cli_ok(["timeline", root, "-o", tmp_path / "t.parquet"], monkeypatch, capsys)
    assert "skipped: core.bin: binary content" in " ".join(err.split())
    d = same_verdict(root, monkeypatch, capsys)
    assert d["skipped"] == [{"path": "core.bin", "bytes": 16384, "lines": n, "reason": "binary content"}]


@pytest.mark.parametrize("first", ["all.log", "rank3.log"])
def test_a_hard_link_is_read_once_under_the_name_that_gives_its_rank(tmp_path, first):
    # Two links to one file, ``all.log`` and ``rank3.log``: whichever the walk meets first, the file is read once,
    # as rank 3's (the link without a rank in its name is the one skipped)
    other = "rank3.log" if first == "all.log" else "all.log"
    write(tmp_path / first, b"step 1\nValueError: corrupt record\n")
    os.link(tmp_path / first, tmp_path / other)
    sources, warnings = discover(tmp_path)
    assert [(s.path.name, s.rank) for s in sources] == [("rank3.log", 3)]
    assert [w for w in warnings if "second link" in w] == [
        "all.log: skipped, same file as rank3.log (a second link; read once)"
    ]


def test_zstd_ratio_is_measured_on_the_bytes_read_not_the_file(tmp_path, monkeypatch):
    # A tiny zstd frame of 20 M newlines, then a 400 KB skippable frame (zstd format: magic 0x184D2A5?): against
    # the file's size (~400 KB) 20 MB is a ratio of ~50, under the cap; against the compressed bytes the codec
    # has read (64 KiB at a time) it is past it at once
    import struct

    import pyarrow as pa

    monkeypatch.setenv("RANKSCOPE_MAX_RATIO", "100")
    buf = pa.BufferOutputStream()
    with pa.CompressedOutputStream(buf, "zstd") as f:
        f.write(b"\n" * 20_000_000)
    skippable = struct.pack("<II", 0x184D2A50, 400_000) + b"\0" * 400_000
    write(tmp_path / "rank0.log.zst", buf.getvalue().to_pybytes() + skippable)
    res = read_lines(tmp_path / "rank0.log.zst", "rank0.log.zst")
    assert any("stopped reading, compression ratio above 100:1" in w for w in res.warnings), res.warnings
    assert res.physical_lines < 20_000_000 and res.physical_lines <= 100 * 64 * 1024 + 1024 * 1024


def test_truncated_zstd_keeps_what_decompresses_up_to_the_cut(tmp_path):
    # A zstd file cut at two thirds (a job killed while its log was compressed): what decompresses before the
    # cut is kept, to within one read of it (64 KiB); the reference is the same codec read 4 KiB at a time
    import pyarrow as pa

    data = b"".join(f"line {k} some text here to pad\n".encode() for k in range(1, 600_001))
    buf = pa.BufferOutputStream()
    with pa.CompressedOutputStream(buf, "zstd") as f:
        f.write(data)
    z = buf.getvalue().to_pybytes()
    write(tmp_path / "rank0.log.zst", z[: len(z) * 2 // 3])
    stream = pa.CompressedInputStream(pa.OSFile(str(tmp_path / "rank0.log.zst")), "zstd")
    ref = 0
    try:
        while piece := stream.read(4096):
            ref += len(piece)
    except OSError:
        pass
    res = read_lines(tmp_path / "rank0.log.zst", "rank0.log.zst")
    kept = "\n".join(res.line_list()).encode() + b"\n"
    assert data.startswith(kept[: len(kept) - 64]) and len(kept) > len(data) // 3
    assert len(kept) >= ref - 65536, (len(kept), ref)
    assert any("damaged zstd data" in w for w in res.warnings), res.warnings
