"""Launchers rankscope was not taught before issue #30 (fixtures/capture/launchers_more.py, cases cap-paddle-*,
cap-tdl-*, cap-ray-*) and Horovod's >= 0.21 stall report: each rule pinned on a minimal real line from a capture
(or, for Horovod, a public real log), with values read off the line by hand."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import correlator


def _load(tmp_path: Path, files: dict[str, str]) -> pl.DataFrame:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")
    return correlator.load(tmp_path)


def _one(t: pl.DataFrame, kind: str) -> dict:
    rows = t.filter(pl.col("kind") == kind)
    assert rows.height == 1, t.select("kind", "rank", "message").to_dicts()
    return rows.row(0, named=True)


# --------------------------------------------------------------------------- PaddlePaddle, legacy launcher

# cap-paddle-06-fleet-exception (Paddle 3.3.1 fleet/launch_utils.py:648), both handlers' copies of the line
ABORT_PLAIN = (
    "ERROR 2026-12-04 23:14:55,115 launch_utils.py:648] ABORT!!! Out of all 4 trainers, the trainer process with "
    "rank=[3] was aborted. Please check its log."
)
ABORT_BRACKET = (
    "[2026-12-04 23:14:55,115] [   ERROR] launch_utils.py:648 - ABORT!!! Out of all 4 trainers, the trainer process "
    "with rank=[3] was aborted. Please check its log."
)


def test_paddle_abort_line_names_the_failed_trainer(tmp_path: Path) -> None:
    r = _one(_load(tmp_path, {"launcher.log": ABORT_PLAIN}), "worker_failed")
    assert (r["rank"], r["layer"], r["world_size"], r["severity"]) == (3, "elastic", 4, "error")
    assert r["ts"].isoformat().startswith("2026-12-04T23:14:55.115")


def test_paddle_abort_bracket_handler_is_the_launcher_too(tmp_path: Path) -> None:
    r = _one(_load(tmp_path, {"launcher.log": ABORT_BRACKET}), "worker_failed")
    assert (r["rank"], r["layer"]) == (3, "elastic")


def test_paddle_abort_lists_every_failed_trainer(tmp_path: Path) -> None:
    # watch_local_trainers appends every trainer that had exited non-zero at the poll: rank=[0, 1]
    text = ABORT_PLAIN.replace("rank=[3]", "rank=[0, 1]")
    rows = _load(tmp_path, {"launcher.log": text}).filter(pl.col("kind") == "worker_failed")
    assert sorted(rows["rank"].to_list()) == [0, 1]
    assert sorted(rows["line_count"].to_list()) == [0, 1]  # one physical line
    text = ABORT_PLAIN.replace("rank=[3]", "rank=[2,3]")  # the list as Paddle's docs print it
    rows = _load(tmp_path / "b", {"launcher.log": text}).filter(pl.col("kind") == "worker_failed")
    assert sorted(rows["rank"].to_list()) == [2, 3]


def test_paddle_abort_line_alone_is_diagnosed(tmp_path: Path) -> None:
    # issue #30 item 1: this line alone used to exit 2 ("no distributed-training log lines recognised")
    d = correlator.diagnose(_load(tmp_path, {"launcher.log": ABORT_PLAIN}))
    assert d.initiating_ranks == [3]


def test_paddle_fleet_prefix_only_for_the_launcher_files(tmp_path: Path) -> None:
    # the same format from a trainer's own fleet logger is the trainer's line, not the launcher's
    t = _load(
        tmp_path,
        {
            "launcher.log": "INFO 2026-12-04 23:14:51,093 launch_utils.py:313] terminate process group gid:18514\n"
            "INFO 2026-12-04 23:14:51,093 fleet_base.py:313] fleet initialized"
        },
    )
    assert t.sort("line")["layer"].to_list()[0] == "elastic"
    assert t.sort("line")["layer"].to_list()[1] != "elastic"


# --------------------------------------------------------------------------- PaddlePaddle, new launcher

# cap-paddle-02-launch-sigkill launcher.log (Paddle 3.3.1 launch/controllers/controller.py, job/container.py)
CONSOLE = "\n".join(
    [
        "LAUNCH INFO 2026-12-04 23:18:43,320 nnodes: 1",
        "LAUNCH INFO 2026-12-04 23:18:43,751 Watching Pod: ylbmwj, replicas 4, status running",
        "2026-12-04 23:18:58,358 INFO [trainer] rank=0 step=2 loss=1.7369 avg_loss=1.4535 step_time=0.035s",
        "I1204 23:18:53.937424 23630 tcp_utils.cc:132] Successfully connected to 127.0.0.1:54551",
        "LAUNCH INFO 2026-12-04 23:18:58,842 Pod failed",
        "LAUNCH ERROR 2026-12-04 23:18:58,843 Container failed !!!",
        (
            "Container rank 2 status failed cmd ['/opt/venv/bin/python', '-u', 'paddle_train.py', '--fault', "
            "'sigkill', '--fault-rank', '2', '--fault-step', '3'] code -9 log <cases>/logs/log/workerlog.2"
        ),
        "LAUNCH INFO 2026-12-04 23:18:58,843 ------------------------- ERROR LOG DETAIL -------------------------",
        "I1204 23:18:54.961845 23643 tcp_utils.cc:132] Successfully connected to 127.0.0.1:54551",
        "LAUNCH INFO 2026-12-04 23:19:00,707 Exit code -15",
    ]
)


def test_paddle_container_failed_names_rank_and_code(tmp_path: Path) -> None:
    r = _one(_load(tmp_path, {"launcher.log": CONSOLE}), "worker_failed")
    assert (r["rank"], r["local_rank"], r["exit_code"], r["layer"]) == (2, 2, -9, "elastic")


def test_paddle_console_copies_are_the_trainers_streams(tmp_path: Path) -> None:
    # before ERROR LOG DETAIL: local trainer 0's log as it is written; after: the failed container's tail
    t = _load(tmp_path, {"launcher.log": CONSOLE}).filter(pl.col("message").str.starts_with("Successfully"))
    assert t.sort("line")["rank"].to_list() == [0, 2]


def test_paddle_sigkill_console_names_the_killed_trainer(tmp_path: Path) -> None:
    d = correlator.diagnose(_load(tmp_path, {"launcher.log": CONSOLE}))
    assert (d.initiating_ranks, d.failure_kind) == ([2], "oom_kill")


# --------------------------------------------------------------------------- Paddle trainers (workerlog.N)

# cap-paddle-01-launch-exception log/workerlog.2: a teardown report framed by dashed banners
TORN_DOWN = "\n".join(
    [
        "2026-12-04 23:16:15,568 INFO [trainer] rank=2 step=2 loss=1.1284 avg_loss=1.4535 step_time=0.057s",
        "",
        "",
        "--------------------------------------",
        "C++ Traceback (most recent call last):",
        "--------------------------------------",
        "No stack trace in paddle, may be caused by external reasons.",
        "",
        "----------------------",
        "Error Message Summary:",
        "----------------------",
        "FatalError: `Termination signal` is detected by the operating system.",
        '  [TimeInfo: *** Aborted at 1796426178 (unix time) try "date -d @1796426178" if you are using GNU date ***]',
        "  [SignalInfo: *** SIGTERM (@0x4e97) received by PID 20308 (TID 0x7f60b6e02b80) from PID 20119 ***]",
    ]
)


def test_paddle_termination_report_is_a_teardown(tmp_path: Path) -> None:
    r = _one(_load(tmp_path, {"log/workerlog.2": TORN_DOWN}), "worker_signalled")
    assert (r["signal"], r["pid"], r["severity"]) == ("SIGTERM", 20308, "warning")


def test_paddle_banners_keep_workerlog_rank(tmp_path: Path) -> None:
    # the dashed banners are not torchelastic's summary borders: workerlog.N keeps the rank its name gives
    files = {f"log/workerlog.{i}": TORN_DOWN.replace("rank=2", f"rank={i}") for i in range(2)}
    files["log/workerlog.1"] = files["log/workerlog.1"].replace(
        "2026-12-04 23:16:15,568 INFO [trainer] rank=1 ", ""
    )
    t = _load(tmp_path, files)
    banners = t.filter(pl.col("message").str.starts_with("-----"))
    assert banners["layer"].unique().to_list() == ["python"]
    sig = t.filter(pl.col("kind") == "worker_signalled").sort("path")
    assert sig.select("rank", "rank_source").rows() == [(0, "file_name"), (1, "file_name")]


def test_paddle_gloo_pair_error_names_the_peer(tmp_path: Path) -> None:
    # cap-paddle-01 workerlog.0: trainer 1 died, the pair to it broke
    line = (
        "RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:584] TIMEOUT self_rank = 0 pair_rank = 1 "
        "peer_str = [127.0.0.1]:17287"
    )
    r = _one(_load(tmp_path, {"console.log": line}), "gloo_connection_closed")
    assert (r["peer_rank"], r["peer_addr"]) == (1, "127.0.0.1")


def test_paddle_gloo_recv_timeout(tmp_path: Path) -> None:
    # cap-paddle-03-launch-hang workerlog.1: no peer to name ('none')
    line = (
        "RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:80] TIMEOUT self_rank = none "
        "pair_rank = 2 peer_str = none"
    )
    r = _one(_load(tmp_path, {"console.log": line}), "gloo_timeout")
    assert r["peer_rank"] is None


# --------------------------------------------------------------------------- Horovod >= 0.21 stall report

# Horovod 0.21.1 + TensorFlow 2.4 (public repro DEKHTIARJonathan/HVD_TF_Worker_Desync_BugReport): rank 0 missing
STALL_HEAD = (
    "[2021-02-02 21:19:07.345988: W /tmp/pip-install-dxtho7yu/horovod_0bde588442554cf4b80c76441efc4e03/horovod/common/"
    "stall_inspector.cc:105] One or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
    "ranks and are waiting for remainder of ranks for more than 10 seconds. This may indicate that different ranks "
    "are trying to submit different tensors or that only subset of ranks is submitting tensors, which will cause "
    "deadlock. "
)
STALL_ITEM = (
    "0: [cond_1/then/_10/cond_1/SGD/PartitionedCall/DistributedSGD_Allreduce/cond/then/_79/DistributedSGD_Allreduce/"
    "cond/HorovodAllreduce_grads_0]"
)


def test_horovod_missing_ranks_any_tensor_name(tmp_path: Path) -> None:
    t = _load(tmp_path, {"train.log": "\n".join([STALL_HEAD, "Missing ranks:", STALL_ITEM])})
    r = _one(t, "stall_missing")
    assert (r["peer_rank"], r["op"]) == (0, "ALLREDUCE")
    assert r["pg"].endswith("HorovodAllreduce_grads_0")
    assert correlator.diagnose(t).initiating_ranks == [0]


def test_horovod_missing_ranks_marked_for_shutdown_and_torch_names(tmp_path: Path) -> None:
    # stall_inspector.cc: '<rank>!' past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS; PyTorch names 'allreduce.<param>'
    text = "\n".join(
        [
            STALL_HEAD,
            "Missing ranks:",
            "1!: [allreduce.fc.weight, allreduce.fc.bias]",
            "3: [allreduce.fc.weight]",
        ]
    )
    rows = _load(tmp_path, {"train.log": text}).filter(pl.col("kind") == "stall_missing").sort("peer_rank")
    assert rows.select("peer_rank", "op").rows() == [(1, "ALLREDUCE"), (3, "ALLREDUCE")]


def test_horovod_list_line_needs_its_header(tmp_path: Path) -> None:
    # '1: [x]' outside a stall report says nothing about rank 1
    text = "\n".join(["epoch 3 done", "1: [allreduce.fc.weight]", "loss 0.3"])
    assert "stall_missing" not in _load(tmp_path, {"train.log": text})["kind"].to_list()


# --------------------------------------------------------------------------- Ray Train (driver console)

E = "\x1b"
# cap-ray-02-trainer-sigkill console.log (Ray 2.60.0, Train V2): the controller's pid map, a worker's own line
RAY_MAP = "\n".join(
    [
        f"{E}[36m(TrainController pid=2593){E}[0m Started training worker group of size 4: ",
        f"{E}[36m(TrainController pid=2593){E}[0m - (ip=192.0.2.2, pid=3329) world_rank=0, local_rank=0, node_rank=0",
        f"{E}[36m(TrainController pid=2593){E}[0m - (ip=192.0.2.2, pid=3439) world_rank=1, local_rank=1, node_rank=0",
        f"{E}[36m(TrainController pid=2593){E}[0m - (ip=192.0.2.2, pid=3481) world_rank=2, local_rank=2, node_rank=0",
    ]
)
RAY_GLOO = (
    f"{E}[36m(RayTrainWorker pid=3439){E}[0m RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
    "pair.cc:537] Read error [127.0.0.1]:45785: Connection reset by peer."
)


def test_ray_worker_prefix_gets_the_rank_from_the_controller_map(tmp_path: Path) -> None:
    t = _load(tmp_path, {"console.log": RAY_MAP + "\n" + RAY_GLOO})
    r = _one(t, "gloo_connection_closed")
    assert (r["rank"], r["rank_source"], r["pid"]) == (1, "transport_prefix", None)
    assert r["message"].startswith("RuntimeError: [")  # the prefix is stripped
    assert t.filter(pl.col("kind") == "rendezvous").height == 3


def test_ray_worker_rank_from_its_process_group_line(tmp_path: Path) -> None:
    # without the controller's map: the worker's own ray/train/torch/config.py line
    text = "\n".join(
        [
            f"{E}[36m(RayTrainWorker pid=3329){E}[0m Setting up process group for: env:// [rank=0, world_size=4]",
            RAY_GLOO.replace("pid=3439", "pid=3329"),
        ]
    )
    assert _one(_load(tmp_path, {"console.log": text}), "gloo_connection_closed")["rank"] == 0


DEAD = "\n".join(
    [
        f"{E}[36m(TrainController pid=2593){E}[0m [Rank 1,3 Error Snippet]:",
        f"{E}[36m(TrainController pid=2593){E}[0m ",
        f"{E}[36m(TrainController pid=2593){E}[0m [Rank 2 Error Snippet]:",
        f"{E}[36m(TrainController pid=2593){E}[0m A worker health check failed.",
    ]
)


def test_ray_snippet_of_a_dead_worker_is_its_failure(tmp_path: Path) -> None:
    # poll.py: '[Rank 2 Error Snippet]:' + the health-check text: the process died, it wrote nothing itself
    t = _load(tmp_path, {"console.log": RAY_MAP + "\n" + DEAD})
    r = _one(t, "worker_failed")
    assert (r["rank"], r["pid"]) == (2, None)  # never the controller's pid 2593
    d = correlator.diagnose(_load(tmp_path / "x", {"console.log": RAY_MAP + "\n" + RAY_GLOO + "\n" + DEAD}))
    assert d.initiating_ranks == [2]


def test_ray_snippet_of_a_raised_error_gives_each_rank_the_error(tmp_path: Path) -> None:
    # cap-ray-02 driver traceback: '[Rank 1,3 Error Snippet]:' + the traceback ranks 1 and 3 raised; Ray's log dedup
    # folded rank 3's own copy, so this is the only line that says rank 3 failed
    text = "\n".join(
        [
            "[Rank 1,3 Error Snippet]:",
            "Traceback (most recent call last):",
            '  File "/opt/app/ray_train.py", line 62, in train_loop',
            "    dist.all_reduce(p.grad)",
            (
                "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
                "[127.0.0.1]:45785: Connection reset by peer."
            ),
        ]
    )
    t = _load(tmp_path, {"console.log": text})
    head = t.filter(pl.col("message") == "[Rank 1,3 Error Snippet]:").sort("rank")
    assert head.select("rank", "kind").rows() == [
        (1, "gloo_connection_closed"),
        (3, "gloo_connection_closed"),
    ]
    assert "worker_failed" not in t["kind"].to_list()


def test_ray_snippet_without_its_traceback_stays_a_report(tmp_path: Path) -> None:
    # the controller's copy, whose traceback the dedup folded: the next line is the wrapper's own exception
    text = "\n".join(
        [
            f"{E}[36m(TrainController pid=11994){E}[0m [Rank 1,2 Error Snippet]:",
            (
                f"{E}[36m(TrainController pid=11994){E}[0m ray.train.WorkerGroupError: Training failed due to worker "
                "errors:"
            ),
        ]
    )
    t = _load(tmp_path, {"console.log": text})
    assert t.filter(pl.col("message") == "[Rank 1,2 Error Snippet]:")["kind"].to_list() == ["log"]
