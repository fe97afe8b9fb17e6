"""Rank identity: resolve the global rank, local rank, host and attempt of every row, once, in one place.

Rank identity is evidence, not a path (docs/design.md). Sources, strongest first, recorded in ``rank_source``:
- ``c10d_prefix`` / ``excepthook_prefix``: ``[rankN]:`` from c10 logging or the excepthook — global rank;
- ``transport_prefix``: Open MPI ``[1,N]<stdout>:``, a ``[${rank}]:`` tee template, or an ``srun --label`` task id
  when srun runs one task per rank — global rank;
- ``path``: a per-rank file named by rank (``rank3.log``);
- ``file_name``: the task id in one of a set of sibling file names (``%x-%j-%t.out`` of ``srun --output``, Open
  MPI's ``rank.N/stdout``; ``correlator.discover.ranks_from_siblings``), kept only where the file's own lines
  state no other rank (:func:`_check_task_files`);
- ``folder+offset`` / ``tee+offset``: a torchrun local rank (log-dir folder, ``[defaultN]:``) plus the node's
  offset, learned from rows that carry both a local and a global rank (single-node jobs: offset 0);
- ``nccl_pid``: (host, pid) of NCCL lines mapped by NCCL init lines (``rank R nranks N``);
- ``launcher``: ChildFailedError ``rank : G (local_rank: L)`` blocks and ``failed … local_rank: L (pid: P)``;
- ``pid_order``: workers' pids in a launcher's SIGTERM lines ordered as torchrun spawns them (weak);
- ``pid_gap``: a failed worker whose line lost its pid is the one hole in the run of SIGTERMed pids (weak);
- ``pg_prefix``: ProcessGroupNCCL's ``[Rank r]`` in the default PG, for torch ≤ 2.1 lines without ``[rankN]:``;
- ``message``: ``rank=N`` in the application's own progress lines, or a rank a fault message states about
  itself (``what():  [PG 0 Rank 3] …``, ``aborted on rank 3``) on a line with no prefix (weak);
- ``host``: the one rank a transport host's (a kubectl pod's) rows state, for its rows that state none, where
  each host runs one rank (:func:`_host_ranks`);
- ``gpu_index``: the CUDA device of a CUDA error (``GPU 3``) or of an NCCL line (``[cudaDev]``) whose pid no
  init line maps, on a single node only (weakest).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl

from correlator.schema import Kind

if TYPE_CHECKING:
    from correlator.discover import Source

_HOSTLESS = {"localhost", "localhost.localdomain", ""}


#: Layouts of files that hold one rank's lines (a file the path, or a sibling name's field, gives a rank).
_PER_RANK_LAYOUTS = ["torchrun_rank", "rank_file", "task_file", "error_json"]


def _mode_int(values: list[int]) -> int | None:
    vals = [v for v in values if v is not None]
    return Counter(vals).most_common(1)[0][0] if vals else None


def _pair_launchers(df: pl.DataFrame) -> pl.DataFrame:
    """Give launcher/combined files the node key of the torchrun log tree they mention (run-dir name)."""
    trees = (
        df.lazy()
        .filter(pl.col("layout").is_in(["torchrun_rank", "error_json"]) & pl.col("node_key").is_not_null())
        .select(pl.col("node_key").unique())
        .collect()["node_key"]
        .to_list()
    )
    if not trees:
        return df
    stream_rows = df.lazy().filter(pl.col("layout") == "stream").select("path", "raw").collect()
    streams = stream_rows["path"].unique().to_list()
    mentions: dict[str, list[str]] = {}
    for tree in trees:  # one scan per log tree (a node), not per file
        name = tree.rsplit("/", 1)[-1]
        for path in (
            stream_rows.filter(pl.col("raw").str.contains(name, literal=True))["path"].unique().to_list()
        ):
            mentions.setdefault(path, []).append(tree)
    assign: dict[str, str] = {p: hits[0] for p, hits in mentions.items() if len(hits) == 1}
    if len(trees) == 1:
        for path in streams:
            assign.setdefault(path, trees[0])
    if not assign:
        return df
    return df.with_columns(
        pl.col("path").replace_strict(assign, default=None).fill_null(pl.col("node_key")).alias("node_key")
    )


def _demote_multi_rank_files(df: pl.DataFrame) -> pl.DataFrame:
    """A file named like a rank's (``worker-0.log``) that holds several ranks' prefixed lines is a node's
    or pod's combined stream, not one rank's file: its name's number is not a rank."""
    named = (
        df.lazy()
        .filter(pl.col("layout") == "rank_file")
        .select("path", "c10_rank", "tee_local_rank")
        .collect()
    )
    if named.height == 0:
        return df
    multi = (
        named.group_by("path")
        .agg(
            pl.col("c10_rank").n_unique().alias("g"),
            pl.col("tee_local_rank").n_unique().alias("l"),
            pl.col("c10_rank").null_count().alias("gn"),
            pl.col("tee_local_rank").null_count().alias("ln"),
            pl.len().alias("n"),
        )
        .filter(
            (pl.col("g") - (pl.col("gn") > 0).cast(pl.UInt32) > 1)
            | (pl.col("l") - (pl.col("ln") > 0).cast(pl.UInt32) > 1)
        )
    )
    paths = multi["path"].to_list()
    if not paths:
        return df
    hit = pl.col("path").is_in(paths)
    return df.with_columns(
        pl.when(hit).then(pl.lit("stream")).otherwise(pl.col("layout")).alias("layout"),
        pl.when(hit).then(None).otherwise(pl.col("src_rank")).alias("src_rank"),
    )


