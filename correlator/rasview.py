"""What NCCL RAS and NCCL Inspector say about the job's ranks, as typed claims (issue #33 item 3).

RAS (``ncclras``, :mod:`parsers.ras`) and Inspector (:mod:`parsers.inspector`) are reports about the job, not
lines of a rank: their rows name communicator ranks (``ranks_named``, in the communicator's numbering) and
processes (``peer_addr``: ``<host> pid <pid>``). :func:`claims` maps them to the job's ranks — by pid where
the logs tie that pid to a rank, else by the communicator rank when the communicator spans the whole job (its
size is the world size) — and says what each report states:

- ``dead``: RAS considers the process dead (``DEAD`` block, ``considered_dead``, ``PEER_DEAD``);
- ``missing``: RAS could not get the rank's data (``INCOMPLETE``, ``unresponsive``, ``PEER_UNRESPONSIVE``);
- ``behind``: the rank launched fewer operations than the others of its communicator (RAS ``MISMATCH`` of
  operation counts; Inspector: its last completed ``coll_sn`` is below the others');
- ``late``: the rank arrives last at its communicator's recent collectives (Inspector: its execution time is
  the shortest, the others' kernels wait for it; :func:`_late`);
- ``ok``: a RAS status report in which every communicator is ``OK``.

:func:`disagreement` compares those claims with the verdict of the logs, on typed fields only: a report that
every communicator is healthy while ranks timed out, or ranks RAS names that are not the ranks the logs name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from correlator.ranks import ranges
from correlator.schema import KIND_ALIASES, Kind

_PID = re.compile(r"\bpid (\d+)")
#: RAS / Inspector kinds -> what the claim states
_STATES = {Kind.RAS_DEAD: "dead", Kind.RAS_MISSING: "missing", Kind.RAS_MISMATCH: "behind", Kind.RAS_OK: "ok"}
#: Fault kinds of ranks that were waiting for another when they failed (timeouts and their teardown).
WAITING_KINDS = sorted(KIND_ALIASES["timeout"])


@dataclass
class Claim:
    """One report's statement about job ranks."""

    state: str  #: ``dead`` | ``missing`` | ``behind`` | ``ok``
    ranks: list[int]  #: job ranks (empty for ``ok``, or when the report's ranks could not be mapped)
    event_id: int  #: the report's row
    source: str  #: ``NCCL RAS`` or ``NCCL Inspector``
    comm: str | None = None  #: the communicator hash / id


def _pid_ranks(t: pl.DataFrame) -> dict[int, int]:
    """pid -> rank, from rows of ranks that state a pid (one rank per pid only)."""
    if "pid" not in t.columns:
        return {}
    known = (
        t.filter(pl.col("pid").is_not_null() & pl.col("rank").is_not_null())
        .group_by("pid")
        .agg(pl.col("rank").unique())
    )
    return {int(p): int(rs[0]) for p, rs in known.iter_rows() if len(rs) == 1}


def claims(t: pl.DataFrame, world: int | None) -> list[Claim]:
    """The RAS and Inspector claims of the rows ``t`` (an attempt's rows, or the whole table). ``world``: the
    job's world size when known (a communicator of that size numbers its ranks as the job does)."""
    kinds = [*_STATES, Kind.INSPECTOR_OP]
    if "kind" not in t.columns or not t.filter(pl.col("kind").is_in(kinds)).height:
        return []
    pids = _pid_ranks(t)
    out: list[Claim] = []
    rows = t.filter(pl.col("kind").is_in(list(_STATES))).sort("event_id")
    for ev, kind, named, procs, size, comm in rows.select(
        "event_id", "kind", "ranks_named", "peer_addr", "world_size", "pg"
    ).iter_rows():
        state = _STATES[kind]
        ranks: list[int] = []
        by_pid = [int(p) for p in _PID.findall(procs or "")]
        if by_pid and all(p in pids for p in by_pid):
            ranks = sorted({pids[p] for p in by_pid})
        elif named:
            comm_ranks = sorted(int(x) for x in str(named).split(",") if x.strip().isdigit())
            spans_job = world is not None and (size == world or (size is None and max(comm_ranks) < world))
            if spans_job:
                ranks = comm_ranks
        out.append(Claim(state, ranks, int(ev), "NCCL RAS", comm))
    out.extend(inspector_claims(t, world, pids))
    return out


