"""Flight Recorder dumps into the event table (the ingest half of :mod:`correlator.fr`).

:func:`collect` (called once from ingest): every FR dump found under the input directory (by name and
content, see :func:`parsers.flight_recorder.detect`) and under an extra ``--fr`` directory becomes rows of
the event table (``layer = fr``): one ``fr_collective`` per entry and one ``fr_status`` per (rank, process
group) with the dump's ``pg_status``. The status row is ``fr_waiting`` (a fault kind, an effect) when that
rank was left inside a collective: NCCL's ``pg_status`` says enqueued > completed, or (gloo, whose timed-out
work counts as completed) the rank's last collective of that PG was not entered the same way by every
other dumped rank of the PG. The diagnosis half, :func:`correlator.fr.analyze`, reads these rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from correlator import limits
from correlator.schema import Kind
from parsers import flight_recorder as frp

FR_KINDS = [Kind.FR_COLLECTIVE, Kind.FR_STATUS, Kind.FR_WAITING]
#: Entries before the first disagreement read for the "skipped a collective" pattern.
HISTORY = 256


@dataclass
class Collected:
    """FR rows (not yet conformed, no event_id), the files they came from, and problems met."""

    table: pl.DataFrame
    paths: set[Path] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)


def _walk(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        out.extend(Path(dirpath) / f for f in sorted(filenames))
    return out


def collect(found: list[tuple[Path, str]], extra: str | os.PathLike[str] | None = None) -> Collected:
    """Read the FR dumps ``found`` by discovery ((path, path relative to the input) pairs) and every file
    under ``extra`` (the ``--fr`` directory; its rows get the path ``fr/<relative to extra>``).

    A file under ``extra`` that is not a dump is a warning; a dump that fails to load, to parse or to become
    rows (a crafted pickle, truncated, bad JSON, a field of the wrong type or size, nesting too deep) is a
    warning naming the file and why, never an exception, and is not read as text either; the other dumps
    and the logs are read as if it were not there.
    """
    found = list(found)
    known = {p.resolve() for p, _ in found}
    res = Collected(pl.DataFrame())
    if extra is not None:
        ex = Path(extra)
        if not ex.exists():
            res.warnings.append(
                f"{extra}: --fr directory does not exist; no Flight Recorder dumps read from it"
            )
        for p in _walk(ex) if ex.exists() else []:
            rel = "fr/" + (p.relative_to(ex).as_posix() if ex.is_dir() else p.name)
            if not p.is_file() or p.resolve() in known:  # already found under the log directory
                continue
            if frp.sniff(p) is None:
                res.warnings.append(f"{rel}: not a Flight Recorder dump; skipped")
                continue
            found.append((p, rel))
    dumps: list[frp.Dump] = []
    made: list[list[dict[str, Any]]] = []  # each dump's rows, made inside the guard
    top = limits.current().max_world
    for p, rel in found:
        res.paths.add(p)
        named = frp.rank_from_name(p.name)
        if named is not None and named >= top:  # a rank no job has: not read, said
            told = str(named) if named < 10**12 else f"a number of {len(str(named))} digits"
            res.warnings.append(
                f"{rel}: the rank in the file name is {told}, not below RANKSCOPE_MAX_WORLD ({top}); "
                "not read as a Flight Recorder dump"
            )
            continue
        try:
            d = frp.read(p, rel)
            d_rows = frp.rows(d)
        except frp.FlightRecorderError as e:
            res.warnings.append(str(e).replace(str(p), rel))
            continue
        except (RecursionError, MemoryError) as e:
            res.warnings.append(f"{rel}: not read as a Flight Recorder dump ({_nesting(e)})")
            continue
        except (ValueError, TypeError, OverflowError, KeyError, IndexError, AttributeError, OSError) as e:
            # a bad dump is a warning, never the end of the run (see above)
            res.warnings.append(
                f"{rel}: not read as a Flight Recorder dump ({type(e).__name__}: {str(e)[:120]})"
            )
            continue
        res.warnings.extend(d.warnings)
        dumps.append(d)
        made.append(d_rows)
    seen: dict[int, str] = {}
    for d in dumps:
        if d.rank in seen:
            res.warnings.append(
                f"{d.rel}: a second Flight Recorder dump of rank {d.rank} (also {seen[d.rank]}); "
                "both are read"
            )
        seen.setdefault(d.rank, d.rel)
    res.table = _frame(dumps, made)
    return res


def _nesting(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return "nested too deeply to read"
    return "out of memory reading it"


def with_ids(df: pl.DataFrame) -> pl.DataFrame:
    """FR rows alone (dumps without any text log) as an event table body: sorted, with ``event_id``."""
    return (
        df.sort("path", "line", maintain_order=True)
        .with_row_index("event_id")
        .with_columns(pl.col("event_id").cast(pl.Int64))
    )


def _mark_waiting(r: dict[str, Any], e: frp.Entry, seq: int | None, where: str) -> None:
    """Turn a ``fr_status`` row into ``fr_waiting``: the rank was left inside entry ``e`` (``where`` says
    which seq and why), stamped at the entry's creation."""
    r.update(
        kind=Kind.FR_WAITING,
        severity="warning",
        seq=seq,
        op=frp.op_type(e.name),
        ts=frp._ts(e.time_created_ns),
        ts_quality="exact",
        message=r["message"] + f"; left inside {e.profiling_name} {where}",
    )


