"""Crafted Flight Recorder dumps next to a good log: each one is a warning naming the dump, and the log is
still diagnosed. Every dump is built here; each is small enough that a regression (a field converted before
it is checked, a dump parsed outside the guard) costs seconds and some memory, not a hang."""

from __future__ import annotations

import io
import json
import pickle
import struct
import time
from pathlib import Path

import polars as pl
import pytest

import correlator
from correlator import fr_load
from parsers import flight_recorder as frp
from tests.conftest import run_cli

GOOD_LOG = "[rank0]: RuntimeError: boom\n"
VERDICT = "rank 0 failed first: RuntimeError"


def _u(s: str) -> bytes:
    """Pickle BINUNICODE."""
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _entry_pickle(fields: bytes) -> bytes:
    """A protocol-2 FR pickle with one entry holding ``fields`` (pickled key/value pairs)."""
    return (
        b"\x80\x02}("
        + _u("version")
        + _u("2.4")
        + _u("pg_config")
        + b"}"
        + _u("entries")
        + b"](}("
        + fields
        + b"ueu."
    )


def _laughs(levels: int, opcode: bytes = b"list") -> bytes:
    """L0 = ['aaaaaaaaaa'], L(i+1) = [L(i), L(i)] through the memo: a few bytes per level, 2**levels leaves."""
    if opcode == b"tuple":  # the same with tuples (hashable: a dict key)
        out = _u("a" * 10) + b"\x85q\x000"
        for i in range(1, levels + 1):
            out += b"h" + bytes([i - 1]) + b"h" + bytes([i - 1]) + b"\x86q" + bytes([i]) + b"0"
        return out + b"h" + bytes([levels])
    out = b"]" + _u("a" * 10) + b"aq\x000"
    for i in range(1, levels + 1):
        out += b"]h" + bytes([i - 1]) + b"ah" + bytes([i - 1]) + b"aq" + bytes([i]) + b"0"
    return out + b"h" + bytes([levels])


def _deep(depth: int) -> bytes:
    """A list nested ``depth`` deep: ``[[[...]]]``."""
    return b"]" * depth + b"a" * (depth - 1)


def _json_dump(duration: float) -> bytes:
    entry = {
        "record_id": 0,
        "pg_id": 0,
        "process_group": ["0", "default_pg"],
        "collective_seq_id": 1,
        "profiling_name": "nccl:all_reduce",
        "input_sizes": [[3, 4]],
        "input_dtypes": ["Float"],
        "state": "completed",
        "time_created_ns": 1724779239975811724,
    }
    second = dict(entry, record_id=1, collective_seq_id=2, duration_ms=2.5)
    obj = {"version": "2.10", "pg_config": {}, "entries": [dict(entry, duration_ms=duration), second]}
    return json.dumps(obj, allow_nan=True).encode()


def _pickle_with(**fields: object) -> bytes:
    entry: dict[str, object] = {
        "record_id": 0,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": 1,
        "profiling_name": "nccl:all_reduce",
        "input_sizes": [[3, 4]],
        "input_dtypes": ["Float"],
        "state": "completed",
    }
    entry.update(fields)
    return pickle.dumps({"version": "2.4", "pg_config": {}, "entries": [entry]}, protocol=2)


