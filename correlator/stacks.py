"""Where each rank stands, from stack dumps (issue #33): the evidence of a silent hang.

A hang that no watchdog reports leaves no error line: every rank is alive, the job simply stops. What people
collect then is every rank's stack (``py-spy dump --pid``, ``faulthandler``; rows of kind ``stack_dump``,
:mod:`parsers.stack`). With them the answer is usually plain: three ranks sit in ``all_reduce`` at one call
site, one sits in ``DataLoader.__next__`` or ``torch.save``. A collective cannot complete without every
member, so the ranks inside it wait for the ranks that are not (or that sit in another collective).

- :func:`where_ranks_stand` — a pure function of the stack rows: the odd one(s) out, the evidence rows and
  the sentence that says so;
- :func:`stalled` — whether the logs show the job stopped advancing before it ended (a snapshot of a running
  job shows ranks in different places too; only a stalled job makes the odd one out a culprit);
- :func:`external_stop` — a job stopped from outside (torchrun received SIGTERM / SIGINT, every rank alive, no
  error of its own) is not a failure of its launcher: ``none`` when every rank advanced until the stop,
  ``unknown`` (a likely hang, rank not known) when they had all stopped advancing long before;
- :func:`assign_ranks` — the rank of a dump that its file does not give, from its pid;
- :func:`correlator.stackdir.add_dumps` — dumps kept apart from the logs (``open_job(path, stacks=DIR)``).

Frames are read by :func:`parsers.stack.place` (the producer's own reading of its record, as
``initiators.call_site_odd_one_out`` reads tracebacks with :func:`parsers.python.call_site`).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from correlator.schema import Kind
from parsers import stack

#: A job is stalled when every rank's last progress line came this many seconds before the end of the logs,
#: and at least :data:`STALL_STEPS` of its usual step intervals (a slow job logs seldom).
STALL_MIN_S = 3.0
STALL_STEPS = 10


@dataclass
class StackVerdict:
    """What the dumps say: the odd rank(s) out, the failure kind it means, the rows that show it."""

    initiators: list[int]
    failure_kind: str  #: ``straggler_hang`` (in no collective) or ``collective_mismatch`` (in another one)
    cause_event: dict[int, int]  #: each initiator's dump row
    evidence: list[int]  #: the initiators' dumps, then up to 7 of the others'
    text: (
        str  #: ``rank 1 is in no collective: __getitem__ (train.py:91) ← …; the other 3 in all_reduce at …``
    )
    majority: str  #: ``all_reduce at train.py:102``
    missing: list[int] = field(default_factory=list)  #: ranks of the job without a dump
    waiting: list[int] = field(default_factory=list)  #: ranks inside a collective, waiting for the initiators


def _label(p: stack.Place) -> str:
    return f"{p.collective} at {p.site or '?'}" if p.collective else p.text()


def where_ranks_stand(rows: pl.DataFrame, ranks: list[int] | None = None) -> StackVerdict | None:
    """The odd one(s) out of the ranks' stack dumps, or None.

    ``rows``: stack rows of the event table (``rank``, ``event_id``, ``raw``; other kinds are ignored);
    ``ranks``: every rank of the job when known (those without a dump are reported in ``missing``).
    A rank with several dumps counts by the place most of them show (the last one on a tie).

    - Some ranks are inside a collective and fewer ranks are in none: those are what the others wait for
      (``straggler_hang``).
    - Every rank is inside a collective, and a strict majority of at least three stands at one
      (collective, call site): the ranks elsewhere ran another collective (``collective_mismatch``).
    - Otherwise (no majority, most ranks outside any collective, fewer than two ranks): None.
    """
    rows = rows.filter((pl.col("kind") == Kind.STACK_DUMP) & pl.col("rank").is_not_null()).sort("event_id")
    per: dict[int, list[tuple[stack.Place, int]]] = {}
    for r, ev, raw in rows.select("rank", "event_id", "raw").iter_rows():
        p = stack.place(raw or "")
        if p is not None:
            per.setdefault(int(r), []).append((p, int(ev)))
    if len(per) < 2:
        return None
    place: dict[int, stack.Place] = {}
    eid: dict[int, int] = {}
    for r, got in per.items():
        counts = Counter(p.key for p, _ in got)
        best = max(counts.values())
        p, e = next((p, e) for p, e in reversed(got) if counts[p.key] == best)
        place[r], eid[r] = p, e
    missing = sorted(set(ranks or []) - set(place))
    inside = {r for r, p in place.items() if p.collective}
    outside = sorted(set(place) - inside)
    if inside and outside and len(outside) < len(inside):
        odd, kind = outside, "straggler_hang"
    elif not outside:
        keys = Counter(place[r].key for r in inside)
        (top, ntop), *_ = keys.most_common()
        if len(keys) < 2 or len(place) < 3 or 2 * ntop <= len(place):
            return None
        odd, kind = sorted(r for r in inside if place[r].key != top), "collective_mismatch"
    else:
        return None
    rest = sorted(set(place) - set(odd))
    groups = Counter(_label(place[r]) for r in rest)
    majority = groups.most_common(1)[0][0]
    where_rest = "; ".join(
        f"{'the other ' if len(groups) == 1 else ''}{n if n > 1 else 'rank ' + str(next(r for r in rest if _label(place[r]) == g))}"
        f" in {g}"
        for g, n in groups.most_common()
    )
    said = "; ".join(f"rank {r} is {place[r].text()}" for r in odd)
    text = f"{said}; {where_rest}"
    ev = [eid[r] for r in odd] + [eid[r] for r in rest][: max(0, 8 - len(odd))]
    waiting = [r for r in rest if place[r].collective]
    return StackVerdict(odd, kind, {r: eid[r] for r in odd}, ev, text, majority, missing, waiting)


def _seconds(d: dt.timedelta) -> float:
    return d.total_seconds()


def stalled(t: pl.DataFrame) -> tuple[bool | None, str]:
    """Did every rank stop advancing well before the logs end? ``(True, why)``: yes; ``(False, why)``: some
    rank logged progress until the end (a running job); ``(None, "")``: the logs hold no progress lines or no
    stamps to tell. ``t``: rows with ``rank``, ``kind``, ``ts`` (or the corrected ``tc``)."""
    tcol = "tc" if "tc" in t.columns else "ts"
    stamped = t.filter(pl.col(tcol).is_not_null())
    prog = stamped.filter((pl.col("kind") == Kind.STEP_PROGRESS) & pl.col("rank").is_not_null())
    if not prog.height or not stamped.height:
        return None, ""
    end = stamped[tcol].max()
    last = prog.group_by("rank").agg(pl.col(tcol).max().alias("last"), pl.col("step").max().alias("step"))
    gaps = prog.sort("rank", tcol).with_columns(pl.col(tcol).diff().over("rank").alias("d"))["d"].drop_nulls()
    usual = _seconds(gaps.median()) if gaps.len() else 0.0  # type: ignore[arg-type]
    quiet = min(_seconds(end - v) for v in last["last"].to_list())  # type: ignore[operator]
    need = max(STALL_MIN_S, STALL_STEPS * usual)
    steps = sorted({s for s in last["step"].to_list() if s is not None})
    at = f" at step {steps[0]}" if len(steps) == 1 else ""
    if quiet >= need:
        return (
            True,
            f"every rank stopped advancing{at}, {quiet:.0f} s before the logs end (steps took {usual:.2f} s)",
        )
    return False, f"the ranks advanced until {quiet:.1f} s before the logs end"


#: Signals that stop a job on purpose (a scheduler's or a user's ``kill``, Ctrl-C). SIGHUP is not one: a
#: terminal that went away under a ``nohup``-less launcher is the launcher's failure (real-moss-237).
STOP_SIGNALS = ("15", "2", "SIGTERM", "SIGINT", "Signals.SIGTERM", "Signals.SIGINT")


def external_stop(f: pl.DataFrame, fr: pl.DataFrame, t: pl.DataFrame) -> tuple[str, str] | None:
    """A job stopped from outside: ``(failure_kind, sentence)`` or None.

    ``f``: the attempt's fault rows; ``fr``: those with a rank; ``t``: its rows. It applies when the launcher's
    only fault is its agent receiving a stop signal (``Received 15 death signal, shutting down workers``: a
    ``job_cancelled`` row of the elastic layer with ``signal`` 15 or 2), plus its own consequences (the
    workers it SIGTERMed, its ``SignalException`` traceback), and no rank reported a fault of its own."""
    stop = f.filter((pl.col("kind") == Kind.JOB_CANCELLED) & (pl.col("layer") == "elastic"))
    if not stop.height or not stop["signal"].is_in(list(STOP_SIGNALS)).all():
        return None
    other = f.filter(
        pl.col("kind").is_in([Kind.LAUNCHER_ERROR, Kind.STORE_ERROR])
        | ((pl.col("kind") == Kind.JOB_CANCELLED) & (pl.col("layer") != "elastic"))
    )
    own = fr.filter(pl.col("kind") != Kind.WORKER_SIGNALLED)
    if other.height or own.height:
        return None
    sig = str(stop["signal"][0])
    name = {"15": "SIGTERM", "2": "SIGINT"}.get(sig, sig.removeprefix("Signals."))
    is_stalled, why = stalled(t)
    if is_stalled:
        return (
            "unknown",
            (
                f"The job was stopped from outside (the launcher received {name}) after it had hung: {why}; no "
                "rank logged an error, and nothing in these logs says which rank it waited for (a stack dump of "
                "every rank would: py-spy dump --pid)."
            ),
        )
    return (
        "none",
        f"No failure found: the job was stopped from outside (the launcher received {name}) while it ran"
        + (f"; {why}" if why else "")
        + ".",
    )


def assign_ranks(df: pl.DataFrame) -> pl.DataFrame:
    """Give stack dumps without a rank the rank their command line states (``RANK=3``; ``--local_rank=3`` gives
    the local rank), else the rank of their pid (``rank_source`` ``pid``): from rows that state
    both (a launcher's ``failed … (pid: P)`` once placed, NCCL lines) and, for a torchrun agent that
    signalled every worker (``Sending process P closing signal SIGTERM``, printed in local-rank order:
    ``SubprocessContext._close`` walks its handlers by local rank), the i-th pid of that block as local rank
    i of a single-agent job. Other rows are left as they are."""
    dump = pl.col("kind") == Kind.STACK_DUMP
    if "rank_stated" in df.columns:  # ``RANK=3`` in the dump's command line (parsers.stack.PYSPY_PROCESS)
        stated = dump & pl.col("rank").is_null() & pl.col("rank_stated").is_not_null()
        df = df.with_columns(
            pl.when(stated).then(pl.col("rank_stated")).otherwise(pl.col("rank")).alias("rank"),
            pl.when(stated).then(pl.lit("message")).otherwise(pl.col("rank_source")).alias("rank_source"),
        )
    if "local_rank_stated" in df.columns:  # ``--local_rank=3`` (DeepSpeed, torch.distributed.launch)
        df = df.with_columns(
            pl.when(dump & pl.col("local_rank").is_null())
            .then(pl.col("local_rank_stated"))
            .otherwise(pl.col("local_rank"))
            .alias("local_rank")
        )
    todo = dump & pl.col("rank").is_null() & pl.col("pid").is_not_null()
    if not df.select(todo.any()).item():
        return df
    known = (
        df.filter(pl.col("pid").is_not_null() & pl.col("rank").is_not_null())
        .group_by("pid")
        .agg(pl.col("rank").unique())
    )
    pid_rank: dict[int, int] = {p: rs[0] for p, rs in known.iter_rows() if len(rs) == 1}
    how: dict[int, str] = dict.fromkeys(pid_rank, "pid")
    sig = df.filter(
        (pl.col("kind") == Kind.WORKER_SIGNALLED)
        & pl.col("pid").is_not_null()
        & (pl.col("layer") == "elastic")
    )
    agents = sig["path"].unique().to_list()
    nodes = df.filter(pl.col("local_rank").is_not_null())["local_rank"].n_unique()
    world = df.filter(pl.col("rank").is_not_null())["rank"].n_unique()
    if len(agents) == 1 and nodes == world:
        pids = list(dict.fromkeys(sig.sort("line")["pid"].to_list()))
        if len(pids) == world:
            for i, p in enumerate(pids):
                if p not in pid_rank:
                    pid_rank[p], how[p] = i, "launcher"
    if not pid_rank:
        return df
    by = pl.col("pid").replace_strict(pid_rank, default=None, return_dtype=pl.Int32)
    src = pl.col("pid").replace_strict(how, default=None, return_dtype=pl.String)
    hit = todo & by.is_not_null()
    return df.with_columns(
        pl.when(hit).then(by).otherwise(pl.col("rank")).alias("rank"),
        pl.when(hit).then(src).otherwise(pl.col("rank_source")).alias("rank_source"),
    )
