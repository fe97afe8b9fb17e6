"""Flight Recorder in the pipeline: dumps into the event table, and what they say about who went wrong.

Two halves, both pure functions apart from reading the dump files; the first lives in
:mod:`correlator.fr_load` (ingest), the second here (diagnosis):

- :func:`correlator.fr_load.collect` (called once from ingest): every FR dump found under the input directory (by name and
  content, see :func:`parsers.flight_recorder.detect`) and under an extra ``--fr`` directory becomes rows
  of the event table (``layer = fr``): one ``fr_collective`` per entry and one ``fr_status`` per (rank,
  process group) with the dump's ``pg_status``. The status row is ``fr_waiting`` (a fault kind, an
  effect) when that rank was left inside a collective: NCCL's ``pg_status`` says enqueued > completed, or
  (gloo, whose timed-out work counts as completed) the rank's last collective of that PG was not entered
  the same way by every other dumped rank of the PG.
- :func:`analyze` (called by the ``flight_recorder`` rule of :mod:`correlator.initiators`): align ranks per
  (PG, seq) after trimming the ring buffer's wrap, find the first seq where they disagree and decide by
  majority: op type mismatch, size/dtype mismatch, a rank that skipped a collective (ahead) or ran an extra
  one, a rank that never reached the seq; when all ran the same collectives, NCCL's entry states (a
  minority that never started the first collective the others had started). A rank of the PG that left no
  dump is named as unknown.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass
from typing import Any

import polars as pl

from correlator.confidence import Note, Reason
from correlator.fr_load import HISTORY, p2p_unmatched
from correlator.schema import Kind
from parsers import flight_recorder as frp


#: The layer and kinds this module writes (see correlator.schema.Kind).
@dataclass
class Verdict:
    """What FR shows at the first disagreement. ``kind``: op_mismatch | size_mismatch | dtype_mismatch |
    skipped (its collective here is the one after it in the others' history) | extra (its next collective is
    the others' collective here) | never_reached | p2p_unmatched (a send or recv whose peer never posted
    its half; ``seq`` is the waiting entry's p2p seq). ``claim`` is the sentence for the summary."""

    initiators: list[int]
    kind: str
    claim: str
    pg: str
    seq: int
    cause_event: dict[int, int]
    evidence: list[int]
    reasons: list[Note]
    majority: list[int]
    op: str | None = None
    t0: Any = None  #: when the disagreement began (the waiting P2P entry's time_created); P2P only

    @property
    def failure_kind(self) -> str:
        return "straggler_hang" if self.kind in ("never_reached", "p2p_unmatched") else "collective_mismatch"


def _ranges(nums: list[int]) -> str:
    from correlator.ranks import ranges

    return ranges(sorted(nums))


def _who(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {_ranges(ranks)}"


def _desc(row: dict[str, Any], what: str) -> str:
    name = frp.op_of(row["profiling"])[1]
    if what == "size":
        return f"{name} of {row['shape']}"
    if what == "dtype":
        return f"{name} of {row['dtypes']}"
    return name


def _first_disagreement(coll: pl.DataFrame) -> tuple[Any, ...] | None:
    """Of every process group of ``coll`` (FR collective rows, wrap trimmed): the first seq where the
    ranks' signatures differ or a rank never got there, the earliest by time across PGs, as ``(sort key,
    pg, seq, rows present by rank, ranks absent, signatures by rank, rows by seq and rank, ranks)``."""
    best: tuple[Any, ...] | None = None
    for (pg,), g in coll.group_by("pg", maintain_order=True):
        ranks = sorted(int(r) for r in g["rank"].unique().to_list())
        if len(ranks) < 2:
            continue
        start = g.group_by("rank").agg(pl.col("seq").min())["seq"].max()
        top = {int(r): int(s) for r, s in g.group_by("rank").agg(pl.col("seq").max()).iter_rows()}
        g = g.filter(pl.col("seq") >= start)
        # The first seq where the signatures differ or a rank never got there, found column-wise (a dump
        # holds up to TORCH_FR_BUFFER_SIZE entries per rank, times thousands of ranks).
        sig = pl.concat_str(
            [pl.col("profiling"), pl.col("sizes"), pl.col("dtypes")], separator="|", ignore_nulls=True
        )
        per = g.group_by("seq").agg(sig.n_unique().alias("k")).sort("seq")
        tops = sorted(top.values())
        first = next(
            (int(sq) for sq, k in per.iter_rows() if k > 1 or bisect.bisect_left(tops, sq) > 0), None
        )
        if first is None:
            continue
        # Only the rows the verdict reads: a window of history before it, and the seq after it.
        near = g.filter(pl.col("seq").is_between(first - HISTORY, first + 1)).sort("seq", "rank")
        by_seq: dict[int, dict[int, dict[str, Any]]] = {}
        for row in near.select(
            "seq",
            "rank",
            "op",
            "sizes",
            "dtypes",
            "shape",
            "profiling",
            "event_id",
            "ts",
            "path",
            "record_id",
        ).iter_rows(named=True):
            by_seq.setdefault(int(row["seq"]), {}).setdefault(int(row["rank"]), row)
        present = by_seq[first]
        absent = [r for r in ranks if r not in present and top[r] < first]
        sigs = {
            r: (row["profiling"].split(":")[-1], row["sizes"], row["dtypes"]) for r, row in present.items()
        }
        t0 = min((row["ts"] for row in present.values() if row["ts"] is not None), default=None)
        key = (t0 is None, t0, first)
        if best is None or key < best[0]:
            best = (key, str(pg), first, present, absent, sigs, by_seq, ranks)
    return best


#: What a minority's kind of difference is about (the part of the signature a claim names).
_WHAT = {
    "op_mismatch": "op",
    "size_mismatch": "size",
    "skipped": "size",
    "extra": "size",
    "dtype_mismatch": "dtype",
}


def _minority_kinds(
    sigs: dict[int, tuple[Any, ...]],
    minority: list[int],
    first_major: int,
    by_seq: dict[int, dict[int, dict[str, Any]]],
    seq: int,
    top_sig: tuple[Any, ...],
) -> dict[int, str]:
    """How each rank of ``minority`` differs from the majority's signature ``top_sig`` at ``seq``."""
    kinds = {}
    for r in minority:
        s = sigs[r]
        if s[0] != top_sig[0]:
            kinds[r] = "op_mismatch"
        elif _skipped(by_seq, first_major, seq, top_sig, s):
            kinds[r] = "skipped"
        elif _sig_at(by_seq, r, seq + 1) == top_sig:
            kinds[r] = "extra"  # its next collective is the one the others ran here
        elif s[1] != top_sig[1]:
            kinds[r] = "size_mismatch"
        else:
            kinds[r] = "dtype_mismatch"
    return kinds


def analyze(t: pl.DataFrame) -> Verdict | None:
    """The FR verdict for one attempt's rows ``t`` (the event table; only ``layer == 'fr'`` rows are read,
    plus text rows of the same (pg, seq) as linked evidence). None when FR shows no disagreement."""
    fr = t.filter(
        (pl.col("kind") == Kind.FR_COLLECTIVE) & pl.col("rank").is_not_null() & pl.col("seq").is_not_null()
    )
    if fr.height == 0:
        return None
    fr = fr.with_columns(
        pl.col("raw").str.json_path_match("$.is_p2p").alias("__p2p"),
        pl.col("raw").str.json_path_match("$.profiling_name").alias("profiling"),
        pl.col("raw").str.json_path_match("$.input_sizes").alias("sizes"),
    )
    coll = fr.filter(pl.col("__p2p") != "true")
    dumped = sorted(int(r) for r in fr["rank"].unique().to_list())
    # Ring-buffer wrap: keep what every rank still holds — the largest first record_id across ranks (as
    # torchfrtrace does; record ids count every entry of a rank, so this holds only when all ranks are in
    # the same PGs), then per PG the largest first seq (always).
    pgs = coll.group_by("rank").agg(pl.col("pg").unique().sort().alias("pgs"))
    if pgs["pgs"].n_unique() == 1:
        first_rid = coll.group_by("rank").agg(pl.col("record_id").min())["record_id"].max()
        if first_rid is not None:
            coll = coll.filter(pl.col("record_id") >= first_rid)
    best = _first_disagreement(coll)
    p2p = _p2p_verdict(t, fr)
    if best is None:
        return p2p or _state_verdict(t, coll)
    if p2p is not None and p2p.t0 is not None and (best[0][1] is None or p2p.t0 < best[0][1]):
        return p2p  # the P2P op that was left waiting came first
    _, pg, seq, present, absent, sigs, by_seq, _ranks = best
    reasons: list[Note] = []
    pg_members = _members(t, pg)
    no_dump = sorted(set(pg_members) - set(dumped)) if pg_members else []
    if no_dump:
        reasons.append(Reason.NO_FR_DUMP.note(who=_who(no_dump), it="it" if len(no_dump) == 1 else "they"))
    counts = Counter(sigs.values())
    (top_sig, ntop), *rest = counts.most_common()
    evidence: list[int] = []
    if len(counts) > 1:
        if rest and rest[0][1] == ntop:
            return None  # an even split: FR alone does not say who is odd (the text rules may)
        majority = sorted(r for r, s in sigs.items() if s == top_sig)
        minority = sorted(r for r, s in sigs.items() if s != top_sig)
        m_row = present[majority[0]]
        kinds = _minority_kinds(sigs, minority, majority[0], by_seq, seq, top_sig)
        kind = Counter(kinds.values()).most_common(1)[0][0]
        what = _WHAT[kind]
        odd = present[minority[0]]
        claim = (
            f"{_who(minority)} called {_desc(odd, what)} at pg {pg} seq {seq} where {_who(majority)} called "
            f"{_desc(m_row, what)}"
        )
        if kind == "skipped":
            claim += (
                f" ({'it' if len(minority) == 1 else 'they'} skipped that {_desc(m_row, 'op')} and ran ahead)"
            )
        elif kind == "extra":
            claim += f" (an extra collective: {'its' if len(minority) == 1 else 'their'} seq {seq + 1} is what the others ran here)"
        if absent:
            reasons.append(Reason.FR_ALSO_NEVER_REACHED.note(who=_who(absent), pg=pg, seq=seq))
        cause = {r: int(present[r]["event_id"]) for r in minority}
        evidence = [int(present[r]["event_id"]) for r in minority] + [int(m_row["event_id"])]
        inits = minority
    else:
        kind = "never_reached"
        majority = sorted(present)
        last = {}
        for r in absent:
            below = [s for s in by_seq if s < seq and r in by_seq[s]]
            if below:
                last[r] = by_seq[max(below)][r]
        m_row = present[majority[0]]
        claim = (
            f"{_who(absent)} never reached pg {pg} seq {seq} ({_desc(m_row, 'size')}), which "
            f"{_who(majority)} entered"
        )
        if last:
            r0 = min(last)
            claim += f"; {'its' if len(absent) == 1 else f'rank {r0}' + chr(39) + 's'} last collective was seq {last[r0]['seq']}"
        cause = {r: int(row["event_id"]) for r, row in last.items()}
        evidence = [*cause.values(), int(m_row["event_id"])]
        inits = absent
    if len(majority) < 2:
        reasons.append(Reason.FR_SINGLE_MAJORITY.note())
    evidence += _linked_text(t, pg, seq)
    return Verdict(
        inits,
        kind,
        claim,
        pg,
        seq,
        cause,
        evidence,
        reasons,
        majority,
        op=frp.op_type(frp.op_of(m_row["profiling"])[1]),
    )


def _p2p_verdict(t: pl.DataFrame, fr: pl.DataFrame) -> Verdict | None:
    """P2P matching per (PG, sender, receiver): NCCL pairs the k-th send from A to B with the k-th recv on B
    from A (the FR analyzer's rule 3: sends to one peer and recvs from one peer keep their order;
    ``p2p_seq_id`` counts every P2P op of the PG on that rank, so it is not shared by the peers). The first
    pair whose send (recv) has no recv (send) on the peer, and that is not completed, names the peer that
    never posted its half; the earliest such entry decides. Only pairs whose two ranks both left a dump whose
    ring buffer did not wrap (first ``record_id`` 0) are read: after a wrap the k-th entries no longer
    correspond. A send whose sizes differ from its recv's ends that pair's reading without a claim."""
    p2p = fr.filter(pl.col("__p2p") == "true")
    if p2p.height == 0:
        return None
    dumped = {int(r) for r in fr["rank"].unique().to_list()}
    first = fr.group_by("rank").agg(pl.col("record_id").min())
    wrapped = {int(r) for r, m in first.iter_rows() if m is not None and m > 0}
    p2p = p2p.with_columns(
        pl.col("raw").str.json_path_match("$.output_sizes").alias("__out"),
        pl.col("raw").str.json_path_match("$.pg_ranks").alias("__ranks"),
    )
    items = []
    for row in p2p.sort("rank", "record_id").iter_rows(named=True):
        ranks = [int(x) for x in (row["__ranks"] or "").strip("[]").split(",") if x.strip()]
        items.append({**row, "ranks": ranks, "in_sizes": row["sizes"], "out_sizes": row["__out"]})
    found = [
        (w["ts"] is None, w["ts"], pg, src, dst, w, culprit, done)
        for pg, src, dst, w, culprit, done in p2p_unmatched(items, dumped, wrapped)
    ]
    if not found:
        return None
    _n, t0, pg, src, dst, w, culprit, done = min(found, key=lambda f: (f[0], f[1] or 0, f[2], f[3], f[4]))
    waiter = int(w["rank"])
    seq = int(w["seq"])
    if waiter == src:
        claim = (
            f"rank {src}'s send to rank {dst} at pg {pg} p2p seq {seq} ({w['shape']}) has no matching recv on "
            f"rank {dst}, which posted {len(done)} recv{'s' if len(done) != 1 else ''} from rank {src}"
        )
    else:
        claim = (
            f"rank {dst}'s recv from rank {src} at pg {pg} p2p seq {seq} ({w['shape']}) waits for a send rank "
            f"{src} never posted (it posted {len(done)} send{'s' if len(done) != 1 else ''} to rank {dst})"
        )
    if done:
        cause = {culprit: int(done[-1]["event_id"])}
    else:
        own = fr.filter(pl.col("rank") == culprit).sort("record_id")
        cause = {culprit: int(own["event_id"][-1])} if own.height else {}
    evidence = [*cause.values(), int(w["event_id"]), *_linked_text(t, pg, seq, ["SEND", "RECV"])]
    return Verdict(
        [culprit],
        "p2p_unmatched",
        claim,
        pg,
        seq,
        cause,
        evidence,
        [],
        [waiter],
        op=frp.op_type(frp.op_of(w["profiling"])[1]),
        t0=t0,
    )


_STATE_ORDER = {"scheduled": 0, "started": 1, "completed": 2}


def _state_verdict(t: pl.DataFrame, coll: pl.DataFrame) -> Verdict | None:
    """Every rank ran the same collectives, but at the first seq whose state differs (NCCL only: gloo
    always says scheduled) a minority never started it while the others had: those ranks were stuck before
    it (their stream or CPU), the others waited in it."""
    c = coll.filter(pl.col("state").is_in(list(_STATE_ORDER)))
    if c.height == 0 or c["state"].n_unique() < 2:
        return None
    c = c.with_columns(pl.col("state").replace_strict(_STATE_ORDER, return_dtype=pl.Int8).alias("__st"))
    best: tuple[Any, ...] | None = None
    for (pg,), g in c.group_by("pg", maintain_order=True):
        per = (
            g.group_by("seq")
            .agg(
                pl.col("__st").min().alias("lo"),
                pl.col("__st").max().alias("hi"),
                pl.col("ts").min().alias("t0"),
            )
            .filter(pl.col("lo") < pl.col("hi"))
            .sort("seq")
        )
        if per.height == 0:
            continue
        seq, t0 = int(per["seq"][0]), per["t0"][0]
        if best is None or (t0 is not None and (best[0] is None or t0 < best[0])):
            best = (t0, str(pg), seq, g.filter(pl.col("seq") == seq))
    if best is None:
        return None
    _, pg, seq, rows = best
    lo = int(rows["__st"].min())  # type: ignore[arg-type]
    behind = sorted(int(r) for r in rows.filter(pl.col("__st") == lo)["rank"].unique().to_list())
    ahead = sorted(int(r) for r in rows.filter(pl.col("__st") > lo)["rank"].unique().to_list())
    if len(behind) * 2 >= len(behind) + len(ahead):
        return None  # not a minority: FR does not say who held the others up
    name = {v: k for k, v in _STATE_ORDER.items()}
    ahead_state = name[int(rows.filter(pl.col("__st") > lo)["__st"].min())]  # type: ignore[arg-type]
    r0 = rows.filter(pl.col("rank") == behind[0]).row(0, named=True)
    m0 = rows.filter(pl.col("rank") == ahead[0]).row(0, named=True)
    claim = (
        f"{_who(behind)}'s {_desc(r0, 'op')} at pg {pg} seq {seq} never {name[lo + 1]} ({name[lo]}) while "
        f"{_who(ahead)} had {ahead_state} it"
    )
    cause = {
        int(r["rank"]): int(r["event_id"]) for r in rows.filter(pl.col("__st") == lo).iter_rows(named=True)
    }
    evidence = [*list(cause.values())[:2], int(m0["event_id"]), *_linked_text(t, pg, seq)]
    return Verdict(
        behind,
        "never_reached",
        claim,
        pg,
        seq,
        cause,
        evidence,
        [],
        ahead,
        op=frp.op_type(frp.op_of(r0["profiling"])[1]),
    )


def _members(t: pl.DataFrame, pg: str) -> list[int]:
    """The ranks of ``pg`` as the dumps' world size states it (only the default PG's size is carried)."""
    if pg not in ("0", ""):
        return []
    ws = t.filter(pl.col("layer") == "fr")["world_size"].drop_nulls()
    return list(range(int(ws.max()))) if ws.len() else []  # type: ignore[arg-type]


def _skipped(
    by_seq: dict[int, dict[int, dict[str, Any]]],
    ref: int,
    seq: int,
    missed: tuple[Any, ...],
    odd: tuple[Any, ...],
) -> bool:
    """The odd rank's collective at ``seq`` is the one that, in the reference rank's own history, comes
    right after the collective the majority runs at ``seq``: the odd rank skipped one and is ahead."""
    seqs = sorted(s for s in by_seq if s < seq and ref in by_seq[s])
    hist = [
        (by_seq[s][ref]["profiling"].split(":")[-1], by_seq[s][ref]["sizes"], by_seq[s][ref]["dtypes"])
        for s in seqs
    ]
    return any(hist[i] == missed and hist[i + 1] == odd for i in range(len(hist) - 1))


def _sig_at(by_seq: dict[int, dict[int, dict[str, Any]]], rank: int, seq: int) -> tuple[Any, ...] | None:
    row = by_seq.get(seq, {}).get(rank)
    return None if row is None else (row["profiling"].split(":")[-1], row["sizes"], row["dtypes"])


def _linked_text(t: pl.DataFrame, pg: str, seq: int, ops: list[str] | None = None) -> list[int]:
    """Text-log rows about the same (pg, seq): watchdog SeqNum, DETAIL fingerprints, mismatch errors
    (only rows of one of ``ops`` when given: a P2P seq is not a collective's)."""
    text = t.filter(
        (pl.col("layer") != "fr") & (pl.col("seq") == seq) & (pl.coalesce(pl.col("pg"), pl.lit("0")) == pg)
    )
    if ops is not None:
        text = text.filter(pl.col("op").is_in(ops))
    return [int(x) for x in text.sort("ts", "event_id", nulls_last=True)["event_id"].head(3).to_list()]
