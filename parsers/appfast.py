"""The fast path of application lines: plain Python ``logging`` lines and lines without any prefix, without
the generic passes.

Most lines of an application-heavy log are the training script's own default-format logging lines
(``logging.basicConfig``; :data:`parsers.app.ASCTIME`, the last of ``parsers.PRODUCER_PREFIXES``)::

    2026-11-29 22:15:38,871 INFO [trainer] rank=3 step=1835 loss=2.0959 lr=3.0e-04

or lines of the other logging formats of :data:`parsers.app.PREFIXES` (Hydra's job logging, DeepSpeed's logger,
the HF example scripts', bracketed asctime)::

    [2024-08-12 23:04:07,257][root][INFO] - train, rank: 2, epoch: 0/500, total step: 32900
    [2024-11-29 22:41:07,512] [INFO] [engine.py:256:step] step=40 loss=2.31
    11/29/2024 22:58:55 - INFO - __main__ - ***** Running training *****

and, on stderr, tqdm's bars and Python's warnings, lines without any prefix::

    Epoch 0:   3%|#         | 301/10000 [05:01<2:41:40, 1.00it/s]
    /opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:560: UserWarning: This DataLoader …

The generic path gives such a line, when nothing else touches it, the row this module builds directly (see
:func:`parse`): for a logging line its prefix's captures (``pyts`` or ``usts``, ``logger``, ``sev_word`` ->
``severity``), ``message`` and ``record`` = the text after the prefix, ``layer`` ``app``, and
:func:`parsers.app.progress_fields`' ``step`` / ``rank_stated`` / ``world_size`` with kind ``step_progress``
or ``log``; for a line without a prefix, a ``progress_bar`` row (:data:`parsers.app.BAR`) or an ``unparsed``
one; for both :func:`parsers.c10d.stated_ranks`' columns.

A line takes this path when it qualifies: it is one physical line (``raw == body``, no newline, ``line_count``
1, no ``layer`` of its own); it starts with an application prefix and matches no earlier producer prefix, and
its message matches no later one (``rules.strip_prefixes`` would strip it again), or it matches no producer
prefix at all and is not blank; it has no transport or Ray worker prefix and no record start inside the line
(:func:`_raw_gate`, :func:`_app_heads`); and its message holds no literal of any rule (a line without a prefix
may hold tqdm's) and no marker of a helper that reads across rows or adds columns (:data:`MESSAGE_MARKERS`).
A line behind torchrun's tee prefix (``[default3]:``) qualifies as the text behind it would, and its row gets
the tee's ``tee_local_rank`` (:data:`_TEE_HEAD`), unless a line of the parse holds a tee prefix glued to other
text (:data:`_TEE_INSIDE`); so does a line behind Slurm's ``srun --label`` (``3: ``, its row with
``srun_label``; :func:`_unsrun`) in a file where the generic path strips the labels, with and without the lines
that leave. A file all of whose lines (its generic-path lines: NCCL COLL fast-path lines are
already apart) qualify takes it whole: several helpers read across the rows of a file (record grouping, spawn
blocks, snippets, banners, stall lists, root causes, stack dumps, RAS JSON documents), and such a file gives
none of them anything to act on. In a file where some lines do not qualify (a stdout log that ends in a
traceback, a stderr log of bars that ends in a watchdog error), the qualifying lines more than
:data:`CONTEXT_LINES` lines away from all of those, in the file and in their stream (:func:`_near`), take it
(:func:`split`): no helper reads farther than that from a row, and every chain of rows those helpers follow
runs through lines that do not qualify and stops at the first that does (kept). The decisions made from all the
lines of a file are kept off by :func:`_file_gate` (Ray, Paddle, the transport prefixes stripped by their share
of a file's lines) and :func:`_maybe_wraps` (hard wraps: a file where the generic path could find one, in all
its lines or in those it keeps, stays whole). Leaving these lines out of the generic lines changes no decision
about the others (the slice-wide ones, the tee roles of glued lines and the Ray worker prefix, are kept off by
:func:`_raw_gate` and :data:`_TEE_INSIDE`). ``parsers.parse_lines_split`` takes these lines out before it slices
the generic lines and merges their rows back in ``_pos`` order. ``tests/test_appfast.py`` checks the rows
against the generic path's on every corpus case, on generated jobs (a tee'd console among them) and on drawn
files, whole and mixed.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import polars as pl

from parsers import app, c10d, horovod, python, ray, spawn, stack, transport
from parsers.coll import DISTINCT, per_distinct
from parsers.rules import Prefix, _cast_fields, _gate_of, _head_pattern, ascii_classes, defined, unnamed

#: Markers of the helpers that read across rows or make per-row decisions beyond the rules, tested on the
#: message (the text after the ASCTIME prefix). A line holding one keeps its whole file on the generic path.
#: Each helper that gets a new early-return test (a marker of the rows it acts on) must add it here.
MESSAGE_MARKERS: tuple[str, ...] = (
    python._CANDIDATE,  # python.group_records: indented lines, tracebacks, C++ exception continuations
    python.EXC_LINE,  # group_records (exception line ending a traceback), exception_fields, CATCH_ALL
    ray._SNIPPET,  # ray.dead_snippets / snippet_rows: ``[Rank 0 Error Snippet]:`` and the line after it
    ray._DIED,
    r"^\s*-{10,}\s*$",  # paddle.banner_rows: a dashed line near a Paddle error header
    horovod._ITEM,  # horovod.stall_items: a run of ``<rank>: [...]`` after ``Missing ranks:``
    horovod._HEAD,
    spawn._SPAWN_HEAD,  # spawn.spawn_child_rank: the block after ``-- Process N terminated …``
    stack.DEBUG_SERVER_RANK.pattern,  # stack.dump_rows: ``=== Rank N: addr ===`` above a dump
    "Root Cause",  # elastic.mark_root_cause: the entry after ChildFailedError's header
    # ras.json_rows: a JSON document's first line, ``{`` alone (it reads records that start with ``{\n``; a
    # one-line dict such as HF Trainer's ``{'loss': 2.31, 'epoch': 0.5}`` is not one)
    r"^\{$",
)
#: :data:`MESSAGE_MARKERS` as one alternation.
_MARKERS = "|".join(f"(?:{m})" for m in MESSAGE_MARKERS)

#: Markers tested on the whole line (before any prefix is stripped): a record starting inside the line
#: (``transport.LEAD``), a tee prefix glued inside it (``transport.split_glued_tee``, whose roles are those seen
#: in any file of the slice), Ray's worker prefix (``ray.strip_worker_prefix`` runs on a slice where any line
#: holds ``" pid="``, and adds columns).
RAW_MARKERS: tuple[str, ...] = (
    transport._RECORD_START,
    transport.TEE_LIKE,
    " pid=",
)


@lru_cache(maxsize=1)
def rule_literals() -> tuple[str, ...]:
    """The literal of every :class:`Rule` of every parser module (message and record rules alike): a message
    holding one may be claimed by a rule, so its file stays generic. Two rules have none, and neither can
    claim a qualifying line: ``nccl_warn`` (rows with an NCCL WARN prefix) and ``python_exception`` (rows with an
    exception type, kept off by :data:`MESSAGE_MARKERS`)."""
    return tuple(sorted({r.literal for r in defined()[0] if r.literal}))


@lru_cache(maxsize=2)
def _message_gate(bar: bool = True) -> str:
    """One regex for a message the fast path leaves to the generic path: one holding a rule literal anywhere
    (:func:`rule_literals`, ``re.escape``'d; tqdm's too unless ``bar`` is False) or a helper marker
    (:data:`MESSAGE_MARKERS`).
    One scan where there were two: an alternation of literals runs on the regex engine's literal prefilter (the
    400k-line app job's messages: 0.111 s for ``contains_any`` of the literals and a scan for the markers, 0.042 s
    for this). The prefix gates stay scans of their own: joined to this one, a regex of them all is too large
    for the engine's fast automata (the bare lines of a tee'd console: 0.09 s -> over 9 s)."""
    lits = [x for x in rule_literals() if bar or x != _BAR_LITERAL]
    return "(?:" + "|".join(re.escape(x) for x in lits) + ")|" + _MARKERS


def _xport_patterns() -> tuple[str, ...]:
    """The patterns of the transport / tee prefixes ``parsers.transport.strip_transport`` strips, LEAD aside (a
    record starting inside a line, which :data:`RAW_MARKERS` and ``_KNOWN_START`` see by its record starts)."""
    return tuple(
        v.pattern for v in vars(transport).values() if isinstance(v, Prefix) and v is not transport.LEAD
    )


@lru_cache(maxsize=8)
def _raw_gate(prefix: Prefix | None) -> str:
    """One regex for lines the generic path would treat otherwise than as a plain line of ``prefix`` (a line
    without any prefix when None): any producer prefix tried before it (all of them for None), any transport /
    tee prefix (LEAD by its record starts, anywhere), Ray's worker prefix, and :data:`RAW_MARKERS`."""
    import parsers

    prods = parsers.PRODUCER_PREFIXES
    if prods[-1] is not app.ASCTIME or app.ASCTIME in prods[:-1]:
        raise AssertionError(
            "application fast path: ASCTIME must be the last producer prefix, and only there"
        )
    before = prods if prefix is None else prods[: prods.index(prefix)]
    heads = (*(p.pattern for p in before), *_xport_patterns(), ray.PREFIX.pattern)
    return "|".join([_gate_of(heads), *(f"(?:{m})" for m in RAW_MARKERS)])


