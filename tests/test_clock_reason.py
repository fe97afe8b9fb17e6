"""The clock-uncertainty confidence reason (graph.build_graph: CLOCKS_UNALIGNED when a host's clock offset is
uncertain by more than 5 s and the initiator was found by time, "first fault").

The offset of a host is the median difference of its collective entries against the reference host's (the
host with the most), its uncertainty 3 x the median absolute deviation (correlator.clock.estimate). The
differences below are chosen so that the uncertainty is computed here by hand: 6 s (raised) and 1.5 s (not).
"""

from __future__ import annotations

import datetime as dt

import polars as pl

import correlator
from correlator.schema import conform

T0 = dt.datetime(2025, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def _table(diffs_s: list[float]) -> pl.DataFrame:
    rows: list[dict[str, object]] = []

    def add(rank: int, host: str, sec: float, kind: str, **kw: object) -> None:
        rows.append(
            {
                "path": f"{host}.log",
                "line": len(rows) + 1,
                "line_count": 1,
                "rank": rank,
                "local_rank": 0,
                "host": host,
                "attempt": 0,
                "stream": "combined",
                "ts": T0 + dt.timedelta(seconds=sec),
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

    fp = {"pg": "0", "op": "ALLREDUCE", "numel": 16}
    for i, d in enumerate(diffs_s):
        add(0, "node-a", 10.0 * i, "collective_fingerprint", seq=i, **fp)
        add(1, "node-b", 10.0 * i + d, "collective_fingerprint", seq=i, **fp)
    add(0, "node-a", 200.0, "collective_fingerprint", seq=99, **fp)  # node-a has the most: the reference
    add(1, "node-b", 300.0, "python_exception", exc_type="ValueError", severity="error", layer="python")
    add(0, "node-a", 900.0, "watchdog_timeout", seq=100, severity="error", timeout_ms=600000, pg="0")
    return conform(
        pl.DataFrame(rows).with_row_index("event_id").with_columns(pl.col("event_id").cast(pl.Int64))
    )


def test_an_uncertain_host_clock_lowers_a_verdict_found_by_time() -> None:
    # differences 0, 0, 2, 4, 4 s: median 2, absolute deviations 2, 2, 0, 2, 2 -> MAD 2 -> uncertainty 6 s > 5
    d = correlator.diagnose(_table([0, 0, 2, 4, 4]))
    assert d.initiating_ranks == [1] and d.initiator_basis == "first fault"
    assert "CLOCKS_UNALIGNED" in d.confidence_reason_codes


def test_a_well_aligned_host_clock_does_not() -> None:
    # differences 0, 1, 1.5, 2, 3 s: median 1.5, deviations 1.5, 0.5, 0, 0.5, 1.5 -> MAD 0.5 -> 1.5 s <= 5
    d = correlator.diagnose(_table([0, 1, 1.5, 2, 3]))
    assert d.initiating_ranks == [1] and d.initiator_basis == "first fault"
    assert "CLOCKS_UNALIGNED" not in d.confidence_reason_codes
