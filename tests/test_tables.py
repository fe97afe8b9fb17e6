"""Job.events and Job.write_table (correlator/tables.py): the event listing and the table writes that were
the CLI's alone (issue #31 item 1), checked against the ingest table directly."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from correlator.errors import InputError
from correlator.ingest import ingest
from correlator.job import open_job
from tests.conftest import CASES

LOGS = CASES / "public-02-oom-rank2-multinode-timeouts" / "logs"


@pytest.fixture(scope="module")
def table() -> pl.DataFrame:
    return ingest(LOGS).table


def test_events_filters_by_rank_kind_and_faults(table: pl.DataFrame) -> None:
    job = open_job(LOGS)
    got = job.events(rank=[2], kind=["oom"])
    want = table.filter(~pl.col("duplicate") & (pl.col("rank") == 2) & (pl.col("kind") == "cuda_oom"))
    assert got.height == want.height > 0
    assert sorted(got["event_id"].to_list()) == sorted(want["event_id"].to_list())
    faults = job.events(faults=True)
    assert set(faults["kind"].to_list()) <= {"cuda_oom", "watchdog_timeout", "watchdog_teardown",
                                             "nccl_peer_closed", "nccl_abort", "watchdog_status"}  # fmt: skip
    assert "step_progress" not in set(faults["kind"].to_list())
    every = job.events()
    assert every.height == table.filter(~pl.col("duplicate")).height


def test_events_are_in_time_order_unstamped_lines_kept_in_file_order() -> None:
    t = open_job(LOGS).events()
    stamps = [ts for ts in t["ts"].to_list() if ts is not None]
    assert stamps == sorted(stamps)


def test_an_unknown_kind_is_refused_before_anything_is_read() -> None:
    job = open_job(LOGS)
    with pytest.raises(InputError, match="unknown kind bogus; known kinds: "):
        job.events(kind=["bogus"])
    assert job._read is None


def test_write_table_by_extension_and_partitioned(tmp_path: Path, table: pl.DataFrame) -> None:
    job = open_job(LOGS)
    w = job.write_table(tmp_path / "t.csv")
    assert (w.format, w.rows) == ("csv", table.height)
    assert pl.read_csv(tmp_path / "t.csv").height == table.height
    assert w.summary is not None and w.summary["rows"] == table.height
    w = job.write_table(tmp_path / "parts", partition_by="rank")
    ranks = table["rank"].unique().to_list()
    assert w.partitions == len(ranks) == len(list((tmp_path / "parts").iterdir()))
    assert not list(tmp_path.glob(".t.csv.tmp-*"))  # the atomic write left no temporary file


def test_write_table_trace_and_refusals(tmp_path: Path) -> None:
    job = open_job(LOGS)
    w = job.write_table(tmp_path / "trace.json", format="perfetto")
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert (
        w.format == "perfetto" and trace["otherData"]["initiating_ranks"] == job.diagnose().initiating_ranks
    )
    with pytest.raises(InputError, match="write parquet only"):
        job.write_table(tmp_path / "x.csv", partition_by="rank")
    with pytest.raises(InputError, match="inside the input folder"):
        job.write_table(LOGS / "t.parquet")
    assert not (LOGS / "t.parquet").exists()


def test_an_unknown_engine_is_refused_by_one_check(tmp_path: Path) -> None:
    """The engine names are defined once (correlator/engines.py): the CLI's choices, the Job API's check
    (InputError, the CLI's exit 2) and stream_ingest's (ValueError, a programming error) use them; the check
    loads neither polars nor pyarrow."""
    import subprocess
    import sys

    from typer.testing import CliRunner

    from correlator.cli import app
    from correlator.cli.timeline import Engine as CliEngine
    from correlator.engines import ENGINES, check_engine
    from correlator.streaming import stream_ingest

    assert ENGINES == ("local", "ray") and [e.value for e in CliEngine] == ["local", "ray"]
    assert check_engine("ray") == "ray"
    job = open_job(LOGS)
    with pytest.raises(InputError, match=r"^--engine spark: use local or ray$"):
        job.write_table(tmp_path / "t.parquet", engine="spark")
    assert job._read is None and not (tmp_path / "t.parquet").exists()
    with pytest.raises(ValueError, match=r"^--engine spark: use local or ray$"):
        stream_ingest(LOGS, None, engine="spark")
    r = CliRunner().invoke(
        app, ["timeline", str(LOGS), "--engine", "spark", "-o", str(tmp_path / "t.parquet")]
    )
    flat = " ".join(r.output.replace("│", " ").split())  # unwrapped from the error box
    assert r.exit_code == 2 and "'spark' is not one of 'local', 'ray'" in flat
    r = CliRunner().invoke(app, ["timeline", "--help"], terminal_width=200)
    assert "<local|ray>" in r.output
    code = "import sys, correlator.engines; print([m for m in ('polars', 'pyarrow') if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("out.json", "use --format perfetto for a Perfetto trace"),
        ("out.txt", "unknown table format '.txt'"),
        ("out.HTML", "unknown table format '.html'"),
        ("out.csv.gz", "unknown table format '.gz'"),
    ],
)
def test_an_extension_that_names_no_table_format_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, why: str
) -> None:
    """``timeline -o out.json`` (or .txt, .html) wrote parquet under that name; it is refused with exit 2 and
    the formats to choose from, before anything is read or written."""
    from tests.conftest import run_cli

    code, _, err = run_cli(["timeline", LOGS, "-o", tmp_path / name, "-q"], monkeypatch, capsys)
    flat = " ".join(err.split())
    assert code == 2 and why in flat, err
    assert ".parquet" in flat and ".jsonl" in flat and "--format" in flat
    assert list(tmp_path.iterdir()) == []
    job = open_job(LOGS)
    with pytest.raises(InputError, match="--format"):
        job.write_table(tmp_path / name)
    assert job._read is None  # refused before the logs were read


def test_a_named_format_or_a_known_extension_chooses_the_table_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No extension is parquet (as before); .pq is parquet; --format writes any name, .json included; a
    dataset folder (--partition-by) is parquet whatever its name."""
    from correlator.tables import table_format
    from tests.conftest import run_cli

    assert table_format(Path("events"), None) == "parquet"
    assert table_format(Path("t.PQ"), None) == "parquet"
    assert table_format(Path("t.NDJSON"), None) == "jsonl"
    assert table_format(Path("run.2024"), None, folder=True) == "parquet"
    bare = tmp_path / "events"
    assert run_cli(["timeline", LOGS, "-o", bare, "-q"], monkeypatch, capsys)[0] == 0
    assert pl.read_parquet(bare).height > 0
    lines = tmp_path / "events.json"
    code, _, err = run_cli(["timeline", LOGS, "-o", lines, "-f", "jsonl", "-q"], monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(lines.read_text().splitlines()[0])["event_id"] is not None
    ds = tmp_path / "run.2024"
    code, _, err = run_cli(["timeline", LOGS, "-o", ds, "--partition-by", "rank", "-q"], monkeypatch, capsys)
    assert code == 0 and ds.is_dir(), err
