"""Every confidence reason a rule can record, raised through the public path on a minimal input (issue #31 item 6).

Each test writes a few log lines in the shapes the tools print (copied from the parsers' example lines, from
``fixtures/cases/*/logs`` or from tests/test_generalize.py) to ``tmp_path``, runs
``correlator.diagnose(correlator.load(dir))`` and asserts the member's name in ``confidence_reason_codes``
together with the verdict it qualifies (initiating ranks, failure kind, basis), read off the input by hand.
Where the rule has a threshold or a condition (a count, a one-second window, "more than half"), the input just
across it is checked too: the reason is then NOT recorded, so moving the threshold or dropping the condition
fails a test. The last test asserts that every :class:`correlator.confidence.Reason` member is asserted by
name in one of a listed set of test files.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

import correlator
from correlator import Diagnosis
from correlator.confidence import Reason

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "fixtures" / "cases"


def _diagnose(tmp_path: Path, text: str | None = None, files: dict[str, str] | None = None) -> Diagnosis:
    """Write ``text`` as ``console.log`` (or each of ``files``, relative paths) under ``tmp_path`` and diagnose."""
    for name, body in (files or {"console.log": text or ""}).items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body + "\n")
    return correlator.diagnose(correlator.load(tmp_path))


def _sub(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    return d


def _verdict(d: Diagnosis) -> tuple[list[int], str, str]:
    return d.initiating_ranks, d.failure_kind, d.initiator_basis


# -- lines as the tools print them --------------------------------------------------------------------------------

#: ProcessGroupNCCL watchdog, torch 2.4+ (tests/test_generalize.py, issue #11 shapes); {s} the second.
WATCHDOG = (
    "[rank{r}]:[E1201 10:10:{s:02d}.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum={q}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for "
    "600010 milliseconds before timing out."
)
#: The same, torch <= 2.1 (no [rankN] prefix, no Numel fields): aioz-ai/GCD#6, LlamaFactory#2424.
OLD_WD = (
    "[E ProcessGroupNCCL.cpp:737] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=56693, "
    "OpType={op}, Timeout(ms)=1800000) ran for 180437{r} milliseconds before timing out."
)
#: ProcessGroupWrapper DETAIL fingerprint, torch 2.x (parsers/c10d.py "fingerprint"); {s} is "SS.fffffffff".
FINGERPRINT = (
    "[rank{r}]:[I1201 10:00:{s} ProcessGroupWrapper.cpp:710] [Rank {r}] Running collective: "
    "CollectiveFingerPrint(SequenceNumber={q}, OpType={op})"
)
#: torchelastic's agent (torch 1.9 – 2.x api.py), as in pytorch#88251.
AGENT = "ERROR:torch.distributed.elastic.multiprocessing.api:"
FAILED = AGENT + "failed (exitcode: {code}) local_rank: {lr} (pid: {pid}) of binary: /usr/bin/python"
#: NCCL's own lines (parsers/nccl.py examples; nranks/cudaDev as in tests/test_generalize.py).
BOOTSTRAP = "{h}:{pid}:{pid} [{d}] NCCL INFO Bootstrap : Using eth0:{ip}<0>"
NCCL_INIT = "{h}:{pid}:{pid} [{d}] NCCL INFO comm 0x55d0c3a4e2b0 rank {r} nranks {w} cudaDev {d} busId 1b000 - Init COMPLETE"
IB_COMPLETION = (
    "[2026-03-14 09:12:{s}] {h}:{pid}:{tid} [{d}] transport/net_ib.cc:2543 NCCL WARN NET/IB: Got completion from "
    "peer {peer}<44871> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=129"
)
NCCL_OOM = (
    "[2026-03-14 09:12:{s}] node-a:{pid}:{pid} [{r}] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'"
)
#: gloo's size enforce (parsers/c10d.py "gloo_size_mismatch", gloo 2024 – 2025): a mismatch with no seq or op.
GLOO_SIZE = (
    "terminate called after throwing an instance of 'gloo::EnforceNotMet' what():  [enforce fail at "
    "/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 384 vs "
    "256. Received data size doesn't match expected size. Is there a distributed collective mismatch in your code?"
)


# -- correlator.initiators: odd one out ---------------------------------------------------------------------------


def test_even_split_when_no_side_is_a_majority(tmp_path: Path) -> None:
    # Rank 0 timed out in ALLREDUCE seq 5, rank 1 in BROADCAST seq 5: one each, nobody is the odd one out.
    d = _diagnose(
        tmp_path,
        "\n".join(
            [
                WATCHDOG.format(r=0, s=0, q=5, op="ALLREDUCE", n=8),
                WATCHDOG.format(r=1, s=1, q=5, op="BROADCAST", n=8),
            ]
        ),
    )
    assert _verdict(d) == ([0, 1], "collective_mismatch", "odd one out")
    assert "EVEN_SPLIT" in d.confidence_reason_codes
    # Two against two on the size (8 vs 16): still even.
    d = _diagnose(
        _sub(tmp_path, "size"),
        "\n".join(WATCHDOG.format(r=r, s=r, q=5, op="ALLREDUCE", n=8 if r < 2 else 16) for r in range(4)),
    )
    assert _verdict(d) == ([0, 1, 2, 3], "collective_mismatch", "odd one out")
    assert "EVEN_SPLIT" in d.confidence_reason_codes


def test_no_even_split_when_two_agree(tmp_path: Path) -> None:
    # A third rank in ALLREDUCE makes a majority of two: rank 1 is odd, and the verdict is not an even split.
    lines = [
        WATCHDOG.format(r=0, s=0, q=5, op="ALLREDUCE", n=8),
        WATCHDOG.format(r=1, s=1, q=5, op="BROADCAST", n=8),
        WATCHDOG.format(r=2, s=2, q=5, op="ALLREDUCE", n=8),
    ]
    d = _diagnose(tmp_path, "\n".join(lines))
    assert _verdict(d) == ([1], "collective_mismatch", "odd one out")
    assert "EVEN_SPLIT" not in d.confidence_reason_codes


def test_shape_and_numel_of_the_same_collective_are_not_a_split(tmp_path: Path) -> None:
    # Rank 1's fingerprint of ALLREDUCE seq 5 with TensorShape=[8] (8 elements); rank 0 timed out in ALLREDUCE
    # seq 5 with NumelIn=8. The same collective: neither an even split nor a mismatch.
    fingerprint = (
        "[rank1]:[I1201 10:00:01.000000000 ProcessGroupWrapper.cpp:710] [Rank 1] Running collective: "
        "CollectiveFingerPrint(SequenceNumber=5, OpType=ALLREDUCE, TensorShape=[8], TensorDtypes=Float)"
    )
    d = _diagnose(tmp_path, "\n".join([fingerprint, WATCHDOG.format(r=0, s=5, q=5, op="ALLREDUCE", n=8)]))
    assert "EVEN_SPLIT" not in d.confidence_reason_codes
    assert d.failure_kind != "collective_mismatch"
    # a real size difference in the same mix is still one: [2, 4] is 8 elements, NumelIn=6 is not
    other = tmp_path / "other"
    other.mkdir()
    fp24 = fingerprint.replace("TensorShape=[8]", "TensorShape=[2, 4]")
    d = _diagnose(other, "\n".join([fp24, WATCHDOG.format(r=0, s=5, q=5, op="ALLREDUCE", n=6)]))
    assert d.failure_kind == "collective_mismatch"


#: One application config line per rank (Python logging's default asctime; parsers/app.py ASCTIME), one file per rank.
_CONFIG = "2026-11-29 23:08:3{r},362 INFO [trainer] rank={r} micro_batch_size={bs} seq_len=2048"


def _config_files(bs: dict[int, int], mismatch: bool = True) -> dict[str, str]:
    """rank<r>.log: the rank's config line; rank 0's also the gloo size mismatch (which names no seq, no op)."""
    return {
        f"rank{r}.log": _CONFIG.format(r=r, bs=bs[r]) + ("\n" + GLOO_SIZE if r == 0 and mismatch else "")
        for r in range(4)
    }


def test_config_line_names_the_odd_rank_of_a_mismatch(tmp_path: Path) -> None:
    # The mismatch says nothing of who is odd; rank 2 printed micro_batch_size=64 where ranks 0, 1, 3 printed 32.
    d = _diagnose(tmp_path, files=_config_files({0: 32, 1: 32, 2: 64, 3: 32}))
    assert _verdict(d) == ([2], "collective_mismatch", "odd one out")
    assert "CONFIG_LINE" in d.confidence_reason_codes
    assert "ODD_RANK_UNDETERMINED" not in d.confidence_reason_codes


def test_config_line_needs_a_mismatch_and_one_odd_rank(tmp_path: Path) -> None:
    # The same odd config line without a mismatch error: no fault at all, so no verdict and no reason.
    d = _diagnose(tmp_path, files=_config_files({0: 32, 1: 32, 2: 64, 3: 32}, mismatch=False))
    assert (d.initiating_ranks, d.failure_kind) == ([], "none")
    assert "CONFIG_LINE" not in d.confidence_reason_codes
    # Two ranks against two: no single odd rank; nor when every rank printed the same (see ODD_RANK_UNDETERMINED).
    d = _diagnose(_sub(tmp_path, "two"), files=_config_files({0: 32, 1: 32, 2: 64, 3: 64}))
    assert "CONFIG_LINE" not in d.confidence_reason_codes


def test_odd_rank_undetermined_names_the_silent_ranks(tmp_path: Path) -> None:
    # Rank 0 reports the mismatch, every rank printed the same config: the silent ranks 1-3 are only suspects.
    d = _diagnose(tmp_path, files=_config_files({0: 32, 1: 32, 2: 32, 3: 32}))
    assert _verdict(d) == ([1, 2, 3], "collective_mismatch", "silent while the others failed")
    assert "ODD_RANK_UNDETERMINED" in d.confidence_reason_codes


def test_silence_without_a_mismatch_is_not_undetermined(tmp_path: Path) -> None:
    # The same silence rule, with watchdog timeouts and no mismatch line: a straggler, not an undetermined odd rank.
    d = _diagnose(tmp_path, "\n".join(_nccl_world(3, [0, 1, 2]) + [_wd5(0), _wd5(1)]))
    assert _verdict(d) == ([2], "straggler_hang", "silent while the others failed")
    assert "ODD_RANK_UNDETERMINED" not in d.confidence_reason_codes


# -- correlator.initiators: first causes -------------------------------------------------------------------------


def _raised(ranks: list[int], others: list[int], exc: dict[int, str] | None = None) -> str:
    """``[rankN]: <Exc>: shard 17 is corrupt`` for ``ranks`` (excepthook prefix, test_generalize.py), a plain
    progress line for ``others``."""
    exc = exc or {}
    return "\n".join(
        [f"[rank{r}]: {exc.get(r, 'ValueError')}: shard 17 is corrupt" for r in ranks]
        + [f"[rank{r}]: step 1" for r in others]
    )


def test_common_mode_at_half_the_ranks(tmp_path: Path) -> None:
    # Two of five ranks raise the same ValueError: 2 >= max(2, 5 // 2) -> common mode.
    d = _diagnose(tmp_path, _raised([0, 1], [2, 3, 4]))
    assert _verdict(d) == ([0, 1], "rank_crash", "common mode")
    assert "COMMON_MODE" in d.confidence_reason_codes
    assert "INDEPENDENT_FAILURES" not in d.confidence_reason_codes


def test_independent_failures_below_half_or_with_different_exceptions(tmp_path: Path) -> None:
    # Two of six: 2 < 6 // 2, independent failures (both named), not common mode.
    d = _diagnose(tmp_path, _raised([0, 1], [2, 3, 4, 5]))
    assert _verdict(d) == ([0, 1], "rank_crash", "first fault")
    assert "INDEPENDENT_FAILURES" in d.confidence_reason_codes
    assert "COMMON_MODE" not in d.confidence_reason_codes
    # Two of four but different exceptions: no common cause.
    d = _diagnose(_sub(tmp_path, "diff"), _raised([0, 1], [2, 3], {1: "KeyError"}))
    assert _verdict(d) == ([0, 1], "rank_crash", "first fault")
    assert "INDEPENDENT_FAILURES" in d.confidence_reason_codes
    assert "COMMON_MODE" not in d.confidence_reason_codes


def _oom_then_timeout(oom_second_rank2: int) -> str:
    """Six ranks on one node: rank 0 runs out of memory at 09:12:47, rank 1's watchdog (the first reaction)
    fires at 09:12:48, rank 2 runs out of memory at 09:12:<oom_second_rank2>; ranks 3-5 print progress."""
    wd = (
        "[rank1]:[E314 09:12:48.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600010 "
        "milliseconds before timing out."
    )
    return "\n".join(
        [
            NCCL_OOM.format(s=47, pid=3018451, r=0),
            NCCL_OOM.format(s=oom_second_rank2, pid=3018453, r=2),
            wd,
            *(f"[rank{r}]: step 1" for r in (3, 4, 5)),
        ]
    )


def test_a_cause_after_the_first_reaction_is_not_independent(tmp_path: Path) -> None:
    # Rank 2's OOM at :47, before rank 1 reacted at :48: both 0 and 2 failed independently (2 of 6: not common mode).
    d = _diagnose(tmp_path, _oom_then_timeout(47))
    assert _verdict(d) == ([0, 2], "cuda_oom", "first fault")
    assert "INDEPENDENT_FAILURES" in d.confidence_reason_codes
    # At :49, after the reaction: rank 2's OOM may be a consequence; rank 0 alone, no reason.
    d = _diagnose(_sub(tmp_path, "after"), _oom_then_timeout(49))
    assert _verdict(d) == ([0], "cuda_oom", "first fault")
    assert "INDEPENDENT_FAILURES" not in d.confidence_reason_codes


def test_exit_status_only(tmp_path: Path) -> None:
    # torchrun reports local rank 0 failed with exit code 1; the rank itself said nothing.
    d = _diagnose(tmp_path, FAILED.format(code=1, lr=0, pid=4241))
    assert _verdict(d) == ([0], "rank_crash", "exit status")
    assert "EXIT_STATUS_ONLY" in d.confidence_reason_codes
    # The same exit with the rank's own exception: the exception decides, the exit is not the only evidence.
    d = _diagnose(
        _sub(tmp_path, "raised"),
        "[rank0]: ValueError: shard 17 is corrupt\n" + FAILED.format(code=1, lr=0, pid=4241),
    )
    assert _verdict(d) == ([0], "rank_crash", "first fault")
    assert "EXIT_STATUS_ONLY" not in d.confidence_reason_codes


# -- correlator.initiators: network --------------------------------------------------------------------------------

_IPS = {"node-a": "192.0.2.11", "node-b": "192.0.2.12"}


def _two_nodes() -> list[str]:
    """Ranks 0, 1 on node-a and 2, 3 on node-b: NCCL's bootstrap address and init line for each (pid 4000 + r)."""
    out = []
    for r in range(4):
        h, dev, pid = ("node-a" if r < 2 else "node-b"), r % 2, 4000 + r
        out += [
            BOOTSTRAP.format(h=h, pid=pid, d=dev, ip=_IPS[h]),
            NCCL_INIT.format(h=h, pid=pid, d=dev, r=r, w=4),
        ]
    return out


