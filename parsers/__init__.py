"""Parsers: turn physical log lines into classified events, one module per producer of lines.

- :mod:`parsers.transport` — kubectl, mpirun, srun, pdsh and torchrun ``--tee`` prefixes (demultiplexing);
- :mod:`parsers.nccl` — NCCL_DEBUG output;
- :mod:`parsers.c10d` — PyTorch C++ logs (c10/glog), ProcessGroupNCCL/Gloo, DETAIL fingerprints, DDP, TCPStore;
- :mod:`parsers.elastic` — torchrun / torchelastic agent lines, ChildFailedError summaries, error.json;
- :mod:`parsers.deepspeed` — the DeepSpeed launcher (rank map, spawned pids, return codes);
- :mod:`parsers.horovod` — Horovod's stall reports (ready / missing ranks);
- :mod:`parsers.paddle` — PaddlePaddle's launchers (failed trainers, the console's copies of worker logs) and workers;
- :mod:`parsers.ray` — Ray's ``(Actor pid=P)`` worker prefix (ranks from Ray Train's pid map) and Ray Train's reports;
- :mod:`parsers.mpi` — Open MPI's own reports (the first rank to fail, signals);
- :mod:`parsers.spawn` — ``torch.multiprocessing.spawn``'s reports of a dead worker;
- :mod:`parsers.python` — tracebacks (grouped into one record) and exceptions;
- :mod:`parsers.app` — the training script's own logging and progress lines;
- :mod:`parsers.lightning` — PyTorch Lightning's ``[rank: N]`` prefix, child-process observer and init lines;
- :mod:`parsers.ras` — NCCL RAS reports (``ncclras``) and monitor events (reconstructed from NCCL's source);
- :mod:`parsers.inspector` — NCCL Inspector's per-operation JSON records (reconstructed from NCCL's source);
- :mod:`parsers.stack` — stack dumps of live processes (``py-spy dump``, ``faulthandler``), one row per dump;
- :mod:`parsers.system` — Slurm, kernel OOM killer, Xid, shell job reports;
- :mod:`parsers.timestamps` — timestamp parts to UTC ``ts``;
- :mod:`parsers.rules` — the vectorized engine they all use.

:func:`parse_lines` runs them in order over a frame of physical lines.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from functools import lru_cache
from typing import Literal

import polars as pl

from parsers import (
    app,
    appfast,
    c10d,
    coll,
    deepspeed,
    elastic,
    horovod,
    inspector,
    lightning,
    mpi,
    nccl,
    paddle,
    python,
    ras,
    ray,
    spawn,
    stack,
    system,
    transport,
)
from parsers.rules import (
    Prefix,
    Rule,
    apply_rules,
    ascii_classes,
    ensure_columns,
    literals_in,
    parallelism,
    strip_prefixes,
)

#: Columns that identify one stream inside a file (a rank's lines inside a combined file).
STREAM_KEYS = ["srun_label", "xport_host", "xport_rank", "tee_local_rank", "hook_rank"]

_SEV = {
    "F": "fatal",
    "C": "fatal",
    "E": "error",
    "W": "warning",
    "I": "info",
    "V": "debug",
    "DEBUG": "debug",
    "INFO": "info",
    "WARNING": "warning",
    "WARN": "warning",
    "ERROR": "error",
    "CRITICAL": "fatal",
    "TRACE": "debug",
    "CALL": "debug",
}

#: How a line that is not a hard wrap's tail starts: a producer's prefix (NCCL's ``host:pid:tid``, glog, asctime,
#: bracketed ones, the HF example scripts' US-order stamp, Python's ``LEVEL:``), a traceback or exception line,
#: indentation, an NCCL Inspector record.
_KNOWN_START = ascii_classes(
    r"^(?:\[|[A-Za-z0-9][\w.-]*:\d+:\d+ |[VIWEFC]\d{4}|\d{4}-\d\d-\d\d|\d\d/\d\d/\d{4} \d\d:\d\d:\d\d |Traceback|"
    r"[A-Za-z_][\w.]*(?:Error|Exception):|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):|\s|\{\"header\":\{\"id\":\")"
)


#: The share of a file's lines behind torchrun's tee prefix from which a line after one that ends in a space
#: may be a hard wrap (:func:`_mark_wraps`).
WRAP_TEE_SHARE = 0.5


def at_width() -> pl.Expr:
    """True on the lines (of a frame with ``path`` and ``raw``, in file order) that follow a line as long as
    their file's wrap width, where the file has one: a terminal or a paste box of fixed width cuts lines
    mid-word at that width, so the file's long lines share one length, and none is longer
    (``…WorkNCCL(SeqNum=4, OpTy`` / ``pe=BROADCAST, …`` in huggingface/open-r1#620). A line that does not start
    like a log line is a hard wrap there (:func:`_mark_wraps`). The lines of the width are not all one text:
    one message printed again and again (a ``UserWarning`` of 145 characters before each of 10,000 tqdm bars)
    is its own length, not a terminal's, and the bar after each copy is no piece of it. A message repeated and
    cut into pieces gives at least a head and a middle of the width, and lines that differ do."""
    n = pl.col("raw").str.len_chars()
    width = n.filter((n >= 70) & (n >= n.max() * 0.9)).mode().max().over("path")
    return (
        ((n == width).sum().over("path") >= 3)
        & (pl.col("raw").filter(n == width).n_unique().over("path") >= 2)
        & (n.max().over("path") <= width + 1)
        & (n.shift(1).over("path") >= width).fill_null(False)
    )


def _mark_wraps(df: pl.DataFrame) -> pl.DataFrame:
    """Mark physical lines a terminal hard-wrapped: a line without any prefix that does not itself start like
    a log line and follows either (in a tee'd file) a line ending in a space, or a line as long as the file's
    wrap width (the length most of its long lines share). It joins that line's stream (same tee rank) and,
    later, its record."""
    tee = pl.col("pfx_tee")
    share = tee.cast(pl.Float64).mean().over("path")
    prev_raw = pl.col("raw").shift(1).over("path")
    plain = (
        ~pl.col("body").str.contains(_KNOWN_START)
        & (pl.col("body").str.len_chars() > 0)
        & pl.col("xport_rank").is_null()
    )
    # No tee'd line in the frame: every share is 0, so the first test is False (its window is skipped).
    after_space = (
        (~tee & (share >= WRAP_TEE_SHARE) & prev_raw.str.ends_with(" ").fill_null(False))
        if df["pfx_tee"].any()
        else pl.lit(False)
    )
    wrap = plain & (after_space | (at_width() & ~tee))
    # Only a plain line can be a wrap: the per-file windows run on the files holding one (none in a file of
    # log lines; they cost 0.14 s of CPU per 400k lines), the other rows are False as ``wrap`` makes them.
    is_plain = df.select(plain.alias("p"))["p"]
    if is_plain.null_count() or df["path"].null_count():
        df = df.with_columns(wrap.alias("wrap_cont"))
    elif not is_plain.any():
        return df.with_columns(pl.lit(False).alias("wrap_cont"))
    else:
        rows = df["path"].is_in(df["path"].filter(is_plain).unique().implode())
        if rows.all():
            df = df.with_columns(wrap.alias("wrap_cont"))
        else:
            sub = df.filter(rows).select(wrap.alias("w"))["w"]
            at = rows.arg_true()
            full = pl.repeat(False, df.height, dtype=pl.Boolean, eager=True).scatter(at, sub)
            df = df.with_columns(full.alias("wrap_cont"))
    if not df["wrap_cont"].any():  # no wrapped line: the stream columns stay as they are
        return df
    return df.with_columns(
        pl.when(pl.col("wrap_cont"))
        .then(pl.col("tee_local_rank").shift(1).over("path"))
        .otherwise(pl.col("tee_local_rank"))
        .alias("tee_local_rank"),
        pl.when(pl.col("wrap_cont"))
        .then(pl.col("tee_role").shift(1).over("path"))
        .otherwise(pl.col("tee_role"))
        .alias("tee_role"),
    )


#: The producer (L3) prefixes :func:`strip_producers` strips, in order (the excepthook's twice).
PRODUCER_PREFIXES: tuple[Prefix, ...] = (
    nccl.PREFIX,
    c10d.C10_NEW,
    c10d.C10_OLD,
    c10d.GLOG,
    c10d.EXCEPTHOOK,
    c10d.EXCEPTHOOK,
    elastic.OLD_PYLOG,
    elastic.TORCH_LOGGING_21,
    horovod.PREFIX,
    *paddle.PREFIXES,
    lightning.RANK_PREFIX,
    *app.PREFIXES,
)


def strip_producers(df: pl.DataFrame) -> pl.DataFrame:
    """Strip producer (L3) and ProcessGroup (L4) prefixes; set ``layer`` and the prefix severity."""
    df = strip_prefixes(df, PRODUCER_PREFIXES)
    # torch._logging lines of the elastic agent share the glog shape; their source path says who wrote them.
    if "src" in df.columns:
        df = df.with_columns(
            pl.when(pl.col("src").str.contains(r"elastic|distributed/run\.py|launcher/api\.py"))
            .then(pl.lit("elastic"))
            .otherwise(pl.col("layer"))
            .alias("layer")
        )
    is_c10d = (df["layer"] == "c10d").fill_null(False)
    df = strip_prefixes(df, (c10d.PG_PREFIX, c10d.RANK_PREFIX), mask=is_c10d)
    sev_parts = [pl.col(c) for c in ("sev", "sev_word", "nccl_level") if c in df.columns]
    psev = (
        pl.coalesce(sev_parts).replace_strict(_SEV, default=None, return_dtype=pl.String)
        if sev_parts
        else pl.lit(None, dtype=pl.String)
    )
    return df.with_columns(psev.alias("psev"))


#: The rules whose line is a launcher's report that tasks, a node's workers or the whole job ended — what
#: ``rankscope watch --until-exit`` stops on and what counts as launcher output next to torchelastic's own
#: lines (``correlator.graph``). Each rule's ``example`` is its real line. Slurm: srun's per-task exit
#: status (``task_state.c``: ``Exited with exit code N``, and ``"%s: %s %s: %s%s"`` with ``strsignal`` for
#: a task killed by a signal: ``Killed``, ``Terminated``, ``Aborted (core dumped)``, …), its ``Force
#: Terminated StepId=…`` and slurmstepd's ``CANCELLED AT``; pdsh ``-S``; Open MPI's abort help texts
#: (``Process name: [[…]]``, ``the job has been aborted``, ``noticed that process rank N … exited on
#: signal``); torchrun's ``ChildFailedError`` and its agent's ``death signal``; DeepSpeed's
#: ``sigkill_handler`` ``exits with return code``; Lightning's child-process observer.
EXIT_REPORT_RULES: tuple[str, ...] = (
    "srun_exit",
    "srun_oom",
    "srun_killed",
    "srun_terminated",
    "srun_aborted",
    "srun_segfault",
    "srun_force_terminated",
    "stepd_cancelled",
    "pdsh_exit",
    "mpirun_first_failed",
    "mpirun_aborted",
    "mpi_noticed_signal",
    "child_failed",
    "death_signal",
    "ds_exits",
    "lightning_child_failed",
)


def _exit_rules() -> list[Rule]:
    by_name = {
        r.name: r for r in (*system.RULES, *mpi.RULES, *elastic.RULES, *deepspeed.RULES, *lightning.RULES)
    }
    return [by_name[name] for name in EXIT_REPORT_RULES]


def exit_report() -> pl.Expr:
    """True on the rows a rule of :data:`EXIT_REPORT_RULES` classified (its kind, and its literal and pattern
    in the message, as the rule tested them); False elsewhere. For tables of parsed rows (``kind``,
    ``message``); on a large table :func:`exit_reports` is cheaper."""
    msg = pl.col("message").fill_null("")
    parts = []
    for r in _exit_rules():
        e = (pl.col("kind") == r.kind) & msg.str.contains(r.literal, literal=True)
        if r.pattern:
            e = e & msg.str.contains(r.pattern)
        parts.append(e)
    return pl.any_horizontal(parts).fill_null(False)


def exit_reports(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``df`` that :func:`exit_report` marks; the message tests run only on the rows of the
    rules' kinds (a table of millions of NCCL lines is scanned once, by kind)."""
    rules = _exit_rules()
    kinds = sorted({r.kind for r in rules})
    # One of the kinds is ``log`` (srun's Force Terminated): most rows of a large application log. One
    # Aho-Corasick scan for the rules' literals keeps the rows that can hold a report; the rules' own tests
    # then run on those (a report holds its rule's literal). 400k-row app job: 0.08 -> ~0.01 s.
    lits = sorted({r.literal for r in rules})
    cand = df.filter(pl.col("kind").is_in(kinds))
    cand = cand.filter(pl.col("message").fill_null("").str.contains_any(lits))
    return cand.filter(exit_report())


#: The rule lists :func:`classify` runs on ``message`` through :func:`_literal_gate` (every rule has a literal).
def _message_rule_lists() -> list[list[Rule]]:
    return [
        ras.LINE_RULES,
        inspector.RULES,
        system.RULES,
        paddle.RULES,
        ray.RULES,
        [ray.SNIPPET_DEAD],
        [ray.SNIPPET_RAISED],
        [paddle.BANNER],
        nccl.RULES,
        python.RULES,
        spawn.RULES,
        [horovod.MISSING_ITEM],
        horovod.RULES,
        mpi.RULES,
        c10d.RULES,
        [python.TERMINATE],
        lightning.RULES,
        elastic.RULES,
        deepspeed.RULES,
        app.RULES,
    ]


@lru_cache(maxsize=1)
def _message_literals() -> frozenset[str]:
    lists = _message_rule_lists()
    if not all(r.literal for rules in lists for r in rules):
        raise AssertionError("a message rule without a literal: it cannot be gated by literals")
    return frozenset(r.literal for rules in lists for r in rules)


def _literal_gate(message: pl.Series) -> Callable[..., pl.DataFrame]:
    """``apply_rules(df, rules, where=...)`` on ``message`` for the rule lists of :func:`_message_rule_lists`,
    with the rows that hold none of their literals left out up front: one Aho-Corasick scan of all rows for
    the union of the literals, instead of one per list (a row without any literal of the union holds none of
    a list's, which :func:`apply_rules` would scan for). ``message`` must stay as it is between the calls
    (rules write fields, not ``message``); the rows must not change.
    Measured on an application-heavy job (8 ranks, 400k lines, no NCCL line; ``benchmarks/generate.py --shape
    app``), the rows of all slices classified on one thread: :func:`classify` 1.8 s of CPU before, 1.0 s with
    the gate (and the early returns of the rare-row helpers it calls).

    The literals the rows hold are also read once (every occurrence of each, overlapping ones included): a
    list none of whose literals occurs is not applied at all, which is what :func:`apply_rules` would find
    (``where`` may then be a function of ``df`` giving the mask, called only when the list is applied), and of
    a list applied, only the rules whose literal occurs are tried. 15k generic lines of the 400k-line app
    job: 28 lists, 24 with no literal in the slice, ~25 ms of the slice's ~180 ms."""
    lits = _message_literals()
    has = message.str.contains_any(sorted(lits)).fill_null(False)
    present = literals_in(message.filter(has), lits)

    def gate(
        df: pl.DataFrame,
        rules: list[Rule],
        where: pl.Series | Callable[[pl.DataFrame], pl.Series] | None = None,
    ) -> pl.DataFrame:
        if df.height != has.len() or not all(r.literal in lits for r in rules):
            raise AssertionError("literal gate: rows changed, or a rule list it was not built for")
        # A rule whose literal no row holds claims no row: only the others are tried (in their order, so the
        # first match still wins), each a literal scan fewer.
        rules = [r for r in rules if r.literal in present]
        if not rules:
            return df
        mask = where(df) if callable(where) else where
        return apply_rules(df, rules, where=has if mask is None else mask & has)

    return gate


def classify(df: pl.DataFrame) -> pl.DataFrame:
    """Run every module's message rules (first match wins) and fill kinds of what is left."""
    df = ensure_columns(df)
    df = df.with_columns(pl.col("body").alias("message"))
    df = apply_rules(df, stack.RULES, text="record", where=df["layer"].fill_null("") == "")
    df = stack.dump_rows(df, STREAM_KEYS)  # one row per stack dump: rows merge, so before ``layer`` below
    df = ras.json_rows(df)  # one row per RAS JSON document (status report, monitor event): rows merge
    layer = df["layer"].fill_null("")
    on_msg = _literal_gate(df["message"])
    df = apply_rules(df, ras.RECORD_RULES, text="record", where=layer == "")
    df = on_msg(df, ras.LINE_RULES, layer.is_in(["", "app"]))
    df = on_msg(df, inspector.RULES, layer == "")
    df = apply_rules(df, elastic.RECORD_RULES, text="record")
    df = apply_rules(df, paddle.RECORD_RULES, text="record")
    df = on_msg(df, system.RULES)
    df = on_msg(df, paddle.RULES)
    df = on_msg(df, ray.RULES)
    df = on_msg(df, [ray.SNIPPET_DEAD], ray.dead_snippets)
    df = on_msg(df, [ray.SNIPPET_RAISED])
    df = on_msg(df, [paddle.BANNER], paddle.banner_rows)
    df = on_msg(df, nccl.RULES, layer == "nccl")
    df = on_msg(df, python.RULES)
    df = on_msg(df, spawn.RULES)
    df = on_msg(df, [horovod.MISSING_ITEM], horovod.stall_items)
    df = on_msg(df, horovod.RULES)
    df = on_msg(df, mpi.RULES)
    df = on_msg(df, c10d.RULES)
    df = on_msg(df, [python.TERMINATE])
    df = on_msg(df, lightning.RULES, layer.is_in(["", "app"]))
    df = on_msg(df, elastic.RULES, layer.is_in(["elastic", "", "app", "c10d"]))
    df = on_msg(df, deepspeed.RULES, layer.is_in(["elastic", "", "app"]))
    df = on_msg(df, app.RULES, layer.is_in(["", "app"])).pipe(app.bar_fields)
    df = python.exception_fields(df)
    df = elastic.signal_exit_codes(df)
    is_exc = df["exc_type"].is_not_null() & df["layer"].fill_null("").is_in(["", "python", "elastic"])
    df = apply_rules(df, [python.CATCH_ALL], where=is_exc)
    # A traceback record with no exception line anywhere (the paste ends inside its frames).
    no_exc = ~df["record"].str.contains(
        r"\n\s*(?:\[rank\d+\]: )?[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b"
    )
    cut = no_exc & (df["line_count"] > 1)
    df = apply_rules(df, [elastic.AGENT_TRACEBACK], text="record", where=cut)
    df = apply_rules(df, [python.CUT_TRACEBACK], where=cut).pipe(python.cut_message)
    if "nccl_level" in df.columns:
        df = apply_rules(df, [nccl.WARN_RULE], where=(df["nccl_level"] == "WARN").fill_null(False))
    df = ras.block_fields(df)
    df = inspector.fields(df)
    df = lightning.rank_fields(df)
    df = app.progress_fields(df)
    df = nccl.normalize_ops(df)
    df = nccl.resolve_comms(df)
    df = elastic.mark_root_cause(df)
    return (
        df.with_columns(
            pl.when(pl.col("kind").is_not_null())
            .then(pl.col("kind"))
            .when(pl.col("message").str.strip_chars() == "")
            .then(pl.lit("blank"))
            .when(pl.col("layer").is_not_null())
            .then(pl.lit("log"))
            .otherwise(pl.lit("unparsed"))
            .alias("kind"),
            pl.coalesce(pl.col("psev"), pl.col("severity"), pl.lit("unknown")).alias("severity"),
            pl.coalesce(pl.col("layer"), pl.lit("unknown")).alias("layer"),
        )
        .pipe(c10d.stated_ranks)
        .pipe(horovod.stall_rows)
        .pipe(paddle.abort_rows)
        .pipe(ray.snippet_rows)
        .pipe(mpi.signal_fields)
    )


def _prefix_layers(df: pl.DataFrame) -> pl.DataFrame:
    """Transport, tee and producer prefixes stripped into columns; hard-wrapped lines marked."""
    df = transport.strip_transport(df)
    for c, t in (
        ("tee_local_rank", pl.Int32),
        ("tee_role", pl.String),
        ("xport_rank", pl.Int32),
        ("xport_host", pl.String),
        ("srun_label", pl.String),
        ("pfx_tee", pl.Boolean),
        ("layer", pl.String),
    ):
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=t).alias(c))
    df = df.with_columns(pl.col("pfx_tee").fill_null(False))
    df = ray.strip_worker_prefix(df)
    df = _mark_wraps(df)
    df = strip_producers(df)
    # Every line of an uncaught traceback carries the excepthook's [rankN]: prefix, so ranks whose tracebacks
    # interleave in one combined stream are separate streams.
    df = df.with_columns(
        pl.when(pl.col("pfx_excepthook")).then(pl.col("c10_rank")).otherwise(None).alias("hook_rank")
    )
    return paddle.console_streams(spawn.spawn_child_rank(df))


def _record_candidates(df: pl.DataFrame) -> pl.Series:
    """Rows that may continue or end a multi-line record (the test :func:`python.group_records` makes)."""
    body = pl.col("body")
    return df.select(
        (
            body.str.contains(python._CANDIDATE)
            | pl.col("wrap_cont").fill_null(False)
            | body.str.contains(python.EXC_LINE)
        ).alias("c")
    )["c"].fill_null(False)


@lru_cache(maxsize=1)
def _file_level_heads() -> str:
    """A regex for lines that make a file's parse depend on all its lines (so none of them takes the fast
    path): any transport/tee prefix head (their per-file shares and the tee's hard-wrap rule count every
    line), a line starting with ``[`` or whitespace, and the ChildFailedError ``Root Cause`` header."""
    from parsers.rules import Prefix, _gate_of

    # LEAD and USER_RANK act on one line alone (no per-file share), and never on a line that starts with an
    # NCCL prefix: they do not make a file's parse depend on its COLL lines.
    per_line = {transport.LEAD.name, transport.USER_RANK.name}
    heads = tuple(
        v.pattern for v in vars(transport).values() if isinstance(v, Prefix) and v.name not in per_line
    )
    return "|".join([_gate_of(heads), r"^[\[\s]", "Root Cause"])


def fast_split(df: pl.DataFrame, on_rows: Callable[[int], None] | None = None) -> pl.Series | None:
    """Rows of the lines frame that take the NCCL COLL fast path (:mod:`parsers.coll`), or None when none do.

    ``on_rows(n)``: called as the lines are tested (:func:`parsers.coll.fast_mask`), with the number of
    lines of each part; the parts sum to ``df.height`` (one call with it when there is nothing to test).

    A row qualifies when its line is a whole COLL line and its file has no line of :func:`_file_level_heads`
    (so dropping the COLL lines changes no per-file decision). Rows of files holding record candidates are
    given back to the generic path later (:func:`parse_lines`); so are files holding a line that does not
    start like a log line (a possible hard-wrap continuation)."""
    if df.height == 0 or "raw" not in df.columns:
        if on_rows is not None:
            on_rows(df.height)
        return None
    fast = coll.fast_mask(df["raw"], on_rows)
    if "layout" in df.columns:
        fast = fast & (df["layout"] != "error_json").fill_null(True)
    if "body" in df.columns:
        fast = fast & (df["body"] == df["raw"]).fill_null(False)
    if not fast.any():
        return None
    fast_paths = df["path"].filter(fast).unique()
    other = ~fast & df["path"].is_in(fast_paths.implode())
    others = df["raw"].filter(other)
    risky = others.str.contains(_file_level_heads()).fill_null(False)
    # A line that does not start like a log line may continue the line before it (a hard wrap: the decision
    # reads the previous line and per-file line statistics that count every line); its file stays generic.
    risky = risky | (~others.str.contains(_KNOWN_START).fill_null(True) & (others.str.len_chars() > 0))
    bad = df["path"].filter(other).filter(risky).unique()
    if bad.len():
        fast = fast & ~df["path"].is_in(bad.implode())
    return fast if fast.any() else None


#: Generic-path lines parsed at once, in slices of whole files (a progress report after each; no rule
#: reads across files, ``tests/test_parsers.py`` checks slices of one file against one slice of all). A slice
#: holds every prefix and rule column while it is parsed (~1 KB a row), on up to ``rules.parallelism`` threads.
#: 256-rank bench, ``rankscope diagnose DIR`` (254k such lines, 2 cores, 3 rounds): 8.76 s at 0.91x the input
#: with 50k rows, against 8.39 s at 0.98x with 100k.
GENERIC_CHUNK_ROWS = 50_000
#: A slice of generic-path lines ends only where at least this share of ``GENERIC_CHUNK_ROWS`` lines follows, so
#: the last one is not a few lines: a slice costs ~0.15 s of CPU whatever its size (every prefix and rule pass,
#: their regexes compiled again: polars keeps 32 per thread). 400k-line app job: a last slice of 3 lines (one
#: file) took 0.16 s.
GENERIC_LEAST_SHARE = 0.1


def _file_slices(df: pl.DataFrame, rows: int, ramp: int = 0, least: int = 0) -> list[tuple[int, int]]:
    """``[(start, end)]`` row ranges of ``df`` that cover it in order, each of whole files and about
    ``rows`` rows (one range when the rows of some file are not contiguous). ``ramp``: the first ``ramp``
    ranges aim at ``rows / 2**ramp``, ``rows / 2**(ramp-1)``, … rows, so the first report of a parse in
    slices comes early. ``least``: a range ends only where at least that many rows follow (the rest of a
    parse is not left to a slice of a few rows, which costs what a slice costs)."""
    if df.height <= rows >> ramp:
        return [(0, df.height)]
    path = df["path"]
    starts = path.ne_missing(path.shift(1)).fill_null(True).arg_true().to_list()
    if len(starts) != path.n_unique():  # a file's rows in several places: keep them in one range
        return [(0, df.height)]
    out: list[tuple[int, int]] = []
    a = 0
    for i in starts[1:]:
        if i - a >= max(1, rows >> max(0, ramp - len(out))) and df.height - i >= least:
            out.append((a, i))
            a = i
    out.append((a, df.height))
    return out


#: The application fast path (:mod:`parsers.appfast`) on or off; tests switch it off to compare with the generic path.
APP_FAST = True
#: Generic-path lines (those off the NCCL COLL fast path) of a parse below which the application fast path is
#: not tried: its split has a fixed cost (~0.07 s of regexes, and where it takes every line a probe of the
#: generic rows' columns, ~0.09 s) that the generic path's per-line cost only passes at about this many lines.
#: Measured on the bench's app job cut to N lines (16 files, 2 cores, medians of 5-11 alternating runs of
#: ``rankscope diagnose``, fast path on / off): 26 lines (public-02) 0.73 / 0.64 s, 1,000 0.56 / 0.46 s,
#: 4,000 0.60 / 0.48 s, 10,000 0.61 / 0.49 s, 20,000 0.72 / 0.67 s, 80,000 0.75 / 0.83 s; ``rankscope
#: timeline`` equal at 4,000 and 20,000. Both paths give the same rows (``tests/test_appfast.py``, which sets
#: this to 0).
APP_FAST_MIN_LINES = 20_000


def _parse_slice(
    lines: pl.DataFrame, fast_df: pl.DataFrame, cols: list[str] | None
) -> tuple[pl.DataFrame, dict[str, str], pl.Series | None]:
    """One slice of generic-path lines (whole files) of :func:`parse_lines_split`, parsed: ``(rows, the
    slice's communicator map, the paths whose fast-path rows it took back or None)``."""
    gen = _prefix_layers(lines)
    # A file whose other lines may form multi-line records keeps all its lines on the generic path (a COLL
    # line ends the record before it).
    cand_paths = gen["path"].filter(_record_candidates(gen)).unique()
    took: pl.Series | None = None
    if cand_paths.len():
        back = fast_df["path"].is_in(cand_paths.implode())
        if back.any():
            gen = pl.concat([gen, _prefix_layers(fast_df.filter(back))], how="diagonal_relaxed").sort(
                "_pos", maintain_order=True
            )
            took = cand_paths
    part = classify(python.group_records(gen, STREAM_KEYS))
    comm = coll.comm_map(part)
    # Narrow each slice as soon as it is parsed: a parsed slice holds every prefix and rule column (~1 KB a
    # row), of which the table keeps a third.
    have = set(part.columns)
    return (part if cols is None else part.select([c for c in cols if c in have])), comm, took


#: Lines per part from which the fast path's split and rows (:mod:`parsers.appfast`) run in parts on threads
#: (at most ``rules.parallelism`` at once; each polars call of a part runs on one core).
APP_PART_ROWS = 100_000


def _app_split(lines: pl.DataFrame) -> tuple[pl.Series, pl.DataFrame] | None:
    """:func:`parsers.appfast.split` of ``lines``, in parts of whole files on threads when they are many."""
    k = parallelism(lines.height // APP_PART_ROWS)
    parts = _file_slices(lines, -(-lines.height // k)) if k > 1 else [(0, lines.height)]
    if len(parts) == 1:  # one part: its lines are still classified in k parts of rows
        return appfast.split(lines, workers=k)
    # whether each file keeps witnesses of its tee roles, decided for all the lines: a generic slice holds files
    # of any part
    glued = appfast.tee_inside(lines["raw"])
    with ThreadPoolExecutor(max_workers=k) as pool:
        got = list(pool.map(lambda ab: appfast.split(lines.slice(ab[0], ab[1] - ab[0]), glued), parts))
    if all(g is None for g in got):
        return None
    mask = pl.concat(
        [
            g[0] if g is not None else pl.repeat(False, b - a, dtype=pl.Boolean, eager=True)
            for g, (a, b) in zip(got, parts, strict=True)
        ]
    )
    # diagonal: a part leaves out the captures null on all its rows (appfast.split)
    return mask, pl.concat([g[1] for g in got if g is not None], how="diagonal_relaxed")


def _app_rows(app_lines: pl.DataFrame, caps: pl.DataFrame) -> list[appfast.Rows]:
    """The application fast path's rows (:func:`parsers.appfast.rows`) of ``app_lines`` (with their ``caps``),
    in parts of rows on threads when they are many (each polars call of a part runs on one core), for
    :func:`_shape_app`."""
    n = app_lines.height
    k = parallelism(n // APP_PART_ROWS)
    if k <= 1:
        return [appfast.rows(app_lines, caps)]
    step = -(-n // k)
    with ThreadPoolExecutor(max_workers=k) as pool:
        return list(
            pool.map(lambda i: appfast.rows(app_lines.slice(i, step), caps.slice(i, step)), range(0, n, step))
        )


def _shape_app(parts: list[appfast.Rows], schema: pl.Schema) -> pl.DataFrame:
    """:func:`_app_rows`' parts with the columns and types of the generic rows (``schema``; none depends on the
    values of a line the fast path takes, which ``tests/test_appfast.py`` checks on every corpus case), or where
    there are none of a probe's (:func:`_app_schema`), as one frame."""
    out = [appfast.shape(p, schema) for p in parts]
    return out[0] if len(out) == 1 else pl.concat(out, how="vertical")


def _merge_app(parts: list[pl.DataFrame], cols: list[str]) -> pl.DataFrame:
    """The generic rows and the application fast path's rows (``parts``: the two frames, taken out of the list,
    which the caller holds no other reference to) as one frame in the generic rows' order."""
    names = [c for c in cols if c in parts[0].columns]
    if parts[0]["_pos"].is_sorted():
        return _interleave(parts, names)
    # A glued tee line was split: the generic rows are in ``path, line`` order (``merge_parts`` sorts by it);
    # the fast-path rows go where that order puts them (ties: split rows, kept in order).
    merged = pl.concat(parts, how="diagonal_relaxed")
    parts.clear()
    return merged.sort("path", "line", "_pos", maintain_order=True).select(names)


#: Runs of fast-path rows above which :func:`_interleave` sorts instead of slicing: a slice and its share of
#: the concatenation cost ~50 us (a sort of the 400k-line app job's rows ~0.3 s).
_INTERLEAVE_MAX_RUNS = 4096
#: Columns :func:`_interleave` builds at a time before it frees them in its two parts.
_INTERLEAVE_COLUMNS = 8


def _interleave(parts: list[pl.DataFrame], names: list[str]) -> pl.DataFrame:
    """``parts`` (the generic rows and the fast-path rows, both in ``_pos`` order, no ``_pos`` in both; taken
    out of the list) as one frame in ``_pos`` order with columns ``names``, each of one chunk: slices of the
    two put one after the other, no gather (a sort of the merged slice copied every string of it: +280 MB peak
    and +0.3 s of CPU on the 400k-line app job). The columns are built :data:`_INTERLEAVE_COLUMNS` at a time,
    and each is dropped from the two parts once built, so the parts and the result are not held whole at once:
    400k-line app job, ``rankscope timeline`` peak RSS 680 -> 580 MB with the callers' references to the parts
    and to the lines they were built from dropped first (the merge 481 -> 371 MiB with freed memory returned at
    once, ``_RJEM_MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0``), in the same time. A column a part lacks is
    a null literal: polars keeps it a scalar column, not materialized."""
    part, app_rows = parts
    parts.clear()
    dtypes = pl.concat([part.clear(), app_rows.clear()], how="diagonal_relaxed").schema
    # Each fast-path row's place among the generic rows; the rows with one place go in as one slice. Runs of
    # consecutive ``_pos`` would be too short: the NCCL COLL rows between a file's asctime lines are in neither
    # part (15k one-row runs on the 16-rank COLL job, 1.6 s of slicing).
    place = part["_pos"].cast(pl.Int64).search_sorted(app_rows["_pos"].cast(pl.Int64), side="left")
    starts = (place.diff().fill_null(1) != 0).arg_true().to_list()
    if len(starts) > _INTERLEAVE_MAX_RUNS:  # lines of the two kinds alternate throughout: one sort
        merged = pl.concat([part, app_rows], how="diagonal_relaxed").sort("_pos", maintain_order=True)
        return merged.select(names)
    at = place.gather(starts).to_list()
    plan = []  # the result's pieces in order: (0 the generic rows or 1 the fast-path rows, offset, length)
    done = 0
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else app_rows.height
        plan += [(0, done, at[k] - done), (1, s, e - s)]
        done = at[k]
    plan.append((0, done, part.height - done))
    src = [part, app_rows]
    del part, app_rows
    out = []
    for k in range(0, len(names), _INTERLEAVE_COLUMNS):
        some = names[k : k + _INTERLEAVE_COLUMNS]
        cols = [
            f.select(
                [
                    pl.col(c).cast(dtypes[c]) if c in f.columns else pl.lit(None, dtype=dtypes[c]).alias(c)
                    for c in some
                ]
            )
            for f in src
        ]
        src = [f.drop(some, strict=False) for f in src]
        out.append(pl.concat([cols[w].slice(o, n) for w, o, n in plan if n]).rechunk())
        del cols
    return pl.concat(out, how="horizontal")


#: A few lines of each application logging prefix and lines without a prefix (:func:`_app_schema`).
_PROBE = [
    "2026-01-02 03:04:05,678 INFO [trainer] rank=3 step=12 loss=0.5 world_size=8",
    "[default3]:2026-01-02 03:04:05,678 INFO [trainer] rank=3 step=12 loss=0.5 world_size=8",
    "2026-01-02 03:04:05.678 - WARNING - data loader slow, world size: 4",
    "2026-01-02T03:04:05 ERROR [x] rank 2 failed",
    "2026-01-02 03:04:05 plain message",
    "2026-01-02 03:04:05,678 DEBUG ",
    "[2026-01-02 03:04:05,678][trainer][INFO] - rank: 2, epoch: 0/500, total step: 32900",
    "[2026-01-02 03:04:05,678] [WARNING] [engine.py:256:step] rank=1 step=3 world_size=8",
    "01/02/2026 03:04:05 - INFO - __main__ - step 7 done",
    "[2026-01-02 03:04:05,678] INFO iteration 120 loss 2.31",
    "Epoch 0:  10%|#         | 1/10 [01:02:03<00:10, 1.0it/s]",
    "Epoch 0: 100%|##########| 10/10 [00:10<00:00, 1.0it/s]",
    "/opt/venv/lib/python3.11/site-packages/x.py:12: UserWarning: slow, world size: 4",
    "done",
]


def _probe_frame(lines_schema: tuple[tuple[str, pl.DataType], ...]) -> pl.DataFrame:
    """:data:`_PROBE` as a frame of lines of ``lines_schema`` (one file, lines counted from 0)."""
    n = len(_PROBE)
    cols_in: list[pl.Series] = []
    for name, dtype in lines_schema:
        if name in ("raw", "body"):
            cols_in.append(pl.Series(name, _PROBE, dtype=dtype))
        elif name == "path":
            cols_in.append(pl.Series(name, ["probe.log"] * n, dtype=dtype))
        elif name in ("line", "_pos"):
            cols_in.append(pl.Series(name, range(n), dtype=dtype))
        elif name == "line_count":
            cols_in.append(pl.Series(name, [1] * n, dtype=dtype))
        else:
            cols_in.append(pl.repeat(None, n, dtype=dtype, eager=True).alias(name))
    return pl.DataFrame(cols_in)


@lru_cache(maxsize=8)
def _app_schema(lines_schema: tuple[tuple[str, pl.DataType], ...], cols: tuple[str, ...]) -> pl.Schema:
    """The columns and types :func:`_parse_slice` gives a slice of lines of ``lines_schema`` with ``cols``
    kept, read off its parse of :data:`_PROBE`, which :func:`parsers.appfast.parse` gives exactly
    (:func:`check_app_probe`, which tests/test_appfast.py runs with the lines schemas the ingest of per-rank
    files, a tee'd console and one file hands it). The parse of the probe costs ~0.1 s of a process's first
    ingest: :func:`parse_lines_split` runs it beside the fast path's rows."""
    frame = _probe_frame(lines_schema)
    return _parse_slice(frame, frame.clear(), list(cols))[0].schema


def check_app_probe(lines_schema: tuple[tuple[str, pl.DataType], ...], cols: tuple[str, ...]) -> None:
    """Raise ``AssertionError`` unless :func:`parsers.appfast.parse` gives the rows of :data:`_PROBE` exactly
    as :func:`_parse_slice` does, with the columns and types of :func:`_app_schema`."""
    frame = _probe_frame(lines_schema)
    want = _parse_slice(frame, frame.clear(), list(cols))[0]
    got = appfast.split(frame)
    if "_pos" not in frame.columns or got is None or not got[0].all():
        raise AssertionError("application fast path: the probe lines do not qualify")
    fast = appfast.parse(frame, got[1], want.schema)
    if not fast.equals(want):
        raise AssertionError(f"application fast path: rows differ from the generic path's\n{fast}\n{want}")
    if want.schema != _app_schema(lines_schema, cols):
        raise AssertionError("application fast path: the probe's schema differs from _app_schema's")


def _parse_slices(
    pool: ThreadPoolExecutor,
    slices: list[pl.DataFrame],
    fast_df: pl.DataFrame,
    cols: list[str] | None,
    report: Callable[[int], None] | None,
) -> list[tuple[pl.DataFrame, dict[str, str], pl.Series | None]]:
    """:func:`_parse_slice` of each of ``slices`` on ``pool``, reported (``report(lines)``) as each ends, in
    order; a failed slice raises as it ends, not after the others."""
    futures = {pool.submit(_parse_slice, sl, fast_df, cols): sl.height for sl in slices}
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            future.result()
            if report is not None:
                report(futures[future])
    return [future.result() for future in futures]


def parse_lines_split(
    df: pl.DataFrame,
    keep: list[str] | tuple[str, ...] | None = None,
    fast: pl.Series | None | Literal["scan"] = "scan",
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """:func:`parse_lines` in two parts, not merged: ``(generic rows, fast-path rows or None)``.

    Both carry ``_pos`` (the row's position in ``df``; split glued lines share their line's) and, with
    ``keep``, only those columns. The generic part is in ``_pos`` order unless a glued tee line was split
    (then in ``path, line`` order); the fast part is in ``_pos`` order. Callers that merge them sort by
    ``_pos`` (see :func:`parse_lines`). ``fast``: :func:`fast_split` of ``df`` when the caller has it
    (``correlator.ingest`` runs the scan as a step of its own); by default it is computed here.
    """
    if isinstance(fast, str):
        fast = fast_split(df)
    df = df.with_row_index("_pos")
    lines = df if fast is None else df.filter(~fast)
    fast_df = df.clear() if fast is None else df.filter(fast)
    cols = None if keep is None else [*keep, "_pos"]
    report = coll.ON_ROWS.get()
    if fast_df.height == 0:
        return _split_parts(df, lines, fast_df, cols, report, None)
    # The NCCL COLL fast path's rows are built on a thread of their own from the start, beside the application
    # lines' split and the generic slices (mostly Python, holding the GIL between polars calls); only their
    # ``pg`` waits for the communicator map the generic rows give (:func:`_coll_rows`).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rankscope-coll") as coll_pool:
        coll_rows = coll_pool.submit(coll.parse_fast_rows, fast_df, report)
        try:
            return _split_parts(df, lines, fast_df, cols, report, coll_rows)
        finally:
            coll_rows.cancel()


def _coll_rows(
    coll_rows: Future[pl.DataFrame] | None,
    back_paths: list[pl.Series],
    comm_pg: dict[str, str],
    cols: list[str] | None,
) -> pl.DataFrame | None:
    """The NCCL COLL fast path's rows (``coll_rows``: :func:`parsers.coll.parse_fast_rows` of all the fast-path
    lines) but those of the files the generic slices took back (``back_paths``), with their ``pg``
    (``comm_pg``) and, with ``cols``, only those columns; None when none is left."""
    if coll_rows is None:
        return None
    out = coll_rows.result()
    if back_paths:
        out = out.filter(~out["path"].is_in(pl.concat(back_paths).implode()))
    if out.height == 0:
        return None
    out = coll.with_pg(out, comm_pg)
    return out if cols is None else out.select([c for c in cols if c in out.columns])


def _split_parts(
    df: pl.DataFrame,
    lines: pl.DataFrame,
    fast_df: pl.DataFrame,
    cols: list[str] | None,
    report: Callable[[int], None] | None,
    coll_rows: Future[pl.DataFrame] | None,
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """:func:`parse_lines_split` of ``df`` (with ``_pos``): ``lines`` its rows off the NCCL COLL fast path,
    ``fast_df`` those on it, whose rows ``coll_rows`` builds meanwhile."""
    comm_pg: dict[str, str] = {}
    app_split = (
        _app_split(lines) if APP_FAST and cols is not None and lines.height >= APP_FAST_MIN_LINES else None
    )
    if app_split is not None and cols is not None:
        # Application lines (:mod:`parsers.appfast`: whole files, and the lines of mixed files away from what
        # else they hold) leave the generic lines before they are sliced: fewer slices, each with its fixed
        # cost of every prefix and rule pass, and fewer lines in each.
        app_lines, app_caps = lines.filter(app_split[0]), app_split[1]
        lines = lines.filter(~app_split[0])
        if lines.height == 0:  # no generic line: no Init line (no communicator map), no record to take back
            # the generic rows' columns from the probe, parsed on a thread beside the fast path's rows
            with ThreadPoolExecutor(max_workers=1) as probe:
                schema = probe.submit(_app_schema, tuple(df.schema.items()), tuple(cols))
                app_out = _shape_app(_app_rows(app_lines, app_caps), schema.result())
            if report is not None:
                report(app_out.height)
            return app_out, _coll_rows(coll_rows, [], comm_pg, cols)
    slices = _file_slices(
        lines, GENERIC_CHUNK_ROWS, ramp=2, least=int(GENERIC_CHUNK_ROWS * GENERIC_LEAST_SHARE)
    )
    # The slices are parsed on a thread each (``rules.parallelism``; each polars call runs on one core
    # and releases the GIL), reported as each ends and taken in order, so the result is that of one slice
    # after another: a slice holds whole files, and the fast-path rows it takes back are of its own files.
    # 256-rank bench (253k generic lines, 2 cores): 9.3 s for the whole parse, against 12.1 s one slice
    # after another. The fast path's rows are built on a thread of their own meanwhile, and take the generic
    # rows' columns at the end (:func:`_shape_app`): a job of application lines spends most of its parse in the
    # two, and its one slice runs on one core.
    with ThreadPoolExecutor(max_workers=parallelism(len(slices)) + (app_split is not None)) as pool:
        app_future = None if app_split is None else pool.submit(_app_rows, app_lines, app_caps)
        got = _parse_slices(pool, [lines.slice(a, b - a) for a, b in slices], fast_df, cols, report)
    parts = [g[0] for g in got]
    for g in got:
        for k, v in g[1].items():  # the first Init line of a key wins, as in one slice
            comm_pg.setdefault(k, v)
    back_paths = [g[2] for g in got if g[2] is not None]
    del got
    gen = parts[0] if len(parts) == 1 else pl.concat(parts, how="diagonal_relaxed")
    if cols is not None and len(parts) > 1:
        gen = gen.select([c for c in cols if c in gen.columns])
    if app_future is not None and cols is not None:
        app_rows = _shape_app(app_future.result(), gen.schema)
        if report is not None:
            report(app_rows.height)
        # The merge frees the columns of the two as it builds the result's: no other reference to them may
        # be left here (nor to the lines the fast-path rows share columns with).
        both = [gen, app_rows]
        del gen, app_rows, parts, app_future, app_lines, app_caps, app_split
        gen = _merge_app(both, cols)
    return gen, _coll_rows(coll_rows, back_paths, comm_pg, cols)


def merge_parts(
    gen: pl.DataFrame, fast: pl.DataFrame | None, on_column: Callable[[int, int], None] | None = None
) -> pl.DataFrame:
    """The two parts of :func:`parse_lines_split` as one frame in input order (``_pos`` kept): see
    :func:`merge_taken`."""
    return merge_taken([gen, fast], on_column)


def merge_taken(
    parts: list[pl.DataFrame | None], on_column: Callable[[int, int], None] | None = None
) -> pl.DataFrame:
    """The two parts of :func:`parse_lines_split` (``parts``: ``[generic rows, fast-path rows or None]``,
    taken out of the list) as one frame in input order (``_pos`` kept).

    The order is computed once from the key columns, then each column is put in that order by itself
    (one ``gather`` per column of a single chunk) and dropped from the two parts: the same rows as a sort of
    the whole frame, with a lower peak and a report after each column. Where the caller holds no other
    reference to the parts (nor to frames sharing their columns), the two and the result are never held whole
    at once. ``on_column(done, total)``: called after each column (``total``: the columns of the result).
    Measured on the 256-rank bench's ``rankscope timeline`` (5.1 M rows): peak RSS 6.7 GB, against 8.3 GB
    with ``DataFrame.sort``, in the same time. 16-rank COLL job (320k rows), ``rankscope timeline``: peak RSS
    673 -> 622 MiB with each column dropped once built and the callers' references dropped first (the merge
    531 -> 413 MiB with freed memory returned at once, ``_RJEM_MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0``).
    """
    gen, fast = parts
    parts.clear()
    if gen is None:
        raise ValueError("merge_taken: no generic rows")
    if fast is None or fast.height == 0:
        return gen
    ordered = gen["_pos"].is_sorted()
    out = pl.concat([gen, fast], how="diagonal_relaxed")
    del gen, fast
    keys = ["_pos"] if ordered else ["path", "line", "_pos"]
    order = out.select(pl.arg_sort_by(keys, maintain_order=True)).to_series()
    names, cols = out.columns, []
    for k, name in enumerate(names):
        cols.append(out[name].rechunk().gather(order))
        out = out.drop(name)
        if on_column is not None:
            on_column(k + 1, len(names))
    return pl.DataFrame(cols)


def parse_lines(df: pl.DataFrame, keep: list[str] | tuple[str, ...] | None = None) -> pl.DataFrame:
    """Parse a frame of physical lines (``path, line, line_count, raw, body`` + source columns).

    Returns one row per record with the prefix columns, ``message``, ``record``, ``kind``, ``layer``,
    ``severity`` and rule fields; line counts are preserved (sum of ``line_count`` is unchanged), rows stay
    in input order (split glued lines sorted by ``path, line``). With ``keep``, only those columns (of the
    ones present) are returned, which keeps the frame narrow.

    NCCL COLL lines of files whose parse does not depend on them take the fast path (:mod:`parsers.coll`):
    the same rows, from one regex pass instead of every prefix and rule. With ``keep``, so do plain application
    lines (:mod:`parsers.appfast`: Python logging lines of asctime, Hydra, DeepSpeed or the HF example scripts'
    format, tqdm bars, warnings and prints, in whole files or away from what else their file holds).
    """
    gen, fast = parse_lines_split(df, keep)
    return merge_parts(gen, fast).drop("_pos")