#: ASCTIME's prefix part (``rules.strip_prefix`` strips the text it matches, leftmost-first), as the two
#: patterns below read it: a change to ASCTIME must be made to them too.
_HEAD = ascii_classes(
    r"^(?P<pyts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?(?:Z|[+-]\d\d:?\d\d)?) (?:- )?(?:\[?(?P<sev_word>DEBUG|"
    r"INFO|WARNING|WARN|ERROR|CRITICAL)\]?(?: -)? )?"
)
if _head_pattern(app.ASCTIME.pattern) != _HEAD:  # a Prefix's pattern is written so
    raise AssertionError(
        "parsers.app.ASCTIME changed: parsers.appfast reads its captures by _STAMP and _LEVEL"
    )
#: A line this path takes starts with the stamp of ASCTIME in ASCII and a space: then ASCTIME's head matches it,
#: its stamp (``pyts``) is the text up to the first space after the seconds (the fraction's digits run up to
#: it, greedy), and what follows is the level part, at most 15 characters (:data:`_LEVEL`). A stamp with a zone
#: (``+00:00``, ``Z``) does not: such a line takes the generic path.
_STAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[,.][0-9]+)? "
#: ASCTIME's head after the stamp and its space, as a pattern of its own (the same alternatives, in order).
_LEVEL = r"^(?P<__lv>(?:- )?(?:\[?(?P<sev_word>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]?(?: -)? )?)"
_LEVEL_CHARS = 16

#: The columns of :func:`split`'s captures: every named group of the application prefixes
#: (:data:`parsers.app.PREFIXES`: stamps, logger name, level word), the message, and whether the line has no
#: prefix at all.
CAPS: dict[str, pl.DataType] = {
    "pyts": pl.String(),
    "usts": pl.String(),
    "logger": pl.String(),
    "sev_word": pl.String(),
    "rest": pl.String(),
    "bare": pl.Boolean(),
    "tee_local_rank": pl.Int32(),
    "srun_label": pl.String(),
}


def _caps(n: int, **cols: pl.Series) -> pl.DataFrame:
    """A captures frame of ``n`` rows: ``cols``, every other column of :data:`CAPS` null (``bare`` False)."""
    return pl.DataFrame(
        [
            cols[c].cast(d).alias(c)
            if c in cols
            else pl.repeat(False if c == "bare" else None, n, dtype=d, eager=True).alias(c)
            for c, d in CAPS.items()
        ]
    )


@lru_cache(maxsize=1)
def _app_heads() -> tuple[tuple[str, str, str, str], ...]:
    """For each application prefix of :data:`parsers.app.PREFIXES` but ASCTIME (Hydra's, DeepSpeed's, the HF
    example scripts', bracketed asctime), in the order ``parsers.PRODUCER_PREFIXES`` tries them: ``(head,
    captures, raw gate, rest gate)``. ``head`` is the prefix part of its pattern (what ``rules.strip_prefix``
    tests); ``captures`` the same with the whole match named ``__all`` (the message is the text after it, as
    ``strip_prefix`` cuts it on a line without a newline); ``raw gate`` matches a line where an earlier producer
    prefix, a transport / tee prefix, Ray's worker prefix or a :data:`RAW_MARKERS` marker would act first; ``rest
    gate`` a message a later producer prefix would strip again (``rules.strip_prefixes`` tries every prefix
    once, in order, on what the earlier ones left)."""
    import parsers

    prods = parsers.PRODUCER_PREFIXES
    out = []
    for p in app.PREFIXES:
        if p is app.ASCTIME:
            continue
        at = [i for i, q in enumerate(prods) if q is p]
        head = _head_pattern(p.pattern)
        groups = set(re.compile(p.pattern).groupindex) - {"rest"}
        if len(at) != 1 or not head or not groups <= set(CAPS) or at[0] == len(prods) - 1:
            raise AssertionError(f"application fast path: prefix {p.name} must be a producer prefix, once")
        rest_gate = _gate_of(tuple(q.pattern for q in prods[at[0] + 1 :]))
        out.append((head, f"(?P<__all>{head})", _raw_gate(p), rest_gate))
    return tuple(out)


#: Lines of a mixed file kept on the generic path on each side of a line that does not qualify: every helper
#: that reads a neighbour reads at most two rows away (``ray``'s snippets: the next two rows), and every chain
#: of rows (a record, a stack dump, a spawn block, a stall list, a JSON document) runs through lines that do not
#: qualify and ends at the first one that does, which then stays generic. In a file whose lines come from
#: several streams (tee'd ranks, MPI's tagged stdout/stderr), a qualifying line (no prefix of its own) is no
#: farther in the file from a line that does not qualify than in its stream.
CONTEXT_LINES = 2


@lru_cache(maxsize=1)
def _file_gate() -> str:
    """One regex for the lines that keep a whole mixed file on the generic path: Ray's worker prefix, its tag
    ``(<Actor> pid=P)`` anywhere in a line (behind another prefix) and the controller's ``pid=P) world_rank=R``
    (``ray.worker_ranks`` maps pids to ranks per file), Paddle's launcher prefixes
    (``paddle.console_streams`` gives every unprefixed line of such a file a local rank). A ``pid=`` of a
    ``key=value`` message (``starting worker pid=40047``) keeps nothing whole. (The transport prefixes stripped
    by their share of a file's lines: :func:`_share_gate`.)"""
    from parsers import paddle

    # Ray's tag anywhere covers its prefix, which is the tag at the start of a line.
    return "|".join([_gate_of((ray.TAG, *(p.pattern for p in paddle.PREFIXES))), ray.WORKER_MAP])


def _lead_of(prefix: Prefix) -> str:
    """``prefix``'s pattern as a part of a longer one: no ``^``, no message group (a ``.+`` message as one
    character), its groups unnamed."""
    pat = prefix.pattern
    for tail, rest in (("(?P<rest>.*)$", ""), ("(?P<rest>.+)$", ".")):
        if pat.startswith("^") and pat.endswith(tail):
            return unnamed(pat[1 : -len(tail)]) + rest
    raise AssertionError(f"application fast path: transport prefix {prefix.name} changed shape")


