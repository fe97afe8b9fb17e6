"""NCCL RAS reports as evidence (issue #33 item 3), RECONSTRUCTED from NCCL's source and user guide
(tests/data/ras/README.md): each report block is one row naming the communicator, the ranks and the processes
it states; a monitor ``PEER_DEAD`` line is one row with its stamp."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import polars as pl

import correlator

DATA = Path(__file__).resolve().parent / "data" / "ras"


def _load(tmp_path: Path, name: str) -> pl.DataFrame:
    shutil.copy(DATA / name, tmp_path / name)
    return correlator.load(tmp_path)


def test_status_report_blocks(tmp_path: Path) -> None:
    t = _load(tmp_path, "status-dead.txt")
    assert t["line_count"].sum() == len((DATA / "status-dead.txt").read_text().splitlines())
    ras = t.filter(pl.col("layer") == "ras").select("kind", "pg", "seq", "ranks_named", "peer_addr", "rank")
    assert ras.rows() == [
        ("ras_dead", None, None, None, "172.16.64.213 pid 3487984", None),
        ("ras_missing", "cf264af53edbe986", None, "21", "172.16.64.213 pid 3487984", None),
        (
            "ras_mismatch",
            "27a079b828ff1a75",
            6649,
            "0,2",
            "172.16.64.210 pid 483072; 172.16.64.210 pid 483074",
            None,
        ),
    ]


def test_older_missing_rank_wording(tmp_path: Path) -> None:
    (tmp_path / "ras.txt").write_text(
        "#0-0 (cf264af53edbe986) INCOMPLETE\n  Missing communicator data from 2 ranks\n  The missing ranks: 3, 21\n"
    )
    r = correlator.load(tmp_path).row(0, named=True)
    assert (r["kind"], r["ranks_named"], r["line_count"]) == ("ras_missing", "3,21", 3)


def test_monitor_peer_dead(tmp_path: Path) -> None:
    t = _load(tmp_path, "monitor.txt")
    r = t.filter(pl.col("kind") == "ras_dead").row(0, named=True)
    assert r["peer_addr"] == "172.16.64.245 pid 1524345"
    assert r["ts"] == dt.datetime(2025, 12, 19, 13, 7, 7, tzinfo=dt.UTC)


# ------------------------------------------------------------------ JSON (``ncclras -f json``, NCCL >= 2.28.7)

RECON01 = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "cases"
    / "recon-01-straggler-silent-rank13-allreduce-16r"
)


def test_json_status_document_is_one_row(tmp_path: Path) -> None:
    """The document (356 lines with the blank line an empty ``missing_ranks`` list leaves) is one row; its
    values are the JSON's own, read here independently with json.load."""
    import json

    name = "recon01-status-missing13.json"
    t = _load(tmp_path, name)
    text = (DATA / name).read_text()
    doc = json.loads(text)
    comm = doc["communicators"][0]
    assert t["line_count"].sum() == len(text.splitlines())
    r = t.filter(pl.col("layer") == "ras").row(0, named=True)
    miss = comm["missing_ranks"][0]
    assert (r["kind"], r["line"], r["line_count"]) == ("ras_missing", 1, len(text.splitlines()))
    assert r["pg"] == comm["hash"].removeprefix("0x")
    assert r["ranks_named"] == str(miss["rank"]) == "13"
    assert r["peer_addr"] == f"{miss['host']} pid {miss['pid']}" == "192.0.2.12 pid 52016"
    assert r["world_size"] == comm["size"] == 16
    assert r["ts"] == dt.datetime(2024, 11, 29, 22, 51, 2, tzinfo=dt.UTC)


def test_json_count_mismatch_names_the_rank_behind(tmp_path: Path) -> None:
    import json

    name = "recon01-status-behind13.json"
    t = _load(tmp_path, name)
    doc = json.loads((DATA / name).read_text())
    totals = {r["rank"]: sum(r["collective_counts"].values()) for r in doc["communicators"][0]["ranks"]}
    low = min(totals.values())
    r = t.filter(pl.col("layer") == "ras").row(0, named=True)
    assert (r["kind"], r["ranks_named"], r["seq"]) == ("ras_mismatch", "13", low)
    assert [k for k, v in totals.items() if v == low] == [13]


def test_json_monitor_event(tmp_path: Path) -> None:
    t = _load(tmp_path, "recon01-monitor.json")
    r = t.filter(pl.col("layer") == "ras").row(0, named=True)
    assert (r["kind"], r["peer_addr"], r["line_count"]) == ("ras_dead", "192.0.2.12 pid 52016", 12)
    assert r["ts"] == dt.datetime(2024, 11, 29, 22, 52, 5, tzinfo=dt.UTC)


