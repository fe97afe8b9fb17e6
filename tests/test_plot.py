"""``rankscope plot`` and the figures: every real fixture, HTML and PNG; a 256-rank synthetic job."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import polars as pl
import pytest
from typer.testing import CliRunner

import correlator
from correlator.cli import app
from correlator.plot import figure_bytes, graph_figure, progress_heatmap, timeline_figure, write_report
from correlator.schema import empty_table

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import synthetic_table

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "cases"
REAL = sorted(p.name for p in CASES.iterdir() if p.name.startswith(("gloo-", "public-")))
PNG = b"\x89PNG\r\n\x1a\n"


def test_there_are_real_fixtures() -> None:
    assert REAL == [
        "gloo-01-exception-before-allreduce",
        "gloo-03-collective-mismatch",
        "gloo-05-sigkill-oom",
        "gloo-07-clean-run",
        "public-02-oom-rank2-multinode-timeouts",
        "public-05-oom-kill-local-rank3-sigterm-others",
        "public-07-straggler-rank0-preprocess-default-prefix",
    ]


@pytest.mark.parametrize("case", REAL)
def test_plot_html_and_png(case: str, tmp_path: Path) -> None:
    runner = CliRunner()
    logs = str(CASES / case / "logs")
    html = tmp_path / "timeline.html"
    r = runner.invoke(app, ["plot", logs, "-o", str(html), "-q"])
    assert r.exit_code == 0, r.output
    text = html.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 3
    # The page states the verdict it drew (Diagnosis.findings, nothing diagnosed again): its summary names
    # the initiator of fixtures/cases/<case>/expected.json.
    expected = json.loads((CASES / case / "expected.json").read_text())
    verdict = re.search(r'<p class="verdict">([^<]*)</p>', text)
    assert verdict, "no verdict line"
    ranks = expected["initiating_ranks"]
    assert verdict.group(1).startswith(f"rank {ranks[0]} (" if ranks else "No failure found"), verdict.group(
        1
    )
    png = tmp_path / "timeline.png"
    r = runner.invoke(app, ["plot", logs, "-o", str(png), "-q"])
    assert r.exit_code == 0, r.output
    data = png.read_bytes()
    assert data.startswith(PNG) and 5_000 < len(data) < 2_000_000


@pytest.mark.parametrize("figure", ["progress", "graph"])
def test_plot_other_figures(figure: str, tmp_path: Path) -> None:
    out = tmp_path / f"{figure}.png"
    r = CliRunner().invoke(
        app,
        [
            "plot",
            str(CASES / "gloo-01-exception-before-allreduce" / "logs"),
            "-o",
            str(out),
            "--figure",
            figure,
            "-q",
        ],
    )
    assert r.exit_code == 0, r.output
    assert out.read_bytes().startswith(PNG)


def test_plot_bad_extension(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "correlator",
            "plot",
            str(CASES / "gloo-01-exception-before-allreduce" / "logs"),
            "-o",
            str(tmp_path / "x.pdf"),
            "-q",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "unknown plot format" in " ".join(r.stderr.split()) and r.stderr.startswith("error:")
    assert not (tmp_path / "x.pdf").exists()


def test_plot_missing_dir(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["plot", str(tmp_path / "nope"), "-o", str(tmp_path / "x.png"), "-q"])
    assert r.exit_code != 0


def test_plot_reads_every_line_up_to_the_threshold(small_job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from correlator import api

    size = sum(p.stat().st_size for p in small_job.rglob("*") if p.is_file())
    monkeypatch.setattr(api, "PLOT_EVERY_LINE_BYTES", size)
    assert api.plot_every_line(small_job)  # at the threshold: every line
    monkeypatch.setattr(api, "PLOT_EVERY_LINE_BYTES", size - 1)
    assert not api.plot_every_line(small_job)
    assert api.plot_every_line(small_job, True) and not api.plot_every_line(small_job, False)
    assert api.plot_every_line("-")  # standard input: its size is not known before it is read


def test_plot_of_a_timeline_table_says_it_draws_what_diagnosis_reads(small_job: Path, tmp_path: Path) -> None:
    """A ``rankscope timeline`` table is read as diagnosis reads it (its routine rows reduced), whatever
    ``--every-line`` says: the page says so."""
    import html as html_

    from correlator.plot import REDUCED_NOTE, TABLE_NOTE

    runner = CliRunner()
    table = tmp_path / "t.parquet"
    assert runner.invoke(app, ["timeline", str(small_job), "-o", str(table), "-q"]).exit_code == 0
    for flag in ([], ["--every-line"]):
        page = tmp_path / "p.html"
        r = runner.invoke(app, ["plot", str(table), "-o", str(page), "-q", *flag])
        assert r.exit_code == 0, r.output
        text = page.read_text()
        assert html_.escape(TABLE_NOTE) in text and html_.escape(REDUCED_NOTE) not in text


def test_plot_walks_the_folder_once(small_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The size decision shares the ingest's walk of the folder (200,000 files: ~20 s a walk)."""
    from correlator import discover

    walks: list[Path] = []
    real = discover._walk_rel

    def counted(root: Path, follow: bool) -> object:
        walks.append(Path(root))
        return real(root, follow)

    monkeypatch.setattr(discover, "_walk_rel", counted)
    r = CliRunner().invoke(app, ["plot", str(small_job), "-o", str(tmp_path / "p.html"), "-q"])
    assert r.exit_code == 0, r.output
    assert walks.count(small_job) == 1, walks


