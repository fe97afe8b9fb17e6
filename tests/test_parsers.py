"""Every parser rule classifies its own example line (a real line, or one from the format reference),
and key lines give back the field values written in them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import correlator
import parsers
from parsers.rules import Prefix, Rule, defined, literals_in
from tests.conftest import CASES, DRAWN

# Every Rule and Prefix the parser modules define (a rule added to a module is tested without being listed here).
RULES, PREFIXES = (list(x) for x in defined())


def _events(tmp_path: Path, text: str, name: str = "combined.log", tz: str | None = None) -> pl.DataFrame:
    (tmp_path / name).write_text(text + "\n")
    return correlator.load(tmp_path, tz=tz)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_rule_has_source_and_example(rule: Rule) -> None:
    assert rule.source and rule.example


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_rule_example_gets_rule_kind(rule: Rule, tmp_path: Path) -> None:
    t = _events(tmp_path, rule.example)
    assert rule.kind in t["kind"].to_list(), t.select("kind", "message").to_dicts()


@pytest.mark.parametrize("pfx", PREFIXES, ids=lambda p: p.name)
def test_prefix_example_matches(pfx: Prefix) -> None:
    assert pfx.example and pfx.source
    s = pl.Series([pfx.example]).str.extract_groups(pfx.pattern).struct.field("rest")
    assert s[0] is not None
    assert pfx.example.endswith(s[0]) and len(s[0]) < len(pfx.example)  # the rest is what follows the prefix


def test_c10_watchdog_line_fields(tmp_path: Path) -> None:
    line = (
        "[rank13]:[E1129 22:58:55.104211337 ProcessGroupNCCL.cpp:616] [Rank 13] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=4471, OpType=ALLREDUCE, NumelIn=25165824, NumelOut=25165824, Timeout(ms)=600000) ran "
        "for 600049 milliseconds before timing out."
    )
    r = _events(tmp_path, line).row(0, named=True)
    assert (
        r["kind"],
        r["rank"],
        r["pg_rank"],
        r["seq"],
        r["op"],
        r["numel"],
        r["timeout_ms"],
        r["elapsed_ms"],
    ) == ("watchdog_timeout", 13, 13, 4471, "ALLREDUCE", 25165824, 600000, 600049)
    assert (r["severity"], r["layer"], r["ts_quality"]) == ("error", "c10d", "no_year")
    assert (r["ts"].month, r["ts"].day, r["ts"].hour, r["ts"].second) == (11, 29, 22, 55)


def test_pg_prefix_and_status_line(tmp_path: Path) -> None:
    line = (
        "[rank13]:[E1129 22:58:55.104420117 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 13] "
        "Exception (either an error or timeout) detected by watchdog at work: 4471, last enqueued NCCL work: 4473, "
        "last completed NCCL work: 4470."
    )
    r = _events(tmp_path, line).row(0, named=True)
    assert (r["kind"], r["pg"], r["seq"], r["seq_enqueued"], r["seq_completed"]) == (
        "watchdog_status",
        "0",
        4471,
        4473,
        4470,
    )


def test_nccl_prefix_init_and_coll(tmp_path: Path) -> None:
    text = "\n".join(
        [
            (
                "node-b:52011:52066 [5] NCCL INFO comm 0x562e11f03a90 rank 13 nranks 16 cudaDev 5 nvmlDev 5 busId 9c000 "
                "commId 0x3f9a6c1be27d4410 - Init COMPLETE"
            ),
            (
                "node-b:52011:52011 [5] NCCL INFO AllReduce: opCount 1f4 sendbuff 0x7f3b52000000 recvbuff 0x7f3b52000000 "
                "count 25165824 datatype 7 op 0 root 0 comm 0x562e11f03a90 [nranks=16] stream 0x55d0c2f1a9e0"
            ),
        ]
    )
    t = _events(tmp_path, text)
    init, coll = t.row(0, named=True), t.row(1, named=True)
    assert (init["kind"], init["host"], init["pid"], init["world_size"]) == ("nccl_init", "node-b", 52011, 16)
    assert (coll["kind"], coll["seq"], coll["op"], coll["numel"]) == (
        "nccl_coll",
        0x1F4,
        "ALLREDUCE",
        25165824,
    )
    assert init["rank"] == 13 and coll["rank"] == 13 and coll["rank_source"] == "nccl_pid"


def test_nccl_warn_names_peer(tmp_path: Path) -> None:
    text = (
        "\n[2025-06-02 14:03:11] node-b:52011:52190 [5] transport/net_ib.cc:2543 NCCL WARN NET/IB: Got completion "
        "from peer 192.0.2.11<44871> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=129"
    )
    r = _events(tmp_path, text).filter(pl.col("kind") != "blank").row(0, named=True)
    assert (r["kind"], r["peer_addr"], r["severity"], r["ts_quality"]) == (
        "nccl_net_error",
        "192.0.2.11",
        "warning",
        "no_tz",
    )
    assert (r["ts"].year, r["ts"].hour) == (2025, 14)


def test_traceback_is_one_record(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "[rank3]: Traceback (most recent call last):",
            '[rank3]:   File "/workspace/train.py", line 88, in <module>',
            "[rank3]:     main()",
            (
                "[rank3]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
                "remote process exited or there was a network error, NCCL version 2.26.2"
            ),
            "[rank3]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
        ]
    )
    t = _events(tmp_path, text)
    assert t.height == 1
    r = t.row(0, named=True)
    assert (r["kind"], r["rank"], r["line_count"], r["exc_type"]) == (
        "nccl_error",
        3,
        5,
        "torch.distributed.DistBackendError",
    )


def test_child_failed_entry_fields(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "Root Cause (first observed failure):",
            "[0]:",
            "  time      : 2024-11-29_22:58:55",
            "  host      : node-b.cluster.example",
            "  rank      : 13 (local_rank: 5)",
            "  exitcode  : -6 (pid: 52011)",
            "  error_file: <N/A>",
            "  traceback : Signal 6 (SIGABRT) received by PID 52011",
        ]
    )
    r = _events(tmp_path, text).filter(pl.col("kind") == "root_cause_entry").row(0, named=True)
    assert (r["rank"], r["local_rank"], r["host"], r["exit_code"], r["pid"], r["line_count"]) == (
        13,
        5,
        "node-b",
        -6,
        52011,
        7,
    )
    assert r["ts_quality"] == "no_tz" and r["ts"].hour == 22


def test_srun_label_and_mpi_tag(tmp_path: Path) -> None:
    srun = "\n".join(f"{i:2d}: 2026-11-29 23:08:29,847 INFO step={i}" for i in range(12))
    t = _events(tmp_path, srun, "slurm-812345.out")
    assert sorted(t["rank"].to_list()) == list(range(12)) and t["step"].to_list() == list(range(12))
    (tmp_path / "slurm-812345.out").unlink()
    mpi = "[1,3]<stderr>:[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered"
    r = _events(tmp_path, mpi, "mpirun.log").row(0, named=True)
    assert (r["rank"], r["kind"]) == (3, "cuda_error")


def test_kubectl_stamp_is_exact(tmp_path: Path) -> None:
    r = _events(tmp_path, "2024-11-29T22:58:55.104211337Z [default0]:hello").row(0, named=True)
    assert r["ts_quality"] == "exact" and r["ts"].microsecond == 104211 and r["local_rank"] == 0


@pytest.mark.parametrize(
    ("line", "utc"),
    [
        # datetime.isoformat() with an offset; logging with datefmt '%Y-%m-%dT%H:%M:%S%z'; structlog's
        # TimeStamper(fmt="iso", utc=True); the bracketed asctime layout with a zone
        ("2026-11-29T23:08:40.100000+02:00 ERROR [trainer] boom", "2026-11-29 21:08:40.100000"),
        ("2026-11-29T23:08:40-0530 ERROR boom", "2026-11-30 04:38:40"),
        ("2026-11-29T23:08:40.5Z INFO step=3", "2026-11-29 23:08:40.500000"),
        ("[2026-11-29 23:08:40,100+0000] ERROR boom", "2026-11-29 23:08:40.100000"),
    ],
)
def test_python_stamp_with_a_zone_is_exact(tmp_path: Path, line: str, utc: str) -> None:
    # The stamp names its zone: the time in UTC whatever --tz says (a stamp without one is read in --tz)
    for tz in (None, "Asia/Tokyo"):
        r = _events(tmp_path, line, tz=tz).row(0, named=True)
        assert r["ts_quality"] == "exact", r
        assert r["ts"] == dt.datetime.fromisoformat(utc).replace(tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("spec", "ranks"),
    [
        ("0-7", "0,1,2,3,4,5,6,7"),
        ("8-10,12-15", "8,9,10,12,13,14,15"),
        ("[3,5]", "3,5"),
        ("[3, 5-6]", "3,5,6"),
        (" 4 ", "4"),
        ("1, 3", "1,3"),
        ("5,3,3", "3,5"),
        ("a-b,7", "7"),
        ("1-2-3,4", "4"),
        ("x", None),
        ("", None),
    ],
)
def test_rank_list(spec: str, ranks: str | None) -> None:
    from parsers.rules import rank_list

    assert rank_list(spec) == ranks


def test_rank_list_never_expands_past_its_cap() -> None:
    from parsers.rules import MAX_RANKS_NAMED, rank_list

    assert rank_list(f"0-{MAX_RANKS_NAMED - 1}") == ",".join(map(str, range(MAX_RANKS_NAMED)))
    assert rank_list(f"0-{MAX_RANKS_NAMED}") is None
    assert rank_list("0-4000000000") is None
    assert rank_list(",".join(["0-70000", "70001-140000"])) is None


@pytest.mark.parametrize(
    ("line", "ranks"),
    [
        ("srun: error: node-b: tasks 4-5,7: Exited with exit code 1", "4,5,7"),
        ("srun: error: node-b: task 11: Out Of Memory", "11"),
        ("srun: error: node-b: tasks [0-1]: Killed", "0,1"),
        (
            (
                "[rank0]:[E1129 23:08:36.778416339 ProcessGroupGloo.cpp:67] [Rank 0]: Ranks 1, 3 failed to pass "
                "monitoredBarrier in 30000 ms"
            ),
            "1,3",
        ),
        (
            (
                "[rank0]:[E1129 23:08:36.778382438 ProcessGroupGloo.cpp:2901] [Rank 0]: Rank 2 failed to pass "
                "monitoredBarrier in 15000 ms"
            ),
            "2",
        ),
        (
            (
                "[rank0]:[I1129 23:08:36.778382438 ProcessGroupGloo.cpp:2901] Rank 0 successfully reached "
                "monitoredBarrier, but received errors while waiting for send/recv from rank 1"
            ),
            None,
        ),
    ],
)
def test_ranks_named_from_srun_and_monitored_barrier_lines(
    tmp_path: Path, line: str, ranks: str | None
) -> None:
    t = _events(tmp_path, line)
    assert t["ranks_named"].to_list() == [ranks]


def test_mismatch_line_states_the_other_ranks_collective(tmp_path: Path) -> None:
    line = (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=Float), but Rank 3 "
        "is running collective: CollectiveFingerPrint(SequenceNumber=12, OpType=BROADCAST, TensorShape=[4, 2], "
        "TensorDtypes=Float)."
    )
    t = _events(tmp_path, line)
    assert t.select("kind", "op", "shape", "peer_rank", "peer_op", "peer_shape").row(0) == (
        "collective_mismatch",
        "ALLREDUCE",
        "[4]",
        3,
        "BROADCAST",
        "[4, 2]",
    )
    # torch 1.10's fingerprint has no comma before OpType and no shape
    old = (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=3OpType=ALLREDUCE), but Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=3OpType=BARRIER)."
    )
    t = _events(tmp_path, old)
    assert t.select("peer_rank", "peer_op", "peer_shape").row(0) == (0, "BARRIER", None)


def _lines_frame(root: Path) -> pl.DataFrame:
    """The lines frame ``correlator.ingest`` parses, for the plain files under ``root``."""
    from correlator.discover import discover
    from correlator.ingest import plain_lines
    from correlator.read import read_lines

    srcs = sorted(
        (s for s in discover(root)[0] if s.layout not in ("fr_dump", "error_json")), key=lambda s: s.rel
    )
    parts = [(i, s, r.lines) for i, s in enumerate(srcs) if (r := read_lines(s.path, s.rel)).lines.len()]
    if not parts:
        pytest.skip("Flight Recorder dumps only: no text log")
    return plain_lines(parts).drop("__src")


@pytest.mark.parametrize(
    "case",
    sorted(
        p.name
        for p in (Path(__file__).parent.parent / "fixtures" / "cases").iterdir()
        if (p / "logs").is_dir()
    ),
)
def test_generic_parse_in_slices_of_one_file_equals_one_slice(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generic path parses whole files in slices of ``GENERIC_CHUNK_ROWS`` rows (a progress report after
    each): no rule may read across files, so slices of one file each give exactly the rows of one slice."""
    df = _lines_frame(Path(__file__).parent.parent / "fixtures" / "cases" / case / "logs")

    def rows() -> pl.DataFrame:  # in input order (a few rules append rows; ingest sorts by path, line later)
        return parsers.merge_parts(*parsers.parse_lines_split(df)).sort("_pos", maintain_order=True)

    whole = rows()
    monkeypatch.setattr(parsers, "GENERIC_CHUNK_ROWS", 1)
    assert len(parsers._file_slices(df, 1)) == df["path"].n_unique()
    sliced = rows()
    assert sorted(sliced.columns) == sorted(whole.columns)
    assert sliced.select(whole.columns).equals(whole)


