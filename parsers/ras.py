"""NCCL RAS (``ncclras`` / ``echo verbose status | nc localhost 28028``) text output and monitor events
(issue #33 item 3). RECONSTRUCTED: no GPU job ran here; every rule is built from NCCL's own source
(``src/ras/client_support.cc`` at NVIDIA/nccl 5067397, NCCL 2.24 – 2.29) and the samples of its user guide
(``docs/userguide/source/troubleshooting/ras.rst``).

RAS prints a report of blocks: a header line and indented lines (``rasOutAppend``), which
:func:`parsers.python.group_records` keeps as one record each::

    DEAD
      1 job process is considered dead (unreachable via the RAS network)
      Process 3487984 on node 172.16.64.213 managing GPU 5
    #0-0 (cf264af53edbe986) INCOMPLETE
      Missing communicator data from 1 rank
      Rank 21 -- GPU 5 managed by process 3487984 on node 172.16.64.213     (2.24: "The missing rank: 21")
    #0-0 (27a079b828ff1a75) MISMATCH
      Communicator ranks have different collective operation counts
      26 ranks have launched up to operation 6650
      6 ranks have launched up to operation 6649
      Rank 0 -- GPU 0 managed by process 483072 on node 172.16.64.210

and, in monitor mode (``ncclras -m``, NCCL 2.29: ``"[%s] %s: %s %s\\n"``), one line per event::

    [2025-12-19 13:07:07] PEER_DEAD: Process 1524345 on node 172.16.64.245 managing GPU 1

Rows: ``ras_dead`` (a process the RAS network considers dead), ``ras_missing`` (ranks missing from a
communicator's data: unresponsive), ``ras_mismatch`` (ranks of a communicator that disagree: status or
operation counts). The communicator ranks a block names are ``ranks_named`` (in the communicator's numbering),
``pg`` the communicator hash, ``seq`` the lowest operation count a MISMATCH block states, ``peer_addr`` the
processes it names (``<node> pid <pid>``). A RAS report is written by a client, not by a rank: its rows have
no rank of their own.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.rules import Rule

SRC = "NCCL RAS client_support.cc (NCCL 2.24 – 2.29), reconstructed from the source and ras.rst"

RULES = [
    Rule(
        "ras_dead",
        "ras_dead",
        "ras",
        "DEAD",
        r"^DEAD\n\s+\d+ job process(?:es are| is) considered dead",
        "error",
        SRC,
        "DEAD\n  1 job process is considered dead (unreachable via the RAS network)\n"
        "  Process 3487984 on node 172.16.64.213 managing GPU 5",
    ),
    Rule(
        "ras_missing",
        "ras_missing",
        "ras",
        "INCOMPLETE",
        r"^#\d+-\d+ \((?P<pg>[0-9a-f]+)\) INCOMPLETE\n\s+Missing communicator data from \d+ rank",
        "warning",
        SRC,
        "#0-0 (cf264af53edbe986) INCOMPLETE\n  Missing communicator data from 1 rank\n  The missing rank: 21",
    ),
    Rule(
        "ras_mismatch",
        "ras_mismatch",
        "ras",
        "MISMATCH",
        r"^#\d+-\d+ \((?P<pg>[0-9a-f]+)\) MISMATCH\n",
        "warning",
        SRC,
        "#0-0 (27a079b828ff1a75) MISMATCH\n  Communicator ranks have different collective operation counts\n"
        "  26 ranks have launched up to operation 6650\n  6 ranks have launched up to operation 6649\n"
        "  Rank 0 -- GPU 0 managed by process 483072 on node 172.16.64.210",
    ),
    Rule(
        "ras_peer_dead",
        "ras_dead",
        "ras",
        "PEER_DEAD: Process ",
        r"PEER_DEAD: Process (?P<ras_pid>\d+) on node (?P<ras_node>\S+)",
        "error",
        'NCCL 2.29 RAS monitor mode (client_support.cc: "[%s] %s: %s %s\\n"; ras.rst sample)',
        "[2025-12-19 13:07:07] PEER_DEAD: Process 1524345 on node 172.16.64.245 managing GPU 1",
    ),
]

_RANK = re.compile(r"^\s+(?:Rank (\d+)\b|The missing ranks?: ([\d, ]+))", re.MULTILINE)
_PROC = re.compile(r"(?:Process|process) (\d+) on node (\S+)")
_OPS = re.compile(r"launched up to operation (\d+)")


def block_fields(df: pl.DataFrame) -> pl.DataFrame:
    """``ranks_named``, ``peer_addr`` and ``seq`` of the RAS rows, from their records (a few rows)."""
    if "rule" not in df.columns:
        return df
    is_ras = pl.col("layer") == "ras"
    if not df.select(is_ras.fill_null(False).any()).item():
        return df
    idx = df.with_row_index("__r").filter(is_ras.fill_null(False))
    cols = [
        pl.col(c) if c in idx.columns else pl.lit(None, dtype=pl.String).alias(c)
        for c in ("ras_pid", "ras_node")
    ]
    text_col = pl.col("record") if "record" in idx.columns else pl.col("message")
    ranks, procs, seqs = [], [], []
    for rec, pid, node in idx.select(text_col, *cols).iter_rows():
        text = rec or ""
        named: set[int] = set()
        for m in _RANK.finditer(text):
            named.update(int(x) for x in (m[1] or m[2]).replace(",", " ").split())
        ps = [f"{n} pid {p}" for p, n in _PROC.findall(text)] or ([f"{node} pid {pid}"] if pid else [])
        ops = [int(x) for x in _OPS.findall(text)]
        ranks.append(",".join(map(str, sorted(named))) or None)
        procs.append("; ".join(ps) or None)
        seqs.append(min(ops) if ops else None)
    at = idx["__r"]
    return df.with_columns(
        df["ranks_named"].scatter(at, pl.Series(ranks, dtype=pl.String)),
        df["peer_addr"].scatter(at, pl.Series(procs, dtype=pl.String)),
        df["seq"].scatter(at, pl.Series(seqs, dtype=pl.Int64)),
    )
