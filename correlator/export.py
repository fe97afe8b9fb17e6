"""Export the event table as a hive-partitioned parquet dataset (``host=node-a/part-0.parquet``).

A partitioned dataset is what a fleet-wide pipeline wants: each node (or each ingest job) writes its own
partition, and DuckDB, polars, pyarrow or Spark read the union as one table::

    duckdb:  SELECT * FROM read_parquet('events/**/*.parquet', hive_partitioning = true)
    polars:  pl.scan_parquet("events/**/*.parquet", hive_partitioning=True)
    spark:   spark.read.parquet("events/")

The partition column is kept in the files too (so a single file still has the full event schema), and
rows whose key is null go to ``<by>=__null__``. Files use the event schema (``correlator.schema``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from correlator.schema import conform, empty_table, parquet_options, to_write_arrow

#: The columns a dataset may be partitioned by.
PARTITION_KEYS = ("host", "rank")
NULL_PARTITION = "__null__"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _dir_value(v: object) -> str:
    if v is None:
        return NULL_PARTITION
    return _SAFE.sub("_", str(v)) or NULL_PARTITION


def write_partitioned(
    table: pl.DataFrame,
    out_dir: str | os.PathLike[str],
    by: str = "host",
    *,
    part_name: str = "part-0.parquet",
    row_group_rows: int = 1_000_000,
) -> list[Path]:
    """Write ``table`` under ``out_dir`` as ``<by>=<value>/<part_name>``, one file per value.

    ``by`` is ``"host"`` or ``"rank"``. Existing partitions with other part names are left alone, so
    several ingest jobs (one per node) can write into one dataset with distinct ``part_name``s.
    Returns the files written. Raises ``ValueError`` for an unknown ``by``.
    """
    if by not in PARTITION_KEYS:
        raise ValueError(f"partition by {by!r}: use one of {', '.join(PARTITION_KEYS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t = conform(table)
    written: list[Path] = []
    for key, part in t.group_by(by, maintain_order=True):
        value = key[0] if isinstance(key, tuple) else key
        d = out / f"{by}={_dir_value(value)}"
        d.mkdir(parents=True, exist_ok=True)
        path = d / part_name
        pq.write_table(to_write_arrow(part), str(path), row_group_size=row_group_rows, **parquet_options())
        written.append(path)
    return sorted(written)


def read_partitioned(out_dir: str | os.PathLike[str]) -> pl.DataFrame:
    """Read a dataset written by :func:`write_partitioned` (or any folder of event-table parquet files,
    e.g. one per node) back as one event table, sorted by ``path, line``. When the files came from
    separate ingest runs their ``event_id``s collide; they are then renumbered in that order."""
    files = sorted(str(p) for p in Path(out_dir).rglob("*.parquet"))
    if not files:
        return empty_table()
    # The files hold every column (the partition key too): read them as plain files, not hive paths.
    df = conform(pl.concat([pl.read_parquet(f) for f in files], how="vertical_relaxed"))
    df = df.sort("path", "line", "event_id")
    if df["event_id"].n_unique() != df.height:
        df = df.with_columns(pl.int_range(0, df.height, dtype=pl.Int64).alias("event_id"))
    return df


__all__ = ["PARTITION_KEYS", "read_partitioned", "write_partitioned"]
