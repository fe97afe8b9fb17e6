"""The failure classes that real pasted logs showed (issue #11), each on a minimal input written here.

Every input is a few lines in the shape users paste them (line numbers of a log viewer, progress bars
glued to log lines, excerpts that lack ranks); the expected values follow from reading the lines.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

import correlator

WATCHDOG = (
    "[rank{r}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
    "Timeout(ms)=600000) ran for 60006{r} milliseconds before timing out."
)


def _load(tmp_path: Path, text: str, name: str = "console.log") -> pl.DataFrame:
    (tmp_path / name).write_text(text + "\n")
    return correlator.load(tmp_path)


def test_viewer_line_numbers_do_not_hide_the_c10_prefix(tmp_path: Path) -> None:
    # LlamaFactory#7396 pasted its log with a viewer's line numbers: "[80746] [rank0]:[E321 …".
    t = _load(tmp_path, "\n".join(f"[{80746 + i}] " + WATCHDOG.format(r=r) for i, r in enumerate((0, 4))))
    rows = t.filter(pl.col("kind") == "watchdog_timeout")
    assert rows["rank"].to_list() == [0, 4]
    assert rows["seq"].to_list() == [1580, 1580]
    assert rows["ts"].dt.hour().to_list() == [2, 2]
    assert rows["raw"][0].startswith("[80746] [rank0]:")  # raw keeps the line as read


def test_progress_bar_glued_to_an_old_c10_line(tmp_path: Path) -> None:
    # pytorch#118369: a Lightning progress bar, then torch <= 2.1's "[E ProcessGroupNCCL.cpp:458] [Rank 0]".
    line = (
        "Epoch 0:   6%|██      | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6][E ProcessGroupNCCL.cpp:458] "
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, "
        "Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out."
    )
    t = _load(tmp_path, line)
    # Two rows from one physical line: the bar (elapsed 6:28:43) and the watchdog record (line_count 0).
    assert t.select("kind", "rank", "seq", "layer", "line", "line_count", "elapsed_ms").rows() == [
        ("progress_bar", None, None, "app", 1, 1, (6 * 3600 + 28 * 60 + 43) * 1000),
        ("watchdog_timeout", 0, 96120, "c10d", 1, 0, 25624887),
    ]


def test_indented_excerpt_line_is_its_own_record(tmp_path: Path) -> None:
    # A pasted excerpt indents every line; an indented c10 line is not a continuation of the previous one.
    text = "\n".join("    " + WATCHDOG.format(r=r) for r in (1, 2))
    rows = _load(tmp_path, text).filter(pl.col("kind") == "watchdog_timeout")
    assert rows["rank"].to_list() == [1, 2]
    assert rows["line_count"].to_list() == [1, 1]


def test_nccl_stamp_is_not_taken_for_leading_junk(tmp_path: Path) -> None:
    line = (
        "[2026-03-14 09:12:47] node-a:41240:41523 [3] transport/net_ib.cc:2341 NCCL WARN NET/IB: Got completion "
        "from peer 192.0.2.12<51123> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV(128)"
    )
    r = _load(tmp_path, line).row(0, named=True)
    assert (r["kind"], r["host"], r["ts"].minute, r["ts"].second) == ("nccl_net_error", "node-a", 12, 47)


def test_world_size_of_an_excerpt_comes_from_evidence(tmp_path: Path) -> None:
    # Ranks 0 and 4 time out; nothing states the world size, so ranks 1-3 are not "missing" initiators.
    d = correlator.diagnose(_load(tmp_path, "\n".join(WATCHDOG.format(r=r) for r in (0, 4))))
    assert d.world_size is None
    assert d.missing_ranks == [] and d.initiating_ranks == []
    assert d.failure_kind == "unknown"


def test_stated_world_size_names_the_missing_rank(tmp_path: Path) -> None:
    init = "node-a:4242:4242 [{r}] NCCL INFO comm 0x55d0c3a4e2b0 rank {r} nranks 3 cudaDev {r} busId 1b000 - Init COMPLETE"
    text = "\n".join(
        [init.format(r=r).replace("4242", str(4242 + r)) for r in range(3)]
        + [WATCHDOG.format(r=r) for r in (0, 1)]
    )
    d = correlator.diagnose(_load(tmp_path, text))
    assert d.world_size == 3
    assert d.initiating_ranks == [2]


def test_stacked_prefixes_pdsh_ip_and_excepthook(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "192.0.2.12: [rank9]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
            "192.0.2.11: " + WATCHDOG.format(r=1),
            "192.0.2.11: " + WATCHDOG.format(r=2),
        ]
    )
    t = _load(tmp_path, text).filter(pl.col("kind").is_in(["cuda_oom", "watchdog_timeout"]))
    assert t.select("kind", "rank", "host").rows() == [
        ("cuda_oom", 9, "192.0.2.12"),
        ("watchdog_timeout", 1, "192.0.2.11"),
        ("watchdog_timeout", 2, "192.0.2.11"),
    ]


def test_user_printed_rank_prefixes(tmp_path: Path) -> None:
    text = "\n".join(["[rank: 1] Seed set to 42", "[rank0] step 10 loss 2.3", "rank 3: starting epoch 2"])
    t = _load(tmp_path, text)
    assert t["rank"].to_list() == [1, 0, 3]
    assert t["message"].to_list() == ["Seed set to 42", "step 10 loss 2.3", "starting epoch 2"]


def test_mpirun_timestamp_and_tag_stacked(tmp_path: Path) -> None:
    # Open MPI --timestamp-output --tag-output: ctime, then [jobid,rank]<stream>:
    line = "Mon Dec  1 19:20:11 2026[1,3]<stderr>:RuntimeError: shard 17 is corrupt"
    r = _load(tmp_path, line).row(0, named=True)
    assert (r["rank"], r["kind"], r["exc_type"]) == (3, "python_exception", "RuntimeError")


def test_rank_stated_inside_an_unprefixed_message(tmp_path: Path) -> None:
    # torch 2.2-2.4 name the default PG "PG 1"; a line with both prefixes teaches that PG 1 ranks are global.
    text = "\n".join(
        [
            (
                "[rank5]:[E ProcessGroupNCCL.cpp:1316] [PG 1 Rank 5] Exception (either an error or timeout) detected by "
                "watchdog at work: 15734, last enqueued NCCL work: 15735, last completed NCCL work: 15733."
            ),
            (
                "[rank6]:[E ProcessGroupNCCL.cpp:1316] [PG 1 Rank 6] Exception (either an error or timeout) detected by "
                "watchdog at work: 15734, last enqueued NCCL work: 15735, last completed NCCL work: 15733."
            ),
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            (
                "  what():  [PG 1 Rank 11] Process group watchdog thread terminated with exception: [Rank 11] Watchdog "
                "caught collective operation timeout: WorkNCCL(SeqNum=15734, OpType=ALLREDUCE, NumelIn=2, NumelOut=2, "
                "Timeout(ms)=600000) ran for 600091 milliseconds before timing out."
            ),
            "RuntimeError: NCCL communicator was aborted on rank 3.  Original reason for failure was: NCCL error",
        ]
    )
    t = _load(tmp_path, text)
    assert t.select("rank", "rank_source", "line_count").rows()[2:] == [(11, "message", 2), (3, "message", 1)]


def test_gpu_index_is_a_rank_only_on_one_node(tmp_path: Path) -> None:
    oom = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total "
        "capacity of 79.15 GiB of which 1.25 MiB is free."
    )
    one = _load(tmp_path, "\n".join([oom, WATCHDOG.format(r=0)]))
    assert one.filter(pl.col("kind") == "cuda_oom").select("rank", "rank_source").row(0) == (3, "gpu_index")
    two = tmp_path / "two"
    two.mkdir()
    nccl = "node-{h}:100{r}:100{r} [0] NCCL INFO comm 0x55d0c3a4e2b0 rank {r} nranks 16 cudaDev 0 busId 1b000 - Init COMPLETE"
    multi = _load(two, "\n".join([oom, nccl.format(h="a", r=0), nccl.format(h="b", r=8)]))
    assert multi.filter(pl.col("kind") == "cuda_oom")["rank"].to_list() == [None]


def test_fault_without_a_rank_gets_a_low_confidence_verdict(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "train.py", line 3, in <module>',
            "    loss.backward()",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        ]
    )
    d = correlator.diagnose(_load(tmp_path, text))
    assert (d.initiating_ranks, d.failure_kind) == ([], "cuda_oom")
    assert d.confidence <= 0.4
    assert [(e.path, e.line, e.kind) for e in d.evidence] == [("console.log", 1, "cuda_oom")]
    assert "console.log:1" in d.summary


def test_cli_diagnoses_a_rankless_fault_instead_of_refusing(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from tests.conftest import run_cli

    (tmp_path / "console.log").write_text(
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    code, out, _ = run_cli(["diagnose", tmp_path, "--format", "json"], monkeypatch, capsys)
    assert code == 0
    assert json.loads(out)["failure_kind"] == "cuda_error"
    # Text nothing recognises is not refused (issue #30): a verdict that says so; only blank input is refused.
    (tmp_path / "console.log").write_text("hello world\n")
    code, out, err = run_cli(["diagnose", tmp_path, "--format", "json"], monkeypatch, capsys)
    assert code == 0, err
    d = json.loads(out)
    assert (d["failure_kind"], d["initiating_ranks"]) == ("none", [])
    assert d["confidence_reason_codes"] == ["NOTHING_RECOGNISED"] and d["confidence"] <= 0.2
    (tmp_path / "console.log").write_text("starting\nfatal: the dataloader died unexpectedly\n")
    code, out, err = run_cli(["diagnose", tmp_path, "--format", "json"], monkeypatch, capsys)
    d = json.loads(out)
    assert (code, d["failure_kind"], d["initiating_ranks"]) == (0, "unknown", [])
    assert [(e["path"], e["line"]) for e in d["evidence"]] == [("console.log", 2)]
    (tmp_path / "console.log").write_text("\n   \n")
    code, _, err = run_cli(["diagnose", tmp_path], monkeypatch, capsys)
    assert code == 2 and "no text to read" in err


def test_cli_diagnoses_a_bare_horovod_stall_report(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """A log holding only Horovod's stall report (no rank prefix, no launcher line) is a distributed-training
    log: ``diagnose`` names the missing ranks instead of refusing it (it refused such input, exit 2, while
    ``eval`` scored the same folder right). Stall lines as horovod/horovod#498 printed them."""
    import json

    from tests.conftest import run_cli

    (tmp_path / "console.log").write_text(
        "Stalled ops:\n"
        "NmtModel/Distributed_TransformGradients_Allreduce/HorovodAllreduce_NmtModel_gradients_NmtModel_encoder_layer_0"
        "_layer_norm_mul_1_grad_tuple_control_dependency_1_0 [missing ranks: 3, 6]\n"
    )
    code, out, err = run_cli(["diagnose", tmp_path, "--format", "json"], monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["initiating_ranks"] == [3, 6]


def test_graph_and_plot_draw_what_diagnose_reads(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """``graph`` and ``plot`` go through the job's one verdict (correlator.job): a log nothing recognises is
    drawn from the verdict diagnose prints (PaddlePaddle's abort line names rank 3: the graph's initiator is
    3), and only input with no text is refused by all three alike (exit 2, nothing written)."""
    import json

    from tests.conftest import run_cli

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "console.log").write_text(
        "ABORT!!! Out of all 4 trainers, the trainer process with rank=[3] was aborted. Please check its log.\n"
    )
    code, out, err = run_cli(["diagnose", logs, "-f", "json", "-q"], monkeypatch, capsys)
    assert code == 0 and json.loads(out)["initiating_ranks"] == [3], err
    code, _, err = run_cli(["graph", logs, "-o", tmp_path / "g.json", "-q"], monkeypatch, capsys)
    assert code == 0, err
    g = json.loads((tmp_path / "g.json").read_text())
    assert g["graph"]["initiators"] == [3]
    assert [n["status"] for n in g["nodes"] if n["id"] == 3] == ["initiating"]
    code, _, err = run_cli(["plot", logs, "-o", tmp_path / "p.png", "-q"], monkeypatch, capsys)
    assert code == 0 and (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG"), err
    (logs / "console.log").write_text("\n  \n")
    for cmd, dest in (("graph", tmp_path / "g2.graphml"), ("plot", tmp_path / "p2.png")):
        code, _, err = run_cli([cmd, logs, "-o", dest, "-q"], monkeypatch, capsys)
        assert code == 2 and "no text to read" in err, (cmd, code, err)
        assert not dest.exists()


OLD_WD = (
    "[E ProcessGroupNCCL.cpp:737] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=56693, "
    "OpType={op}, Timeout(ms)=1800000) ran for 180437{r} milliseconds before timing out."
)


def test_rank_absent_from_a_block_of_timeouts(tmp_path: Path) -> None:
    # aioz-ai/GCD#6 shape: ranks 1-3 time out, rank 0 never reports; world size unknown.
    d = correlator.diagnose(_load(tmp_path, "\n".join(OLD_WD.format(r=r, op="ALLREDUCE") for r in (3, 2, 1))))
    assert (d.initiating_ranks, d.collateral_ranks, d.failure_kind) == ([0], [1, 2, 3], "straggler_hang")
    assert d.initiator_basis == "absent from the excerpt"


def test_several_absent_ranks_are_candidates_unless_rank0_has_a_reason(tmp_path: Path) -> None:
    plain = correlator.diagnose(
        _load(tmp_path, "\n".join(OLD_WD.format(r=r, op="ALLREDUCE") for r in (3, 2)))
    )
    assert (plain.initiating_ranks, plain.failure_kind) == (
        [],
        "unknown",
    )  # two absent of four: cut from the paste
    rooted = tmp_path / "rooted"
    rooted.mkdir()
    d = correlator.diagnose(_load(rooted, "\n".join(OLD_WD.format(r=r, op="BROADCAST") for r in (3, 2))))
    assert d.initiating_ranks == [0]
    assert any("root of the BROADCAST" in r for r in d.confidence_reasons)


def test_untagged_progress_bar_that_stops_mid_work_points_at_rank0(tmp_path: Path) -> None:
    # LlamaFactory#2424 shape: rank 0 tokenizes (untagged bar at 9 %), ranks 1 and 2 hit the 30-min watchdog.
    bar = "Running tokenizer on dataset:   9%|███▊      | 280000/2969526 [29:55<4:48:08, 155.57 examples/s]"
    text = "\n".join(
        [
            bar + OLD_WD.format(r=2, op="ALLREDUCE"),
            OLD_WD.format(r=1, op="ALLREDUCE"),
            OLD_WD.format(r=3, op="ALLREDUCE").replace("[Rank 3]", "[Rank 4]"),
        ]
    )
    d = correlator.diagnose(_load(tmp_path, text))
    assert d.initiating_ranks == [0]
    assert any("stops mid-work" in r for r in d.confidence_reasons)


def test_waiting_ranks_name_the_rank_they_wait_for(tmp_path: Path) -> None:
    # NVIDIA/nccl#865 shape: rank 1's store wait names rank 0 as the one that never published the id.
    text = (
        "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
        "store by key '0', but store->get('0') got error: Socket Timeout"
    )
    d = correlator.diagnose(_load(tmp_path, text))
    assert (d.initiating_ranks, d.collateral_ranks) == ([0], [1])
    assert d.initiator_basis == "named by the ranks waiting for it"


def test_sigterm_pids_with_gaps_still_map_to_local_ranks(tmp_path: Path) -> None:
    # pytorch#88251: local_rank 5 (pid 59469) fails; the agent SIGTERMs the other seven, pids not consecutive.
    pfx = "WARNING:torch.distributed.elastic.multiprocessing.api:"
    lines = [
        f"{pfx}Sending process {p} closing signal SIGTERM"
        for p in (59460, 59461, 59462, 59463, 59466, 59470, 59471)
    ]
    lines.append(
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 5 (pid: 59469) "
        "of binary: /home/user/bin/python"
    )
    d = correlator.diagnose(_load(tmp_path, "\n".join(lines)))
    assert (d.initiating_ranks, d.collateral_ranks) == ([5], [0, 1, 2, 3, 4, 6, 7])


def test_mp_spawn_reports_name_the_worker(tmp_path: Path) -> None:
    # detectron2#3819 shape: the parent's ProcessRaisedException, then worker 1's own traceback.
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/torch/multiprocessing/spawn.py", line 150, in join',
            "    raise ProcessRaisedException(msg, error_index, failed_process.pid)",
            "torch.multiprocessing.spawn.ProcessRaisedException: ",
            "",
            "-- Process 1 terminated with the following error:",
            "Traceback (most recent call last):",
            '  File "train_net.py", line 120, in train',
            "    self.train_loop(self.start_iter, self.max_iter)",
            "FloatingPointError: Loss became infinite or NaN at iteration=12!",
        ]
    )
    d = correlator.diagnose(_load(tmp_path, text))
    assert (d.initiating_ranks, d.failure_kind) == ([1], "rank_crash")
    assert "FloatingPointError" in d.summary
    killed = tmp_path / "killed"
    killed.mkdir()
    d = correlator.diagnose(_load(killed, "Exception: process 3 terminated with signal SIGKILL"))
    assert (d.initiating_ranks, d.failure_kind) == ([3], "oom_kill")


