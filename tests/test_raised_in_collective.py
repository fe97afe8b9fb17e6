"""Issue #30 item 2 (in part): an exception raised inside a collective's own code is the wait failing, not
the rank's own cause (faults.fault_rows, ``raised_in_collective``).

Lines as printed in modelscope/ms-swift#4340 (torch 2.x, 8 ranks): rank 0 still packs the dataset while
ranks 6 and 7 wait in the broadcast of the packed data; rank 6's ``broadcast_object_list`` unpickles an empty
buffer (``EOFError: Ran out of input``), rank 7's watchdog fires. The job (ranks 1-5 timing out like rank 7,
rank 0's progress bar) is RECONSTRUCTED around those real lines: the thread shows only ranks 6 and 7."""

from __future__ import annotations

from pathlib import Path

from correlator.api import diagnose_path

TB6 = """[rank6]: Traceback (most recent call last):
[rank6]:   File "/usr/local/lib/python3.12/dist-packages/swift/cli/sft.py", line 5, in <module>
[rank6]:     sft_main()
[rank6]:   File "/usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py", line 81, in wrapper
[rank6]:     return func(*args, **kwargs)
[rank6]:   File "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py", line 3504, in broadcast_object_list
[rank6]:     object_list[i] = _tensor_to_object(obj_view, obj_size, group)
[rank6]:   File "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py", line 2961, in _tensor_to_object
[rank6]:     return _unpickler(io.BytesIO(buf)).load()
[rank6]: EOFError: Ran out of input
"""


def _watchdog(r: int) -> str:
    return (
        f"[rank{r}]:[E524 03:42:41.647787481 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=57, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
        "ran for 1800051 milliseconds before timing out.\n"
    )


def test_eof_inside_broadcast_is_a_wait_not_the_cause(tmp_path: Path):
    text = "[rank0]: Packing dataset:  42%|████▏     | 52/124 [29:50<41:18, 34.42s/it]\n"
    text += "".join(_watchdog(r) for r in (1, 2, 3, 4, 5, 7)) + TB6
    (tmp_path / "combined.log").write_text(text)
    d = diagnose_path(tmp_path).diagnosis
    assert 6 not in d.initiating_ranks  # it was crowned: "rank 6 failed first: EOFError"
    assert d.initiating_ranks == [0]
    assert 6 in d.collateral_ranks


def test_an_exception_in_own_code_before_the_collective_is_still_a_cause(tmp_path: Path):
    own = (
        "[rank6]: Traceback (most recent call last):\n"
        '[rank6]:   File "/opt/app/data.py", line 9, in pack\n'
        "[rank6]:     shard = pickle.load(f)\n"
        "[rank6]: EOFError: Ran out of input\n"
    )
    (tmp_path / "combined.log").write_text("".join(_watchdog(r) for r in (0, 1, 2, 3, 4, 5, 7)) + own)
    d = diagnose_path(tmp_path).diagnosis
    assert d.initiating_ranks == [6]


def test_collective_frames_of_paddle_and_horovod_are_waits():
    import re

    from parsers.python import COLLECTIVE_FRAME_RE

    real = [  # cap-paddle-05 (Paddle 3.3.1), OpenNMT-tf#985 (Horovod 0.25)
        (
            '  File "/opt/venv/lib/python3.11/site-packages/paddle/distributed/communication/all_reduce.py", line 89, '
            "in all_reduce"
        ),
        (
            '  File "/opt/venv/lib/python3.11/site-packages/paddle/distributed/communication/stream/broadcast.py", '
            "line 43, in _broadcast_in_dygraph"
        ),
        '    File "/usr/local/lib/python3.8/dist-packages/horovod/tensorflow/mpi_ops.py", line 127, in _allreduce',
        '    File "/usr/local/lib/python3.8/dist-packages/horovod/tensorflow/__init__.py", line 125, in allreduce',
    ]
    assert all(re.search(COLLECTIVE_FRAME_RE, line) for line in real)
    setup = [  # setting up a group is not a wait
        '  File "/opt/venv/lib/python3.11/site-packages/paddle/distributed/communication/group.py", line 3, in new_group',
        '  File "/usr/local/lib/python3.8/dist-packages/horovod/torch/__init__.py", line 9, in init',
    ]
    assert not any(re.search(COLLECTIVE_FRAME_RE, line) for line in setup)
