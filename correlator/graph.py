"""The causal graph: ranks as nodes, typed edges "A's trouble is explained by B" carrying evidence.

Edge types (``edge`` attribute), always from the affected rank to the rank that explains it:
- ``waits_for``: A timed out in (pg, seq) that B never entered, or B is behind on that PG;
- ``peer_error``: A's network/store error names B (address, local rank, PG rank);
- ``mismatch``: A and B ran different collectives or shapes at the same seq (B is the odd one out);
- ``killed_by``: the launcher signalled A after B failed;
- ``exited_before``: B exited — even cleanly, code 0 — while A still waited for it.

Each edge has ``evidence`` (event ids of the rows that justify it), and ``pg``/``seq`` when known.
The graph's own attributes (``G.graph``) record the attempt, world size, the initiating ranks with the
way they were found (``initiator_basis``), the failure kind and the reasons that lower confidence.
Pure function of the event table; :mod:`correlator.diagnose` reads the verdict from it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import networkx as nx
import polars as pl

from correlator import align, clock
from correlator.faults import FAILURE_KIND_OF, PEER_KINDS, barrier_ranks, fault_rows, mismatch_peers

_SIG_KINDS = ["collective_fingerprint", "watchdog_timeout", "collective_mismatch"]


def failing_attempts(table: pl.DataFrame) -> list[int]:
    """Attempts (torchelastic restarts) that hold any fault, in order."""
    f = fault_rows(table).filter(pl.col("role") != "weak")
    return sorted(int(a) for a in f["attempt"].drop_nulls().unique().to_list())


def _world_size(t: pl.DataFrame) -> int | None:
    stated = t.filter(pl.col("kind").is_in(["nccl_init", "nccl_abort", "nccl_coll", "log", "step_progress"]))["world_size"]
    ws = stated.drop_nulls()
    seen = t["rank"].drop_nulls()
    best = int(ws.max()) if ws.len() else None  # type: ignore[arg-type]
    top = int(seen.max()) + 1 if seen.len() else None  # type: ignore[arg-type]
    if best is None:
        return top
    return max(best, top or 0)


def _divergence(t: pl.DataFrame) -> tuple[set[int], set[int], dict[str, object]]:
    """Odd one out: ranks whose collective (op, shape/numel) differs from the majority at the same seq.

    Returns (minority, majority, info) for the earliest (pg, seq) where ranks disagree; empty sets if none.
    Claims come from DETAIL fingerprints, watchdog timeouts (op + NumelIn) and mismatch errors, which also
    state what the peer ran.
    """
    rows = t.filter(pl.col("kind").is_in(_SIG_KINDS) & pl.col("seq").is_not_null() & pl.col("rank").is_not_null())
    claims: list[tuple[str, int, int, str, int]] = []  # pg, seq, rank, signature, event_id
    own_line: dict[tuple[str, int, int], int] = {}  # (pg, seq, rank) -> the rank's own line about it
    for r in rows.select("kind", "pg", "seq", "rank", "peer_rank", "op", "shape", "numel", "message",
                         "event_id").iter_rows(named=True):
        pg = r["pg"] or "0"
        size = r["shape"] if r["shape"] is not None else (str(r["numel"]) if r["numel"] is not None else "")
        sig = f"{r['op']}|{size}"
        own_line.setdefault((pg, r["seq"], r["rank"]), r["event_id"])
        if r["kind"] == "collective_mismatch":
            claims.append((pg, r["seq"], r["rank"], sig, r["event_id"]))
            pop, pshape = mismatch_peers(r["message"] or "")
            if r["peer_rank"] is not None and pop:
                claims.append((pg, r["seq"], r["peer_rank"], f"{pop}|{pshape or ''}", r["event_id"]))
        else:
            claims.append((pg, r["seq"], r["rank"], sig, r["event_id"]))
    by_key: dict[tuple[str, int], dict[int, set[str]]] = {}
    ev: dict[tuple[str, int], list[int]] = {}
    sizeless = {(pg, seq) for pg, seq, _, sig, _ in claims if sig.endswith("|")}
    for pg, seq, rank, sig, eid in claims:
        if (pg, seq) in sizeless:  # some claim has no shape: compare the op types only
            sig = sig.split("|")[0]
        by_key.setdefault((pg, seq), {}).setdefault(rank, set()).add(sig)
        ev.setdefault((pg, seq), []).append(eid)
    for key in sorted(by_key, key=lambda k: (k[1], k[0])):
        # A rank with two signatures at one (pg, seq) means lines of several process groups were mixed
        # (DETAIL fingerprints do not name their PG): that key says nothing reliable.
        if any(len(v) > 1 for v in by_key[key].values()):
            continue
        sigs = {r: next(iter(v)) for r, v in by_key[key].items()}
        counts = Counter(sigs.values())
        if len(counts) < 2:
            continue
        (top, ntop), *rest = counts.most_common()
        if rest and rest[0][1] == ntop:
            minority = set(sigs)  # a tie: nobody is the odd one out
            majority: set[int] = set()
        else:
            minority = {r for r, s in sigs.items() if s != top}
            majority = {r for r, s in sigs.items() if s == top}
        own = {r: own_line[(key[0], key[1], r)] for r in minority if (key[0], key[1], r) in own_line}
        return minority, majority, {"pg": key[0], "seq": key[1], "majority": top.replace("|", " "),
                                    "evidence": ev[key][:8], "own": own}
    return set(), set(), {}


def build_graph(table: pl.DataFrame, attempt: int | None = None) -> nx.DiGraph:
    """Build the causal graph of one attempt (default: the first attempt with a fault).

    Nodes are global ranks (ints) with attributes ``host``, ``local_rank``, ``status``
    (initiating | collateral | clean | missing), ``first_fault_kind``, ``first_fault_ts``,
    ``first_fault_event`` and ``explained_by``. See the module docstring for edges and graph attributes.
    """
    t_all = table.filter(~pl.col("duplicate"))
    attempts = failing_attempts(t_all)
    if attempt is None:
        attempt = attempts[0] if attempts else int(t_all["attempt"].drop_nulls().min() or 0)  # type: ignore[arg-type]
    t = t_all.filter(pl.col("attempt") == attempt)
    clocks = clock.estimate(t)
    t = t.with_columns(clock.corrected(t, clocks).alias("tc"))
    G = nx.DiGraph(attempt=attempt, attempts=attempts, clocks={h: c.__dict__ for h, c in clocks.items()})
    reasons: list[str] = []

    world = _world_size(t_all)
    seen = sorted(int(r) for r in t["rank"].drop_nulls().unique().to_list())
    missing = sorted(set(range(world or 0)) - set(seen)) if world else []
    hosts = dict(t.filter(pl.col("rank").is_not_null() & pl.col("host").is_not_null())
                 .group_by("rank").agg(pl.col("host").mode().first()).iter_rows())
    locals_ = dict(t.filter(pl.col("rank").is_not_null() & pl.col("local_rank").is_not_null())
                   .group_by("rank").agg(pl.col("local_rank").mode().first()).iter_rows())
    for r in sorted(set(seen) | set(missing)):
        G.add_node(r, host=hosts.get(r), local_rank=locals_.get(r), status="missing" if r in missing else "clean")

    f = fault_rows(t)
    f = f.with_columns(clock.corrected(f, clocks).alias("tc")).filter(pl.col("role") != "weak").sort("tc", "event_id", nulls_last=True)
    fr = f.filter(pl.col("rank").is_not_null())
    # A rank's first fault: the launcher's summary blocks (whole-second, written at the end) come last.
    summary_last = pl.col("kind").is_in(["failure_entry", "root_cause_entry"]).cast(pl.Int8)
    first = fr.sort(summary_last, "tc", "event_id", nulls_last=True).group_by("rank", maintain_order=True).first()
    for row in first.iter_rows(named=True):
        G.nodes[row["rank"]].update(first_fault_kind=row["kind"], first_fault_ts=row["tc"], first_fault_event=row["event_id"])

    signal_rows = f.filter(pl.col("kind") == "worker_signalled")
    first_signal = signal_rows["tc"].min() if signal_rows.height else None
    signalled = set(signal_rows["rank"].drop_nulls().to_list()) | set(
        f.filter((pl.col("exit_code") == -15) | (pl.col("signal") == "SIGTERM"))["rank"].drop_nulls().to_list())
    launcher_present = t.filter(pl.col("layer") == "elastic").height > 0

    initiators: list[int] = []
    basis = ""
    failure_kind = "none"
    cause_event: dict[int, int] = {}
    focus: dict[str, object] = {}

    # 1. Odd one out (collective mismatch, divergent shapes).
    minority, majority, div = _divergence(t)
    causes = fr.filter(pl.col("role") == "cause")
    if minority and (majority or causes.height == 0):
        initiators = sorted(minority)
        basis = "odd one out"
        failure_kind = "collective_mismatch"
        focus = div
        for r in initiators:
            cause_event[r] = div["own"].get(r, div["evidence"][0])  # type: ignore[index, union-attr]
        if not majority:
            reasons.append("the ranks disagree evenly on the collective; no single odd one out")

    # 1b. A mismatch was detected but the collectives do not say who is odd: compare what the ranks said
    #     about themselves (configuration lines every rank printed, where exactly one rank differs).
    if not initiators and fr.filter(pl.col("kind") == "collective_mismatch").height:
        odd, ev_ids = _config_outlier(t)
        if odd is not None:
            initiators, basis, failure_kind = [odd], "odd one out", "collective_mismatch"
            cause_event[odd] = ev_ids[0]
            focus = {"evidence": ev_ids}
            reasons.append("the odd rank was found from its own configuration line, not from the collective itself")

    # 2. Causes: exceptions, CUDA errors, SIGKILL.
    if not initiators and causes.height:
        t0 = causes["tc"].min()
        first_effect = fr.filter(pl.col("role") == "effect")["tc"].min()
        stamps = [x for x in (t0, first_effect, first_signal) if x is not None]
        horizon = max(stamps) if stamps else None
        agent_failed = set(causes.filter(pl.col("kind").is_in(["worker_failed", "failure_entry", "root_cause_entry"])
                                         & (pl.col("stream") != "error_json"))["rank"].to_list())
        first_cause = causes.group_by("rank", maintain_order=True).first()
        in_time = (pl.col("tc") <= horizon) if horizon is not None else pl.lit(True)
        chosen = first_cause.filter(in_time | pl.col("tc").is_null() | pl.col("rank").is_in(list(agent_failed)))
        initiators = sorted(chosen["rank"].to_list())
        for row in chosen.iter_rows(named=True):
            # Prefer the rank's most specific cause (an exception over a bare exit status).
            own = causes.filter(pl.col("rank") == row["rank"])
            pref = {"worker_failed": 1, "process_exit": 1, "failure_entry": 2, "root_cause_entry": 3}
            own = own.with_columns(pl.col("kind").replace_strict(pref, default=0, return_dtype=pl.Int8).alias("__p"))
            pick = own.sort("__p", "tc", nulls_last=True, maintain_order=True).row(0, named=True)
            cause_event[row["rank"]] = pick["event_id"]
        kinds = [_cause_kind(causes.filter(pl.col("rank") == r)) for r in initiators]
        failure_kind = Counter(kinds).most_common(1)[0][0]
        basis = "first fault"
        if len(initiators) > 1:
            excs = {causes.filter(pl.col("rank") == r)["exc_type"].drop_nulls().first() for r in initiators}
            if len(initiators) >= max(2, len(seen) // 2) and len(excs) <= 1:
                basis = "common mode"
                reasons.append(f"{len(initiators)} ranks failed the same way at about the same time (common mode)")
            else:
                reasons.append(f"{len(initiators)} ranks failed independently before any other rank reacted")

    # 3. Exit statuses with nothing else (a rank that just died with exit 1, -6 …, and said nothing).
    explained = set(fr.filter(pl.col("role").is_in(["cause", "effect"]) & (pl.col("kind") != "worker_signalled"))["rank"].to_list())
    if not initiators:
        exits = fr.filter((pl.col("role") == "exit") & ~pl.col("rank").is_in(list(explained)))
        if exits.height:
            initiators = exits.group_by("rank", maintain_order=True).first()["rank"].to_list()[:1]
            for r in initiators:
                cause_event[r] = exits.filter(pl.col("rank") == r)["event_id"][0]
            failure_kind, basis = "rank_crash", "exit status"
            reasons.append("the initiating rank logged no error text, only an exit status")

    effects = fr.filter(pl.col("role") == "effect")
    # 3b. Network errors with no crash behind them: the rank whose link failed first.
    if not initiators:
        net = fr.filter(pl.col("kind") == "nccl_net_error").sort("tc", "event_id", nulls_last=True)
        dead_host = _unreachable_peer_host(t, net)
        if dead_host is not None:
            on_host = sorted(int(r) for r in t.filter(pl.col("host") == dead_host)["rank"].drop_nulls().unique().to_list())
            own = set(fr.filter((pl.col("role") == "effect") & (pl.col("kind") != "worker_signalled"))["rank"].to_list())
            initiators = [r for r in on_host if r not in own] or on_host
            failure_kind, basis = "network_error", f"peer host {dead_host} unreachable"
            cause_event.update({r: net["event_id"][0] for r in initiators})
            reasons.append(f"the ranks of {dead_host} stopped logging; they are named because the others lost their connection to it")
        elif net.height:
            firsts = net.group_by("rank", maintain_order=True).first()
            t_first = firsts["tc"][0]
            if t_first is not None:
                tol = dt.timedelta(seconds=1)
                tied = firsts.filter(pl.col("tc") < t_first + tol)
            else:
                tied = firsts.head(1)
            initiators = sorted(tied["rank"].to_list())
            for row in tied.iter_rows(named=True):
                cause_event[row["rank"]] = row["event_id"]
            failure_kind, basis = "network_error", "first network error"
            if len(initiators) > 1:
                reasons.append("several ranks saw network errors within the clock uncertainty")

    # 4. monitoredBarrier names the ranks that never arrived (in the numbering of the barrier's group:
    #    a reporter whose PG rank differs from its global rank reports sub-group ranks, mapped by offset).
    own_error_ranks = set(fr.filter((pl.col("role") == "effect") & (pl.col("kind") != "worker_signalled") & ~(
        pl.col("kind").is_in(["failure_entry", "root_cause_entry"]) & (pl.col("exit_code") == -15)))["rank"].to_list())
    if not initiators:
        named: list[int] = []
        for row in f.filter(pl.col("kind") == "monitored_barrier_failed").iter_rows(named=True):
            shift = (row["rank"] - row["pg_rank"]) if row["rank"] is not None and row["pg_rank"] is not None else 0
            named.extend(r + shift for r in barrier_ranks(row["message"] or ""))
        named_set = set(named)
        quiet = named_set - own_error_ranks
        if named_set:
            initiators, basis = sorted(quiet or named_set), "named by monitoredBarrier"
            # A named rank that is stuck says nothing; one that went on and failed elsewhere ran another collective.
            failure_kind = "straggler_hang" if quiet else "collective_mismatch"
            if not quiet:
                reasons.append("the rank named by monitoredBarrier did not wait in the barrier: it ran a different collective")

    # 5. Silence is evidence: a rank behind everyone else, or with no error while the others time out.
    if not initiators and effects.height:
        prog = align.progress(t)
        # Being SIGTERMed by the agent is not an error of the rank's own: such a rank is still "silent".
        own_errors = effects.filter((pl.col("kind") != "worker_signalled") & ~(
            pl.col("kind").is_in(["failure_entry", "root_cause_entry"]) & ((pl.col("exit_code") == -15) | (pl.col("signal") == "SIGTERM"))))
        faulty = set(own_errors["rank"].to_list())
        silent = [r for r in seen if r not in faulty]
        waited = effects.filter(pl.col("seq").is_not_null()).sort("tc")
        if waited.height:
            w = waited.row(0, named=True)
            focus = {"pg": w["pg"] or "0", "seq": w["seq"], "op": w["op"]}
        behind = align.behind(prog)
        behind_ranks = sorted(set(behind["rank"].to_list())) if behind.height else []
        if silent:
            cand = silent
            if len(silent) > 1:
                ranked = prog.filter(pl.col("rank").is_in(silent) & (pl.col("pg") != "step"))
                if ranked.height:
                    low = ranked["entered"].min()
                    cand = sorted(ranked.filter(pl.col("entered") == low)["rank"].to_list())
            initiators, basis = sorted(cand), "silent while the others failed"
            reasons.append("the initiating rank logged no error; it was found by its silence")
        elif behind_ranks:
            initiators, basis = behind_ranks, "behind on the collective sequence"
            reasons.append("found by its lagging sequence number, not by an error")
        elif missing:
            initiators, basis = missing, "left no log"
            reasons.append("the initiating rank left no log at all; it is named because it is missing")
        if initiators:
            exited_early = launcher_present and not (set(initiators) & signalled) and basis.startswith("silent")
            failure_kind = "early_exit" if exited_early else "straggler_hang"
            if fr.filter(pl.col("kind") == "collective_mismatch").height:
                failure_kind = "collective_mismatch"
                reasons.append("a collective mismatch was detected but the odd rank could not be determined; "
                               "the silent ranks are only suspects")

    # 6. Only the launcher failed (rendezvous, store) — no rank did.
    if not initiators and f.filter(pl.col("kind").is_in(["launcher_error", "store_error", "job_cancelled"])).height:
        failure_kind, basis = "launcher_error", "launcher"
    if not initiators and fr.height and failure_kind == "none":
        failure_kind = "unknown"
        reasons.append("ranks report faults but none explains the others")

    if not focus.get("seq") and initiators:
        # The collective the others were stuck in: the (pg, seq) most ranks' timeouts name.
        waited = fr.filter((pl.col("role") == "effect") & pl.col("seq").is_not_null() & ~pl.col("rank").is_in(initiators))
        if waited.height:
            top = (waited.group_by(pl.coalesce(pl.col("pg"), pl.lit("0")).alias("pg"), "seq")
                   .agg(pl.col("rank").n_unique().alias("n"), pl.col("op").drop_nulls().first())
                   .sort("n", "seq", descending=[True, False]).row(0, named=True))
            focus = {**focus, "pg": top["pg"], "seq": top["seq"], "op": top["op"]}
    for r in initiators:
        if r not in G:
            G.add_node(r, host=None, local_rank=None, status="missing")
        G.nodes[r]["status"] = "initiating"
        G.nodes[r]["cause_event"] = cause_event.get(r)

    _add_edges(G, fr, initiators, failure_kind, signalled, cause_event)
    # The launcher tore the whole job down (mpirun abort, scheduler cancel, DeepSpeed killing subprocesses):
    # ranks that said nothing were killed as a consequence too.
    teardown = f.filter(pl.col("kind").is_in(["job_cancelled"]) | ((pl.col("kind") == "worker_signalled") & pl.col("rank").is_null()))
    if initiators and teardown.height:
        ev_id = teardown["event_id"][0]
        for r in seen:
            if G.nodes[r]["status"] == "clean":
                G.nodes[r]["status"] = "collateral"
                G.nodes[r]["explained_by"] = {"rank": initiators[0], "edge": "killed_by", "pg": None, "seq": None}
                G.add_edge(r, initiators[0], edge="killed_by", pg=None, seq=None, evidence=[ev_id])

    if missing and initiators and not set(initiators) & set(missing):
        reasons.append(f"{len(missing)} of {world} ranks left no log")
    if not launcher_present and failure_kind not in ("none",):
        reasons.append("no launcher output to confirm exit statuses")
    weak = t.filter(pl.col("rank").is_in(initiators) & pl.col("rank_source").is_in(["pid_order", "message"]))
    if weak.height and t.filter(pl.col("rank").is_in(initiators) & ~pl.col("rank_source").is_in(["pid_order", "message"])).height == 0:
        reasons.append("the initiating rank's identity is inferred (pid order / message text), not stated")
    uncertain = [c for c in clocks.values() if c.uncertainty_s > 5]
    if uncertain and len(initiators) > 0 and basis == "first fault":
        reasons.append("host clocks could not be aligned; ordering across hosts is uncertain")

    G.graph.update(world_size=world, ranks_seen=seen, missing=missing, initiators=initiators,
                   initiator_basis=basis, failure_kind=failure_kind, reasons=reasons, focus=focus,
                   signalled=sorted(signalled), launcher_present=launcher_present)
    return G


def _unreachable_peer_host(t: pl.DataFrame, net: pl.DataFrame) -> str | None:
    """The host the first network errors point at, when no rank on that host reported a network error
    itself (the peer went away, rather than a link of one rank failing). Addresses map to hosts through
    NCCL ``Bootstrap : Using <if>:<ip>`` lines, or are host names already."""
    named = net.filter(pl.col("peer_addr").is_not_null())
    if named.height == 0:
        return None
    ip_host = dict(t.filter(pl.col("local_addr").is_not_null() & pl.col("host").is_not_null())
                   .select("local_addr", "host").unique(subset="local_addr").iter_rows())
    hosts = set(t["host"].drop_nulls().unique().to_list())
    addr = named["peer_addr"][0]
    host = ip_host.get(addr) or (addr.split(".")[0] if addr.split(".")[0] in hosts else None)
    if host is None:
        return None
    if net.filter(pl.col("host") == host).height:
        return None
    return host


def _config_outlier(t: pl.DataFrame) -> tuple[int | None, list[int]]:
    """The one rank whose application line differs in its numbers from the same line on every other rank.

    Lines are compared by template (digits masked); templates with the rank's own number in them
    (``rank=3``, ``pid=…``) differ on every rank and never single one out. Returns (rank, event ids).
    """
    app = t.filter((pl.col("layer") == "app") & pl.col("rank").is_not_null())
    if app.height == 0:
        return None, []
    nranks = app["rank"].n_unique()
    if nranks < 3:
        return None, []
    num = r"\d+(?:\.\d+)?"
    # Numbers that differ by construction on every rank (its rank, pid, ports) are not configuration.
    own = r"\b(?:\w*rank\w*|pid|port|master)[=:]\s*[\w.]*(?::\d+)?"
    app = app.with_columns(pl.col("message").str.replace_all(own, "").alias("message"))
    rows = (app.with_columns(pl.col("message").str.replace_all(num, "#").alias("tpl"),
                             pl.col("message").str.extract_all(num).list.join(",").alias("vals"))
            .group_by("tpl", "rank").agg(pl.col("vals").first(), pl.col("event_id").first()))
    for tpl, grp in rows.group_by("tpl"):
        if grp.height < 3:
            continue
        counts = grp.group_by("vals").len().sort("len", descending=True)
        if counts.height == 2 and counts["len"][1] == 1 and counts["len"][0] == grp.height - 1:
            odd = grp.filter(pl.col("vals") == counts["vals"][1])
            ref = grp.filter(pl.col("vals") == counts["vals"][0])
            return int(odd["rank"][0]), [int(odd["event_id"][0]), int(ref["event_id"][0])]
    return None, []


def _cause_kind(rows: pl.DataFrame) -> str:
    kinds = rows["kind"].to_list()
    for k in ("cuda_oom", "cuda_error", "process_killed", "ddp_error", "watchdog_hang", "python_exception"):
        if k in kinds:
            return FAILURE_KIND_OF[k]
    if ((rows["exit_code"] == -9) | (rows["signal"] == "SIGKILL")).any():
        return "oom_kill"
    return "rank_crash"


def _add_edges(G: nx.DiGraph, fr: pl.DataFrame, initiators: list[int], failure_kind: str,
               signalled: set[int], cause_event: dict[int, int]) -> None:
    """Give every faulty non-initiating rank the edge that explains it."""
    if not initiators:
        return
    target_default = initiators[0]
    for rank, rows in fr.group_by("rank", maintain_order=True):
        r = int(rank[0])
        if r in initiators:
            continue
        rows = rows.sort(pl.col("kind").is_in(["failure_entry", "root_cause_entry"]).cast(pl.Int8), "tc", "event_id",
                         nulls_last=True)
        firstrow = rows.row(0, named=True)
        named = [p for p in rows["peer_rank"].drop_nulls().to_list() if p in initiators]
        target = named[0] if named else target_default
        kinds = set(rows["kind"].to_list())
        with_seq = rows.filter(pl.col("seq").is_not_null())
        pg = with_seq["pg"][0] if with_seq.height else None
        seq = with_seq["seq"][0] if with_seq.height else None
        if failure_kind == "collective_mismatch":
            edge = "mismatch"
        elif failure_kind == "early_exit":
            edge = "exited_before"
        elif kinds & {"watchdog_timeout", "watchdog_status", "gloo_timeout", "monitored_barrier_failed", "heartbeat_timeout"}:
            edge = "waits_for"
        elif kinds & set(PEER_KINDS):
            edge = "peer_error"
        elif r in signalled or "worker_signalled" in kinds:
            edge = "killed_by"
        else:
            edge = "waits_for"
        G.nodes[r]["status"] = "collateral"
        G.nodes[r]["explained_by"] = {"rank": target, "edge": edge, "pg": (pg or "0") if seq is not None else None,
                                      "seq": seq}
        G.add_edge(r, target, edge=edge, pg=pg, seq=seq, evidence=[firstrow["event_id"]])
