"""Parquet parts joined into one file without encoding their pages again: the table ``rankscope timeline``
writes batch by batch (:func:`correlator.streaming.stream_ingest`), each batch's part written by the batch
itself (in its worker process or thread) and only stitched here, in batch order.

Why: the parent of a streaming run wrote every batch's part alone, one after another (``pyarrow``'s
``ParquetWriter`` encodes a row group's columns one by one, holding no other thread): ~0.10 CPU-s per 32 MiB
batch of the 256-rank COLL job (160k rows; 2026-12-07, 2 cores), plus ~0.03 s to read back the compressed
Arrow table the worker sent, so a run of 32 batches could not take less than ~4 s whatever the cores. Here
the parent copies the bytes of each part's column chunks (a few MB a batch) and encodes one column of its
own: ``event_id``, whose values move by the ids of the batches before (known only once those are done).

How (Apache Parquet's format, ``parquet.thrift``): a file is ``PAR1``, the column chunks of its row groups
one after the other, the ``FileMetaData`` (Thrift compact protocol), its length (4 bytes, little-endian) and
``PAR1``. A part's row groups are copied with their column chunks' offsets moved to where they land;
``event_id``'s chunk of each row group is replaced by the chunk of the same values plus the batch's offset,
written alone with the same writer properties; the footer is the first part's with the row groups of all
and their row count. The codec below reads and writes any compact-protocol struct field by field, keeping
the fields it does not know (a newer writer's): only offsets, sizes and ordinals are changed.

The file is the one ``pyarrow.parquet.ParquetWriter`` writes given the whole parts one after the other, byte
for byte (tests/test_parts.py): pyarrow encodes each column chunk by itself, the same values the same way.
Parts with a page index, bloom filters or encryption are refused (the house's writer options write none).
"""

from __future__ import annotations

import io
import os
import struct
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

MAGIC = b"PAR1"

# Thrift compact protocol types (thrift/doc/specs/thrift-compact-protocol.md)
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)

#: One field of a struct: (field id, compact type, value). A bool's value is the bool; a list's or set's
#: ``(element type, [values])``; a map's ``(key type, value type, [(key, value)])``; a struct's its fields.
Field = list[Any]


