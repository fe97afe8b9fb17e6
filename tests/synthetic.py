"""A synthetic event table of a large job (no log files): for plot and trace tests at scale."""

from __future__ import annotations

import datetime as dt

import polars as pl

from correlator.schema import conform


def synthetic_table(
    n_ranks: int = 256, per_host: int = 8, culprit: int = 137, steps: int = 40
) -> pl.DataFrame:
    """``n_ranks`` ranks on ``n_ranks / per_host`` hosts train ``steps`` steps, then rank ``culprit`` hits an
    illegal memory access inside ALLREDUCE SeqNum 4471 and every other rank times out there 600 s later."""
    t0 = dt.datetime(2025, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
    rows: list[dict[str, object]] = []

    def add(rank: int | None, host: str, sec: float, kind: str, **kw: object) -> None:
        rows.append(
            {
                "path": f"{host}.log",
                "line": len(rows) + 1,
                "line_count": 1,
                "rank": rank,
                "local_rank": None if rank is None else rank % per_host,
                "host": host,
                "attempt": 0,
                "stream": "combined",
                "ts": t0 + dt.timedelta(seconds=sec),
                "ts_quality": "no_tz",
                "layer": "c10d",
                "severity": "info",
                "kind": kind,
                "duplicate": False,
                "raw": f"[rank{rank}]: {kind}",
                "message": kind,
                **kw,
            }
        )

    hang = 10.0 * steps + 5
    for r in range(n_ranks):
        host = f"node-{r // per_host:03d}"
        add(r, host, 0.5, "nccl_init", world_size=n_ranks)
        for s in range(1, steps + 1):
            add(r, host, 10.0 * s + (r % 7) * 0.05, "step_progress", step=s, layer="app")
            add(r, host, 10.0 * s + 1, "collective_fingerprint", pg="0", seq=4470 - steps + s, op="ALLREDUCE")
        if r == culprit:
            add(
                r,
                host,
                hang + 1,
                "cuda_error",
                severity="error",
                layer="python",
                exc_type="torch.AcceleratorError",
                message="CUDA error: an illegal memory access was encountered",
            )
            continue
        add(r, host, hang, "collective_fingerprint", pg="0", seq=4471, op="ALLREDUCE")
        add(
            r,
            host,
            hang + 600,
            "watchdog_timeout",
            severity="error",
            pg="0",
            seq=4471,
            op="ALLREDUCE",
            timeout_ms=600000,
            elapsed_ms=600000 + r % 50,
        )
        add(r, host, hang + 601, "watchdog_teardown", severity="error", pg="0", seq=4471)
    for h in range(n_ranks // per_host):
        host = f"node-{h:03d}"
        add(None, host, hang + 605, "worker_signalled", layer="elastic", signal="SIGTERM")
    culprit_host = f"node-{culprit // per_host:03d}"
    add(culprit, culprit_host, hang + 606, "worker_failed", layer="elastic", exit_code=1)
    df = pl.DataFrame(rows, infer_schema_length=None)
    df = df.with_columns(pl.int_range(pl.len()).alias("event_id"))
    return conform(df)
