"""One verdict whatever way the job is read (issue #31: one facade, :func:`correlator.open_job`).

Per corpus case the whole event table is read and diagnosed once, with nothing reduced or cut: that
verdict is what every input mode of a :class:`~correlator.job.Job` that can differ must print, the whole
JSON document compared:

- ``logs`` (``rankscope diagnose DIR``): ``ingest(keep_coll=...)`` cuts NCCL COLL lines while reading and
  ``reduce_for_diagnosis`` keeps what diagnosis reads (issue #13 item 4);
- ``streaming``: ``stream_ingest`` node by node, its reduced table;
- ``parquet`` / ``dataset``: a ``rankscope timeline`` file or hive-partitioned folder, read back by
  ``reduced_from_parquet`` (the projection of key columns, in chunks).

One normalization: for a ``collective disagreement`` evidence line, which rank's line is shown is not
compared, because diagnosis picks it among the agreeing ranks in no fixed order (two diagnoses of the SAME
table differ there; cap-07, cap-18). ``open_job(p).to_json()`` is what ``rankscope diagnose p -f json``
prints: tests/test_job.py. The generated jobs below are where the cut drops most lines (the corpus holds
no NCCL COLL line of the fast-path shape).
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest

from correlator import fastrows, streaming
from correlator.api import PathDiagnosis, attach_signatures, skipped_for_output
from correlator.diagnose import diagnose
from correlator.export import write_partitioned
from correlator.ingest import IngestResult, ingest
from correlator.job import open_job
from correlator.report import to_json
from correlator.schema import EVENT_SCHEMA
from correlator.streaming import reduce_for_diagnosis, reduced_from_parquet
from tests.conftest import CASES, USER_SIGNATURE, VERDICT_KEYS, late_configuration

CORPUS = sorted(p.name for p in CASES.iterdir() if (p / "logs").is_dir())


def _normalized(d: dict[str, Any]) -> dict[str, Any]:
    for e in d.get("evidence", []):
        if e.get("role") == "collective disagreement":  # see the module docstring
            for k in ("rank", "path", "line", "ts", "text"):
                e.pop(k, None)
    return d


def _json(t: pl.DataFrame) -> dict[str, Any]:
    return _normalized(json.loads(to_json(diagnose(t))))


def _no_ts(v: object) -> object:
    """``v`` without timestamp fields (keys ``ts`` / ``*_ts``)."""
    if isinstance(v, dict):
        return {k: _no_ts(x) for k, x in v.items() if k != "ts" and not k.endswith("_ts")}
    if isinstance(v, list):
        return [_no_ts(x) for x in v]
    return v


def _doc(res: IngestResult, reduced: bool) -> dict[str, Any]:
    """The JSON document ``rankscope diagnose`` prints for ingest result ``res`` as diagnosis would make it
    from the whole table (``reduced``: from its reduction; on the generated jobs host clock offsets come out
    the same only then): the signatures matched on the whole table, the skipped list."""
    t = res.table
    d = attach_signatures(diagnose(reduce_for_diagnosis(t) if reduced else t), t, [])
    return _normalized(json.loads(PathDiagnosis(d, t, skipped_for_output(res, False)).to_json()))


def _write_parquet(t: pl.DataFrame, out: Path) -> Path:
    """``t`` as ``rankscope timeline -o out.parquet`` writes it (the event schema)."""
    pq.write_table(t.to_arrow(compat_level=pl.CompatLevel.oldest()).cast(EVENT_SCHEMA), out)
    return out


@pytest.mark.parametrize("case", CORPUS)
def test_every_input_mode_gives_the_full_table_verdict(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = CASES / case / "logs"
    res = ingest(root)
    t = res.table
    want = _doc(res, reduced=False)
    red = reduce_for_diagnosis(t)
    # `diagnose` reduces every table, also one already reduced (parquet, streaming): no change.
    assert reduce_for_diagnosis(red).equals(red)

    # logs: the COLL lines cut while reading are rows of the whole table, and the reduction drops them.
    logs = open_job(root, streaming=False, require_lines=False)
    cut = logs.table()
    assert t.filter(pl.col("event_id").is_in(cut["event_id"].implode())).equals(cut)
    assert reduce_for_diagnosis(cut).equals(red)

    # parquet: the projection read back is the in-memory reduction; a host-partitioned dataset read in
    # chunks of 7 rows of key columns (the per-chunk selection composes) gives the same rows.
    from_pq = open_job(_write_parquet(t, tmp_path / "t.parquet"), require_lines=False)
    assert from_pq.table().drop("event_id").equals(red.drop("event_id"))
    write_partitioned(t, tmp_path / "ds", by="host")
    monkeypatch.setattr(streaming, "_CHUNK_ROWS", 7)
    dataset = open_job(tmp_path / "ds", require_lines=False)
    assert dataset.table().equals(from_pq.table())  # (read before the patch, in one chunk)

    streamed = open_job(root, streaming=True, require_lines=False)
    _assert_modes_give(
        want, [(logs, "logs"), (streamed, "streaming"), (from_pq, "parquet"), (dataset, "dataset")]
    )
    # A node split into batches of rank folders (many files read apart) keeps the verdict.
    assert _split_verdict(root) == {k: want[k] for k in VERDICT_KEYS}


def _assert_modes_give(want: dict[str, Any], jobs: list[tuple[Any, str]]) -> None:
    """Each ``(job, mode)`` of ``jobs`` reads its input as ``mode`` and prints ``want`` (normalized); a timeline
    table lists no skipped file."""
    for job, mode in jobs:
        assert job.mode == mode
        got = _normalized(json.loads(job.to_json()))
        if mode in ("parquet", "dataset"):
            assert got.pop("skipped") == []
            got["skipped"] = want["skipped"]
        assert got == want, mode


def _split_verdict(root: Path) -> dict[str, Any]:
    """The verdict (:data:`VERDICT_KEYS`) of ``root`` streamed with a batch per rank folder (many files read
    apart)."""
    split, _summary = streaming.stream_ingest(root, None, batch_bytes=1)
    got = json.loads(to_json(diagnose(split)))
    return {k: got[k] for k in VERDICT_KEYS}


def test_reduced_verdict_equals_full_on_generated_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job whose NCCL COLL lines are most of the table (the reduction keeps a few per rank and PG).

    Everything but the timestamps must agree: host clock offsets are estimated from the collectives both
    tables hold, fewer in the reduced one, so corrected stamps may differ by milliseconds."""
    import sys

    sys.path.insert(0, str(CASES.parent.parent / "benchmarks"))
    from generate import generate

    info = generate(tmp_path / "job", ranks=16, lines=400, seed=5)
    t = ingest(tmp_path / "job").table
    red = reduce_for_diagnosis(t)
    assert red.height < t.height / 4
    assert reduce_for_diagnosis(red).equals(red)
    from_pq = reduced_from_parquet(_write_parquet(t, tmp_path / "t.parquet"))
    assert from_pq.drop("event_id").equals(red.drop("event_id"))
    monkeypatch.setattr(streaming, "_CHUNK_ROWS", 7)
    assert reduced_from_parquet(tmp_path / "t.parquet").equals(from_pq)
    full = _no_ts(_json(t))
    assert _no_ts(_json(red)) == full
    assert _no_ts(_json(from_pq)) == full
    assert _json(red)["initiating_ranks"] == [info["culprit"]]