def test_exception_raised_by_a_ranks_own_wait_is_an_effect(tmp_path: Path) -> None:
    # axolotl#2684 shape: rank 1's store wait times out, then its traceback (cut in the paste) follows.
    text = "\n".join(
        [
            (
                "[rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=79, "
                "addr=[localhost]:41170, remote=[localhost]:29500) timed out after 1800000ms"
            ),
            "[rank1]: Traceback (most recent call last):",
            '[rank1]:   File "<frozen runpy>", line 198, in _run_module_as_main',
        ]
    )
    t = _load(tmp_path, text)
    assert t.select("kind", "rank").rows() == [("store_error", 1), ("python_exception", 1)]
    from correlator.faults import fault_rows

    assert fault_rows(t)["role"].to_list() == ["effect", "effect"]


def test_fixed_width_wrap_rejoins_cut_lines(tmp_path: Path) -> None:
    full = [WATCHDOG.format(r=r) for r in (1, 2, 3)]
    width = 100
    # A terminal of 100 columns cuts each 260-character line into 100 + 100 + 60, mid-word.
    text = "\n".join(line[i : i + width] for line in full for i in range(0, len(line), width))
    rows = _load(tmp_path, text).filter(pl.col("kind") == "watchdog_timeout")
    assert rows.select("rank", "seq", "elapsed_ms", "line_count").rows() == [
        (1, 1580, 600061, 3),
        (2, 1580, 600062, 3),
        (3, 1580, 600063, 3),
    ]