def _check_task_files(df: pl.DataFrame) -> pl.DataFrame:
    """Confirm the rank a sibling file name gives (``layout="task_file"``) against the ranks the file's lines state
    about their writer: a ``[rankN]:`` or transport prefix, the default PG's ``[Rank r]``, an application's
    ``rank=N``, NCCL's ``comm … rank R nranks N`` of the process's largest communicator.

    A file whose lines state two ranks or more (a Slurm array job's whole output, ``%A_%a.out``), or that holds
    a launcher's lines (a torchrun agent's: a node's stream, ``srun torchrun`` with ``--output=%t``; srun's
    reports on tasks: a batch script's output), is a stream, not one rank's file. A file whose lines all state
    one other rank loses the name's rank (its lines' word is stronger; a ``[rankN]:`` prefix then gives the whole
    file its rank, as for any per-rank file). Stated ranks that agree with the name confirm it."""
    if "task_file" not in df["layout"].unique().to_list():
        return df
    from parsers.app import RANK_RE

    plain = pl.col("layer").is_null() | pl.col("layer").is_in(["app", "unknown"])
    stated = pl.coalesce(
        pl.col("c10_rank"),
        pl.col("xport_rank"),
        pl.when(pl.col("pg").is_null() | (pl.col("pg") == "0")).then(pl.col("pg_rank")),
        pl.when(pl.col("layer") == "app").then(pl.col("rank_stated")),
        pl.when(plain).then(pl.col("message").str.extract(RANK_RE, 1).cast(pl.Int32, strict=False)),
    )
    # srun's reports on tasks (``srun: error: node17: tasks 0-1,3: Terminated``): the launcher's output
    launcher = (pl.col("layer") == "system") & pl.col("ranks_named").is_not_null()
    # NCCL init/abort lines: the rank in the process's largest communicator (a subgroup's rank is not global)
    nccl = (pl.col("layer") == "nccl") & pl.col("kind").is_in([Kind.NCCL_INIT, Kind.NCCL_ABORT])
    nccl_ws = pl.col("world_size").filter(nccl)
    per_file = (
        df.lazy()
        .filter(pl.col("layout") == "task_file")
        .group_by("path")
        .agg(
            stated.drop_nulls().unique().alias("ranks"),
            pl.col("rank_stated")
            .filter(nccl & (pl.col("world_size") == nccl_ws.max()))
            .drop_nulls()
            .unique()
            .alias("nccl_ranks"),
            ((pl.col("layer") == "elastic") | launcher).any().alias("agent"),
            pl.col("tee_local_rank").drop_nulls().n_unique().alias("locals"),
            pl.col("src_rank").first().alias("named"),
        )
        .collect()
    )
    demote: list[str] = []
    other: dict[str, int] = {}
    for path, own, nccl_own, agent, locals_, named in per_file.iter_rows():
        ranks = sorted(set(own) | set(nccl_own))
        if agent or len(ranks) > 1 or locals_ > 1:
            demote.append(path)
        elif len(ranks) == 1 and ranks[0] != named:
            other[path] = ranks[0]
    if not demote and not other:
        return df
    hit = pl.col("path").is_in(demote)
    moved = pl.col("path").is_in(list(other))
    return df.with_columns(
        pl.when(hit).then(pl.lit("stream")).otherwise(pl.col("layout")).alias("layout"),
        pl.when(hit).then(pl.lit("combined")).otherwise(pl.col("stream")).alias("stream"),
        pl.when(hit | moved).then(None).otherwise(pl.col("src_rank")).alias("src_rank"),
    )


def unused_file_name_ranks(df: pl.DataFrame, sources: list[Source]) -> list[str]:
    """One warning per file whose sibling name gave a rank (``task_file``) that :func:`_check_task_files` did not
    keep: the resolved table has rows of it but none with ``rank_source`` ``file_name``."""
    named = {s.rel: s.rank for s in sources if s.layout == "task_file" and s.rank is not None}
    if not named:
        return []
    kept = (
        df.lazy()
        .filter(pl.col("path").is_in(list(named)))
        .group_by("path")
        .agg((pl.col("rank_source") == "file_name").any().alias("kept"))
        .collect()
    )
    return [
        f"{path}: the rank its name gives ({named[path]}) is not used: its lines state another rank or several, "
        "or hold a launcher's reports (a batch script's or a node's output)"
        for path, ok in sorted(kept.iter_rows())
        if not ok
    ]


#: Optional column: how many rows a row stands for (a summary row of many identical NCCL COLL lines, see
#: ``correlator.ingest``); the per-file, per-node and per-rank majorities count it that many times.
WEIGHT = "_w"


def _weighted_mode(frame: pl.DataFrame, key: str, value: str, smallest_on_tie: bool = False) -> dict:
    """``{key: most frequent value}`` counting :data:`WEIGHT` (1 per row without it). Ties: the value seen
    first, or with ``smallest_on_tie`` the smallest."""
    w = pl.col(WEIGHT).fill_null(1) if WEIGHT in frame.columns else pl.lit(1)
    counts = (
        frame.with_row_index("__o")
        .group_by(key, value)
        .agg(w.sum().alias("__n"), pl.col("__o").min().alias("__first"))
    )
    tie = pl.col(value) if smallest_on_tie else pl.col("__first")
    best = (
        counts.sort([key, "__n", tie], descending=[False, True, False], nulls_last=True)
        .group_by(key, maintain_order=True)
        .first()
    )
    return dict(best.select(key, value).iter_rows())


def resolve(df: pl.DataFrame, stamps: Callable[[pl.DataFrame], pl.DataFrame] | None = None) -> pl.DataFrame:
    """Fill ``rank``, ``rank_source``, ``local_rank``, ``host`` and ``attempt`` for every row.

    Expects the parsed frame with source columns (``layout``, ``src_*``, ``node_key``) and prefix
    columns (``c10_rank``, ``tee_local_rank``, ``xport_rank``, ``srun_label``, ``xport_host``), and ``ts``; or,
    with ``stamps``, ``stamps(frame)`` gives the frame with ``ts``, taken before the first step that reads it
    (attempts by time): the steps before it run meanwhile (``correlator.ingest`` reads the stamps on a thread).
    A :data:`WEIGHT` column, when present, makes a row count as that many rows in the majorities.
    """
    weighted = WEIGHT in df.columns
    df = _demote_multi_rank_files(df)
    df = _check_task_files(df)
    df = _pair_launchers(df)
    df = _node_keys(df)
    df = _direct_ranks(df, weighted)
    offsets = _node_offsets(df, weighted)
    df = _ranks_via_offsets(df, offsets)
    if stamps is not None:
        df = stamps(df)
    df = _attempts(df)
    df = _launcher_ranks(df, offsets)
    df = _nccl_ranks(df)
    global_pgs = _global_pgs(df)
    df = _pg_and_message_ranks(df, global_pgs)
    df = _message_ranks(df, global_pgs)
    df = _host_ranks(df)
    df = _hosts(df)
    return df.drop([c for c in df.columns if c.startswith("__")])


