"""Transport (L1) and tee (L2) prefixes: demultiplex combined streams into per-rank streams.

Layers, outermost first (docs/log-formats.md §0, §5.4, §7):
- kubectl ``--timestamps`` ``2024-11-29T22:58:55.104211337Z `` (RFC 3339, UTC) and ``--prefix``
  ``[pod/<pod>/<container>] ``;
- Open MPI ``--tag-output`` ``[1,3]<stderr>:`` (optionally preceded by ``--timestamp-output`` ctime);
- Slurm ``srun --label`` `` 3: `` (task id; the global rank only with one task per rank);
- pdsh / DeepSpeed multi-node ``node-b: `` host prefix;
- torchrun ``--tee`` ``[default3]:`` (role + LOCAL rank, torch 1.9 – 2.13 ``TailLog``); with TorchTitan's
  ``--role rank`` the tee prefix reads ``[rank3]:`` and is told from c10d's ``[rank3]:`` by what follows.

Per-file decisions (srun labels, pdsh hosts) are made once per file from the share of lines that carry
the prefix, so a stray ``RuntimeError: `` is never taken for a host.
"""

from __future__ import annotations

import polars as pl

from parsers.rules import Prefix, ascii_classes, strip_prefix, strip_prefixes, true_at

KUBECTL_TS = Prefix(
    "kubectl_ts",
    r"^(?P<xport_ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z):? (?P<rest>.*)$",
    source="kubectl logs --timestamps (RFC 3339 nanoseconds, UTC); log collectors' 'ISO-Z: ' stamps (NVIDIA/nccl#230)",
    example="2024-11-29T22:58:55.104211337Z [default0]:step 5",
)
KUBECTL_POD = Prefix(
    "kubectl_pod",
    r"^\[pod/(?P<xport_host>[^/\]]+)/[^\]]+\] (?P<rest>.*)$",
    source="kubectl logs --prefix (kubernetes/kubernetes#76471, 1.17+; with --timestamps the stamp follows it)",
    example="[pod/trainer-worker-1/main] hello",
)
MPI_TAG = Prefix(
    "mpi_tag",
    r"^(?P<mpi_ctime>\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})?\[(?:(?P<mpi_job>[^,\]]+),)?(?P<xport_rank>\d+)\]"
    r"<(?P<mpi_stream>stdout|stderr|stddiag)>:(?P<rest>.*)$",
    source="Open MPI --tag-output (ORTE 4.x, PRRTE 5.x iof_base_output.c); horovodrun's gloo launcher "
    "'{time}[{index}]<{stdout|stderr}>:{line}' (horovod/runner/common/util/safe_shell_exec.py prefix_connection, "
    "0.20 - 0.28; the index is the rank; horovod/horovod#2907: '[0]<stderr>:Killed')",
    example="[1,3]<stderr>:Traceback (most recent call last):",
)
SRUN_LABEL = Prefix(
    "srun",
    r"^ *(?P<srun_label>\d+): (?P<rest>.*)$",
    source="Slurm srun --label (write_labelled_message.c)",
    example=" 3: [default3]:step 5",
)
PDSH_HOST = Prefix(
    "pdsh",
    r"^(?P<xport_host>[A-Za-z][A-Za-z0-9-]*[0-9-][A-Za-z0-9.-]*|\d{1,3}(?:\.\d{1,3}){3}): (?P<rest>.*)$",
    source="pdsh -w (DeepSpeed multinode runner; hosts by name or IPv4 address)",
    example="192.0.2.12: [rank9]: torch.OutOfMemoryError: CUDA out of memory.",
)
#: A rank prefix user scripts print themselves: ``[rank1] `` / ``[rank 1] `` / ``rank 1: `` (Lightning's
#: ``[rank: N] `` is :data:`parsers.lightning.RANK_PREFIX`). Lower-case ``rank`` only: ``[Rank N] `` is
#: ProcessGroupNCCL's rank within a process group.
USER_RANK = Prefix(
    "user_rank",
    r"^(?:\[rank ?(?P<xport_rank>\d+)\] |rank ?(?P<xport_rank2>\d+): )(?P<rest>.*)$",
    source="user print prefixes in pasted logs ('[rank0] step 10', 'rank 3: …')",
    example="[rank0] step 10 loss 2.3",
)
#: torchrun --tee: `[<role><local_rank>]:` with no trailing space. `[rankN]:` counts as tee only when
#: followed by another prefix that is not a c10 severity bracket or the excepthook space.
TEE = Prefix(
    "tee",
    r"^\[(?P<tee_role>[A-Za-z_][A-Za-z_-]*?)(?P<tee_local_rank>\d+)\]:(?P<rest>.*)$",
    source="torchrun --tee (torch.distributed.elastic TailLog, torch 1.9 – 2.13)",
    example="[default2]:2026-11-29 23:08:29,847 INFO [trainer] rank=2 step=- starting worker pid=13401",
)