class PartsError(ValueError):
    """A part is not a Parquet file this module can join (damaged, or written with a page index, bloom filter
    or encryption)."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = out = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7


def _unzigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _put_varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _read_value(buf: bytes, pos: int, t: int) -> tuple[Any, int]:
    if t in (_I16, _I32, _I64):
        n, pos = _varint(buf, pos)
        return _unzigzag(n), pos
    if t == _BINARY:
        n, pos = _varint(buf, pos)
        return bytes(buf[pos : pos + n]), pos + n
    if t == _STRUCT:
        return _read_struct(buf, pos)
    if t in (_LIST, _SET):
        head = buf[pos]
        pos += 1
        size, et = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(buf, pos)
        items = []
        for _ in range(size):
            if et in (_TRUE, _FALSE):  # a bool element is a byte of its own
                items.append(buf[pos])
                pos += 1
            else:
                v, pos = _read_value(buf, pos, et)
                items.append(v)
        return (et, items), pos
    if t == _MAP:
        size, pos = _varint(buf, pos)
        if size == 0:
            return (0, 0, []), pos
        kv = buf[pos]
        pos += 1
        kt, vt = kv >> 4, kv & 0x0F
        pairs = []
        for _ in range(size):
            k, pos = _read_value(buf, pos, kt)
            v, pos = _read_value(buf, pos, vt)
            pairs.append((k, v))
        return (kt, vt, pairs), pos
    if t == _BYTE:
        return buf[pos], pos + 1
    if t == _DOUBLE:
        return bytes(buf[pos : pos + 8]), pos + 8
    raise PartsError(f"Thrift compact type {t} at byte {pos}")


def _read_struct(buf: bytes, pos: int) -> tuple[list[Field], int]:
    fields: list[Field] = []
    fid = 0
    while True:
        head = buf[pos]
        pos += 1
        if head == _STOP:
            return fields, pos
        delta, t = head >> 4, head & 0x0F
        if delta:
            fid += delta
        else:
            n, pos = _varint(buf, pos)
            fid = _unzigzag(n)
        if t in (_TRUE, _FALSE):
            fields.append([fid, t, t == _TRUE])
            continue
        v, pos = _read_value(buf, pos, t)
        fields.append([fid, t, v])


def _write_value(out: bytearray, t: int, v: Any) -> None:
    if t in (_I16, _I32, _I64):
        _put_varint(out, _zigzag(v) & 0xFFFFFFFFFFFFFFFF)
    elif t == _BINARY:
        _put_varint(out, len(v))
        out += v
    elif t == _STRUCT:
        _write_struct(out, v)
    elif t in (_LIST, _SET):
        et, items = v
        if len(items) < 15:
            out.append(len(items) << 4 | et)
        else:
            out.append(0xF0 | et)
            _put_varint(out, len(items))
        for item in items:
            if et in (_TRUE, _FALSE):
                out.append(item)
            else:
                _write_value(out, et, item)
    elif t == _MAP:
        kt, vt, pairs = v
        _put_varint(out, len(pairs))
        if pairs:
            out.append(kt << 4 | vt)
            for k, val in pairs:
                _write_value(out, kt, k)
                _write_value(out, vt, val)
    elif t == _BYTE:
        out.append(v)
    elif t == _DOUBLE:
        out += v
    else:
        raise PartsError(f"Thrift compact type {t}")


def _write_struct(out: bytearray, fields: list[Field]) -> None:
    last = 0
    for fid, t, v in fields:
        if t in (_TRUE, _FALSE):
            t = _TRUE if v else _FALSE
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | t)
        else:
            out.append(t)
            _put_varint(out, _zigzag(fid))
        last = fid
        if t not in (_TRUE, _FALSE):
            _write_value(out, t, v)
    out.append(_STOP)


def encode(fields: list[Field]) -> bytes:
    """A struct's fields (as :func:`decode` gives them) in the Thrift compact protocol."""
    out = bytearray()
    _write_struct(out, fields)
    return bytes(out)


def decode(data: bytes) -> list[Field]:
    """The fields of the Thrift compact struct ``data`` holds (whole); raises :class:`PartsError` when it
    does not hold one."""
    try:
        fields, end = _read_struct(data, 0)
    except IndexError as e:
        raise PartsError("truncated Thrift struct") from e
    if end != len(data):
        raise PartsError(f"{len(data) - end} bytes after the Thrift struct")
    return fields


def _get(fields: list[Field], fid: int) -> Any:
    for f in fields:
        if f[0] == fid:
            return f[2]
    return None


def _set(fields: list[Field], fid: int, t: int, value: Any) -> None:
    for f in fields:
        if f[0] == fid:
            f[1], f[2] = t, value
            return
    fields.append([fid, t, value])
    fields.sort(key=lambda f: f[0])


def footer(data: bytes) -> list[Field]:
    """The ``FileMetaData`` fields of the Parquet file ``data``; raises :class:`PartsError` when it is not one."""
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise PartsError("not a Parquet file (no PAR1 at both ends)")
    (n,) = struct.unpack("<I", data[-8:-4])
    if n > len(data) - 12:
        raise PartsError("Parquet footer length past the file's start")
    return decode(data[-8 - n : -8])


# FileMetaData, RowGroup, ColumnChunk and ColumnMetaData field ids (parquet-format's parquet.thrift)
_FM_NUM_ROWS, _FM_ROW_GROUPS = 3, 4
_RG_COLUMNS, _RG_TOTAL_BYTES, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_COMPRESSED, _RG_ORDINAL = 1, 2, 3, 5, 6, 7
_CC_FILE_PATH, _CC_FILE_OFFSET, _CC_META = 1, 2, 3
_CC_REFUSED = {4: "an offset index", 6: "a column index", 8: "encryption", 9: "encryption"}
_MD_UNCOMPRESSED, _MD_COMPRESSED = 6, 7
_MD_DATA_PAGE, _MD_INDEX_PAGE, _MD_DICT_PAGE, _MD_BLOOM = 9, 10, 11, 14


