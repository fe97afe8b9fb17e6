"""NCCL COLL fast-path rows of ingest: the cut of ``ingest(keep_coll=...)`` (the lines diagnosis does not
need left out while the files are read, :class:`CollCut`) and the merge of the fast-path rows with the
generic rows after identity (:func:`resolve_with_fast_rows`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import polars as pl

import parsers
from correlator import identity
from correlator.discover import Source
from correlator.lines import compact, plain_lines
from correlator.read import read_lines
from correlator.schema import PARSE_KEEP, POLARS_SCHEMA, Kind
from parsers import coll, timestamps

#: Positions in the line frame of :func:`_reduce_coll_lines` (a private column).
_LINE_IDX = "__li"
#: Per row of a cut lines frame: the line was a COLL fast-path candidate of a file that was cut.
_CAND = "__cand"
#: Text read per batch before its NCCL COLL lines are cut (``ingest(keep_coll=...)``): the lines of one batch
#: are held whole, the batches after the cut only keep what remains.
CUT_BATCH_BYTES = 32 << 20


class CollCut:
    """The reading side of ``ingest(keep_coll=...)``: files are gathered into batches of about
    :data:`CUT_BATCH_BYTES` of text; each batch becomes a lines frame (``plain_lines``) whose NCCL COLL
    lines are cut (:func:`_reduce_coll_lines`) while the next batch is read (one worker thread: the cut runs
    in polars, which releases the GIL, while reading runs in Python), and at most :data:`_IN_FLIGHT` batches
    wait for their cut, so the text of the cut lines is held for a few batches only. Every decision of the
    cut is per file (fast-path shape per line, the file-level tests of ``parsers.fast_split``, runs within
    one file), so cutting batch by batch cuts the same lines as cutting all files at once. Results are
    kept in batch order; an error in the worker is raised by :meth:`add` or :meth:`finish`."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.batch: list[tuple[int, Source, pl.Series | list[str]]] = []
        self.first: list[int] = []
        self.size = 0
        self.frames: list[pl.DataFrame] = []
        self.cut: list[pl.DataFrame] = []
        #: Paths of the files of which some lines were cut.
        self.paths: set[str] = set()
        self.pool: ThreadPoolExecutor | None = None
        self.pending: deque[Future[tuple[pl.DataFrame, pl.DataFrame | None, set[str]]]] = deque()

    def add(
        self,
        i: int,
        src: Source,
        lines: pl.Series | list[str],
        text_bytes: int | None = None,
        first: int = 1,
        more: bool = False,
    ) -> None:
        """Queue the ``lines`` of one file (``text_bytes``: their size with newlines, when known). A file past a
        cap comes in runs of consecutive lines (its head, then its tail): ``first`` the line number of the run's
        first line, ``more`` True for every run but the last (a batch holds whole files)."""
        self.batch.append((i, src, lines))
        self.first.append(first)
        if text_bytes is None:
            if isinstance(lines, list):
                text_bytes = sum(len(x.encode()) + 1 for x in lines)
            else:
                text_bytes = int(lines.str.len_bytes().sum() or 0) + lines.len()
        self.size += text_bytes
        if self.size >= CUT_BATCH_BYTES and not more:
            self._flush()

    def _flush(self) -> None:
        if not self.batch:
            return
        frame = plain_lines(self.batch, first=self.first)
        self.batch, self.first, self.size = [], [], 0
        if self.pool is None:
            self.pool = ThreadPoolExecutor(_CUT_WORKERS, thread_name_prefix="rankscope-cut")
        self.pending.append(self.pool.submit(_cut_batch, frame, self.keep))
        while len(self.pending) > _IN_FLIGHT:
            self._take()

    def _take(self) -> None:
        red, dropped, paths = self.pending.popleft().result()
        self.frames.append(red)
        if dropped is not None:
            self.cut.append(dropped)
        self.paths |= paths

    def finish(self) -> list[pl.DataFrame]:
        """The lines frames of all batches (columns of ``plain_lines`` plus :data:`_CAND` and, where lines
        were cut, :data:`identity.WEIGHT`)."""
        try:
            self._flush()
            while self.pending:
                self._take()
        finally:
            self.close()
        return self.frames

    def close(self) -> None:
        """Stop the worker (batches not cut yet are dropped); safe to call more than once."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        self.pending.clear()

    def dropped(self) -> pl.DataFrame:
        """``(__src, line)`` of every line cut."""
        if not self.cut:
            return pl.DataFrame(schema={"__src": pl.Int64, "line": pl.Int64})
        return pl.concat(self.cut)


#: Batches read but not yet cut, and the threads that cut them (see :class:`CollCut`). One thread: the
#: reading and the cut then fill two cores; a second cut thread was measured no faster on 2 cores.
_IN_FLIGHT = 2
_CUT_WORKERS = 1


def _cut_batch(frame: pl.DataFrame, keep: int) -> tuple[pl.DataFrame, pl.DataFrame | None, set[str]]:
    """One batch of :class:`CollCut`: ``(lines frame left, (__src, line) cut or None, paths cut)``."""
    fast = parsers.fast_split(frame)
    if fast is None:
        return frame.with_columns(pl.lit(False).alias(_CAND)), None, set()
    red, dropped, paths = _reduce_coll_lines(frame, keep, fast)
    # Own the text of the rows kept when most of the batch was cut (else its buffers stay alive).
    return (compact(red) if red.height * 2 < frame.height else red), dropped, paths


def reread(rels: set[str], by_rel: dict[str, Source], order: dict[int, int]) -> pl.DataFrame:
    """The lines frame of the files ``rels``, every line (a file the cut must give back whole; see
    :func:`parse_reduced`), read again from disk: the lines the cut left out were not kept."""
    parts = []
    first = []
    for rel in sorted(rels):
        src = by_rel[rel]
        res = read_lines(src.path, src.rel)
        if res.n_lines:
            for line, lines in res.parts():
                parts.append((order[id(src)], src, lines))
                first.append(line)
    if not parts:
        return pl.DataFrame(schema={"__src": pl.Int64, "path": pl.String, "line": pl.Int64})
    return plain_lines(parts, first=first).with_columns(pl.lit(False).alias(_CAND))


def _reduce_coll_lines(
    df: pl.DataFrame, keep: int, fast: pl.Series
) -> tuple[pl.DataFrame, pl.DataFrame, set[str]]:
    """The lines frame ``df`` (of ``plain_lines``, with ``__src``) without the NCCL COLL lines diagnosis
    does not need.

    ``fast``: the rows of ``df`` that take the COLL fast path (``parsers.fast_split``); files of layout
    ``stream`` (launcher pairing reads their text line by line) keep every
    line. Among the other fast rows, a *run* is a maximal sequence (in row order, fast rows only) of one
    file and one ``host:pid`` (the line's first token without its thread id): the unit identity resolution
    summarizes (``resolve_with_fast_rows``). Per run, kept: its first row, and per communicator (the
    ``comm 0x..`` token) the ``keep`` rows with the highest opCount (a tie: the later line). The first row
    kept of each run carries the weight (:data:`identity.WEIGHT`) of the run's lines left out, so the
    majorities of identity resolution count every line as before.

    Why exact: a run and a communicator lie inside one (rank, process group) of the full table (rank is
    resolved per run; the PG is a function of host, pid and comm), so the last ``keep`` rows per (rank, PG)
    by SeqNum, which is all ``streaming.reduce_for_diagnosis`` keeps of these rows, are among the kept ones;
    the world size (``[nranks=N]``, one per communicator) keeps its maximum; stamps are inherited from the
    generic rows, all kept. Returns ``(lines frame with column _CAND, dropped (__src, line), paths cut)``;
    ``_CAND`` marks the rows that were candidates (fast rows of files not kept whole).
    """
    cand = (pl.Series(fast) & (df["layout"] != "stream").fill_null(True)).fill_null(False)
    raw = pl.col("raw")
    # A line of the fast-path shape has space-free tokens and pointer buffers, so these literals occur
    # once, in place (as in ``parsers.coll._parse_chunk``); ``host:pid`` is read once per distinct head.
    c = (
        df.select("__src", "path", "raw", "line")
        .with_row_index(_LINE_IDX)
        .filter(cand)
        .select(
            _LINE_IDX,
            "__src",
            "path",
            "line",
            raw.str.slice(0, raw.str.find(" NCCL INFO ", literal=True)).alias("head"),
            coll.between(raw, ": opCount ", " sendbuff ")
            .str.to_integer(base=16, strict=False)
            .fill_null(-(2**63))
            .alias("seq"),
            coll.between(raw, " comm ", " [nranks=").alias("comm"),
        )
    )
    hp = coll.per_distinct(c["head"], pl.col(coll.DISTINCT).str.extract(r"^([^ :]+:[0-9]+):", 1).alias("hp"))
    c = c.drop("head").with_columns(hp["hp"])
    none = c.select("__src", "line").clear()
    if c.height == 0:
        return df.with_columns(cand.alias(_CAND)), none, set()
    starts = (
        pl.col("path").ne_missing(pl.col("path").shift(1)) | pl.col("hp").ne_missing(pl.col("hp").shift(1))
    ).fill_null(True)
    c = c.with_columns(starts.alias("first"), (starts.cum_sum() - 1).alias("run"))
    top = (
        c.lazy()
        .group_by("run", "comm")
        .agg(pl.col(_LINE_IDX).top_k_by([pl.col("seq"), pl.col(_LINE_IDX)], keep))
        .explode(_LINE_IDX)
        .select(_LINE_IDX)
        .collect()[_LINE_IDX]
    )
    kept = c["first"] | c[_LINE_IDX].is_in(top.implode())
    if bool(kept.all()):
        return df.with_columns(cand.alias(_CAND)), none, set()
    ck = c.select(_LINE_IDX, "run", "first").with_columns(kept.alias("k"))
    # The run's first row carries the lines of its run that are left out.
    lost = ck.group_by("run").agg((~pl.col("k")).sum().alias("lost"))
    w = ck.filter("first").join(lost, on="run", how="left")
    weight = (
        pl.Series(identity.WEIGHT, [None], pl.Int64)
        .extend_constant(None, df.height - 1)
        .scatter(w[_LINE_IDX], (w["lost"] + 1).cast(pl.Int64))
    )
    drop_idx = ck.filter(~pl.col("k"))[_LINE_IDX]
    dropped = c.filter(~kept)
    reduced_paths = set(dropped["path"].unique().to_list())
    keep_mask = pl.Series([True]).extend_constant(True, df.height - 1).scatter(drop_idx, False)
    out = df.with_columns(weight, cand.alias(_CAND)).filter(keep_mask)
    return out, dropped.select("__src", "line"), reduced_paths


def parse_reduced(
    df: pl.DataFrame,
    dropped: pl.DataFrame,
    paths: set[str],
    reread: Callable[[set[str]], pl.DataFrame],
) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame]:
    """``parsers.parse_lines_split`` of the lines frame ``df`` cut by :class:`CollCut` (its column
    :data:`_CAND`; ``dropped``: the ``(__src, line)`` cut; ``paths``: the files cut).

    The cut assumes that the COLL lines it cuts take the fast path and that their files hold no
    restart line, and that no torchrun ``--tee`` copy of them is looked up by tee de-duplication; these are
    known only after parsing (a file whose other lines may form multi-line records goes back to the generic
    path, which reads its COLL lines; attempts count restarts line by line; a tee copy of a COLL line in a
    launcher output makes every file keep them). A file for which one turns out false is read again whole
    (``reread(paths)``: its lines frame, every line) and the lines parsed again (both tests are per file,
    so once is enough; a third parse is a safety net that should never run). Returns ``(generic rows,
    fast rows, dropped (__src, line))``."""
    keep_cols = (*PARSE_KEEP, identity.WEIGHT)
    for _ in range(3):
        red_cand = df[_CAND].fill_null(False)
        red = df.drop(_CAND, "__src")
        gen, fast = parsers.parse_lines_split(red, keep=keep_cols)
        if not paths:
            return gen, fast, dropped
        # Every COLL line kept of a cut file must have taken the fast path, and no cut file may
        # restart; else its file is put back whole.
        fast_pos = fast["_pos"] if fast is not None else pl.Series("_pos", [], pl.UInt32)
        went_generic = (
            red.select("path")
            .with_row_index("_p")
            .filter(red_cand & red["path"].is_in(list(paths)) & ~pl.col("_p").is_in(fast_pos.implode()))
        )
        bad = set(went_generic["path"].unique().to_list())
        restarts = gen.filter((pl.col("kind") == Kind.RESTART) & pl.col("path").is_in(list(paths)))
        bad |= set(restarts["path"].unique().to_list())
        # torchrun --tee copies of COLL lines in a launcher output: tee de-duplication looks for the per-rank
        # line of each copy, in files paired with the launcher only by identity resolution (later), so then
        # every file keeps its COLL lines (the launcher output holds them all anyway).
        tee_copy = (
            pl.col("tee_local_rank").is_not_null()
            & (pl.col("layout") == "stream")
            & pl.col("record").str.contains(coll.LITERAL, literal=True).fill_null(False)
        )
        if gen.select(tee_copy.any()).item():
            bad |= paths
        if not bad:
            return gen, fast, dropped
        bad_src = df.filter(pl.col("path").is_in(list(bad)))["__src"].unique()
        whole = reread(bad)
        back = df.filter(~pl.col("path").is_in(list(bad)))
        df = pl.concat([back, whole], how="diagonal_relaxed").sort("__src", "line", maintain_order=True)
        paths -= bad
        dropped = dropped.filter(~pl.col("__src").is_in(bad_src.implode()))
    raise AssertionError("unreachable: a file is put back whole at most once")  # pragma: no cover


def full_event_ids(df: pl.DataFrame, dropped: pl.DataFrame, rel_of: dict[int, str]) -> pl.Series:
    """The ``event_id`` each row of ``df`` (the reduced table, in ``path, line`` order) has in the full
    table: its position plus the number of dropped lines (each one row of its own) before it in
    ``path, line`` order. ``dropped``: ``(__src, line)``; ``rel_of``: ``__src`` -> path."""
    src_ids = dropped["__src"].unique().to_list()
    paths = sorted(set(df["path"].unique().to_list()) | {rel_of[i] for i in src_ids})
    code = {p: i for i, p in enumerate(paths)}
    src_code = {i: code[rel_of[i]] for i in src_ids}
    dk = (
        dropped.select(
            pl.col("__src").replace_strict(src_code, return_dtype=pl.Int64) * (1 << 32)
            + pl.col("line").fill_null(0).cast(pl.Int64)
        )
        .to_series()
        .sort()
    )
    keys = df.select(
        pl.col("path").replace_strict(code, return_dtype=pl.Int64) * (1 << 32)
        + pl.col("line").fill_null(0).cast(pl.Int64)
    ).to_series()
    before = dk.search_sorted(keys, side="left").cast(pl.Int64)
    return (df["event_id"] + before).alias("event_id")


#: What identity resolution sets on a row (the rest of a fast-path row is known after parsing).
_IDENTITY_OUT = ("rank", "rank_source", "local_rank", "host", "attempt")


def resolve_with_fast_rows(
    parts: list[pl.DataFrame], on_column: Callable[[int, int], None] | None = None
) -> pl.DataFrame:
    """Identity and inherited stamps for the generic rows and the NCCL COLL fast-path rows, in two passes
    over small frames: the fast rows of one (file, host, pid) are alike for identity, so each such group
    goes into :func:`identity.resolve` as ONE summary row weighted by its size (:data:`identity.WEIGHT`);
    its results are joined back onto the group's rows. Stamps: a fast row takes the last stamp of its
    stream before it (an as-of join on the row position), exactly what :func:`timestamps.inherit` gives.

    Fast rows stay whole where the summary would not be exact: files read as combined streams (launcher
    pairing reads their text) and files with restart lines (attempts count restarts line by line).
    ``parts``: ``[the generic rows, the fast-path rows]``, taken out of the list (the final merge frees their
    columns as it goes: see ``parsers.merge_taken``). ``on_column``: progress of the final merge."""
    gen, fast = parts
    parts.clear()
    restart_paths = (
        gen.lazy().filter(pl.col("kind") == Kind.RESTART).select(pl.col("path").unique()).collect()["path"]
    )
    whole = (pl.col("layout") == "stream") | pl.col("path").is_in(restart_paths.implode())
    keep_whole = fast.select(whole.any()).item()
    if keep_whole:
        gen = parsers.merge_parts(gen, fast.filter(whole))
        fast = fast.filter(~whole)
    if fast.height == 0:
        return timestamps.inherit(identity.resolve(gen), parsers.STREAM_KEYS)
    # Runs of fast rows (in row order) from one (file, host, pid): each run enters identity as one row.
    key = ["path", "host", "pid"]
    starts = pl.any_horizontal([pl.col(k).ne_missing(pl.col(k).shift(1)) for k in key]).fill_null(True)
    fast = fast.with_columns((starts.cum_sum() - 1).cast(pl.Int64).alias("_gid"))
    # A run's weight: its rows, or the lines they stand for after ``ingest(keep_coll=...)`` cut some.
    size = pl.col(identity.WEIGHT).fill_null(1).sum() if identity.WEIGHT in fast.columns else pl.len()
    groups = fast.filter(starts).with_columns(
        fast.group_by("_gid", maintain_order=True)
        .agg(size.alias("n"))["n"]
        .cast(pl.Int64)
        .alias(identity.WEIGHT)
    )
    joint = identity.resolve(pl.concat([gen, groups.drop("_pos")], how="diagonal_relaxed"))
    is_group = pl.col("_gid").is_not_null()
    resolved = joint.filter(is_group).select("_gid", *_IDENTITY_OUT).sort("_gid")
    gen = timestamps.inherit(joint.filter(~is_group).drop("_gid", identity.WEIGHT), parsers.STREAM_KEYS)
    idx = fast["_gid"]
    fast = fast.drop([c for c in (*_IDENTITY_OUT, "_gid") if c in fast.columns]).with_columns(
        [resolved[c].gather(idx) for c in _IDENTITY_OUT]
    )
    # Stamps: the last stamped row of the same stream (the fast rows' stream: no tee/srun/transport key).
    no_key = pl.all_horizontal([pl.col(k).is_null() for k in parsers.STREAM_KEYS])
    stamps = (
        gen.lazy()
        .filter(no_key & pl.col("ts").is_not_null())
        .select("_pos", "path", "ts")
        .sort("_pos")
        .collect()
    )
    prev = fast.select("_pos", "path").join_asof(
        stamps, on="_pos", by="path", strategy="backward", check_sortedness=False
    )  # fast rows are in _pos order
    fast = fast.with_columns(
        prev["ts"].alias("ts"),
        pl.when(prev["ts"].is_not_null())
        .then(pl.lit("inherited"))
        .otherwise(pl.lit("missing"))
        .alias("ts_quality"),
    )
    # Only what the table and the tee de-duplication still read goes into the (one) merge of the two parts.
    final = [*POLARS_SCHEMA, "layout", "node_key", "tee_local_rank", "record", "_pos"]
    both: list[pl.DataFrame | None] = [
        gen.select([c for c in final if c in gen.columns]),
        fast.select([c for c in final if c in fast.columns]),
    ]
    del gen, fast, joint, groups, idx, prev
    return parsers.merge_taken(both, on_column)
