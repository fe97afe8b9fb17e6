"""Seeded generator of realistic torchrun log directories of a failed NCCL job, for benchmarks and tests.

``uv run python benchmarks/generate.py --ranks 256 --lines 20000 --out /tmp/bench256``

Layout (one torchrun agent per node of 8 ranks, ``torchrun --log-dir ... --redirects 3``)::

    DIR/node-0003/launcher.log
    DIR/node-0003/torchrun_logs/<run>_<8 chars>/attempt_0/<local_rank>/{stdout,stderr}.log

Per rank, ``stdout.log`` holds the NCCL_DEBUG=INFO init banner (Init START/COMPLETE lines giving
rank <-> host/pid), then training: per step one Python logging progress line
(``2026-11-29 23:08:34,362 INFO [trainer] rank=1 step=0 loss=...``) and ``colls_per_step`` NCCL COLL
lines (``NCCL_DEBUG_SUBSYS=COLL``: ``AllReduce: opCount 1f4 ... comm 0x... [nranks=N]``), which are the
bulk of the bytes. The culprit rank dies with a CUDA OOM traceback (``[rankN]:`` excepthook prefix, on
stderr) one collective short of the others; the agent of its node SIGTERMs its node peers; every rank of
the other nodes logs the c10d watchdog timeout 600 s later (torch 2.5 shapes, docs/log-formats.md §3.5) and
aborts (-6), and its agent reports it. Line shapes are copied from ``fixtures/cases`` and
``docs/log-formats.md`` so the real parsers understand them.

Two more shapes for the scale of discovery and identity (issue 35 item 3), a few lines per file:
``--shape files --files 200000`` writes that many tiny per-rank files (``--layout torchrun``:
``node-XXXXX/attempt_0/<local_rank>/{stdout,stderr}.log``, 8 ranks a node; ``--layout flat``:
``rankN.log``); ``--shape ranks --ranks 1000000`` writes one combined log whose ``[rankN]:`` prefixes
name that many distinct ranks (``--faults``: each with a watchdog timeout) (see :func:`generate_many_files`, :func:`generate_many_ranks`).

Deterministic for a given (ranks, lines, seed). ``--lines`` is the approximate number of lines per rank
(stdout + stderr). Returns/prints the culprit rank and byte/line totals as JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
from pathlib import Path

RANKS_PER_NODE = 8
COLLS_PER_STEP = 20
_OPS = [
    ("AllReduce", 25165824, 7),
    ("AllGather", 4194304, 7),
    ("ReduceScatter", 4194304, 7),
    ("AllReduce", 1048576, 7),
    ("Broadcast", 1, 4),
]
_T0 = dt.datetime(2026, 11, 29, 22, 0, 0)


def _py_ts(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


#: Logging formats of the application-heavy job's Python lines (``--log-format``), each the shape of a real
#: producer's line as ``parsers.app`` knows it: ``asctime`` ``%(asctime)s %(levelname)s [%(name)s] …``;
#: ``hf`` the HF transformers / accelerate example scripts' ``%(asctime)s - %(levelname)s - %(name)s -`` with
#: ``%m/%d/%Y %H:%M:%S``, and HF Trainer's metrics dicts (``{'loss': 2.31, …, 'epoch': 0.01}``);
#: ``deepspeed`` DeepSpeed's ``[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s]``;
#: ``hydra`` Hydra's job logging ``[%(asctime)s][%(name)s][%(levelname)s] -``.
LOG_FORMATS = ("asctime", "hf", "deepspeed", "hydra")


def _log(fmt: str, t: dt.datetime, level: str, name: str, msg: str) -> str:
    """One Python logging line of ``fmt`` (:data:`LOG_FORMATS`) at ``t``."""
    if fmt == "hf":
        return f"{t.strftime('%m/%d/%Y %H:%M:%S')} - {level} - {name} - {msg}"
    if fmt == "deepspeed":
        return f"[{_py_ts(t)}] [{level}] [{name}.py:{100 + len(msg) % 400}:step] {msg}"
    if fmt == "hydra":
        return f"[{_py_ts(t)}][{name}][{level}] - {msg}"
    return f"{_py_ts(t)} {level} [{name}] {msg}"


def _c10_ts(t: dt.datetime, rng: random.Random) -> str:
    return f"{t.month}{t.day:02d} {t.strftime('%H:%M:%S')}.{rng.randrange(10**9):09d}"


def _launch_ts(t: dt.datetime) -> str:
    return f"{t.month:02d}{t.day:02d} {t.strftime('%H:%M:%S')}.{t.microsecond:06d}"


def generate(
    out: str | Path, ranks: int = 16, lines: int = 2000, seed: int = 0, colls_per_step: int = COLLS_PER_STEP
) -> dict[str, object]:
    """Write the log tree under ``out`` and return what was written (culprit, files, bytes, lines)."""
    out = Path(out)
    rng = random.Random(seed)
    nodes = max(1, (ranks + RANKS_PER_NODE - 1) // RANKS_PER_NODE)
    culprit = rng.randrange(ranks)
    culprit_node = culprit // RANKS_PER_NODE
    comm_id = f"0x{rng.getrandbits(64):016x}"
    rdzv = f"{rng.randrange(1000, 9999)}"
    # Steps so that (init + steps * (1 + colls)) ~= lines per rank.
    init_lines = 24
    steps = max(2, (lines - init_lines - 6) // (1 + colls_per_step))
    fail_step = steps - 1  # the culprit dies in the backward of this step
    steps * colls_per_step  # opCount the healthy ranks reach (they hang in the next one)
    fail_seq = fail_step * colls_per_step + colls_per_step // 2  # the collective the others wait in
    step_dt = dt.timedelta(seconds=1.7)
    t_fail = _T0 + dt.timedelta(seconds=90) + step_dt * fail_step
    t_timeout = t_fail + dt.timedelta(milliseconds=600_000 + 40)
    total_bytes = 0
    total_lines = 0
    files = 0
    alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
    for node in range(nodes):
        host = f"node-{node:04d}"
        base = out / host
        run = base / "torchrun_logs" / f"{rdzv}_{''.join(rng.choice(alnum) for _ in range(8))}" / "attempt_0"
        agent_pid = 40000 + node * 100
        node_ranks = [r for r in range(node * RANKS_PER_NODE, min(ranks, (node + 1) * RANKS_PER_NODE))]
        pids = {r: agent_pid + 47 + (r - node * RANKS_PER_NODE) for r in node_ranks}
        for r in node_ranks:
            lr = r - node * RANKS_PER_NODE
            pid = pids[r]
            tid = pid + 71
            comm = f"0x55{rng.getrandbits(40):010x}"
            stream_p = f"0x55{rng.getrandbits(40):010x}"
            bufs = [f"0x7f{rng.getrandbits(36):09x}000" for _ in _OPS]
            pfx = f"{host}:{pid}:{pid} [{lr}] NCCL INFO "
            tpfx = f"{host}:{pid}:{tid} [{lr}] NCCL INFO "
            bus = f"{0x18 + 0x10 * lr:x}000"
            d = run / str(lr)
            d.mkdir(parents=True, exist_ok=True)
            so: list[str] = [
                (
                    f"{_py_ts(_T0 + dt.timedelta(seconds=30, milliseconds=lr))} INFO [trainer] rank={r} step=- starting worker "
                    f"pid={pid} local_rank={lr} group_rank={node} world_size={ranks} master=node-0000:29500 attempt=0 torch=2.5.1+cu124"
                ),
                pfx + "NCCL_SOCKET_IFNAME set by environment to eth0",
                pfx + f"Bootstrap : Using eth0:192.0.2.{10 + node % 240}<0>",
                pfx + "NET/Plugin : No plugin found, using internal implementation",
                pfx + "cudaDriverVersion 12040",
                *([pfx + "NCCL version 2.21.5+cuda12.4"] if r == 0 else []),
                tpfx + "NCCL_IB_HCA set to mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7",
                tpfx
                + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:192.0.2.11<0>",
                tpfx + "Using network IB",
                tpfx
                + f"ncclCommInitRank comm {comm} rank {r} nranks {ranks} cudaDev {lr} nvmlDev {lr} busId {bus} "
                f"commId {comm_id} - Init START",
                tpfx + f"Setting affinity for GPU {lr} to ffffffff,00000000,ffffffff",
                tpfx
                + f"comm {comm} rank {r} nRanks {ranks} nNodes {nodes} localRanks {len(node_ranks)} localRank {lr} MNNVL 0",
                tpfx
                + f"Trees [0] {(r + 1) % ranks}/-1/-1->{r}->{(r - 1) % ranks} [1] {(r + 1) % ranks}/-1/-1->{r}->{(r - 1) % ranks}",
                tpfx + "P2P Chunksize set to 131072",
                tpfx + f"Channel 00/0 : {r}[{lr}] -> {(r + 1) % ranks}[{(lr + 1) % 8}] via P2P/CUMEM/read",
                tpfx + f"Channel 01/0 : {r}[{lr}] -> {(r + 1) % ranks}[{(lr + 1) % 8}] via P2P/CUMEM/read",
                tpfx + "Connected all rings",
                tpfx + "Connected all trees",
                tpfx + "threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
                tpfx
                + "8 coll channels, 8 collnet channels, 0 nvls channels, 8 p2p channels, 2 p2p channels per peer",
                tpfx + "TUNER/Plugin: Using internal tuner plugin.",
                tpfx
                + f"ncclCommInitRank comm {comm} rank {r} nranks {ranks} cudaDev {lr} nvmlDev {lr} busId {bus} "
                f"commId {comm_id} - Init COMPLETE",
                (
                    f"{_py_ts(_T0 + dt.timedelta(seconds=60, milliseconds=lr))} INFO [trainer] rank={r} step=- process group "
                    f"initialized backend=nccl timeout=600s"
                ),
            ]
            coll_tail = [
                f" sendbuff {b} recvbuff {b} count {n} datatype {dtp} op 0 root 0 comm {comm} [nranks={ranks}] "
                f"stream {stream_p}"
                for b, (_, n, dtp) in zip(bufs, _OPS)
            ]
            coll_head = [f"{pfx}{op}: opCount " for op, _, _ in _OPS]
            nops = len(_OPS)
            is_culprit = r == culprit
            last_seq = (
                fail_seq if is_culprit else fail_seq + 1
            )  # healthy ranks entered fail_seq (opCount fail_seq)
            seq = 0
            loss = 2.0 + rng.random()
            for step in range(steps):
                t = (
                    _T0
                    + dt.timedelta(seconds=90)
                    + step_dt * step
                    + dt.timedelta(milliseconds=rng.randrange(40))
                )
                loss = loss * 0.999 + rng.random() * 0.01
                so.append(
                    f"{_py_ts(t)} INFO [trainer] rank={r} step={step} loss={loss:.4f} avg_loss={loss * 1.01:.4f} "
                    f"lr=0.0003 step_time={1.6 + rng.random() * 0.2:.3f}s"
                )
                for _ in range(colls_per_step):
                    if seq >= last_seq:
                        break
                    k = seq % nops
                    so.append(f"{coll_head[k]}{seq:x}{coll_tail[k]}")
                    seq += 1
                if seq >= last_seq:
                    break
            se: list[str] = [
                (
                    f"[rank{r}]:[W{_c10_ts(_T0 + dt.timedelta(seconds=59), rng)} ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 "
                    f"Rank {r}] using GPU {lr} to perform barrier as devices used by this process are currently unknown. This can "
                    f"potentially cause a hang if this rank to GPU mapping is incorrect. Specify device_ids in barrier() to force "
                    f"use of a particular device, or call init_process_group() with a device_id."
                ),
            ]
            if is_culprit:
                tb = [
                    "Traceback (most recent call last):",
                    '  File "/workspace/llm/train.py", line 301, in <module>',
                    "    main()",
                    (
                        '  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", '
                        "line 355, in wrapper"
                    ),
                    "    return f(*args, **kwargs)",
                    '  File "/workspace/llm/train.py", line 274, in main',
                    "    loss.backward()",
                    '  File "/usr/local/lib/python3.11/dist-packages/torch/_tensor.py", line 581, in backward',
                    "    torch.autograd.backward(",
                    '  File "/usr/local/lib/python3.11/dist-packages/torch/autograd/graph.py", line 825, in _engine_run_backward',
                    "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
                    (
                        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU {lr} has a total capacity of "
                        "79.19 GiB of which 2.31 GiB is free. Including non-PyTorch memory, this process has 76.87 GiB memory in use. "
                        "Of the allocated memory 71.02 GiB is allocated by PyTorch, and 4.38 GiB is reserved by PyTorch but "
                        "unallocated. If reserved but unallocated memory is large try setting "
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
                        "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
                    ),
                ]
                se += [f"[rank{r}]: {x}" for x in tb]
            elif node != culprit_node:
                ts = _c10_ts(t_timeout, rng)
                sq = fail_seq + 1  # c10d SeqNum counts from 1
                work = (
                    f"WorkNCCL(SeqNum={sq}, OpType=ALLREDUCE, NumelIn=25165824, NumelOut=25165824, "
                    f"Timeout(ms)=600000)"
                )
                se += [
                    (
                        f"[rank{r}]:[E{ts} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
                        f"{work} ran for 600049 milliseconds before timing out."
                    ),
                    (
                        f"[rank{r}]:[E{ts} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Exception (either an "
                        f"error or timeout) detected by watchdog at work: {sq}, last enqueued NCCL work: {sq + 1}, last completed "
                        f"NCCL work: {sq - 1}."
                    ),
                    (
                        f"[rank{r}]:[E{ts} ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Timeout at NCCL "
                        f"work: {sq}, last enqueued NCCL work: {sq + 1}, last completed NCCL work: {sq - 1}."
                    ),
                    (
                        f"[rank{r}]:[E{ts} ProcessGroupNCCL.cpp:630] [Rank {r}] Some NCCL operations have failed or timed out. Due "
                        "to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."
                    ),
                    (
                        f"[rank{r}]:[E{ts} ProcessGroupNCCL.cpp:636] [Rank {r}] To avoid data inconsistency, we are taking the "
                        "entire process down."
                    ),
                ]
            for name, body in (("stdout.log", so), ("stderr.log", se)):
                text = "\n".join(body) + "\n"
                (d / name).write_text(text)
                total_bytes += len(text)
                total_lines += len(body)
                files += 1
        # The agent's log: banner, then what it saw.
        lp = "torch/distributed/elastic/multiprocessing/api.py"
        lt = _launch_ts(_T0)
        launcher = [
            f"W{lt} {agent_pid} torch/distributed/run.py:793] ",
            f"W{lt} {agent_pid} torch/distributed/run.py:793] *****************************************",
            (
                f"W{lt} {agent_pid} torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process "
                "to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal "
                "performance in your application as needed. "
            ),
            f"W{lt} {agent_pid} torch/distributed/run.py:793] *****************************************",
        ]
        if node == culprit_node:
            t_end = t_fail + dt.timedelta(seconds=2)
            first_failed, code = culprit, 1
        else:
            t_end = t_timeout + dt.timedelta(seconds=3)
            first_failed, code = node_ranks[0], -6
        le = _launch_ts(t_end)
        for r in node_ranks:
            if r != first_failed:
                launcher.append(
                    f"W{le} {agent_pid} {lp}:897] Sending process {pids[r]} closing signal SIGTERM"
                )
        flr = first_failed - node * RANKS_PER_NODE
        launcher.append(
            f"E{_launch_ts(t_end + dt.timedelta(milliseconds=530))} {agent_pid} {lp}:869] failed (exitcode: "
            f"{code}) local_rank: {flr} (pid: {pids[first_failed]}) of binary: /usr/bin/python"
        )
        launcher += [
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/torchrun", line 8, in <module>',
            "    sys.exit(main())",
            '  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/launcher/api.py", line 270, in launch_agent',
            "    raise ChildFailedError(",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "============================================================",
            "train.py FAILED",
            "------------------------------------------------------------",
            "Failures:",
        ]
        stamp = t_end.strftime("%Y-%m-%d_%H:%M:%S")
        others = [r for r in node_ranks if r != first_failed]
        for i, r in enumerate(others, 1):
            launcher += [
                f"[{i}]:",
                f"  time      : {stamp}",
                f"  host      : {host}.cluster.example",
                f"  rank      : {r} (local_rank: {r - node * RANKS_PER_NODE})",
                f"  exitcode  : -15 (pid: {pids[r]})",
                "  error_file: <N/A>",
                f"  traceback : Signal 15 (SIGTERM) received by PID {pids[r]}",
            ]
        if not others:
            launcher.append("  <NO_OTHER_FAILURES>")
        launcher += [
            "------------------------------------------------------------",
            "Root Cause (first observed failure):",
            "[0]:",
            f"  time      : {stamp}",
            f"  host      : {host}.cluster.example",
            f"  rank      : {first_failed} (local_rank: {flr})",
            f"  exitcode  : {code} (pid: {pids[first_failed]})",
            "  error_file: <N/A>",
            (
                "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
                if code == 1
                else f"  traceback : Signal 6 (SIGABRT) received by PID {pids[first_failed]}"
            ),
            "============================================================",
        ]
        base.mkdir(parents=True, exist_ok=True)
        text = "\n".join(launcher) + "\n"
        (base / "launcher.log").write_text(text)
        total_bytes += len(text)
        total_lines += len(launcher)
        files += 1
    return {
        "dir": str(out),
        "ranks": ranks,
        "nodes": nodes,
        "culprit": culprit,
        "culprit_host": f"node-{culprit_node:04d}",
        "files": files,
        "bytes": total_bytes,
        "lines": total_lines,
        "seed": seed,
        "steps": steps,
        "fail_seq": fail_seq,
    }


def _tiny_rank_lines(r: int, world: int, culprit: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """stdout and stderr of one rank of a job that hangs behind ``culprit`` (a CUDA OOM): a start line and
    one step on stdout; on stderr the culprit's OOM, every other rank's c10d watchdog timeout."""
    t = _T0 + dt.timedelta(seconds=30, milliseconds=r % 1000)
    so = [
        f"{_py_ts(t)} INFO [trainer] rank={r} step=- starting worker world_size={world}",
        f"{_py_ts(t + dt.timedelta(seconds=60))} INFO [trainer] rank={r} step=0 loss={2 + rng.random():.4f}",
    ]
    if r == culprit:
        se = [
            f"[rank{r}]: Traceback (most recent call last):",
            f'[rank{r}]:   File "/workspace/train.py", line 274, in main',
            f"[rank{r}]:     loss.backward()",
            (
                f"[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a "
                "total capacity of 79.19 GiB of which 2.31 GiB is free."
            ),
        ]
    else:
        ts = _c10_ts(_T0 + dt.timedelta(seconds=690), rng)
        se = [
            (
                f"[rank{r}]:[E{ts} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
                "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
                "Timeout(ms)=600000) ran for 600049 milliseconds before timing out."
            )
        ]
    return so, se


def _app_rank_lines(
    r: int, world: int, lines: int, culprit: int, rng: random.Random, fmt: str = "asctime"
) -> tuple[list[str], list[str]]:
    """stdout and stderr of one rank of an application-heavy job (no NCCL line): Python logging (trainer,
    data loader, eval), ``warnings`` output and tqdm progress bars (~20% of the lines, on stderr); the culprit
    dies of a CUDA OOM traceback on stderr, the others time out in the c10d watchdog 600 s later. Shapes from
    ``fixtures/cases`` (python logging ``%(asctime)s %(levelname)s [%(name)s]``, warnings'
    ``FILE:LINE: Category: message``, tqdm's ``desc: NN%|bar| n/total [elapsed<left, rate]``); ``fmt`` the logging
    format (:data:`LOG_FORMATS`)."""
    so: list[str] = []
    se: list[str] = []
    t = _T0 + dt.timedelta(seconds=30, milliseconds=r % 1000)
    so.append(_log(fmt, t, "INFO", "trainer", f"rank={r} step=- starting worker world_size={world}"))
    total = max(10, lines // 5)
    for i in range(lines):
        t += dt.timedelta(milliseconds=40 + rng.randrange(20))
        k = i % 10
        if k < 4:
            so.append(
                _log(
                    fmt,
                    t,
                    "INFO",
                    "trainer",
                    f"rank={r} step={i // 10} loss={2 + rng.random():.4f} lr=3.0e-04",
                )
            )
        elif k == 4 and fmt == "hf":  # HF Trainer's metrics, printed as a dict (no logging prefix)
            so.append(
                f"{{'loss': {2 + rng.random():.4f}, 'grad_norm': {rng.random() * 4:.4f}, "
                f"'learning_rate': 0.0003, 'epoch': {i / lines:.2f}}}"
            )
        elif k == 4:
            so.append(
                _log(
                    fmt,
                    t,
                    "INFO",
                    "data",
                    f"worker {rng.randrange(8)} prefetched shard {rng.randrange(4096)} (1024 samples)",
                )
            )
        elif k == 5:
            so.append(
                _log(
                    fmt,
                    t,
                    "INFO",
                    "eval",
                    f"step={i // 10} val_loss={2 + rng.random():.4f} accuracy={rng.random():.3f}",
                )
            )
        elif k == 6:
            se.append(
                "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:560: UserWarning: This "
                "DataLoader will create 16 worker processes in total."
            )
        elif k == 7:
            so.append(
                _log(
                    fmt,
                    t,
                    "WARNING",
                    "trainer",
                    f"rank={r} gradient norm {rng.random() * 10:.2f} clipped to 1.0",
                )
            )
        else:
            n = i // 5
            pct = 100 * n // total
            se.append(
                f"Epoch 0: {pct:3d}%|#####     | {n}/{total} [00:{n % 60:02d}<00:10, {40 + rng.random():.2f}it/s]"
            )
    if r == culprit:
        se += [
            "Traceback (most recent call last):",
            '  File "/workspace/train.py", line 274, in main',
            "    loss.backward()",
            (
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity "
                "of 79.19 GiB of which 2.31 GiB is free."
            ),
        ]
    else:
        ts = _c10_ts(t + dt.timedelta(seconds=600), rng)
        se.append(
            f"[rank{r}]:[E{ts} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
            "Timeout(ms)=600000) ran for 600049 milliseconds before timing out."
        )
    return so, se


def _interleave_lines(streams: list[list[str]]) -> list[str]:
    """The lines of ``streams`` as one console prints them: each stream's lines in order, the streams merged by
    the share of each already printed (ties to the lower stream)."""
    keyed = [
        (i / max(1, len(lines)), k, i, line)
        for k, lines in enumerate(streams)
        for i, line in enumerate(lines)
    ]
    return [line for *_, line in sorted(keyed)]


def _glue_torn(lines: list[str]) -> list[str]:
    """``lines`` as a console prints them where a line ending in NUL (``"\\0"``) was written without its
    newline (a tqdm bar torn by torchrun's tee, which writes what ``readline`` returns, newline or not): the
    next line is glued to it, on the same physical line (``…1.0it/s][default1]:…``,
    ``transport.split_glued_tee``)."""
    out: list[str] = []
    glue = ""
    for line in lines:
        if line.endswith("\0"):
            glue += line[:-1]
            continue
        out.append(glue + line)
        glue = ""
    if glue:
        out.append(glue)
    return out


def generate_app(
    out: str | Path,
    ranks: int = 16,
    lines: int = 20000,
    seed: int = 0,
    fmt: str = "asctime",
    tee: bool = False,
    srun: bool = False,
    torn: int = 0,
) -> dict[str, object]:
    """An application-heavy job (see :func:`_app_rank_lines`; ``fmt`` its logging format, :data:`LOG_FORMATS`)
    in the plain torchrun ``--log-dir`` layout of one node, not the generator's node folders:
    ``out/attempt_0/<rank>/{stdout,stderr}.log``. ``tee``: instead, each node's console as ``torchrun --tee 3``
    prints it, ``out/node-<K>/console.log``: the lines of its ranks (:data:`RANKS_PER_NODE` a node, stdout and
    stderr merged) behind the tee's ``[default<local rank>]:`` prefix (``TailLog``, torch 1.9 - 2.13),
    interleaved. ``srun``: instead, the job's Slurm output as ``srun --label`` writes it, ``out/slurm.out``:
    every rank's lines (stdout and stderr merged) behind its task label ``R: ``, interleaved; with ``tee``, one
    task per node running torchrun (``srun -l torchrun --tee 3``): each node's console behind the node's label.
    ``torn`` (with ``tee``): one of each ``torn`` progress bars of a rank is printed without its newline, so the
    console's next line is glued to it (:func:`_glue_torn`); 0 for none."""
    if torn and not tee:
        raise ValueError("torn bars are a tee'd console's: use tee")
    if fmt not in LOG_FORMATS:
        raise ValueError(f"unknown log format {fmt!r}; one of {', '.join(LOG_FORMATS)}")
    out = Path(out)
    rng = random.Random(seed)
    culprit = rng.randrange(ranks)
    total_bytes = n_lines = files = 0
    consoles: dict[int, list[list[str]]] = {}
    tasks: list[list[str]] = []
    for r in range(ranks):
        so, se = _app_rank_lines(r, ranks, lines, culprit, rng, fmt)
        if srun and not tee:
            tasks.append([f"{r}: {x}" for x in _interleave_lines([so, se])])
            continue
        if tee:
            lr = r % RANKS_PER_NODE
            if torn:
                bars = [k for k, x in enumerate(se) if x.startswith("Epoch 0:")]
                for k in bars[torn - 1 :: torn]:
                    se[k] += "\0"
            consoles.setdefault(r // RANKS_PER_NODE, []).append(
                [f"[default{lr}]:{x}" for x in _interleave_lines([so, se])]
            )
            continue
        d = out / "attempt_0" / str(r)
        d.mkdir(parents=True, exist_ok=True)
        b, n, f = _write_bodies([(d / "stdout.log", so), (d / "stderr.log", se)])
        total_bytes, n_lines, files = total_bytes + b, n_lines + n, files + f
    if srun and tee:
        tasks = [
            [f"{node}: {x}" for x in _glue_torn(_interleave_lines(streams))]
            for node, streams in consoles.items()
        ]
        consoles = {}
    if tasks:
        out.mkdir(parents=True, exist_ok=True)
        b, n, f = _write_bodies([(out / "slurm.out", _interleave_lines(tasks))])
        total_bytes, n_lines, files = total_bytes + b, n_lines + n, files + f
    for node, streams in consoles.items():
        d = out / f"node-{node}"
        d.mkdir(parents=True, exist_ok=True)
        b, n, f = _write_bodies([(d / "console.log", _glue_torn(_interleave_lines(streams)))])
        total_bytes, n_lines, files = total_bytes + b, n_lines + n, files + f
    return {
        "dir": str(out),
        "shape": "app",
        "log_format": fmt,
        "tee": tee,
        "srun": srun,
        "torn": torn,
        "ranks": ranks,
        "culprit": culprit,
        "files": files,
        "bytes": total_bytes,
        "lines": n_lines,
        "seed": seed,
    }


def _write_bodies(bodies: list[tuple[Path, list[str]]]) -> tuple[int, int, int]:
    """Write each (path, lines); returns (bytes, lines, files) written."""
    nbytes = nlines = 0
    for path, body in bodies:
        text = "\n".join(body) + "\n"
        path.write_text(text)
        nbytes += len(text.encode())
        nlines += len(body)
    return nbytes, nlines, len(bodies)


def generate_many_files(
    out: str | Path, files: int = 200_000, layout: str = "torchrun", seed: int = 0
) -> dict[str, object]:
    """Write ``files`` tiny per-rank log files (half stdout, half stderr for ``torchrun``; one
    ``rankN.log`` per rank for ``flat``) of a job whose culprit dies of a CUDA OOM while the others time
    out. Returns the culprit and totals."""
    out = Path(out)
    rng = random.Random(seed)
    ranks = max(1, files // 2) if layout == "torchrun" else max(1, files)
    culprit = rng.randrange(ranks)
    total_bytes = written = lines = 0
    out.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        so, se = _tiny_rank_lines(r, ranks, culprit, rng)
        if layout == "torchrun":
            d = out / f"node-{r // RANKS_PER_NODE:05d}" / "attempt_0" / str(r % RANKS_PER_NODE)
            d.mkdir(parents=True, exist_ok=True)
            bodies = [(d / "stdout.log", so), (d / "stderr.log", se)]
        elif layout == "flat":
            bodies = [(out / f"rank{r}.log", so + se)]
        else:
            raise ValueError(f"unknown layout {layout!r}")
        b, n, f = _write_bodies(bodies)
        total_bytes, lines, written = total_bytes + b, lines + n, written + f
    return {
        "dir": str(out),
        "shape": "files",
        "layout": layout,
        "ranks": ranks,
        "culprit": culprit,
        "files": written,
        "bytes": total_bytes,
        "lines": lines,
        "seed": seed,
    }


def generate_many_ranks(
    out: str | Path, ranks: int = 1_000_000, seed: int = 0, faults: bool = False
) -> dict[str, object]:
    """Write one combined log (``out/combined.log``) whose ``[rankN]:`` prefixes name ``ranks`` distinct
    ranks: per rank one short progress line (``[rank7]: step 41 loss 2.3141``), the culprit's OOM traceback
    after its own; with ``faults`` every other rank's line is its c10d watchdog timeout instead (the stderr
    of :func:`_tiny_rank_lines`: ~4x the bytes, and a fault per rank). Ranks past ``RANKSCOPE_MAX_WORLD``
    are read as unknown, with a warning."""
    out = Path(out)
    rng = random.Random(seed)
    culprit = rng.randrange(min(ranks, 1 << 18))
    out.mkdir(parents=True, exist_ok=True)
    total_bytes = lines = 0
    with open(out / "combined.log", "w") as f:
        for r in range(ranks):
            _so, se = _tiny_rank_lines(r, ranks, culprit, rng)
            if not faults:
                se = [f"[rank{r}]: step 41 loss {2 + rng.random():.4f}", *(se if r == culprit else [])]
            text = "\n".join(se) + "\n"
            f.write(text)
            total_bytes += len(text)
            lines += len(se)
    return {
        "dir": str(out),
        "shape": "ranks",
        "ranks": ranks,
        "culprit": culprit,
        "files": 1,
        "bytes": total_bytes,
        "lines": lines,
        "seed": seed,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--lines", type=int, default=2000, help="approximate lines per rank")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--shape",
        choices=("job", "files", "ranks", "app"),
        default="job",
        help="job: the torchrun job above; app: an application-heavy job (no NCCL line); files: --files tiny per-rank files; ranks: one log naming --ranks ranks",
    )
    ap.add_argument("--files", type=int, default=200_000, help="files written by --shape files")
    ap.add_argument("--layout", choices=("torchrun", "flat"), default="torchrun", help="for --shape files")
    ap.add_argument(
        "--faults", action="store_true", help="--shape ranks: a watchdog timeout line per rank (not progress)"
    )
    ap.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="asctime",
        help="--shape app: the format of the Python logging lines (asctime, HF example scripts, DeepSpeed, Hydra)",
    )
    ap.add_argument(
        "--tee",
        action="store_true",
        help="--shape app: each node's console as torchrun --tee 3 prints it (node-K/console.log, [defaultN]: lines)",
    )
    ap.add_argument(
        "--srun",
        action="store_true",
        help="--shape app: the job's Slurm output as srun --label writes it (slurm.out, 'R: ' before each line; "
        "with --tee, each node's torchrun console behind the node's label)",
    )
    ap.add_argument(
        "--torn",
        type=int,
        default=0,
        metavar="N",
        help="--shape app --tee: one of each N progress bars of a rank printed without its newline, the console's "
        "next line glued to it (torchrun's tee writes what readline returns); 0 (default) for none",
    )
    a = ap.parse_args(argv)
    if a.torn and not (a.shape == "app" and a.tee):
        ap.error("--torn needs --shape app --tee (torn bars are a tee'd console's)")
    if a.shape == "files":
        info = generate_many_files(a.out, a.files, a.layout, a.seed)
    elif a.shape == "ranks":
        info = generate_many_ranks(a.out, a.ranks, a.seed, a.faults)
    elif a.shape == "app":
        info = generate_app(a.out, a.ranks, a.lines, a.seed, a.log_format, a.tee, a.srun, a.torn)
    else:
        info = generate(a.out, a.ranks, a.lines, a.seed)
    json.dump(info, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
