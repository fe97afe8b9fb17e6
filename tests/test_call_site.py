"""Issue #30 item 2 (in part): without DETAIL, the call site of each rank's traceback into
``torch.distributed`` names the odd rank (initiators.call_site_odd_one_out). Tracebacks from the capture
cap-34-collective-mismatch-plain (torch 2.13, gloo): rank 2 broadcast at train.py:226, the others
all_reduce at train.py:230."""

from __future__ import annotations

import shutil
from pathlib import Path

from correlator.api import diagnose_path
from parsers.python import call_site
from tests.conftest import CASES

CASE = CASES / "cap-34-collective-mismatch-plain" / "logs"


def _stderr(rank: int) -> Path:
    return next(CASE.glob(f"torchrun_logs/*/attempt_0/{rank}/stderr.log"))


def test_call_site_of_real_tracebacks():
    assert call_site(_stderr(2).read_text()) == ("train.py:226", "broadcast")
    for r in (0, 1, 3):
        assert call_site(_stderr(r).read_text()) == ("train.py:230", "all_reduce")


def test_no_call_site_without_a_c10d_frame_or_own_code():
    assert (
        call_site(
            'Traceback (most recent call last):\n  File "/opt/app/train.py", line 5, in <module>\n'
            "    x = 1 / 0\nZeroDivisionError: division by zero\n"
        )
        is None
    )
    only_lib = (
        '  File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, '
        "in all_reduce\n    work.wait()\n"
    )
    assert call_site(only_lib) is None


def _copy(tmp_path: Path, ranks: list[int]) -> Path:
    """The capture's per-rank stderr files as rank<N>.log, only for ``ranks``."""
    for r in ranks:
        shutil.copy(_stderr(r), tmp_path / f"rank{r}.log")
    return tmp_path


def test_minority_call_site_is_named(tmp_path):
    d = diagnose_path(_copy(tmp_path, [0, 1, 2, 3])).diagnosis
    assert (d.initiating_ranks, d.failure_kind) == ([2], "collective_mismatch")
    assert "CALL_SITE_ONLY" in d.confidence_reason_codes


def test_even_split_or_a_rank_outside_every_collective_names_no_one_by_call_site(tmp_path):
    # A 2-2 split: ranks 0, 1 at all_reduce, ranks 2, 3 both at broadcast (rank 2's traceback, relabelled).
    a = tmp_path / "a"
    a.mkdir()
    _copy(a, [0, 1, 2])
    (a / "rank3.log").write_text(_stderr(2).read_text().replace("[rank2]:", "[rank3]:"))
    d = diagnose_path(a).diagnosis
    assert "CALL_SITE_ONLY" not in d.confidence_reason_codes
    # Rank 0 left no log (ranks 1-3 only): it may be the straggler; the rule stays silent.
    c = tmp_path / "c"
    c.mkdir()
    d = diagnose_path(_copy(c, [1, 2, 3])).diagnosis
    assert "CALL_SITE_ONLY" not in d.confidence_reason_codes
    # Rank 1 in no collective (its file holds no traceback): the rule stays silent.
    b = tmp_path / "b"
    b.mkdir()
    _copy(b, [0, 2, 3])
    (b / "rank1.log").write_text("[rank1]: step 2 done\n")
    d = diagnose_path(b).diagnosis
    assert "CALL_SITE_ONLY" not in d.confidence_reason_codes


PADDLE_FRAMES = (
    'Traceback (most recent call last):\n  File "/opt/app/paddle_train.py", line 92, in <module>\n    main()\n'
    '  File "/opt/app/paddle_train.py", line {line}, in main\n    dist.{op}(stat)\n'
    '  File "/opt/venv/lib/python3.11/site-packages/paddle/distributed/communication/{op}.py", line 74, in {op}\n'
    "    return stream.{op}(\n"
    '  File "/opt/venv/lib/python3.11/site-packages/paddle/distributed/communication/stream/{op}.py", line 147, '
    "in _{op}_in_dygraph\n"
    "RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:584] TIMEOUT self_rank = 2 pair_rank = 0\n"
)


def test_call_site_of_a_paddle_traceback():
    # PaddlePaddle 3.3.1 (cap-paddle-05, workerlog.2 / workerlog.0): the API frame is communication/<op>.py,
    # not its inner stream/ layer.
    assert call_site(PADDLE_FRAMES.format(line=77, op="broadcast")) == ("paddle_train.py:77", "broadcast")
    assert call_site(PADDLE_FRAMES.format(line=79, op="all_reduce")) == ("paddle_train.py:79", "all_reduce")


def test_three_ranks_are_enough_for_a_call_site_majority(tmp_path):
    # The rule's floor is three ranks with a call site (a 2-1 split is a strict majority): ranks 0 and 1 at
    # all_reduce (train.py:230), rank 2 at broadcast (train.py:226), as captured in cap-34.
    d = diagnose_path(_copy(tmp_path, [0, 1, 2])).diagnosis
    assert (d.initiating_ranks, d.failure_kind, d.initiator_basis) == (
        [2],
        "collective_mismatch",
        "odd one out by call site",
    )
    assert d.focus["majority"] == "all_reduce at train.py:230"
