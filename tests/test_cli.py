"""The command line: exit codes, the JSON contract, reports and exports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from correlator.cli import app
from tests.conftest import CASES

runner = CliRunner()
GLOO05 = CASES / "gloo-05-sigkill-oom" / "logs"
PUBLIC02 = CASES / "public-02-oom-rank2-multinode-timeouts" / "logs"


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``rankscope ARGS`` in a child process; ``timeout`` (seconds) only guards against a hang."""
    return subprocess.run(
        [sys.executable, "-m", "correlator", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_json_contract() -> None:
    r = _cli("diagnose", str(PUBLIC02), "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for key in (
        "schema_version",
        "world_size",
        "ranks_seen",
        "attempt",
        "initiating_ranks",
        "collateral_ranks",
        "clean_ranks",
        "missing_ranks",
        "failure_kind",
        "confidence",
        "summary",
        "evidence",
        "per_rank",
    ):
        assert key in d
    assert (d["schema_version"], d["world_size"], d["initiating_ranks"], d["failure_kind"]) == (
        1,
        16,
        [2],
        "cuda_oom",
    )
    assert 0 <= d["confidence"] <= 1
    # 0.95 less 0.05 for the 11 ranks without a log, less 0.05 for no launcher output
    assert d["confidence_reasons"] == [
        "11 of 16 ranks left no log",
        "no launcher output to confirm exit statuses",
    ]
    assert d["confidence"] == 0.85
    ev = d["evidence"][0]
    assert set(ev) >= {"rank", "path", "line", "ts", "kind", "text"}
    assert (ev["rank"], ev["path"], ev["line"], ev["kind"]) == (2, "node-a.combined.log", 3, "cuda_oom")
    line = (PUBLIC02 / ev["path"]).read_text().splitlines()[ev["line"] - 1]
    assert "OutOfMemoryError" in line
    r5 = next(p for p in d["per_rank"] if p["rank"] == 5)
    assert r5["status"] == "collateral" and r5["first_fault_kind"] == "watchdog_timeout"
    assert r5["explained_by"] == {"rank": 2, "edge": "waits_for", "pg": "0", "seq": 15734}


def test_text_and_markdown_reports() -> None:
    r = runner.invoke(app, ["diagnose", str(GLOO05)])
    assert r.exit_code == 0
    assert r.output.startswith("VERDICT") and "rank 3" in r.output.splitlines()[0]
    assert "launcher.log:" in r.output
    md = runner.invoke(app, ["diagnose", str(GLOO05), "--format", "markdown"])
    assert md.exit_code == 0 and md.output.startswith("## rankscope verdict: oom_kill")
    assert "| rank | host | status |" in md.output


def test_exit_codes_for_bad_usage(tmp_path: Path) -> None:
    assert _cli("diagnose", str(tmp_path / "nope")).returncode == 2
    assert _cli("diagnose", str(tmp_path)).returncode == 2  # empty directory
    assert _cli("diagnose", str(GLOO05), "--format", "bogus").returncode == 2
    assert _cli("diagnose", str(GLOO05), "--tz", "Mars/Olympus").returncode == 2
    assert _cli("graph", str(GLOO05), "-o", str(tmp_path / "g.png")).returncode == 2
    r = _cli("timeline", str(GLOO05), "-o", "/proc/nope/x.parquet")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert _cli("events", str(GLOO05), "--kind", "nonsense").returncode == 2


def test_timeline_writes_the_event_table(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    r = _cli("timeline", str(GLOO05), "-o", str(out))
    assert r.returncode == 0 and "lines not understood" in r.stderr
    t = pl.read_parquet(out)
    assert t.filter(pl.col("kind") == "worker_failed")["exit_code"].to_list() == [-9]
    jl = tmp_path / "t.jsonl"
    assert _cli("timeline", str(GLOO05), "-o", str(jl), "--format", "jsonl", "-q").returncode == 0
    assert len(jl.read_text().splitlines()) == t.height


def test_events_filters() -> None:
    r = _cli("events", str(GLOO05), "--rank", "0", "--kind", "monitored_barrier_failed", "-n", "0")
    assert r.returncode == 0
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    # rank 0's four lines: error.json:1 and stderr.log:49, 50, 51 (the tee copies in launcher.log are duplicates)
    assert len(lines) == 4 and all("monitored_barrier_failed" in x and "rank    0" in x for x in lines)
    js = _cli("events", str(GLOO05), "--faults", "--format", "json", "-n", "0", "-q")
    kinds = {json.loads(x)["kind"] for x in js.stdout.splitlines()}
    assert "worker_failed" in kinds and "log" not in kinds


def test_graph_exports(tmp_path: Path) -> None:
    for ext in ("graphml", "json", "dot"):
        out = tmp_path / f"g.{ext}"
        assert _cli("graph", str(GLOO05), "-o", str(out), "-q").returncode == 0
    G = nx.read_graphml(tmp_path / "g.graphml")
    assert G.nodes["3"]["status"] == "initiating"
    assert {(a, b, d["edge"]) for a, b, d in G.edges(data=True)} == {
        ("0", "3", "waits_for"),
        ("1", "3", "killed_by"),
        ("2", "3", "killed_by"),
    }
    data = json.loads((tmp_path / "g.json").read_text())
    assert len(data["nodes"]) == 4
    assert '"1" -> "3" [label="killed_by"]' in (tmp_path / "g.dot").read_text()


def test_eval_command_on_the_corpus() -> None:
    # every corpus case: ~100 s on 2 busy cores, and the corpus grows; the timeout is a hang guard only
    r = _cli("eval", str(CASES), "--format", "json", timeout=900)
    assert r.returncode == 0, r.stdout[-2000:]
    tot = json.loads(r.stdout)["totals"]
    assert (
        tot["cases"] == sum((p / "expected.json").is_file() for p in CASES.iterdir())
        and tot["regressions"] == 0
    )


def test_help_explains_every_command() -> None:
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for cmd in ("diagnose", "timeline", "events", "graph", "eval"):
        assert cmd in r.output


def test_importing_the_cli_loads_no_engine() -> None:
    # `rankscope --version` and `--help` import correlator.cli: polars, pyarrow, networkx, matplotlib and
    # dateparser cost ~1.5 s of start-up and load only when a command needs them (issue #32 item 3)
    heavy = ("polars", "pyarrow", "numpy", "networkx", "matplotlib", "dateparser", "correlator.ingest")
    code = f"import sys, correlator.cli; print([m for m in {heavy!r} if m in sys.modules])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.strip() == "[]", r.stdout


def test_diagnose_loads_no_graph_or_plot_library() -> None:
    # the verdict is built on polars (correlator.graph's records); networkx loads only where a graph is
    # written (`rankscope graph`, --graph), matplotlib only in plot: ~0.1-0.2 s of a small case's ~1.2 s;
    # pyarrow (and numpy with it) only where a table goes to Arrow or parquet: ~0.15 s more
    case = Path(__file__).parent.parent / "fixtures/cases/cap-01-exception-before-collective-detail/logs"
    code = (
        "import sys\nfrom correlator.cli import main\n"
        f"sys.argv = ['rankscope', 'diagnose', {str(case)!r}, '-f', 'json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print([m for m in ('networkx', 'matplotlib', 'pyarrow', 'numpy', 'polars') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert '"initiating_ranks"' in r.stdout, r.stderr
    assert r.stdout.splitlines()[-1] == "['polars']", r.stdout[-300:]


def test_version_prints_the_version_without_loading_the_engine() -> None:
    from importlib.metadata import version

    code = (
        "import sys\nfrom correlator.cli import main\nsys.argv = ['rankscope', '--version']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nprint('polars' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert r.stdout.splitlines() == [f"rankscope {version('rankscope')}", "False"], (r.stdout, r.stderr)
    r = _cli("--version")
    assert (r.returncode, r.stdout) == (0, f"rankscope {version('rankscope')}\n"), r.stderr


def test_the_console_script_keeps_the_exit_code_and_freezes_the_objects_left_for_the_exit() -> None:
    # entry() (the console script) runs main() and then moves the objects left to the permanent generation, so
    # that the interpreter's exit does not collect them all again; main() alone leaves the collector as it is.
    case = str(Path(__file__).parent.parent / "fixtures/cases/cap-01-exception-before-collective-detail/logs")
    for fn, args, code, frozen in (
        ("entry", ["diagnose", case, "-f", "json"], None, True),
        ("entry", ["diagnose", "/nonexistent/rankscope-test"], 2, True),
        ("main", ["diagnose", case, "-f", "json"], None, False),
    ):
        prog = (
            f"import gc, sys\nfrom correlator.cli import {fn}\nsys.argv = ['rankscope', *{args!r}]\n"
            f"try:\n    {fn}()\nexcept SystemExit as e:\n    print('exit', e.code)\nelse:\n    print('exit', None)\n"
            "print('frozen', gc.get_freeze_count() > 0)\n"
        )
        r = subprocess.run(
            [sys.executable, "-c", prog], capture_output=True, text=True, timeout=120, check=False
        )
        assert r.stdout.splitlines()[-2:] == [f"exit {code}", f"frozen {frozen}"], (fn, args, r.stdout[-300:])
    r = _cli("diagnose", case, "-f", "json")
    assert r.returncode == 0 and '"initiating_ranks"' in r.stdout, r.stderr


def test_help_lists_every_command_with_its_own_summary() -> None:
    # every command is imported plainly (no placeholders): `rankscope --help` lists each with the first
    # paragraph of its own docstring, and loading the commands loaded no engine (the test above)
    r = runner.invoke(app, ["--help"], terminal_width=200)
    assert r.exit_code == 0
    group = typer.main.get_command(app)
    names = list(group.commands)  # type: ignore[attr-defined]
    assert names == [
        "diagnose", "timeline", "events", "graph", "eval", "plot", "redact", "signatures", "explain", "watch"
    ]  # fmt: skip
    for name in names:
        summary = group.commands[name].help.split("\n\n")[0].split("\n")[0]  # type: ignore[attr-defined]
        assert f" {name} " in r.output and summary.split(" (")[0][:40] in r.output, name


def test_a_feature_command_runs_and_shows_its_own_help() -> None:
    r = runner.invoke(app, ["explain", "--help"])
    assert r.exit_code == 0 and "ID" in r.output, r.output
    r = runner.invoke(app, ["signatures", "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.output), r.output


def test_eval_exits_1_on_a_regression(tmp_path: Path) -> None:
    import shutil

    case = tmp_path / "cases" / "wrong-label"
    shutil.copytree(GLOO05, case / "logs")
    (case / "expected.json").write_text(
        json.dumps(
            {
                "initiating_ranks": [0],
                "collateral_ranks": [1, 2, 3],
                "failure_kind": "oom_kill",
                "source": "captured",
            }
        )
    )
    r = _cli("eval", str(tmp_path / "cases"))
    assert r.returncode == 1 and "FAIL" in r.stdout
    (case / "expected.json").write_text(
        json.dumps(
            {
                "initiating_ranks": [0],
                "collateral_ranks": [1, 2, 3],
                "failure_kind": "oom_kill",
                "source": "captured",
                "known_miss": "deliberately wrong label",
            }
        )
    )
    assert _cli("eval", str(tmp_path / "cases")).returncode == 0


def test_eval_markdown_tables_the_scores_and_the_cases_that_did_not_pass(tmp_path: Path) -> None:
    """``eval -f markdown``: a heading with the count, a score row per subset and for all, and a row per case
    that did not pass with what the diagnosis said against the label. The diagnosis of gloo-05 is its own
    expected.json's answer (the corpus case passes), here scored against a wrong label."""
    import shutil

    right = json.loads((GLOO05.parent / "expected.json").read_text())
    case = tmp_path / "cases" / "wrong-label"
    shutil.copytree(GLOO05, case / "logs")
    wrong = {
        "initiating_ranks": [0],
        "collateral_ranks": [1, 2],
        "failure_kind": "rank_crash",
        "source": "captured",
    }
    (case / "expected.json").write_text(json.dumps(wrong))
    r = _cli("eval", str(tmp_path / "cases"), "-f", "markdown")
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[0] == "## rankscope eval: 0/1 cases pass, 1 regressed"
    assert [x.split(" | ")[:3] for x in lines if x.startswith(("| all |", "| real ("))] == [
        ["| real (public + captured)", "1", "0"],
        ["| all", "1", "0"],
    ]
    row = next(x for x in lines if x.startswith("| wrong-label |"))
    assert row.split(" | ")[1:5] == [
        "FAIL",
        f"{right['initiating_ranks']} ([0])",
        f"{right['collateral_ranks']} ([1, 2])",
        f"{right['failure_kind']} (rank_crash)",
    ]


def test_evaluate_reports_each_case_in_order_as_it_is_scored(tmp_path: Path) -> None:
    import shutil

    from correlator.evaluate import evaluate

    for name in ("b-case", "a-case"):
        shutil.copytree(GLOO05.parent, tmp_path / name)
    seen: list[tuple[int, int, str]] = []
    rep = evaluate(tmp_path, on_case=lambda done, total, c: seen.append((done, total, c.name)))
    assert seen == [(1, 2, "a-case"), (2, 2, "b-case")]
    assert [c.name for c in rep.cases] == ["a-case", "b-case"] and all(c.passed for c in rep.cases)


def test_timeline_partitions_by_host_and_streams_parquet_only(tmp_path: Path) -> None:
    """``timeline --partition-by host`` writes one ``host=<name>`` folder per host; ``--streaming`` writes
    parquet only (exit 2 for csv). That ``diagnose`` gives the logs' verdict from a streamed, parquet or
    partitioned input, on every corpus case: tests/test_reduced_diagnosis.py (and tests/test_job.py that the
    CLI prints it)."""
    case = CASES / "recon-01-straggler-silent-rank13-allreduce-16r" / "logs"
    ds = tmp_path / "ds"
    assert _cli("timeline", str(case), "-o", str(ds), "--partition-by", "host", "-q").returncode == 0
    assert sorted(p.name for p in ds.iterdir()) == ["host=node-a", "host=node-b"]
    assert _cli("timeline", str(case), "-o", str(tmp_path / "x.csv"), "--streaming").returncode == 2


def test_rank_partitioned_dataset_bad_parquet_and_bad_expected_json(tmp_path: Path) -> None:
    ds = tmp_path / "dsr"
    assert _cli("timeline", str(PUBLIC02), "-o", str(ds), "--partition-by", "rank", "-q").returncode == 0
    d = json.loads(_cli("diagnose", str(ds), "-f", "json").stdout)
    assert d["initiating_ranks"] == [2] and all(p["host"] != "__null__" for p in d["per_rank"])
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    r = _cli("diagnose", str(junk))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    case = tmp_path / "cases" / "c1"
    (case / "logs").mkdir(parents=True)
    (case / "logs" / "rank0.log").write_text("x\n")
    (case / "expected.json").write_text("{bad json")
    r = _cli("eval", str(tmp_path / "cases"))
    assert r.returncode == 2 and "expected.json" in r.stderr
    assert _cli("events", str(GLOO05), "-n", "-5").returncode == 2


def test_events_puts_an_unstamped_line_at_the_stamp_above_it_and_hints_at_ranks(tmp_path: Path) -> None:
    # rank0.log: a stamped line, an unstamped traceback line, a later stamped line; rank1.log: one stamped line
    # between the two. Ordered by shown time, the unstamped line sits right after the first stamp of its file.
    (tmp_path / "rank0.log").write_text(
        "2024-05-01 12:00:00,000 INFO step 1\nValueError: boom\n2024-05-01 12:00:10,000 INFO step 2\n"
    )
    (tmp_path / "rank1.log").write_text("2024-05-01 12:00:05,000 INFO step 1\n")
    r = _cli("events", str(tmp_path), "--format", "json", "-n", "0", "-q")
    order = [(e["path"], e["line"]) for e in map(json.loads, r.stdout.splitlines())]
    assert order == [("rank0.log", 1), ("rank0.log", 2), ("rank1.log", 1), ("rank0.log", 3)]
    r = _cli("events", str(tmp_path), "--rank", "7")
    assert r.returncode == 0 and "0 events match (ranks in these logs: 0-1)" in r.stderr


#: What a Python repr looks like inside a JSON string: ``<Reason.MISSING_LOGS: (…)>``, ``Note(reason=…``.
_REPR = re.compile(r"<[A-Za-z_][\w.]*[:> ]|\b[A-Z]\w*\([a-z_]+=")


def _json_strings(v: object) -> list[str]:
    if isinstance(v, dict):
        return [s for k, x in v.items() for s in [str(k), *_json_strings(x)]]
    if isinstance(v, list):
        return [s for x in v for s in _json_strings(x)]
    return [v] if isinstance(v, str) else []


def test_every_json_the_cli_writes_holds_json_values_only(tmp_path: Path) -> None:
    """graph -o g.json, diagnose -f json, events -f json, watch -f json: no Python repr anywhere. Before, the
    graph's ``reasons`` were ``"Note(reason=<Reason.MISSING_LOGS: (0.05, …)>, params=…)"``; now each is
    ``{code, weight, text}`` (public-02: 11 of its 16 ranks left no log and it has no launcher output)."""
    g = tmp_path / "g.json"
    r = runner.invoke(app, ["graph", str(PUBLIC02), "-o", str(g), "-q"])
    assert r.exit_code == 0, r.output
    graph = json.loads(g.read_text())
    assert graph["graph"]["reasons"] == [
        {"code": "MISSING_LOGS", "weight": 0.05, "text": "11 of 16 ranks left no log"},
        {"code": "NO_LAUNCHER", "weight": 0.05, "text": "no launcher output to confirm exit statuses"},
    ]
    docs: list[object] = [graph]
    docs.append(json.loads(runner.invoke(app, ["diagnose", str(PUBLIC02), "-f", "json", "-q"]).stdout))
    ev = runner.invoke(app, ["events", str(PUBLIC02), "-f", "json", "--limit", "0", "-q"]).stdout
    docs += [json.loads(ln) for ln in ev.splitlines() if ln.strip()]
    w = runner.invoke(
        app, ["watch", str(PUBLIC02), "-f", "json", "--interval", "10ms", "--max-passes", "2", "-q"]
    )
    assert w.exit_code == 0, w.output
    docs += [json.loads(ln) for ln in w.stdout.splitlines() if ln.strip()]
    reprs = [s for d in docs for s in _json_strings(d) if _REPR.search(s)]
    assert not reprs, reprs[:5]


COLBERT = CASES / "real-colbert-318-rank0-kmeans-straggler-rank1-watchdog" / "logs"


def test_events_kind_takes_the_words_users_see() -> None:
    """`events --kind watchdog_timeout` finds every line that says "Watchdog caught collective operation
    timeout", the teardown line too (`NCCL watchdog thread terminated with exception: [Rank 1] Watchdog
    caught …`, kind watchdog_teardown), also typed as the words of the line; an unknown word exits 2 and
    lists the kinds and words it knows. Before, the teardown line was left out."""
    text = (COLBERT / "console.log").read_text().splitlines()
    want = {i for i, ln in enumerate(text, 1) if "Watchdog caught collective operation timeout" in ln}
    assert len(want) >= 2
    for word in ("watchdog_timeout", "Watchdog timeout"):
        r = runner.invoke(app, ["events", str(COLBERT), "--kind", word, "-f", "json", "-n", "0", "-q"])
        assert r.exit_code == 0, r.output
        got = {(e["path"], e["line"]) for e in map(json.loads, r.stdout.splitlines())}
        assert {("console.log", i) for i in want} <= got, (word, got)
    bad = _cli("events", str(COLBERT), "--kind", "watchdog_timout")
    assert bad.returncode == 2
    assert "unknown kind watchdog_timout" in bad.stderr
    assert "watchdog_teardown" in bad.stderr and "timeout" in bad.stderr


def test_the_summary_orders_kinds_by_count_then_name_and_counts_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from correlator.cli.common import summary
    from correlator.schema import kinds_by_count

    # 14 kinds of one row each and one of five, handed over in reverse name order (a group_by's order is not
    # fixed): the five first, then the ties by name; the summary names 12 and counts the other 3.
    ties = [f"k{i:02d}" for i in range(14)]
    counts = {k: 1 for k in reversed(ties)} | {"log": 5}
    ordered = kinds_by_count(counts)
    assert list(ordered) == ["log", *ties] and ordered == counts
    s = {
        "files": 1, "lines_read": 19, "lines_skipped": 0, "rows": 19, "ranks": [0], "hosts": [], "attempts": [0],
        "rows_by_kind": ordered, "lines_not_understood": 0,
    }  # fmt: skip
    summary(s)
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("events by kind"))
    assert (
        line
        == "events by kind: log 5, " + ", ".join(f"{k} 1" for k in ties[:11]) + " and 3 more kinds (3 events)"
    )