def test_file_slices_keep_a_file_whole_and_cover_all_rows() -> None:
    df = pl.DataFrame({"path": ["a", "a", "b", "c", "c", "c", "d"]})
    assert parsers._file_slices(df, 2) == [(0, 2), (2, 6), (6, 7)]
    assert parsers._file_slices(df, 100) == [(0, 7)]
    # The rows of one file in two places: one slice (a file is never split).
    assert parsers._file_slices(pl.DataFrame({"path": ["a", "b", "a"]}), 1) == [(0, 3)]
    # With a ramp the first slices aim at a quarter, then half of the rows (files a | b c | d e): the first
    # progress report of a parse comes early. Without: a b c | d e.
    df = pl.DataFrame({"path": list("aabcccdeeee")})
    assert parsers._file_slices(df, 4, ramp=2) == [(0, 2), (2, 6), (6, 11)]
    assert parsers._file_slices(df, 4) == [(0, 6), (6, 11)]
    assert parsers._file_slices(df, 40, ramp=2) == [(0, 11)]
    # With ``least`` a range ends only where that many rows follow: at 6, no last slice of d e (5 rows).
    assert parsers._file_slices(df, 4, ramp=2, least=6) == [(0, 2), (2, 11)]
    assert parsers._file_slices(df, 4, ramp=2, least=5) == [(0, 2), (2, 6), (6, 11)]


