"""Chrome trace-event JSON of a failed job, for ui.perfetto.dev (or chrome://tracing).

One process per host (per host and attempt when the job restarted), one thread per rank, plus a
``launcher / no rank`` thread for lines no rank owns. Every event (blank lines excepted) is an instant
(``ph: "i"``); collectives whose start and end are known are slices (``ph: "X"``; Flight Recorder entries
with a known completion time too): a watchdog timeout
(end = its stamp, start = end - ``elapsed_ms``), a gloo timeout (``timeout_ms``), and the time between
consecutive collective entries of the same process group (DETAIL fingerprints, NCCL opCounts). The
initiating event(s) of the diagnosis (``Diagnosis.initiating_events``) are named ``INITIATING …``, carry
the category ``initiating`` and ``args.initiating = true``, at the time the diagnosis states for them. Every
instant drawn from a row has ``args.event_id``, its row of the event table.

Times are microseconds since the Unix epoch (ints), corrected per host by the clock offsets of
:func:`correlator.clock.shown_times`, the time the report states. Rows without a stamp take the stamp of
the nearest stamped row of the same file (``args.ts_inferred``); when the rows carry fewer than two distinct
stamps the trace runs in event order, 1 ms per event (and timeouts are not drawn as slices).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl

from correlator import clock
from correlator.schema import EFFECT_KINDS, FAULT_KINDS, Kind
from correlator.verdict import Basis, Diagnosis

#: Kinds that say where a rank is in its collective sequence (entries, not faults).
PROGRESS_KINDS = frozenset({Kind.COLLECTIVE_FINGERPRINT, Kind.NCCL_COLL, Kind.STEP_PROGRESS})
#: Kinds that carry no information worth a mark.
SKIP_KINDS = frozenset({Kind.BLANK})
NO_RANK_TID = 0
_CAUSE_KINDS = [
    Kind.PYTHON_EXCEPTION,
    Kind.CUDA_OOM,
    Kind.CUDA_ERROR,
    Kind.PROCESS_KILLED,
    Kind.DDP_ERROR,
    Kind.COLLECTIVE_MISMATCH,
]
UNKNOWN_HOST = "unknown host"


def category(kind: str) -> str:
    """Coarse category of an event kind: cause | effect | launcher | progress | log."""
    if kind in (
        "python_exception",
        "cuda_oom",
        "cuda_error",
        "process_killed",
        "ddp_error",
        "collective_mismatch",
    ):
        return "cause"
    if kind in (
        "worker_failed",
        "worker_signalled",
        "failure_entry",
        "root_cause_entry",
        "error_file",
        "launcher_error",
        "process_exit",
        "job_cancelled",
        "restart",
        "rendezvous",
    ):
        return "launcher"
    if kind in EFFECT_KINDS or kind in FAULT_KINDS or kind in ("nccl_peer_closed", "nccl_abort"):
        return "effect"
    if kind in PROGRESS_KINDS:
        return "progress"
    return "log"


def initiating_event_ids(table: pl.DataFrame, diagnosis: Diagnosis) -> list[int]:
    """Event ids of the diagnosis' initiating event(s): the rows it names in ``diagnosis.initiating_events``
    (each an evidence row's ``event_id``, so no matching back by path and line).

    Fallback, only for an initiating rank the diagnosis quotes no line of (another rank or the launcher
    reported its fault, or the evidence holds the last sign of life of its first three ranks only): that
    rank's first cause (exception, OOM, CUDA error …), else, when it was found by its silence, its last
    progress line, else its first fault of its ``first_fault_kind``. The diagnosis states no time for such
    a row; it is drawn at its own (:func:`prepare`)."""
    t = table.filter(~pl.col("duplicate"))
    named = [e.event_id for e in diagnosis.initiating_events if e.rank in diagnosis.initiating_ranks]
    present = set(t.filter(pl.col("event_id").is_in(named))["event_id"].to_list())
    ids = [i for i in named if i in present]
    have = set(t.filter(pl.col("event_id").is_in(ids))["rank"].drop_nulls().to_list())
    status = {s.rank: s for s in diagnosis.per_rank}
    for r in diagnosis.initiating_ranks:
        if r in have:
            continue
        rows = t.filter(
            (pl.col("rank") == r)
            & (pl.col("attempt") == diagnosis.attempt)
            & pl.col("kind").is_in(list(FAULT_KINDS))
        )
        s = status.get(r)
        causes = rows.filter(pl.col("kind").is_in(_CAUSE_KINDS))
        own = t.filter(
            (pl.col("rank") == r) & (pl.col("attempt") == diagnosis.attempt) & (pl.col("kind") != Kind.BLANK)
        )
        alive = own.filter(pl.col("kind").is_in(list(PROGRESS_KINDS)))
        if alive.height == 0:
            alive = own.filter(~pl.col("kind").is_in(list(FAULT_KINDS)) & (pl.col("layer") != "elastic"))
        if causes.height:
            rows = causes
        elif alive.height and diagnosis.initiator_basis and diagnosis.initiator_basis != Basis.FIRST_FAULT:
            # Found by its silence: its last sign of life is the event to look at.
            ids.append(int(alive.sort("ts", "event_id", nulls_last=True)["event_id"][-1]))
            continue
        elif (
            s is not None and s.first_fault_kind and rows.filter(pl.col("kind") == s.first_fault_kind).height
        ):
            rows = rows.filter(pl.col("kind") == s.first_fault_kind)
        if rows.height:
            ids.append(int(rows.sort("ts", "event_id", nulls_last=True)["event_id"][0]))
    return list(dict.fromkeys(ids))


def prepare(table: pl.DataFrame, diagnosis: Diagnosis | None = None) -> tuple[pl.DataFrame, str]:
    """The non-duplicate rows with ``host_label``, ``tc`` (µs since the epoch, never null) and
    ``ts_inferred``, and the name of the time base (``time`` or ``event order``).

    ``tc`` is :func:`correlator.clock.shown_times`, the time the report states: a row without a stamp takes
    the stamp of the nearest stamped row of its file (``ts_inferred``); in a file with no stamp at all, the
    fault rows sit at the first initiating event's time (with a ``diagnosis`` that states one), the others
    at the first moment of the job. With a ``diagnosis``, its initiating events (``diagnosis.initiating_events``)
    sit at exactly the time it states for them (the same value when it was diagnosed from this table)."""
    times, base = clock.shown_times(table)
    # The same rows as shown_times, in the same order (SKIP_KINDS: the blank lines it leaves out too).
    t = table.filter(~pl.col("duplicate") & ~pl.col("kind").is_in(list(SKIP_KINDS)))
    t = t.with_columns(
        times["tc"].dt.epoch("us").alias("tc"),
        pl.when(pl.col("host").is_null() | (pl.col("host") == ""))
        .then(pl.lit(UNKNOWN_HOST))
        .otherwise(pl.col("host"))
        .alias("host_label"),
        pl.col("ts").is_null().alias("ts_inferred"),
    )
    if base != "time":
        # Fewer than two distinct stamps: copying them would put every event at the same moment. A third of
        # the rows stamped is still a time axis (the others take the stamp above them in their file).
        t = t.sort("event_id").with_columns((pl.int_range(pl.len()) * 1000).cast(pl.Int64).alias("tc"))
        return t, "event order"
    stated = {
        e.event_id: _epoch_us(e.ts)
        for e in (diagnosis.initiating_events if diagnosis is not None else [])
        if e.event_id is not None and e.ts is not None
    }
    if stated:
        t = t.with_columns(
            pl.col("event_id").replace_strict(stated, default=pl.col("tc"), return_dtype=pl.Int64).alias("tc")
        )
    # A file with no stamp at all: its errors happened by the failure at the latest they can be shown at,
    # so they sit at the first initiating event's time (never before the event that caused them: cap-12's
    # unstamped stderr tracebacks were drawn 3 s before it); its other lines at the first moment of the job.
    start = t["tc"].min()
    failed_at = min(stated.values()) if stated else None
    unplaced_fault = pl.col("kind").is_in(list(FAULT_KINDS)) & pl.col("tc").is_null()
    t = t.with_columns(
        pl.when(unplaced_fault & pl.lit(failed_at is not None))
        .then(pl.lit(failed_at if failed_at is not None else 0, dtype=pl.Int64))
        .otherwise(pl.col("tc").fill_null(start))
        .alias("tc")
    )
    return t.sort("tc", "event_id"), "time"


def _epoch_us(iso: str) -> int:
    """Microseconds since the Unix epoch of an ISO 8601 time as :class:`Diagnosis` writes it (exact)."""
    d = dt.datetime.fromisoformat(iso)
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.UTC)
    return (d - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)


def _thread_name(rank: int | None, local_rank: int | None) -> str:
    if rank is None:
        return "launcher / no rank"
    return f"rank {rank}" + (f" (local {local_rank})" if local_rank is not None else "")


def to_trace(table: pl.DataFrame, diagnosis: Diagnosis) -> dict[str, Any]:
    """The trace as a dict (``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``)."""
    t, base = prepare(table, diagnosis)
    init_ids = set(initiating_event_ids(table, diagnosis))
    multi = t["attempt"].n_unique() > 1 if t.height else False
    pid_of, events = _tracks(t, multi)
    t, coll_events = _aggregate_coll(t, base, init_ids, pid_of)
    events.extend(e for e in coll_events if e["ph"] == "C")
    slices: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in coll_events:
        if e["ph"] == "X":
            slices.setdefault((e["pid"], e["tid"]), []).append(e)
    focus = diagnosis.focus or {}
    for r in t.select(_ROW_COLUMNS).iter_rows(named=True):
        pid = pid_of[(r["attempt"], r["host_label"])]
        tid = NO_RANK_TID if r["rank"] is None else int(r["rank"]) + 1
        instant, in_focus = _instant(r, pid, tid, r["event_id"] in init_ids, focus)
        events.append(instant)
        timed_out = _timed_out_slice(r, pid, tid, in_focus) if base == "time" else None
        if timed_out is not None:
            slices.setdefault((pid, tid), []).append(timed_out)
    if base == "time":
        for key, sl in [*_entry_slices(t, pid_of), *_fr_slices(t, pid_of)]:
            slices.setdefault(key, []).append(sl)
    for lst in slices.values():
        events.extend(_no_partial_overlap(lst))
    events.extend(_unlogged_initiators(t, diagnosis, init_ids, pid_of, multi))
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": _other_data(diagnosis, base)}


#: The columns of a row that its instant event and its timed-out slice read.
_ROW_COLUMNS = [
    "event_id",
    "attempt",
    "host_label",
    "rank",
    "kind",
    "tc",
    "ts_inferred",
    "path",
    "line",
    "pg",
    "seq",
    "op",
    "elapsed_ms",
    "timeout_ms",
    "exc_type",
    "exit_code",
    "signal",
    "peer_rank",
    "message",
    "severity",
]


def _tracks(t: pl.DataFrame, multi: bool) -> tuple[dict[tuple[int, str], int], list[dict[str, Any]]]:
    """The tracks: pids one per (attempt, host), hosts in order of their lowest rank; tids rank + 1 (0 = no
    rank). Returns the pid of each (attempt, host) and their metadata events (names, sort order)."""
    keys = (
        t.group_by("attempt", "host_label")
        .agg(pl.col("rank").min().alias("r0"))
        .sort("attempt", pl.col("host_label") == UNKNOWN_HOST, "r0", "host_label", nulls_last=True)
    )
    pid_of: dict[tuple[int, str], int] = {}
    events: list[dict[str, Any]] = []
    for i, (att, host, _r0) in enumerate(keys.iter_rows()):
        pid = i + 1
        pid_of[(att, host)] = pid
        name = f"{host} (attempt {att})" if multi else host
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        events.append(
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": i}}
        )
    threads = t.group_by("attempt", "host_label", "rank").agg(
        pl.col("local_rank").drop_nulls().mode().first().alias("lr")
    )
    for att, host, rank, lr in threads.iter_rows():
        pid = pid_of[(att, host)]
        tid = NO_RANK_TID if rank is None else int(rank) + 1
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": tid,
                "args": {"name": _thread_name(rank, lr)},
            }
        )
        events.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": pid,
                "tid": tid,
                "args": {"sort_index": -1 if rank is None else int(rank)},
            }
        )
    return pid_of, events


def _instant(
    r: dict[str, Any], pid: int, tid: int, initiating: bool, focus: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """A row's instant event (its label, category and args), and whether it is in the focus collective."""
    kind = r["kind"]
    cat = category(kind)
    label = kind
    if r["exc_type"]:
        label = f"{kind}: {r['exc_type']}"
    elif r["op"] and r["seq"] is not None:
        label = f"{kind}: {r['op']} #{r['seq']}"
    elif r["exit_code"] is not None:
        label = f"{kind}: exit {r['exit_code']}" + (f" ({r['signal']})" if r["signal"] else "")
    args: dict[str, Any] = {
        "kind": kind,
        "event_id": r["event_id"],
        "where": f"{r['path']}:{r['line']}",
        "message": (r["message"] or "")[:500],
    }
    for k in ("pg", "seq", "op", "peer_rank", "exit_code", "signal", "elapsed_ms", "timeout_ms"):
        if r[k] is not None:
            args[k] = r[k]
    if r["ts_inferred"]:
        args["ts_inferred"] = True
    in_focus = (
        focus.get("seq") is not None
        and r["seq"] == focus.get("seq")
        and (r["pg"] or "0") == str(focus.get("pg") or "0")
    )
    if in_focus:
        args["focus"] = True
    if initiating:
        args["initiating"] = True
        label = f"INITIATING {label}"
        cat = f"initiating,{cat}"
    event = {
        "ph": "i",
        "s": "t",
        "name": label,
        "cat": cat,
        "ts": int(r["tc"]),
        "pid": pid,
        "tid": tid,
        "args": args,
    }
    return event, in_focus


def _timed_out_slice(r: dict[str, Any], pid: int, tid: int, in_focus: bool) -> dict[str, Any] | None:
    """The slice of a collective that timed out (start = stamp - elapsed), for a ranked watchdog or gloo
    timeout row with a duration; else None."""
    kind = r["kind"]
    dur_ms = (
        r["elapsed_ms"]
        if kind == Kind.WATCHDOG_TIMEOUT
        else (r["timeout_ms"] if kind == Kind.GLOO_TIMEOUT else None)
    )
    if dur_ms is None or dur_ms <= 0 or r["rank"] is None:
        return None
    name = f"{r['op'] or 'collective'}" + (f" #{r['seq']}" if r["seq"] is not None else "") + " (timed out)"
    return {
        "ph": "X",
        "name": name,
        "cat": "collective,timeout" + (",focus" if in_focus else ""),
        "ts": int(r["tc"]) - int(dur_ms) * 1000,
        "dur": int(dur_ms) * 1000,
        "pid": pid,
        "tid": tid,
        "args": {
            "pg": r["pg"] or "0",
            "seq": r["seq"],
            "op": r["op"],
            "elapsed_ms": int(dur_ms),
            "where": f"{r['path']}:{r['line']}",
            "strong": True,
        },
    }


def _entry_slices(
    t: pl.DataFrame, pid_of: dict[tuple[int, str], int]
) -> list[tuple[tuple[int, int], dict[str, Any]]]:
    """Consecutive collective entries of one rank on one process group: entered N .. entered N+1, each with
    its track (pid, tid)."""
    ent = t.filter(
        pl.col("kind").is_in([Kind.COLLECTIVE_FINGERPRINT, Kind.NCCL_COLL])
        & pl.col("seq").is_not_null()
        & pl.col("rank").is_not_null()
        & ~pl.col("ts_inferred")
    )
    if not ent.height:
        return []
    ent = ent.with_columns(
        pl.when(pl.col("kind") == Kind.NCCL_COLL)
        .then(pl.lit("nccl:") + pl.coalesce("pg", pl.lit("?")))
        .otherwise(pl.coalesce("pg", pl.lit("0")))
        .alias("pgk")
    )
    ent = ent.sort("tc", "event_id").with_columns(
        pl.col("tc").shift(-1).over("attempt", "rank", "pgk").alias("tc_next"),
        pl.col("seq").shift(-1).over("attempt", "rank", "pgk").alias("seq_next"),
    )
    out: list[tuple[tuple[int, int], dict[str, Any]]] = []
    for r in ent.filter(pl.col("tc_next").is_not_null() & (pl.col("seq_next") > pl.col("seq"))).iter_rows(
        named=True
    ):
        pid = pid_of[(r["attempt"], r["host_label"])]
        tid = int(r["rank"]) + 1
        out.append(
            (
                (pid, tid),
                {
                    "ph": "X",
                    "name": f"{r['op'] or 'collective'} #{r['seq']}",
                    "cat": "collective",
                    "ts": int(r["tc"]),
                    "dur": int(r["tc_next"] - r["tc"]),
                    "pid": pid,
                    "tid": tid,
                    "args": {
                        "pg": r["pgk"],
                        "seq": r["seq"],
                        "op": r["op"],
                        "where": f"{r['path']}:{r['line']}",
                        "note": "from entering this collective to entering the next on the same group",
                    },
                },
            )
        )
    return out


def _fr_slices(
    t: pl.DataFrame, pid_of: dict[tuple[int, str], int]
) -> list[tuple[tuple[int, int], dict[str, Any]]]:
    """Flight Recorder entries whose end is known (NCCL: time_discovered_completed_ns): created ..
    completed, each with its track (pid, tid)."""
    fre = t.filter(
        (pl.col("kind") == Kind.FR_COLLECTIVE)
        & pl.col("ts_end").is_not_null()
        & pl.col("rank").is_not_null()
        & pl.col("ts").is_not_null()
    )
    fre = fre.with_columns((pl.col("ts_end") - pl.col("ts")).dt.total_microseconds().alias("__dur"))
    out: list[tuple[tuple[int, int], dict[str, Any]]] = []
    for r in fre.filter(pl.col("__dur") >= 0).iter_rows(named=True):
        pid, tid = pid_of[(r["attempt"], r["host_label"])], int(r["rank"]) + 1
        args = {
            "pg": r["pg"] or "0",
            "seq": r["seq"],
            "op": r["op"],
            "state": r["state"],
            "where": f"{r['path']}:{r['line']}",
            "record_id": r["record_id"],
        }
        name = f"FR {r['op'] or 'collective'} #{r['seq']}"
        out.append(
            (
                (pid, tid),
                {
                    "ph": "X",
                    "name": name,
                    "cat": "collective,flight_recorder",
                    "ts": int(r["tc"]),
                    "dur": int(r["__dur"]),
                    "pid": pid,
                    "tid": tid,
                    "args": args,
                },
            )
        )
    return out


def _unlogged_initiators(
    t: pl.DataFrame,
    diagnosis: Diagnosis,
    init_ids: set[int],
    pid_of: dict[tuple[int, str], int],
    multi: bool,
) -> list[dict[str, Any]]:
    """An initiating rank with no line of its own (it left no log): a marker on its own track, at the moment
    the other ranks' trouble began (its track named, added where missing). Adds to ``pid_of``."""
    events: list[dict[str, Any]] = []
    flagged = set(t.filter(pl.col("event_id").is_in(list(init_ids)))["rank"].drop_nulls().to_list())
    att_rows = t.filter(pl.col("attempt") == diagnosis.attempt)
    for rk in diagnosis.initiating_ranks:
        if rk in flagged or att_rows.height == 0:
            continue
        mine = att_rows.filter(pl.col("rank") == rk)
        host = mine["host_label"][0] if mine.height else UNKNOWN_HOST
        key = (diagnosis.attempt, host)
        if key not in pid_of:
            pid_of[key] = len(pid_of) + 1
            name = f"{host} (attempt {diagnosis.attempt})" if multi else host
            events.append(
                {"ph": "M", "name": "process_name", "pid": pid_of[key], "tid": 0, "args": {"name": name}}
            )
        pid = pid_of[key]
        if not mine.height:
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pid,
                    "tid": rk + 1,
                    "args": {"name": f"rank {rk} (no log)"},
                }
            )
        faults = att_rows.filter(pl.col("kind").is_in(list(FAULT_KINDS)))
        when = int((faults if faults.height else att_rows)["tc"].min())  # type: ignore[arg-type]
        events.append(
            {
                "ph": "i",
                "s": "t",
                "name": f"INITIATING rank {rk}: {diagnosis.initiator_basis or 'initiating'}",
                "cat": "initiating,cause",
                "ts": when,
                "pid": pid,
                "tid": rk + 1,
                "args": {
                    "initiating": True,
                    "synthetic": True,
                    "rank": rk,
                    "note": "this rank wrote no line that shows the fault; placed at the first fault of the others",
                },
            }
        )
    return events