# --- `diagnose DIR` ingests only what diagnosis needs (ingest(keep_coll=...), issue #13 item 4) ---------------


def _check_cut(root: Path, keep: int) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """``ingest(root, keep_coll=keep)`` against ``ingest(root)``: every row it keeps is the full table's row
    with the same ``event_id``, column by column; the reduction of both is the same frame; every line read
    is in a row, skipped, or counted as cut. Returns (full table, cut table, lines cut)."""
    full = ingest(root)
    cut = ingest(root, keep_coll=keep)
    same_ids = full.table.filter(pl.col("event_id").is_in(cut.table["event_id"].implode()))
    assert same_ids.equals(cut.table)
    assert reduce_for_diagnosis(cut.table, keep).equals(reduce_for_diagnosis(full.table, keep))
    assert cut.lines_read == full.lines_read
    assert cut.lines_read == int(cut.table["line_count"].sum()) + cut.skipped_lines + cut.coll_lines_dropped
    assert full.table.height - cut.table.height == cut.coll_lines_dropped
    return full.table, cut.table, cut.coll_lines_dropped


def _coll(host: str, pid: int, seq: int, comm: str, op: str = "AllReduce", n: int = 16) -> str:
    """An NCCL INFO COLL line (NCCL 2.21 ``src/enqueue.cc`` shape, as in benchmarks/generate.py)."""
    return (
        f"{host}:{pid}:{pid} [0] NCCL INFO {op}: opCount {seq:x} sendbuff 0x7f3b52000000 recvbuff "
        f"0x7f3b52000000 count 8 datatype 7 op 0 root 0 comm {comm} [nranks={n}] stream 0x55d0c2f1a9e0"
    )


