"""Ingest: every line accounted for, ranks resolved, fields extracted, parquet round trip."""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

import correlator
from correlator.ingest import ingest
from correlator.schema import COLUMN_DOCS, EVENT_SCHEMA, Kind
from tests.conftest import CASES, REAL_CASES


def _physical_lines(path: Path) -> int:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


ALL_CASES = sorted(p for p in CASES.iterdir() if (p / "logs").is_dir())


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda p: p.name)
def test_every_line_is_accounted_for(case: Path) -> None:
    res = ingest(case / "logs")
    per_file = dict(res.table.group_by("path").agg(pl.col("line_count").sum()).iter_rows())
    fr_dumps = set(res.table.filter(pl.col("layer") == "fr")["path"].to_list())  # records, not lines
    for f in (case / "logs").rglob("*"):
        if f.is_file():
            rel = f.relative_to(case / "logs").as_posix()
            assert per_file.get(rel, 0) == (0 if rel in fr_dumps else _physical_lines(f)), rel
    assert res.lines_read == int(res.table["line_count"].sum()) + res.skipped_lines


def test_schema_is_documented_and_complete() -> None:
    assert set(COLUMN_DOCS) == set(EVENT_SCHEMA.names)
    t = correlator.load(REAL_CASES[0] / "logs")
    assert t.columns == EVENT_SCHEMA.names
    assert set(t["kind"].unique().to_list()) <= {k.value for k in Kind}


def test_global_ranks_resolved_in_every_real_case() -> None:
    want = {
        "gloo-01-exception-before-allreduce": {0, 1, 2, 3},
        "gloo-03-collective-mismatch": {0, 1, 2, 3},
        "gloo-05-sigkill-oom": {0, 1, 2, 3},
        "gloo-07-clean-run": {0, 1, 2, 3},
        "public-02-oom-rank2-multinode-timeouts": {2, 4, 5, 11, 14},
        "public-05-oom-kill-local-rank3-sigterm-others": {0, 1, 2, 3},
        "public-07-straggler-rank0-preprocess-default-prefix": {0, 2, 3},
    }
    for case in REAL_CASES:
        ranks = set(correlator.load(case / "logs")["rank"].drop_nulls().unique().to_list())
        assert ranks == want[case.name], case.name


def test_torchrun_folder_is_local_rank_and_tee_copies_are_duplicates() -> None:
    t = correlator.load(CASES / "gloo-01-exception-before-allreduce" / "logs")
    rank2 = t.filter(pl.col("path").str.contains("attempt_0/2/stderr.log"))
    assert set(rank2["rank"].to_list()) == {2} and set(rank2["local_rank"].to_list()) == {2}
    tee = t.filter((pl.col("path") == "launcher.log") & pl.col("message").str.contains("CorruptBatchError"))
    assert tee.height >= 1 and tee["duplicate"].all()


def test_watchdog_mismatch_traceback_and_exit_fields() -> None:
    t = correlator.load(CASES / "public-02-oom-rank2-multinode-timeouts" / "logs")
    wd = t.filter(pl.col("kind") == "watchdog_timeout").row(0, named=True)
    assert (wd["rank"], wd["seq"], wd["op"], wd["numel"], wd["timeout_ms"], wd["elapsed_ms"]) == (
        5,
        15734,
        "ALLREDUCE",
        220084533,
        600000,
        600037,
    )
    st = t.filter((pl.col("kind") == "watchdog_status") & (pl.col("rank") == 11)).row(0, named=True)
    assert (st["seq"], st["seq_enqueued"], st["seq_completed"], st["pg"]) == (15734, 15735, 15733, "1")
    oom = t.filter(pl.col("kind") == "cuda_oom").row(0, named=True)
    assert oom["rank"] == 2 and oom["exc_type"] == "torch.cuda.OutOfMemoryError"

    m = correlator.load(CASES / "gloo-03-collective-mismatch" / "logs")
    mm = m.filter(
        (pl.col("kind") == "collective_mismatch") & ~pl.col("duplicate") & (pl.col("rank") == 3)
    ).row(0, named=True)
    assert (mm["seq"], mm["op"], mm["peer_rank"], mm["exc_type"]) == (34, "BROADCAST", 0, "RuntimeError")

    g1 = correlator.load(CASES / "gloo-01-exception-before-allreduce" / "logs")
    tb = g1.filter(
        (pl.col("kind") == "python_exception") & (pl.col("path").str.ends_with("2/stderr.log"))
    ).row(0, named=True)
    assert tb["exc_type"] == "CorruptBatchError" and tb["line_count"] == 13

    k = correlator.load(CASES / "gloo-05-sigkill-oom" / "logs")
    failed = k.filter(pl.col("kind") == "worker_failed").row(0, named=True)
    assert (failed["rank"], failed["exit_code"], failed["pid"]) == (3, -9, 15237)
    sig = k.filter(pl.col("kind") == "worker_signalled").sort("line")
    assert sig["rank"].to_list() == [0, 1, 2] and set(sig["signal"].to_list()) == {"SIGTERM"}