@lru_cache(maxsize=1)
def _share_gate() -> str:
    """One regex for the lines of the transport prefixes ``parsers.transport.strip_transport`` strips only in a
    file where enough of its lines (its generic-path lines) hold one: Slurm's ``srun --label`` and pdsh's host
    (half of them) and the tee's ``[<rank>]:`` (30%), behind any of the prefixes stripped before them (kubectl's
    stamp and pod, Open MPI's tag). Taking lines out of such a file would raise that share: ``0: hello`` in a
    file of asctime lines would lose its label."""
    before = "".join(
        f"(?:{_lead_of(p)})?" for p in (transport.KUBECTL_TS, transport.KUBECTL_POD, transport.MPI_TAG)
    )
    srun, pdsh = _lead_of(transport.SRUN_LABEL), _lead_of(transport.PDSH_HOST)
    return f"^{before}(?:{srun})?(?:{pdsh})?(?:{srun}|{pdsh}|{_lead_of(transport.TEE_RANK)})"


@lru_cache(maxsize=1)
def _xport_heads() -> str:
    """One regex for the transport / tee prefixes ``parsers.transport.strip_transport`` strips before the hard-wrap
    test reads a line's body (LEAD aside: what it leaves starts with a record start, like a log line)."""
    return _gate_of(_xport_patterns())


#: The literal of the one rule whose row this path builds for a line without any prefix: tqdm's progress bar
#: (:data:`parsers.app.BAR`, kind ``progress_bar`` and ``elapsed_ms``). Such a line holding any other rule's
#: literal stays generic.
_BAR_LITERAL = app.BAR.literal
_BAR_PATTERN: str = app.BAR.pattern or ""
if not _BAR_LITERAL or not _BAR_PATTERN:
    raise AssertionError("parsers.app.BAR needs a literal and a pattern: parsers.appfast builds its rows")


#: torchrun's tee prefix (``parsers.transport.TEE``'s head): ``[<role><local rank>]:``. A line behind one whose
#: role does not start with ``rank`` (``[rank3]:`` may be c10d's excepthook; ``transport.strip_transport`` tells
#: them apart) is tee'd whatever follows, and the generic path reads what follows as a line of its own: the row
#: of a plain line, with the tee's ``tee_local_rank``. Such a line qualifies as that text would (the gates are
#: tested on it; but see :data:`_TEE_INSIDE`).
_TEE_HEAD = _head_pattern(transport.TEE.pattern) or ""
if not _TEE_HEAD.startswith("^") or set(re.compile(_TEE_HEAD).groupindex) != {"tee_role", "tee_local_rank"}:
    raise AssertionError("parsers.transport.TEE changed: parsers.appfast reads its head")
#: A tee-like prefix glued to the text before it (``transport.split_glued_tee``'s cut, any role): the generic
#: path splits such a line where the role is one seen at a line start in its slice of files. Such a line does
#: not qualify (:data:`RAW_MARKERS`). Where any line of the parse holds one, each file keeps on the generic
#: path, for each role seen at the start of its tee'd lines that qualify, the first of them
#: (:func:`_witnesses`): the lines left see the same roles in every slice. (A record starting inside a line,
#: ``transport.LEAD``, is split off whatever the other lines: such a line does not qualify, and :func:`_near`
#: counts it in the streams of its pieces, :func:`_touched`, or in every stream.)
_TEE_INSIDE = r"[^:\s]" + transport.TEE_LIKE


def tee_inside(raw: pl.Series) -> bool:
    """Whether a line of ``raw`` holds a tee-like prefix glued to the text before it (:data:`_TEE_INSIDE`): then
    each file keeps witnesses of its roles on the generic path (:func:`split`'s ``glued``, to be decided for all
    the lines of a parse at once, as the generic path's slices hold files of any of its parts)."""
    return bool(raw.str.contains(_TEE_INSIDE).any())  # one scan: a console's lines all hold a ``[``


def _untee(text: pl.Series, one: pl.Series) -> tuple[pl.Series, pl.Series | None]:
    """``(text, local rank)``: ``text`` (the lines' ``raw``, less an srun label) with torchrun's tee prefix cut
    off the ``one`` lines (single physical lines) that are tee'd (:data:`_TEE_HEAD`, a role not starting with
    ``rank``), and the tee's local rank of each line (Int32, null where none); ``(text, None)`` where no line
    is."""
    cand = (one & text.str.starts_with("[") & ~text.str.starts_with("[rank")).fill_null(False)
    if not cand.any():
        return text, None
    at = cand.arg_true()
    sub = text if at.len() == text.len() else text.gather(at)  # a tee'd console: every line is a candidate
    # The head holds no ``]``: where it matches, it ends at the line's first ``]:``. Read once per distinct
    # text up to there (a console has a few: one per local rank).
    upto = sub.str.slice(0, sub.str.find("]:", literal=True) + 2)
    head = per_distinct(upto, pl.col(DISTINCT).str.extract(f"{_TEE_HEAD}$", 2).alias("lr"))
    ok = head["lr"].is_not_null()
    if not ok.any():
        return text, None
    at = at.filter(ok)
    cut = pl.repeat(0, text.len(), dtype=pl.UInt32, eager=True).scatter(at, upto.filter(ok).str.len_chars())
    lr = pl.repeat(None, text.len(), dtype=pl.Int32, eager=True).scatter(
        at, head["lr"].filter(ok).cast(pl.Int32, strict=False)
    )
    return text.str.slice(cut), lr


#: Slurm's ``srun --label`` (``parsers.transport.SRUN_LABEL``): ``R: `` before each line of task R. The generic
#: path strips it in a file where enough of its non-blank lines hold one (``transport.FILE_SHARE``), after
#: kubectl's and Open MPI's prefixes; a line behind it qualifies as the text behind it would, its row with the
#: label (``srun_label``), where the file is such a file and stays one without the lines that leave
#: (:func:`split`).
_SRUN = transport.SRUN_LABEL.pattern
_SRUN_SHARE = transport.FILE_SHARE[transport.SRUN_LABEL.name]
#: The digits before the line's first ": " (see _unsrun).
_SRUN_HEAD = ascii_classes(r"^ *(?P<srun_label>\d+): ")
if _head_pattern(_SRUN) != _SRUN_HEAD or set(re.compile(_SRUN).groupindex) != {
    "srun_label",
    "rest",
}:
    raise AssertionError("parsers.transport.SRUN_LABEL changed: parsers.appfast reads its label and message")


