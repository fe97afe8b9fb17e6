"""Stack dumps kept apart from the logs (issue #33 item 1): ``open_job(path, stacks=DIR)``,
``diagnose_path(path, stacks=DIR)``, ``load_path(path, stacks=DIR)`` (the CLI's ``--stacks DIR``)."""

from __future__ import annotations

import os

import polars as pl

from correlator.ingest import IngestResult, ingest
from correlator.schema import Kind
from correlator.stacks import assign_ranks


def add_dumps(
    res: IngestResult, stacks_dir: str | os.PathLike[str], *, tz: str | None = None
) -> IngestResult:
    """``res`` with the stack dumps found anywhere under ``stacks_dir`` (``--stacks DIR``: dumps kept apart
    from the logs, e.g. ``py-spy dump --pid P > /scratch/stacks/$(hostname)-P.txt``).

    Every file under ``stacks_dir`` is read as ``ingest`` reads logs (its rows keep the line accounting:
    ``lines_read`` grows by its lines); its rows get the path ``stacks/<relative to stacks_dir>`` and event
    ids after the logs'; the logs' attempt when the logs have one. A dump's rank comes from its file name
    (``rank3.txt``), from its command line (``RANK=3``), or from its pid as the logs state it
    (:func:`assign_ranks`, run again on the joined table). A folder that holds no stack dump is a warning."""
    extra = ingest(stacks_dir, tz=tz)
    t = extra.table
    warnings = [f"stacks/{w}" for w in extra.warnings]
    if not t.filter(pl.col("kind") == Kind.STACK_DUMP).height:
        warnings.append(
            f"{stacks_dir}: --stacks holds no stack dump (py-spy dump, faulthandler) that rankscope reads"
        )
    base = res.table
    start = int(base["event_id"].max() or -1) + 1 if base.height else 0  # type: ignore[arg-type]
    attempts = base["attempt"].drop_nulls().unique().sort() if "attempt" in base.columns else pl.Series([])
    t = t.with_columns(
        (pl.lit("stacks/") + pl.col("path")).alias("path"),
        (pl.col("event_id") + start).alias("event_id"),
    )
    if attempts.len() == 1:
        t = t.with_columns(pl.lit(attempts[0], dtype=base["attempt"].dtype).alias("attempt"))
    joined = assign_ranks(pl.concat([base, t], how="diagonal_relaxed"))
    return IngestResult(
        table=joined.select(base.columns) if set(t.columns) <= set(base.columns) else joined,
        sources=[*res.sources, *extra.sources],
        warnings=[*res.warnings, *warnings],
        lines_read=res.lines_read + extra.lines_read,
        skipped_lines=res.skipped_lines + extra.skipped_lines,
        skipped_by_reason={
            k: res.skipped_by_reason.get(k, 0) + extra.skipped_by_reason.get(k, 0)
            for k in {*res.skipped_by_reason, *extra.skipped_by_reason}
        },
        skipped=[*res.skipped, *extra.skipped],
        coll_lines_dropped=res.coll_lines_dropped,
    )