def test_torn_tee_line_is_split_and_wrapped_line_joined() -> None:
    t = correlator.load(CASES / "public-07-straggler-rank0-preprocess-default-prefix" / "logs")
    assert int(t["line_count"].sum()) == 4
    wd = t.filter(pl.col("kind") == "watchdog_timeout").sort("rank")
    assert wd["rank"].to_list() == [2, 3]
    assert wd["seq"].to_list() == [3, 3] and wd["elapsed_ms"].to_list() == [600888, 600892]


def test_timestamps_year_and_quality() -> None:
    t = correlator.load(CASES / "gloo-01-exception-before-allreduce" / "logs")
    c10 = t.filter(pl.col("kind") == "collective_fingerprint").row(0, named=True)
    assert c10["ts_quality"] == "no_year" and c10["ts"].year == 2026 and c10["ts"].microsecond == 0
    py = t.filter(pl.col("kind") == "step_progress").row(0, named=True)
    assert py["ts_quality"] == "no_tz" and py["ts"].microsecond % 1000 == 0
    ej = t.filter(pl.col("stream") == "error_json").row(0, named=True)
    assert ej["ts_quality"] == "exact"


def test_parquet_round_trip(tmp_path: Path) -> None:
    t = correlator.load(CASES / "gloo-05-sigkill-oom" / "logs")
    out = tmp_path / "timeline.parquet"
    t.write_parquet(out)
    assert pq.read_schema(out).names == EVENT_SCHEMA.names
    back = pl.read_parquet(out)
    assert back.height == t.height and back["ts"].dtype == pl.Datetime("us", "UTC")
    duckdb = pytest.importorskip("duckdb")
    n = duckdb.sql(f"select count(*) from '{out}' where kind = 'worker_failed'").fetchall()[0][0]
    assert n == 1
    cols = [row[0] for row in duckdb.sql(f"describe select * from '{out}'").fetchall()]
    assert cols == EVENT_SCHEMA.names


def test_a_few_glog_stamps_among_full_ones_take_the_reference_year_and_roll_back_from_january(
    tmp_path: Path,
) -> None:
    # The year-less stamps are built for their own rows only when they are few (timestamps._yearless): their
    # values must be those the rule gives, the most common full year, December of the year before in January
    lines = [f"2027-01-02 10:00:{s:02d},000 INFO [trainer] step={s}" for s in range(10)]
    lines.insert(3, "[rank0]:[E1231 23:59:59.123456 ProcessGroupNCCL.cpp:616] [Rank 0] one")
    lines.insert(7, "[rank0]:[W0102 10:00:05.500000 ProcessGroupNCCL.cpp:616] [Rank 0] two")
    (tmp_path / "rank0.log").write_text("\n".join(lines) + "\n")
    t = correlator.load(tmp_path).sort("line")
    glog = t.filter(pl.col("ts_quality") == "no_year")
    # (the c10 bracket stamp keeps whole seconds, as test_timestamps_year_and_quality pins)
    assert glog["ts"].dt.replace_time_zone(None).to_list() == [
        dt.datetime(2026, 12, 31, 23, 59, 59),
        dt.datetime(2027, 1, 2, 10, 0, 5),
    ]
    assert t.filter(pl.col("ts_quality") == "no_tz").height == 10