def _ib(rank: int, second: int, peer_host: str) -> str:
    h = "node-a" if rank < 2 else "node-b"
    return IB_COMPLETION.format(
        s=second, h=h, pid=4000 + rank, tid=4100 + rank, d=rank % 2, peer=_IPS[peer_host]
    )


def test_peer_host_silent(tmp_path: Path) -> None:
    # Both ranks of node-a lose their IB peer 192.0.2.12 (node-b), and node-b's ranks logged nothing after init.
    d = _diagnose(tmp_path, "\n".join(_two_nodes() + [_ib(0, 47, "node-b"), _ib(1, 47, "node-b")]))
    assert _verdict(d) == ([2, 3], "network_error", "peer host node-b unreachable")
    assert "PEER_HOST_SILENT" in d.confidence_reason_codes


def test_network_errors_tied_within_one_second(tmp_path: Path) -> None:
    # Rank 0 (node-a) and rank 2 (node-b) each lose the other side in the same second: which link failed is open.
    # (A node-b rank reporting too means node-b did not go silent: no PEER_HOST_SILENT.)
    d = _diagnose(tmp_path, "\n".join(_two_nodes() + [_ib(0, 47, "node-b"), _ib(2, 47, "node-a")]))
    assert _verdict(d) == ([0, 2], "network_error", "first network error")
    assert "NETWORK_ERRORS_TIED" in d.confidence_reason_codes
    assert "PEER_HOST_SILENT" not in d.confidence_reason_codes


