"""Issue #15 item 4: each trust defect on a minimal input written here (the expected values follow from
reading the lines)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import correlator
from correlator.faults import fault_rows
from tests.test_diagnose_units import ev, table

DUMP = (
    "[rank{r}]:[E703 21:51:54.112142364 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
    "Received a dump signal due to a collective timeout from {src} and we will try our best to dump the debug "
    "info. Last enqueued NCCL work: 56116, last completed NCCL work: 56115.This is most likely caused by "
    "incorrect usages of collectives"
)


def _load(root: Path, text: str, name: str = "console.log") -> pl.DataFrame:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text + "\n")
    return correlator.load(root)


# --- c. the heartbeat monitor's "collective timeout from  rank N" names N ---------------------------------


@pytest.mark.parametrize(("src", "peer"), [(" rank 7", 7), ("this local rank", None)])
def test_dump_signal_captures_the_rank_that_timed_out(tmp_path: Path, src: str, peer: int | None) -> None:
    # getNCCLWatchdogTimeoutErrorMsg(c10::str(" rank ", timeOutRank)): "from  rank 7" (two spaces)
    t = _load(tmp_path, DUMP.format(r=6, src=src))
    assert t.select("rank", "kind", "peer_rank", "seq_enqueued", "seq_completed").rows() == [
        (6, "heartbeat_timeout", peer, 56116, 56115)
    ]


# --- a. exits past 128 and the launcher's SIGTERM / SIGHUP are effects --------------------------------------


@pytest.mark.parametrize("code", [129, 143, 137])
def test_exit_past_128_is_an_effect_and_not_the_initiator(tmp_path: Path, code: int) -> None:
    pfx = "ERROR:torch.distributed.elastic.multiprocessing.api:"
    text = "\n".join(
        [
            f"{pfx}failed (exitcode: {code}) local_rank: 0 (pid: 4241) of binary: /usr/bin/python",
            f"{pfx}failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python",
        ]
    )
    t = _load(tmp_path, text)
    assert fault_rows(t).sort("rank").select("rank", "role").rows() == [(0, "effect"), (1, "exit")]
    assert correlator.diagnose(t).initiating_ranks == [1]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_launcher_signal_is_an_effect(sig: str) -> None:
    assert fault_rows(table([ev(0, "worker_failed", 1, signal=sig)]))["role"].to_list() == ["effect"]


# --- b. the host comes from evidence, never from an arbitrary folder name -----------------------------------

WD = (
    "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600060 "
    "milliseconds before timing out."
)
NCCL_WARN = "trn-17:4242:4300 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion with error 12"


@pytest.mark.parametrize(
    ("rel", "text", "host"),
    [
        ("exp/llama-7b-sft/notes.txt", WD, None),  # an experiment folder is no host
        ("runs/2024-05-01/rank0.log", WD, None),  # nor is a date folder
        ("node-3/console.log", WD, "node-3"),  # a node folder is
        ("host-x/console.log", WD, "host-x"),
        ("exp/llama-7b-sft/notes.txt", NCCL_WARN, "trn-17"),  # NCCL's host:pid:tid prefix names the host
    ],
)
def test_host_comes_from_evidence_not_any_folder(
    tmp_path: Path, rel: str, text: str, host: str | None
) -> None:
    t = _load(tmp_path, text, rel)
    assert t["host"].unique().to_list() == [host]
