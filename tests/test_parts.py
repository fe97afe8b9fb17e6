"""``correlator.parts``: Parquet parts joined into one file without encoding their pages again give, byte for byte,
the file ``pyarrow``'s ``ParquetWriter`` writes from the parts' tables in turn (their ids moved); the Thrift
compact codec reads and writes a footer back to the same bytes; parts it cannot join are refused."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from correlator.ingest import ingest
from correlator.parts import PartsError, PartsWriter, decode, encode, footer
from correlator.schema import WRITE_SCHEMA, parquet_options, to_write_arrow

CASE = Path(__file__).resolve().parent.parent / "fixtures" / "cases" / "cap-15-clean-8r-detail" / "logs"


@pytest.fixture(scope="module")
def table() -> pa.Table:
    """A real case's event table (NCCL DETAIL and INFO, c10d, application lines) in the write schema."""
    t = ingest(CASE).table
    assert t.height > 1000
    return to_write_arrow(t)


def _moved(t: pa.Table, offset: int) -> pa.Table:
    i = t.schema.get_field_index("event_id")
    return t.set_column(i, t.schema.field(i), pc.add(t.column(i), pa.scalar(offset, pa.int64())))


def _parquet(t: pa.Table, **kw: object) -> bytes:
    buf = io.BytesIO()
    pq.write_table(t, buf, **{**parquet_options(), **kw})  # type: ignore[arg-type]
    return buf.getvalue()


def test_joined_parts_are_the_file_one_writer_writes(table: pa.Table, tmp_path: Path) -> None:
    """Three parts (ids from 0 in each, as batches give them; one empty, one of several row groups) joined with
    their offsets: the same bytes as one writer given the three tables with their ids moved, and read back the
    same rows."""
    n = table.num_rows
    cuts = [(0, n // 3), (n // 3, n // 3), (n // 3, n)]  # the middle part is empty
    parts, offset, offsets = [], 0, []
    for a, b in cuts:
        part = table.slice(a, b - a)
        parts.append(_moved(part, -a))  # ids from 0 in the part
        offsets.append(offset)
        offset += b - a
    want = tmp_path / "one-writer.parquet"
    with pq.ParquetWriter(want, WRITE_SCHEMA, **parquet_options()) as w:  # type: ignore[arg-type]
        for part, off, size in zip(parts, offsets, (0, 0, 500), strict=True):
            w.write_table(_moved(part, off), row_group_size=size or 1_000_000)
    got = tmp_path / "joined.parquet"
    writer = PartsWriter(got, WRITE_SCHEMA, parquet_options())
    rows = 0
    for part, off, size in zip(parts, offsets, (0, 0, 500), strict=True):
        rows += writer.add(_parquet(part, row_group_size=size or 1_000_000), off)
    assert writer.close() == rows == n
    assert got.read_bytes() == want.read_bytes()
    meta = pq.ParquetFile(got).metadata
    assert meta.num_row_groups == 1 + 1 + -(
        -(n - n // 3) // 500
    )  # the empty part's row group kept, as written
    back = pl.read_parquet(got)
    assert back.equals(pl.from_arrow(table))  # type: ignore[arg-type]
    assert back["event_id"].to_list() == list(range(n))
    # another reader, with its own footer parser, reads the same rows and row groups
    duckdb = pytest.importorskip("duckdb")
    q = f"select count(*), sum(event_id), count(distinct path) from read_parquet('{got}')"
    assert duckdb.sql(q).fetchall() == [(n, n * (n - 1) // 2, back["path"].n_unique())]
    groups = duckdb.sql(f"select count(distinct row_group_id) from parquet_metadata('{got}')").fetchall()
    assert groups == [(meta.num_row_groups,)]


def test_the_footer_codec_gives_back_the_bytes_it_read(table: pa.Table) -> None:
    """Decode then encode gives the footer's own bytes (dictionary pages, statistics, several row groups,
    key-value metadata of a stored schema), and a value changed is read back changed."""
    for data in (_parquet(table, row_group_size=700), _parquet(table, store_schema=True)):
        n = int.from_bytes(data[-8:-4], "little")
        raw = data[-8 - n : -8]
        fields = decode(raw)
        assert encode(fields) == raw
        assert fields == footer(data)
        num_rows = next(f for f in fields if f[0] == 3)
        num_rows[2] = 12345
        assert next(f for f in decode(encode(fields)) if f[0] == 3)[2] == 12345


def test_parts_it_cannot_join_are_refused(table: pa.Table, tmp_path: Path) -> None:
    part = table.slice(0, 100)
    writer = PartsWriter(tmp_path / "x.parquet", WRITE_SCHEMA, parquet_options())
    with pytest.raises(PartsError, match="column index|offset index"):
        writer.add(_parquet(part, write_page_index=True), 0)
    with pytest.raises(PartsError, match="not a Parquet file"):
        writer.add(b"PAR1 not really", 0)
    with pytest.raises(PartsError, match="columns differ"):
        writer.add(_parquet(part.drop(["raw"])), 0)
    writer.abort()


def test_no_part_gives_an_empty_table_of_the_schema(tmp_path: Path) -> None:
    out = tmp_path / "empty.parquet"
    writer = PartsWriter(out, WRITE_SCHEMA, parquet_options())
    assert writer.close() == 0
    got = pq.read_table(out)
    assert got.num_rows == 0 and got.schema.names == WRITE_SCHEMA.names
