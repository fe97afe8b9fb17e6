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

JSON output (``ncclras -f json``, NCCL >= 2.28.7; ``jsonWriteHeader`` / ``jsonStartCommunicator`` /
``jsonWriteRankData`` / ``jsonWriteMissingRank`` / ``jsonWriteFooter`` of the same file) is one document per
query, ``{"nccl_version": …, "communicators": [{"hash": "0x…", "size": N, "ranks": [{"rank", "host", "pid",
"status": {"init_state", "async_error", …, "abort_flag"}, "collective_counts": {"AllReduce": n, …}}],
"missing_ranks": [{"rank", "host", "pid", "status": {"unresponsive", "considered_dead"}}]}], "ras": {…}}``,
and in monitor mode one document per event (``rasClientsNotifyEvent``: ``{"timestamp", "group", "event",
"peer": {"host", "pid", "cuda_devs", "nvml_devs"} | {"addr"}, "details"}``). Each document is one row
(:func:`json_rows`): ``ras_dead`` when a missing rank is ``considered_dead``, else ``ras_missing`` when ranks
are missing, else ``ras_mismatch`` when the ranks' collective counts differ or a rank reports an error
(``init_state`` not 0 / 7, ``async_error``, ``abort_flag``), else ``ras_ok``. The text report's
communicators table (``"%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s"``, Errors ``OK``) gives ``ras_ok`` rows too.

Monitor events (text or JSON, ``src/ras/rasnet.cc`` / ``peers.cc``): ``PEER_DEAD`` and ``PEER_TIMEOUT_DEAD``
are ``ras_dead``; ``PEER_UNRESPONSIVE``, ``PEER_SEND_STUCK``, ``PEER_KEEPALIVE_TIMEOUT`` and
``PEER_INIT_TIMEOUT`` are ``ras_missing`` (a peer RAS cannot reach); the others (``PEER_NEW``,
``PEER_CONNECTED``, ``PEER_RECOVERED``, ``PEER_RETRY``, ...) stay plain rows.