def _chunk_span(chunk: list[Field]) -> tuple[int | None, int]:
    """Where a column chunk's pages are, ``(first byte, bytes)``, in its file; ``(None, 0)`` for a chunk of
    no page (a column of an empty row group; an offset of 0 is no page, as a file starts with ``PAR1``)."""
    for fid, why in _CC_REFUSED.items():
        if _get(chunk, fid) is not None:
            raise PartsError(f"a column chunk with {why} (not written by the house's writer options)")
    if _get(chunk, _CC_FILE_PATH) is not None:
        raise PartsError("a column chunk in another file")
    md = _get(chunk, _CC_META)
    if md is None:
        raise PartsError("a column chunk without its metadata")
    if _get(md, _MD_BLOOM) is not None:
        raise PartsError("a column chunk with a bloom filter (not written by the house's writer options)")
    at = [v for v in (_get(md, _MD_DICT_PAGE), _get(md, _MD_INDEX_PAGE), _get(md, _MD_DATA_PAGE)) if v]
    return (min(at), _get(md, _MD_COMPRESSED)) if at else (None, 0)


def _moved(chunk: list[Field], delta: int) -> list[Field]:
    """A column chunk's fields with its page offsets moved by ``delta`` bytes (those that are not 0, which
    is no page; its ``file_offset`` too where set: parquet-cpp writes 0)."""
    out = [list(f) for f in chunk]
    md = [list(f) for f in _get(out, _CC_META)]
    for f in md:
        if f[0] in (_MD_DATA_PAGE, _MD_INDEX_PAGE, _MD_DICT_PAGE) and f[2]:
            f[2] += delta
    _set(out, _CC_META, _STRUCT, md)
    off = _get(out, _CC_FILE_OFFSET)
    if off:
        _set(out, _CC_FILE_OFFSET, _I64, off + delta)
    return out


