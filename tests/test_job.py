"""The one facade (issue #31): a Job makes one verdict, and its graph and trace are read off that verdict."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import polars as pl
import pytest

from correlator.errors import InputError
from correlator.job import open_job
from tests.conftest import CASES

SOME = [
    "cap-08-sigkill-8r",
    "cap-05-collective-mismatch-detail",
    "real-sglang-5013-localrank7-gone-service-thread-closed",
]


PUBLIC02 = CASES / "public-02-oom-rank2-multinode-timeouts" / "logs"
FR02 = CASES / "fr-02-op-mismatch" / "logs"
#: (id, input, CLI options, open_job options): varied cases, every input mode, the options that change the
#: reading (``--fr``, ``--redact``, ``--attempt``), input diagnose refuses. ``parquet`` and ``dataset``:
#: PUBLIC02 written by ``rankscope timeline`` (one file; partitioned by host).
FORMS: list[tuple[str, str, list[str], dict[str, object]]] = [
    *[(case, case, [], {}) for case in SOME],
    ("fr", "fr-02-op-mismatch", ["--fr", str(FR02 / "fr")], {"fr": FR02 / "fr"}),
    ("streaming", PUBLIC02.parent.name, ["--streaming"], {"streaming": True}),
    ("redact", PUBLIC02.parent.name, ["--redact"], {"redact": True}),
    (
        "streaming-redact",
        PUBLIC02.parent.name,
        ["--streaming", "--redact"],
        {"streaming": True, "redact": True},
    ),
    ("no-streaming", PUBLIC02.parent.name, ["--no-streaming"], {"streaming": False}),
    ("attempt-0", PUBLIC02.parent.name, ["--attempt", "0"], {"attempt": 0}),
    ("parquet", "parquet", [], {}),
    ("dataset", "dataset", [], {}),
    ("blank-lines-refused", "blank", [], {}),
]


@pytest.mark.parametrize(("what", "cli_opts", "options"), [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
def test_the_job_verdict_is_what_the_cli_prints(
    what: str, cli_opts: list[str], options: dict[str, object], tmp_path: Path
) -> None:
    """``open_job(p, **options).to_json()`` is byte for byte what ``rankscope diagnose p -f json`` prints;
    input the CLI refuses, the job refuses with the same error. (That every input mode prints the verdict of
    the whole table, on every corpus case: tests/test_reduced_diagnosis.py.)"""
    from typer.testing import CliRunner

    from correlator.cli import app

    runner = CliRunner()
    if what in ("parquet", "dataset"):
        path = tmp_path / ("t.parquet" if what == "parquet" else "ds")
        args = ["-o", str(path), "-q"] + (["--partition-by", "host"] if what == "dataset" else [])
        assert runner.invoke(app, ["timeline", str(PUBLIC02), *args]).exit_code == 0
    elif what == "blank":
        path = tmp_path / "logs"
        path.mkdir()
        (path / "console.log").write_text("\n  \n")  # nothing but blank lines
    else:
        path = CASES / what / "logs"
    r = runner.invoke(app, ["diagnose", str(path), *cli_opts, "--format", "json"])
    job = open_job(path, **options)
    if what == "blank":
        assert isinstance(r.exception, InputError), r.output  # (exit code 2 from `rankscope`: test_cli)
        with pytest.raises(InputError) as e:
            job.to_json()
        assert str(e.value) == str(r.exception)
        return
    assert r.exit_code == 0, r.output
    want_mode = (
        what if what in ("parquet", "dataset") else "streaming" if options.get("streaming") else "logs"
    )
    assert job.mode == want_mode
    assert job.to_json() + "\n" == r.stdout


@pytest.mark.parametrize("case", SOME)
def test_the_graph_is_the_verdicts_own(case: str) -> None:
    job = open_job(CASES / case / "logs")
    d, G = job.diagnose(), job.graph()
    assert G is job.graph()  # built once
    assert sorted(G.graph["initiators"]) == d.initiating_ranks
    assert G.graph["initiator_basis"] == d.initiator_basis
    status = {r.rank: r.status for r in d.per_rank}
    assert {n: G.nodes[n]["status"] for n in G.nodes} == status
    explained = {r.rank: (r.explained_by.rank, r.explained_by.edge) for r in d.per_rank if r.explained_by}
    assert {a: (b, data["edge"]) for a, b, data in G.edges(data=True)} == explained


def test_a_last_resort_verdict_is_graphed_from_its_records(tmp_path: Path) -> None:
    (tmp_path / "launch.log").write_text(
        "LAUNCH INFO 2024-03-05 10:00:05,000 Waiting for peers\n"
        "ABORT!!! Out of all 4 trainers, the trainer process with rank=[3] was aborted. Please check its log.\n"
    )
    job = open_job(tmp_path)
    d = job.diagnose()
    G = job.graph()
    assert d.initiating_ranks == [3]
    assert G.graph["initiators"] == [3] and G.nodes[3]["status"] == "initiating"
    out = tmp_path.parent / "g.json"
    assert job.write_graph(out) == "json"
    assert nx.node_link_graph(__import__("json").loads(out.read_text()), edges="edges").nodes[3][
        "status"
    ] == ("initiating")


def test_mode_says_how_the_input_is_read(tmp_path: Path) -> None:
    logs = CASES / "cap-08-sigkill-8r" / "logs"
    assert open_job(logs).mode == "logs"
    assert open_job(logs, streaming=True).mode == "streaming"
    pq = tmp_path / "t.parquet"
    open_job(logs).table().write_parquet(pq)
    assert open_job(pq).mode == "parquet"
    with pytest.raises(TypeError):
        open_job(logs, colour="red")


def test_a_full_table_gives_the_same_verdict_and_every_line(tmp_path: Path) -> None:
    # NCCL COLL lines (parsers/nccl.py's real line, opCount 0x1f4 onwards), then rank 1's exception: a lean
    # job keeps only the last few COLL lines per communicator, a full one all 20.
    coll = (
        "node-a:41237:41237 [0] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f3b52000000 recvbuff "
        "0x7f3b52000000 count 25165824 datatype 7 op 0 root 0 comm 0x55d0c3a4e2b0 [nranks=2] stream 0x55d0c2f1a9e0"
    )
    (tmp_path / "rank0.log").write_text("\n".join(coll.format(op=500 + i) for i in range(20)) + "\n")
    (tmp_path / "rank1.log").write_text("[rank1]: RuntimeError: corrupt batch\n")
    lean, full = open_job(tmp_path), open_job(tmp_path, full_table=True)
    assert full.to_json() == lean.to_json()
    n_coll = [j.table().filter(pl.col("kind") == "nccl_coll").height for j in (lean, full)]
    assert n_coll[1] == 20 and n_coll[0] < 20