def test_a_log_line_after_lines_of_the_wrap_width_is_not_a_wrap(tmp_path: Path) -> None:
    """Three lines of one length (a file's longest) make the hard-wrap test see a terminal of that width; the
    next line is a wrap's tail only when it does not start like a log line. An HF example script's line (its
    US-order stamp, ``parsers.app.HF``) does: it stays a row of its own (it was joined to the line before it)."""
    asc = [
        f"2026-11-29 22:00:01,234 WARNING [trainer] rank=3 step={s} loss=2.0959 lr=3.0e-04"
        for s in range(1830, 1836)
    ]
    hf = "11/29/2026 22:00:01 - WARNING - __main__ - world_size=16"
    rows = _load(tmp_path, "\n".join([*asc[:3], hf, *asc[3:], "the tail of a cut line"]))
    assert rows.select("kind", "layer", "line_count", "world_size").rows() == [
        ("step_progress", "app", 1, None),
        ("step_progress", "app", 1, None),
        ("step_progress", "app", 1, None),
        ("log", "app", 1, 16),
        ("step_progress", "app", 1, None),
        ("step_progress", "app", 1, None),
        ("step_progress", "app", 2, None),  # the plain line after it is a wrap's tail
    ]


def test_one_message_repeated_at_a_files_longest_is_no_wrap_width(tmp_path: Path) -> None:
    """A stderr log of tqdm bars with one ``UserWarning`` printed before each of them (the file's longest
    lines, all one text, of one length): no terminal cut them, so a bar after a copy is a row of its own (each
    bar was joined to the warning before it as the tail of a hard-wrapped line, and took its kind). Cut by a
    terminal of 70 columns, the same warning's pieces are joined again."""
    warn = (
        "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:560: UserWarning: This "
        "DataLoader will create 16 worker processes in total."
    )
    bars = [f"Epoch 0:  {i}%|#####     | {i}/100 [00:0{i}<00:10, 40.53it/s]" for i in range(1, 5)]
    rows = _load(tmp_path, "\n".join(x for b in bars for x in (warn, b)))
    assert rows.select("line", "line_count").rows() == [(i, 1) for i in range(1, 9)]
    assert rows["raw"].to_list() == [x for b in bars for x in (warn, b)]
    assert rows["kind"].to_list()[1::2] == ["progress_bar"] * 4
    cut = tmp_path / "cut"
    cut.mkdir()
    pieces = [warn[i : i + 70] for i in range(0, len(warn), 70)]  # 70 + 70 + 5 characters
    rows = _load(cut, "\n".join(x for b in bars for x in (*pieces, b)))
    assert rows.select("line", "line_count").rows() == [
        (1, 3),
        (4, 1),
        (5, 3),
        (8, 1),
        (9, 3),
        (12, 1),
        (13, 3),
        (16, 1),
    ]