def _unsrun(lines: pl.DataFrame, one: pl.Series) -> tuple[pl.Series, pl.Series | None, pl.Series, pl.Series]:
    """``(text, label, hit, srun files)``: the lines' ``raw`` with the srun label cut off the ``one`` lines of the
    files whose label the generic path strips, each line's label (String, null where none; None where no line
    has one), whether each line holds a label as ``transport.strip_transport`` counts it, and the paths of those
    files: half of their non-blank lines hold a label, and none holds a prefix stripped before it (kubectl's,
    Open MPI's)."""
    raw, body, path = lines["raw"], lines["body"], lines["path"]
    none = (raw, None, pl.repeat(False, raw.len(), dtype=pl.Boolean, eager=True), path.clear())
    lead = body.str.contains(_gate_of((_SRUN,))).fill_null(False)  # the label alone: most lines fail at once
    if not lead.any():
        return none
    # After the label the pattern takes ``(?P<rest>.*)$``: any text without a newline (``.`` takes none)
    hit = lead & ~body.str.contains("\n", literal=True).fill_null(False)
    shares = transport.file_shares(path, hit, body.str.len_chars() > 0)
    files = shares.filter(pl.col("share") >= _SRUN_SHARE)["path"]
    if files.len():
        before = _gate_of(
            tuple(p.pattern for p in (transport.KUBECTL_TS, transport.KUBECTL_POD, transport.MPI_TAG))
        )
        rows = path.is_in(files.implode())
        files = files.filter(
            ~files.is_in(path.filter(rows & body.str.contains(before).fill_null(True)).implode())
        )
    if files.len() == 0:
        return (raw, None, hit, files)
    at = (hit & one & path.is_in(files.implode())).arg_true()
    # The label is the digits before the line's first ``: `` (spaces and digits only before it), the message
    # what follows: read by position, not by captures (0.13 s per 400k lines).
    sub = raw.gather(at)
    cut = sub.str.find(": ", literal=True)
    label = pl.repeat(None, raw.len(), dtype=pl.String, eager=True).scatter(
        at, sub.str.slice(0, cut).str.strip_chars_start(" ")
    )
    return raw.clone().scatter(at, sub.str.slice(cut + 2)), label, hit, files


def split(
    lines: pl.DataFrame, glued: bool | None = None, workers: int = 1
) -> tuple[pl.Series, pl.DataFrame] | None:
    """``(mask, captures)``: the rows of ``lines`` (a lines frame: ``path, raw, body, line_count`` + source
    columns) that take the fast path, and for those rows (in order) the columns of :data:`CAPS`: the prefix's
    captures (``sev_word``, and the others where not null on every row), ``rest`` (the message) and ``bare``
    (True for a line without any prefix); None when none do.

    Three kinds of lines qualify: plain asctime lines (see the module), plain lines of the other application
    logging prefixes (:func:`_prefixed_lines`), and lines without any prefix (a tqdm bar, a warning, a script's
    ``print``) that hold no rule literal but tqdm's and no helper marker; each also behind torchrun's tee prefix
    (:func:`_untee`; ``glued``: :func:`tee_inside` of all the lines of the parse, when ``lines`` is a part of
    them: see :data:`_TEE_INSIDE`) or Slurm's srun label (:func:`_unsrun`), with the tee's local rank or the
    label among the captures. Each line is classified on its own (:func:`_classify`: in ``workers`` parts of
    rows on threads), each file then decided as a whole.

    A file all of whose lines qualify takes it whole, unless it holds a line that does not start like a log line
    (``parsers._KNOWN_START``) where the generic path could find a hard wrap (:func:`_maybe_wraps`). In a file
    where some lines do not (a traceback at the end of a stdout log, a watchdog error after a run of progress
    bars), the qualifying lines farther than :data:`CONTEXT_LINES` from every line that does not take it, in the
    file and in their stream (:func:`_near`), unless the file holds a line of :func:`_file_gate` or
    :func:`_share_gate` or the generic path could find a hard-wrapped line in it or in the lines it keeps
    (:func:`_maybe_wraps`). A file whose srun labels the generic path strips takes it only where it still would
    in the lines left.

    In a file with NCCL COLL fast-path lines (``parsers.fast_split``), ``lines`` lacks those, and distances are
    counted without them. The generic path takes them back into a file whose lines hold a record candidate
    (``parsers._parse_slice``), where each ends the record before it: a chain of rows ends no later than
    without them, so the lines farther than :data:`CONTEXT_LINES` from every line that does not qualify are
    read by none; and such a file has no line where a hard wrap could be found (``fast_split`` keeps a file
    with one whole on the generic path)."""
    import parsers

    if lines.height == 0 or not {"raw", "body", "path", "line_count"} <= set(lines.columns):
        return None
    raw = lines["raw"]
    one = (lines["body"] == raw) & (lines["line_count"] == 1) & ~raw.str.contains("\n", literal=True)
    if "layer" in lines.columns:
        one = one & lines["layer"].is_null()
    if "layout" in lines.columns:
        one = one & (lines["layout"] != "error_json").fill_null(True)
    one = one.fill_null(False)
    path = lines["path"]
    if path.null_count() or not one.any():
        return None
    # a line behind an srun label or tee prefix qualifies as the text behind it would (every gate reads that text)
    body, label, hit, srun_files = _unsrun(lines, one)
    tee_lr, asc, pre, bare = _classify(body, one, workers)
    qual = pl.concat([asc[0], pre[0], bare[0]]).sort()  # the rows of the three kinds (none of two), in order
    if tee_lr is not None and (tee_inside(raw) if glued is None else glued):
        qual = qual.filter(~qual.is_in(_witnesses(path, body, tee_lr, qual).implode()))
    if qual.len() == 0:
        return None
    qual_mask = pl.repeat(False, lines.height, dtype=pl.Boolean, eager=True).scatter(qual, True)
    take = qual_mask
    mixed = path.filter(~qual_mask).unique()
    if mixed.len():
        mixed = mixed.filter(mixed.is_in(path.gather(qual).unique().implode()))
        take = _mixed_rows(lines, body, label, tee_lr, qual_mask, mixed)
    # A file of qualifying lines only, some that do not start like a log line (no prefix, or an application
    # prefix outside ``parsers._KNOWN_START``): those may be hard wraps (see _maybe_wraps).
    unknown = pre[0].filter(~body.gather(pre[0]).str.contains(parsers._KNOWN_START))
    whole = path.gather(pl.concat([bare[0], unknown])).unique()
    whole = whole.filter(~whole.is_in(mixed.implode()))
    if whole.len():
        rows = path.is_in(whole.implode())
        files = pl.DataFrame({"path": path.filter(rows), "raw": raw.filter(rows), "body": body.filter(rows)})
        teed = None if tee_lr is None else tee_lr.filter(rows).is_not_null()
        unsure = _maybe_wraps(files, pl.repeat(True, files.height, dtype=pl.Boolean, eager=True), teed)
        if unsure.len():
            take = take & ~path.is_in(unsure.implode())
    if srun_files.len():
        # The generic path strips the labels of a file where half of the lines it keeps hold one: so must the
        # lines left (a file none of whose non-blank lines is left decides nothing).
        left = path.is_in(srun_files.implode()) & ~take
        shares = transport.file_shares(path, hit, left & (lines["body"].str.len_chars() > 0))
        lost = shares.filter(pl.col("share") < _SRUN_SHARE)["path"]
        if lost.len():
            take = take & ~path.is_in(lost.implode())
    if not take.any():
        return None
    idx = pl.concat([asc[0], pre[0], bare[0]])
    caps = pl.concat([asc[1], pre[1], bare[1]])
    if tee_lr is not None:
        caps = caps.with_columns(tee_lr.gather(idx).alias("tee_local_rank"))
    if label is not None:
        caps = caps.with_columns(label.gather(idx).alias("srun_label"))
    caps = caps.with_columns(idx.alias("__at")).filter(take.gather(idx)).sort("__at").drop("__at")
    # A capture null on every row (``usts`` and ``logger`` in a job of asctime lines) is left out: 16 bytes a
    # row each while the rows are built (+18 MiB peak on the 400k-line app job). ``sev_word`` gives the
    # severity (parse): it stays.
    return take, caps.select(
        [c for c in caps.columns if c in ("rest", "bare", "sev_word") or caps[c].null_count() < caps.height]
    )


_Kind = tuple[pl.Series, pl.DataFrame]


