"""One job, one verdict: :func:`open_job` is the facade every command goes through.

A :class:`Job` reads its input once (a folder of logs, one file, an archive, ``-`` for standard input, a
``rankscope timeline`` parquet file or a hive-partitioned dataset; the mode is :attr:`Job.mode`) and
makes one verdict (:meth:`Job.diagnose`). Everything else is read off that verdict and its table: the
causal graph of the same attempt (:meth:`Job.graph`), the Perfetto trace (:meth:`Job.trace`), the figures.
Renderers never diagnose or build a graph of their own, so ``rankscope diagnose``, ``graph``, ``plot``,
``timeline --format perfetto`` and ``eval`` cannot disagree.

    job = correlator.open_job("torchrun_logs/")
    d = job.diagnose()            # correlator.diagnose.Diagnosis
    job.write_graph("g.graphml")  # the graph of d's attempt
    trace = job.trace()           # Perfetto / Chrome trace JSON (dict)

``open_job(p).diagnose().to_json()`` (with :meth:`Job.to_json` adding the ``skipped`` list) is byte for
byte what ``rankscope diagnose p -f json`` prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import networkx as nx
    import polars as pl

    from correlator.api import PathDiagnosis, Progress
    from correlator.ingest import IngestResult
    from correlator.tables import TableWritten
    from correlator.verdict import Diagnosis

__all__ = ["Job", "open_job"]

#: How a job's input is read: per-rank logs in memory, logs node by node (bounded memory), one parquet file of
#: a ``rankscope timeline``, or a folder of such parquet parts.
Mode = Literal["logs", "streaming", "parquet", "dataset"]


@dataclass
class Job:
    """A job's input and the options it is read with (those of :func:`correlator.api.diagnose_path`); the
    verdict, the table and the graph are computed on first use and kept."""

    path: str | os.PathLike[str]
    fr: str | os.PathLike[str] | None = None
    streaming: bool | None = None
    attempt: int | None = None
    redact: bool = False
    tz: str | None = None
    signatures: Iterable[str | os.PathLike[str]] = ()
    require_lines: bool = True
    progress: Progress | None = None
    on_warnings: Callable[[list[str]], None] | None = None
    #: keep every line in :meth:`table` (renderers: the timeline draws every collective); the verdict is the same
    full_table: bool = False
    #: a folder of stack dumps kept apart from the logs (``correlator.stackdir.add_dumps``)
    stacks: str | os.PathLike[str] | None = None
    _result: PathDiagnosis | None = field(default=None, repr=False)
    _graph: nx.DiGraph | None = field(default=None, repr=False)
    _read: IngestResult | None = field(default=None, repr=False)
    _ranks: list[int] | None = field(default=None, repr=False)

    @property
    def mode(self) -> Mode:
        """``parquet`` (a timeline file), ``dataset`` (a folder of parquet files), ``streaming`` (logs
        read node by node: asked for, or by :func:`correlator.api.want_streaming`) or ``logs``."""
        from correlator.api import is_parquet_input, want_streaming

        p = Path(self.path)
        if str(self.path) != "-" and is_parquet_input(p):
            return "parquet" if p.is_file() else "dataset"
        if (
            str(self.path) != "-"
            and self.fr is None
            and self.stacks is None
            and p.exists()
            and want_streaming(p, self.streaming, full_table=self.full_table)
        ):
            return "streaming"
        return "logs"

    def result(self) -> PathDiagnosis:
        """The verdict with its table, skipped files and warnings (read once)."""
        if self._result is None:
            from correlator.api import diagnose_path

            self._result = diagnose_path(
                self.path,
                fr=self.fr,
                streaming=self.streaming,
                attempt=self.attempt,
                redact=self.redact,
                tz=self.tz,
                signatures=list(self.signatures),
                require_lines=self.require_lines,
                progress=self.progress,
                on_warnings=self.on_warnings,
                full_table=self.full_table,
                stacks=self.stacks,
            )
        return self._result

    def diagnose(self) -> Diagnosis:
        """The job's one verdict (:class:`correlator.diagnose.Diagnosis`, signatures attached)."""
        return self.result().diagnosis

    def table(self) -> pl.DataFrame:
        """The event table the verdict was made from (see :class:`correlator.api.PathDiagnosis`)."""
        return self.result().table

    def rows_read(self) -> pl.DataFrame:
        """The rows of :meth:`table` that diagnosis read (:func:`correlator.reduce.reduce_for_diagnosis`, with
        the lines of this job's signatures kept whole), in the table's order: every row but the routine ones,
        of which the last collectives, progress and NCCL chatter of each rank and the script's first and last
        lines. What ``rankscope plot`` draws of a large job."""
        from correlator.api import rows_read

        return rows_read(self.table(), self.signatures)

    def to_json(self) -> str:
        """What ``rankscope diagnose -f json`` prints: the verdict and the ``skipped`` list."""
        return self.result().to_json()

    def graph(self) -> nx.DiGraph:
        """The causal graph of the verdict's attempt: nodes are ranks (``status``, first fault, host), edges
        ``collateral -> initiator`` (``edge``: :class:`correlator.verdict.EdgeKind`, ``evidence`` event ids).

        Drawn from the analysis the verdict was read from (:attr:`correlator.diagnose.Diagnosis.findings`,
        :meth:`correlator.graph.Findings.to_networkx`): nothing is diagnosed again. A verdict no rule made (a
        log nothing recognised, :mod:`correlator.lastresort`) is drawn from its own records: its ranks and
        their status."""
        if self._graph is None:
            self._graph = verdict_graph(self.diagnose())
        return self._graph

    def write_graph(self, out: str | os.PathLike[str]) -> str:
        """:meth:`graph` to ``out`` by its extension (.graphml, .json node-link, .dot/.gv); returns the
        format. Raises ValueError for another extension."""
        from correlator.report import write_graph

        return write_graph(self.graph(), Path(out))

    def read(self) -> IngestResult:
        """Every line of the input as events, with no verdict (:func:`correlator.api.load_path` with this
        job's ``tz``, ``redact``, ``fr`` and ``progress``; its warnings go to ``on_warnings``); read once. What
        the listings that show every line read (:meth:`events`, :meth:`write_table`)."""
        if self._read is None:
            from correlator.api import load_path

            res = load_path(
                self.path,
                tz=self.tz,
                redact=self.redact,
                fr=self.fr,
                stacks=self.stacks,
                progress=self.progress,
            )
            if self.on_warnings is not None:
                self.on_warnings(list(res.warnings))
            self._read = res
        return self._read

    def events(
        self, rank: Iterable[int] | None = None, kind: Iterable[str] | None = None, faults: bool = False
    ) -> pl.DataFrame:
        """The job's events (:meth:`read`) on the ranks ``rank``, of the kinds ``kind`` (kind names or the
        words of :data:`correlator.schema.KIND_ALIASES`), only faults (``faults``), in the time the report
        states, then file order: :func:`correlator.tables.select_events`. An unknown kind raises
        :class:`~correlator.errors.InputError` before anything is read. A large folder of logs is streamed
        through a temporary parquet file instead of read whole: :func:`correlator.tables.job_events`."""
        from correlator.tables import event_kinds, job_events

        if kind:
            event_kinds(kind)
        t, self._ranks = job_events(self, rank, kind, faults)
        return t

    def ranks(self) -> list[int]:
        """The global ranks the logs name, sorted: those :meth:`events` streamed or read from a table, else
        those of :meth:`read`."""
        if self._ranks is None:
            self._ranks = self.read().table["rank"].drop_nulls().unique().sort().to_list()
        return list(self._ranks)

    def write_table(
        self,
        out: str | os.PathLike[str],
        format: str | None = None,
        partition_by: str | None = None,
        streaming: bool | None = None,
        engine: str = "local",
    ) -> TableWritten:
        """The event table of every line to ``out``, written whole or not at all (a temporary name renamed):
        ``format`` parquet, jsonl, csv (default: by the extension, .parquet, .jsonl or .csv; none: parquet; another is refused) or perfetto (the trace of
        this verdict); ``partition_by`` ``host`` or ``rank``: a hive-partitioned parquet dataset under ``out``;
        ``streaming`` batch by batch in bounded memory (default: a parquet table of more than 64 MiB of logs,
        not with ``redact``); ``engine`` ``ray``: the batches as Ray tasks, a dataset under the folder ``out``
        (:mod:`correlator.rayengine`). Refuses an ``out`` inside the input.
        :func:`correlator.tables.write_job_table`."""
        from correlator.tables import write_job_table

        return write_job_table(
            self, out, format=format, partition_by=partition_by, streaming=streaming, engine=engine
        )

    def trace(self) -> dict[str, Any]:
        """The Perfetto / Chrome trace-event JSON of the table with this verdict's initiating events."""
        from correlator.perfetto import to_trace

        return to_trace(self.table(), self.diagnose())