def _job(tmp: Path, variant: str) -> tuple[Path, str | None]:
    """A generated 16-rank job (NCCL COLL lines are most of its lines), changed by ``variant``; returns the
    root and the file the variant changed (None: none)."""
    import sys

    sys.path.insert(0, str(CASES.parent.parent / "benchmarks"))
    from generate import generate

    root = tmp / variant
    generate(root, ranks=16, lines=300, seed=5)
    f = min(root.rglob("stdout.log"))
    lines = f.read_text().splitlines()
    host, pid = lines[1].split(" ")[0].split(":")[:2]
    mid = len(lines) // 2
    if variant == "traceback":  # a record candidate: the file goes back to the generic path whole
        lines[mid:mid] = ["Traceback (most recent call last):", "RuntimeError: boom"]
    elif variant == "restart":  # a restart line: attempts count the file's lines one by one
        restart = (
            "INFO:torch.distributed.elastic.agent.server.api:[default] Worker group FAILED. 3/3 attempts "
        )
        lines[mid:mid] = [restart + "left; will restart worker group"]
    elif variant == "interleaved":  # two processes in one file: runs of one host:pid alternate
        extra = [_coll(host, 777, i, "0xabc") for i in range(40)]
        out = []
        for i, line in enumerate(lines):
            out.append(line)
            if i % 7 == 0 and extra:
                out.append(extra.pop(0))
        lines = out + extra
    elif variant == "two_comms":  # a second communicator of the same process, another world size
        lines += [_coll(host, int(pid), i, "0xdead1", "AllGather", 8) for i in range(30)]
    elif variant == "opcount_overflow":  # an opCount past Int64: no SeqNum, sorted lowest
        lines += [_coll(host, int(pid), 2**70, "0xfeed")] * 3
    elif variant == "tee":  # torchrun --tee copies of early COLL lines of local rank 0 in the launcher log
        launcher = root / "node-0000" / "launcher.log"
        copies = ["[default0]:" + line for line in lines if ": opCount " in line][:10]
        launcher.write_text(launcher.read_text() + "\n".join(copies) + "\n")
        return root, str(f.relative_to(root))
    elif variant == "stream":  # a combined stream of three processes: read whole (launcher pairing)
        (root / "combined.log").write_text(
            "\n".join(_coll("node-0009", 900 + i % 3, i // 3, "0xbeef") for i in range(60)) + "\n"
        )
        return root, "combined.log"
    else:
        return root, None
    f.write_text("\n".join(lines) + "\n")
    return root, str(f.relative_to(root))


@pytest.mark.parametrize(
    "variant",
    ["plain", "traceback", "restart", "interleaved", "two_comms", "opcount_overflow", "stream", "tee"],
)
@pytest.mark.parametrize("keep", [1, 4])
def test_keep_coll_cuts_only_lines_the_reduction_drops(tmp_path: Path, variant: str, keep: int) -> None:
    root, changed = _job(tmp_path, variant)
    full, cut, n_cut = _check_cut(root, keep)
    if variant == "tee":  # tee copies of COLL lines: every file keeps its COLL lines (see _parse_reduced)
        assert n_cut == 0
        return
    assert n_cut > full.height / 2  # most COLL lines are cut
    if variant in ("traceback", "restart", "stream"):  # that file is read whole
        mine = pl.col("path") == changed
        assert cut.filter(mine).height == full.filter(mine).height > 40


@pytest.mark.parametrize("variant", ["plain", "traceback"])
def test_keep_coll_cuts_the_same_lines_of_a_file_past_the_line_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    # The line cap keeps each file's head and tail, numbered as in the file (correlator.read): the cut reads
    # the two as one file, so it keeps and numbers the rows the full table does.
    root, _ = _job(tmp_path, variant)
    longest = max(len(f.read_text().splitlines()) for f in root.rglob("stdout.log"))
    monkeypatch.setenv("RANKSCOPE_MAX_LINES", str(longest // 2))
    full, _cut, n_cut = _check_cut(root, 4)
    assert n_cut > 0
    after = pl.col("line") - (pl.col("line") + pl.col("line_count")).shift(1)  # 0: the next line of the file
    jumps = full.sort("path", "line").group_by("path").agg((after > 0).sum().alias("j"))
    assert jumps["j"].max() == 1  # a file's rows jump once: past the lines between its head and tail
    assert (full["line"] <= longest).all()


@pytest.mark.parametrize("batch", [1, 64 << 10])
@pytest.mark.parametrize("variant", ["plain", "traceback", "interleaved", "restart", "tee"])
def test_cut_batch_by_batch_equals_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str, batch: int
) -> None:
    """The cut runs per batch of files while reading (``fastrows.CUT_BATCH_BYTES``); batches of one file
    (``batch=1``) or of a few files give the table, the lines cut and the warnings of one batch of all."""
    ingest_mod = importlib.import_module("correlator.ingest")  # (correlator.ingest is also a function)

    root, _ = _job(tmp_path, variant)
    one = ingest(root, keep_coll=4)
    assert len(ingest_mod.discover(root)[0]) > 10  # several batches below
    monkeypatch.setattr(fastrows, "CUT_BATCH_BYTES", batch)
    many = ingest(root, keep_coll=4)
    assert many.table.equals(one.table)
    assert (many.coll_lines_dropped, many.warnings) == (one.coll_lines_dropped, one.warnings)
    assert (variant == "tee") == (one.coll_lines_dropped == 0)


def test_an_error_in_the_cut_thread_reaches_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cut runs in a worker thread; what it raises is raised by ``ingest`` (not lost, no hang)."""

    root, _ = _job(tmp_path, "plain")

    def boom(frame: pl.DataFrame, keep: int) -> None:
        raise MemoryError("cut failed")

    monkeypatch.setattr(fastrows, "_cut_batch", boom)
    monkeypatch.setattr(fastrows, "CUT_BATCH_BYTES", 1)
    with pytest.raises(MemoryError, match="cut failed"):
        ingest(root, keep_coll=4)


@pytest.mark.parametrize("variant", ["plain", "traceback", "interleaved", "two_comms", "tee"])
def test_diagnose_dir_on_generated_job_equals_full_table_verdict(tmp_path: Path, variant: str) -> None:
    root, _ = _job(tmp_path, variant)
    got = open_job(root, require_lines=False)
    full = ingest(root)
    assert _normalized(json.loads(got.to_json())) == _doc(full, reduced=True)
    if variant != "tee":
        assert got.table().height < full.table.height / 2


# --- a training script's own lines: the first and last per rank and kind, and a signature's ---------------

_APP_KINDS = {"log", "progress_bar", "unparsed"}


def _first_last(t: pl.DataFrame, head: int, tail: int) -> set[int]:
    """The event ids of ``t``'s application lines (kinds ``_APP_KINDS`` of layer app/unknown, no world size)
    that are among the first ``head`` or last ``tail`` of their (rank, else file; kind), written out."""
    app = t.filter(
        pl.col("kind").is_in(_APP_KINDS)
        & pl.col("layer").is_in(["app", "unknown"])
        & pl.col("world_size").is_null()
    )
    keep: set[int] = set()
    for _key, g in app.group_by(pl.coalesce(pl.col("rank").cast(pl.String), pl.col("path")), "kind"):
        ids = sorted(g["event_id"].to_list())
        keep |= set(ids[:head]) | set(ids[-tail:])
    return keep


@pytest.mark.parametrize("tee", [False, True])
def test_application_lines_keep_first_last_and_signature_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tee: bool
) -> None:
    """An application-heavy job (``benchmarks/generate.py --shape app``, plain and as torchrun --tee
    consoles): the reduction keeps, of each rank's log lines, progress bars and unparsed lines, the first
    ``APP_HEAD`` and last ``APP_TAIL``; of its progress lines the last 4; and the lines in the middle that a
    signature's regex matches (built-in ones': rank 0 saving a checkpoint, a progress line saying the data
    ran out; a user file's, read with ``--signatures``). The verdict of every input mode is the whole table's,
    signatures matched on the whole table."""
    import sys

    from correlator.reduce import APP_HEAD, APP_TAIL, signature_patterns
    from correlator.signatures import TextPatterns, load_signatures

    sys.path.insert(0, str(CASES.parent.parent / "benchmarks"))
    from generate import generate_app

    root = tmp_path / "job"
    info = generate_app(root, ranks=4, lines=3000, seed=2, tee=tee)
    f = min(root.rglob("console.log" if tee else "stdout.log"))  # rank 0's
    lines = f.read_text().splitlines()
    said = {  # what rank 0 says, and the kind it is read as
        "saving": ("[trainer] Saving checkpoint to /ckpt/step_000700", "log"),
        "stall": ("[data] MYAPP_SHARD_STALL shard 12 after 30 s", "log"),
        "exhausted": (
            "[trainer] rank=0 step=700 data exhausted after 700 steps, leaving training loop",
            "step_progress",
        ),
    }
    stamped = re.compile(r"^(\S*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO )")
    at = len(lines) // 4
    for text, _kind in said.values():
        at = next(i for i in range(at + 1, len(lines)) if stamped.match(lines[i]) and "rank=0" in lines[i])
        lines[at] = stamped.match(lines[at])[1] + text  # a line of rank 0's, the same stamp, another message
    f.write_text("\n".join(lines) + "\n")
    user = tmp_path / "user.toml"
    user.write_text(USER_SIGNATURE.format(id="my-shard-stall", match="message_regex = 'MYAPP_SHARD_STALL'"))

    res = ingest(root)
    t = res.table
    ev: dict[str, int] = {}
    for name, (text, kind) in said.items():
        row = t.filter(pl.col("message").str.ends_with(text))
        assert row.rows() and row["kind"].to_list() == [kind] and row["rank"].to_list() == [0], name
        ev[name] = int(row["event_id"][0])
    # by position: the first and last application lines; every other row as the reduction without
    # signature text keeps it (the last 4 progress lines of a rank, every fault...)
    app_ids = _first_last(t, APP_HEAD, APP_TAIL)
    rest = t.filter(~pl.col("event_id").is_in(list(_first_last(t, 10**9, 10**9))))
    by_position = app_ids | set(
        reduce_for_diagnosis(rest, text=TextPatterns(None, None))["event_id"].to_list()
    )
    assert not set(ev.values()) & by_position  # in the middle: kept for a signature only

    red = reduce_for_diagnosis(t)  # the built-in library's patterns
    assert set(red["event_id"].to_list()) == by_position | {ev["saving"], ev["exhausted"]}
    assert red.height < t.height / 8
    assert reduce_for_diagnosis(red).equals(red)
    bare = reduce_for_diagnosis(t, text=TextPatterns(None, None))
    assert set(bare["event_id"].to_list()) == by_position
    text = signature_patterns(load_signatures([user]))
    red_user = reduce_for_diagnosis(t, text=text)
    assert set(red_user["event_id"].to_list()) == by_position | set(ev.values())
    # the same rows from a parquet table read in chunks of 7 rows of key columns, and streamed by rank folder
    from_pq = reduced_from_parquet(_write_parquet(t, tmp_path / "t.parquet"), text=text)
    assert from_pq.drop("event_id").equals(red_user.drop("event_id"))
    monkeypatch.setattr(streaming, "_CHUNK_ROWS", 7)
    assert reduced_from_parquet(tmp_path / "t.parquet", text=text).equals(from_pq)
    # (a batch keeps the first line of each template too, which the reduction of the union drops: no mismatch)
    split, _summary = streaming.stream_ingest(root, None, batch_bytes=1, text=text)
    assert reduce_for_diagnosis(split, text=text).drop("event_id").equals(red_user.drop("event_id"))

    d = attach_signatures(diagnose(t), t, [user])
    want = _normalized(json.loads(PathDiagnosis(d, t, skipped_for_output(res, False)).to_json()))
    assert want["initiating_ranks"] == [info["culprit"]]
    stall = [s for s in want["signatures"] if s["id"] == "my-shard-stall"]
    assert stall and stall[0]["matched_events"] == [ev["stall"]]
    for mode, streamed in (("logs", False), ("streaming", True)):
        job = open_job(root, streaming=streamed, require_lines=False, signatures=[user])
        assert job.mode == mode
        assert _normalized(json.loads(job.to_json())) == want, mode


def test_configuration_lines_in_the_middle_are_kept_where_a_mismatch_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the table holds a collective mismatch, diagnosis compares the first line of each template per
    rank (``disagreement.config_outlier``): every input mode keeps those lines wherever they are, and names
    rank 3 (cap-07's answer) as the whole table does. Before, the reduced table had cut them: every mode but
    the whole table named ranks 0 and 3, found by their silence."""
    from correlator.reduce import APP_HEAD, APP_TAIL

    root = late_configuration(tmp_path / "logs")
    res = ingest(root)
    t = res.table
    conf = t.filter(pl.col("message").str.contains("plain model hidden=") & ~pl.col("duplicate"))
    ids = set(conf["event_id"].to_list())
    assert sorted(conf["rank"].to_list()) == [0, 1, 2, 3]
    assert not ids & _first_last(t, APP_HEAD, APP_TAIL)  # in the middle by position
    red = reduce_for_diagnosis(t)
    assert ids <= set(red["event_id"].to_list())
    assert reduce_for_diagnosis(red).equals(red)
    # the templates' first lines only: the other lines of the middle are cut
    middle = t.filter(pl.col("message").str.contains("prefetched batch 3\\b") & ~pl.col("duplicate"))
    assert middle.height == 4 and not set(middle["event_id"].to_list()) & set(red["event_id"].to_list())
    # without a mismatch, diagnosis reads no template: the reduction keeps none
    calm = t.filter(pl.col("kind") != "collective_mismatch")
    assert not ids & set(reduce_for_diagnosis(calm)["event_id"].to_list())

    want = _doc(res, reduced=False)
    assert want["initiating_ranks"] == [3]  # cap-07's expected.json
    assert want["confidence_reason_codes"] == ["CONFIG_LINE"]
    from_pq = open_job(_write_parquet(t, tmp_path / "t.parquet"), require_lines=False)
    monkeypatch.setattr(streaming, "_CHUNK_ROWS", 7)
    logs = open_job(root, streaming=False, require_lines=False)
    streamed = open_job(root, streaming=True, require_lines=False)
    _assert_modes_give(want, [(logs, "logs"), (streamed, "streaming"), (from_pq, "parquet")])
    # streamed by rank folder: the batch without the mismatch (rank 3's) keeps its templates too
    assert _split_verdict(root) == {k: want[k] for k in VERDICT_KEYS}


def test_a_consoles_copies_take_no_position_of_the_lines_diagnosis_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cap-07 as in :func:`tests.conftest.late_configuration`, with its tee'd console (every line of a rank's
    a copy of its file's, ``duplicate``) renamed to sort after the rank folders. Diagnosis reads no duplicate:
    of the other rows the reduction keeps what it keeps of the table without the console (each rank's first
    ``APP_HEAD`` and last ``APP_TAIL`` script lines, its configuration line). Before, the console's copies
    took each rank's last positions: 21 of its 103 script lines were kept, and its last sign of life was an
    early line."""
    root = late_configuration(tmp_path / "logs")
    (root / "launcher.log").rename(root / "zz_console.log")
    t = ingest(root).table
    console = t.filter(pl.col("path") == "zz_console.log")
    assert (
        console["duplicate"].sum() > 400
        and not t.filter(pl.col("path") != "zz_console.log")["duplicate"].any()
    )
    read = t.filter(~pl.col("duplicate"))
    want = set(reduce_for_diagnosis(read)["event_id"].to_list())
    red = reduce_for_diagnosis(t)
    assert set(red.filter(~pl.col("duplicate"))["event_id"].to_list()) == want
    # each rank's last script line (a silent rank's last sign of life)
    last = pl.col("message").sort_by("event_id").last()
    script = (pl.col("layer") == "app") & (pl.col("kind") == "log") & ~pl.col("duplicate")
    assert (
        red.filter(script)
        .group_by("rank")
        .agg(last)
        .sort("rank")
        .equals(t.filter(script).group_by("rank").agg(last).sort("rank"))
    )
    assert reduce_for_diagnosis(red).equals(red)
    monkeypatch.setattr(streaming, "_CHUNK_ROWS", 7)
    from_pq = reduced_from_parquet(_write_parquet(t, tmp_path / "t.parquet"))
    assert from_pq.drop("event_id").equals(red.drop("event_id"))
