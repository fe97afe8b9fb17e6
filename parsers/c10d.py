"""PyTorch C++ logs: c10 logging, glog, ProcessGroupNCCL / ProcessGroupGloo / ProcessGroupWrapper,
DDP reducer and TCPStore messages (docs/log-formats.md §2–4, §6).

Prefixes (outermost first):
- c10, torch ≥ 2.4: ``[rank<R>]:[<S><MMDD> <HH:MM:SS>.<9 digits> <file>:<line>] `` — the 9 digits come from
  a monotonic clock, not wall time, so only the seconds are used; the month is not zero-padded;
- c10, torch ≤ 2.3: ``[rank<R>]:[<S> <file>:<line>] `` (2.2 – 2.3) and ``[<S> <file>:<line>] `` (≤ 2.1);
- glog ``<S>[YYYY]MMDD HH:MM:SS.uuuuuu <tid> file:line] `` and torch._logging 2.3+ (same shape, pid field);
- the ProcessGroupNCCL PG prefix ``[PG ID 0 PG GUID 0(default_pg) Rank 13] `` (2.5+), ``[PG 1 Rank 11] ``
  (2.2 – 2.4), and the work-level ``[Rank 13] `` (all versions; a rank *within the PG*).
"""

from __future__ import annotations

import polars as pl

from parsers.rules import Prefix, Rule, ascii_classes

C10_NEW = Prefix(
    "c10",
    r"^(?:\[rank(?P<c10_rank>\d+)\]:)?\[(?P<sev>[FEWIV])(?P<mmdd>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)\.(?P<frac>\d+) "
    r"(?:(?P<c10_pid>\d+) )?(?P<src>[^\]\s]+?):(?P<srcline>\d+)\] ?(?P<rest>.*)$",
    layer="c10d",
    source="c10/util/Logging.cpp non-glog prefix, torch 2.4 – 2.13",
    example="[rank0]:[E1129 23:08:36.778382438 ProcessGroupGloo.cpp:2901] [Rank 0]: Rank 2 failed to pass "
    "monitoredBarrier in 15000 ms",
)
C10_OLD = Prefix(
    "c10_old",
    r"^(?:\[rank(?P<c10_rank>\d+)\]:)?\[(?P<sev>[FEWIV]) (?P<src>[^\]\s]+?):(?P<srcline>\d+)\] ?(?P<rest>.*)$",
    layer="c10d",
    source="c10/util/Logging.cpp non-glog prefix, torch ≤ 2.3 (no time)",
    example="[rank5]:[E ProcessGroupNCCL.cpp:563] [Rank 5] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=15734, OpType=ALLREDUCE, NumelIn=220084533, NumelOut=220084533, Timeout(ms)=600000) ran for "
    "600037 milliseconds before timing out.",
)
GLOG = Prefix(
    "glog",
    r"^(?:\[rank(?P<c10_rank>\d+)\]:)?(?P<sev>[VIWEFC])(?P<yyyy>\d{4})?(?P<mm>\d\d)(?P<dd>\d\d) "
    r"(?P<hms>\d\d:\d\d:\d\d)\.(?P<usec>\d{6}) +(?P<glog_id>\d+) (?P<src>[^:\s\]]+):(?P<srcline>\d+)\]"
    r"(?: \[[^\]]*\])* ?(?P<rest>.*)$",
    layer="c10d",
    source="glog ≤0.5 / ≥0.6 (year) and torch._logging ≥ 2.3 (torchelastic agent lines)",
    example="W1129 23:08:36.614000 13396 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process "
    "13399 closing signal SIGTERM",
)
#: Uncaught-exception prefix installed by init_process_group (torch ≥ 2.4): every traceback line.
EXCEPTHOOK = Prefix(
    "excepthook",
    r"^\[rank(?P<c10_rank>\d+)\]: (?P<rest>.*)$",
    source="torch.distributed excepthook (distributed_c10d.py, torch ≥ 2.4)",
    example="[rank2]: CorruptBatchError: corrupt sample in shard 17 (record 4093): expected 16 features, got 15",
)
PG_PREFIX = Prefix(
    "pg",
    r"^\[PG (?:ID (?P<pg_id>\d+) PG GUID )?(?P<pg>[^\s(\]]+)(?: ?\((?P<pg_desc>[^)]*)\))? Rank (?P<pg_rank>\d+)\]:? +"
    r"(?P<rest>.*)$",
    source="ProcessGroupNCCL logPrefix(), torch 2.2 – 2.13",
    example="[PG ID 0 PG GUID 0(default_pg) Rank 13] Timeout at NCCL work: 4471, last enqueued NCCL work: 4473, "
    "last completed NCCL work: 4470.",
)
RANK_PREFIX = Prefix(
    "pg_rank",
    r"^\[Rank (?P<pg_rank>\d+)\]:? +(?P<rest>.*)$",
    source="ProcessGroupNCCL/Gloo work-level prefix, all versions",
    example="[Rank 2] Running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, ...)",
)