def _node_keys(df: pl.DataFrame) -> pl.DataFrame:
    """``node_key`` refined by srun labels (a node index when torchrun tees the labelled lines, otherwise a
    rank, then moved to ``xport_rank``) and by transport-prefix hosts."""
    # srun labels: a node index when the labelled lines are tee'd by torchrun, otherwise a rank.
    labelled_tee = bool(
        df.select((pl.col("srun_label").is_not_null() & pl.col("tee_local_rank").is_not_null()).any()).item()
    )
    if labelled_tee:
        df = df.with_columns(
            pl.when(pl.col("srun_label").is_not_null())
            .then(pl.col("node_key") + "#" + pl.col("srun_label"))
            .otherwise(pl.col("node_key"))
            .alias("node_key")
        )
    else:
        df = df.with_columns(
            pl.coalesce(pl.col("xport_rank"), pl.col("srun_label").cast(pl.Int32, strict=False)).alias(
                "xport_rank"
            )
        )
    df = df.with_columns(
        pl.when(pl.col("xport_host").is_not_null())
        .then(pl.col("node_key") + "#" + pl.col("xport_host"))
        .otherwise(pl.col("node_key"))
        .alias("node_key")
    )

    return df


def _direct_ranks(df: pl.DataFrame, weighted: bool) -> pl.DataFrame:
    """``__direct``/``__direct_src``: the rank a row states (c10d or transport prefix, task file, path), a
    per-rank file's mode over its lines; ``local_rank`` from the folder or the tee prefix."""
    direct = pl.coalesce(pl.col("c10_rank"), pl.col("xport_rank"), pl.col("src_rank"))
    direct_src = (
        pl.when(pl.col("c10_rank").is_not_null())
        .then(pl.lit("c10d_prefix"))
        .when(pl.col("xport_rank").is_not_null())
        .then(pl.lit("transport_prefix"))
        .when(pl.col("src_rank").is_not_null() & (pl.col("layout") == "task_file"))
        .then(pl.lit("file_name"))
        .when(pl.col("src_rank").is_not_null())
        .then(pl.lit("path"))
    )
    local = pl.coalesce(pl.col("src_local_rank"), pl.col("tee_local_rank"))
    df = df.with_columns(
        direct.alias("__direct"), direct_src.alias("__direct_src"), local.alias("local_rank")
    )

    # A per-rank file belongs to one rank: the mode of the ranks its lines state.
    per_file = (
        df.lazy()
        .filter(pl.col("layout").is_in(_PER_RANK_LAYOUTS) & pl.col("__direct").is_not_null())
        .select("path", "__direct", *([WEIGHT] * weighted))
        .collect()
    )
    file_rank = (
        _weighted_mode(per_file, "path", "__direct")
        if weighted
        else dict(per_file.group_by("path").agg(pl.col("__direct").mode().first()).iter_rows())
    )
    # Small aggregates go back onto the (possibly millions of rows) frame as maps, not joins.
    df = df.with_columns(
        pl.col("path").replace_strict(file_rank, default=None, return_dtype=pl.Int32).alias("__file_rank")
    )
    is_rank_file = pl.col("layout").is_in(_PER_RANK_LAYOUTS)
    df = df.with_columns(
        pl.when(is_rank_file & pl.col("__file_rank").is_not_null())
        .then(pl.col("__file_rank"))
        .otherwise(pl.col("__direct"))
        .alias("__direct"),
        pl.when(is_rank_file & pl.col("__file_rank").is_not_null() & pl.col("__direct_src").is_null())
        .then(pl.lit("file"))
        .otherwise(pl.col("__direct_src"))
        .alias("__direct_src"),
    )

    return df


def _node_offsets(df: pl.DataFrame, weighted: bool) -> dict[str, int | None]:
    """Node offsets (global - local) per ``node_key``: learned wherever a row carries both, or stated by a
    launcher's rank map; 0 for the one node of a single-node job."""
    both = (
        df.lazy()
        .filter(pl.col("__direct").is_not_null() & pl.col("local_rank").is_not_null())
        .select("node_key", "__direct", "local_rank", *([WEIGHT] * weighted))
        .collect()
    )
    if weighted:
        offsets = _weighted_mode(
            both.with_columns((pl.col("__direct") - pl.col("local_rank")).alias("o")), "node_key", "o"
        )
    else:
        offsets = {
            k: _mode_int(v)
            for k, v in both.group_by("node_key")
            .agg((pl.col("__direct") - pl.col("local_rank")).alias("o"))
            .iter_rows()
        }
    offsets.update({k: v for k, v in _stated_offsets(df).items() if offsets.get(k) is None})
    nodes_with_local = set(
        df.lazy()
        .filter(
            pl.col("local_rank").is_not_null()
            | (
                pl.col("local_rank_stated").is_not_null()
                & pl.col("kind").is_in([Kind.WORKER_FAILED, Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY])
            )
        )
        .select(pl.col("node_key").drop_nulls().unique())
        .collect()["node_key"]
        .to_list()
    )
    if len(nodes_with_local) == 1:
        # One node holds every local rank seen: a single-node job (offset 0) — unless some line states a
        # global rank beyond that node's local ranks (then other nodes exist whose logs are missing).
        (only,) = nodes_with_local
        node_locals = (
            df.lazy()
            .filter(pl.col("node_key") == only)
            .select(pl.max_horizontal(pl.col("local_rank").max(), pl.col("local_rank_stated").max()))
            .collect()
            .item()
        )
        top = df.select(pl.max_horizontal(pl.col("__direct").max(), pl.col("rank_stated").max())).item()
        if top is None or node_locals is None or top <= node_locals:
            offsets.setdefault(only, 0)
    return offsets


