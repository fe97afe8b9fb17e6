"""One pipeline, one answer: the verdict on a path, exactly as ``rankscope diagnose`` gives it.

:func:`diagnose_path` does everything between a path and the printed verdict: it picks the input mode (a
folder or file of logs, a ``rankscope timeline`` parquet file or hive-partitioned dataset, or the bounded
memory streaming ingest), reads Flight Recorder dumps kept apart (``fr``), validates the time zone and the
attempt, redacts, diagnoses, attaches the known-failure signatures and the list of files that were not read.
The CLI (``rankscope diagnose``, ``rankscope watch --until-exit``) only calls it and renders the result, so
``diagnose_path(p).to_json()`` is byte for byte what ``rankscope diagnose p -f json`` prints.

This module sits below :mod:`correlator.cli` and never imports it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from correlator import archive
from correlator.diagnose import diagnose as run_diagnose
from correlator.errors import InputError, safe
from correlator.ingest import READING, IngestResult
from correlator.streaming import TABLE_STREAMING_THRESHOLD_BYTES
from correlator.verdict import Diagnosis

if TYPE_CHECKING:
    from correlator.signatures import TextPatterns

__all__ = ["InputError", "PathDiagnosis", "diagnose_path", "load_path", "safe"]


#: ``progress(stage, done, total)``: ``stage`` names the step ("reading logs", "streaming node by node"),
#: ``done`` files (or bytes, streaming) so far, ``total`` when known.
Progress = Callable[[str, int, int | None], None]


@dataclass
class PathDiagnosis:
    """The complete verdict on a path.

    ``diagnosis``: the :class:`~correlator.diagnose.Diagnosis` with its signatures attached. ``table``: the
    event table it was made from (redacted under ``redact=True``; for a folder of logs without the NCCL COLL
    lines diagnosis does not read, see ``ingest(keep_coll=...)``; the reduced table for parquet and
    streaming input). ``skipped``: what was not read, one dict per file (``path``, ``bytes``, ``lines``,
    ``reason``). ``warnings``: ingest warnings (one line each). ``attempts``, ``ranks``: the torchelastic
    attempts (counted from 0) and global ranks seen.
    """

    diagnosis: Diagnosis
    table: pl.DataFrame
    skipped: list[dict[str, object]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)

    def to_json(self) -> str:
        """The JSON document ``rankscope diagnose -f json`` prints: :meth:`to_dict` dumped once (indent 2)."""
        from correlator.report import json_default

        return json.dumps(self.document(), indent=2, default=json_default)

    def document(self) -> dict[str, Any]:
        """The document :meth:`to_json` dumps: the verdict's JSON contract
        (:meth:`correlator.diagnose.Diagnosis.to_json`) with the ``skipped`` list as its last key."""
        return {**self.diagnosis.to_json(), "skipped": self.skipped}

    def to_dict(self) -> dict[str, Any]:
        """:meth:`to_json` parsed back: plain JSON types only."""
        return json.loads(self.to_json())  # type: ignore[no-any-return]


def _check_tz(tz: str | None) -> None:
    if tz:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise InputError(
                f"--tz {tz!r}: unknown time zone (use an IANA name such as UTC or America/New_York)"
            ) from None


def load_path(
    path: str | os.PathLike[str],
    *,
    tz: str | None = None,
    redact: bool = False,
    fr: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    keep_coll: int | None = None,
    stacks: str | os.PathLike[str] | None = None,
) -> IngestResult:
    """``ingest(path)`` (as one batch, :func:`correlator.batch.ingest_whole`) with the checks the CLI makes: the path and ``fr`` exist, ``tz`` is an IANA zone;
    then :func:`correlator.redact.redact_result` under ``redact``. ``path`` may be a tar or zip archive or
    ``-`` (standard input): see :func:`correlator.archive.opened`. Raises :class:`InputError`, or
    :class:`~correlator.discover.DiscoveryError` when nothing readable is found. ``keep_coll``: see
    :func:`correlator.ingest.ingest` (only the rows diagnosis needs). ``stacks``: a folder of stack dumps
    kept apart from the logs (:func:`correlator.stackdir.add_dumps`)."""
    notes: list[str] = []
    with archive.opened(path, notes) as p:
        res = _load_path(
            p, tz=tz, redact=redact, fr=fr, progress=progress, keep_coll=keep_coll, stacks=stacks
        )
    res.warnings[:] = notes + archive.without_recut(res.warnings, notes)
    return res


def _load_path(
    p: Path,
    *,
    tz: str | None,
    redact: bool,
    fr: str | os.PathLike[str] | None,
    progress: Progress | None,
    keep_coll: int | None,
    stacks: str | os.PathLike[str] | None = None,
) -> IngestResult:
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    if fr is not None and not Path(fr).exists():
        raise InputError(f"--fr {fr}: no such file or directory")
    if stacks is not None and not Path(stacks).exists():
        raise InputError(f"--stacks {stacks}: no such file or directory")
    _check_tz(tz)
    from correlator.batch import Hooks, ingest_whole

    # One batch of the whole input, through the batch function that streaming runs per batch.
    if progress is None:
        res = ingest_whole(p, tz=tz, fr=fr, keep_coll=keep_coll)
    else:
        state = {"done": 0, "total": None}

        def on_sources(srcs: list[Any]) -> None:
            state["total"] = len(srcs)
            progress("reading logs", 0, len(srcs))

        def step(_src: Any) -> None:
            state["done"] += 1  # type: ignore[operator]
            progress("reading logs", state["done"], state["total"])  # type: ignore[arg-type]

        def on_phase(phase: str) -> None:  # its own count follows (``within``)
            progress(phase, 0, None)

        def within(stage: str, done: int, total: int) -> None:
            if stage != READING:  # reading shows files (above); the steps after it lines or one unit
                progress(stage, done, total)

        res = ingest_whole(
            p,
            tz=tz,
            fr=fr,
            keep_coll=keep_coll,
            hooks=Hooks(progress=step, on_sources=on_sources, on_phase=on_phase, on_progress=within),
        )
    if stacks is not None:
        from correlator.stackdir import add_dumps

        res = add_dumps(res, stacks, tz=tz)
    if redact:
        from correlator.redact import redact_result

        res = redact_result(res)
    return res


def check_attempt(res: IngestResult, attempt: int | None) -> None:
    """Raise :class:`InputError` naming the attempts that exist when ``attempt`` is not one of them."""
    if attempt is None:
        return
    attempts = res.summary()["attempts"]
    if attempt not in attempts:  # type: ignore[operator]
        raise InputError(
            f"--attempt {attempt}: no such attempt in these logs (attempts, counted from 0: {attempts})"
        )


def has_text(table: pl.DataFrame) -> bool:
    """Whether any line of ``table`` holds more than white space (input diagnose never refuses)."""
    return table.filter(pl.col("raw").str.contains(r"\S")).height > 0


def check_recognised(table: pl.DataFrame, ranks: list[int], path: Path | str) -> None:
    """Raise :class:`InputError` when ``table`` (read from ``path``) holds nothing of a distributed job: no
    rank was resolved (``ranks``: the ranks of the ingest summary), no launcher or system line (``layer``
    ``elastic`` / ``system``) and no row of a kind outside :data:`correlator.schema.GENERIC_KINDS` (a fault,
    an NCCL line, a Horovod stall report, a Flight Recorder entry...). ``diagnose``, ``graph`` and ``plot``
    refuse such input alike (exit 2) instead of giving an empty verdict, graph or figure; ``timeline`` and
    ``events`` still list what was read."""
    from correlator.schema import GENERIC_KINDS

    if (
        ranks
        or table.filter(
            pl.col("layer").is_in(["elastic", "system"]) | ~pl.col("kind").is_in(list(GENERIC_KINDS))
        ).height
    ):
        return
    raise InputError(
        f"{path}: no distributed-training log lines recognised (no rank, no launcher output); "
        "see `rankscope events` for what was read"
    )


def is_parquet_input(path: Path) -> bool:
    """A timeline parquet file, or a folder that holds only parquet files (a hive-partitioned dataset)."""
    if path.is_file():
        return path.suffix.lower() == ".parquet"
    if path.is_dir():
        seen = 0
        for dirpath, _dirs, names in os.walk(path, onerror=lambda _e: None):  # no symlinks followed
            for n in names:  # the first file that is not parquet answers (a log tree: its first file)
                if not (n.lower().endswith(".parquet") and os.path.isfile(os.path.join(dirpath, n))):
                    return False
            seen += len(names)
            if seen > 100_000:
                break
        return seen > 0
    return False


def want_streaming(
    path: Path, streaming: bool | None, threshold: int | None = None, full_table: bool = False
) -> bool:
    """``streaming`` if given, else whether the folder ``path`` holds more than ``threshold`` bytes of logs;
    without ``threshold``, whether ``diagnose`` streams it (:func:`correlator.streaming.diagnosis_streams`:
    above 2 GiB, or above 64 MiB of lines other than NCCL COLL lines), or with ``full_table`` (a caller that
    reads every row, such as ``plot``) only above 2 GiB."""
    if streaming is not None:
        return streaming
    from correlator.streaming import STREAMING_THRESHOLD_BYTES, diagnosis_streams, should_stream

    if not path.is_dir():
        return False
    if threshold is None and not full_table:
        return diagnosis_streams(path)
    return should_stream(path, STREAMING_THRESHOLD_BYTES if threshold is None else threshold)


#: Logs of at most this many bytes are drawn from every line by ``rankscope plot`` (:func:`plot_every_line`),
#: larger ones from the rows diagnosis reads (:func:`rows_read`): ``rankscope timeline``'s threshold
#: (``correlator.streaming.TABLE_STREAMING_THRESHOLD_BYTES``, 64 MiB), above which that command does not hold
#: the whole table in memory either. Every line of the 256-rank bench's COLL job (1,018 MB) took ``plot``
#: 42.8 s at 9.0 GB, the rows diagnosis reads 13.9 s at 0.9 GB; its application job (425 MB) 26.1 s at
#: 4.6 GB against 20.1 s at 0.8 GB (``benchmarks/RESULTS.md``, 2026-12-07, 2 cores). The timeline of more
#: than ``correlator.plot.MANY_ROWS`` rows draws no routine line anyway, only each rank's span (its first and
#: last row) besides the faults.
PLOT_EVERY_LINE_BYTES = TABLE_STREAMING_THRESHOLD_BYTES


def plot_every_line(path: str | os.PathLike[str], every_line: bool | None = None) -> bool:
    """Whether ``rankscope plot`` of ``path`` reads every line (:class:`correlator.job.Job`'s ``full_table``)
    or the rows diagnosis reads (of the routine lines, the last collectives and progress of each rank and the
    script's first and last lines; see :mod:`correlator.reduce`): ``every_line`` when given, else whether the
    logs hold at most :data:`PLOT_EVERY_LINE_BYTES` (an archive counts its own size; standard input, of
    unknown size, is read whole). The verdict drawn is the same either way."""
    if every_line is not None:
        return every_line
    if str(path) == "-":
        return True
    from correlator.discover import input_size

    return input_size(path) <= PLOT_EVERY_LINE_BYTES


def check_parquet(path: Path) -> None:
    """A parquet file or dataset given to ``diagnose`` must hold the event table: every column of
    ``correlator.schema`` with its type. Raises :class:`InputError` naming what is wrong."""
    from correlator.schema import POLARS_SCHEMA as want

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.parquet") if p.is_file())
    for f in files[:1000]:
        try:
            got = pl.read_parquet_schema(f)
        except (pl.exceptions.PolarsError, OSError, ValueError) as e:
            raise InputError(f"{_safe(f)}: not a readable parquet file ({type(e).__name__})") from None
        except BaseException as e:
            if type(e).__name__ != "PanicException":
                raise
            raise InputError(f"{_safe(f)}: corrupt parquet metadata (the reader panicked)") from None
        missing = [c for c in want if c not in got]
        if missing:
            raise InputError(
                f"{_safe(f)}: not a rankscope timeline: missing column(s) {', '.join(missing[:8])}"
                + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
                + (
                    " (written by an older rankscope? write it again with `rankscope timeline`)"
                    if len(missing) < len(want) // 4
                    else ""
                )
            )
        wrong = [f"{c} is {got[c]}, want {t}" for c, t in want.items() if got[c] != t and got[c] != pl.Null]
        if wrong:
            raise InputError(
                f"{_safe(f)}: not a rankscope timeline: wrong column type(s): {'; '.join(wrong[:5])}"
            )


_safe = safe


def skipped_for_output(res: IngestResult, redact: bool) -> list[dict[str, object]]:
    """``res.skipped`` for printing: paths redacted too under ``redact``."""
    entries = [dict(e) for e in getattr(res, "skipped", [])]
    if redact and entries:
        from correlator.redact import Redactor

        r = Redactor()
        r.learn_hosts(s.host for s in res.sources)
        for s in res.sources:
            r.learn_text(s.rel)  # hosts in folder names (torchrun_logs-<host>/…/attempt_0)
        for e in entries:
            r.learn_text(str(e["path"]))
            e["path"] = r.text(str(e["path"]))
    return entries


def check_small_file(p: Path, what: str, limit: int | None = None) -> None:
    """``p`` must be a regular file of at most ``limit`` bytes (default ``RANKSCOPE_MAX_SMALL_KB``, 4 MiB),
    read by :func:`correlator.smallfile.read_small` (not a FIFO, a device, /dev/zero). Raises
    :class:`InputError` (``"<what> <p>: not a regular file (a FIFO)"``, ``"… bytes, more than the …-byte
    limit …"``)."""
    from correlator.smallfile import SmallFileError, read_small

    label = f"{what} {_safe(p)}"
    try:
        small = read_small(p, label, limit)
    except SmallFileError as e:
        raise InputError(str(e)) from None
    if small.truncated:
        raise InputError(small.too_big(label))


def attach_signatures(d: Diagnosis, table: pl.DataFrame, extra: Sequence[Path]) -> Diagnosis:
    """``d`` with the known-failure signatures that match (``correlator.signatures``), the built-in library
    plus the TOML files ``extra``: a new record. Raises :class:`InputError` for an unreadable or malformed
    file."""
    extra = list(extra)
    if d.failure_kind == "none" and not extra:
        return d
    from correlator import signatures

    with _reading_signatures(extra):
        return signatures.attach(d, table, extra)


@contextmanager
def _reading_signatures(extra: Sequence[Path]) -> Iterator[None]:
    """Checks the signature files ``extra`` (size) and turns the errors of reading them into
    :class:`InputError`."""
    for p in extra:
        check_small_file(p, "--signatures")
    try:
        yield
    except ValueError as e:  # a user's signature file that does not parse
        raise InputError(str(e)) from None
    except RecursionError:
        raise InputError("--signatures: a signature file nested too deeply") from None


def _signature_text(extra: Sequence[Path]) -> TextPatterns | None:
    """The text patterns of the built-in signatures plus the files ``extra``, whose lines the reduced table
    keeps whole (:func:`correlator.reduce.signature_patterns`); None (the built-in library's) when there is
    no file. Raises :class:`InputError` for an unreadable or malformed file."""
    if not extra:
        return None
    from correlator import signatures
    from correlator.reduce import signature_patterns

    with _reading_signatures(extra):
        return signature_patterns(signatures.load_signatures(extra))


def rows_read(table: pl.DataFrame, signatures: Iterable[str | os.PathLike[str]] = ()) -> pl.DataFrame:
    """The rows of ``table`` (an event table) that diagnosis reads, in its order: the reduction
    :func:`diagnose_path` diagnoses (``correlator.reduce.reduce_for_diagnosis``), with the lines the
    built-in signatures and the TOML files ``signatures`` match kept whole. Raises :class:`InputError` for an
    unreadable or malformed signature file."""
    from correlator.streaming import reduce_for_diagnosis

    return reduce_for_diagnosis(table, text=_signature_text([Path(x) for x in signatures]))


def diagnose_path(
    path: str | os.PathLike[str],
    *,
    fr: str | os.PathLike[str] | None = None,
    streaming: bool | None = None,
    attempt: int | None = None,
    redact: bool = False,
    tz: str | None = None,
    signatures: Iterable[str | os.PathLike[str]] = (),
    require_lines: bool = True,
    progress: Progress | None = None,
    on_warnings: Callable[[list[str]], None] | None = None,
    full_table: bool = False,
    stacks: str | os.PathLike[str] | None = None,
) -> PathDiagnosis:
    """The verdict on ``path``, the same as ``rankscope diagnose path`` prints.

    ``path``: a folder (or one file) of per-rank logs, a tar or zip archive of them, ``-`` for standard
    input (:func:`correlator.archive.opened`), a ``rankscope timeline`` parquet file, or a folder of
    parquet files only (a hive-partitioned dataset). ``fr``: a folder of Flight Recorder dumps kept apart
    (forces the in-memory ingest). ``streaming``: ingest node by node in bounded memory; ``None`` streams
    above 2 GiB of logs, or above 64 MiB of lines other than NCCL COLL lines unless ``full_table``
    (:func:`correlator.streaming.diagnosis_streams`). ``attempt``: the torchelastic attempt (counted from
    0) to diagnose; ``None`` the first failed one. ``redact``: pseudonymize hosts, IPs, users and secrets in the table, the verdict and
    the skipped paths. ``tz``: IANA zone of stamps that carry none (default UTC). ``signatures``: extra
    signature TOML files. ``require_lines``: raise when no distributed-training line was recognised.
    ``progress``: see :data:`Progress`. ``on_warnings`` gets the ingest warnings as soon as they are known.
    ``full_table``: keep every line in ``table`` (a folder of logs read in memory: by default the NCCL COLL
    lines diagnosis does not read are cut before parsing); the verdict is the same either way. ``stacks``: a
    folder of stack dumps (py-spy, faulthandler) kept apart from the logs, read as if they lay under
    ``path/stacks/`` (forces the in-memory ingest; :func:`correlator.stackdir.add_dumps`).

    Returns a :class:`PathDiagnosis`. Raises :class:`InputError` (a missing path or ``fr``, an unknown
    ``tz``, a parquet that is not a timeline, an ``attempt`` that is not in the logs: the message names the
    attempts that are, nothing recognised, a bad signature file) or
    :class:`~correlator.discover.DiscoveryError` (no readable log found).
    """
    from correlator.discover import sharing_walks

    notes: list[str] = []
    # the streaming decision and the ingest walk the folder once
    with archive.opened(path, notes) as p, sharing_walks():
        return _diagnose_path(
            p,
            notes,
            fr=fr,
            streaming=streaming,
            attempt=attempt,
            redact=redact,
            tz=tz,
            signatures=signatures,
            require_lines=require_lines,
            progress=progress,
            on_warnings=on_warnings,
            full_table=full_table,
            stacks=stacks,
        )


@dataclass
class _Read:
    """What one input mode read: the table, the attempts and ranks in it, the files not read, warnings."""

    table: pl.DataFrame
    attempts: list[int]
    ranks: list[int]
    skipped: list[dict[str, object]]
    warnings: list[str]


def _read_parquet(p: Path, redact: bool, tz: str | None, text: TextPatterns | None = None) -> _Read:
    """A ``rankscope timeline`` parquet file or partitioned dataset: its rows reduced for diagnosis."""
    from correlator.streaming import reduced_from_parquet

    check_parquet(p)
    try:
        table = reduced_from_parquet(p, text=text)
    except (pl.exceptions.PolarsError, OSError, ValueError) as e:
        raise InputError(
            f"{p}: not a readable rankscope timeline parquet ({type(e).__name__}: "
            f"{_safe(str(e).splitlines()[0] if str(e) else '')})"
        ) from None
    except BaseException as e:  # a Rust panic inside polars on a corrupt page (PanicException)
        if type(e).__name__ != "PanicException":
            raise
        raise InputError(f"{p}: corrupt parquet data (the reader panicked: {_safe(str(e)[:200])})") from None
    attempts = sorted(table["attempt"].drop_nulls().unique().to_list())
    ranks = table["rank"].drop_nulls().unique().to_list()
    if redact:
        from correlator.redact import redact_table

        table = redact_table(table)
    warnings = [] if tz is None else [table_tz_note(tz)]
    return _Read(table, attempts, ranks, [], warnings)


def table_tz_note(tz: str) -> str:
    """The warning for ``--tz`` given with a ``rankscope timeline`` table: its stamps are UTC already, so a zone
    given now changes nothing."""
    return (
        f"--tz {tz} not applied: the stamps of a timeline table were converted to UTC when it was written "
        "(give --tz to `rankscope timeline`)"
    )


def _read_streaming(
    p: Path, redact: bool, tz: str | None, progress: Progress | None, text: TextPatterns | None = None
) -> _Read:
    """A folder of logs read node by node in bounded memory (the reduced table)."""
    from correlator.streaming import stream_ingest

    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    _check_tz(tz)
    if progress is None:
        table, s = stream_ingest(p, None, tz=tz, text=text)
    else:
        cb = progress
        table, s = stream_ingest(
            p, None, tz=tz, progress=lambda done, total: cb("streaming node by node", done, total), text=text
        )
    warnings = [str(w) for w in list(s.get("warning_lines") or [])]  # type: ignore[call-overload]
    attempts, ranks = list(s["attempts"]), list(s["ranks"])  # type: ignore[call-overload]
    skipped = [dict(e) for e in list(s.get("skipped") or [])]  # type: ignore[call-overload]
    if redact:
        from correlator.redact import Redactor, redact_table

        r = Redactor()
        table = redact_table(table, r)  # one redactor: the same pseudonyms in the table and the paths
        for entry in skipped:
            r.learn_text(str(entry["path"]))
        for entry in skipped:
            entry["path"] = r.text(str(entry["path"]))
    return _Read(table, attempts, ranks, skipped, warnings)


def _read_logs(
    p: Path,
    redact: bool,
    tz: str | None,
    fr: str | os.PathLike[str] | None,
    progress: Progress | None,
    full_table: bool,
    stacks: str | os.PathLike[str] | None = None,
) -> _Read:
    """A folder, file or archive of logs read in memory: only the rows diagnosis needs unless ``full_table``
    (most NCCL COLL lines are cut before parsing: issue #13 item 4; tests/test_reduced_diagnosis.py checks the
    verdict against the full table's)."""
    from correlator.streaming import KEEP_LAST

    res = load_path(
        p,
        tz=tz,
        redact=redact,
        fr=fr,
        progress=progress,
        keep_coll=None if full_table else KEEP_LAST,
        stacks=stacks,
    )
    summary = res.summary()
    attempts, ranks = list(summary["attempts"]), list(summary["ranks"])  # type: ignore[call-overload]
    return _Read(res.table, attempts, ranks, skipped_for_output(res, redact), list(res.warnings))


def _diagnose_path(
    p: Path,
    notes: list[str],
    *,
    fr: str | os.PathLike[str] | None,
    streaming: bool | None,
    attempt: int | None,
    redact: bool,
    tz: str | None,
    signatures: Iterable[str | os.PathLike[str]],
    require_lines: bool,
    progress: Progress | None,
    on_warnings: Callable[[list[str]], None] | None,
    full_table: bool = False,
    stacks: str | os.PathLike[str] | None = None,
) -> PathDiagnosis:
    if notes and on_warnings is not None:
        on_warnings(list(notes))
    extra = [Path(x) for x in signatures]
    text = _signature_text(extra)  # the lines of user signatures too are kept whole by the reduction
    if is_parquet_input(p):  # a `rankscope timeline` parquet file or partitioned dataset
        got = _read_parquet(p, redact, tz, text)
    elif fr is None and stacks is None and want_streaming(p, streaming, full_table=full_table):
        got = _read_streaming(p, redact, tz, progress, text)
    else:
        got = _read_logs(p, redact, tz, fr, progress, full_table, stacks)
    got.warnings[:] = archive.without_recut(got.warnings, notes)
    if on_warnings is not None:
        on_warnings(got.warnings)
    table, skipped, warnings = got.table, got.skipped, got.warnings
    if attempt is not None and attempt not in got.attempts:
        raise InputError(
            f"--attempt {attempt}: no such attempt in these logs (attempts, counted from 0: {got.attempts})"
        )
    if require_lines:
        try:
            check_recognised(table, got.ranks, p)
        except InputError:  # nothing recognised: a rank named next to a failure word, or the refusal
            from correlator import lastresort

            if not has_text(table):
                raise InputError(
                    f"{p}: no text to read (only empty files or blank lines); see `rankscope events`"
                ) from None
            guess = lastresort.read(table) or lastresort.unrecognised(table)
            guess = attach_signatures(guess, table, extra)
            return PathDiagnosis(guess, table, skipped, notes + warnings, got.attempts, guess.ranks_seen)
    from correlator.streaming import reduce_for_diagnosis

    # The same verdict from fewer rows (issue #13 item 4; tests/test_reduced_diagnosis.py); signatures still
    # match on the whole table.
    d = attach_signatures(run_diagnose(reduce_for_diagnosis(table, text=text), attempt=attempt), table, extra)
    return PathDiagnosis(d, table, skipped, notes + warnings, got.attempts, got.ranks)