def test_horovod_stall_reports_name_the_missing_rank(tmp_path: Path) -> None:
    ready = "Stalled ops: HorovodBroadcast_InceptionV3_Logits_Conv2d_1c_1x1_weights_0 [ready ranks: 5, 6, 3, 1, 4, 0]"
    d = correlator.diagnose(_load(tmp_path, ready))
    assert (d.initiating_ranks, d.failure_kind) == ([2], "straggler_hang")
    assert d.collateral_ranks == [0, 1, 3, 4, 5, 6]
    newer = tmp_path / "newer"
    newer.mkdir()
    text = "\n".join(
        [
            (
                "[1,0]<stderr>:[2020-01-14 13:48:07.704032: W horovod/common/stall_inspector.cc:105] One or more tensors "
                "were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
                "ranks for more than 60 seconds."
            ),
            "[1,0]<stderr>:Stalled ranks:",
            "[1,0]<stderr>:2: [HorovodBroadcast_Variable_0, HorovodBroadcast_Variable_1_0]",
        ]
    )
    d = correlator.diagnose(_load(newer, text))
    assert (d.initiating_ranks, d.collateral_ranks) == ([2], [0])
    odd = tmp_path / "odd"
    odd.mkdir()
    text = "\n".join(
        [
            "Stalled ops:",
            "HorovodAllreduce_loss_Mean_0 [ready ranks: 3]",
            "HorovodAllreduce_gradients_0 [ready ranks: 2, 0, 1]",
        ]
    )
    d = correlator.diagnose(_load(odd, text))
    assert (d.initiating_ranks, d.failure_kind) == ([3], "collective_mismatch")


