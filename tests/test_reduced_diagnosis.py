"""Diagnosis from the reduced table (what streaming keeps, what ``diagnose x.parquet`` reads) gives the same
verdict as diagnosis of the whole table, on every corpus case: the in-memory reduction
(``reduce_for_diagnosis``) and the parquet projection (``reduced_from_parquet``) alike.

Compared: the whole JSON verdict. One normalization: for a ``collective disagreement`` evidence line, which
rank's line is shown is not compared, because diagnosis picks it among the agreeing ranks in no fixed order
(two diagnoses of the SAME table differ there; cap-07, cap-18).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from correlator import streaming
from correlator.diagnose import diagnose
from correlator.ingest import ingest
from correlator.report import to_json
from correlator.schema import EVENT_SCHEMA
from correlator.streaming import reduce_for_diagnosis, reduced_from_parquet
from tests.conftest import CASES


def _json(t: pl.DataFrame) -> dict[str, object]:
    d = json.loads(to_json(diagnose(t)))
    for e in d.get("evidence", []):
        if e.get("role") == "collective disagreement":
            for k in ("rank", "path", "line", "ts", "text"):
                e.pop(k, None)
    return d


def _no_ts(v: object) -> object:
    """``v`` without timestamp fields (keys ``ts`` / ``*_ts``)."""
    if isinstance(v, dict):
        return {k: _no_ts(x) for k, x in v.items() if k != "ts" and not k.endswith("_ts")}
    if isinstance(v, list):
        return [_no_ts(x) for x in v]
    return v


def _check(t: pl.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strip_ts: bool = False) -> None:
    full = _json(t)
    pq.write_table(
        t.to_arrow(compat_level=pl.CompatLevel.oldest()).cast(EVENT_SCHEMA), tmp_path / "t.parquet"
    )
    red = reduce_for_diagnosis(t)
    # `rankscope diagnose` reduces every table, also ones already reduced (parquet, streaming): no change.
    assert reduce_for_diagnosis(red).equals(red)
    from_pq = reduced_from_parquet(tmp_path / "t.parquet")
    assert from_pq.drop("event_id").equals(red.drop("event_id"))
    # Read in many chunks of key columns: the same rows (the per-chunk selection composes).
    monkeypatch.setattr(streaming, "_CHUNK_ROWS", 7)
    assert reduced_from_parquet(tmp_path / "t.parquet").equals(from_pq)
    norm = _no_ts if strip_ts else (lambda v: v)
    for got in (_json(red), _json(from_pq)):
        assert norm(got) == norm(full)


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "logs").is_dir()))
def test_reduced_verdict_equals_full(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _check(ingest(CASES / case / "logs").table, tmp_path, monkeypatch)


def test_reduced_verdict_equals_full_on_generated_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job whose NCCL COLL lines are most of the table (the reduction keeps a few per rank and PG).

    Everything but the timestamps must agree: host clock offsets are estimated from the collectives both
    tables hold, fewer in the reduced one, so corrected stamps may differ by milliseconds."""
    import sys

    sys.path.insert(0, str(CASES.parent.parent / "benchmarks"))
    from generate import generate

    info = generate(tmp_path / "job", ranks=16, lines=400, seed=5)
    t = ingest(tmp_path / "job").table
    assert reduce_for_diagnosis(t).height < t.height / 4
    _check(t, tmp_path, monkeypatch, strip_ts=True)
    assert _json(reduce_for_diagnosis(t))["initiating_ranks"] == [info["culprit"]]