#: A custom tee template ``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[${rank}]:'`` gives ``[13]:`` with the GLOBAL
#: rank. Never the ChildFailedError ``[i]:`` entry lines, which end right after the colon.
TEE_RANK = Prefix(
    "tee_rank",
    r"^\[(?:(?P<xport_rank>\d+)\]:|rank (?P<xport_rank2>\d+)\]: ?)(?P<rest>.+)$",
    source="torchrun --tee with TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[${rank}]:' (torch 2.3+, its docstring's "
    "example) or '[rank ${rank}]: ' (captured with torch 2.8: '[rank 1]: [rank1]: Traceback …', the space the "
    "template's)",
    example="[5]:[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB.",
)

#: Where a record can start inside a physical line: the producer prefixes that never occur inside a message.
_RECORD_START = ascii_classes(
    r"\[rank\d+\]:|\[rank: \d+\] |\[default\d+\]:|\[[FEWIV]\d{3,4} \d\d:\d\d:\d\d\.\d+ |\[[FEWIV] [\w/.-]+\.(?:cpp|cc|hpp|h):\d+\] |"
    r"[VIWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w/.-]+:\d+\] |"
    r"(?:\[[^\]]{1,64}\] )?[A-Za-z0-9][\w.-]*:\d+:\d+ \[\d+\] (?:\S+:\d+ )?NCCL (?:INFO|WARN) |Traceback \(most recent call last\):"
)
#: Text before a record's own prefix on the same physical line: a progress bar the record was glued to
#: (tqdm redraws without a newline), a viewer's line number (``[80746] ``), leading spaces of a pasted
#: excerpt, a shell prompt. It is kept in ``raw`` and dropped from ``body`` so the record keeps its prefix,
#: rank and stamp.
LEAD = Prefix(
    "lead",
    rf"^(?P<lead>.{{1,400}}?)(?P<rest>(?:{_RECORD_START}).*)$",
    source="pasted excerpts and progress bars (tqdm) glued to c10/glog/NCCL/tee lines; e.g. LlamaFactory#7396 "
    "'[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] …', pytorch#118369 'Epoch 0:   6%|██ … "
    "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught …'",
    example="[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
    "Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
)


#: A lead that carries nothing of its own: spaces, a markdown quote or code mark, a viewer's line number.
_JUNK_LEAD = ascii_classes(r"^(?:[\s>`*#|]|\[\d+\])*$")
#: Columns of a tee prefix: a piece split off after a progress bar is another process's line, not the tee'd one's.
_TEE_COLS = ("tee_local_rank", "tee_role")


def strip_lead(df: pl.DataFrame, rows: pl.Series | None = None) -> pl.DataFrame:
    """Records that start inside a physical line (:data:`LEAD`). A lead of junk (spaces, ``> ``, a viewer's
    line number) is cut from ``body``; a lead with text of its own (a progress bar the record was glued to)
    becomes a row of its own, like :func:`split_glued_tee`: the record is an extra row with ``line_count`` 0,
    so line accounting still adds up, and the progress bar stays evidence of what the printing process did.

    ``rows``: where a record may start inside the line (all rows when None); :func:`strip_transport` passes
    the rows whose ``body`` changed since its first call (an unchanged row has no lead left: it was cut, split
    off, or its line starts with a record or holds none)."""
    body = df["body"]
    if rows is not None:
        rows = rows.fill_null(False)
        sub = body.filter(rows)
        has = (~sub.str.contains(f"^(?:{_RECORD_START})") & sub.str.contains(_RECORD_START)).fill_null(False)
        mask = true_at(df.height, rows.arg_true().filter(has))
    else:
        mask = (~body.str.contains(f"^(?:{_RECORD_START})") & body.str.contains(_RECORD_START)).fill_null(
            False
        )
    if not mask.any():
        return strip_prefix(df, LEAD, mask=mask)
    # The lead of the rows that have one only (an extract with a lazy ``.{1,400}?`` costs ~1.4 µs a row).
    at = mask.arg_true()
    lead = body.filter(mask).str.extract(f"^(.{{1,400}}?)(?:{_RECORD_START})", 1)
    junk = lead.str.contains(_JUNK_LEAD).fill_null(True)
    df = strip_prefix(df, LEAD, mask=true_at(df.height, at.filter(junk)))
    split = true_at(df.height, at.filter(~junk))
    if not split.any():
        return df
    out = _split_rows(df, split, f"^(.{{1,400}}?)((?:{_RECORD_START}).*)$", "${1}\u0000${2}")
    # The record split off after a progress bar is another process's line: it keeps no tee prefix of the bar's.
    extra = (out["line_count"] == 0) & out["body"].str.contains(f"^(?:{_RECORD_START})")
    tee = [c for c in _TEE_COLS if c in out.columns]
    return out.with_columns(*[pl.when(extra).then(None).otherwise(pl.col(c)).alias(c) for c in tee])