def test_network_errors_one_second_apart_are_not_tied(tmp_path: Path) -> None:
    # Rank 2's error one second after rank 0's: outside the window (< 1 s), rank 0 is first.
    d = _diagnose(tmp_path, "\n".join(_two_nodes() + [_ib(0, 47, "node-b"), _ib(2, 48, "node-a")]))
    assert _verdict(d) == ([0], "network_error", "first network error")
    assert "NETWORK_ERRORS_TIED" not in d.confidence_reason_codes
    assert "PEER_HOST_SILENT" not in d.confidence_reason_codes


# -- correlator.initiators: barrier, waiters, progress ------------------------------------------------------------

#: ProcessGroupGloo monitoredBarrier (parsers/c10d.py example, torch 1.10 – 2.13).
BARRIER = (
    "[rank0]:[E1129 23:08:36.778382438 ProcessGroupGloo.cpp:2901] [Rank 0]: Rank {p} failed to pass "
    "monitoredBarrier in 15000 ms"
)


def test_barrier_rank_moved_on(tmp_path: Path) -> None:
    # The barrier names rank 2, but rank 2 timed out in an ALLGATHER of its own: it ran another collective.
    text = "\n".join(
        [BARRIER.format(p=2), "[rank1]: step 1", WATCHDOG.format(r=2, s=42, q=7, op="ALLGATHER", n=8)]
    )
    d = _diagnose(tmp_path, text)
    assert _verdict(d) == ([2], "collective_mismatch", "named by monitoredBarrier")
    assert "BARRIER_RANK_MOVED_ON" in d.confidence_reason_codes
    # Rank 2 silent: it is stuck, a straggler named by the barrier; it did not move on.
    d = _diagnose(
        _sub(tmp_path, "stuck"), "\n".join([BARRIER.format(p=2), "[rank1]: step 1", "[rank2]: step 1"])
    )
    assert _verdict(d) == ([2], "straggler_hang", "named by monitoredBarrier")
    assert "BARRIER_RANK_MOVED_ON" not in d.confidence_reason_codes


