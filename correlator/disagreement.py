"""The odd one out: rules that name the rank whose collective, size, configuration or call site differs from
all the others' (:func:`odd_one_out`, :func:`config_odd_one_out`, :func:`call_site_odd_one_out`), from the
rows :func:`divergence` and :func:`config_outlier` compare. Called in order by :mod:`correlator.initiators`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl

from correlator.attempt_evidence import SIG_KINDS, Evidence, Finding
from correlator.confidence import Reason
from correlator.reduce import NUMBER, without_own_numbers
from correlator.schema import Kind
from correlator.verdict import Basis
from parsers import python


def divergence(t: pl.DataFrame) -> tuple[set[int], set[int], dict[str, Any]]:
    """Odd one out: ranks whose collective (op, shape/numel) differs from the majority at the same seq.

    Returns (minority, majority, info) for the earliest (pg, seq) where ranks disagree; empty sets if none.
    Claims come from DETAIL fingerprints, watchdog timeouts (op + NumelIn) and mismatch errors, which also
    state what the peer ran.
    """
    rows = t.filter(
        pl.col("kind").is_in(SIG_KINDS) & pl.col("seq").is_not_null() & pl.col("rank").is_not_null()
    )
    if rows.height == 0:
        # Old watchdog lines name no SeqNum (torch <= 1.12: ``WorkNCCL(OpType=BROADCAST, Timeout(ms)=…)``): when each
        # rank timed out in one op only, those ops are compared as one collective (seq -1).
        # Likewise torch 2.0's DETAIL mismatch (``CollectiveFingerPrint(OpType=ALLREDUCE, …)`` with no
        # SequenceNumber): each rank's one mismatch line, and the op it says its peer runs.
        old = t.filter(
            pl.col("kind").is_in([Kind.WATCHDOG_TIMEOUT, Kind.COLLECTIVE_MISMATCH])
            & pl.col("op").is_not_null()
            & pl.col("rank").is_not_null()
        )
        if old.height and (old.group_by("rank").agg(pl.col("op").n_unique().alias("n"))["n"] == 1).all():
            rows = old.with_columns(
                pl.lit(-1, dtype=pl.Int64).alias("seq"),
                pl.lit(None, dtype=pl.Int64).alias("numel"),
                pl.lit(None, dtype=pl.String).alias("shape"),
            )
    claims: list[tuple[str, int, int, str, int]] = []  # pg, seq, rank, signature, event_id
    own_line: dict[tuple[str, int, int], int] = {}  # (pg, seq, rank) -> the rank's own line about it
    for r in rows.select(
        "kind", "pg", "seq", "rank", "peer_rank", "op", "shape", "numel", "peer_op", "peer_shape", "event_id"
    ).iter_rows(named=True):
        pg = r["pg"] or "0"
        size = r["shape"] if r["shape"] is not None else (str(r["numel"]) if r["numel"] is not None else "")
        sig = f"{r['op']}|{size}"
        own_line.setdefault((pg, r["seq"], r["rank"]), r["event_id"])
        claims.append((pg, r["seq"], r["rank"], sig, r["event_id"]))
        if r["kind"] == Kind.COLLECTIVE_MISMATCH:
            pop, pshape = r["peer_op"], r["peer_shape"]
            if r["peer_rank"] is not None and pop:
                claims.append((pg, r["seq"], r["peer_rank"], f"{pop}|{pshape or ''}", r["event_id"]))
    by_key: dict[tuple[str, int], dict[int, set[str]]] = {}
    ev: dict[tuple[str, int], list[int]] = {}
    sizeless = {(pg, seq) for pg, seq, _, sig, _ in claims if sig.endswith("|")}
    # A fingerprint states a shape (``TensorShape=[8]``), a watchdog line an element count (``NumelIn=8``): where
    # one key has both, shapes are compared as element counts.
    mixed = {(pg, seq) for pg, seq, _, sig, _ in claims if not sig.endswith("|") and "[" not in sig} & {
        (pg, seq) for pg, seq, _, sig, _ in claims if "[" in sig
    }
    for pg, seq, rank, sig, eid in claims:
        if (pg, seq) in sizeless:  # some claim has no shape: compare the op types only
            sig = sig.split("|")[0]
        elif (pg, seq) in mixed:
            sig = _as_numel(sig)
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
        return (
            minority,
            majority,
            {
                "pg": key[0],
                "seq": key[1],
                "majority": top.replace("|", " "),
                "evidence": ev[key][:8],
                "own": own,
            },
        )
    return set(), set(), {}


def _as_numel(sig: str) -> str:
    """``op|[2, 4]`` -> ``op|8`` (a shape's element count); other signatures unchanged."""
    op, _, size = sig.partition("|")
    dims = size.strip("[]").replace(" ", "").split(",") if size.startswith("[") else None
    if dims is None or not all(d.isdigit() for d in dims if d):
        return sig
    n = 1
    for d in dims:
        n *= int(d) if d else 1
    return f"{op}|{n}"


def odd_one_out(e: Evidence) -> Finding | None:
    """Collective mismatch or divergent shapes: the minority at the first disagreeing (pg, seq)."""
    minority, majority, div = divergence(e.t)
    if not minority or not (majority or e.causes.height == 0):
        return None
    inits = sorted(minority)
    found = Finding(
        inits,
        Basis.ODD_ONE_OUT,
        "collective_mismatch",
        focus=div,
        cause_event={r: div["own"].get(r, div["evidence"][0]) for r in inits},
    )
    if not majority:
        found.reasons.append(Reason.EVEN_SPLIT.note())
    return found


def config_odd_one_out(e: Evidence) -> Finding | None:
    """A mismatch was detected but the collectives do not say who is odd: compare what the ranks said
    about themselves (configuration lines every rank printed, where exactly one rank differs)."""
    if not e.fr.filter(pl.col("kind") == Kind.COLLECTIVE_MISMATCH).height:
        return None
    odd, ev_ids = config_outlier(e.t)
    if odd is None:
        return None
    return Finding(
        [odd],
        Basis.ODD_ONE_OUT,
        "collective_mismatch",
        {odd: ev_ids[0]},
        {"evidence": ev_ids},
        [Reason.CONFIG_LINE.note()],
    )


def call_site_odd_one_out(e: Evidence) -> Finding | None:
    """Without DETAIL nothing names the op a rank ran, but each rank's traceback does: the ranks that
    failed inside a collective are grouped by where their code called ``torch.distributed`` (file:line and
    the collective, :func:`parsers.python.call_site`). When every rank of the job failed inside a collective and a strict
    majority of three or more stands at one call site, the ranks elsewhere ran another collective: they are
    the odd ones out (a collective cannot complete without every member). Each rank's first fault row with
    a call site counts. A rank in no collective leaves the rule silent: it may be a straggler, and the
    minority may be waiting for it in a subgroup's collective."""
    # A traceback is a multi-line record: one-line rows (1M watchdog lines of a huge job) are not read.
    rows = e.fr.filter(pl.col("line_count") > 1).sort("tc", "event_id", nulls_last=True)
    if rows.height < 3:
        return None
    site: dict[int, tuple[str, str]] = {}
    eid: dict[int, int] = {}
    for r, raw, ev in rows.select("rank", "raw", "event_id").iter_rows():
        if r in site:
            continue
        cs = python.call_site(raw or "")
        if cs is not None:
            site[r], eid[r] = cs, ev
    counts = Counter(site.values())
    if len(site) < 3 or len(counts) < 2:
        return None
    # Every rank must stand in some collective: a rank that is in none may be the straggler the others wait
    # for, and a minority may then only be waiting in a subgroup's collective (cap-13).
    if not set(e.seen) <= set(site) or e.absent or (e.world is not None and len(site) < e.world):
        return None
    (top, ntop), *_ = counts.most_common()
    if 2 * ntop <= len(site):
        return None  # no strict majority: nobody is the odd one out
    odd = sorted(r for r, cs in site.items() if cs != top)
    return Finding(
        odd,
        Basis.ODD_CALL_SITE,
        "collective_mismatch",
        cause_event={r: eid[r] for r in odd},
        focus={
            "op": top[1],
            "majority": f"{top[1]} at {top[0]}",
            "evidence": [eid[r] for r in sorted(site)][:8],
        },
        reasons=[
            Reason.CALL_SITE_ONLY.note(
                odd="; ".join(f"rank {r} {site[r][1]} at {site[r][0]}" for r in odd), op=top[1], site=top[0]
            )
        ],
    )


def config_outlier(t: pl.DataFrame) -> tuple[int | None, list[int]]:
    """The one rank whose application line differs in its numbers from the same line on every other rank.

    Lines are compared by template (digits masked); numbers that differ by construction on every rank (its
    rank, pid, ports) are masked out first. Returns (rank, [its event id, a majority event id]).
    """
    app = t.filter((pl.col("layer") == "app") & pl.col("rank").is_not_null())
    if app.height == 0 or app["rank"].n_unique() < 3:
        return None, []
    # the template (reduce.line_template: the reduction keeps the first line of each) and its numbers
    app = app.with_columns(without_own_numbers(pl.col("message")).alias("message"))
    rows = (
        app.with_columns(
            pl.col("message").str.replace_all(NUMBER, "#").alias("tpl"),
            pl.col("message").str.extract_all(NUMBER).list.join(",").alias("vals"),
        )
        .group_by("tpl", "rank", maintain_order=True)
        .agg(pl.col("vals").first(), pl.col("event_id").first())
    )
    for _tpl, grp in rows.group_by("tpl", maintain_order=True):
        if grp.height < 3:
            continue
        counts = grp.group_by("vals").len().sort("len", descending=True)
        if counts.height == 2 and counts["len"][1] == 1 and counts["len"][0] == grp.height - 1:
            odd = grp.filter(pl.col("vals") == counts["vals"][1])
            ref = grp.filter(pl.col("vals") == counts["vals"][0])
            return int(odd["rank"][0]), [int(odd["event_id"][0]), int(ref["event_id"][0])]
    return None, []
