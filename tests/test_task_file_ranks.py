"""Rank from the file name, as evidence (issue 34 item 1): the task id of per-task output files.

``srun --output=%x-%j-%t.out`` (and ``%N-%t``, ``%n-%t``, ``%A_%a-%t``) and ``mpirun --output-filename`` write one
file per rank whose lines carry no rank prefix. The rank is the numeric field that varies across sibling names
(``correlator.discover.learn_name_field``), confirmed against the ranks the lines state (``identity``).

The real layouts were captured here (``tests/data/slurm_task_files/SOURCE.md``,
``tests/data/mpirun_output_filename/SOURCE.md``); the right rank of each file is read from the file itself
(``SLURM_PROCID=N`` / ``OMPI_COMM_WORLD_RANK=N``, set by the launcher), independently of rankscope.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from correlator.api import diagnose_path
from correlator.discover import discover, learn_name_field
from correlator.ingest import load

DATA = Path(__file__).resolve().parent / "data"
SLURM = DATA / "slurm_task_files"
MPIRUN = DATA / "mpirun_output_filename"

# --- the sibling-field learner ---------------------------------------------------------------------------------


def _values(names: list[str]) -> dict[str, int] | None:
    found = learn_name_field(names)
    return None if found is None else found.values


@pytest.mark.parametrize(
    ("names", "want"),
    [
        # %x-%j-%t.out: job name, job id, task id
        ([f"llama-ft-884213-{t}.out" for t in range(4)], {f"llama-ft-884213-{t}.out": t for t in range(4)}),
        # %N-%t.out on two nodes: the node name's number changes with the task id but does not vary on its own
        (
            ["node3-0.out", "node3-1.out", "node4-2.out", "node4-3.out"],
            {"node3-0.out": 0, "node3-1.out": 1, "node4-2.out": 2, "node4-3.out": 3},
        ),
        # %n-%t: node index, task id
        (["0-0", "0-1", "1-2", "1-3"], {"0-0": 0, "0-1": 1, "1-2": 2, "1-3": 3}),
        # %A_%a-%t: two array tasks of four tasks each; the task id is the innermost varying field
        (
            [f"6_{a}-{t}.out" for a in range(2) for t in range(4)],
            {f"6_{a}-{t}.out": t for a in range(2) for t in range(4)},
        ),
        # %3t pads the task id
        (
            ["run-000.log", "run-001.log", "run-002.log"],
            {"run-000.log": 0, "run-001.log": 1, "run-002.log": 2},
        ),
    ],
)
def test_learner_finds_the_task_id(names: list[str], want: dict[str, int]) -> None:
    assert _values(names) == want


@pytest.mark.parametrize(
    "names",
    [
        ["run-884213.out"],  # a job id alone: one file
        [
            "train-2024-05-01.log",
            "train-2024-05-02.log",
            "train-2024-05-03.log",
        ],  # a date: the day starts at 1
        ["train-2024-05-01.log", "train-2024-06-01.log"],
        ["checkpoint-1000.log", "checkpoint-2000.log", "checkpoint-3000.log"],  # steps: not 0..N-1
        ["run-884213.out", "run-884214.out"],  # two job ids
        ["train.log.1", "train.log.2", "train.log.3"],  # RotatingFileHandler backups
        ["epoch-0.log", "epoch-2.log"],  # a gap
        ["node-0.log", "node-1.log"],  # a node's number: one node's combined output each
        ["host0.out", "host1.out", "host2.out"],
        ["a-0.log", "b-1.log"],  # not one pattern
        ["job-0.out", "job-0.err"],  # nothing varies
        ["x-12345678-0.out", "x-12345678-1.out", "y.out"],  # not one pattern
    ],
)
def test_learner_leaves_other_numbers_alone(names: list[str]) -> None:
    assert learn_name_field(names) is None


def test_learner_rejects_a_field_too_wide_for_a_task_id() -> None:
    assert learn_name_field(["x-0000000.out", "x-0000001.out"]) is None


# --- the newcomer scenario of the issue ------------------------------------------------------------------------

# Lines copied from real logs in the corpus (their [rankN]: prefixes removed: srun --output files carry none):
# the OOM traceback of real-msswift-6301 (rank 11's, shortened) and the torch 2.1 watchdog lines of
# real-llamafactory-2424.
_OOM = """Traceback (most recent call last):
  File "./ms-swift/train_embedding_ms_swift.py", line 46, in <module>
    result = sft_main(args)
  File "./ms-swift/swift/trainers/mixin.py", line 801, in train
  File "./.conda/envs/swift/lib/python3.10/site-packages/transformers/integrations/sdpa_attention.py", line 96, in sdpa_attention_forward
    attn_output = torch.nn.functional.scaled_dot_product_attention(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.35 GiB. GPU 3 has a total capacity of 63.42 GiB of which 1.70 GiB is free. Including non-PyTorch memory, this process has 60.30 GiB memory in use. Of the allocated memory 50.94 GiB is allocated by PyTorch, and 8.56 GiB is reserved by PyTorch but unallocated.
"""
_WATCHDOG = """[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800572 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire process down.
"""


def _newcomer(tmp: Path) -> Path:
    for r in range(4):
        (tmp / f"llama-ft-884213-{r}.out").write_text(_OOM if r == 2 else _WATCHDOG.format(r=r))
    return tmp


def test_srun_per_task_files_give_the_oom_rank(tmp_path: Path) -> None:
    got = diagnose_path(_newcomer(tmp_path))
    d = got.diagnosis
    assert d.initiating_ranks == [2]
    assert d.failure_kind == "cuda_oom"
    assert d.ranks_seen == [0, 1, 2, 3]
    oom = got.table.filter(pl.col("kind") == "cuda_oom")
    assert oom["rank"].to_list() == [2]
    assert oom["rank_source"].to_list() == ["file_name"]
    assert any("read as the rank (rank_source file_name)" in w for w in got.warnings)


def test_sources_carry_the_note(tmp_path: Path) -> None:
    sources, _ = discover(_newcomer(tmp_path))
    by_name = {s.path.name: s for s in sources}
    s = by_name["llama-ft-884213-2.out"]
    assert (s.layout, s.rank) == ("task_file", 2)
    assert s.notes and "rank 2 from the file name" in s.notes[-1]


def test_stated_rank_wins_over_the_name(tmp_path: Path) -> None:
    """A file whose lines say ``[rank1]:`` is rank 1's, whatever its name: its unprefixed lines go to rank 1."""
    (tmp_path / "job-0.out").write_text("[rank1]: step 3 loss 0.5\nValueError: bad batch\n")
    (tmp_path / "job-1.out").write_text("step 3 loss 0.5\n")
    t = load(tmp_path)
    mine = t.filter(pl.col("path") == "job-0.out").sort("line")
    assert mine["rank"].to_list() == [1, 1]
    assert "file_name" not in mine["rank_source"].to_list()
    other = t.filter(pl.col("path") == "job-1.out")
    assert other["rank"].to_list() == [1]
    assert other["rank_source"].to_list() == ["file_name"]


# --- real captures ---------------------------------------------------------------------------------------------

_PROCID = re.compile(r"(?:SLURM_PROCID|OMPI_COMM_WORLD_RANK)=(\d+)")


def _stated(root: Path) -> dict[str, set[int]]:
    """``{relative path: ranks its own text names by the launcher's variable}``, read without rankscope."""
    out: dict[str, set[int]] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "SOURCE.md":
            text = p.read_text()
            if p.name == "stderr":  # mpirun: the stderr beside a stdout is the same process's
                text += (p.parent / "stdout").read_text()
            out[p.relative_to(root).as_posix()] = {int(x) for x in _PROCID.findall(text)}
    return out


_CASES = sorted(d.name for d in SLURM.iterdir() if d.is_dir())


def test_every_slurm_layout_is_here() -> None:
    assert _CASES == [
        "sbatch-array-A_a",
        "sbatch-array-default",
        "sbatch-x-j-t",
        "srun-N-t",
        "srun-array-A_a-t",
        "srun-j-t",
        "srun-n-t",
        "srun-x-j-t",
    ]


@pytest.mark.parametrize("case", [*(SLURM / c for c in _CASES), MPIRUN / "out", MPIRUN])
def test_each_file_gets_the_rank_its_launcher_gave(case: Path) -> None:
    """A task's file (one launcher rank in its text) gets that rank from its name, every line of it; a file
    with several ranks or none (a batch script's output, a ``%A_%a.out`` array job, mpirun's own output) gets
    no rank from its name."""
    t = load(case)
    for rel, ranks in _stated(case).items():
        rows = t.filter(pl.col("path") == rel)
        if rows.height == 0:  # an empty stderr
            continue
        if len(ranks) == 1:
            assert set(rows["rank"].to_list()) == ranks, rel
            assert "file_name" in rows["rank_source"].to_list(), rel
        else:
            assert "file_name" not in rows["rank_source"].drop_nulls().to_list(), rel


@pytest.mark.parametrize("case", ["srun-x-j-t", "srun-N-t", "srun-n-t", "srun-j-t"])
def test_real_task_files_name_the_failing_task(case: str) -> None:
    """Task 2 raised IndexError (SOURCE.md): its traceback is attached to rank 2, and all four tasks are seen."""
    _names_the_failing_task(SLURM / case)


def test_real_mpirun_output_filename() -> None:
    _names_the_failing_task(MPIRUN / "out")


def _names_the_failing_task(root: Path) -> None:
    got = diagnose_path(root)
    d = got.diagnosis
    assert d.initiating_ranks == [2]
    assert d.ranks_seen == [0, 1, 2, 3]
    (ev,) = d.initiating_events
    assert (ev.rank, ev.kind) == (2, "python_exception")
    assert _stated(root)[ev.path] == {2}  # the traceback is in the file of the task Slurm/mpirun numbered 2
    row = got.table.filter(pl.col("event_id") == ev.event_id)
    assert row["message"].to_list() == ["IndexError: list index out of range"]


def test_a_batch_takes_the_ranks_the_whole_discovery_learned(tmp_path: Path) -> None:
    """A streaming batch is discovered again from a tree (of links) that may hold some siblings only: within
    ``discover.learned_from`` it takes the ranks learned from all of them instead of learning from what it sees."""
    from correlator.discover import learned_from

    (tmp_path / "all").mkdir()
    whole, _ = discover(_newcomer(tmp_path / "all"))
    part = tmp_path / "part"
    part.mkdir()
    (part / "llama-ft-884213-2.out").write_text(_OOM)
    alone, _ = discover(part)
    assert (alone[0].layout, alone[0].rank) == ("stream", None)  # one file alone: no sibling to learn from
    with learned_from(whole):
        (got,) = discover(part)[0]
    assert (got.layout, got.rank) == ("task_file", 2)


def test_streaming_gives_the_same_ranks(tmp_path: Path) -> None:
    from correlator.streaming import stream_ingest

    reduced, _summary = stream_ingest(_newcomer(tmp_path), None, batch_bytes=64, workers=1)
    oom = reduced.filter(pl.col("kind") == "cuda_oom")
    assert oom["rank"].to_list() == [2]
    assert oom["rank_source"].to_list() == ["file_name"]
    assert sorted(reduced["rank"].drop_nulls().unique().to_list()) == [0, 1, 2, 3]


# NCCL's init line, in the shape of real-deepspeed-2931's (``host:pid:tid [dev] NCCL INFO comm 0x… rank R nranks N
# cudaDev D busId B - Init COMPLETE``).
_INIT = "node-a:{pid}:{tid} [{r}] NCCL INFO comm 0x{comm:x} rank {rk} nranks {n} cudaDev {r} busId 13000 - Init COMPLETE\n"


def _with_init(tmp: Path, stated: dict[int, list[tuple[int, int]]]) -> Path:
    """Files ``t-0.out`` … with NCCL init lines ``(rank, nranks)`` per file, and a traceback in ``t-3.out``."""
    for r, comms in stated.items():
        lines = [
            _INIT.format(pid=24140 + r, tid=24260 + r, r=r, comm=0x5562191160F0 + 16 * k + r, rk=rk, n=n)
            for k, (rk, n) in enumerate(comms)
        ]
        if r == 3:
            lines.append("ValueError: bad batch\n")
        (tmp / f"t-{r}.out").write_text("".join(lines))
    return tmp


def test_nccl_init_of_the_world_comm_confirms_and_a_subgroup_does_not_contradict(tmp_path: Path) -> None:
    t = load(_with_init(tmp_path, {r: [(r, 4), (r % 2, 2)] for r in range(4)}))
    err = t.filter(pl.col("message") == "ValueError: bad batch")
    assert err.select("rank", "rank_source").rows() == [(3, "file_name")]


def test_nccl_init_stating_another_rank_wins_over_the_name(tmp_path: Path) -> None:
    t = load(_with_init(tmp_path, {0: [(0, 4)], 1: [(1, 4)], 2: [(2, 4)], 3: [(1, 4)]}))
    mine = t.filter(pl.col("path") == "t-3.out")
    assert "file_name" not in mine["rank_source"].drop_nulls().to_list()
    assert 3 not in mine["rank"].drop_nulls().to_list()


def test_watcher_gives_a_task_file_its_rank_once_its_siblings_appear(tmp_path: Path) -> None:
    """Live: ``-2.out`` is written first, alone (no sibling: read as a stream); when ``-0``, ``-1``, ``-3`` appear,
    the rows already read from it take rank 2 from its name, and the verdict is made again."""
    from correlator.watch import Watcher

    w = Watcher(tmp_path, clock=lambda: 0.0)
    (tmp_path / "llama-ft-884213-2.out").write_text(_OOM)
    w.poll()
    oom = w.table.filter(pl.col("kind") == "cuda_oom")
    assert oom["rank_source"].to_list() != ["file_name"]  # alone: at most the weak "GPU 3" guess
    for r in (0, 1, 3):
        (tmp_path / f"llama-ft-884213-{r}.out").write_text(_WATCHDOG.format(r=r))
    w.poll()
    oom = w.table.filter(pl.col("kind") == "cuda_oom")
    assert oom.select("rank", "rank_source").rows() == [(2, "file_name")]