#: c10d's store wait for the NCCL unique id (NVIDIA/nccl#865 shape, tests/test_generalize.py).
NCCL_ID = (
    "RuntimeError: [{r}] is setting up NCCL communicator and retrieving ncclUniqueId from [{p}] via c10d key-value "
    "store by key '0', but store->get('0') got error: Socket Timeout"
)


def test_named_by_waiters(tmp_path: Path) -> None:
    # Ranks 1 and 2 wait for rank 0's unique id; rank 0 said nothing.
    d = _diagnose(tmp_path, "\n".join([NCCL_ID.format(r=1, p=0), NCCL_ID.format(r=2, p=0)]))
    assert _verdict(d) == ([0], "straggler_hang", "named by the ranks waiting for it")
    assert d.collateral_ranks == [1, 2]
    assert "NAMED_BY_WAITERS" in d.confidence_reason_codes


def test_not_named_by_waiters_on_a_tie_or_an_own_error(tmp_path: Path) -> None:
    # One vote for rank 0, one for rank 3: a tie names nobody by votes.
    d = _diagnose(tmp_path, "\n".join([NCCL_ID.format(r=1, p=0), NCCL_ID.format(r=2, p=3)]))
    assert d.initiator_basis != "named by the ranks waiting for it"
    assert "NAMED_BY_WAITERS" not in d.confidence_reason_codes
    # Rank 0 raised an error of its own: its own error names it, not the waiters.
    d = _diagnose(
        _sub(tmp_path, "own"),
        "\n".join(["[rank0]: ValueError: shard 17 is corrupt", NCCL_ID.format(r=1, p=0)]),
    )
    assert _verdict(d) == ([0], "rank_crash", "first fault")
    assert "NAMED_BY_WAITERS" not in d.confidence_reason_codes