def _ranks_via_offsets(df: pl.DataFrame, offsets: dict[str, int | None]) -> pl.DataFrame:
    """``rank`` and ``rank_source``: the stated rank, else the local rank plus its node's offset."""
    df = df.with_columns(
        pl.col("node_key").replace_strict(offsets, default=None, return_dtype=pl.Int32).alias("__offset")
    )
    via_local = pl.col("local_rank") + pl.col("__offset")
    df = df.with_columns(
        pl.coalesce(pl.col("__direct"), via_local).alias("rank"),
        pl.when(pl.col("__direct_src").is_not_null())
        .then(pl.col("__direct_src"))
        .when(via_local.is_not_null() & pl.col("src_local_rank").is_not_null())
        .then(pl.lit("folder+offset"))
        .when(via_local.is_not_null())
        .then(pl.lit("tee+offset"))
        .alias("rank_source"),
    )
    return df


def _pg_and_message_ranks(df: pl.DataFrame, global_pgs: list[str]) -> pl.DataFrame:
    """Ranks of rows that carry none yet: the ``[Rank r]`` of a work in a global PG, then an application
    line's stated rank (``rank_source`` ``pg_prefix`` / ``message``)."""
    # Old c10d lines (torch <= 2.1) carry no [rankN]: prefix; in the default PG the work's [Rank r] is global.
    pg_default = pl.col("pg").is_null() | pl.col("pg").is_in(global_pgs)
    df = df.with_columns(
        pl.when(pl.col("rank").is_null() & pl.col("pg_rank").is_not_null() & pg_default)
        .then(pl.lit("pg_prefix"))
        .otherwise(pl.col("rank_source"))
        .alias("rank_source"),
        pl.when(pl.col("rank").is_null() & pl.col("pg_rank").is_not_null() & pg_default)
        .then(pl.col("pg_rank"))
        .otherwise(pl.col("rank"))
        .alias("rank"),
    )
    df = df.with_columns(
        pl.when(pl.col("rank").is_null() & pl.col("rank_stated").is_not_null() & (pl.col("layer") == "app"))
        .then(pl.lit("message"))
        .otherwise(pl.col("rank_source"))
        .alias("rank_source"),
        pl.when(pl.col("rank").is_null() & (pl.col("layer") == "app"))
        .then(pl.col("rank_stated"))
        .otherwise(pl.col("rank"))
        .alias("rank"),
    )
    return df


def _global_pgs(df: pl.DataFrame) -> list[str]:
    """Process groups whose PG rank is the global rank: the default PG ``0``, and every PG whose lines that carry
    both a global ``[rankN]:`` and a ``[PG n Rank r]`` always show r == N (torch 2.2 – 2.4 number the default PG 1)."""
    both = df.filter(
        pl.col("pg").is_not_null() & pl.col("pg_rank").is_not_null() & pl.col("rank").is_not_null()
    )
    same = both.group_by("pg").agg(
        (pl.col("rank") == pl.col("pg_rank")).all().alias("same"), pl.len().alias("n")
    )
    return sorted({"0", *same.filter(pl.col("same") & (pl.col("n") >= 2))["pg"].to_list()})


def _message_ranks(df: pl.DataFrame, global_pgs: list[str]) -> pl.DataFrame:
    """Ranks a fault message states about itself, for rows that have no rank yet (a pasted excerpt without
    prefixes): ``[PG n Rank r]`` / ``[Rank r]`` of a global PG, ``aborted on rank r`` (``message``); and, only on a
    single node with one process per GPU, the CUDA device index a CUDA error names (``gpu_index``, weak)."""
    if "msg_rank" not in df.columns:
        return df
    by_msg = (
        pl.col("rank").is_null()
        & pl.col("msg_rank").is_not_null()
        & (pl.col("msg_pg").is_null() | pl.col("msg_pg").is_in(global_pgs))
    )
    df = df.with_columns(
        pl.when(by_msg).then(pl.lit("message")).otherwise(pl.col("rank_source")).alias("rank_source"),
        pl.when(by_msg).then(pl.col("msg_rank")).otherwise(pl.col("rank")).alias("rank"),
    )
    # NCCL's ``[cudaDev]`` is the device of the logging process: the local rank under torchrun (one GPU each).
    nccl_dev = pl.when((pl.col("layer") == "nccl") & pl.col("rank").is_null()).then(pl.col("cuda_dev"))
    df = df.with_columns(pl.coalesce(pl.col("gpu_index"), nccl_dev).alias("gpu_index"))
    if df.select(pl.col("gpu_index").is_not_null().any()).item():
        hosts = (
            df.select(pl.coalesce(pl.col("host"), pl.col("xport_host"), pl.col("src_host")))
            .to_series()
            .drop_nulls()
        )
        top = df.select(pl.max_horizontal(pl.col("rank").max(), pl.col("world_size").max())).item()
        if (
            hosts.n_unique() <= 1
            and df["node_key"].drop_nulls().n_unique() <= 1
            and (top is None or top <= 16)
        ):
            by_gpu = pl.col("rank").is_null() & pl.col("gpu_index").is_not_null()
            df = df.with_columns(
                pl.when(by_gpu)
                .then(pl.lit("gpu_index"))
                .otherwise(pl.col("rank_source"))
                .alias("rank_source"),
                pl.when(by_gpu).then(pl.col("gpu_index")).otherwise(pl.col("rank")).alias("rank"),
            )
    return df


