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
