"""NCCL_DEBUG output (NVIDIA NCCL 2.3.5 – 2.30.7; docs/log-formats.md §1).

Prefix ``[<optional stamp>] host:pid:tid [cudaDev] [file:line [(func)] ]NCCL INFO|WARN|TRACE <msg>``.
The host is NCCL's short host name; the pid joins NCCL lines to torchrun's launcher lines. Init lines
map (host, pid) to the global rank and the world size; COLL lines carry the per-communicator opCount
(hex); WARN lines may name a peer address ``ip<port>`` or ``host<port>``.
"""

from __future__ import annotations

import polars as pl

from parsers.rules import Prefix, Rule, ascii_classes

SRC = "NCCL_DEBUG (NVIDIA NCCL {})"

PREFIX = Prefix(
    "nccl",
    r"^(?:\[(?P<nccl_ts>[^\]]*)\] )?(?P<host>[A-Za-z0-9][\w.-]*):(?P<pid>\d+):(?P<nccl_tid>\d+) "
    r"(?:\[(?P<cuda_dev>\d+)\] )?(?:(?P<nccl_src>\S+):(?P<nccl_srcline>\d+)(?: \([^)]*\))? )?"
    r"NCCL (?P<nccl_level>INFO|WARN|TRACE|CALL) ?(?P<rest>.*)$",
    layer="nccl",
    source=SRC.format("2.3.5 – 2.30.7, src/debug.cc"),
    example="node-a:15325:16199 [2] NCCL INFO [Service thread] Connection closed by localRank 2",
)

_PEER = ascii_classes(r"(?P<peer_addr>[^\s<]+)<\d+>")

