"""Per-column digests of an event table, to pin the table ingest writes for each corpus case.

``python -m tests.table_digest`` rewrites ``tests/data/table_digests.json`` from the current code (do that
only when a change of the table is intended, e.g. a new parser rule, and say so in the commit). A digest is
the SHA-256 of the column's values as text, in row order, nulls marked; it does not depend on the column's
storage type (a String column and a Categorical column holding the same values digest the same), so a
re-typing for speed keeps the digest and a change of any value changes it.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parent.parent
DIGESTS = REPO / "tests" / "data" / "table_digests.json"
CASES = REPO / "fixtures" / "cases"


def column_digests(table: pl.DataFrame) -> dict[str, str]:
    """``{column: sha256 hex}`` over the rows of ``table`` in order (values as text, null as ``\\x00``)."""
    out: dict[str, str] = {}
    for name in table.columns:
        col = table[name]
        if col.dtype == pl.Categorical or isinstance(col.dtype, pl.Enum):
            col = col.cast(pl.String)
        text = col.cast(pl.String).fill_null("\x00")
        h = hashlib.sha256()
        h.update(str(table.height).encode())
        for v in text.to_list():
            h.update(b"\x1e")
            h.update(v.encode("utf-8", errors="surrogatepass"))
        out[name] = h.hexdigest()
    return out


def corpus_digests() -> dict[str, dict[str, str]]:
    from correlator.ingest import load

    return {
        case.name: column_digests(load(case / "logs"))
        for case in sorted(CASES.iterdir())
        if (case / "logs").is_dir()
    }


def main() -> int:
    DIGESTS.parent.mkdir(parents=True, exist_ok=True)
    DIGESTS.write_text(json.dumps(corpus_digests(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {DIGESTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