def verdict_graph(d: Diagnosis) -> nx.DiGraph:
    """The causal graph of verdict ``d``: the analysis it was read from (:meth:`correlator.graph.Findings.
    to_networkx`), or, for a verdict no rule made, :func:`_records_graph`."""
    return _records_graph(d) if d.findings is None else d.findings.to_networkx()


def _records_graph(d: Diagnosis) -> nx.DiGraph:
    """A graph of a verdict's own records: one node per rank with its status, one edge per explanation."""
    import networkx as nx

    G = nx.DiGraph(
        initiators=list(d.initiating_ranks),
        initiator_basis=d.initiator_basis,
        failure_kind=d.failure_kind,
        attempt=d.attempt,
        ranks_seen=list(d.ranks_seen),
    )
    for r in d.per_rank:
        G.add_node(r.rank, host=r.host, local_rank=r.local_rank, status=r.status)
    for e in d.initiating_events:
        G.nodes[e.rank]["first_fault_event"] = e.event_id
    for r in d.per_rank:
        if r.explained_by is not None:
            G.add_edge(r.rank, r.explained_by.rank, edge=r.explained_by.edge, pg=None, seq=None, evidence=[])
    return G


def open_job(path: str | os.PathLike[str], **options: Any) -> Job:
    """A :class:`Job` over ``path`` with the options of :func:`correlator.api.diagnose_path` (``fr``,
    ``streaming``, ``attempt``, ``redact``, ``tz``, ``signatures``, ``require_lines``, ``progress``,
    ``on_warnings``, ``full_table``, ``stacks``). Nothing is read until a method asks; errors are those of ``diagnose_path``
    (:class:`correlator.errors.InputError`, :class:`correlator.discover.DiscoveryError`). Raises
    TypeError for an unknown option."""
    return Job(path, **options)