RULES: list[Rule] = [
    Rule(
        "nccl_version",
        "nccl_version",
        "nccl",
        "NCCL version",
        r"NCCL version (?P<nccl_version>\d+\.\d+\.\d+)",
        "info",
        SRC.format("all; banner §1.5"),
        "node-a:41237:41237 [0] NCCL INFO NCCL version 2.26.6+cuda12.8",
    ),
    Rule(
        "nccl_bootstrap",
        "log",
        "nccl",
        "Bootstrap",
        r"Bootstrap ?: Using (?P<netif>[^:\s]+):(?P<local_addr>[^<\s]+)<\d+>",
        "info",
        SRC.format("2.x src/bootstrap.cc"),
        "node-a:41237:41237 [0] NCCL INFO Bootstrap : Using eth0:192.0.2.11<0>",
    ),
    Rule(
        "nccl_init",
        "nccl_init",
        "nccl",
        "- Init ",
        r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank_stated>\d+) nranks (?P<world_size>\d+) cudaDev (?P<cuda_dev>\d+)"
        r"(?: nvmlDev \d+)?(?: busId [0-9a-f]+)?(?: parent \S+(?: (?:splitCount|childCount) \d+)? color -?\d+ key -?\d+)?"
        r"(?: commId (?P<comm_id>0x[0-9a-f]+))? ?- Init (?P<nccl_phase>START|COMPLETE)",
        "info",
        SRC.format("2.4.6 – 2.30.7, src/init.cc"),
        "node-b:52011:52066 [5] NCCL INFO comm 0x562e11f03a90 rank 13 nranks 16 cudaDev 5 nvmlDev 5 busId 9c000 "
        "commId 0x3f9a6c1be27d4410 - Init COMPLETE",
    ),
    Rule(
        "nccl_abort",
        "nccl_abort",
        "nccl",
        " COMPLETE",
        r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank_stated>\d+) n[Rr]anks (?P<world_size>\d+) cudaDev (?P<cuda_dev>\d+)"
        r".*- (?P<nccl_phase>Abort|Destroy|Revoke) COMPLETE",
        "info",
        SRC.format("2.12 – 2.30, src/init.cc; real line from a FunASR 16-rank job"),
        "node-b:14054:14825 [3] NCCL INFO comm 0x9bc5a80 rank 11 nranks 16 cudaDev 3 busId 4e000 - Abort COMPLETE",
    ),
    Rule(
        "nccl_topology",
        "log",
        "nccl",
        "nNodes",
        r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank_stated>\d+) nRanks (?P<world_size>\d+) nNodes \d+ "
        r"localRanks \d+ localRank (?P<local_rank_stated>\d+)",
        "info",
        SRC.format("2.20.3+ topology summary"),
        "node-b:52011:52011 [3] NCCL INFO comm 0x562e11f03a90 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0",
    ),
    Rule(
        "nccl_coll",
        "nccl_coll",
        "nccl",
        ": opCount ",
        r"(?P<op>[A-Za-z]+): opCount (?P<seq_hex>[0-9a-f]+) sendbuff \S+ recvbuff \S+ count (?P<numel>\d+) "
        r"datatype \d+ op \d+ root -?\d+ comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<world_size>\d+)\]",
        "debug",
        SRC.format("2.3.7 – 2.30.7, src/enqueue.cc, NCCL_DEBUG_SUBSYS=COLL"),
        "node-a:41237:41237 [0] NCCL INFO AllReduce: opCount 1f4 sendbuff 0x7f3b52000000 recvbuff 0x7f3b52000000 "
        "count 25165824 datatype 7 op 0 root 0 comm 0x55d0c3a4e2b0 [nranks=16] stream 0x55d0c2f1a9e0",
    ),
    Rule(
        "nccl_localrank_closed",
        "nccl_peer_closed",
        "nccl",
        "Connection closed by localRank",
        r"Connection closed by localRank (?P<peer_rank>\d+)",
        "info",
        SRC.format(
            "2.12+ src/proxy.cc [Service thread]; real line from a FunASR 16-rank job. ``peer_rank`` is the peer's "
            "LOCAL rank (correlator.claims maps it to the global numbering)"
        ),
        "node-a:15325:16199 [2] NCCL INFO [Service thread] Connection closed by localRank 2",
    ),
    Rule(
        "nccl_ib_completion",
        "nccl_net_error",
        "nccl",
        "Got completion",
        r"NET/IB(?:/GIN)? ?: Got completion (?:from peer " + _PEER + r" )?with (?:error |status=)"
        r"(?:(?P<ib_status>IBV_WC_\w+)\()?(?P<ib_code>\d+)",
        "error",
        SRC.format("2.10 – 2.30 src/transport/net_ib.cc"),
        "node-b:52011:52190 [5] transport/net_ib.cc:2543 NCCL WARN NET/IB: Got completion from peer "
        "192.0.2.11<44871> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=129",
    ),
    Rule(
        "nccl_socket_closed",
        "nccl_net_error",
        "nccl",
        "Connection closed by remote peer",
        r"Connection closed by remote peer(?: " + _PEER + ")?",
        "error",
        SRC.format("2.10 – 2.30 src/misc/socket.cc"),
        "node-b:52011:52190 [5] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer node-a<41983>",
    ),
    Rule(
        "nccl_socket_call",
        "nccl_net_error",
        "nccl",
        "Call to ",
        r"Call to (?:recv|send) (?:from|to) " + _PEER + r" failed : (?P<strerror>.*)",
        "error",
        SRC.format("2.10 – 2.30 src/misc/socket.cc"),
        "node-a:41237:41355 [0] misc/socket.cc:49 NCCL WARN socketProgressOpt: Call to recv from 192.0.2.12<52344> "
        "failed : Connection reset by peer",
    ),
    Rule(
        "nccl_connect",
        "nccl_net_error",
        "nccl",
        "onnect to ",
        r"[Cc]onnect to " + _PEER + r" (?:failed|returned)",
        "error",
        SRC.format("2.12+ socketStartConnect"),
        "node-a:41237:41237 [0] misc/socket.cc:480 NCCL WARN socketStartConnect: Connect to 192.0.2.12<52344> failed : "
        "Connection refused",
    ),
    Rule(
        "nccl_proxy_failed",
        "nccl_net_error",
        "nccl",
        "Failed to execute operation",
        r"Failed to execute operation \w+ from rank (?P<peer_rank>\d+)",
        "error",
        SRC.format("2.12+ src/proxy.cc"),
        "node-a:41237:41300 [0] proxy.cc:1494 NCCL WARN [Proxy Service 3] Failed to execute operation Connect from rank 11, retcode 6",
    ),
    Rule(
        "nccl_ib_async_event",
        "nccl_net_error",
        "nccl",
        "Got async event",
        r"Got (?:non-fatal )?async event ?: ?(?P<ib_event>.*)",
        "error",
        SRC.format("2.4+ src/transport/net_ib.cc (local HCA event)"),
        "node-b:52014:52190 [3] transport/net_ib.cc:127 NCCL WARN NET/IB : Got async event : port error",
    ),
    Rule(
        "nccl_cuda_oom",
        "cuda_oom",
        "nccl",
        "Cuda failure 'out of memory'",
        None,
        "error",
        SRC.format("2.x CUDACHECK in enqueue.cc / proxy.cc / alloc.h: cudaErrorMemoryAllocation"),
        "node-a:3018451:3018451 [0] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'",
    ),
    Rule(
        "nccl_cuda_failure",
        "cuda_error",
        "nccl",
        "Cuda failure",
        r"Cuda failure '?(?P<cuda_msg>[^']*)'?",
        "error",
        SRC.format("all, include/checks.h"),
        "node-a:41237:41237 [0] enqueue.cc:1423 NCCL WARN Cuda failure 'an illegal memory access was encountered'",
    ),
]