_WORK = ascii_classes(
    r"Work\w*\((?:SeqNum=(?P<seq>\d+), )?(?:c10d::)?OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel>\d+), NumelOut=\d+)?"
    r"(?:, TensorShape=(?P<shape>\[[^\]]*\]))?, Timeout\(ms\)=(?P<timeout_ms>\d+)\)"
)
#: torch ≤ 2.0 prints no SequenceNumber: ``CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[], …)``.
_FP = ascii_classes(
    r"CollectiveFingerPrint\((?:SequenceNumber=(?P<seq>\d+),? ?)?OpType=(?P<op>\w+)(?:, TensorShape=(?P<shape>\[[^\]]*\]))?"
)
PGNCCL = "ProcessGroupNCCL.cpp, torch {}"

RULES: list[Rule] = [
    Rule(
        "benign_uv_loop",
        "log",
        "c10d",
        "uv_loop_close failed",
        None,
        "info",
        "TCPStoreLibUvBackend.cpp, torch 2.4+ (benign at exit)",
        "[I1129 23:08:11.380901383 TCPStoreLibUvBackend.cpp:1354] [c10d] uv_loop_close failed with:-16 errn:EBUSY "
        "desc:resource busy or locked",
    ),
    Rule(
        "watchdog_terminated",
        "watchdog_teardown",
        "c10d",
        "watchdog thread terminated with exception",
        r"watchdog thread terminated with exception:(?:.*?" + _WORK + r")?",
        "error",
        PGNCCL.format("2.0 – 2.13"),
        "[rank14]:[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank 14] Process group watchdog thread terminated with exception: "
        "[Rank 14] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=15734, OpType=ALLREDUCE, "
        "NumelIn=220084533, NumelOut=220084533, Timeout(ms)=600000) ran for 600098 milliseconds before timing out.",
    ),
    Rule(
        "watchdog_timeout",
        "watchdog_timeout",
        "c10d",
        "Watchdog caught collective operation timeout",
        r"Watchdog caught collective operation timeout: "
        + _WORK
        + r" ran for (?P<elapsed_ms>\d+) milliseconds",
        "error",
        PGNCCL.format("1.10 – 2.13"),
        "[rank5]:[E ProcessGroupNCCL.cpp:563] [Rank 5] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=15734, OpType=ALLREDUCE, NumelIn=220084533, NumelOut=220084533, Timeout(ms)=600000) ran for "
        "600037 milliseconds before timing out.",
    ),
    Rule(
        "blocking_wait_timeout",
        "watchdog_timeout",
        "c10d",
        "timed out in blocking wait",
        r"Work " + _WORK + r" timed out in blocking wait",
        "error",
        PGNCCL.format("1.10 – 2.13 NCCL_BLOCKING_WAIT"),
        "[Rank 3] Work WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=60000) timed out in "
        "blocking wait.",
    ),
    Rule(
        # The older blocking-wait wording, raised by ``work.wait()`` in the rank's own thread
        # (WorkNCCL::synchronizeInternal: ``"[Rank ", rank_, "] ", "Caught collective operation timeout: ",
        # (*this), " ran for ", ...``); the line is the exception line of the caller's traceback.
        "blocking_wait_caught",
        "watchdog_timeout",
        "c10d",
        "] Caught collective operation timeout: ",
        r"Caught collective operation timeout: " + _WORK + r" ran for (?P<elapsed_ms>\d+) milliseconds",
        "error",
        "ProcessGroupNCCL.cpp WorkNCCL::synchronizeInternal, torch 1.x – 2.0 with NCCL_BLOCKING_WAIT=1 (real line: "
        "ultralytics/ultralytics#3688)",
        "RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, "
        "TensorShape=[], Timeout(ms)=10800000) ran for 10800031 milliseconds before timing out.",
    ),
    Rule(
        "timeout_at_work",
        "watchdog_status",
        "c10d",
        "Timeout at NCCL work",
        r"Timeout at NCCL work: (?P<seq>\d+), last enqueued NCCL work: (?P<seq_enqueued>\d+), last completed NCCL "
        r"work: (?P<seq_completed>\d+)",
        "error",
        PGNCCL.format("2.3 – 2.5"),
        "[rank11]:[E ProcessGroupNCCL.cpp:1537] [PG 1 Rank 11] Timeout at NCCL work: 15734, last enqueued NCCL work: "
        "15735, last completed NCCL work: 15733.",
    ),
    Rule(
        "detected_by_watchdog",
        "watchdog_status",
        "c10d",
        "detected by watchdog at work",
        r"detected by watchdog at work(?: sequence id)?:? (?P<seq>\d+),? (?:PG status: )?last enqueued (?:NCCL )?"
        r"work: (?P<seq_enqueued>\d+), last completed (?:NCCL )?work: (?P<seq_completed>\d+)",
        "error",
        PGNCCL.format("2.3 – 2.13 (four layouts)"),
        "[PG ID 0 PG GUID 0(default_pg) Rank 13] Exception (either an error or timeout) detected by watchdog at work: "
        "4471, last enqueued NCCL work: 4473, last completed NCCL work: 4470.",
    ),
    # HeartbeatMonitor::getNCCLWatchdogTimeoutErrorMsg(c10::str(" rank ", timeOutRank)) in ProcessGroupNCCL.cpp
    # (torch 2.4+) prints "... due to a collective timeout from  rank 7 and ..." (two spaces) when another rank
    # wrote the dump signal to the store, "from this local rank" when it was this one. The rank clause is an
    # optional group that scans ahead, so it captures N when present (an empty alternative matched first before).
    Rule(
        "dump_signal",
        "heartbeat_timeout",
        "c10d",
        "dump signal",
        r"(?:.*?(?:global dump signal from rank|collective timeout from\s+rank) (?P<peer_rank>\d+))?"
        r".*?Last enqueued NCCL work: (?P<seq_enqueued>-?\d+), last completed NCCL work: (?P<seq_completed>-?\d+)",
        "error",
        PGNCCL.format("2.4 – 2.13 heartbeat monitor"),
        "[PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump signal due to a collective timeout from this local "
        "rank and we will try our best to dump the debug info. Last enqueued NCCL work: 88, last completed NCCL work: 87.",
    ),
    Rule(
        "heartbeat",
        "watchdog_hang",
        "c10d",
        "Heartbeat monitor timed out",
        None,
        "error",
        PGNCCL.format("2.2 – 2.3"),
        "[PG 0 Rank 2] Heartbeat monitor timed out! Process will be terminated after dumping debug info. "
        "workMetaList_.size()=1",
    ),
    Rule(
        "watchdog_stuck",
        "watchdog_hang",
        "c10d",
        "watchdog got stuck for",
        r"watchdog got stuck for (?P<stuck_s>\d+) seconds",
        "fatal",
        PGNCCL.format("2.2 – 2.13"),
        "[PG ID 0 PG GUID 0(default_pg) Rank 6] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making "
        "progress in monitoring enqueued collectives.",
    ),
    Rule(
        "terminating_watchdog_hang",
        "watchdog_hang",
        "c10d",
        "due to ProcessGroupNCCL watchdog hang",
        None,
        "fatal",
        PGNCCL.format("2.5 – 2.13"),
        "[PG ID 0 PG GUID 0(default_pg) Rank 6] Terminating the process after attempting to dump debug info, due to "
        "ProcessGroupNCCL watchdog hang.",
    ),
    Rule(
        "terminating_after_dump",
        "heartbeat_timeout",
        "c10d",
        "Terminating the process after attempting to dump",
        None,
        "fatal",
        PGNCCL.format("2.5 – 2.13"),
        "[PG ID 0 PG GUID 0(default_pg) Rank 6] Terminating the process after attempting to dump debug info, due to "
        "collective timeout or exception.",
    ),
    Rule(
        "async_exception",
        "async_error",
        "c10d",
        "raised the following async exception",
        r"Collective " + _WORK + r" raised the following async exception",
        "error",
        PGNCCL.format("1.10 – 2.13"),
        "[Rank 3] Collective WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) raised "
        "the following async exception: NCCL error: remote process exited or there was a network error",
    ),
    Rule(
        "teardown_inconsistency",
        "watchdog_teardown",
        "c10d",
        "taking the entire process down",
        None,
        "error",
        PGNCCL.format("1.10 – 2.13"),
        "[rank14]:[E ProcessGroupNCCL.cpp:583] [Rank 14] To avoid data inconsistency, we are taking the entire process down.",
    ),
    Rule(
        "teardown_corrupted",
        "watchdog_teardown",
        "c10d",
        "Some NCCL operations have failed or timed out",
        None,
        "error",
        PGNCCL.format("1.10 – 2.13"),
        "[rank14]:[E ProcessGroupNCCL.cpp:577] [Rank 14] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
    ),
    Rule(
        "remote_error",
        "nccl_error",
        "c10d",
        "remote error detected from rank",
        r"remote error detected from rank: (?P<peer_rank>\d+)",
        "error",
        PGNCCL.format("2.8+ TORCH_NCCL_PROPAGATE_ERROR"),
        "[PG ID 0 PG GUID 0(default_pg) Rank 4]  remote error detected from rank: 2",
    ),
    Rule(
        "mismatch",
        "collective_mismatch",
        "c10d",
        "Detected mismatch between collectives",
        r"Rank (?P<rank_stated>\d+) is running collective: "
        + _FP
        + r"(?:.*?but Rank (?P<peer_rank>\d+) is running(?: collective: CollectiveFingerPrint\((?:SequenceNumber=\d+,? ?)?"
        + r"OpType=(?P<peer_op>\w+)(?:, TensorShape=(?P<peer_shape>\[[^\]]*\]))?)?)?",
        "error",
        "ProcessGroupWrapper.cpp, TORCH_DISTRIBUTED_DEBUG=DETAIL, torch 1.10 – 2.13",
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 3 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=34, OpType=BROADCAST, TensorShape=[2], TensorDtypes=Float), but Rank 0 is "
        "running collective: CollectiveFingerPrint(SequenceNumber=34, OpType=ALLREDUCE, TensorShape=[2], TensorDtypes=Float)",
    ),
    Rule(
        "gloo_size_mismatch",
        "collective_mismatch",
        "c10d",
        "Received data size doesn't match expected size",
        r"(?P<recv_bytes>\d+) vs (?P<expect_bytes>\d+)",
        "error",
        "gloo transport/tcp/pair.cc enforce (gloo 2024 – 2025, torch 2.13)",
        "terminate called after throwing an instance of 'gloo::EnforceNotMet' what():  [enforce fail at "
        "/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 384 vs "
        "256. Received data size doesn't match expected size. Is there a distributed collective mismatch in your code?",
    ),
    Rule(
        "gloo_size_mismatch_bare",
        "collective_mismatch",
        "c10d",
        "op.preamble.length <= op.nbytes",
        r"op\.preamble\.length <= op\.nbytes\. (?P<recv_bytes>\d+) vs (?P<expect_bytes>\d+)",
        "error",
        "gloo transport/tcp/pair.cc GLOO_ENFORCE_LE before the explanatory text was added (torch 2.0.1 – 2.4.1 "
        "wheels, captured: cap-t201-shape-plain-r2, cap-t241-shape-plain-r1)",
        "terminate called after throwing an instance of 'gloo::EnforceNotMet' what():  [enforce fail at "
        "../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes. 384 vs 256",
    ),
    Rule(
        "fingerprint",
        "collective_fingerprint",
        "c10d",
        "Running collective: CollectiveFingerPrint",
        _FP,
        "debug",
        "ProcessGroupWrapper.cpp:710, TORCH_DISTRIBUTED_DEBUG=DETAIL, torch 2.x",
        "[rank2]:[I1129 23:08:34.843647925 ProcessGroupWrapper.cpp:710] [Rank 2] Running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[32, 16], TensorDtypes=Float)",
    ),
    Rule(
        "monitored_barrier_failed",
        "monitored_barrier_failed",
        "c10d",
        "failed to pass monitoredBarrier",
        r"Ranks? (?P<ranks_spec>(?P<peer_rank>\d+)(?:, \d+)*) failed to pass monitoredBarrier in (?P<timeout_ms>\d+) ms",
        "error",
        "ProcessGroupGloo.cpp monitoredBarrier, torch 1.10 – 2.13",
        "[rank0]:[E1129 23:08:36.778416339 ProcessGroupGloo.cpp:67] [Rank 0]: Ranks 2 failed to pass monitoredBarrier "
        "in 15000 ms",
    ),
    Rule(
        "monitored_barrier_timeout",
        "monitored_barrier_failed",
        "c10d",
        "timed out in monitoredBarrier",
        r"Rank (?P<peer_rank>\d+) timed out in monitoredBarrier after (?P<timeout_ms>\d+) ms",
        "error",
        "ProcessGroupGloo.cpp monitoredBarrier, torch 1.10 – 2.13",
        "Rank 1 timed out in monitoredBarrier after 2000 ms.",
    ),
    Rule(
        "monitored_barrier_peer",
        "monitored_barrier_peer",
        "c10d",
        "successfully reached monitoredBarrier",
        r"Rank (?P<rank_stated>\d+) successfully reached monitoredBarrier, but received errors while waiting for "
        r"send/recv from rank (?P<peer_rank>\d+)",
        "error",
        "ProcessGroupGloo.cpp monitoredBarrier, torch 1.10 – 2.13",
        "Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0. "
        "Please check rank 0 logs for faulty rank.",
    ),
    Rule(
        "ddp_unused",
        "ddp_error",
        "c10d",
        "Expected to have finished reduction in the prior iteration",
        None,
        "error",
        "reducer.cpp ensure_prior_reduction_finished, torch 1.x – 2.13",
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.",
    ),
    Rule(
        "ddp_params",
        "ddp_error",
        "c10d",
        "DDP expects same model across all ranks",
        r"Rank (?P<rank_stated>\d+) has (?P<n_params>\d+) params, while rank (?P<peer_rank>\d+) has inconsistent",
        "error",
        "DDP _verify_param_shape_across_processes, torch 1.x – 2.13",
        "RuntimeError: DDP expects same model across all ranks, but Rank 1 has 2 params, while rank 0 has inconsistent 4 params.",
    ),
    Rule(
        "ddp_sizes",
        "ddp_error",
        "c10d",
        "appears not to match",
        r"(?:\[(?P<rank_stated>\d+)\]: )?params\[\d+\] in this process with sizes (?P<shape>\[[^\]]*\]) appears "
        r"not to match (?:sizes|strides) of the same param in process (?P<peer_rank>\d+)",
        "error",
        "DDP reducer.cpp verify_params_across_processes, torch 1.x – 2.15: '[R]: params[p] in this process with "
        "sizes … appears not to match sizes of the same param in process 0.' (strides: without '[R]: ')",
        "RuntimeError: [3]: params[0] in this process with sizes [64, 32] appears not to match sizes of the same param "
        "in process 0.",
    ),
    Rule(
        "gloo_closed",
        "gloo_connection_closed",
        "c10d",
        "Connection closed by peer",
        r"Connection closed by peer \[(?P<peer_addr>[^\]]+)\]:\d+",
        "error",
        "gloo transport/tcp/pair.cc (2018 – 2025)",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [192.0.2.12]:15475",
    ),
    Rule(
        "gloo_read_error",
        "gloo_connection_closed",
        "c10d",
        "tcp/pair.cc",
        r"(?:Read error|Socket closed|Socket unexpectedly closed|writev|Read timeout|Write timeout) "
        r"\[(?P<peer_addr>[^\]]+)\]:\d+",
        "error",
        "gloo transport/tcp/pair.cc",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:584] Read error [192.0.2.12]:5429: Connection "
        "reset by peer",
    ),
    Rule(
        "gloo_pair_closure",
        "gloo_connection_closed",
        "c10d",
        "Application timeout caused pair closure",
        None,
        "error",
        "gloo transport/tcp",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Application timeout "
        "caused pair closure",
    ),
    Rule(
        "gloo_timeout",
        "gloo_timeout",
        "c10d",
        "Timed out waiting",
        r"Timed out waiting (?P<timeout_ms>\d+)ms for (?P<gloo_dir>recv|send) operation to complete",
        "error",
        "gloo transport/tcp/unbound_buffer.cc",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for "
        "recv operation to complete",
    ),
    Rule(
        "store_client_timeout",
        "store_error",
        "c10d",
        "client socket has timed out",
        r"timed out after (?P<store_dur>\S+) while trying to connect to \((?P<peer_addr>[^,]+), \d+\)",
        "error",
        "c10d socket.cpp, torch 2.x",
        "[c10d] The client socket has timed out after 1800s while trying to connect to (node-a, 29500).",
    ),
    Rule(
        "store_connect_failed",
        "store_error",
        "c10d",
        "client socket has failed to connect",
        None,
        "error",
        "c10d socket.cpp, torch 2.x",
        "[c10d] The client socket has failed to connect to [node-a]:29500 (errno: 111 - Connection refused).",
    ),
    Rule(
        "store_tcp_client",
        "store_error",
        "c10d",
        "TCP client failed to connect",
        None,
        "warning",
        "c10d TCPStore.cpp, torch 2.3+",
        "[c10d] TCP client failed to connect/validate to host node-a:29500 - retrying (try=0, timeout=1800000ms, "
        "delay=1000ms): Connection refused",
    ),
    Rule(
        "store_recv_failed",
        "store_error",
        "c10d",
        "failed on SocketImpl",
        r"(?:recvValue|recvVector|sendBytes|recvBytes) failed on SocketImpl\(.*remote=\[(?P<peer_addr>[^\]]+)\]",
        "error",
        "c10d Utils.hpp, torch 2.4+",
        "[c10d] recvValue failed on SocketImpl(fd=5, addr=[node-b]:43210, remote=[node-a]:29500): Connection reset by peer",
    ),
    Rule(
        "store_wait_timeout",
        "store_error",
        "c10d",
        "wait timeout after",
        r"wait timeout after (?P<timeout_ms>\d+)ms",
        "error",
        "c10d TCPStore, torch 2.x",
        "torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /x",
    ),
    Rule(
        "store_clients_joined",
        "store_error",
        "c10d",
        "waiting for clients",
        None,
        "error",
        "c10d store barrier",
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 15/16 clients joined.",
    ),
    Rule(
        "store_unique_id",
        "store_error",
        "c10d",
        "ncclUniqueId from",
        r"\[(?P<rank_stated>\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from "
        r"\[(?P<peer_rank>\d+)\]",
        "error",
        PGNCCL.format("1.13 – 2.1 broadcastUniqueNCCLID ('retreiving' ≤ 2.0)"),
        "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
        "store by key '0', but store->get('0') got error: Socket Timeout",
    ),
    Rule(
        "store_wait_input",
        "store_error",
        "c10d",
        "waitForInput: socket",
        r"timed out after (?P<timeout_ms>\d+)ms",
        "error",
        "c10d socket.cpp waitForInput, torch 2.3+",
        "[rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=79, "
        "addr=[localhost]:41170, remote=[localhost]:29500) timed out after 1800000ms",
    ),
    Rule(
        "store_socket_timeout",
        "store_error",
        "c10d",
        "Socket Timeout",
        None,
        "error",
        "c10d Utils.hpp (older)",
        "RuntimeError: Socket Timeout",
    ),
    Rule(
        "nccl_error_cuda",
        "cuda_error",
        "c10d",
        "unhandled cuda error",
        None,
        "error",
        "NCCLUtils.hpp C10D_NCCL_CHECK, torch 1.x – 2.13",
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:121, unhandled cuda error, NCCL "
        "version 2.14.3",
    ),
    Rule(
        "nccl_error",
        "nccl_error",
        "c10d",
        "NCCL error",
        r"NCCL error(?: in: \S+)?,? (?P<nccl_result>[^,\n]*)",
        "error",
        "NCCLUtils.hpp C10D_NCCL_CHECK / async errors, torch 1.x – 2.13",
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
        "remote process exited or there was a network error, NCCL version 2.26.2",
    ),
    Rule(
        "pg_init_options",
        "log",
        "c10d",
        "ProcessGroupNCCL initialization options",
        r"size: (?P<world_size>\d+), global rank: (?P<rank_stated>\d+)",
        "info",
        PGNCCL.format("2.3+"),
        "[PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL initialization options: size: 16, global rank: 0, "
        "TIMEOUT(ms): 600000",
    ),
]