#: The share of a file's non-blank lines that must hold a prefix (its name) for :func:`strip_transport` to strip
#: it in that file: a label or host prefix is told from a message that starts like one by most lines having it.
FILE_SHARE: dict[str, float] = {"srun": 0.5, "pdsh": 0.5, "tee_rank": 0.3}

#: A tee-like prefix, any role (torchrun's tee, ``[<role><local rank>]:``; group 1 the local rank): where it may
#: be, wherever tested (``parsers.appfast`` reads it inside lines too).
TEE_LIKE = ascii_classes(r"\[[A-Za-z_][A-Za-z_-]*?(\d+)\]:")
_TEE_NOT_RANK = "^" + TEE_LIKE
_RANK_IS_TEE = ascii_classes(r"^\[rank\d+\]:(?:\[rank\d+\]:|[^\[ ])")


def file_shares(path: pl.Series, hit: pl.Series, counted: pl.Series) -> pl.DataFrame:
    """``path, share`` (String, Float64): for each file (``path``) with a ``counted`` row, the share of its
    counted rows that ``hit`` (three Boolean Series of one length). The one definition of the share
    :data:`FILE_SHARE` bounds: :func:`strip_transport` counts a file's non-blank lines, ``parsers.appfast``
    also the non-blank lines it leaves to this module."""
    return (
        pl.DataFrame({"path": path, "h": hit & counted, "n": counted})
        .filter(pl.col("n"))
        .group_by("path")
        .agg((pl.col("h").sum() / pl.col("n").sum()).alias("share"))
    )


def _file_share(df: pl.DataFrame, pattern: str) -> pl.Series:
    """Per row: the share of non-blank lines of the row's file that match ``pattern`` (:func:`file_shares`; 0
    in a file without a non-blank line)."""
    nonblank = df["body"].str.len_chars() > 0
    hit = df["body"].str.contains(pattern) & nonblank
    if not hit.any():  # no file has a hit: every share is 0 (no grouping over the files)
        return pl.repeat(0.0, df.height, dtype=pl.Float64, eager=True).alias("share")
    shares = file_shares(df["path"], hit, nonblank)
    return (
        df.select("path").join(shares, on="path", how="left", maintain_order="left")["share"].fill_null(0.0)
    )


def _split_rows(df: pl.DataFrame, hit: pl.Series, pattern: str, replacement: str) -> pl.DataFrame:
    """Split the ``hit`` rows where ``pattern`` matches (``replacement`` puts a NUL at each cut). The extra rows
    keep the line number and have ``line_count`` 0 and their own text as ``raw``, so line accounting adds up."""
    pieces = (
        df.filter(hit)
        .with_columns(pl.col("body").str.replace_all(pattern, replacement).str.split("\u0000").alias("body"))
        .explode("body")
        .with_columns(
            (pl.int_range(pl.len()).over("path", "line") > 0).alias("_extra"),
        )
        .with_columns(
            pl.when(pl.col("_extra")).then(0).otherwise(pl.col("line_count")).alias("line_count"),
            pl.when(pl.col("_extra")).then(pl.col("body")).otherwise(pl.col("raw")).alias("raw"),
        )
        .drop("_extra")
    )
    return pl.concat([df.filter(~hit), pieces]).sort("path", "line", maintain_order=True)