def test_plot_of_large_logs_draws_the_rows_diagnosis_reads(
    small_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the threshold the page is drawn from the table diagnosis reads (the job's NCCL COLL lines cut
    to the last of each rank and process group), says so, and states the verdict of every line's page;
    ``--every-line`` draws every line again."""
    import html as html_

    import correlator.plot as plot_
    from correlator import api
    from correlator.plot import REDUCED_NOTE

    runner = CliRunner()
    tables: list[pl.DataFrame] = []
    real_write = plot_.write_report

    def spy(table: pl.DataFrame, *a: object, **k: object) -> None:
        tables.append(table)
        real_write(table, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(plot_, "write_report", spy)
    full, red, forced = tmp_path / "full.html", tmp_path / "red.html", tmp_path / "forced.html"
    assert runner.invoke(app, ["plot", str(small_job), "-o", str(full), "-q"]).exit_code == 0
    monkeypatch.setattr(api, "PLOT_EVERY_LINE_BYTES", 0)
    r = runner.invoke(app, ["plot", str(small_job), "-o", str(red)])
    assert r.exit_code == 0, r.output
    assert "routine lines thinned" in " ".join(r.output.split())
    assert (
        runner.invoke(app, ["plot", str(small_job), "-o", str(forced), "-q", "--every-line"]).exit_code == 0
    )
    pages = [p.read_text() for p in (full, red, forced)]
    note = html_.escape(REDUCED_NOTE)
    assert [note in p for p in pages] == [False, True, False]
    verdicts = [re.search(r'<p class="verdict">([^<]*)</p>', p) for p in pages]
    assert all(verdicts) and len({v.group(1) for v in verdicts if v}) == 1
    # what each page was drawn from: every line of the logs, then the rows diagnosis read (the routine ones
    # thinned: of a rank's COLL lines, at most the last 4 of each process group), then every line again
    lines = sum(len(p.read_text().splitlines()) for p in small_job.rglob("*") if p.is_file())
    assert tables[0].height == tables[2].height and int(tables[0]["line_count"].sum()) == lines
    coll = [t.filter(pl.col("kind") == "nccl_coll") for t in tables]
    per_group = coll[1].group_by("rank", "pg").len()["len"]
    assert coll[0].height == coll[2].height > coll[1].height > 0 and per_group.max() <= 4
    # every error line is drawn (the ids of a table with its COLL lines cut are those of the whole table)
    errors = tables[0].filter(pl.col("severity").is_in(["error", "fatal"]))["event_id"]
    assert errors.len() > 0 and errors.is_in(tables[1]["event_id"].implode()).all()


def test_256_ranks_are_thinned(tmp_path: Path) -> None:
    t = synthetic_table(256)
    d = correlator.diagnose(t)
    fig = timeline_figure(t, d)
    ax = fig.axes[0]
    labels = [lab.get_text() for lab in ax.get_yticklabels()]
    assert 8 <= len(labels) <= 60
    # the synthetic culprit (rank 137) keeps its own label however thinned the axis is
    assert d.initiating_ranks == [137] and "rank 137" in labels
    data = figure_bytes(fig, "png")
    assert data.startswith(PNG) and len(data) < 2_000_000
    assert figure_bytes(progress_heatmap(t), "png").startswith(PNG)
    assert figure_bytes(graph_figure(correlator.build_graph(t)), "png").startswith(PNG)
    small = synthetic_table(96, steps=10)
    write_report(small, correlator.diagnose(small), tmp_path / "big.html")
    assert (tmp_path / "big.html").stat().st_size < 4_000_000


def test_empty_inputs() -> None:
    t = empty_table()
    d = correlator.diagnose(t)
    assert figure_bytes(timeline_figure(t, d), "png").startswith(PNG)
    assert figure_bytes(progress_heatmap(t), "png").startswith(PNG)
    assert figure_bytes(graph_figure(nx.DiGraph()), "png").startswith(PNG)


def test_timeline_uses_corrected_time_axis() -> None:
    t = correlator.load(CASES / "recon-01-straggler-silent-rank13-allreduce-16r" / "logs")
    fig = timeline_figure(t, correlator.diagnose(t))
    assert "relative to" in fig.axes[0].get_xlabel()
    t2 = t.with_columns(pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("ts"))
    fig2 = timeline_figure(t2, correlator.diagnose(t2))
    assert "event order" in fig2.axes[0].get_xlabel()


def test_rank_less_rows_are_labelled_by_what_they_hold(tmp_path: Path) -> None:
    """A host's rank-less row was always labelled "launcher", also when it held the ranks' own lines that
    carry no rank (a traceback without a `[rankN]:` prefix). Now: `launcher` for launcher lines only,
    `untagged lines of HOST` for rank lines only, both words for both."""
    import correlator
    from correlator.plot import timeline_figure

    ranked = (
        "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
        "Connection closed by peer [127.0.0.1]:61675.\n"
    )
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/opt/app/train.py", line 237, in <module>\n'
        "    main()\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    srun = "srun: error: node-a: task 1: Exited with exit code 1\n"

    def labels(text: str, name: str) -> list[str]:
        d = tmp_path / name / "node-a"
        d.mkdir(parents=True)
        (d / "console.log").write_text(text)
        tab = correlator.load(d.parent)
        fig = timeline_figure(tab, correlator.diagnose(tab))
        ticks = [x.get_text() for x in fig.axes[0].get_yticklabels()]
        return [x for x in ticks if not x.startswith("rank ")]

    assert labels(ranked + traceback + srun, "both") == ["launcher + untagged lines of node-a"]
    assert labels(ranked + traceback, "own") == ["untagged lines of node-a"]
    assert labels(ranked + srun, "launcher") == ["launcher"]


def test_heatmap_does_not_call_a_rank_without_sequence_numbers_not_behind(tmp_path: Path) -> None:
    """Issue #34 item 5: ranks 0-2 time out in SeqNum 57 while rank 3 (the hung one) logs no sequence number:
    the heatmap said "no rank is behind on a collective sequence"."""
    lines = [
        f"[rank{r}]:[E524 03:42:41.647787481 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=57, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600051 milliseconds before timing out."
        for r in (0, 1, 2)
    ]
    lines.append("[rank3]: loading shard 17 from remote storage")
    (tmp_path / "combined.log").write_text("\n".join(lines) + "\n")
    t = correlator.load(tmp_path)
    title = progress_heatmap(t).axes[0].get_title(loc="left")
    assert "no rank is behind" not in title
    assert "no rank that logged a sequence number is behind" in title and "rank 3" in title