def _host_ranks(df: pl.DataFrame) -> pl.DataFrame:
    """Rows without a rank in the stream of a transport host (``xport_host``: kubectl's ``[pod/NAME/…]``, pdsh's
    ``host: ``) take that host's rank where each host runs one rank: the hosts are at least as many as the
    ranks of the job (world size, or the highest rank seen plus one), and every host whose rows state a rank
    states one, a rank no other host states (``rank_source`` ``host``; a PyTorchJob's pods, one worker each,
    streamed by ``kubectl logs --prefix``: a worker's traceback carries no rank of its own)."""
    cols = set(df.columns)
    if "xport_host" not in cols or not df.select(pl.col("xport_host").is_not_null().any()).item():
        return df
    if not df.select((pl.col("rank").is_null() & pl.col("xport_host").is_not_null()).any()).item():
        return df
    hosts = df["xport_host"].drop_nulls().n_unique()
    top = df.select(
        pl.max_horizontal(
            pl.col("rank").max() + 1, pl.col("world_size").max() if "world_size" in cols else None
        )
    ).item()
    if top is None or hosts < top:
        return df
    stated = (
        df.lazy()
        .filter(pl.col("xport_host").is_not_null() & pl.col("rank").is_not_null())
        .group_by("xport_host")
        .agg(pl.col("rank").unique().alias("r"))
        .collect()
    )
    if stated.height == 0 or (stated["r"].list.len() != 1).any():
        return df
    stated = stated.with_columns(pl.col("r").list.first())
    if stated["r"].n_unique() != stated.height:
        return df
    by_host = dict(stated.iter_rows())
    fill = pl.col("rank").is_null() & pl.col("xport_host").is_in(list(by_host))
    return df.with_columns(
        pl.when(fill).then(pl.lit("host")).otherwise(pl.col("rank_source")).alias("rank_source"),
        pl.when(fill)
        .then(pl.col("xport_host").replace_strict(by_host, default=None, return_dtype=pl.Int32))
        .otherwise(pl.col("rank"))
        .alias("rank"),
    )


def _stated_offsets(df: pl.DataFrame) -> dict[str, int]:
    """Node offsets from a launcher's host -> global ranks map (DeepSpeed ``global_rank_mapping``)."""
    from parsers.deepspeed import rank_mapping

    rows = (
        df.lazy()
        .filter(pl.col("message").str.contains("global_rank_mapping=", literal=True))
        .select("message")
        .collect()
    )
    by_host: dict[str, int] = {}
    for msg in rows["message"].to_list():
        for host, ranks in rank_mapping(msg).items():
            if ranks:
                by_host[host.split(".")[0]] = min(ranks)
    if not by_host:
        return {}
    nodes = (
        df.select(
            "node_key", pl.coalesce(pl.col("xport_host"), pl.col("host"), pl.col("src_host")).alias("h")
        )
        .drop_nulls()
        .unique()
    )
    return {k: by_host[h] for k, h in nodes.iter_rows() if h in by_host}


def _launcher_ranks(df: pl.DataFrame, offsets: dict[str, int | None]) -> pl.DataFrame:
    """Ranks of agent lines: failure entries state them; ``failed … local_rank`` and pids map to them."""
    entries = pl.col("kind").is_in([Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY]) | (
        (pl.col("kind") == Kind.WORKER_FAILED) & pl.col("rank_stated").is_not_null()
    )
    spawned = (
        (pl.col("kind") == Kind.LOG)
        & (pl.col("layer") == "elastic")
        & pl.col("local_rank_stated").is_not_null()
        & pl.col("pid").is_not_null()
    )
    failed = ((pl.col("kind") == Kind.WORKER_FAILED) & pl.col("rank_stated").is_null()) | spawned
    offset = pl.col("__offset")
    # The ChildFailedError summary states (global rank, pid): prefer it to local rank + a guessed offset.
    stated = (
        df.lazy()
        .filter(entries & pl.col("pid").is_not_null() & pl.col("rank_stated").is_not_null())
        .select("pid", "rank_stated")
        .collect()
        .group_by("pid")
        .agg(pl.col("rank_stated").n_unique().alias("n"), pl.col("rank_stated").first())
    )
    entry_pid = {p: r for p, n, r in stated.iter_rows() if n == 1}
    by_pid = pl.col("pid").replace_strict(entry_pid, default=None, return_dtype=pl.Int32)
    df = df.with_columns(
        pl.when(entries)
        .then(pl.col("rank_stated"))
        .when(failed & pl.col("rank").is_null() & by_pid.is_not_null())
        .then(by_pid)
        .when(failed & pl.col("rank").is_null())
        .then(pl.col("local_rank_stated") + offset)
        .otherwise(pl.col("rank"))
        .alias("rank"),
        pl.when(entries | (failed & pl.col("rank").is_null() & (offset.is_not_null() | by_pid.is_not_null())))
        .then(pl.lit("launcher"))
        .otherwise(pl.col("rank_source"))
        .alias("rank_source"),
        pl.when(entries | failed)
        .then(pl.coalesce(pl.col("local_rank_stated"), pl.col("local_rank")))
        .otherwise(pl.col("local_rank"))
        .alias("local_rank"),
    )
    # pid -> rank from every row that knows both (entries, failed lines, NCCL lines in rank files).
    known = (
        df.lazy()
        .filter(pl.col("pid").is_not_null() & pl.col("rank").is_not_null())
        .select("pid", "rank")
        .unique()
        .collect()
    )
    counts = known.group_by("pid").agg(pl.col("rank").n_unique().alias("n"), pl.col("rank").first())
    pid_rank = {p: r for p, n, r in counts.iter_rows() if n == 1}
    signalled = pl.col("kind") == Kind.WORKER_SIGNALLED
    df = (
        df.with_columns(
            pl.when(signalled & pl.col("rank").is_null())
            .then(pl.col("pid").replace_strict(pid_rank, default=None, return_dtype=pl.Int32))
            .otherwise(pl.col("rank"))
            .alias("__r")
        )
        .with_columns(
            pl.when(pl.col("rank").is_null() & pl.col("__r").is_not_null())
            .then(pl.lit("launcher"))
            .otherwise(pl.col("rank_source"))
            .alias("rank_source"),
            pl.col("__r").alias("rank"),
        )
        .drop("__r")
    )
    df = _pid_order(df, offsets)
    df = _pid_gap(df, offsets)
    # Any other line that states a pid a rank is known by (Open MPI's backtrace handler ``[host:pid] Signal: …``).
    known = (
        df.filter(pl.col("pid").is_not_null() & pl.col("rank").is_not_null()).select("pid", "rank").unique()
    )
    counts = known.group_by("pid").agg(pl.col("rank").n_unique().alias("n"), pl.col("rank").first())
    pid_rank = {p: r for p, n, r in counts.iter_rows() if n == 1}
    if not pid_rank:
        return df
    by_pid = pl.col("pid").replace_strict(pid_rank, default=None, return_dtype=pl.Int32)
    todo = pl.col("rank").is_null() & pl.col("pid").is_not_null() & (pl.col("layer") != "nccl")
    return df.with_columns(
        pl.when(todo & by_pid.is_not_null())
        .then(pl.lit("launcher"))
        .otherwise(pl.col("rank_source"))
        .alias("rank_source"),
        pl.when(todo).then(by_pid).otherwise(pl.col("rank")).alias("rank"),
    )