CRAFTED: dict[str, tuple[str, bytes, str]] = {
    # name: (file name, bytes, what the warning says)
    "laughs-profiling-name": (
        "fr_rank_1",
        _entry_pickle(_u("profiling_name") + _laughs(22)),
        "'profiling_name' is a list",
    ),
    "laughs-state": (
        "fr_rank_1",
        _entry_pickle(_u("profiling_name") + _u("gloo:all_reduce") + _u("state") + _laughs(22)),
        "'state' is a list",
    ),
    "laughs-pg-name": (
        "fr_rank_1",
        _entry_pickle(_u("process_group") + _laughs(22) + b"\x85"),
        "'process_group' name is a list",
    ),
    "laughs-tuple-key": (  # hashing it (as a dict key) took time exponential in the file's size
        "fr_rank_1",
        b"\x80\x02}("
        + _u("version")
        + _u("2.4")
        + _u("pg_config")
        + b"}"
        + _u("pg_status")
        + b"}"
        + _laughs(22, b"tuple")
        + b"Nsu.",
        "refused a tuple as a dict key",
    ),
    "deep-state": (
        "fr_rank_1",
        _entry_pickle(_u("profiling_name") + _u("gloo:all_reduce") + _u("state") + _deep(200_000)),
        "'state' is a list",
    ),
    "deep-json": (
        "fr_rank_1.json",
        _json_dump(1.5).replace(b'"default_pg"', b"[" * 100_000 + b"]" * 100_000, 1),
        "RecursionError",
    ),
    "json-infinity": ("fr_rank_1.json", _json_dump(float("inf")), "'duration_ms' is the number inf"),
    "json-nan": ("fr_rank_1.json", _json_dump(float("nan")), "'duration_ms' is the number nan"),
    "bigint-pg": (
        "fr_rank_1",
        _pickle_with(process_group=(10**5000, "x")),
        "'process_group' name is an integer of 16610 bits",
    ),
    "bigint-dtype": (
        "fr_rank_1",
        _pickle_with(input_dtypes=[10**5000]),
        "an item of 'input_dtypes' is an integer",
    ),
    "long-text": ("fr_rank_1", _pickle_with(state="x" * (frp.MAX_TEXT + 1)), "longer than 4096"),
    "frame-name-list": (
        "fr_rank_1",
        _pickle_with(frames=[{"name": ["x"] * 3, "filename": "/home/u/train.py", "line": 3}]),
        "a frame's 'name' is a list",
    ),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_dump_is_a_warning_and_the_log_is_still_diagnosed(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name, data, says = CRAFTED[case]
    assert len(data) < 500_000
    (tmp_path / name).write_bytes(data)
    (tmp_path / "rank0.log").write_text(GOOD_LOG)
    t0 = time.monotonic()
    code, out, err = run_cli(["diagnose", tmp_path], monkeypatch, capsys)
    assert time.monotonic() - t0 < 60
    assert code == 0, (out, err)
    assert VERDICT in out
    warned = [w for w in (out + err).splitlines() if name in w and says in w]
    assert warned, (out, err)
    assert "internal error" not in out + err


@pytest.mark.parametrize("duration", [float("inf"), float("nan"), 1e300])
def test_non_finite_duration_skips_that_entry_only(tmp_path: Path, duration: float) -> None:
    (tmp_path / "fr_rank_1.json").write_bytes(_json_dump(duration))
    (tmp_path / "rank0.log").write_text(GOOD_LOG)
    res = correlator.ingest(tmp_path)
    assert any(w.startswith("fr_rank_1.json: entry 0: 'duration_ms'") for w in res.warnings), res.warnings
    fr_rows = res.table.filter(pl.col("kind") == "fr_collective")
    assert fr_rows["record_id"].to_list() == [1] and fr_rows["elapsed_ms"].to_list() == [2]


def test_input_sizes_past_int64_leave_numel_empty_with_a_warning(tmp_path: Path) -> None:
    """Two sizes of 2**40 make 2**80 elements: the row keeps its entry with ``numel`` null and says so (it
    used to stop the whole run with polars' i128 overflow)."""
    obj = json.loads(_json_dump(1.0))
    obj["entries"][1]["input_sizes"] = [[2**40, 2**40]]
    (tmp_path / "fr_rank_1.json").write_text(json.dumps(obj))
    (tmp_path / "rank0.log").write_text(GOOD_LOG)
    res = correlator.ingest(tmp_path)
    fr_rows = res.table.filter(pl.col("kind") == "fr_collective").sort("record_id")
    assert fr_rows["record_id"].to_list() == [0, 1]
    assert fr_rows["numel"].to_list() == [12, None]
    assert [w for w in res.warnings if w.startswith("fr_rank_1.json: 1 entry (the first: entry 1)")], (
        res.warnings
    )


def test_a_dump_named_for_a_rank_past_any_world_is_a_warning(tmp_path: Path) -> None:
    """A 40-digit rank in a dump's name (no rank column holds it): the dump is not read, a warning names it,
    and the other dump and the log are read."""
    big = "1234567890123456789012345678901234567890"
    (tmp_path / f"fr_rank_{big}.json").write_bytes(_json_dump(1.0))
    (tmp_path / "fr_rank_2.json").write_bytes(_json_dump(1.0))
    (tmp_path / "rank0.log").write_text(GOOD_LOG)
    res = correlator.ingest(tmp_path)
    assert res.table.filter(pl.col("kind") == "fr_collective")["rank"].unique().to_list() == [2]
    assert [
        w
        for w in res.warnings
        if w.startswith(f"fr_rank_{big}.json: the rank in the file name is a number of 40 digits")
    ]


def test_shared_references_past_the_work_allowed_refuse_the_dump(tmp_path: Path) -> None:
    # 20,000 references (through the memo) to one entry with a 4,000-character name: a 90 KB file that
    # stands for 80 MB of text; read, it would make 20,000 rows of 8 KB each.
    entry = {"profiling_name": "nccl:all_reduce " + "x" * 4000, "collective_seq_id": 1, "pg_id": 0}
    data = pickle.dumps({"version": "2.4", "pg_config": {}, "entries": [entry] * 20_000}, protocol=2)
    assert len(data) < 100_000
    p = tmp_path / "fr_rank_1"
    p.write_bytes(data)
    t0 = time.monotonic()
    res = fr_load.collect([(p, "fr_rank_1")])
    assert time.monotonic() - t0 < 30
    assert res.table.height == 0
    assert [w for w in res.warnings if w.startswith("fr_rank_1: not read") and "shared references" in w]


def test_frames_shared_among_entries_are_read(tmp_path: Path) -> None:
    # torch shares one frame dict among the entries that pass through it: no false alarm.
    frames = [{"name": f"f{k}", "filename": f"/site-packages/torch/m{k}.py", "line": k} for k in range(40)]
    frames.append({"name": "step", "filename": "/home/u/train.py", "line": 7})
    entries = [
        {"collective_seq_id": i + 1, "pg_id": 0, "profiling_name": "nccl:all_reduce", "frames": frames}
        for i in range(3000)
    ]
    p = tmp_path / "fr_rank_1"
    p.write_bytes(pickle.dumps({"version": "2.4", "pg_config": {}, "entries": entries}, protocol=2))
    d = frp.read(p, p.name)
    assert len(d.entries) == 3000 and d.warnings == []
    assert d.entries[-1].user_frame() == "step at /home/u/train.py:7"


def test_many_bad_entries_give_a_bounded_number_of_warnings(tmp_path: Path) -> None:
    entries: list[object] = [{"state": ["x"]}] * 50 + ["not a record"] * 50
    p = tmp_path / "fr_rank_1"
    p.write_bytes(pickle.dumps({"version": "2.4", "pg_config": {}, "entries": entries}, protocol=2))
    d = frp.read(p, p.name)
    assert d.entries == []
    assert len(d.warnings) == frp.MAX_ENTRY_WARNINGS + 1
    assert d.warnings[-1].startswith("fr_rank_1: 95 more entries or items skipped")


def test_a_dump_failing_anywhere_is_a_warning_and_the_others_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _pickle_with()
    for r in (1, 2):
        (tmp_path / f"fr_rank_{r}").write_bytes(good)
    real_rows = frp.rows

    def rows(d: frp.Dump) -> list[dict[str, object]]:
        if d.rank == 2:
            raise OverflowError("cannot convert float infinity to integer")
        return real_rows(d)

    monkeypatch.setattr(frp, "rows", rows)
    res = fr_load.collect([(tmp_path / f"fr_rank_{r}", f"fr_rank_{r}") for r in (1, 2)])
    assert res.warnings == [
        "fr_rank_2: not read as a Flight Recorder dump (OverflowError: cannot convert float infinity to integer)"
    ]
    assert set(res.table["rank"].to_list()) == {1}


def test_container_keys_are_refused_by_the_unpickler() -> None:
    ok = {"a": (1, "x"), 2: [1.5, None, True], "s": {1, "b"}, "f": frozenset({3})}
    assert frp.SafeUnpickler(io.BytesIO(pickle.dumps(ok, protocol=4))).load() == ok
    for bad in ({(1, 2): 3}, {frozenset({(1,)})}, [{"k": 1}, {("t",): 2}]):
        with pytest.raises(pickle.UnpicklingError, match="refused a tuple as a dict key or set member"):
            frp.SafeUnpickler(io.BytesIO(pickle.dumps(bad, protocol=4))).load()