def _sig(e: frp.Entry) -> tuple[Any, ...]:
    return (e.name, tuple(map(tuple, e.input_sizes)), tuple(e.input_dtypes))


def _left_inside(dumps: list[frp.Dump]) -> set[tuple[int, str]]:
    """(rank, pg) pairs whose last collective of the PG was not entered the same way by every other
    dumped rank of that PG (gloo's pg_status cannot say it: timed-out work counts as completed)."""
    last: dict[str, dict[int, frp.Entry]] = {}
    for d in dumps:
        for e in d.entries:
            if not e.is_p2p and e.collective_seq_id is not None:
                last.setdefault(e.pg, {})[d.rank] = e
    # Signatures only at the seqs that are some rank's last (a dump holds thousands of entries).
    wanted = {(pg, e.collective_seq_id) for pg, per_rank in last.items() for e in per_rank.values()}
    at: dict[tuple[str, int], dict[int, tuple[Any, ...]]] = {}
    for d in dumps:
        for e in d.entries:
            if not e.is_p2p and e.collective_seq_id is not None and (e.pg, e.collective_seq_id) in wanted:
                at.setdefault((e.pg, e.collective_seq_id), {})[d.rank] = _sig(e)
    out: set[tuple[int, str]] = set()
    for pg, per_rank in last.items():
        ranks = set(per_rank)
        for r, e in per_rank.items():
            others = at.get((pg, e.collective_seq_id or 0), {})
            if set(others) != ranks or len(set(others.values())) > 1:
                out.add((r, pg))
    return out


def _p2p_waiting(dumps: list[frp.Dump]) -> dict[tuple[int, str], tuple[frp.Entry, int]]:
    """(rank, pg) -> (the P2P entry it was left waiting in, the peer that never posted its half)."""
    items = [
        {
            "rank": d.rank,
            "pg": e.pg,
            "profiling": e.profiling_name,
            "ranks": d.pg_ranks.get(e.pg) or [],
            "state": e.state,
            "in_sizes": e.input_sizes,
            "out_sizes": e.output_sizes,
            "entry": e,
        }
        for d in dumps
        for e in d.entries
        if e.is_p2p
    ]
    if not items:
        return {}
    dumped = {d.rank for d in dumps}
    wrapped = {d.rank for d in dumps if min((e.record_id or 0 for e in d.entries), default=0) > 0}
    return {
        (int(w["rank"]), pg): (w["entry"], culprit)
        for pg, _s, _d, w, culprit, _done in p2p_unmatched(items, dumped, wrapped)
    }