def test_open_mpi_names_the_rank_that_died(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "[node-a:19474] *** Process received signal ***",
            "[node-a:19474] Signal: Segmentation fault (11)",
            "mpiexec noticed that process rank 0 with PID 19474 on node node-a exited on signal 11 (Segmentation fault).",
        ]
    )
    t = _load(tmp_path, text)
    assert t.filter(pl.col("kind") == "process_killed").select("rank", "exit_code", "signal").row(0) == (
        0,
        -11,
        "SIGSEGV",
    )
    d = correlator.diagnose(t)
    assert (d.initiating_ranks, d.failure_kind) == ([0], "rank_crash")


def test_lost_peer_with_one_rank_absent(tmp_path: Path) -> None:
    # pytorch#150916 shape: rank 1 reports the remote process exited; rank 0 left nothing in the paste.
    line = (
        "[rank1]:[E415 09:00:01.000000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
        "Collective WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) raised the "
        "following async exception: NCCL error: remote process exited or there was a network error"
    )
    d = correlator.diagnose(_load(tmp_path, line))
    assert (d.initiating_ranks, d.collateral_ranks) == ([0], [1])


def test_srun_task_ids_are_ranks_without_a_launcher_inside(tmp_path: Path) -> None:
    # facebookresearch/deit#102 shape: one task per rank; task 5 exits 1, the step is cancelled, the rest killed.
    text = "\n".join(
        [
            "srun: error: node-a: task 5: Exited with exit code 1",
            "slurmstepd: error: *** STEP 43575862.0 ON node-a CANCELLED AT 2021-07-14T08:00:36 ***",
            "srun: error: node-a: tasks 0-4,6,7: Killed",
        ]
    )
    d = correlator.diagnose(_load(tmp_path, text))
    assert (d.initiating_ranks, d.failure_kind) == ([5], "rank_crash")
    assert d.collateral_ranks == [0, 1, 2, 3, 4, 6, 7]