#: A rank named inside a message whose line has no rank prefix: ``what():  [PG 0 Rank 3] …``, ``[Rank 7] Watchdog
#: caught …`` after a progress bar, ``NCCL communicator was aborted on rank 3``. ``[PG n Rank r]`` / ``[Rank r]`` is
#: the rank within the PG (global in the default PG); ``aborted on rank r`` is global (torch 1.10 – 2.1).
_MSG_RANK = ascii_classes(
    r"\[(?:PG (?:ID )?(?P<msg_pg>\d+) (?:PG GUID [^\]]*? )?)?Rank (?P<msg_rank>\d+)\]|"
    r"communicator was aborted on rank (?P<msg_rank_g>\d+)"
)
#: The CUDA device an error names: ``(GPU 3; 79.15 GiB total capacity …)`` (torch ≤ 2.0 OOM), ``GPU 3 has a total
#: capacity`` (torch ≥ 2.1 OOM), ``cuda:3``. A local device index: a rank only on one node with one process per GPU.
#: Kinds whose ``rank_stated`` is the reporting rank itself ("Rank 3 successfully reached monitoredBarrier …",
#: "Rank 3 is running collective: …, but Rank 0 …", "[1] is setting up NCCL communicator … from [0]").
_REPORTER_KINDS = ["monitored_barrier_peer", "collective_mismatch", "store_error", "ddp_error"]
_GPU = ascii_classes(
    r"\(GPU (?P<gpu_a>\d+);|\bGPU (?P<gpu_b>\d+) has a total capacity|\bcuda:(?P<gpu_c>\d+)\b"
)