class PartsWriter:
    """One Parquet file at ``path`` made of parts added in order (:meth:`add`), closed by :meth:`close`.

    Each part is a Parquet file of ``schema`` (a ``pyarrow.Schema`` whose first column is ``event_id``,
    int64) written by ``pyarrow.parquet`` with the writer options ``options`` (keyword arguments of
    ``ParquetWriter``); :meth:`add` moves its ``event_id`` values by ``offset``. The result is the file a
    ``ParquetWriter(path, schema, **options)`` writes given each part's table (ids moved) in turn, with the
    row groups the parts hold. Raises :class:`PartsError` on a part it cannot join; the file is then
    incomplete (the caller writes under a temporary name and removes it)."""

    def __init__(self, path: str | os.PathLike[str], schema: pa.Schema, options: dict[str, object]) -> None:
        if schema.names[0] != "event_id":
            raise ValueError("PartsWriter: the schema's first column must be event_id")
        self.path, self.schema = Path(path), schema
        self.options = dict(options)
        self._id_options = _one_column_options(self.options, "event_id")
        self._f = open(self.path, "wb")  # noqa: SIM115 (closed by close())
        self._f.write(MAGIC)
        self._pos = len(MAGIC)
        self._meta: list[Field] | None = None
        self._groups: list[list[Field]] = []
        self._rows = 0

    def add(self, part: str | os.PathLike[str] | bytes, offset: int) -> int:
        """Append the row groups of the Parquet file ``part`` (a path or its bytes), its ``event_id`` values
        moved by ``offset``; returns its rows."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        data = part if isinstance(part, bytes) else Path(part).read_bytes()
        meta = footer(data)
        groups = _get(meta, _FM_ROW_GROUPS)
        reader = pq.ParquetFile(pa.BufferReader(data))
        if reader.schema_arrow.names != self.schema.names:
            raise PartsError("a part whose columns differ from the table's")
        if self._meta is None:
            self._meta = meta
        rows = 0
        for g, group in enumerate([] if groups is None else groups[1]):
            cols = _get(group, _RG_COLUMNS)[1]
            spans = [(a, n) for a, n in (_chunk_span(c) for c in cols[1:]) if a is not None]
            for (a, n), (b, _) in pairwise(spans):
                if a + n != b:
                    raise PartsError("a row group whose column chunks are not one after the other")
            ids = reader.read_row_group(g, columns=["event_id"]).column(0)
            id_chunk, id_bytes = self._ids(ids, offset)
            start = self._pos
            self._f.write(id_bytes)
            rest = (spans[0][0], spans[-1][0] + spans[-1][1]) if spans else (0, 0)
            self._f.write(data[rest[0] : rest[1]])
            id_first = _chunk_span(id_chunk)[0]
            new_cols = [_moved(id_chunk, start - (id_first or 0))]
            new_cols += [_moved(c, start + len(id_bytes) - rest[0]) for c in cols[1:]]
            old_md, new_md = _get(cols[0], _CC_META), _get(id_chunk, _CC_META)
            out = [list(f) for f in group]
            _set(out, _RG_COLUMNS, _LIST, (_STRUCT, new_cols))
            for fid, mid in ((_RG_TOTAL_BYTES, _MD_UNCOMPRESSED), (_RG_COMPRESSED, _MD_COMPRESSED)):
                if _get(out, fid) is not None:
                    _set(out, fid, _I64, _get(out, fid) - _get(old_md, mid) + _get(new_md, mid))
            if _get(out, _RG_FILE_OFFSET) is not None:  # where its first column's pages start (0: none)
                _set(out, _RG_FILE_OFFSET, _I64, start if id_first else 0)
            if _get(out, _RG_ORDINAL) is not None:
                _set(out, _RG_ORDINAL, _I16, len(self._groups))
            self._groups.append(out)
            self._pos = start + len(id_bytes) + (rest[1] - rest[0])
            rows += _get(group, _RG_NUM_ROWS)
        self._rows += rows
        return rows

    def _ids(self, ids: pa.ChunkedArray, offset: int) -> tuple[list[Field], bytes]:
        """``event_id``'s column chunk for ``ids`` moved by ``offset``: its fields and its bytes, as a file of
        that column alone written with the table's options holds them (one row group)."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        field = self.schema.field("event_id")
        table = pa.table({"event_id": pc.add(ids, pa.scalar(offset, pa.int64()))}, schema=pa.schema([field]))
        buf = io.BytesIO()
        pq.write_table(table, buf, row_group_size=max(1, table.num_rows), **self._id_options)  # type: ignore[arg-type]
        data = buf.getvalue()
        chunk = _get(_get(footer(data), _FM_ROW_GROUPS)[1][0], _RG_COLUMNS)[1][0]
        a, n = _chunk_span(chunk)
        return chunk, b"" if a is None else data[a : a + n]

    def close(self) -> int:
        """Write the footer; returns the rows written. With no part added, the file is an empty table of the
        schema (as ``ParquetWriter`` closed at once writes it)."""
        try:
            if self._meta is None:
                import pyarrow.parquet as pq

                self._f.close()
                pq.ParquetWriter(str(self.path), self.schema, **self.options).close()  # type: ignore[arg-type]
                return 0
            meta = [list(f) for f in self._meta]
            _set(meta, _FM_NUM_ROWS, _I64, self._rows)
            _set(meta, _FM_ROW_GROUPS, _LIST, (_STRUCT, self._groups))
            body = encode(meta)
            self._f.write(body + struct.pack("<I", len(body)) + MAGIC)
            return self._rows
        finally:
            self._f.close()

    def abort(self) -> None:
        """Close the file without a footer (the caller removes it)."""
        self._f.close()


def _one_column_options(options: dict[str, object], name: str) -> dict[str, object]:
    """``options`` for a file of the column ``name`` alone: the per-column lists narrowed to it."""
    out = dict(options)
    for key in ("use_dictionary", "write_statistics", "column_encoding"):
        v = out.get(key)
        if isinstance(v, list | tuple):
            out[key] = name in v
        elif isinstance(v, dict):
            out[key] = {k: x for k, x in v.items() if k == name}
    return out


__all__ = ["PartsError", "PartsWriter", "decode", "encode", "footer"]