def _progress(ahead: list[int], timed: list[int]) -> str:
    """Ranks ``ahead`` entered ALLREDUCE seq 5 and 6 (DETAIL fingerprints); ranks ``timed`` timed out in seq 5."""
    return "\n".join(
        [FINGERPRINT.format(r=r, s=f"0{q - 4}.000000000", q=q, op="ALLREDUCE") for r in ahead for q in (5, 6)]
        + [WATCHDOG.format(r=r, s=5, q=5, op="ALLREDUCE", n=8) for r in timed]
    )


def test_minority_progress_either_side(tmp_path: Path) -> None:
    # Rank 0 timed out in seq 5, which ranks 1-3 went past: rank 0 is the minority.
    d = _diagnose(tmp_path, _progress([1, 2, 3], [0]))
    assert _verdict(d) == ([0], "collective_mismatch", "odd one out")
    assert "MINORITY_PROGRESS" in d.confidence_reason_codes
    # Ranks 0-2 timed out in seq 5, rank 3 went past it: rank 3 is the minority.
    d = _diagnose(_sub(tmp_path, "ahead"), _progress([3], [0, 1, 2]))
    assert _verdict(d) == ([3], "collective_mismatch", "odd one out")
    assert "MINORITY_PROGRESS" in d.confidence_reason_codes


def test_no_minority_progress_on_an_even_split(tmp_path: Path) -> None:
    # Two went past, two timed out: neither side is a minority.
    d = _diagnose(tmp_path, _progress([2, 3], [0, 1]))
    assert "MINORITY_PROGRESS" not in d.confidence_reason_codes
    assert d.initiator_basis != "odd one out"


# -- correlator.initiators: silence ------------------------------------------------------------------------------

#: ProcessGroupNCCL's watchdog exception and dump-signal lines, torch 2.4+ (tests/test_generalize.py).
_PGNCCL = "[rank{r}]:[E1201 10:00:0{s}.100000000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
_DETECTED = _PGNCCL + (
    "Exception (either an error or timeout) detected by watchdog at work: 88, last enqueued NCCL work: 88, last "
    "completed NCCL work: 87."
)
_DUMP_SIGNAL = _PGNCCL + (
    "Received a dump signal due to a collective timeout from  rank 0 and we will try our best to dump the debug "
    "info. Last enqueued NCCL work: {enq}, last completed NCCL work: 87."
)


def _dump_signal(rank2_enqueued: int) -> str:
    """Ranks 0, 1, 3 entered work 88 and timed out; rank 2 got the dump signal with last enqueued work
    ``rank2_enqueued``."""
    timed_out = [_DETECTED.format(r=r, s=0) for r in (0, 1, 3)]
    return "\n".join([*timed_out, _DUMP_SIGNAL.format(r=2, s=1, enq=rank2_enqueued)])


def test_lagging_seq(tmp_path: Path) -> None:
    # Rank 2 never enqueued work 88 (its last is 87): it is behind.
    d = _diagnose(tmp_path, _dump_signal(87))
    assert _verdict(d) == ([2], "straggler_hang", "behind on the collective sequence")
    assert "LAGGING_SEQ" in d.confidence_reason_codes


def test_no_lagging_seq_when_every_rank_entered(tmp_path: Path) -> None:
    # Rank 2 enqueued 88 too: nobody is behind, and nothing else explains the timeouts.
    d = _diagnose(tmp_path, _dump_signal(88))
    assert _verdict(d) == ([], "unknown", "")
    assert "LAGGING_SEQ" not in d.confidence_reason_codes
    assert "NONE_EXPLAINS" in d.confidence_reason_codes


def _nccl_world(world: int, ranks: list[int]) -> list[str]:
    """NCCL init lines (``nranks world``) on one node for ``ranks`` (pid 4242 + r)."""
    return [NCCL_INIT.format(h="node-a", pid=4242 + r, d=r, r=r, w=world) for r in ranks]


def _wd5(r: int) -> str:
    """Rank ``r``'s watchdog timeout in ALLREDUCE seq 5."""
    return WATCHDOG.format(r=r, s=5, q=5, op="ALLREDUCE", n=8)


def test_initiator_left_no_log(tmp_path: Path) -> None:
    # nranks 3, ranks 0 and 1 logged and timed out; rank 2 left not one line.
    d = _diagnose(tmp_path, "\n".join(_nccl_world(3, [0, 1]) + [_wd5(0), _wd5(1)]))
    assert _verdict(d) == ([2], "straggler_hang", "left no log")
    assert "INITIATOR_LEFT_NO_LOG" in d.confidence_reason_codes
    # Rank 2 printed its init line: it has a log, it is found by its silence instead.
    d = _diagnose(_sub(tmp_path, "init"), "\n".join(_nccl_world(3, [0, 1, 2]) + [_wd5(0), _wd5(1)]))
    assert _verdict(d) == ([2], "straggler_hang", "silent while the others failed")
    assert "INITIATOR_LEFT_NO_LOG" not in d.confidence_reason_codes