def test_text_table_all_ok_and_monitor_unresponsive(tmp_path: Path) -> None:
    t = _load(tmp_path, "recon01-status-ok.txt")
    ok = t.filter(pl.col("layer") == "ras")
    assert ok["kind"].to_list() == ["ras_ok"]
    assert ok["message"][0] == "NCCL RAS: every communicator OK (1 group(s) in the table)"
    (tmp_path / "mon.txt").write_text(
        "[2025-12-19 13:06:40] PEER_UNRESPONSIVE: Process 1524345 on node 172.16.64.245 managing GPU 1 "
        "peer not responding for 5s (connect timeout)\n"
        "[2025-12-19 13:06:41] PEER_RETRY: 172.16.64.245<43127> connection attempt timed out after 6s, "
        "attempting reconnect\n"
    )
    m = correlator.load(tmp_path).filter(pl.col("path") == "mon.txt")
    assert m["kind"].to_list() == ["ras_missing", "log"]  # PEER_RETRY says nothing about a rank
    assert m["peer_addr"][0] == "172.16.64.245 pid 1524345"
    # a table with one group not OK is no ras_ok
    (tmp_path / "bad.txt").write_text(
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
        "    #  in group  per comm  per node  per comm  in group\n"
        "    0         1         4       7-8        32        32   RUNNING  INCOMPLETE\n"
    )
    b = correlator.load(tmp_path).filter(pl.col("path") == "bad.txt")
    assert "ras_ok" not in b["kind"].to_list()


# ------------------------------------------------------------------ RAS joins the verdict


def _job_with(tmp_path: Path, name: str) -> Path:
    d = tmp_path / "job"
    shutil.copytree(RECON01 / "logs", d)
    shutil.copy(DATA / name, d / f"ncclras-{name}")
    return d


def test_ras_evidence_joins_the_diagnosis(tmp_path: Path) -> None:
    """recon-01 (rank 13 silent, the 15 others time out) with RAS's report that rank 13 is missing from the
    communicator: the RAS row is the initiating evidence, in the same diagnosis as the logs' timeouts."""
    d = correlator.diagnose(correlator.load(_job_with(tmp_path, "recon01-status-missing13.json")))
    assert d.initiating_ranks == [13]
    assert d.initiator_basis == "named by NCCL RAS / Inspector"
    ras = [e for e in d.evidence if e.kind == "ras_missing"]
    assert ras and ras[0].path == "ncclras-recon01-status-missing13.json" and ras[0].line == 1
    assert any(e.kind == "watchdog_timeout" for e in d.evidence)
    assert "RAS_NAMED" in d.confidence_reason_codes and "RAS_DISAGREES" not in d.confidence_reason_codes


def test_ras_healthy_while_ranks_timed_out_is_stated(tmp_path: Path) -> None:
    """RAS says every communicator is OK while 15 ranks timed out: the verdict (rank 13, from the logs)
    stands and says plainly that RAS disagrees; without the report there is no such note."""
    base = correlator.diagnose(correlator.load(RECON01 / "logs"))
    d = correlator.diagnose(correlator.load(_job_with(tmp_path, "recon01-status-ok.txt")))
    assert d.initiating_ranks == base.initiating_ranks == [13]
    assert "RAS_DISAGREES" in d.confidence_reason_codes
    assert "RAS_DISAGREES" not in base.confidence_reason_codes
    i = d.confidence_reason_codes.index("RAS_DISAGREES")
    waited = ", ".join(["0-12", "14-15"])
    assert d.confidence_reasons[i] == (
        f"NCCL RAS reports every communicator healthy (1 report) while ranks {waited} timed out waiting"
    )
    assert d.confidence < base.confidence
    assert any(e.kind == "ras_ok" and e.role.startswith("NCCL report (disagrees") for e in d.evidence)


def test_ras_names_another_rank_than_the_logs(tmp_path: Path) -> None:
    from correlator import rasview

    cs = [rasview.Claim("dead", [5], 1, "NCCL RAS")]
    assert rasview.disagreement(cs, [13], []) == "NCCL RAS reports rank 5 dead while the logs name rank 13"
    assert rasview.disagreement(cs, [5], []) is None
    ok = [rasview.Claim("ok", [], 1, "NCCL RAS")]
    assert rasview.disagreement(ok, [], []) is None


def test_ras_names_the_rank_of_a_hang_stopped_from_outside(tmp_path: Path) -> None:
    """stk-01's log-only copy (every rank stopped advancing, then torchrun was SIGTERMed: ``unknown``, no rank)
    with a RAS INCOMPLETE block naming communicator rank 1 (the text format of client_support.cc; the capture ran
    gloo, so the block is added here only to test the rule): the verdict names rank 1 from RAS instead of
    stopping at 'stopped from outside'."""
    src = (
        Path(__file__).resolve().parents[1]
        / "fixtures"
        / "cases"
        / "stk-01-dataloader-read-hang-logs-only"
        / "logs"
    )
    d = tmp_path / "job"
    shutil.copytree(src, d)
    base = correlator.diagnose(correlator.load(d))
    assert (base.initiating_ranks, base.failure_kind) == ([], "unknown")
    (d / "ras.txt").write_text(
        "#0-0 (0a1b2c3d4e5f6071) INCOMPLETE\n  Missing communicator data from 1 rank\n"
        "  Rank 1 -- GPU 0 managed by process 17607 on node 192.0.2.10\n"
    )
    v = correlator.diagnose(correlator.load(d))
    assert (v.initiating_ranks, v.failure_kind, v.initiator_basis) == (
        [1],
        "straggler_hang",
        "named by NCCL RAS / Inspector",
    )
    assert [e.path for e in v.evidence if e.kind == "ras_missing"] == ["ras.txt"]