#: A tee'd line's role (torchrun's tee, ``[<role><local rank>]:`` then text; group 1): :func:`split_glued_tee`
#: cuts a line at a glued prefix of a role seen at a line start, but ``rank`` (c10d's ``[rank3]:``).
LINE_START_ROLE = ascii_classes(r"^\[([A-Za-z_][A-Za-z_-]*?)\d+\]:\S")


def split_glued_tee(df: pl.DataFrame) -> pl.DataFrame:
    """Split physical lines where a torn line of one rank is glued to another rank's tee'd line.

    torchrun's tee reads with ``readline()`` polling, so a progress bar without newline can be followed,
    on the same physical line, by ``[default2]:[E …]`` of another rank. Such a line becomes several rows;
    the extra rows keep the line number and have ``line_count`` 0 so line accounting still adds up.
    Only a role seen at a line start in ``df`` (``default`` by default; the files parsed together, a slice of
    whole files) splits a line.
    """
    roles = (
        df.select(pl.col("path"), pl.col("body").str.extract(LINE_START_ROLE, 1).alias("r"))
        .drop_nulls()
        .filter(pl.col("r") != "rank")
        .unique()
    )
    if roles.height == 0:
        return df
    role_alt = "|".join(sorted(set(roles["r"].to_list())))
    glued = rf"[^:\s]\[(?:{role_alt})\d+\]:"
    hit = df["body"].str.contains(glued)
    if not hit.any():
        return df
    return _split_rows(df, hit, rf"([^:\s])(\[(?:{role_alt})\d+\]:)", "${1}\u0000${2}")


def strip_transport(df: pl.DataFrame) -> pl.DataFrame:
    """Strip L1 transport and L2 tee prefixes from ``body`` into columns.

    Adds ``xport_ts``, ``xport_host``, ``xport_rank``, ``srun_label``, ``tee_role``, ``tee_local_rank``
    (and ``pfx_*`` markers). Input: the lines frame with ``path``, ``line``, ``body``.
    """
    df = strip_prefixes(df, (KUBECTL_TS, KUBECTL_POD, MPI_TAG))
    if "xport_ts" in df.columns:
        # ``kubectl logs --prefix --timestamps``: kubectl puts its prefix before each line the API server sent,
        # and the server's stamp starts the line (PodLogOptions.Timestamps): ``[pod/…/…] <RFC 3339> text``.
        df = strip_prefix(df, KUBECTL_TS, mask=df["pfx_kubectl_pod"] & df["xport_ts"].is_null())
    srun_file = _file_share(df, SRUN_LABEL.pattern) >= FILE_SHARE[SRUN_LABEL.name]
    df = strip_prefix(df, SRUN_LABEL, mask=srun_file)
    pdsh_file = _file_share(df, PDSH_HOST.pattern) >= FILE_SHARE[PDSH_HOST.name]
    df = strip_prefix(df, PDSH_HOST, mask=pdsh_file)
    tee_rank_file = _file_share(df, TEE_RANK.pattern) >= FILE_SHARE[TEE_RANK.name]
    df = _one_rank_column(strip_prefix(df, TEE_RANK, mask=tee_rank_file))
    df = strip_lead(df).with_columns(pl.col("body").alias("_lead_body"))
    df = split_glued_tee(df)
    body = df["body"]
    tee_mask = (body.str.contains(_TEE_NOT_RANK) & ~body.str.starts_with("[rank")) | body.str.contains(
        _RANK_IS_TEE
    )
    df = strip_prefix(df, TEE, mask=tee_mask)
    # The second pass tests only the rows the tee split or strip changed (the unanchored record-start scan
    # cost 80 ms per 400k lines): the others were settled by the first.
    changed = df["body"].ne_missing(df["_lead_body"])
    df = strip_lead(df.drop("_lead_body"), rows=changed)
    return _one_rank_column(strip_prefix(df, USER_RANK))


def _one_rank_column(df: pl.DataFrame) -> pl.DataFrame:
    """``xport_rank2`` (a prefix's second spelling of the rank: :data:`TEE_RANK`, :data:`USER_RANK`) merged into
    ``xport_rank``."""
    if "xport_rank2" not in df.columns:
        return df
    return df.with_columns(
        pl.coalesce(pl.col("xport_rank"), pl.col("xport_rank2").cast(pl.Int32, strict=False)).alias(
            "xport_rank"
        )
    ).drop("xport_rank2")