def _other_data(diagnosis: Diagnosis, base: str) -> dict[str, Any]:
    """The trace's ``otherData``: the generator, the time base and the verdict in short."""
    return {
        "generator": "rankscope",
        "time_base": "corrected wall time, µs since the Unix epoch"
        if base == "time"
        else "event order (the logs carry no timestamps): 1 ms per event",
        "summary": diagnosis.summary,
        "failure_kind": diagnosis.failure_kind,
        "initiating_ranks": diagnosis.initiating_ranks,
        "collateral_ranks": diagnosis.collateral_ranks,
        "attempt": diagnosis.attempt,
    }


#: NCCL COLL lines shown one by one (instant + entry-to-entry slice): the last this many per rank and
#: communicator (where a hang or a crash is); earlier ones are aggregated (:func:`_aggregate_coll`).
COLL_DETAIL = 32
#: Earlier NCCL COLL lines: one slice (and one opCount counter sample) per this many of a rank and communicator.
COLL_CHUNK = 500


def _aggregate_coll(
    t: pl.DataFrame, base: str, init_ids: set[int], pid_of: dict[tuple[int, str], int]
) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """NCCL COLL lines are 90 %+ of an ``NCCL_DEBUG=INFO`` log: all but the last :data:`COLL_DETAIL` per
    (attempt, rank, communicator) become one ``X`` slice per :data:`COLL_CHUNK` lines ("500 collectives
    #a-#b", from entering the first to entering the next chunk's first) plus an opCount counter sample
    (``C``) per chunk; a 64-rank job's trace stays small enough for the UI. Returns ``t`` without the
    aggregated rows, and the events made. Initiating lines are never aggregated."""
    if base != "time" or t.height == 0:
        return t, []
    keys = ["attempt", "rank", "pgk"]
    is_c = (
        (pl.col("kind") == Kind.NCCL_COLL)
        & pl.col("rank").is_not_null()
        & pl.col("seq").is_not_null()
        & ~pl.col("ts_inferred")
    )
    if not t.select(is_c.any()).item():
        return t, []
    t = t.with_columns(pl.when(is_c).then(pl.lit("nccl:") + pl.coalesce("pg", pl.lit("?"))).alias("pgk"))
    idx = pl.int_range(pl.len()).over(keys)
    bulk = (
        is_c & (pl.len().over(keys) - idx > COLL_DETAIL) & ~pl.col("event_id").is_in(list(init_ids))
    ).fill_null(False)
    t = t.with_columns(bulk.alias("__bulk"), idx.alias("__i"))
    agg = (
        t.filter(pl.col("__bulk"))
        .with_columns((pl.col("__i") // COLL_CHUNK).alias("__chunk"))
        .group_by([*keys, "host_label", "__chunk"], maintain_order=True)
        .agg(
            pl.col("tc").first().alias("t0"),
            pl.col("tc").last().alias("t1"),
            pl.len().alias("n"),
            pl.col("seq").first().alias("s0"),
            pl.col("seq").last().alias("s1"),
            pl.col("op").unique().sort().alias("ops"),
            pl.col("path").first(),
            pl.col("line").first(),
        )
        .sort([*keys, "__chunk"])
        .with_columns(pl.col("t0").shift(-1).over(keys).fill_null(pl.col("t1")).alias("t_next"))
    )
    events: list[dict[str, Any]] = []
    for r in agg.iter_rows(named=True):
        pid = pid_of[(r["attempt"], r["host_label"])]
        tid = int(r["rank"]) + 1
        ops = ", ".join(o for o in r["ops"] if o)
        events.append(
            {
                "ph": "X",
                "name": f"{r['n']} collectives #{r['s0']}-#{r['s1']}",
                "cat": "collective,aggregated",
                "ts": int(r["t0"]),
                "dur": max(0, int(r["t_next"] - r["t0"])),
                "pid": pid,
                "tid": tid,
                "args": {
                    "pg": r["pgk"],
                    "count": r["n"],
                    "first_seq": r["s0"],
                    "last_seq": r["s1"],
                    "ops": ops,
                    "where": f"{r['path']}:{r['line']}",
                    "note": f"NCCL COLL lines aggregated by {COLL_CHUNK}; the last {COLL_DETAIL} are shown one by one",
                },
            }
        )
        events.append(
            {
                "ph": "C",
                "name": f"rank {r['rank']} opCount",
                "ts": int(r["t0"]),
                "pid": pid,
                "tid": tid,
                "args": {r["pgk"]: r["s1"]},
            }
        )
    return t.filter(~pl.col("__bulk")).drop("__bulk", "__i", "pgk"), events


def _no_partial_overlap(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Slices of one thread must nest or be disjoint; a timeout slice wins over an entry-to-entry slice."""
    slices.sort(key=lambda s: (s["ts"], -s["dur"]))
    out: list[dict[str, Any]] = []
    stack: list[dict[str, Any]] = []
    for s in slices:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= s["ts"]:
            stack.pop()
        while stack and s["ts"] + s["dur"] > stack[-1]["ts"] + stack[-1]["dur"]:
            top = stack[-1]
            if top["args"].get("strong") and not s["args"].get("strong"):
                end = s["ts"] + s["dur"]
                s = {**s, "ts": top["ts"] + top["dur"]}
                s["dur"] = max(0, end - s["ts"])
            else:
                top["dur"] = max(0, s["ts"] - top["ts"])
            stack.pop()
        out.append(s)
        stack.append(s)
    for s in out:
        s["args"].pop("strong", None)
    return out


def write_trace(table: pl.DataFrame, diagnosis: Diagnosis, path: str | Path) -> None:
    """Write :func:`to_trace` as JSON to ``path``."""
    from correlator.report import json_default

    Path(path).write_text(json.dumps(to_trace(table, diagnosis), default=json_default, ensure_ascii=False))