Rows: ``ras_dead`` (a process the RAS network considers dead), ``ras_missing`` (ranks missing from a
communicator's data: unresponsive), ``ras_mismatch`` (ranks of a communicator that disagree: status or
operation counts). The communicator ranks a block names are ``ranks_named`` (in the communicator's numbering),
``pg`` the communicator hash, ``seq`` the lowest operation count a MISMATCH block states, ``peer_addr`` the
processes it names (``<node> pid <pid>``). A RAS report is written by a client, not by a rank: its rows have
no rank of their own.
"""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl

from parsers.rules import Rule

SRC = "NCCL RAS client_support.cc (NCCL 2.24 – 2.29), reconstructed from the source and ras.rst"

RULES = [  # the first RECORD_RULES are read on whole records (a block), the others on lines
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
        "ras_ok",
        "ras_ok",
        "ras",
        "Group     Comms",
        r"^Group +Comms +Nodes +Ranks +Ranks +Ranks +Status +Errors\n +# +in group[^\n]*"
        r"(?:\n *\d+ +\d+ +\d+ +\d+(?:-\d+)? +\d+ +\d+ +(?:NOCOMM|INIT|RUNNING|FINALIZE|ABORT) +OK)+\s*$",
        "info",
        'NCCL RAS communicators table (client_support.cc: "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s", every Errors '
        'column errorStr[0] "OK"), reconstructed',
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
        "    #  in group  per comm  per node  per comm  in group\n"
        "    0         8         4         1         4        32   RUNNING      OK",
    ),
    Rule(
        "ras_peer_dead",
        "ras_dead",
        "ras",
        "DEAD: ",
        r"^(?:\[[^\]]+\] )?PEER_(?:TIMEOUT_)?DEAD: (?:Process (?P<ras_pid>\d+) on node (?P<ras_node>\S+))?",
        "error",
        'NCCL 2.29 RAS monitor mode (client_support.cc: "[%s] %s: %s %s\\n"; peers.cc PEER_DEAD, rasnet.cc '
        "PEER_TIMEOUT_DEAD; ras.rst sample)",
        "[2025-12-19 13:07:07] PEER_DEAD: Process 1524345 on node 172.16.64.245 managing GPU 1",
    ),
    Rule(
        "ras_peer_unresponsive",
        "ras_missing",
        "ras",
        "PEER_",
        r"^(?:\[[^\]]+\] )?PEER_(?:UNRESPONSIVE|SEND_STUCK|KEEPALIVE_TIMEOUT|INIT_TIMEOUT): "
        r"(?:Process (?P<ras_pid>\d+) on node (?P<ras_node>\S+))?",
        "warning",
        'NCCL 2.29 RAS monitor mode (client_support.cc: "[%s] %s: %s %s\\n"; rasnet.cc: "peer not responding for '
        '%" PRId64 "s (connect timeout)"), reconstructed',
        "[2025-12-19 13:06:40] PEER_UNRESPONSIVE: Process 1524345 on node 172.16.64.245 managing GPU 1 peer not "
        "responding for 5s (connect timeout)",
    ),
]

RECORD_RULES, LINE_RULES = RULES[:4], RULES[4:]

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
    js = [
        pl.col(c) if c in idx.columns else pl.lit(None, dtype=t).alias(c)
        for c, t in (
            ("ras_ranks", pl.String),
            ("ras_procs", pl.String),
            ("ras_seq", pl.Int64),
            ("rule", pl.String),
        )
    ]
    ranks, procs, seqs, msgs = [], [], [], []
    for rec, pid, node, jr, jp, jseq, rule, msg in idx.select(text_col, *cols, *js, "message").iter_rows():
        msgs.append(
            f"NCCL RAS: every communicator OK ({len((rec or '').splitlines()) - 2} group(s) in the table)"
            if rule == "ras_ok"
            else msg
        )
        if rule == "ras_json":  # read from the JSON document (json_rows)
            ranks.append(jr)
            procs.append(jp)
            seqs.append(jseq)
            continue
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
        df["message"].scatter(at, pl.Series(msgs, dtype=pl.String)),
    ).drop([c for c in ("ras_ranks", "ras_procs", "ras_seq") if c in df.columns])


#: Monitor events (rasnet.cc, peers.cc) by the kind of row they make; other events stay plain rows.
EVENT_KINDS = {
    "PEER_DEAD": "ras_dead",
    "PEER_TIMEOUT_DEAD": "ras_dead",
    "PEER_UNRESPONSIVE": "ras_missing",
    "PEER_SEND_STUCK": "ras_missing",
    "PEER_KEEPALIVE_TIMEOUT": "ras_missing",
    "PEER_INIT_TIMEOUT": "ras_missing",
}
#: ``init_state`` values that are no error (``ncclSuccess``, ``ncclInProgress``: ras.rst "JSON Output").
_INIT_OK = (0, 7)
_MAX_PARTS = 64  #: rows one JSON document may span (records split at its blank lines)
_JSON_HEAD = re.compile(r'^\{\n\s*"(?:nccl_version|timestamp)": "')


def _status_doc(
    doc: dict[str, Any],
) -> tuple[str, str, str | None, list[int], list[str], int | None, int | None]:
    """(kind, message, comm hash, comm ranks named, processes named, lowest op count, comm size) of a status
    document: the most severe communicator wins (dead > missing > mismatch > ok)."""
    order = {"ras_dead": 3, "ras_missing": 2, "ras_mismatch": 1, "ras_ok": 0}
    best: tuple[str, str | None, list[int], list[str], int | None, int | None] = (
        "ras_ok",
        None,
        [],
        [],
        None,
        None,
    )
    said: list[str] = []
    for c in doc.get("communicators") or []:
        h = str(c.get("hash") or "").removeprefix("0x") or None
        size = c.get("size")
        miss = c.get("missing_ranks") or []
        ranks = c.get("ranks") or []
        kind, named, procs, low = "ras_ok", [], [], None
        if miss:
            dead = [m for m in miss if (m.get("status") or {}).get("considered_dead")]
            pick = dead or miss
            kind = "ras_dead" if dead else "ras_missing"
            named = sorted(int(m["rank"]) for m in pick if isinstance(m.get("rank"), int))
            procs = [f"{m.get('host')} pid {m.get('pid')}" for m in pick if m.get("pid", -1) != -1]
            said.append(
                f"{h}: {'dead' if dead else 'missing'} rank{'s' if len(named) > 1 else ''} "
                f"{','.join(map(str, named))} of {size}"
            )
        else:
            totals = {int(r["rank"]): sum((r.get("collective_counts") or {}).values()) for r in ranks}
            bad = [
                r
                for r in ranks
                if (r.get("status") or {}).get("init_state", 0) not in _INIT_OK
                or (r.get("status") or {}).get("async_error", 0)
                or (r.get("status") or {}).get("abort_flag")
            ]
            if bad:
                kind = "ras_mismatch"
                named = sorted(int(r["rank"]) for r in bad)
                said.append(
                    f"{h}: rank{'s' if len(named) > 1 else ''} {','.join(map(str, named))} report an error"
                )
            elif len(set(totals.values())) > 1:
                kind = "ras_mismatch"
                low = min(totals.values())
                named = sorted(r for r, n in totals.items() if n == low)
                said.append(
                    f"{h}: rank{'s' if len(named) > 1 else ''} {','.join(map(str, named))} launched "
                    f"{low} operations, others up to {max(totals.values())}"
                )
            procs = [f"{r.get('host')} pid {r.get('pid')}" for r in ranks if int(r["rank"]) in named]
        if order[kind] > order[best[0]]:
            best = (kind, h, named, procs, low, size)
    kind, h, named, procs, low, size = best
    n = len(doc.get("communicators") or [])
    if kind == "ras_ok":
        msg = f"NCCL RAS (JSON): {n} communicator{'s' if n != 1 else ''}, no rank missing, counts agree"
    else:
        msg = "NCCL RAS (JSON): " + "; ".join(said)
    return kind, msg, h, named, procs, low, size


def json_rows(df: pl.DataFrame) -> pl.DataFrame:
    """One row per RAS JSON document (a status report or a monitor event): the record of its ``{`` line and
    indented lines merges with its closing ``}`` row (line accounting kept), and the document read with
    :func:`json.loads` gives kind, message, ``pg`` (communicator hash), ``ranks_named`` (communicator ranks),
    ``peer_addr`` (``<host> pid <pid>``), ``seq`` (the lowest total operation count of a count mismatch),
    ``world_size`` (the communicator's size) and the stamp (``pyts``). Rows that do not read as such a
    document are left as they are."""
    if "record" not in df.columns or not df.height:
        return df
    rec = pl.col("record").fill_null("")
    cand = df.with_row_index("__j").filter(
        rec.str.starts_with("{\n") & rec.str.contains(r'"(?:communicators|event)": ')
    )
    if not cand.height:
        return df
    body = df["body"]
    path = df["path"]
    drops: list[int] = []
    upd: dict[str, list[Any]] = {
        k: []
        for k in ("i", "raw", "record", "lc", "kind", "msg", "pg", "ranks", "procs", "seq", "world", "ts")
    }
    raw, lc = df["raw"], df["line_count"]
    rec_all = df["record"].fill_null("")
    for i, r in cand.select("__j", "record").iter_rows():
        if not _JSON_HEAD.match(r):
            continue
        # the rows up to the document's closing ``}`` (an empty ``missing_ranks`` list leaves a blank line)
        j = i + 1
        while j < df.height and j - i <= _MAX_PARTS and path[j] == path[i] and body[j].rstrip() != "}":
            j += 1
        if j >= df.height or path[j] != path[i] or body[j].rstrip() != "}":
            continue
        parts = list(range(i, j + 1))
        text = "\n".join(rec_all[k] for k in parts)
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        if "communicators" in doc:
            kind, msg, h, named, procs, low, size = _status_doc(doc)
        elif str(doc.get("event", "")).startswith("PEER_"):
            ev = str(doc["event"])
            k = EVENT_KINDS.get(ev)
            if k is None:
                continue
            peer = doc.get("peer") or {}
            who = (
                f"{peer.get('host')} pid {peer.get('pid')}" if "pid" in peer else str(peer.get("addr") or "")
            )
            kind, h, named, procs, low, size = k, None, [], [who] if who else [], None, None
            msg = f"NCCL RAS monitor: {ev} {who}" + (f" ({doc['details']})" if doc.get("details") else "")
        else:
            continue
        drops.extend(parts[1:])
        upd["i"].append(i)
        upd["raw"].append("\n".join(raw[k] for k in parts))
        upd["record"].append(text)
        upd["lc"].append(sum(lc[k] for k in parts))
        upd["kind"].append(kind)
        upd["msg"].append(msg)
        upd["pg"].append(h)
        upd["ranks"].append(",".join(map(str, named)) or None)
        upd["procs"].append("; ".join(procs) or None)
        upd["seq"].append(low)
        upd["world"].append(size)
        upd["ts"].append(doc.get("timestamp"))
    if not upd["i"]:
        return df
    at = pl.Series(upd["i"], dtype=pl.UInt32)
    sev = ["info" if k == "ras_ok" else "error" if k == "ras_dead" else "warning" for k in upd["kind"]]

    def put(col: str, vals: list[Any], dtype: Any) -> pl.Series:
        base = df[col] if col in df.columns else pl.Series(col, [None] * df.height, dtype=dtype)
        return base.cast(dtype).scatter(at, pl.Series(vals, dtype=dtype)).alias(col)

    out = df.with_columns(
        put("raw", upd["raw"], pl.String),
        put("record", upd["record"], pl.String),
        put("line_count", upd["lc"], df["line_count"].dtype),
        put("kind", upd["kind"], pl.String),
        put("layer", ["ras"] * len(at), pl.String),
        put("rule", ["ras_json"] * len(at), pl.String),
        put("severity", sev, pl.String),
        put("message", upd["msg"], pl.String),
        put("pg", upd["pg"], pl.String),
        put("ras_ranks", upd["ranks"], pl.String),
        put("ras_procs", upd["procs"], pl.String),
        put("ras_seq", upd["seq"], pl.Int64),
        put("world_size", upd["world"], pl.Int32),
        put("pyts", upd["ts"], pl.String),
    )
    keep = pl.Series([True] * df.height).scatter(pl.Series(drops, dtype=pl.UInt32), False)
    return out.filter(keep)