def _pid_order(df: pl.DataFrame, offsets: dict[str, int | None]) -> pl.DataFrame:
    """torchrun spawns local ranks in order, so an agent's worker pids ascend with local rank.

    Used only for worker lines still without a rank, and only when the ordering agrees with every pid
    whose local rank is known (``failed … local_rank: L (pid: P)``).
    """
    workers = (
        df.lazy()
        .filter(
            pl.col("kind").is_in(
                [Kind.WORKER_FAILED, Kind.WORKER_SIGNALLED, Kind.FAILURE_ENTRY, Kind.ROOT_CAUSE_ENTRY]
            )
            & pl.col("pid").is_not_null()
        )
        .select("node_key", "attempt", "pid", "local_rank", "rank")
        .collect()
    )
    if workers.filter(pl.col("rank").is_null()).height == 0:
        return df
    assign: dict[int, int] = {}
    for (node, _attempt), grp in workers.group_by(["node_key", "attempt"]):
        pids = sorted(set(grp["pid"].to_list()))
        anchors = {p: lr for p, lr in grp.select("pid", "local_rank").drop_nulls().iter_rows()}
        if not anchors or any(pids.index(p) != lr for p, lr in anchors.items()):
            continue
        # Gaps between worker pids are common (workers fork data-loader and compile processes while the agent
        # is still spawning: real torchrun logs show 598577, 598579-598581, 598583 …); the order still follows
        # the local ranks, as every anchor confirms. A worker that exited 0 early is listed nowhere and would
        # shift the ranks above it: the mapping stays ``pid_order`` (weak).
        base = offsets.get(node) or 0
        for i, p in enumerate(pids):
            assign[p] = base + i
    if not assign:
        return df
    guess = pl.col("pid").replace_strict(assign, default=None, return_dtype=pl.Int32)
    todo = pl.col("kind").is_in([Kind.WORKER_SIGNALLED, Kind.WORKER_FAILED]) & pl.col("rank").is_null()
    return df.with_columns(
        pl.when(todo & guess.is_not_null())
        .then(pl.lit("pid_order"))
        .otherwise(pl.col("rank_source"))
        .alias("rank_source"),
        pl.when(todo).then(guess).otherwise(pl.col("rank")).alias("rank"),
    )


def _pid_gap(df: pl.DataFrame, offsets: dict[str, int | None]) -> pl.DataFrame:
    """Identity from the neighbours: the agent SIGTERMs every live worker by pid, and one worker failed on a
    line that lost its pid and local rank (a paste cut mid-line: ``failed (exitcode: -9) local_rankroot/…``
    after ``Sending process 53038 closing``, ``… 53039 …``, ``… 53041 …``, alpaca#183). torchrun spawns local
    ranks in order, so when the signalled pids run consecutively but for exactly one hole, the hole is the
    failed worker: its index in the run is its local rank, and the signalled pids take the others (rank
    source ``pid_gap``, weak like ``pid_order``). Nothing is guessed with no hole or with several (a pid gap
    alone can also be a data-loader fork), or when a worker of the group already has a local rank."""
    agent = [Kind.WORKER_FAILED, Kind.WORKER_SIGNALLED]
    rows = (
        df.lazy()
        .filter(pl.col("kind").is_in(agent) & (pl.col("layer") == "elastic"))
        .select("node_key", "attempt", "kind", "pid", "local_rank", "rank", "path", "line")
        .collect()
    )
    if rows.height < 3 or rows.filter(pl.col("kind") == Kind.WORKER_FAILED).height == 0:
        return df
    assign_pid: dict[int, int] = {}
    assign_line: dict[str, int] = {}
    for (node, _attempt), grp in rows.group_by(["node_key", "attempt"]):
        if grp["rank"].drop_nulls().len() or grp["local_rank"].drop_nulls().len():
            continue
        lost = grp.filter((pl.col("kind") == Kind.WORKER_FAILED) & pl.col("pid").is_null())
        sig = sorted(set(grp.filter(pl.col("kind") == Kind.WORKER_SIGNALLED)["pid"].drop_nulls().to_list()))
        if lost.height != 1 or len(sig) < 2 or sig[-1] - sig[0] > 4 * len(sig):
            continue
        holes = sorted(set(range(sig[0], sig[-1] + 1)) - set(sig))
        if len(holes) != 1:
            continue
        run = sorted([*sig, holes[0]])
        base = offsets.get(node) or 0
        assign_pid.update({p: base + i for i, p in enumerate(run) if p != holes[0]})
        assign_line[f"{lost['path'][0]}:{lost['line'][0]}"] = base + run.index(holes[0])
    if not assign_line:
        return df
    by_pid = pl.col("pid").replace_strict(assign_pid, default=None, return_dtype=pl.Int32)
    where = pl.concat_str(pl.col("path"), pl.lit(":"), pl.col("line").cast(pl.String))
    by_line = where.replace_strict(assign_line, default=None, return_dtype=pl.Int32)
    todo = pl.col("kind").is_in(agent) & (pl.col("layer") == "elastic") & pl.col("rank").is_null()
    guess = pl.coalesce(
        pl.when(pl.col("kind") == Kind.WORKER_FAILED).then(by_line),
        pl.when(pl.col("kind") == Kind.WORKER_SIGNALLED).then(by_pid),
    )
    return df.with_columns(
        pl.when(todo & guess.is_not_null())
        .then(pl.lit("pid_gap"))
        .otherwise(pl.col("rank_source"))
        .alias("rank_source"),
        pl.when(todo).then(guess).otherwise(pl.col("rank")).alias("rank"),
    )