def test_rank0_likely_when_the_one_absent_rank_is_the_root(tmp_path: Path) -> None:
    # aioz-ai/GCD#6 shape: ranks 1-3 time out in a BROADCAST, rank 0 (its root by default) is absent.
    d = _diagnose(tmp_path, "\n".join(OLD_WD.format(r=r, op="BROADCAST") for r in (3, 2, 1)))
    assert _verdict(d) == ([0], "straggler_hang", "absent from the excerpt")
    assert "RANK0_LIKELY" in d.confidence_reason_codes


def test_rank0_not_likely_without_a_reason_or_with_two_absent(tmp_path: Path) -> None:
    # ALLREDUCE has no root: rank 0 is named as the one absent rank, with no reason to prefer it.
    d = _diagnose(tmp_path, "\n".join(OLD_WD.format(r=r, op="ALLREDUCE") for r in (3, 2, 1)))
    assert _verdict(d) == ([0], "straggler_hang", "absent from the excerpt")
    assert "RANK0_LIKELY" not in d.confidence_reason_codes
    # Ranks 0 and 1 absent: rank 0 is preferred among two candidates (RANK0_PREFERRED), not "likely" alone.
    d = _diagnose(_sub(tmp_path, "two"), "\n".join(OLD_WD.format(r=r, op="BROADCAST") for r in (3, 2)))
    assert _verdict(d) == ([0], "straggler_hang", "absent from the excerpt")
    assert "RANK0_LIKELY" not in d.confidence_reason_codes
    assert "RANK0_PREFERRED" in d.confidence_reason_codes


# -- correlator.initiators.find: no initiator ---------------------------------------------------------------------


def test_none_explains_when_too_many_ranks_are_absent(tmp_path: Path) -> None:
    # Ranks 1, 2 time out in an ALLREDUCE, rank 0 absent: 1 absent * 3 > 2 seen, maybe just cut from the paste.
    d = _diagnose(tmp_path, "\n".join(OLD_WD.format(r=r, op="ALLREDUCE") for r in (2, 1)))
    assert _verdict(d) == ([], "unknown", "")
    assert "NONE_EXPLAINS" in d.confidence_reason_codes
    # Three seen: 1 * 3 > 3 is false, rank 0 is named (test_rank0_not_likely_…): NONE_EXPLAINS is not recorded.
    d = _diagnose(_sub(tmp_path, "three"), "\n".join(OLD_WD.format(r=r, op="ALLREDUCE") for r in (3, 2, 1)))
    assert d.initiating_ranks == [0]
    assert "NONE_EXPLAINS" not in d.confidence_reason_codes


_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "train.py", line 3, in <module>',
    "    loss.backward()",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
]


def test_no_rank_named(tmp_path: Path) -> None:
    # The OOM traceback carries no rank prefix: the fault is named, not the rank.
    d = _diagnose(tmp_path, "\n".join(_TRACEBACK))
    assert _verdict(d) == ([], "cuda_oom", "fault without a rank")
    assert "NO_RANK_NAMED" in d.confidence_reason_codes
    # The same traceback with torch's [rank1]: prefix on every line names rank 1.
    d = _diagnose(_sub(tmp_path, "ranked"), "\n".join("[rank1]:" + line for line in _TRACEBACK))
    assert _verdict(d) == ([1], "cuda_oom", "first fault")
    assert "NO_RANK_NAMED" not in d.confidence_reason_codes


# -- correlator.fr: Flight Recorder -------------------------------------------------------------------------------

#: The captured torch 2.13 gloo JSON dumps of fr-02: at pg 0 seq 25 rank 1 broadcasts, ranks 0, 2, 3 all_reduce.
FR02 = CASES / "fr-02-op-mismatch-dumps-only" / "logs"
#: The captured pickle dumps of fr-01: rank 3 never reached the all_reduce ranks 0-2 entered.
FR01 = CASES / "fr-01-hang-before-collective-dumps-only" / "logs"


def _copy_dumps(src: Path, dst: Path, ranks: list[int]) -> Path:
    for f in sorted(src.iterdir()):
        if int(f.name.removesuffix(".json").rsplit("_", 1)[1]) in ranks:
            shutil.copy(f, dst / f.name)
    return dst


def test_no_fr_dump(tmp_path: Path) -> None:
    # Rank 3's dump is left out of a world of four (pg_config ranks [0, 1, 2, 3]).
    d = correlator.diagnose(correlator.load(_copy_dumps(FR02, tmp_path, [0, 1, 2])))
    assert _verdict(d) == ([1], "collective_mismatch", "Flight Recorder")
    assert "NO_FR_DUMP" in d.confidence_reason_codes
    d = correlator.diagnose(correlator.load(_copy_dumps(FR02, _sub(tmp_path, "all"), [0, 1, 2, 3])))
    assert _verdict(d) == ([1], "collective_mismatch", "Flight Recorder")
    assert "NO_FR_DUMP" not in d.confidence_reason_codes
    assert "FR_ALSO_NEVER_REACHED" not in d.confidence_reason_codes