def _witnesses(path: pl.Series, body: pl.Series, tee_lr: pl.Series, qual: pl.Series) -> pl.Series:
    """Of the rows ``qual`` (the lines that qualify, ascending), for each file (``path``) and each role seen at
    the start of its tee'd lines among them (``tee_lr`` not null; ``body``'s :data:`transport.LINE_START_ROLE`,
    but ``rank``), the first: kept on the generic path, they keep the roles the generic path's slices see when
    a line holds a glued tee-like prefix (:data:`_TEE_INSIDE`)."""
    at = qual.filter(tee_lr.gather(qual).is_not_null())
    text = body.gather(at)
    # The head holds no ``]``: read once per distinct text up to the character after its first ``]:``.
    role = per_distinct(
        text.str.slice(0, text.str.find("]:", literal=True) + 3),
        pl.col(DISTINCT).str.extract(transport.LINE_START_ROLE, 1).alias("r"),
    )["r"]
    return (
        pl.DataFrame({"path": path.gather(at), "r": role, "i": at})
        .filter(pl.col("r").is_not_null() & (pl.col("r") != "rank"))
        .group_by("path", "r")
        .agg(pl.col("i").min())["i"]
    )


def _classify(body: pl.Series, one: pl.Series, workers: int) -> tuple[pl.Series | None, _Kind, _Kind, _Kind]:
    """``(tee local rank, asctime, prefixed, bare)``: the lines' tee local ranks (:func:`_untee`: Int32, null
    where none; None where no line is tee'd) and, for each of the three kinds of lines that qualify
    (:func:`_asctime_lines`, :func:`_prefixed_lines`, :func:`_bare_lines`), the row indices of its lines
    (ascending) and their captures. ``body`` (the lines' ``raw`` less an srun label the generic path strips)
    and ``one`` (the single physical lines) are of one length; every test reads one line only, so ``workers`` > 1
    parts of rows give the same on threads (each polars call runs on one core: a 37 MB tee'd console, one
    file, is otherwise classified on one)."""
    n = body.len()
    k = max(1, min(workers, n // _CLASSIFY_MIN_ROWS))
    if k == 1:
        text, tee_lr = _untee(body, one)
        stamped = text.str.contains(_STAMP).fill_null(False)
        asc = _asctime_lines(text, one & stamped)
        pre, headed = _prefixed_lines(text, one & ~stamped)
        return tee_lr, asc, pre, _bare_lines(text, one & ~stamped & ~headed)
    step = -(-n // k)
    starts = range(0, n, step)

    def part(a: int) -> tuple[pl.Series | None, _Kind, _Kind, _Kind]:
        return _classify(body.slice(a, step), one.slice(a, step), 1)

    with ThreadPoolExecutor(max_workers=k) as pool:
        got = list(pool.map(part, starts))
    tees = [g[0] for g in got]
    tee_lr = None
    if any(t is not None for t in tees):
        tee_lr = pl.concat(
            [
                t if t is not None else pl.repeat(None, min(step, n - a), dtype=pl.Int32, eager=True)
                for t, a in zip(tees, starts, strict=True)
            ]
        )

    def kind(kinds: list[_Kind]) -> _Kind:
        return (
            pl.concat([at + a for (at, _), a in zip(kinds, starts, strict=True)]),
            pl.concat([caps for _, caps in kinds], how="vertical"),
        )

    return tee_lr, kind([g[1] for g in got]), kind([g[2] for g in got]), kind([g[3] for g in got])


#: Rows below which :func:`_classify` does not split its lines into parts (a part's fixed cost, ~30 polars
#: calls, stays small against its lines).
_CLASSIFY_MIN_ROWS = 50_000


def _asctime_lines(raw: pl.Series, cand: pl.Series) -> tuple[pl.Series, pl.DataFrame]:
    """Of the lines ``cand`` marks (one physical line each, starting with :data:`_STAMP`), the row indices of
    those that qualify, and their captures (:data:`CAPS`: ``pyts``, ``sev_word``, ``rest``)."""
    at = cand.arg_true()
    if at.len() == 0:
        return at, _caps(0)
    sub = raw.gather(at)
    bad = sub.str.contains(_raw_gate(app.ASCTIME)).fill_null(True)
    # ASCTIME's captures without a regex per line: the stamp up to the first space after the seconds, then
    # the level part, read once per distinct window of its 16 characters (a few distinct in a file).
    sp = sub.str.slice(19).str.find(" ", literal=True)
    tail = sub.str.slice(sp + 20)
    lv = per_distinct(
        tail.str.slice(0, _LEVEL_CHARS), pl.col(DISTINCT).str.extract_groups(_LEVEL).struct.unnest()
    )
    rest = tail.str.slice(lv["__lv"].str.len_chars())
    bad = bad | rest.str.contains(_message_gate())
    ok = ~bad.fill_null(True)
    caps = _caps(sub.len(), pyts=sub.str.slice(0, sp + 19), sev_word=lv["sev_word"], rest=rest)
    return at.filter(ok), caps.filter(ok)


def _prefixed_lines(raw: pl.Series, cand: pl.Series) -> tuple[tuple[pl.Series, pl.DataFrame], pl.Series]:
    """Of the lines ``cand`` marks (one physical line each), those that start with one of the application
    prefixes of :func:`_app_heads` (Hydra, DeepSpeed, HF example scripts, bracketed asctime): ``((row indices of
    those that qualify, their captures), the mask of all that start with one)``. A line qualifies when no
    earlier producer prefix, transport prefix or raw marker would act on it, no later producer prefix would
    strip its message again, and its message holds no rule literal and no helper marker (as an asctime line's
    must)."""
    headed = pl.repeat(False, raw.len(), dtype=pl.Boolean, eager=True)
    idx: list[pl.Series] = []
    caps: list[pl.DataFrame] = []
    heads = _app_heads()
    at = cand.arg_true()
    if at.len():
        sub = raw.gather(at)
        hit = sub.str.contains(_gate_of(tuple(h for h, *_ in heads))).fill_null(False)
        at, sub = at.filter(hit), sub.filter(hit)
    for head, whole, raw_gate, rest_gate in heads:
        if at.len() == 0:
            break
        mine = sub.str.contains(head).fill_null(False)
        if not mine.any():
            continue
        here, text = at.filter(mine), sub.filter(mine)
        at, sub = at.filter(~mine), sub.filter(~mine)  # a line is decided at the first prefix it starts with
        headed = headed.scatter(here, True)
        ext = text.str.extract_groups(whole).struct.unnest()
        rest = text.str.slice(ext["__all"].str.len_chars())
        bad = text.str.contains(raw_gate) | rest.str.contains(rest_gate) | rest.str.contains(_message_gate())
        ok = ~bad.fill_null(True)
        got = {c: ext[c] for c in ext.columns if c in CAPS}
        idx.append(here.filter(ok))
        caps.append(_caps(text.len(), rest=rest, **got).filter(ok))
    if not idx:
        return (cand.arg_true().clear(), _caps(0)), headed  # no row, of the index type of the others
    return (pl.concat(idx), pl.concat(caps)), headed


def _bare_lines(raw: pl.Series, cand: pl.Series) -> tuple[pl.Series, pl.DataFrame]:
    """Of the lines ``cand`` marks (one physical line each), the row indices of those without any prefix, rule
    literal (but tqdm's) or helper marker, not blank, and their captures (``rest`` the line, ``bare`` True)."""
    at = cand.arg_true()
    if at.len() == 0:
        return at, _caps(0)
    sub = raw.gather(at)
    bad = (
        (sub.str.strip_chars() == "")
        | sub.str.contains(_raw_gate(None))
        | sub.str.contains(_message_gate(bar=False))
    )
    ok = ~bad.fill_null(True)
    rest = sub.filter(ok)
    return at.filter(ok), _caps(rest.len(), rest=rest, bare=pl.repeat(True, rest.len(), eager=True))


def _stream(label: pl.Expr, lr: pl.Expr) -> pl.Expr:
    """A line's stream as :func:`_near` names it: ``<srun label>/<tee local rank>`` (either part empty where
    null), null where both are (``label``: String, ``lr``: an integer)."""
    t = lr.cast(pl.String)
    return pl.when(label.is_not_null() | t.is_not_null()).then(
        pl.concat_str([label.fill_null(""), t.fill_null("")], separator="/")
    )


def _touched(lines: pl.DataFrame) -> pl.Series:
    """For lines that do not qualify (``lines``: ``body``, the line less an srun label the generic path strips;
    ``l``, ``t``: its srun label and tee local rank, String and Int32), the streams (:func:`_stream`) of the rows
    the generic path makes of each (List[String]), or null where that is not known (counted in every stream).

    It is known for a tee'd line (``t`` not null: one physical line, as :func:`_untee` reads it). The line's
    first row keeps its tee prefix (no lead before it is junk). Another row starts at a tee-like prefix inside the
    line (``transport.split_glued_tee``'s cut; ``transport.strip_lead``'s, at ``[default<N>]:`` or
    ``[rank<N>]:``) or at another record start (``strip_lead``): the tee strips that prefix (its local rank), or
    the row has no tee rank (a role starting with ``rank``; a row split off after a lead with text of its own
    loses the tee's columns). So: its own stream; for each tee-like prefix after its first character, that local
    rank's; and, where either kind of piece may start, the stream without a tee rank."""
    l, t = pl.col("l"), pl.col("t")
    df = lines.select("body", "l", "t").with_row_index("__r")
    rest = pl.col("body").str.slice(1)
    own = df.select("__r", _stream(l, t).alias("s"))
    inside = df.filter(rest.str.contains(transport._RECORD_START) | rest.str.contains(transport.TEE_LIKE))
    untee = inside.select("__r", _stream(l, pl.lit(None, dtype=pl.Int32)).alias("s"))
    pieces = (
        inside.select("__r", "l", rest.str.extract_all(transport.TEE_LIKE).alias("g"))
        .explode("g")
        .drop_nulls("g")
        .select("__r", _stream(l, pl.col("g").str.extract(transport.TEE_LIKE, 1).cast(pl.Int32)).alias("s"))
    )
    streams = pl.concat([own, pieces, untee]).group_by("__r").agg(pl.col("s").unique(maintain_order=True))
    return (
        df.select("__r", "t")
        .join(streams, on="__r", how="left", maintain_order="left")
        .select(pl.when(t.is_not_null()).then(pl.col("s")))
        .to_series()
    )


def _mixed_rows(
    lines: pl.DataFrame,
    body: pl.Series,
    label: pl.Series | None,
    tee_lr: pl.Series | None,
    qual: pl.Series,
    mixed: pl.Series,
) -> pl.Series:
    """``qual`` (the qualifying lines) where their file qualifies whole, or is one of the ``mixed`` files
    (paths) that may be split and the line lies farther than :data:`CONTEXT_LINES` from every line that does
    not qualify, in its file and in its stream (:func:`_near`; ``label`` and ``tee_lr``, each line's srun label
    and tee local rank, None where no line has one) (see :func:`split`); False elsewhere. ``body``: the lines'
    ``raw`` less an srun label the generic path strips (what it tests for the prefixes stripped by share and for
    hard wraps)."""
    path = lines["path"]
    take = qual & ~path.is_in(mixed.implode())
    if mixed.len() == 0:
        return take
    in_mixed = path.is_in(mixed.implode())
    other = in_mixed & ~qual
    gates = pl.DataFrame({"path": path, "raw": lines["raw"], "body": body}).filter(other)
    blocked = gates.filter(
        pl.col("raw").str.contains(_file_gate()).fill_null(True)
        | pl.col("body").str.contains(_share_gate()).fill_null(True)
    )["path"].unique()
    if blocked.len():
        in_mixed = in_mixed & ~path.is_in(blocked.implode())
    if not in_mixed.any():
        return take
    at = in_mixed.arg_true()

    def pick(s: pl.Series) -> pl.Series:  # the rows of the files that may be split (a console: all)
        return s if at.len() == s.len() else s.gather(at)

    files = pl.DataFrame(
        {
            "path": pick(path),
            "raw": pick(lines["raw"]),
            "body": pick(body),
            "o": ~pick(qual),
            "s": pl.repeat(None, at.len(), dtype=pl.String, eager=True),
            "t": pl.repeat(None, at.len(), dtype=pl.List(pl.String), eager=True),
        }
    )
    if label is not None or tee_lr is not None:
        n = lines.height
        keys = pl.DataFrame(
            {
                "l": pick(label if label is not None else pl.repeat(None, n, dtype=pl.String, eager=True)),
                "t": pick(tee_lr if tee_lr is not None else pl.repeat(None, n, dtype=pl.Int32, eager=True)),
            }
        )
        files = files.with_columns(keys.select(_stream(pl.col("l"), pl.col("t"))).to_series().alias("s"))
        o = files["o"]
        if o.any():
            touched = _touched(pl.concat([files.select("body"), keys], how="horizontal").filter(o))
            # each line's place among those that do not qualify (null for the others), read off ``touched``
            where = o.arg_true()
            place = pl.repeat(None, files.height, dtype=pl.UInt32, eager=True).scatter(
                where, pl.int_range(where.len(), dtype=pl.UInt32, eager=True)
            )
            files = files.with_columns(touched.gather(place).alias("t"))
    fast = pick(qual) & ~_near(files)
    unsure = _maybe_wraps(files, fast, None if tee_lr is None else pick(tee_lr).is_not_null())
    if unsure.len():
        fast = fast & ~files["path"].is_in(unsure.implode())
    return take.scatter(at, fast)


def _near(files: pl.DataFrame) -> pl.Series:
    """Per line of ``files`` (``path``, ``o``, ``s``, ``t``: whole files in order, ``o`` the lines that do not
    qualify, ``s`` a line's stream, ``t`` the streams of a line that does not qualify, :func:`_touched`, null
    where not known): whether a line that does not qualify lies within :data:`CONTEXT_LINES` of it, in its file
    or in its stream.

    A helper that reads a line's neighbours reads them in the file (Ray's snippets) or in the line's stream
    (``python.group_records`` by ``parsers.STREAM_KEYS``: srun's label, the tee's local rank, ...), where the
    lines between two of a stream may be others' that qualify. ``s`` is exact on a line that qualifies (its srun
    label and tee local rank, the only stream keys it may have; null for none). A line's stream is counted
    together with every line that does not qualify and has it among its ``t`` or no ``t``: that holds the lines
    of its real stream (the rows of a line are in the streams of its ``t``), and the lines it adds do not
    qualify, so a line near one that does not in its real stream is near one here too. In a file whose lines
    that qualify have no stream key, the file distance is enough: where no line that does not qualify lies
    within :data:`CONTEXT_LINES` of a line in the file, the lines there all qualify, so all are of its stream.

    Counted from the lines that do not qualify, the few of a mixed file: each marks the lines within
    :data:`CONTEXT_LINES` of it in its file, and in each of its streams (each stream of its file where ``t`` is
    null) the last :data:`CONTEXT_LINES` lines that qualify before it and the first after it (a line is
    within that many of it in the stream when fewer lie between them). Cost grows with those lines, not with
    the file: a tee'd console of 400k lines with 60 that do not qualify, 0.087 -> 0.035 s against windows
    over every line (the previous version's; equal on 3,000 drawn frames)."""
    k = CONTEXT_LINES
    n = files.height
    o = files["o"]
    near = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    at = o.arg_true()
    if at.len() == 0:
        return near
    path = files["path"]
    win = (
        pl.DataFrame({"j": at.cast(pl.Int64)})
        .select(pl.int_ranges(pl.col("j") - k, pl.col("j") + k + 1).alias("i"), "j")
        .explode("i")
        .filter(pl.col("i").is_between(0, n - 1))
    )
    near = near.scatter(win["i"].filter(path.gather(win["i"]) == path.gather(win["j"])), True)
    if files["s"].filter(~o).is_null().all():
        return near
    # The lines that qualify by stream (file, then ``s``; null a stream of its own), in file order within each:
    # ``key`` = stream number * (n + 1) + row, sorted, is then searched for a line that does not qualify.
    q = files.select("path", "s", "o").with_row_index("i").filter(~pl.col("o")).drop("o")
    names = q["s"].unique()
    code = (
        q["s"]
        .replace_strict(names, pl.int_range(names.len(), eager=True), default=None, return_dtype=pl.Int64)
        .fill_null(names.len())
    )
    file_no = (q["path"] != q["path"].shift(1)).fill_null(True).cum_sum().cast(pl.Int64)
    stream_no = file_no * (names.len() + 1) + code
    key = stream_no * (n + 1) + q["i"].cast(pl.Int64)
    order = key.arg_sort()
    rows, key, stream_no = q["i"].gather(order), key.gather(order), stream_no.gather(order)
    starts = (stream_no != stream_no.shift(1)).fill_null(True).arg_true()
    streams = (
        q.select("path", "s")
        .gather(order.gather(starts))
        .with_columns(
            stream_no.gather(starts).alias("__g"),
            starts.cast(pl.Int64).alias("__a"),
            pl.concat([starts.slice(1), pl.Series([q.height], dtype=starts.dtype)])
            .cast(pl.Int64)
            .alias("__b"),
        )
    )
    # Each line that does not qualify, in each of its streams that holds lines that qualify in its file.
    bad = files.select("path", "t", "o").with_row_index("j").filter(pl.col("o"))
    known = bad.filter(pl.col("t").is_not_null()).select("path", "j", pl.col("t").alias("s")).explode("s")
    anywhere = (
        bad.filter(pl.col("t").is_null()).select("path", "j").join(streams.select("path", "s"), on="path")
    )
    pairs = pl.concat([known, anywhere], how="vertical_relaxed").join(
        streams, on=["path", "s"], how="inner", nulls_equal=True
    )
    if pairs.height == 0:
        return near
    # its place among its stream's lines, and the CONTEXT_LINES lines on either side of it there
    place = key.search_sorted(pairs["__g"] * (n + 1) + pairs["j"].cast(pl.Int64))
    marked = (
        pairs.select("__a", "__b")
        .with_columns(place.cast(pl.Int64).alias("__p"))
        .select(
            pl.int_ranges(
                pl.max_horizontal(pl.col("__p") - k, "__a"), pl.min_horizontal(pl.col("__p") + k, "__b")
            ).alias("x")
        )
        .explode("x")
        .drop_nulls()["x"]
    )
    return near.scatter(rows.gather(marked), True)


def _maybe_wraps(files: pl.DataFrame, fast: pl.Series, teed: pl.Series | None = None) -> pl.Series:
    """The paths of ``files`` (``path``, ``raw``, ``body``: whole files in order, ``body`` the lines less an srun
    label the generic path strips) where ``parsers._mark_wraps`` might mark a hard-wrapped line, in all the
    lines or in those left once the ``fast`` ones leave. Only a line that
    may be plain can be one: one that does not start like a log line, or has a transport prefix (what is left
    once it is stripped may not), but the tee's (a role not starting with ``rank``: such a line is tee'd, and a
    tee'd line is no wrap). It is one after a line as long as the file's wrap width (:func:`parsers.at_width`),
    or after a line ending in a space where the tee'd lines (a line starting like one counts) reach
    ``parsers.WRAP_TEE_SHARE`` of the file's lines: in all of them or in those left (tee'd lines may leave, or
    stay while others leave; the line before one is another among those left). In the other files no line is a
    wrap either way, so taking the ``fast`` lines out changes no wrap decision. ``teed``: the lines known to be
    tee'd (:func:`_untee`'s), left out of the tests below (each would find it tee'd: a tee'd console's lines are
    not scanned again)."""
    import parsers

    body = files["body"]
    at = None if teed is None else (~teed).arg_true()
    text = body if at is None else body.gather(at)
    plain = (
        (~text.str.contains(parsers._KNOWN_START) & (text.str.len_chars() > 0))
        | text.str.contains(_xport_heads())
    ).fill_null(True)
    if at is not None:
        plain = pl.repeat(False, body.len(), dtype=pl.Boolean, eager=True).scatter(at, plain)
    # ... but a tee'd line (a tee'd line is no wrap), and c10d's ``[rank3]:[E…``, which keeps its prefix (no
    # transport strips it: the tee only before ``[rank3]:`` or a character other than ``[`` and space), so it
    # starts like a log line. Both start with ``[``.
    at = (plain & body.str.starts_with("[").fill_null(False)).arg_true()
    if at.len():
        sub = body.gather(at)
        no = (sub.str.contains(_TEE_HEAD) & ~sub.str.starts_with("[rank")) | (
            sub.str.contains(r"^\[rank\d+\]:\[") & ~sub.str.contains(r"^\[rank\d+\]:\[rank\d+\]:")
        )
        plain = plain.scatter(at.filter(no.fill_null(False)), False)
    files = files.select("path", "raw", "body").with_columns(plain.alias("__p"), fast.alias("__f"))
    # only a file where a line may be plain may hold a wrap (a tee'd console: none)
    may = files.filter(pl.col("__p"))["path"].unique()
    if may.len() == 0:
        return may
    if may.len() < files["path"].n_unique():
        files = files.filter(pl.col("path").is_in(may.implode()))
    return pl.concat([_wrap_paths(files), _wrap_paths(files.filter(~pl.col("__f")))]).unique()


def _wrap_paths(files: pl.DataFrame) -> pl.Series:
    """The paths of ``files`` (:func:`_maybe_wraps`' frame: ``path``, ``raw``, ``body``, ``__p`` a line that may
    be plain) with a line that may be plain after a line as long as the file's wrap width, or after a line
    ending in a space where the tee'd lines reach ``parsers.WRAP_TEE_SHARE``."""
    import parsers

    if files.height == 0:
        return files["path"]
    n, path = pl.col("raw").str.len_chars(), pl.col("path")
    # A wrap width is the length of 3 lines or more, 70 or more, within one of the file's longest (and the
    # width only where that holds): the per-file mode runs on those files only.
    top = n.max().over(path)
    wide = files.filter(files.select(((n >= top - 1).sum().over(path) >= 3) & (top >= 70)).to_series())
    bad = [wide.filter(wide.select(pl.col("__p") & parsers.at_width()).to_series())["path"]]
    if files["body"].str.starts_with("[").any():
        # A line that may be plain after a line ending in a space, where the tee'd rows reach the share. The
        # share counts a line that starts like a tee'd one (a superset of those the generic path strips), and
        # each glued tee-like prefix as a tee'd row of its own (the generic path may split it off): it only
        # rises, as a row split off a line that is not tee'd goes uncounted.
        tee_like = pl.col("body").str.contains("^" + transport.TEE_LIKE).cast(pl.UInt32)
        glued = pl.col("raw").str.count_matches(_TEE_INSIDE).cast(pl.UInt32)
        share = files.group_by("path").agg(((tee_like + glued).sum() / (glued.sum() + pl.len())).alias("s"))
        teed = share.filter(pl.col("s") >= parsers.WRAP_TEE_SHARE)["path"]
        # the lines after a line ending in a space, in those files only (an srun console: none)
        if teed.len():
            sub = files.filter(path.is_in(teed.implode()))
            after = pl.col("__p") & pl.col("raw").shift(1).over(path).str.ends_with(" ").fill_null(False)
            bad.append(sub.filter(sub.select(after.any().over(path)).to_series())["path"])
    return pl.concat(bad).unique()


def parse(lines: pl.DataFrame, caps: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """The rows of the fast-path lines ``lines`` (with :func:`split`'s ``caps``, row for row), with exactly
    the columns and types of ``schema`` (the generic path's, ``parsers._app_schema``): the source columns as
    they are, the columns :func:`rows` sets, every other column null (the generic path sets none of them on such
    a line: ``parsers.check_app_probe`` checks that on a line of each shape, tests/test_appfast.py on every
    corpus case). ``shape(rows(lines, caps), schema)``: a caller that learns ``schema`` late builds the rows
    first (``parsers.parse_lines_split``)."""
    return shape(rows(lines, caps), schema)


#: The rows of fast-path lines before they take a schema (:func:`rows`): the lines' columns with those the fast
#: path sets, and the columns of one value on every row (literals, not built per row).
Rows = tuple[pl.DataFrame, dict[str, pl.Expr]]


def rows(lines: pl.DataFrame, caps: pl.DataFrame) -> Rows:
    """The rows of the fast-path lines ``lines`` (with :func:`split`'s ``caps``, row for row), the columns they
    set by name beside the lines' own, for :func:`shape` to put in a schema.

    A logging line: its prefix's captures, layer ``app``, :func:`parsers.app.progress_fields`' step, rank and
    world size, kind ``step_progress`` or ``log``. A line without any prefix: a tqdm bar where
    :data:`parsers.app.BAR` matches it (its kind, layer, severity and fields, ``elapsed_ms`` by
    :func:`parsers.app.bar_fields`), else kind ``unparsed``, layer and severity ``unknown`` and the world size
    the line states (``progress_fields`` on an unprefixed line)."""
    import parsers

    rest = caps["rest"]
    n = caps.height
    bare = caps["bare"] if "bare" in caps.columns else pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    # parsers.strip_producers' ``psev``, then classify's coalesce with ``unknown`` (no rule sets a severity)
    sev = (
        caps["sev_word"]
        .replace_strict(parsers._SEV, default=None, return_dtype=pl.String)
        .fill_null("unknown")
    )
    asc = (
        pl.DataFrame({"a": ~bare, "rest": rest}).select(pl.when(pl.col("a")).then(pl.col("rest"))).to_series()
    )
    step = asc.str.extract(app.STEP_RE, 1).cast(pl.Int64, strict=False)
    set_cols: dict[str, pl.Series] = {
        "body": rest,
        "message": rest,
        "record": rest,
        # the prefix's captures; one that is null on every row is left to the null literals below
        **{
            c: caps[c]
            for c in CAPS
            if c in caps.columns and c not in ("rest", "bare") and caps[c].null_count() < n
        },
        "severity": sev,
        "step": step,
        "rank_stated": asc.str.extract(app.RANK_RE, 1).cast(pl.Int32, strict=False),
        "world_size": rest.str.extract(app.WORLD_RE, 1).cast(pl.Int32, strict=False),
    }
    # app.progress_fields: an app row no rule claimed is ``step_progress`` with a step, else ``log``
    set_cols["kind"] = (
        pl.DataFrame({"s": step})
        .select(pl.when(pl.col("s").is_not_null()).then(pl.lit("step_progress")).otherwise(pl.lit("log")))
        .to_series()
    )
    # Null columns as broadcast literals: ``pl.repeat(None, …)`` gives all-null columns that a later rechunk
    # materializes (16 bytes a row for a string: +270 MB peak on the 400k-line app job).
    lits = {"layer": pl.lit("app", dtype=pl.String)}
    if bare.any():
        set_cols = _bare_cols(set_cols, bare, rest)
        lits = {}
    out = lines.select([c for c in lines.columns if c not in set_cols and c not in lits])
    return out.with_columns([s.alias(name) for name, s in set_cols.items()]), lits


def shape(built: Rows, schema: pl.Schema) -> pl.DataFrame:
    """:func:`rows`' rows with exactly the columns and types of ``schema`` (see :func:`parse`)."""
    out, lits = built
    out = out.select([c for c in schema if c in out.columns and c not in lits])
    out = out.with_columns(
        [lits.get(c, pl.lit(None, dtype=d)).alias(c) for c, d in schema.items() if c not in out.columns]
    )
    out = out.select([pl.col(c).cast(d) for c, d in schema.items()])
    need = ("record", "message", "severity", "kind", "layer", "rank_stated")
    if {"msg_rank", "msg_pg", "gpu_index"} & set(schema) and set(need) <= set(schema):
        # the rank an error line names as its own (identity evidence), as the generic path's last steps
        got = c10d.stated_ranks(out.select(need))
        out = out.with_columns(
            [got[c].cast(schema[c]) for c in ("msg_rank", "msg_pg", "gpu_index") if c in schema]
        )
    return out


def _bare_cols(cols: dict[str, pl.Series], bare: pl.Series, rest: pl.Series) -> dict[str, pl.Series]:
    """``cols`` (the columns of logging-line rows, :func:`parse`) with the rows ``bare`` marks set as the generic
    path sets a line without any prefix: :data:`parsers.app.BAR` where it matches (its fields cast as
    ``rules.apply_rules`` casts them, ``elapsed_ms`` by :func:`parsers.app.bar_fields`), else ``unparsed``."""
    n = rest.len()
    held = (bare & rest.str.contains(_BAR_LITERAL, literal=True)).arg_true()
    text = rest.gather(held)
    hit = text.str.contains(_BAR_PATTERN)
    at, text = held.filter(hit), text.filter(hit)
    groups = list(re.compile(_BAR_PATTERN).groupindex)
    fields = _cast_fields(text.str.extract_groups(_BAR_PATTERN).struct.unnest().select(groups))
    fields = app.bar_fields(
        fields.with_columns(
            pl.lit(app.BAR.kind, dtype=pl.String).alias("kind"),
            pl.lit(None, dtype=pl.Int64).alias("elapsed_ms"),
        )
    ).drop("kind")
    is_bar = pl.repeat(False, n, dtype=pl.Boolean, eager=True).scatter(at, True)
    out = dict(cols)

    def put(name: str, on_bar: object, on_bare: object, dtype: pl.DataType) -> None:
        cur = out.get(name, pl.repeat(None, n, dtype=dtype, eager=True))
        out[name] = (
            pl.DataFrame({"c": cur, "b": bare, "r": is_bar})
            .select(
                pl.when(pl.col("r"))
                .then(pl.lit(on_bar, dtype=dtype))
                .when(pl.col("b"))
                .then(pl.lit(on_bare, dtype=dtype))
                .otherwise(pl.col("c"))
            )
            .to_series()
        )

    out["layer"] = pl.repeat("app", n, dtype=pl.String, eager=True)
    put("layer", app.BAR.layer, "unknown", pl.String())
    put("kind", app.BAR.kind, "unparsed", pl.String())
    put("severity", app.BAR.severity, "unknown", pl.String())
    put("rule", app.BAR.name, None, pl.String())
    cols_world = out["world_size"]
    out["world_size"] = cols_world.scatter(at, None) if at.len() else cols_world
    for c in fields.columns:
        base = cols.get(c, pl.repeat(None, n, dtype=fields[c].dtype, eager=True))
        out[c] = base.cast(fields[c].dtype).scatter(at, fields[c]) if at.len() else base
    return out


__all__ = ["MESSAGE_MARKERS", "RAW_MARKERS", "parse", "rule_literals", "split", "tee_inside"]