def _frame(dumps: list[frp.Dump], made: list[list[dict[str, Any]]]) -> pl.DataFrame:
    """The event-table rows of ``dumps`` (``made``: each one's :func:`parsers.flight_recorder.rows`)."""
    from correlator.schema import POLARS_SCHEMA

    inside = _left_inside(dumps)
    p2p_wait = _p2p_waiting(dumps)
    rows: list[dict[str, Any]] = []
    for d, d_rows in zip(dumps, made, strict=True):
        for r in d_rows:
            w = p2p_wait.get((d.rank, r["pg"])) if r["kind"] == Kind.FR_STATUS else None
            if w is not None and (d.rank, r["pg"]) not in inside:
                e, peer = w
                _mark_waiting(
                    r, e, e.p2p_seq_id, f"p2p seq {e.p2p_seq_id} (rank {peer} never posted its half)"
                )
            if r["kind"] == Kind.FR_STATUS and (d.rank, r["pg"]) in inside:
                last = max(
                    (
                        e
                        for e in d.entries
                        if e.pg == r["pg"] and not e.is_p2p and e.collective_seq_id is not None
                    ),
                    key=lambda e: e.collective_seq_id or 0,
                    default=None,
                )
                if last is not None:
                    _mark_waiting(
                        r,
                        last,
                        last.collective_seq_id,
                        f"seq {last.collective_seq_id} (not entered the same way by every other dumped rank)",
                    )
            rows.append(r)
    schema = {k: v for k, v in POLARS_SCHEMA.items() if k != "event_id"}
    if not rows:
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(rows, schema=schema, strict=False)


# ----------------------------------------------------------------------------------------------- analysis


def p2p_peer(profiling: str, pg_ranks: list[int]) -> tuple[str, int] | None:
    """``nccl:send 0->1`` -> ("send", global rank of PG rank 1); ``nccl:recv 1<-0`` -> ("recv", that of 0).

    ProcessGroupNCCL names P2P entries ``"nccl:send " rank_ "->" dstRank`` / ``"nccl:recv " rank_ "<-"
    srcRank`` with ranks of the PG (torch ``ProcessGroupNCCL.cpp``; the FR analyzer's ``Op`` maps them with
    ``sorted(memberships[pg])[dst]``). Without the PG's ranks they are taken as global (the default PG)."""
    _b, name, meta = frp.op_of(profiling)
    sep = {"send": "->", "recv": "<-"}.get(name)
    if sep is None or not meta or sep not in meta:
        return None
    try:
        peer = int(meta.split(sep, 1)[1])
    except ValueError:
        return None
    ranks = sorted(pg_ranks)
    if ranks:
        if not 0 <= peer < len(ranks):
            return None
        peer = ranks[peer]
    return name, peer


def p2p_unmatched(
    items: list[dict[str, Any]], dumped: set[int], wrapped: set[int]
) -> list[tuple[str, int, int, dict[str, Any], int, list[dict[str, Any]]]]:
    """(pg, src, dst, waiting item, culprit rank, the culprit's matched items) per unmatched channel.

    ``items``: P2P entries in record order per rank, dicts with rank, pg, profiling, ranks (the PG's),
    state, in_sizes, out_sizes (the rule is :func:`_p2p_verdict`'s)."""
    chans: dict[tuple[str, int, int], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for it in items:
        hit = p2p_peer(it["profiling"] or "", it["ranks"])
        if hit is None:
            continue
        name, peer = hit
        me = int(it["rank"])
        key = (str(it["pg"]), me, peer) if name == "send" else (str(it["pg"]), peer, me)
        chans.setdefault(key, ([], []))[0 if name == "send" else 1].append(it)
    out = []
    for (pg, src, dst), (sends, recvs) in chans.items():
        if not {src, dst} <= dumped or {src, dst} & wrapped or src == dst:
            continue
        n = min(len(sends), len(recvs))
        if any(sends[i]["in_sizes"] != recvs[i]["out_sizes"] for i in range(n)):
            continue
        if len(sends) > n:
            waiting, culprit, done = sends[n], dst, recvs
        elif len(recvs) > n:
            waiting, culprit, done = recvs[n], src, sends
        else:
            continue
        if waiting["state"] == "completed":
            continue  # it went through (an eager send): nobody waits in it
        out.append((pg, src, dst, waiting, culprit, done))
    return out