def test_fr_also_never_reached(tmp_path: Path) -> None:
    # The same four dumps with rank 3's cut after seq 24: besides odd rank 1, rank 3 never reached seq 25.
    for r in range(4):
        obj = json.loads((FR02 / f"fr_rank_{r}.json").read_text())
        if r == 3:
            assert obj["entries"][-1]["collective_seq_id"] == 25
            obj["entries"] = obj["entries"][:-1]
            obj["pg_status"]["0"].update(last_enqueued_collective="24", last_completed_collective="24")
        (tmp_path / f"fr_rank_{r}.json").write_text(json.dumps(obj))
    d = correlator.diagnose(correlator.load(tmp_path))
    assert _verdict(d) == ([1], "collective_mismatch", "Flight Recorder")
    assert "FR_ALSO_NEVER_REACHED" in d.confidence_reason_codes
    assert "NO_FR_DUMP" not in d.confidence_reason_codes


def test_fr_single_majority(tmp_path: Path) -> None:
    # Only ranks 0 and 3 dumped: rank 3 never reached the seq rank 0 entered, and rank 0 alone is the majority.
    d = correlator.diagnose(correlator.load(_copy_dumps(FR01, tmp_path, [0, 3])))
    assert _verdict(d) == ([3], "straggler_hang", "Flight Recorder")
    assert "FR_SINGLE_MAJORITY" in d.confidence_reason_codes
    assert "NO_FR_DUMP" in d.confidence_reason_codes  # ranks 1, 2 of the four left no dump
    # With rank 1's dump as well the majority is two ranks.
    d = correlator.diagnose(correlator.load(_copy_dumps(FR01, _sub(tmp_path, "two"), [0, 1, 3])))
    assert _verdict(d) == ([3], "straggler_hang", "Flight Recorder")
    assert "FR_SINGLE_MAJORITY" not in d.confidence_reason_codes


# -- correlator.graph: the whole attempt ---------------------------------------------------------------------------

_TERM = "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {pid} closing"


def test_identity_inferred_from_the_pid_gap(tmp_path: Path) -> None:
    # tatsu-lab/stanford_alpaca#183 as pasted: the failed line lost local rank and pid; pid 53040, the hole in the
    # SIGTERMed 53038, 53039, 53041, is local rank 2 - a rank inferred, never stated.
    lines = [_TERM.format(pid=p) for p in (53038, 53039, 53041)]
    failed = AGENT + "failed (exitcode: -9) local_rankroot/anaconda3/envs/x/bin/python"
    d = _diagnose(tmp_path, "\n".join([*lines, failed]))
    assert _verdict(d) == ([2], "oom_kill", "first fault")
    assert "IDENTITY_INFERRED" in d.confidence_reason_codes


def test_identity_not_inferred_when_a_line_states_it(tmp_path: Path) -> None:
    lines = [_TERM.format(pid=p) for p in (53038, 53039, 53041)]
    # The failed line states local rank 2.
    d = _diagnose(tmp_path, "\n".join([*lines, FAILED.format(code=-9, lr=2, pid=53040)]))
    assert _verdict(d) == ([2], "oom_kill", "first fault")
    assert "IDENTITY_INFERRED" not in d.confidence_reason_codes
    # The failed line lost it, but rank 2 has a line of its own with a [rank2]: prefix: not every line is inferred.
    failed = AGENT + "failed (exitcode: -9) local_rankroot/anaconda3/envs/x/bin/python"
    d = _diagnose(_sub(tmp_path, "own"), "\n".join(["[rank2]: loading shard 3", *lines, failed]))
    assert _verdict(d) == ([2], "oom_kill", "first fault")
    assert "IDENTITY_INFERRED" not in d.confidence_reason_codes


def _two_hosts(offsets_s: list[int], rank2_op: str = "ALLREDUCE") -> dict[str, str]:
    """node-a (ranks 0, 1) and node-b (ranks 2, 3), one file each: a DETAIL fingerprint per rank for seq 0, 1, …
    10 s apart, node-b's stamps later by ``offsets_s[seq]`` (whole seconds: c10 stamps are read to the second);
    then rank 2 raises, or, with another ``rank2_op``, runs that op at the next seq (node-b 0 s later) where the
    others run ALLREDUCE."""
    out: dict[str, list[str]] = {"node-a.log": [], "node-b.log": []}
    n = len(offsets_s)
    for r in range(4):
        h, dev, pid = ("node-a" if r < 2 else "node-b"), r % 2, 4000 + r
        lines = [
            BOOTSTRAP.format(h=h, pid=pid, d=dev, ip=_IPS[h]),
            NCCL_INIT.format(h=h, pid=pid, d=dev, r=r, w=4),
        ]
        for q, off in enumerate(offsets_s):
            sec = 10 * q + (off if h == "node-b" else 0)
            lines.append(FINGERPRINT.format(r=r, s=f"{sec:02d}.000000000", q=q, op="ALLREDUCE"))
        if rank2_op != "ALLREDUCE":
            op = rank2_op if r == 2 else "ALLREDUCE"
            lines.append(FINGERPRINT.format(r=r, s=f"{10 * n:02d}.000000000", q=n, op=op))
        out[f"{h}.log"] += lines
    if rank2_op == "ALLREDUCE":
        out["node-b.log"].append("[rank2]: ValueError: shard 17 is corrupt")
    return {k: "\n".join(v) for k, v in out.items()}


