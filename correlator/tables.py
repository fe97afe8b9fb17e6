"""The event table out of a job: selected (:func:`select_events`, ``rankscope events``) and written as one
file, a hive-partitioned parquet dataset or a Perfetto trace (:func:`write_job_table`, ``rankscope
timeline``). :meth:`correlator.job.Job.events` and :meth:`correlator.job.Job.write_table` are these
functions on a job.

Below :mod:`correlator.job` (it takes the job as a :class:`JobInput`, never imports it) and above
:mod:`correlator.api`, :mod:`correlator.streaming` and :mod:`correlator.export`, which it calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl

from correlator.engines import check_engine
from correlator.errors import InputError
from correlator.output import atomic_write, check_output

if TYPE_CHECKING:
    from correlator.api import Progress
    from correlator.ingest import IngestResult
    from correlator.verdict import Diagnosis


class JobInput(Protocol):
    """What :func:`write_job_table` reads of a :class:`correlator.job.Job` (a dataclass)."""

    path: str | os.PathLike[str]
    tz: str | None
    redact: bool
    full_table: bool
    streaming: bool | None
    fr: str | os.PathLike[str] | None
    stacks: str | os.PathLike[str] | None
    progress: Progress | None
    on_warnings: Callable[[list[str]], None] | None

    def read(self) -> IngestResult: ...
    def table(self) -> pl.DataFrame: ...
    def diagnose(self) -> Diagnosis: ...


# ---------------------------------------------------------------------------------------------- events


def event_kinds(words: Iterable[str]) -> set[str]:
    """The kinds ``words`` name (kind names, or the words of :data:`correlator.schema.KIND_ALIASES`).
    Raises :class:`~correlator.errors.InputError` naming the unknown words and the known ones."""
    from correlator.schema import KIND_ALIASES, Kind, resolve_kinds

    kinds, bad = resolve_kinds(list(words))
    if bad:
        raise InputError(
            f"unknown kind {', '.join(bad)}; known kinds: {', '.join(m.value for m in Kind)}; "
            f"words that cover several kinds: {', '.join(sorted(KIND_ALIASES))}"
        )
    return kinds


def select_events(
    table: pl.DataFrame | pl.LazyFrame,
    rank: Iterable[int] | None = None,
    kind: Iterable[str] | None = None,
    faults: bool = False,
) -> pl.DataFrame:
    """The events of ``table`` (tee duplicates left out) on the ranks ``rank``, of the kinds ``kind`` (see
    :func:`event_kinds`), only faults (``faults``), in the time the report, plot and trace state (a line
    without a stamp of its own sits at the stamp above it in its file), then file order: an unstamped fault
    is not pushed to the end. A ``LazyFrame`` (a scanned ``timeline`` file) is read for the rows selected
    and, of every row, the columns of the time (:data:`correlator.clock.TIME_COLUMNS`) only."""
    from correlator.clock import TIME_COLUMNS, shown_times
    from correlator.schema import FAULT_KINDS

    ranks, words = list(rank or []), list(kind or [])
    kinds = event_kinds(words) if words else set()
    t = table.lazy().filter(~pl.col("duplicate"))
    if ranks:
        t = t.filter(pl.col("rank").is_in(ranks))
    if words:
        t = t.filter(pl.col("kind").is_in(sorted(kinds)))
    if faults:
        t = t.filter(pl.col("kind").is_in(list(FAULT_KINDS)))
    if isinstance(table, pl.DataFrame):
        shown, _ = shown_times(table)
    else:  # the time columns of every row, their repeated strings held once
        text = [c for c in ("path", "host", "pg") if table.collect_schema()[c] == pl.String]
        shown, _ = shown_times(
            table.select(TIME_COLUMNS).with_columns(pl.col(text).cast(pl.Categorical)).collect()
        )
    return (
        t.collect()
        .join(shown.select("event_id", pl.col("tc").alias("__shown")), on="event_id", how="left")
        .sort("__shown", "path", "line", "event_id", nulls_last=True)
        .drop("__shown")
    )


def job_events(
    job: JobInput,
    rank: Iterable[int] | None = None,
    kind: Iterable[str] | None = None,
    faults: bool = False,
) -> tuple[pl.DataFrame, list[int] | None]:
    """:func:`select_events` of every line of ``job``, and the global ranks its logs name where it did not
    read them whole (None: those of ``job.read()``). A ``rankscope timeline`` table (a parquet file or a
    folder of them) is read by column. A folder of logs that ``timeline`` would stream (more than 64 MiB of
    logs in more than one batch; not with ``redact``, ``fr`` or ``stacks``; ``job.streaming`` decides when
    given) is streamed to a temporary parquet file, whose
    selected rows and time columns are read back: memory stays that of one batch and of the time columns
    (the 256-rank application job, 425 MB: 4.5 GiB read whole), the events the same."""
    from correlator.api import is_parquet_input

    p = Path(job.path)
    if is_parquet_input(p):
        return _table_events(job, p, rank, kind, faults)
    # a folder of logs only (an archive or standard input is read whole)
    stream = p.is_dir() and (job.streaming if job.streaming is not None else _streams_by_default(p))
    if not stream or job.redact or job.fr is not None or job.stacks is not None:
        return select_events(job.read().table, rank, kind, faults), None  # (the ranks: from the read)
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="rankscope-events-"))
    try:
        w = _write_streamed(job, tmp / "events.parquet", None)
        named = (w.summary or {}).get("ranks")
        ranks = [int(r) for r in named] if isinstance(named, list) else []
        return select_events(pl.scan_parquet(w.output), rank, kind, faults), ranks
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _table_events(
    job: JobInput, p: Path, rank: Iterable[int] | None, kind: Iterable[str] | None, faults: bool
) -> tuple[pl.DataFrame, list[int]]:
    """:func:`job_events` of a ``rankscope timeline`` table (a parquet file, or a folder of them), read by
    column: the rows selected and the time columns (with ``redact``, the whole table, pseudonymized). Raises
    :class:`~correlator.errors.InputError` for a parquet that is not an event table, or unreadable."""
    from correlator.api import check_parquet, table_tz_note

    check_parquet(p)
    if job.tz is not None and job.on_warnings is not None:
        job.on_warnings([table_tz_note(job.tz)])
    # the files hold every column, the partition key too: read as plain files, not through hive paths
    lf = pl.scan_parquet(str(p / "**" / "*.parquet") if p.is_dir() else str(p), hive_partitioning=False)
    try:
        ranks = lf.select(pl.col("rank").drop_nulls().unique().sort()).collect()["rank"].to_list()
        if job.redact:
            from correlator.redact import redact_table

            return select_events(redact_table(lf.collect()), rank, kind, faults), ranks
        return select_events(lf, rank, kind, faults), ranks
    except (pl.exceptions.PolarsError, OSError, ValueError) as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise InputError(
            f"{p}: not a readable rankscope timeline parquet ({type(e).__name__}: {first[:200]})"
        ) from None


# ---------------------------------------------------------------------------------------------- tables

#: Formats of :func:`write_job_table`: parquet (DuckDB, polars, Spark), jsonl, csv, perfetto (Chrome trace JSON).
TABLE_FORMATS = ("parquet", "jsonl", "csv", "perfetto")


@dataclass(frozen=True)
class TableWritten:
    """What :func:`write_job_table` wrote: ``rows`` events in ``format`` (``perfetto``: the trace of the
    job's verdict); ``summary`` the ingest's counts (:meth:`correlator.ingest.IngestResult.summary`, none for a
    trace); ``partitions`` the files of a partitioned dataset; ``batches`` and ``peak_rss_mib`` of a
    streamed write."""

    output: Path
    format: str
    rows: int
    summary: dict[str, object] | None = None
    partitions: int | None = None
    batches: int | None = None
    peak_rss_mib: object = None


#: The formats an ``-o`` extension names; no extension is parquet.
TABLE_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
}


def table_format(output: Path, format: str | None, folder: bool = False) -> str:
    """``format``, else the one the extension of ``output`` names (:data:`TABLE_EXTENSIONS`), else parquet for
    a name with no extension, or for a dataset ``folder`` (partitioned, or Ray's) whatever its name. Raises
    :class:`InputError` for another extension, ``.json`` included (a Perfetto trace or JSON lines?), rather
    than writing parquet under a name that says otherwise."""
    if format is not None:
        if format not in TABLE_FORMATS:
            raise InputError(f"--format {format}: use one of {', '.join(TABLE_FORMATS)}")
        return format
    ext = output.suffix.lower()
    if ext in TABLE_EXTENSIONS:
        return TABLE_EXTENSIONS[ext]
    if not ext or folder:
        return "parquet"
    if ext == ".json":
        raise InputError(
            f"{output}: .json does not say which JSON: use --format perfetto for a Perfetto trace (Chrome "
            "trace-event JSON), or --format jsonl (or a .jsonl name) for the event table as JSON lines "
            "(.parquet and .csv name the other table formats)"
        )
    raise InputError(
        f"{output}: unknown table format {ext!r}: name the file .parquet, .jsonl (.ndjson) or .csv, or give "
        f"--format ({', '.join(TABLE_FORMATS)})"
    )


def write_job_table(
    job: JobInput,
    output: str | os.PathLike[str],
    format: str | None = None,
    partition_by: str | None = None,
    streaming: bool | None = None,
    engine: str = "local",
) -> TableWritten:
    """Write the event table of every line of ``job`` to ``output`` (see :meth:`correlator.job.Job.write_table`).
    ``engine="ray"``: the batches as Ray tasks writing a parquet dataset under the folder ``output``
    (:mod:`correlator.rayengine`)."""
    from correlator.discover import sharing_walks

    out = Path(output)
    check_engine(engine)
    if Path(job.path).exists():  # the input itself, or inside it: refused first, whatever the name says
        check_output(Path(job.path), out)
    with sharing_walks():  # the streaming decision and the ingest walk the folder once
        fmt = table_format(out, format, folder=bool(partition_by) or engine == "ray")
        if engine == "ray":
            from correlator.rayengine import require_ray

            require_ray()  # before any work: a clear error when the extra is not installed
            if fmt != "parquet" or streaming is False:
                raise InputError("--engine ray writes a parquet dataset batch by batch (streaming) only")
            return _write_streamed(job, out, partition_by, engine)
        if streaming is None:
            streaming = fmt == "parquet" and not job.redact and _streams_by_default(Path(job.path))
        if (partition_by or streaming) and fmt != "parquet":
            raise InputError("--partition-by and --streaming write parquet only")
        if streaming:
            return _write_streamed(job, out, partition_by)
        if fmt == "perfetto":  # the trace of the verdict `rankscope diagnose` prints, over every line
            return _write_trace(job, out)
        res = job.read()
        if partition_by:
            return _write_parts(res.table, out, partition_by, res.summary())
        if job.progress is not None:  # the write of a large table takes seconds: say so
            job.progress(f"writing {out.name}", 0, None)
        t = res.table
        writers: dict[str, Callable[[str], object]] = {
            "parquet": t.write_parquet,
            "jsonl": t.write_ndjson,
            "csv": t.write_csv,
        }
        atomic_write(out, writers[fmt])
        return TableWritten(out, fmt, t.height, summary=res.summary())


def _streams_by_default(path: Path) -> bool:
    """A parquet table of more than two batches of input streams (bounded memory), unless its files make one
    batch or a node split into batches would re-read a launcher log larger than a batch
    (:func:`correlator.streaming.context_bounded`)."""
    from correlator.api import want_streaming
    from correlator.streaming import TABLE_STREAMING_THRESHOLD_BYTES, context_bounded

    return want_streaming(path, None, TABLE_STREAMING_THRESHOLD_BYTES) and context_bounded(path)


def _write_streamed(job: JobInput, out: Path, by: str | None, engine: str = "local") -> TableWritten:
    """The table written batch by batch (:func:`correlator.streaming.stream_ingest`): under ``out`` as a
    dataset partitioned ``by`` (or, ``engine="ray"``, one part per batch), else one file written under a
    temporary name, renamed when complete."""
    from correlator.streaming import stream_ingest

    src = Path(job.path)  # (-o checked against it by write_job_table, its one caller)
    if job.redact:
        raise InputError("--redact needs the whole table: use --no-streaming, or `rankscope redact` first")
    if not src.exists():
        raise InputError(f"{src}: no such file or directory")
    bar = job.progress
    cb = None if bar is None else (lambda done, total: bar("streaming node by node", done, total))

    def run(target: Path) -> dict[str, object]:
        # the table only: no reduced rows are kept (they grow with the input; diagnosis is not asked for)
        s = stream_ingest(
            src, target, tz=job.tz, keep_last=None, partition_by=by, progress=cb, engine=engine
        )[1]
        if job.on_warnings is not None:
            job.on_warnings(list(s.get("warning_lines") or []))  # type: ignore[call-overload]
        return s

    got: list[dict[str, object]] = []
    try:
        if by or engine == "ray":
            got.append(run(out))
        else:
            atomic_write(out, lambda tmp: got.append(run(Path(tmp))))
    except OSError as e:
        raise InputError(f"{out}: cannot write ({e.strerror or e})") from None
    s: dict[str, Any] = got[0]
    return TableWritten(
        out, "parquet", s["rows"], summary=s, batches=s["batches"], peak_rss_mib=s["peak_rss_mib"]
    )


def _write_trace(job: JobInput, out: Path) -> TableWritten:
    """The Perfetto trace of every line of ``job`` with the job's one verdict, to ``out``."""
    from correlator.perfetto import write_trace

    full = job if job.full_table else replace(job, full_table=True, _result=None, _graph=None)  # type: ignore[type-var]
    t, d = full.table(), full.diagnose()
    atomic_write(out, lambda tmp: write_trace(t, d, Path(tmp)))
    return TableWritten(out, "perfetto", t.height)


def _write_parts(table: pl.DataFrame, out: Path, by: str, summary: dict[str, object]) -> TableWritten:
    """``table`` as a hive-partitioned dataset under ``out``, this machine's part in each partition."""
    import socket

    from correlator.export import write_partitioned

    try:
        files = write_partitioned(
            table, out, by=by, part_name=f"part-{socket.gethostname().split('.')[0]}.parquet"
        )
    except OSError as e:
        raise InputError(f"{out}: cannot write ({e.strerror or e})") from None
    return TableWritten(out, "parquet", table.height, summary=summary, partitions=len(files))


__all__ = [
    "TABLE_FORMATS",
    "JobInput",
    "TableWritten",
    "event_kinds",
    "job_events",
    "select_events",
    "table_format",
    "write_job_table",
]