#: Catch-all for NCCL WARN lines no finer rule matched (applied only where the level is WARN).
WARN_RULE = Rule(
    "nccl_warn",
    "nccl_warn",
    "nccl",
    "",
    None,
    "warning",
    SRC.format("all"),
    "node-a:41237:41237 [0] init.cc:1234 NCCL WARN Mismatched NCCL version detected : rank 0 version 22105 rank 8 version 21903",
)

NCCL_OPS = {
    "AllReduce": "ALLREDUCE",
    "AllGather": "ALLGATHER",
    "ReduceScatter": "REDUCE_SCATTER",
    "Broadcast": "BROADCAST",
    "Reduce": "REDUCE",
    "Send": "SEND",
    "Recv": "RECV",
    "AlltoAll": "ALLTOALL",
    "Gather": "GATHER",
    "Scatter": "SCATTER",
}


#: ``"host|pid|comm"``: a communicator of one process, the key that maps a COLL line's ``comm 0x..`` pointer
#: to the commId of its Init line.
COMM_KEY = pl.concat_str(
    [pl.col("host").fill_null(""), pl.col("pid").cast(pl.String).fill_null(""), pl.col("comm")],
    separator="|",
)


def comm_map(df: pl.DataFrame) -> dict[str, str]:
    """:data:`COMM_KEY` -> commId from the parsed Init lines of ``df``; the first Init line of a key wins
    (a key with two commIds is a reused pid, and either would be a guess)."""
    if "comm" not in df.columns or "comm_id" not in df.columns:
        return {}
    inits = df.filter(
        (pl.col("kind") == "nccl_init") & pl.col("comm_id").is_not_null() & pl.col("comm").is_not_null()
    )
    return dict(
        inits.select(COMM_KEY.alias("k"), "comm_id")
        .unique(subset="k", keep="first", maintain_order=True)
        .iter_rows()
    )


def resolve_comms(df: pl.DataFrame) -> pl.DataFrame:
    """``pg`` of NCCL lines = the communicator's commId, the same on every member.

    COLL lines name only the per-process ``comm 0x…`` pointer; the Init lines of the same (host, pid) map it to
    the commId (NCCL 2.16+). A COLL line whose communicator's Init line is not in the logs keeps ``pg`` null:
    its opCount cannot be compared across ranks.
    """
    if "comm" not in df.columns or "comm_id" not in df.columns:
        return df
    mapping = comm_map(df)
    comm_id = (
        COMM_KEY.replace_strict(mapping, default=None, return_dtype=pl.String)
        if mapping
        else pl.lit(None, dtype=pl.String)
    )
    return df.with_columns(
        pl.when(pl.col("kind") == "nccl_init")
        .then(pl.coalesce(pl.col("comm_id"), pl.col("pg")))
        .when(pl.col("kind") == "nccl_coll")
        .then(comm_id)
        .otherwise(pl.col("pg"))
        .alias("pg")
    )


def normalize_ops(df: pl.DataFrame) -> pl.DataFrame:
    """NCCL op names (``AllReduce``) -> c10d's spelling (``ALLREDUCE``) so both layers align."""
    return df.with_columns(
        pl.when(pl.col("kind") == "nccl_coll")
        .then(pl.col("op").replace(NCCL_OPS))
        .otherwise(pl.col("op"))
        .alias("op")
    )
