"""The rule engine every parser module uses: vectorized prefix stripping and message rules.

A :class:`Prefix` strips one layer of prefix (transport, tee, producer) from the ``body`` column and
stores its named groups in columns. A :class:`Rule` classifies a message: a cheap literal test selects
candidate rows, then one regex with named groups extracts fields. Both run as polars expressions over
whole columns (Rust regex, linear time); there is no Python loop per line.

Named groups map to event-table columns (``seq``, ``op``, ``timeout_ms`` …). Three group names are
converted: ``seq_hex`` (an NCCL opCount, hex) -> ``seq``; ``host_fqdn`` -> ``host`` cut at the first dot;
``rank_stated`` / ``local_rank_stated`` -> ranks stated inside the message (used by identity resolution).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

#: Types of the columns rules and prefixes may fill (everything else stays a string).
FIELD_TYPES: dict[str, pl.DataType] = {
    "seq": pl.Int64(), "seq_enqueued": pl.Int64(), "seq_completed": pl.Int64(), "numel": pl.Int64(),
    "timeout_ms": pl.Int64(), "elapsed_ms": pl.Int64(), "step": pl.Int64(), "world_size": pl.Int32(),
    "peer_rank": pl.Int32(), "exit_code": pl.Int32(), "pid": pl.Int64(), "rank_stated": pl.Int32(),
    "local_rank_stated": pl.Int32(), "c10_rank": pl.Int32(), "tee_local_rank": pl.Int32(),
    "xport_rank": pl.Int32(), "cuda_dev": pl.Int32(), "epoch_s": pl.Int64(), "pg_rank": pl.Int32(),
}

#: Columns a rule can set; the engine creates them (null) before the first rule runs.
RULE_FIELDS: tuple[str, ...] = (
    "kind", "severity", "layer", "pg", "seq", "seq_enqueued", "seq_completed", "op", "numel", "shape",
    "timeout_ms", "elapsed_ms", "step", "world_size", "peer_rank", "peer_addr", "exit_code", "signal",
    "exc_type", "pid", "rank_stated", "local_rank_stated", "host", "comm", "comm_id", "root_cause",
)


@dataclass(frozen=True)
class Rule:
    """One message rule.

    ``literal`` must occur in the message for the rule to be tried (a fast substring scan);
    ``pattern`` (optional) is a regex whose named groups become columns. The first rule that matches a
    row classifies it; later rules never see it. ``source`` names the tool and version range the line
    comes from; ``example`` is a real (or reference-document) line the tests check the rule against.
    """

    name: str
    kind: str
    layer: str
    literal: str
    pattern: str | None = None
    severity: str | None = None
    source: str = ""
    example: str = ""
    set_fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Prefix:
    """One prefix layer: ``pattern`` is anchored at the start and must end with ``(?P<rest>.*)``."""

    name: str
    pattern: str
    layer: str | None = None
    source: str = ""
    example: str = ""


def _cast_fields(df: pl.DataFrame) -> pl.DataFrame:
    exprs = []
    for c in df.columns:
        if c == "seq_hex":
            exprs.append(pl.col(c).str.to_integer(base=16, strict=False).alias("seq"))
        elif c == "host_fqdn":
            exprs.append(pl.col(c).str.split(".").list.first().alias("host"))
        elif c in FIELD_TYPES:
            exprs.append(pl.col(c).str.strip_chars().cast(FIELD_TYPES[c], strict=False))
        else:
            exprs.append(pl.col(c))
    return df.with_columns(exprs)


def strip_prefix(df: pl.DataFrame, prefix: Prefix, mask: pl.Series | None = None) -> pl.DataFrame:
    """Strip ``prefix`` from ``body`` where it matches (and ``mask`` allows).

    Named groups fill columns that are still null, so an outer layer's value is never overwritten by
    an inner one. A boolean column ``pfx_<name>`` records where the prefix was found.
    """
    ext = df["body"].str.extract_groups(prefix.pattern).struct.unnest()
    matched = ext["rest"].is_not_null()
    if mask is not None:
        matched = matched & mask.fill_null(False)
    marker = f"pfx_{prefix.name}"
    groups = [g for g in re.compile(prefix.pattern).groupindex if g != "rest"]
    if not matched.any():
        missing = [pl.lit(None, dtype=FIELD_TYPES.get(g, pl.String())).alias(g) for g in groups if g not in df.columns]
        if marker not in df.columns:
            missing.append(pl.lit(False).alias(marker))
        return df.with_columns(missing) if missing else df
    fields = _cast_fields(ext.select(groups)) if groups else pl.DataFrame()
    out: dict[str, pl.Series] = {
        "body": pl.select(pl.when(matched).then(ext["rest"]).otherwise(df["body"])).to_series(),
    }
    for c in fields.columns:
        newv = fields[c]
        if c in df.columns:
            cur = df[c]
            out[c] = pl.select(pl.when(matched & cur.is_null()).then(newv.cast(cur.dtype, strict=False))
                               .otherwise(cur)).to_series()
        else:
            out[c] = pl.select(pl.when(matched).then(newv).otherwise(None)).to_series()
    if prefix.layer:
        cur = df["layer"] if "layer" in df.columns else pl.Series("layer", [None] * df.height, dtype=pl.String)
        out["layer"] = pl.select(pl.when(matched & cur.is_null()).then(pl.lit(prefix.layer)).otherwise(cur)).to_series()
    prev = df[marker] if marker in df.columns else None
    out[marker] = matched if prev is None else (prev | matched)
    return df.with_columns([s.alias(name) for name, s in out.items()])


def ensure_columns(df: pl.DataFrame, names: tuple[str, ...] = RULE_FIELDS) -> pl.DataFrame:
    """Add every missing rule column as nulls of its type."""
    add = [pl.lit(None, dtype=FIELD_TYPES.get(c, pl.String())).alias(c) for c in names if c not in df.columns]
    return df.with_columns(add) if add else df


def apply_rules(df: pl.DataFrame, rules: list[Rule], text: str = "message",
                where: pl.Series | None = None) -> pl.DataFrame:
    """Classify rows of ``df`` with ``rules`` (first match wins) and fill fields from named groups.

    Only rows whose ``kind`` is null (and, if given, where ``where`` is true) are considered. Returns
    ``df`` with ``kind``/``layer``/``severity`` and the rule fields filled where a rule matched.
    """
    df = ensure_columns(df)
    if df.height == 0:
        return df
    claimed = df["kind"].is_not_null()
    if where is not None:
        claimed = claimed | ~where.fill_null(False)
    txt = df[text].fill_null("")
    parts: list[pl.DataFrame] = []
    for rule in rules:
        cand = txt.str.contains(rule.literal, literal=True) & ~claimed
        idx = cand.arg_true()
        if idx.len() == 0:
            continue
        sub = txt.gather(idx)
        if rule.pattern:
            ext = sub.str.extract_groups(rule.pattern)
            fields = ext.struct.unnest()
            ok = sub.str.contains(rule.pattern)
            if not ok.any():
                continue
            idx = idx.filter(ok)
            fields = fields.filter(ok)
            groups = list(re.compile(rule.pattern).groupindex)
            fields = _cast_fields(fields.select(groups)) if groups else pl.DataFrame()
        else:
            fields = pl.DataFrame()
        n = idx.len()
        part = pl.DataFrame({"__row": idx.cast(pl.UInt32)}).with_columns(
            pl.lit(rule.kind).alias("kind"), pl.lit(rule.layer).alias("layer"),
            pl.lit(rule.severity, dtype=pl.String).alias("severity"), pl.lit(rule.name).alias("rule"),
        )
        if fields.width:
            part = pl.concat([part, fields.select([c for c in fields.columns if c not in ("kind", "layer", "severity")])],
                             how="horizontal")
        for col, val in rule.set_fields:
            part = part.with_columns(pl.lit(val).alias(col))
        assert part.height == n
        parts.append(part)
        claimed = claimed.scatter(idx, True)
    if not parts:
        return df
    upd = pl.concat(parts, how="diagonal_relaxed")
    df = df.with_row_index("__row")
    if "rule" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("rule"))
    upd_cols = [c for c in upd.columns if c != "__row"]
    joined = df.join(upd.rename({c: f"__u_{c}" for c in upd_cols}), on="__row", how="left", maintain_order="left")
    exprs = []
    for c in upd_cols:
        target_type = joined[c].dtype if c in joined.columns else upd[c].dtype
        if c in ("kind", "rule"):
            exprs.append(pl.coalesce(pl.col(f"__u_{c}").cast(target_type), pl.col(c)).alias(c) if c in joined.columns
                         else pl.col(f"__u_{c}").alias(c))
        elif c in joined.columns:
            # A rule's field wins over a prefix's field for severity/layer; otherwise keep what prefixes set.
            if c in ("layer", "severity"):
                exprs.append(pl.coalesce(pl.col(f"__u_{c}").cast(target_type), pl.col(c)).alias(c))
            else:
                exprs.append(pl.coalesce(pl.col(c), pl.col(f"__u_{c}").cast(target_type, strict=False)).alias(c))
        else:
            exprs.append(pl.col(f"__u_{c}").alias(c))
    return joined.with_columns(exprs).drop([f"__u_{c}" for c in upd_cols] + ["__row"])