def inspector_claims(t: pl.DataFrame, world: int | None, pids: dict[int, int]) -> list[Claim]:
    """Per Inspector communicator: the ranks whose last completed operation (``coll_sn``) is below the
    others' are ``behind`` (a collective cannot complete without every member, so a rank whose records
    stop earlier stopped completing first). Ranks by pid, else by the communicator rank when the
    communicator spans the job. One claim per communicator with such ranks (its evidence: the lagging rank's
    last record)."""
    rows = t.filter((pl.col("kind") == Kind.INSPECTOR_OP) & pl.col("seq").is_not_null())
    if not rows.height:
        return []
    last = (
        rows.sort("event_id")
        .group_by("pg", "ranks_named", maintain_order=True)
        .agg(
            pl.col("seq").max().alias("sn"),
            pl.col("event_id").last().alias("ev"),
            pl.col("pid").last().alias("pid"),
            pl.col("world_size").last().alias("size"),
        )
    )
    out: list[Claim] = []
    for (comm,), g in last.group_by("pg", maintain_order=True):
        top = g["sn"].max()
        lag = g.filter(pl.col("sn") < top)
        if not lag.height or lag.height * 2 >= g.height:
            continue
        ranks: list[int] = []
        for cr, pid, size in lag.select("ranks_named", "pid", "size").iter_rows():
            if pid is not None and int(pid) in pids:
                ranks.append(pids[int(pid)])
            elif cr is not None and world is not None and size == world:
                ranks.append(int(cr))
        out.append(Claim("behind", sorted(set(ranks)), int(lag["ev"][0]), "NCCL Inspector", comm))
    out.extend(_late(rows, world, pids))
    return out


#: Inspector: the recent operations compared per communicator, and how much shorter the late rank's execution
#: time must be than the others' median to count.
LATE_OPS = 16
LATE_FACTOR = 0.5


def _late(rows: pl.DataFrame, world: int | None, pids: dict[int, int]) -> list[Claim]:
    """A rank that arrives last at a collective spends the least time in it: the others' kernels wait for it.
    Per communicator, over the last :data:`LATE_OPS` operations every member recorded: the rank with the
    shortest execution time in most of them, whose median is under :data:`LATE_FACTOR` of the others', is
    ``late`` (the straggler they wait for). Execution times are the records' own (``coll_exec_time_us``)."""
    from parsers import inspector

    t = rows.select(
        "event_id", "pg", "ranks_named", "seq", "pid", "world_size", inspector.exec_us().alias("us")
    )
    out: list[Claim] = []
    for (comm,), g in t.drop_nulls(["seq", "us", "ranks_named"]).group_by("pg", maintain_order=True):
        members = g["ranks_named"].n_unique()
        common = g.group_by("seq").agg(pl.len().alias("n")).filter(pl.col("n") == members)["seq"]
        if members < 3 or not common.len():
            continue
        recent = g.filter(pl.col("seq").is_in(common.sort().tail(LATE_OPS).implode()))
        fastest = recent.sort("us").group_by("seq").agg(pl.col("ranks_named").first().alias("r"))["r"]
        (who, n), *_ = fastest.value_counts(sort=True).iter_rows()
        if 2 * n <= fastest.len():
            continue
        mine = recent.filter(pl.col("ranks_named") == who)
        others = recent.filter(pl.col("ranks_named") != who)
        if float(mine["us"].median() or 0) >= LATE_FACTOR * float(others["us"].median() or 0):  # type: ignore[arg-type]
            continue
        last = mine.sort("event_id").row(-1, named=True)
        rank = None
        if last["pid"] is not None and int(last["pid"]) in pids:
            rank = pids[int(last["pid"])]
        elif world is not None and last["world_size"] == world:
            rank = int(who)
        out.append(
            Claim("late", [rank] if rank is not None else [], int(last["event_id"]), "NCCL Inspector", comm)
        )
    return out


def named(cs: list[Claim]) -> dict[str, list[int]]:
    """The job ranks each state names (``dead``, ``missing``, ``behind``), over all claims."""
    out: dict[str, set[int]] = {}
    for c in cs:
        if c.state != "ok":
            out.setdefault(c.state, set()).update(c.ranks)
    return {k: sorted(v) for k, v in out.items() if v}


def all_healthy(cs: list[Claim]) -> bool:
    """Every RAS report is a status report of healthy communicators (and there is one)."""
    ras = [c for c in cs if c.source == "NCCL RAS"]
    return bool(ras) and all(c.state == "ok" for c in ras)


def disagreement(cs: list[Claim], initiators: list[int], waiting: list[int]) -> str | None:
    """The sentence that says how RAS / Inspector and the logs disagree, or None when they do not.

    ``initiators``: the ranks the logs' verdict names; ``waiting``: ranks the logs show timed out waiting.
    Read from typed fields only: the claims' states and ranks, the verdict's rank lists."""
    if all_healthy(cs) and (waiting or initiators):
        what = (
            f"rank{'s' if len(waiting) > 1 else ''} {ranges(waiting)} timed out waiting"
            if waiting
            else f"the logs name rank{'s' if len(initiators) > 1 else ''} {ranges(initiators)}"
        )
        n = sum(1 for c in cs if c.source == "NCCL RAS")
        return f"NCCL RAS reports every communicator healthy ({n} report{'s' if n > 1 else ''}) while {what}"
    said = named(cs)
    blamed = sorted({r for k in ("dead", "missing", "behind", "late") for r in said.get(k, [])})
    if blamed and initiators and not set(blamed) & set(initiators):
        parts = "; ".join(f"rank{'s' if len(v) > 1 else ''} {ranges(v)} {k}" for k, v in said.items())
        src = " and ".join(sorted({c.source for c in cs if c.state != "ok" and c.ranks}))
        return (
            f"{src} report{'s' if ' and ' not in src else ''} {parts} while the logs name "
            f"rank{'s' if len(initiators) > 1 else ''} {ranges(initiators)}"
        )
    return None
