"""Property tests for the parsers and ingest (hypothesis; bounded so the suite stays fast).

1. Arbitrary text never raises through ``parsers.parse_lines`` or ``correlator.ingest.ingest`` and every
   physical line is accounted for.
2. A well-formed line with random field values gives those values back (c10d watchdog timeout, NCCL COLL,
   torchrun ``failed (exitcode …)``, NCCL init).
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(
    os.path.join(tempfile.gettempdir(), "rankscope-hypothesis")
)  # no .hypothesis/ in the repo

import parsers
from correlator.discover import classify
from correlator.ingest import ingest, plain_lines
from tests.conftest import DRAWN

#: Fragments real logs are made of, so random text reaches deep into the rules and prefix strippers.
FRAGMENTS = [
    "[rank0]:",
    "[rank13]:",
    "[default3]:",
    "[1,3]<stderr>:",
    " 3: ",
    "node-a: ",
    "[pod/w-1/main] ",
    "2024-11-29T22:58:55.104211337Z ",
    "[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:2901] ",
    "[E ProcessGroupNCCL.cpp:563] ",
    "W1129 23:08:36.614000 13396 torch/distributed/elastic/multiprocessing/api.py:1028] ",
    "[PG ID 0 PG GUID 0(default_pg) Rank 13] ",
    "[Rank 5] ",
    "node-a:15325:16199 [2] NCCL INFO ",
    "node-b:52011:52190 [5] misc/socket.cc:50 NCCL WARN ",
    "Traceback (most recent call last):",
    '  File "t.py", line 3, in f',
    "RuntimeError: boom",
    "torch.cuda.OutOfMemoryError: CUDA out of memory.",
    "Watchdog caught collective operation timeout: ",
    "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)",
    " ran for 600037 milliseconds",
    "failed (exitcode: -9) local_rank: 3 (pid: 812917) of binary: /usr/bin/python",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2024-11-29_23:08:36",
    "  host      : node-a.example.com",
    "  rank      : 3 (local_rank: 3)",
    "  exitcode  : -9 (pid: 812917)",
    "AllReduce: opCount 1f4 sendbuff 0x1 recvbuff 0x1 count 4 datatype 7 op 0 root 0 comm 0x5 [nranks=16]",
    "comm 0x562e rank 13 nranks 16 cudaDev 5 - Init COMPLETE",
    "\r",
    "\x1b[31m",
    "\x1b[0m",
    "\x00",
    "\ufffd",
    "\t",
    " ",
    "100%|##########| 10/10",
    "step=5 loss=1.0",
    "{",
    "}",
    '"message": ',
    "(",
    ")",
    "[",
    "]",
    ":",
    "é",
    "😀",
]


def _rule_examples() -> list[str]:
    """Every ``Rule.example`` / ``Prefix.example`` line of every parser module (real lines)."""
    from parsers.rules import defined

    rules, prefixes = defined()
    return sorted({x.example for x in (*rules, *prefixes) if x.example})


EXAMPLES = _rule_examples()
line_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(EXAMPLES), st.text(max_size=20)), max_size=8
).map("".join)
texts = st.lists(line_text, min_size=1, max_size=25).map("\n".join)


def _nlines(data: bytes) -> int:
    return 0 if not data else data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def test_every_rule_example_parses():
    """All example lines of all modules in one file (two rules of one module filling one field: a bug once)."""
    assert len(EXAMPLES) > 30
    src = classify(Path("combined.log"), Path("."))
    df = plain_lines([(0, src, pl.Series("raw", EXAMPLES, dtype=pl.String))]).drop("__src")
    out = parsers.parse_lines(df)
    assert int(out["line_count"].sum()) == len(EXAMPLES)


@DRAWN
@given(lines=st.lists(line_text.map(lambda s: s.replace("\n", " ")), min_size=1, max_size=30))
def test_parse_lines_never_raises_and_conserves_lines(lines):
    src = classify(Path("combined.log"), Path("."))
    df = plain_lines([(0, src, pl.Series("raw", lines, dtype=pl.String))]).drop("__src")
    out = parsers.parse_lines(df)
    assert int(out["line_count"].sum()) == len(lines)
    assert out["kind"].null_count() == 0


@DRAWN
@given(
    text=texts,
    name=st.sampled_from(
        [
            "combined.log",
            "rank3.log",
            "node-a.rank1.err",
            "nccl.node-a.4242.log",
            "launcher.log",
            "error.json",
        ]
    ),
    newline=st.sampled_from(["\n", "\r\n"]),
    final=st.booleans(),
)
def test_ingest_arbitrary_text_accounts_for_every_line(text, name, newline, final):
    data = (text.replace("\n", newline) + (newline if final else "")).encode("utf-8", errors="surrogatepass")
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / name).write_bytes(data)
        (Path(d) / "anchor.txt").write_text("[rank0]: one plain line\n")  # so that ingest always has a line
        res = ingest(d)
    covered = int(res.table["line_count"].sum() or 0)
    assert res.lines_read == covered + res.skipped_lines
    assert res.lines_read == _nlines(data) + 1
    assert res.skipped_lines in (0, _nlines(data))  # a file is read whole or skipped whole (binary)


@DRAWN
@given(data=st.binary(max_size=3000))
@example(data=b"\xef\xbb\xbf")  # a UTF-8 BOM alone: one (empty) line (drawn once, 2026-12-07: was none)
def test_ingest_arbitrary_bytes_accounts_for_every_line(data):
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "rank0.log").write_bytes(data)
        (Path(d) / "rank1.log.gz").write_bytes(data)  # not gzip (or a damaged one): still accounted for
        (Path(d) / "anchor.txt").write_text("[rank0]: one plain line\n")
        res = ingest(d)
    covered = int(res.table["line_count"].sum() or 0)
    assert res.lines_read == covered + res.skipped_lines
    # Compressed data is recognised by its magic bytes, with or without a suffix (gzip, bz2, xz, zstd), and a
    # file whose lines end in bare CRs is split at them (tests/test_hostile.py pins both): then only the
    # accounting above holds, not the newline count.
    if not data.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")) and b"\r" not in data:
        assert res.lines_read == 2 * _nlines(data) + 1


def _one(line: str, name: str = "combined.log") -> dict:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / name).write_text(line + "\n")
        t = ingest(d).table
    assert t.height == 1, t
    return t.row(0, named=True)


ops = st.sampled_from(
    ["ALLREDUCE", "BROADCAST", "ALLGATHER", "REDUCE_SCATTER", "_ALLGATHER_BASE", "BARRIER", "SEND", "RECV"]
)
u31 = st.integers(0, 2**31 - 1)
u62 = st.integers(0, 2**62)


@DRAWN
@given(
    r=st.integers(0, 4095),
    s=u62,
    op=ops,
    n=u62,
    t=u31,
    e=u31,
    mm=st.integers(1, 12),
    dd=st.integers(1, 28),
    hms=st.tuples(st.integers(0, 23), st.integers(0, 59), st.integers(0, 59)),
    frac=st.integers(0, 10**9 - 1),
    src_line=st.integers(1, 99999),
)
def test_c10d_watchdog_timeout_round_trip(r, s, op, n, t, e, mm, dd, hms, frac, src_line):
    line = (
        f"[rank{r}]:[E{mm}{dd:02d} {hms[0]:02d}:{hms[1]:02d}:{hms[2]:02d}.{frac:09d} ProcessGroupNCCL.cpp:{src_line}] "
        f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={s}, OpType={op}, NumelIn={n}, "
        f"NumelOut={n}, Timeout(ms)={t}) ran for {e} milliseconds before timing out."
    )
    row = _one(line)
    assert row["kind"] == "watchdog_timeout", row
    assert (row["rank"], row["seq"], row["op"], row["numel"], row["timeout_ms"], row["elapsed_ms"]) == (
        r,
        s,
        op,
        n,
        t,
        e,
    )
    assert row["ts"] is not None and (row["ts"].month, row["ts"].day, row["ts"].second) == (mm, dd, hms[2])


nccl_ops = st.sampled_from(
    [
        ("AllReduce", "ALLREDUCE"),
        ("Broadcast", "BROADCAST"),
        ("AllGather", "ALLGATHER"),
        ("ReduceScatter", "REDUCE_SCATTER"),
        ("Reduce", "REDUCE"),
    ]
)


@DRAWN
@given(
    seq=u62,
    op=nccl_ops,
    count=u62,
    nranks=st.integers(1, 65536),
    pid=st.integers(100, 4_000_000),
    dev=st.integers(0, 15),
)
def test_nccl_coll_opcount_hex_round_trip(seq, op, count, nranks, pid, dev):
    line = (
        f"node-a:{pid}:{pid} [{dev}] NCCL INFO {op[0]}: opCount {seq:x} sendbuff 0x7f3b52000000 recvbuff "
        f"0x7f3b52000000 count {count} datatype 7 op 0 root 0 comm 0x55d0c3a4e2b0 [nranks={nranks}] stream 0x55d0c2f1a9e0"
    )
    row = _one(line)
    assert row["kind"] == "nccl_coll", row
    assert (row["seq"], row["numel"], row["world_size"], row["pid"], row["host"]) == (
        seq,
        count,
        nranks,
        pid,
        "node-a",
    )
    assert row["op"] == op[1], row["op"]


@DRAWN
@given(
    code=st.integers(-64, 255),
    lr=st.integers(0, 1023),
    pid=st.integers(1, 4_000_000),
    agent=st.integers(1, 4_000_000),
    old=st.booleans(),
)
def test_torchrun_failed_exitcode_round_trip(code, lr, pid, agent, old):
    msg = f"failed (exitcode: {code}) local_rank: {lr} (pid: {pid}) of binary: /opt/venv/bin/python3"
    line = (
        f"ERROR:torch.distributed.elastic.multiprocessing.api:{msg}"
        if old
        else f"E1130 00:10:46.579000 {agent} torch/distributed/elastic/multiprocessing/api.py:1002] {msg}"
    )
    row = _one(line, "launcher.log")
    assert row["kind"] == "worker_failed", row
    assert (row["exit_code"], row["pid"], row["local_rank"]) == (code, pid, lr), row


@DRAWN
@given(
    rank=st.integers(0, 8191),
    extra=st.integers(1, 8192),
    dev=st.integers(0, 15),
    pid=st.integers(100, 4_000_000),
    phase=st.sampled_from(["START", "COMPLETE"]),
    comm_id=st.integers(0, 2**64 - 1),
)
def test_nccl_init_world_size_round_trip(rank, extra, dev, pid, phase, comm_id):
    world = rank + extra
    line = (
        f"node-b:{pid}:{pid + 55} [{dev}] NCCL INFO comm 0x562e11f03a90 rank {rank} nranks {world} cudaDev {dev} "
        f"nvmlDev {dev} busId 9c000 commId 0x{comm_id:x} - Init {phase}"
    )
    row = _one(line)
    assert row["kind"] == "nccl_init", row
    assert (row["world_size"], row["rank"], row["pid"], row["host"]) == (world, rank, pid, "node-b"), row


_two = st.integers(0, 99).map(lambda v: f"{v:02d}")
#: Python logging's default stamp (``%(asctime)s``), any valid time ...
_asctime = st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2099, 12, 31)).map(
    lambda t: t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"
)
#: ... and stamps of every shape around it (fields out of range, other fractions, separators, trailing text).
_stamp = _asctime | st.tuples(
    st.integers(1900, 2100).map(str) | st.integers(0, 99999).map(str),
    st.integers(0, 14).map(lambda v: f"{v:02d}") | st.integers(1, 9).map(str),
    st.integers(0, 33).map(lambda v: f"{v:02d}"),
    st.sampled_from([" ", "T", "  "]),
    st.integers(0, 23).map(lambda v: f"{v:02d}") | _two,
    st.integers(0, 59).map(lambda v: f"{v:02d}") | _two,
    st.integers(0, 59).map(lambda v: f"{v:02d}") | _two,
    st.sampled_from(["", ",", "."]),
    st.text("0123456789", min_size=3, max_size=3) | st.text("0123456789", max_size=10),
    st.sampled_from(["", "", " ", "Z", "x", "+00:00"]),
).map(lambda t: f"{t[0]}-{t[1]}-{t[2]}{t[3]}{t[4]}:{t[5]}:{t[6]}{t[7]}{t[8]}{t[9]}")


@DRAWN
@given(st.lists(_stamp | st.none(), min_size=1, max_size=30))
def test_python_stamps_read_as_the_general_format_reads_them(stamps: list[str | None]) -> None:
    """``parsers.timestamps`` reads Python logging stamps with a fixed shape first (milliseconds) and the
    general ``%.f`` format for the rest: each value is the general format's, computed here on every stamp. A
    stamp with a zone (``Z``, ``+00:00``) the general format does not read is exact: read with its offset."""
    from parsers.timestamps import _py_stamps

    df = pl.DataFrame({"pyts": stamps}, schema={"pyts": pl.String})
    naive, exact = _py_stamps(df)
    got = df.with_columns(naive.alias("t"))["t"]
    zoned = df.with_columns(exact.alias("t"))["t"]
    # a value read exactly only where the stamp ends in a zone, that stamp without the zone read as UTC
    bare = (
        df["pyts"].str.replace(r"(Z|[+-][0-9]{2}:?[0-9]{2})$", "").str.replace(",", ".").str.replace("T", " ")
    )
    ends_zoned = df["pyts"].str.contains(r"(Z|\+00:00)$").fill_null(False)
    want_zoned = pl.Series(
        [
            v if z else None
            for v, z in zip(
                bare.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us").dt.epoch("us"),
                ends_zoned,
                strict=True,
            )
        ],
        dtype=pl.Int64,
    )
    assert zoned.dt.epoch("us").to_list() == want_zoned.to_list()
    want = (  # as build_ts read every stamp before
        df["pyts"]
        .str.replace(",", ".")
        .str.replace("T", " ")
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    )
    # compared as microseconds: a year-0 stamp ("0-01-01 …") has no Python datetime
    assert got.dt.epoch("us").to_list() == want.dt.epoch("us").to_list()


@DRAWN
@given(
    lines=st.lists(
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126) | st.just("\t"), max_size=120),
        min_size=1,
        max_size=40,
    ),
    final=st.booleans(),
)
def test_a_large_clean_file_reads_as_its_lines(lines: list[str], final: bool) -> None:
    """A clean file (ASCII, tab and newline its only control bytes) larger than the pieces split in Python
    (``read._SMALL_TEXT``) is read by polars' CSV reader (``read._text_lines``; from ``read._CSV_MIN_CHARS``
    characters, here set lower): its lines are what ``str.split`` gives, less the empty piece after a final
    newline, blank and whitespace-only lines kept."""
    from correlator import read

    body = "\n".join(lines)
    text = "\n".join([body] * (read._SMALL_TEXT // (len(body) + 1) + 2)) + ("\n" if final else "")
    assert len(text) > read._SMALL_TEXT
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        mp.setattr(read, "_CSV_MIN_CHARS", read._SMALL_TEXT)
        p = Path(d) / "rank0.log"
        p.write_text(text)
        got = read.read_lines(p, "rank0.log")
    want = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    assert got.line_list() == want
    assert got.skipped_lines == 0


@DRAWN
@given(
    lines=st.lists(
        st.lists(
            st.sampled_from(
                [
                    "a",
                    " ",
                    "\t",
                    "é",
                    "█",
                    "\ufffd",
                    "\x1b[31m",
                    "\x00",
                    "\x07",
                    "\x85",
                    "#",
                    '"',
                ]
            ),
            max_size=30,
        ).map("".join),
        min_size=1,
        max_size=30,
    ),
    bad=st.booleans(),
    odd=st.sampled_from(["", "", "x\ry", "\x1f"]),
    end=st.sampled_from([b"", b"\n", b"\n\x00\x00", b"\r", b"\r\n", b"\r\r\n"]),
)
@example(lines=["a", "b"], bad=False, odd="", end=b"\n\x00\x00")  # a last line of NULs stays, empty
def test_a_large_file_reads_as_the_split_of_its_text(
    lines: list[str], bad: bool, odd: str, end: bytes
) -> None:
    """A large file (UTF-8, control bytes, ANSI sequences, NULs, invalid bytes; a CR or ``\\x1f``, which keep it
    from the CSV reader: its parser ends a line at a last CR), ending in a newline, in none, in CRs or in a line
    of NULs,
    reads as it does with every text split by ``str.split``: the same lines, counts, warnings, skipped entries."""
    from correlator import read

    body = "\n".join([*lines, odd]).encode("utf-8") + (b"\xff" if bad else b"")
    data = b"\n".join([body] * (read._SMALL_TEXT // (len(body) + 1) + 2)) + end
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as small:
        small.setattr(read, "_CSV_MIN_CHARS", 1)  # any text the reader may split (1 MiB and more by default)
        p = Path(d) / "rank0.log"
        p.write_bytes(data)
        calls: list[int] = []
        with pytest.MonkeyPatch.context() as mp:
            csv = read._text_lines
            mp.setattr(read, "_text_lines", lambda b: calls.append(1) or csv(b))
            got = read.read_lines(p, "rank0.log")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(read, "_csv_splits", lambda *_a: False)  # every text split by str.split
            want = read.read_lines(p, "rank0.log")
    # the CSV reader read it, unless all was binary, it holds a CR or \x1f, or it ends in a line of NULs
    assert calls or got.physical_lines == got.skipped_lines or odd or b"\r" in end or end.endswith(b"\x00")
    assert got.line_list() == want.line_list()
    assert (got.physical_lines, got.skipped_lines, got.warnings, got.skipped) == (
        want.physical_lines,
        want.skipped_lines,
        want.warnings,
        want.skipped,
    )