def _nccl_ranks(df: pl.DataFrame) -> pl.DataFrame:
    """(host, pid) -> global rank from NCCL init/abort lines of the largest communicator of each process."""
    stated = (
        df.lazy()
        .filter(
            pl.col("kind").is_in([Kind.NCCL_INIT, Kind.NCCL_ABORT, Kind.LOG])
            & (pl.col("layer") == "nccl")
            & pl.col("rank_stated").is_not_null()
            & pl.col("pid").is_not_null()
        )
        .select("host", "pid", "world_size", "rank_stated")
        .collect()
    )
    known_rank = (
        df.lazy()
        .filter((pl.col("layer") == "nccl") & pl.col("rank").is_not_null() & pl.col("pid").is_not_null())
        .select("host", "pid", "rank")
        .unique()
        .collect()
    )
    pairs: dict[tuple[str | None, int], int] = {}
    for host, pid, grp in ((h, p, g) for (h, p), g in stated.group_by(["host", "pid"])):
        best = grp.sort("world_size", descending=True, nulls_last=True).row(0, named=True)
        pairs[(host, pid)] = best["rank_stated"]
    for host, pid, rank in known_rank.select("host", "pid", "rank").unique().iter_rows():
        pairs.setdefault((host, pid), rank)
    if not pairs:
        return df
    key = pl.concat_str([pl.col("host").fill_null("\0"), pl.col("pid").cast(pl.String)], separator="\t")
    mapping = {f"{h if h is not None else chr(0)}\t{p}": r for (h, p), r in pairs.items()}
    df = df.with_columns(
        pl.when(pl.col("pid").is_not_null())
        .then(key.replace_strict(mapping, default=None, return_dtype=pl.Int32))
        .otherwise(None)
        .alias("__nr")
    )
    nccl_line = pl.col("layer") == "nccl"
    return df.with_columns(
        pl.when(pl.col("rank").is_null() & nccl_line & pl.col("__nr").is_not_null())
        .then(pl.lit("nccl_pid"))
        .otherwise(pl.col("rank_source"))
        .alias("rank_source"),
        pl.when(pl.col("rank").is_null() & nccl_line)
        .then(pl.col("__nr"))
        .otherwise(pl.col("rank"))
        .alias("rank"),
    ).drop("__nr")


def _hosts(df: pl.DataFrame) -> pl.DataFrame:
    """Short host names; rows of a rank (or a node) without a host take the one that rank's lines name."""
    short = pl.col("host").str.split(".").list.first()
    df = df.with_columns(
        pl.coalesce(short, pl.col("xport_host"), pl.col("src_host")).alias("host")
    ).with_columns(
        pl.when(pl.col("host").is_in(list(_HOSTLESS))).then(None).otherwise(pl.col("host")).alias("host")
    )
    w = [WEIGHT] if WEIGHT in df.columns else []
    ranked = (
        df.lazy()
        .filter(pl.col("rank").is_not_null() & pl.col("host").is_not_null())
        .select("rank", "host", *w)
        .collect()
    )
    noded = (
        df.lazy()
        .filter(pl.col("node_key").is_not_null() & pl.col("host").is_not_null())
        .select("node_key", "host", *w)
        .collect()
    )
    if w:
        by_rank = _weighted_mode(ranked, "rank", "host", smallest_on_tie=True)
        single = (
            noded.group_by("node_key")
            .agg(pl.col("host").n_unique().alias("n"))
            .filter(pl.col("n") == 1)["node_key"]
        )
        by_node = {
            k: v
            for k, v in _weighted_mode(noded, "node_key", "host", smallest_on_tie=True).items()
            if k in set(single.to_list())
        }
    else:
        by_rank = dict(ranked.group_by("rank").agg(pl.col("host").mode().sort().first()).iter_rows())
        by_node = dict(
            noded.group_by("node_key")
            .agg(pl.col("host").mode().sort().first(), pl.col("host").n_unique().alias("n"))
            .filter(pl.col("n") == 1)
            .select("node_key", "host")
            .iter_rows()
        )
    return df.with_columns(
        pl.coalesce(
            pl.col("host"),
            pl.col("rank").replace_strict(by_rank, default=None, return_dtype=pl.String),
            pl.col("node_key").replace_strict(by_node, default=None, return_dtype=pl.String),
        ).alias("host")
    )


#: torchrun's first lines of a launch (torch/distributed/run.py's OMP_NUM_THREADS warning, torch 1.9 – 2.15, where
#: the variable is unset and nproc-per-node > 1; launcher/api.py's INFO line, torch 1.10 – 2.15).
_LAUNCH_START = (
    "Setting OMP_NUM_THREADS environment variable for each process",
    "Starting elastic_operator with launch configs",
)
#: The kinds of torchrun's report at the end of a failed launch (the ChildFailedError block and its entries).
_LAUNCH_END = [Kind.LAUNCHER_ERROR, Kind.ROOT_CAUSE_ENTRY]