def stated_ranks(df: pl.DataFrame) -> pl.DataFrame:
    """Add ``msg_rank``/``msg_pg`` (a rank a fault message names as its own) and ``gpu_index`` (the CUDA device a
    CUDA error names) for the identity step; only fault-like rows of c10d/python/elastic layers are read."""
    text = pl.coalesce(pl.col("record"), pl.col("message")) if "record" in df.columns else pl.col("message")
    faulty = pl.col("severity").is_in(["error", "fatal"]) | pl.col("kind").is_in(["cuda_oom", "cuda_error"])
    hit = faulty.fill_null(False) & pl.col("layer").is_in(
        ["c10d", "python", "elastic", "app", "unknown"]
    ).fill_null(False)
    reporter = pl.col("kind").is_in(_REPORTER_KINDS)
    cuda = pl.col("kind").is_in(["cuda_oom", "cuda_error"])
    # Each regex reads only the rows whose value it gives (the others are null: no scan), not every line.
    m = pl.when(hit).then(text).str.extract_groups(_MSG_RANK)
    g = pl.when(cuda).then(text).str.extract_groups(_GPU)
    return df.with_columns(
        pl.coalesce(
            pl.when(reporter).then(pl.col("rank_stated")),
            pl.when(hit).then(
                pl.coalesce(m.struct.field("msg_rank_g"), m.struct.field("msg_rank")).cast(
                    pl.Int32, strict=False
                )
            ),
        ).alias("msg_rank"),
        pl.when(hit & m.struct.field("msg_rank_g").is_null()).then(m.struct.field("msg_pg")).alias("msg_pg"),
        pl.when(cuda)
        .then(
            pl.coalesce(g.struct.field("gpu_a"), g.struct.field("gpu_b"), g.struct.field("gpu_c")).cast(
                pl.Int32, strict=False
            )
        )
        .alias("gpu_index"),
    )