def test_nccl_cuda_dev_and_nccl_oom_on_one_node(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "node-a:3018451:3018451 [0] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'",
            "node-a:3018452:3018452 [1] NCCL INFO [Service thread] Connection closed by localRank 0",
        ]
    )
    t = _load(tmp_path, text)
    assert t.select("kind", "rank", "rank_source").rows() == [
        ("cuda_oom", 0, "gpu_index"),
        ("nccl_peer_closed", 1, "gpu_index"),
    ]
    d = correlator.diagnose(t)
    assert (d.initiating_ranks, d.failure_kind) == ([0], "cuda_oom")


def test_exit_codes_past_128_are_effects(tmp_path: Path) -> None:
    from correlator.faults import fault_rows

    pfx = "ERROR:torch.distributed.elastic.multiprocessing.api:"
    text = "\n".join(
        [
            f"{pfx}failed (exitcode: 143) local_rank: 1 (pid: 4242) of binary: /usr/bin/python",
            f"{pfx}failed (exitcode: 1) local_rank: 0 (pid: 4241) of binary: /usr/bin/python",
        ]
    )
    t = _load(tmp_path, text)
    assert fault_rows(t).sort("rank").select("rank", "role").rows() == [(0, "exit"), (1, "effect")]
    assert correlator.diagnose(t).initiating_ranks == [0]


def test_truncated_failed_line_still_names_the_worker(tmp_path: Path) -> None:
    t = _load(
        tmp_path, "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3"
    )
    assert t.select("kind", "exit_code", "local_rank").row(0) == ("worker_failed", -9, 3)


def test_ranks_losing_the_store_point_at_rank0(tmp_path: Path) -> None:
    text = "\n".join(
        f"[rank{r}]:[E1201 10:00:0{r}.000000000 TCPStore.cpp:125] [c10d] recvValue failed on "
        f"SocketImpl(fd=6, addr=[node-b]:4321{r}, remote=[node-a]:29500): Connection reset by peer"
        for r in (1, 2, 3)
    )
    d = correlator.diagnose(_load(tmp_path, text))
    assert d.initiating_ranks == [0]
    assert any("TCPStore" in r for r in d.confidence_reasons)


def test_rank_that_never_entered_the_collective_is_named(tmp_path: Path) -> None:
    # Ranks 0, 1, 3 entered work 88 (enqueued 88, completed 87); rank 2 was only told of the timeout by rank 0's
    # dump signal and had enqueued == completed == 87: it never entered the collective.
    pfx = "[rank{r}]:[E1201 10:00:0{s}.100000000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
    text = "\n".join(
        [
            *(
                pfx.format(r=r, s=0)
                + "Exception (either an error or timeout) detected by watchdog at work: 88, last "
                "enqueued NCCL work: 88, last completed NCCL work: 87."
                for r in (0, 1, 3)
            ),
            pfx.format(r=2, s=1)
            + "Received a dump signal due to a collective timeout from  rank 0 and we will try our "
            "best to dump the debug info. Last enqueued NCCL work: 87, last completed NCCL work: 87.",
        ]
    )
    d = correlator.diagnose(_load(tmp_path, text))
    assert (d.initiating_ranks, d.collateral_ranks) == ([2], [0, 1, 3])
    assert d.initiator_basis == "behind on the collective sequence"


def test_minority_timed_out_in_a_collective_the_majority_went_past(tmp_path: Path) -> None:
    fp = (
        "[rank{r}]:[I1201 10:00:0{s}.000000000 ProcessGroupWrapper.cpp:710] [Rank {r}] Running collective: "
        "CollectiveFingerPrint(SequenceNumber={q}, OpType=ALLREDUCE)"
    )
    wd = (
        "[rank0]:[E1201 10:10:05.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600010 "
        "milliseconds before timing out."
    )
    text = "\n".join([*(fp.format(r=r, s=q - 4, q=q) for r in (1, 2, 3) for q in (5, 6)), wd])
    d = correlator.diagnose(_load(tmp_path, text))
    assert (d.initiating_ranks, d.failure_kind) == ([0], "collective_mismatch")
    assert any("went past" in r for r in d.confidence_reasons)


#: torchtune#2093 (real, trimmed): ranks 4 and 5 time out in ALLREDUCE 28956, the agent SIGTERMs seven workers
#: and reports local rank 3 (pid 29577) dead by SIGABRT, the watchdog's way of ending a rank after a timeout.
_TT_WD = (
    "[rank{r}]:[E1129 11:56:57.20405550{r} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=28956, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 60002{r} "
    "milliseconds before timing out."
)
_TT_TERM = (
    "W1129 11:56:59.15{i}000 29471 torch/distributed/elastic/multiprocessing/api.py:897] Sending process {pid} "
    "closing signal SIGTERM"
)
_TT_ABRT = (
    "E1129 11:57:07.249000 29471 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) "
    "local_rank: 3 (pid: 29577) of binary: /home/user/venv3/bin/python"
)