def _launches(df: pl.DataFrame, need: pl.Series) -> tuple[pl.Series, list[tuple[int, object, str, int]]]:
    """Launches of torchrun one after the other in one file (a requeued Slurm job's ``--open-mode=append``
    output, a re-run into the same file): a launch's first lines (:data:`_LAUNCH_START`) after the report that
    ended a failed one (:data:`_LAUNCH_END`) start the next. The first lines of several agents at the start of
    one launch (one per node in one Slurm output) follow no report: one launch. Returns, for the rows ``need``
    marks (whole files), the number of launches before each row's in its file (0 for most files), and each
    later launch's ``(number, first stamp, its file, its first row)``."""
    zero = pl.repeat(0, int(need.sum()), dtype=pl.Int32, eager=True)
    if "message" not in df.columns:
        return zero, []
    pattern = "|".join(re.escape(s) for s in _LAUNCH_START)
    marks = (
        df.lazy()
        .with_row_index("__row")
        .filter(pl.lit(need) & pl.col("layer").is_in(["elastic", "launcher"]).fill_null(False))
        .with_columns(
            pl.col("message").str.contains(pattern).fill_null(False).alias("__start"),
            pl.col("kind").is_in(_LAUNCH_END).fill_null(False).alias("__end"),
        )
        .filter(pl.col("__start") | pl.col("__end"))
        .select("__row", "path", "line", "ts", "__start", "__end")
        .collect()
    )
    if not marks["__start"].any() or not marks["__end"].any():
        return zero, []
    at: list[tuple[int, int]] = []  # (row, launches before it) at each later launch's first line
    starts: dict[int, tuple[object, str, int]] = {}  # launch -> (first stamp, its file, its row)
    for path_rows in marks.sort("path", "line", "__row").partition_by("path", maintain_order=True):
        n, ended = 0, None
        for row, path, line, ts, start, end in path_rows.iter_rows():
            if end:
                ended = line
            elif start and ended is not None:
                n += 1
                first, ts = _launch_first_row(df, path, ended, line, row, ts)
                at.append((first, n))
                ended = None
                if ts is not None and (n not in starts or ts < starts[n][0]):  # type: ignore[operator]
                    starts[n] = (ts, path, first)
    if not at:
        return zero, []
    rows, counts = zip(*at, strict=True)
    launch = (
        pl.repeat(None, df.height, dtype=pl.Int32, eager=True)
        .scatter(list(rows), pl.Series(counts, dtype=pl.Int32))
        .alias("__launch")
    )
    filled = (
        df.select("path")
        .with_columns(launch)
        .select(pl.col("__launch").forward_fill().over("path").fill_null(0))
        .to_series()
        .filter(need)
    )
    return filled, [(n, t, path, row) for n, (t, path, row) in sorted(starts.items())]


def _launch_first_row(
    df: pl.DataFrame, path: str, end_line: int, start_line: int, start_row: int, start_ts: object
) -> tuple[int, object]:
    """The first row of a launch whose first marked line is ``start_line`` of ``path`` (row ``start_row``), the
    last report of the launch before it at ``end_line``: the row after the longest pause between stamped rows
    from the report to the marked line (the old agent's teardown lines go with the report; the new agent's
    lines before its marked one, a c10d banner, with it). Returns ``(row, its stamp)``; the marked row where no
    row between has a stamp."""
    seg = (
        df.lazy()
        .with_row_index("__row")
        .filter((pl.col("path") == path) & pl.col("line").is_between(end_line, start_line, closed="right"))
        .filter(pl.col("ts").is_not_null())
        .select("__row", "ts")
        .collect()
    )
    if seg.height < 2:
        return start_row, start_ts
    gaps = seg["ts"].diff()
    i = int(gaps.arg_max())  # type: ignore[arg-type]
    return int(seg["__row"][i]), seg["ts"][i]


def _attempts(df: pl.DataFrame) -> pl.DataFrame:
    """Attempt from the ``attempt_N`` folder; in launcher/combined files, restarts and launches
    (:func:`_launches`) seen so far, or (when torchrun logged no restart line, its default) the latest
    ``attempt_N`` folder, or later launch, whose first stamped row is not after the row's time (rows without a
    time take the attempt of the row above them)."""
    stated = df["src_attempt"].cast(pl.Int32)
    need = stated.is_null()
    if not need.any():  # every file under an ``attempt_N`` folder (torchrun's --log-dir): nothing to infer
        return df.with_columns(stated.alias("attempt"))
    restarts = (pl.col("kind") == Kind.RESTART).cast(pl.Int32).cum_sum().over("path") - (
        pl.col("kind") == Kind.RESTART
    ).cast(pl.Int32)
    launches, launch_starts = _launches(df, need)
    starts = (
        df.filter(pl.col("src_attempt").is_not_null() & pl.col("ts").is_not_null())
        .group_by("src_attempt")
        .agg(pl.col("ts").min())
        .sort("src_attempt")
        .rows()
    )
    if (
        launch_starts
    ):  # each later launch: its attempt as its launcher file numbers it (launches and restarts)
        restart_rows = (
            df.with_row_index("__row").filter(pl.col("kind") == Kind.RESTART).select("path", "__row")
        )
        for n, t, path, row in launch_starts:
            before = restart_rows.filter((pl.col("path") == path) & (pl.col("__row") < row)).height
            starts.append((n + before, t))
        starts.sort(key=lambda x: x[1])
    by_time: pl.Expr = pl.lit(None, dtype=pl.Int32)
    for a, start in starts:
        by_time = pl.when(pl.col("ts") >= start).then(pl.lit(a, dtype=pl.Int32)).otherwise(by_time)
    by_time = pl.when(pl.col("ts").is_not_null()).then(by_time).otherwise(None).forward_fill().over("path")
    # The rows without a stated attempt are whole files (``src_attempt`` comes from the path): the windows
    # over ``path`` read those rows only.
    inferred = (
        df.filter(need)
        .with_columns(launches.alias("__launches"))
        .select(
            pl.coalesce(pl.max_horizontal(restarts + pl.col("__launches"), by_time), pl.lit(0)).cast(pl.Int32)
        )
        .to_series()
    )
    return df.with_columns(stated.scatter(need.arg_true(), inferred).alias("attempt"))