def test_clocks_unaligned_from_logs(tmp_path: Path) -> None:
    # node-b - node-a per seq: 0, 0, 2, 2, 4, 4 s -> median 2, deviations 2, 2, 0, 0, 2, 2 -> MAD 2
    # -> uncertainty 3 x 2 = 6 s > 5; rank 2 is the initiator by time ("first fault").
    d = _diagnose(tmp_path, files=_two_hosts([0, 0, 2, 2, 4, 4]))
    assert _verdict(d) == ([2], "rank_crash", "first fault")
    assert "CLOCKS_UNALIGNED" in d.confidence_reason_codes


def test_clocks_aligned_within_five_seconds(tmp_path: Path) -> None:
    # 0, 0, 1, 2, 3, 3 s -> median 1.5, deviations 1.5, 1.5, 0.5, 0.5, 1.5, 1.5 -> MAD 1.5 -> 4.5 s <= 5.
    d = _diagnose(tmp_path, files=_two_hosts([0, 0, 1, 2, 3, 3]))
    assert _verdict(d) == ([2], "rank_crash", "first fault")
    assert "CLOCKS_UNALIGNED" not in d.confidence_reason_codes
    # The unaligned clocks of the first test (with seq 6 at 0 s: deviations 2, 2, 0, 0, 2, 2, 2 -> MAD 2 -> 6 s),
    # but rank 2 is found as the odd one out (BROADCAST at seq 6), not by time: the reason is not recorded.
    d = _diagnose(_sub(tmp_path, "odd"), files=_two_hosts([0, 0, 2, 2, 4, 4], rank2_op="BROADCAST"))
    assert _verdict(d) == ([2], "collective_mismatch", "odd one out")
    assert "CLOCKS_UNALIGNED" not in d.confidence_reason_codes


# -- correlator.diagnose: attempts ---------------------------------------------------------------------------------


def _attempts(later: str) -> dict[str, str]:
    """torchrun --log-dir layout (run/attempt_N/<local_rank>/stderr.log): attempt 0's local rank 1 raises;
    attempt 1's local rank 3 prints ``later``."""
    return {
        "run_x/attempt_0/0/stderr.log": "step 1",
        "run_x/attempt_0/1/stderr.log": "ValueError: shard 17 is corrupt",
        "run_x/attempt_1/0/stderr.log": "step 1",
        "run_x/attempt_1/3/stderr.log": later,
    }


def test_later_attempts_failed(tmp_path: Path) -> None:
    d = _diagnose(
        tmp_path, files=_attempts("FileNotFoundError: [Errno 2] No such file or directory: 'shard_18'")
    )
    assert (d.attempt, *_verdict(d)) == (0, [1], "rank_crash", "first fault")
    assert "LATER_ATTEMPTS_FAILED" in d.confidence_reason_codes


def test_no_later_attempt_failed(tmp_path: Path) -> None:
    d = _diagnose(tmp_path, files=_attempts("step 1"))
    assert (d.attempt, *_verdict(d)) == (0, [1], "rank_crash", "first fault")
    assert "LATER_ATTEMPTS_FAILED" not in d.confidence_reason_codes


# -- every member has a test ----------------------------------------------------------------------------------------

#: The test files accepted as testing a reason: a member counts as tested when its name is a string constant inside
#: an ``assert`` statement of one of these files (``"NAME" in d.confidence_reason_codes``, ``codes == ["NAME"]``),
#: not under ``not in``.
#: tests/test_clock_reason.py (CLOCKS_UNALIGNED on a hand-built table) is counted where it exists.
ACCEPTED = [
    "tests/test_reasons.py",
    "tests/test_clock_reason.py",
    "tests/test_call_site.py",
    "tests/test_claims.py",
    "tests/test_disowned.py",
    "tests/test_generalize.py",
    "tests/test_lastresort.py",
    "tests/test_launchers.py",
    "tests/test_mutation_kills_rules.py",
    "tests/test_cli.py",
    "tests/test_stacks.py",
    "tests/test_ras.py",
]


def _asserted_names(path: Path) -> set[str]:
    """String constants inside ``assert`` statements of ``path``, except under a ``not in`` comparison (an
    assertion that a reason is absent does not test that it can be raised)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.NotIn) for op in node.ops):
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assert):
            visit(node.test)
    return names


def test_every_reason_is_asserted_by_some_test() -> None:
    asserted: set[str] = set()
    for rel in ACCEPTED:
        if (ROOT / rel).exists():
            asserted |= _asserted_names(ROOT / rel)
    missing = [m.name for m in Reason if m.name not in asserted]
    assert missing == [], f"reasons no test asserts by name (in {ACCEPTED}): {missing}"


@pytest.mark.parametrize("name", ["NO_LAUNCHER", "EVEN_SPLIT"])
def test_the_scan_reads_asserts_only(tmp_path: Path, name: str) -> None:
    # A name in a comment, a docstring, a plain call or an assertion of absence does not count.
    p = tmp_path / "t.py"
    p.write_text(f'"""{name}"""\n# {name}\nprint("{name}")\nassert "{name}" not in codes, "{name}"\n')
    assert name not in _asserted_names(p)
    p.write_text(f'assert "{name}" in codes\n')
    assert name in _asserted_names(p)