def test_a_bare_sigabrt_exit_after_watchdog_timeouts_is_not_the_initiator(tmp_path: Path) -> None:
    """A rank whose only line is the launcher's ``exitcode: -6`` while other ranks report collective timeouts
    was taken down by its own watchdog (its timeout lines cut from the paste): the ranks that left no error
    are the candidates, not it. Without the timeouts the same exit still names rank 3."""
    pids = [29574, 29575, 29576, 29578, 29579, 29580, 29581]  # local ranks 0-2, 4-7 around 29577
    term = [_TT_TERM.format(i=i, pid=p) for i, p in enumerate(pids)]
    d = correlator.diagnose(
        _load(tmp_path, "\n".join([_TT_WD.format(r=4), _TT_WD.format(r=5), *term, _TT_ABRT]))
    )
    assert (d.initiating_ranks, d.failure_kind) == ([0, 1, 2, 6, 7], "straggler_hang")
    assert 3 in d.collateral_ranks
    bare = tmp_path / "bare"
    bare.mkdir()
    d = correlator.diagnose(_load(bare, "\n".join([*term, _TT_ABRT])))
    assert (d.initiating_ranks, d.failure_kind) == ([3], "rank_crash")


def test_failed_worker_that_lost_its_pid_is_the_hole_in_the_sigterm_pids(tmp_path: Path) -> None:
    # tatsu-lab/stanford_alpaca#183, as pasted: the failed line lost its local rank and pid, the SIGTERM lines
    # their signal names. Workers 53038, 53039, 53041 were signalled: 53040, local rank 2, is the one that died.
    pfx = "WARNING:torch.distributed.elastic.multiprocessing.api:"
    lines = [f"{pfx}Sending process {p} closing" for p in (53038, 53039, 53041)]
    lines.append(
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rankroot/anaconda3/envs/x/bin/python"
    )
    t = _load(tmp_path, "\n".join(lines))
    agent = t.filter(pl.col("kind").is_in(["worker_signalled", "worker_failed"]))
    assert agent.select("kind", "rank", "rank_source").rows() == [
        ("worker_signalled", 0, "pid_gap"),
        ("worker_signalled", 1, "pid_gap"),
        ("worker_signalled", 3, "pid_gap"),
        ("worker_failed", 2, "pid_gap"),
    ]
    d = correlator.diagnose(t)
    assert (d.initiating_ranks, d.collateral_ranks, d.failure_kind) == ([2], [0, 1, 3], "oom_kill")
    assert d.confidence < 0.95  # the identity is inferred


def test_no_rank_is_guessed_from_pids_without_exactly_one_hole(tmp_path: Path) -> None:
    pfx = "WARNING:torch.distributed.elastic.multiprocessing.api:"
    failed = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rankroot/x/bin/python"
    for pids in ((100, 101, 102), (100, 102, 104)):  # no hole (the failed one is at an end?), two holes
        sub = tmp_path / str(pids[-1])
        sub.mkdir()
        t = _load(sub, "\n".join([*(f"{pfx}Sending process {p} closing" for p in pids), failed]))
        assert t.filter(pl.col("kind") == "worker_failed")["rank"].to_list() == [None], pids


def test_vendor_patched_agent_wording(tmp_path: Path) -> None:
    # MemoryVLA#20: an agent patched to say "the closing signal" and "for binary located at … (process ID: N)".
    pfx = "[2026-03-30 19:24:35,966] torch.distributed.elastic.multiprocessing.api: "
    t = _load(
        tmp_path,
        "\n".join(
            [
                pfx + "[WARNING] Sending process 73 the closing signal SIGTERM",
                pfx
                + "[ERROR] failed (exitcode: -9) for binary located at /opt/conda/bin/python3.10 with local_rank: 0 "
                "(process ID: 71)",
            ]
        ),
    )
    rows = t.filter(pl.col("layer") == "elastic").select("kind", "pid", "signal", "exit_code", "rank")
    assert rows.rows() == [("worker_signalled", 73, "SIGTERM", None, 1), ("worker_failed", 71, None, -9, 0)]


def test_untagged_work_before_the_timeouts_points_at_rank0(tmp_path: Path) -> None:
    # pytorch/torchtune#2093: rank 0 alone gathers the state dict (its untagged log line is the last work
    # before the faults); ranks 4-5 time out in the next all_reduce, the others are SIGTERMed silent.
    wd = (
        "[rank{r}]:[E1129 11:56:57.204055508 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=28956, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600022 milliseconds before timing out."
    )
    quiet = "[rank{r}]:[I1129 09:00:00.000000000 ProcessGroupNCCL.cpp:900] [PG ID 0 PG GUID 0 Rank {r}] ProcessGroupNCCL initialization options: size: 4"
    head = "\n".join(quiet.format(r=r) for r in range(4))
    work = "INFO:torchtune.utils._logging:Getting full model state dict took 114.73 secs"
    fault = "\n".join(wd.format(r=r) for r in (2, 3))
    d = correlator.diagnose(_load(tmp_path, "\n".join([head, work, fault])))
    assert d.initiating_ranks == [0]
    assert "RANK0_PREFERRED" in d.confidence_reason_codes
    # without the untagged line, ranks 0 and 1 are both silent and neither is preferred
    other = tmp_path / "without"
    other.mkdir()
    d = correlator.diagnose(_load(other, "\n".join([head, fault])))
    assert d.initiating_ranks == [0, 1]