def _literal_rows() -> st.SearchStrategy[list[str]]:
    """Rows made of rule literals, their halves and filler, so that occurrences overlap and hold one another."""
    lits = sorted(parsers._message_literals())
    bits = [*lits, *(x[: len(x) // 2] for x in lits), *(x[len(x) // 2 :] for x in lits), " ", "x", ": "]
    return st.lists(st.lists(st.sampled_from(bits), max_size=6).map("".join), min_size=1, max_size=30)


@DRAWN
@given(rows=_literal_rows())
def test_drawn_literals_in_is_every_literal_that_occurs(rows: list[str]) -> None:
    """``parsers.rules.literals_in`` (by which :func:`parsers.classify`'s literal gate skips rule lists) is the
    set of the literals that occur as a substring in some row, tested one literal at a time."""
    lits = parsers._message_literals()
    text = pl.Series(rows, dtype=pl.String)
    want = {x for x in lits if any(x in r for r in rows)}
    assert literals_in(text, lits) == want


def test_literals_in_on_the_corpus_and_nested_literals() -> None:
    """On every line of the corpus cases, and on rows holding one literal inside or across others."""
    lits = parsers._message_literals()
    lines = [
        line
        for f in sorted(CASES.rglob("*"))
        if f.is_file() and f.suffix in (".log", ".txt", "") and f.stat().st_size < 2_000_000
        for line in f.read_text(errors="replace").splitlines()
    ]
    nested = sorted({(a, b) for a in lits for b in lits if a != b and a in b})
    assert nested, "no literal inside another: the nested rows test nothing"
    for rows in (lines, [b for _, b in nested], [a + b for a, b in nested]):
        text = pl.Series(rows, dtype=pl.String)
        want = {x for x in lits if text.str.contains(x, literal=True).any()}
        assert literals_in(text, lits) == want
    assert len(lines) > 10_000


def test_tee_template_rank_with_a_space(tmp_path: Path) -> None:
    # torchrun --tee behind TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[rank ${rank}]: ' (cap-35, torch 2.8): the
    # template's rank is the line's, and the excepthook's traceback behind it stays one record
    text = "\n".join(
        [
            "[rank 0]: step 0 on rank 0",
            "[rank 1]: [rank1]: Traceback (most recent call last):",
            '[rank 1]: [rank1]:   File "/opt/app/train.py", line 8, in <module>',
            '[rank 1]: [rank1]:     raise ValueError("corrupt record in shard 9")',
            "[rank 1]: [rank1]: ValueError: corrupt record in shard 9",
            "[rank 0]: step 1 on rank 0",
        ]
    )
    t = _events(tmp_path, text, "console.log")
    rows = t.select("line", "line_count", "rank", "kind").rows()
    assert rows == [(1, 1, 0, "unparsed"), (2, 4, 1, "python_exception"), (6, 1, 0, "unparsed")]
    assert t["rank_source"].to_list() == ["transport_prefix", "c10d_prefix", "transport_prefix"]
