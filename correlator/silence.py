"""Silence is evidence: the rule that names a rank by what it did *not* say (no error while the others time
out, behind on the collective sequence, no log at all, absent from an excerpt), and why rank 0 in particular
would be the one the others wait for. Called last but one by :mod:`correlator.initiators`.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from correlator import align
from correlator.attempt_evidence import (
    ABORTED,
    PEER_LOSS,
    ROOTED_OPS,
    SUMMARY_KINDS,
    Evidence,
    Finding,
    votes,
)
from correlator.confidence import Reason
from correlator.schema import Kind
from correlator.verdict import Basis, FailureKind


def _prefer_rank0(e: Evidence, cand: list[int], focus: dict[str, Any]) -> tuple[list[int], str | None]:
    """Among several silent or absent candidates, rank 0 when the logs say why (the reason is returned):
    the collective everyone waits in has a root, the untagged (rank-0-only) output stops mid-work, or the
    waiting ranks name rank 0."""
    if len(cand) < 2 or 0 not in cand:
        return cand, None
    why = _rank0_reason(e, focus)
    return ([0], why) if why else (cand, None)


def _rank0_reason(e: Evidence, focus: dict[str, Any]) -> str | None:
    """Why rank 0 in particular would be the one the others wait for, if the logs say so."""
    if (focus.get("op") or "").upper() in ROOTED_OPS:
        return f"rank 0 is the root of the {focus['op']} the others wait in"
    if e.t.filter((pl.col("kind") == Kind.PROGRESS_BAR) & pl.col("rank").is_null()).height:
        return "the untagged output (rank-0-only work, a progress bar) stops mid-work"
    if _untagged_work_before_faults(e):
        return "untagged application lines (rank-0-only logging, by convention) are the last work before the faults"
    if votes(e).get(0):
        return "the waiting ranks name rank 0"
    lost_store = e.effects.filter(pl.col("kind") == Kind.STORE_ERROR)["rank"].n_unique()
    if lost_store >= 2:
        return f"{lost_store} ranks lost the TCPStore, which rank 0 hosts"
    return None


#: Application lines: what a training script prints of its own (not a launcher, NCCL or c10d line).
_APP_WORK = [Kind.UNPARSED, Kind.LOG, Kind.PROGRESS_BAR, Kind.STEP_PROGRESS]


def _untagged_work_before_faults(e: Evidence) -> bool:
    """In a file whose other lines carry rank prefixes, an application line without one, just before the
    first fault of that file: training scripts log on rank 0 only (``if rank == 0: log(…)``; torchtune,
    Hugging Face and Lightning do so by default), so the last untagged line of work is rank 0's
    (pytorch/torchtune#2093: ``Getting full model state dict took 114.73 secs``, then ranks 4-5 time out)."""
    faults = e.fr.filter(pl.col("rank").is_not_null()).select("path", "event_id")
    if not faults.height:
        return False
    first = faults.group_by("path").agg(pl.col("event_id").min().alias("first"))
    work = (
        pl.col("rank").is_null() & pl.col("layer").is_in(["app", "unknown"]) & pl.col("kind").is_in(_APP_WORK)
    )
    # Per file, of the lines before its first fault that are untagged work or carry a rank, the last one must be
    # untagged work (nothing tagged in between): one plan over the table, not a filter per file.
    last = (
        e.t.lazy()
        .select("path", "event_id", "rank", work.alias("work"))
        .join(first.lazy(), on="path")
        .filter((pl.col("event_id") < pl.col("first")) & (pl.col("work") | pl.col("rank").is_not_null()))
        .group_by("path")
        .agg(pl.col("work").sort_by("event_id").last())
        .collect()
    )
    return bool(last["work"].any())


def _silent(e: Evidence, silent: list[int], prog: pl.DataFrame, focus: dict[str, Any]) -> Finding:
    """Of the ranks with no error of their own, the one(s) furthest behind in the group the others wait in;
    an early exit where the launcher accounts for every other worker; a SIGKILL the launcher did not name."""
    cand = silent
    if len(silent) > 1:
        # Compare progress within the group the others wait in; a silent rank with no progress there at all
        # is the furthest behind.
        pg = focus.get("pg") or "0"
        entered = dict(prog.filter(pl.col("pg") == pg).select("rank", "entered").iter_rows())
        if entered:
            low = min(entered.get(r, -1) for r in silent)
            cand = [r for r in silent if entered.get(r, -1) == low]
    found = Finding(
        sorted(cand),
        Basis.SILENT,
        "straggler_hang",
        focus=focus,
        reasons=[Reason.FOUND_BY_SILENCE.note()],
    )
    # Early exit needs the launcher's word on EVERY worker: torchrun's summary lists all that did not exit 0
    # and its agent signals all live ones; this rank was neither. A launcher that names only the first
    # failure (mpirun, mp.spawn, DeepSpeed's return-code line) says nothing about the others.
    # Of several silent ranks, one the launcher accounts for (SIGTERMed: alive at teardown) was waiting too;
    # the one it does not account for had exited 0 before (torch 2.15: rank 3 leaves the loop, rank 1 is
    # SIGTERMed silent, cap-t2150-early-exit-plain-r3).
    reported = e.f.filter(pl.col("kind").is_in([Kind.WORKER_SIGNALLED, *SUMMARY_KINDS]))
    failed = set(e.f.filter(pl.col("kind") == Kind.WORKER_FAILED)["rank"].drop_nulls().to_list())
    accounted = e.signalled | failed | set(reported["rank"].drop_nulls().to_list())
    unaccounted = [r for r in found.initiators if r not in accounted]
    if reported.height and unaccounted:
        found.initiators = unaccounted
        found.failure_kind = FailureKind.EARLY_EXIT
    # A launcher reported a worker killed (SIGKILL) without naming it: the one silent rank is that worker.
    unnamed_kill = e.f.filter(
        pl.col("rank").is_null()
        & pl.col("kind").is_in([Kind.WORKER_FAILED, Kind.PROCESS_EXIT])
        & ((pl.col("exit_code") == -9) | (pl.col("exit_code") == 137))
    )
    if unnamed_kill.height and len(found.initiators) == 1:
        found.failure_kind = "oom_kill"
        found.cause_event = {found.initiators[0]: int(unnamed_kill["event_id"][0])}
        found.reasons.append(Reason.UNNAMED_SIGKILL.note())
    return found


def silence(e: Evidence) -> Finding | None:
    """Silence is evidence: a rank with no error while the others time out, one behind on the collective
    sequence, one that left no log at all, or — in an excerpt whose world size is unknown — the rank absent
    from a block of timeouts. Among several candidates rank 0 is preferred only for a stated reason."""
    effects = e.effects
    if not effects.height:
        return None
    prog = align.progress(e.t)
    # A rank the watchdog took down (SIGABRT) while others time out timed out too, its lines cut: not silent.
    # A launcher line that lists its tasks (srun's ``tasks 0-2: Aborted``) counts once expanded to them
    # (``faults``: rank_source ``srun_task``); a rank it merely inherited is where the line was read.
    aborted = set(
        e.fr.filter(
            (pl.col("role") == "exit")
            & ABORTED
            & (pl.col("ranks_named").is_null() | (pl.col("rank_source") == "srun_task"))
        )["rank"].to_list()
    )
    own = e.own_error_ranks()  # once, not per rank (a polars filter each: 10^5 ranks seen took minutes)
    silent = [r for r in e.seen if r not in own and r not in aborted]
    focus: dict[str, Any] = {}
    waited = effects.filter(pl.col("seq").is_not_null() | pl.col("op").is_not_null()).sort("tc", "event_id")
    if waited.height:
        w = waited.row(0, named=True)
        focus = {"pg": w["pg"] or "0", "seq": w["seq"], "op": w["op"]}
    behind = align.behind(prog)
    behind_ranks = sorted(set(behind["rank"].to_list())) if behind.height else []
    if silent:
        found = _silent(e, silent, prog, focus)
    elif behind_ranks:
        found = Finding(
            behind_ranks,
            Basis.BEHIND,
            "straggler_hang",
            focus=focus,
            reasons=[Reason.LAGGING_SEQ.note()],
        )
    elif e.missing:
        found = Finding(
            e.missing,
            Basis.NO_LOG,
            "straggler_hang",
            focus=focus,
            reasons=[Reason.INITIATOR_LEFT_NO_LOG.note()],
        )
    elif e.absent:
        # Absent ranks of an excerpt are candidates only when few (one missing from a block of timeouts) or when
        # rank 0 has a stated reason; many absent ranks were most likely just cut from the paste.
        why = _rank0_reason(e, focus) if 0 in e.absent else None
        # A lost peer (connection closed, remote process exited) with one rank absent: that rank is the peer.
        lost_peer = len(e.absent) == 1 and effects.filter(pl.col("kind").is_in(PEER_LOSS)).height > 0
        if not why and not lost_peer and len(e.absent) * 3 > len(e.seen):
            return None
        found = Finding(
            e.absent,
            Basis.ABSENT,
            "straggler_hang",
            focus=focus,
            reasons=[Reason.ABSENT_FROM_EXCERPT.note()],
        )
        if why and len(e.absent) == 1:
            found.reasons.append(Reason.RANK0_LIKELY.note(why=why))
    else:
        return None
    chosen, why = _prefer_rank0(e, found.initiators, focus)
    if why:
        found.initiators = chosen
        found.reasons.append(Reason.RANK0_PREFERRED.note(why=why))
    if e.fr.filter(pl.col("kind") == Kind.COLLECTIVE_MISMATCH).height:
        found.failure_kind = "collective_mismatch"
        found.reasons.append(Reason.ODD_RANK_UNDETERMINED.note())
    return found