def test_horovodrun_gloo_index_prefix_is_the_rank(tmp_path: Path) -> None:
    # horovod/horovod#2907: horovodrun's gloo launcher prefixes '[index]<stream>:' (no job id, unlike Open MPI's
    # '[1,3]<stderr>:'); rank 0 is killed, ranks 1-3 abort on gloo::IoException.
    text = "\n".join(
        [
            "[0]<stderr>:RuntimeError: check_rank and exit epoch=1 batch=0 start_rank=0 rank=0",
            "[0]<stderr>:Killed",
            "[2]<stderr>:terminate called after throwing an instance of 'gloo::IoException'",
            (
                "[2]<stderr>:  what():  [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by "
                "peer [127.0.0.1]:54168"
            ),
        ]
    )
    t = _load(tmp_path, text)
    assert t.filter(pl.col("raw").str.contains("check_rank"))["rank"].to_list() == [0]
    assert t.filter(pl.col("raw").str.contains("Connection closed"))["rank"].to_list() == [2]
    d = correlator.diagnose(t)
    assert (d.initiating_ranks, d.collateral_ranks) == ([0], [2])


def test_a_silent_rank_the_agent_sigtermed_was_waiting_the_one_it_never_names_exited_early(
    tmp_path: Path,
) -> None:
    # cap-t2150-early-exit-plain-r3 (torch 2.15): rank 3 leaves the loop (exit 0); ranks 0 and 2 lose their
    # connection; torchrun SIGTERMs rank 1 (silent, alive at teardown) and lists it with -15; rank 3 is in no
    # launcher line. Rank 3 exited early; rank 1 is collateral.
    closed = (
        "[default{r}]:[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] "
        "Connection closed by peer [127.0.0.1]:40166. This is typically caused by a remote worker crashing."
    )
    agent = "W1205 00:26:50.678000 11681 torch/distributed/elastic/multiprocessing/api.py:1028] "
    entry = (
        "[{i}]:\n  time      : 2026-12-05_00:26:50\n  host      : localhost\n  rank      : {r} (local_rank: {r})\n"
        "  exitcode  : {code} (pid: {pid}){sig}\n  error_file: <N/A>\n  traceback : {tb}"
    )
    text = "\n".join(
        [
            "[default3]:step=4 data exhausted after 4 steps, leaving training loop",
            "[default1]:step=3 loss=1.1 avg_loss=1.0",
            closed.format(r=0),
            closed.format(r=2),
            agent + "Sending process 11751 closing signal SIGTERM",
            agent + "Sending process 11752 closing signal SIGTERM",
            "============================================================",
            "train.py FAILED",
            "------------------------------------------------------------",
            "Failures:",
            entry.format(
                i=1,
                r=1,
                code=-15,
                pid=11751,
                sig="  (SIGTERM)",
                tb="Signal 15 (SIGTERM) received by PID 11751",
            ),
            entry.format(i=2, r=2, code=1, pid=11752, sig=" ", tb="RuntimeError: Connection closed by peer"),
            "------------------------------------------------------------",
            "Root Cause (first observed failure):",
            entry.format(i=0, r=0, code=1, pid=11750, sig=" ", tb="RuntimeError: Connection closed by peer"),
            "============================================================",
        ]
    )
    d = correlator.diagnose(_load(tmp_path, text, name="launcher.log"))
    assert (d.initiating_ranks, d.failure_kind) == ([3], "early_exit")
    assert d.collateral_ranks == [0, 1, 2]


def test_a_summary_entry_cut_before_its_rank_is_placed_by_its_pid(tmp_path: Path) -> None:
    # A failure summary pasted with one entry cut down to its traceback field ('Signal 7 (SIGBUS) received by PID
    # 16614'); the other entries show ranks 0-4, 6, 7 at pids 16609-16613, 16615, 16616 (torchrun spawns local
    # ranks in pid order): the SIGBUS process is rank 5, and it failed first (the others were SIGTERMed).
    entry = (
        "[{i}]:\n  time      : 2024-03-05_10:00:05\n  host      : node-a\n  rank      : {r} (local_rank: {r})\n"
        "  exitcode  : -15 (pid: {pid})\n  error_file: <N/A>\n  traceback : Signal 15 (SIGTERM) received by PID {pid}"
    )
    body = [entry.format(i=i, r=r, pid=16609 + r) for i, r in enumerate([0, 1, 2, 3, 4, 6, 7], start=1)]
    text = "\n".join(
        [
            "train.py FAILED",
            "Failures:",
            *body,
            "[8]:",
            "  traceback : Signal 7 (SIGBUS) received by PID 16614",
        ]
    )
    t = _load(tmp_path, text)
    cut = t.filter(pl.col("pid") == 16614)
    assert cut.select("kind", "rank", "signal").rows() == [("worker_failed", 5, "SIGBUS")]
    d = correlator.diagnose(t)
    assert (d.initiating_ranks, d.failure_kind) == ([5], "rank_crash")
    assert d.collateral_ranks == [0, 1, 2, 3, 4, 6, 7]
