"""Issue #34 item 2: a tar or zip archive of the logs, or a combined log on standard input, gives the same
verdict as the folder, with evidence named inside the archive; unpacking never writes outside its
temporary folder and keeps the limits."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from correlator import archive
from correlator.api import diagnose_path
from tests.conftest import CASES, run_cli

CASE = CASES / "public-02-oom-rank2-multinode-timeouts"
LOGS = CASE / "logs"


def _expected() -> dict[str, object]:
    return json.loads((CASE / "expected.json").read_text())


def _files() -> list[Path]:
    return sorted(p for p in LOGS.rglob("*") if p.is_file())


def _tar(dest: Path, mode: str) -> Path:
    with tarfile.open(dest, mode) as tf:
        for p in _files():
            tf.add(p, arcname=f"job/{p.relative_to(LOGS).as_posix()}")
    return dest


def _zip(dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in _files():
            zf.write(p, arcname=f"job/{p.relative_to(LOGS).as_posix()}")
    return dest


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Unpacking goes to a temporary folder of this test only, to see what is left behind."""
    t = tmp_path / "tmp"
    t.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(t))
    return t


@pytest.mark.parametrize(
    "make",
    [
        lambda d: _tar(d / "job.tar.gz", "w:gz"),
        lambda d: _tar(d / "job.tar", "w"),
        lambda d: _tar(d / "job.tar.xz", "w:xz"),
        lambda d: _tar(d / "logs-without-suffix", "w:bz2"),
        lambda d: _zip(d / "job.zip"),
    ],
    ids=["tar.gz", "tar", "tar.xz", "tar.bz2-no-suffix", "zip"],
)
def test_archive_gives_the_folders_verdict(tmp_path, private_tmp, make):
    want = _expected()
    arc = make(tmp_path)
    got = diagnose_path(arc).to_dict()
    assert sorted(got["initiating_ranks"]) == sorted(want["initiating_ranks"])
    assert got["failure_kind"] == want["failure_kind"]
    assert got["ranks_seen"] == diagnose_path(LOGS).to_dict()["ranks_seen"]
    paths = {e["path"] for e in got["evidence"]}
    assert paths and all(p.startswith(f"{arc.name}!/job/") for p in paths), paths
    assert list(private_tmp.iterdir()) == []  # the unpacked copy is gone


def test_tar_zst(tmp_path, private_tmp):
    pa = pytest.importorskip("pyarrow")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        for p in _files():
            tf.add(p, arcname=p.name)
    dest = tmp_path / "job.tar.zst"
    try:
        with pa.CompressedOutputStream(str(dest), "zstd") as out:
            out.write(raw.getvalue())
    except Exception:  # noqa: BLE001 - a pyarrow without zstd
        pytest.skip("no zstd codec in this pyarrow")
    got = diagnose_path(dest).to_dict()
    assert sorted(got["initiating_ranks"]) == sorted(_expected()["initiating_ranks"])


def _cli(args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "correlator", *args],
        input=stdin,
        capture_output=True,
        check=False,
        timeout=120,
    )


def test_stdin_pipe_gives_the_files_verdict(tmp_path):
    """``cat combined.log | rankscope diagnose -``: the verdict of the same combined file."""
    combined = tmp_path / "combined.log"
    combined.write_bytes(b"".join(p.read_bytes() for p in _files()))
    p = _cli(["diagnose", "-", "-f", "json", "-q"], combined.read_bytes())
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    ref = diagnose_path(combined).to_dict()
    assert got["initiating_ranks"] == ref["initiating_ranks"] == _expected()["initiating_ranks"]
    assert got["failure_kind"] == ref["failure_kind"]
    assert {e["path"] for e in got["evidence"]} == {"stdin"}


def test_tar_gz_on_stdin(tmp_path):
    arc = _tar(tmp_path / "job.tar.gz", "w:gz")
    p = _cli(["diagnose", "-", "-f", "json", "-q"], arc.read_bytes())
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["initiating_ranks"] == _expected()["initiating_ranks"]
    assert all(e["path"].startswith("stdin!/job/") for e in got["evidence"])


def test_empty_stdin_is_exit_2_naming_the_dash():
    p = _cli(["diagnose", "-"], b"")
    assert p.returncode == 2
    assert p.stderr.decode().startswith("error: -: ")


def test_every_command_takes_an_archive(tmp_path, monkeypatch, capsys):
    arc = _zip(tmp_path / "job.zip")
    n = len(diagnose_path(LOGS).table)
    code, out, err = run_cli(["events", arc, "--format", "json", "-q"], monkeypatch, capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]  # one object per line
    assert rows and all(r["path"].startswith("job.zip!/job/") for r in rows)
    code, _, err = run_cli(["timeline", arc, "-o", tmp_path / "t.parquet", "-q"], monkeypatch, capsys)
    assert code == 0, err
    import polars as pl

    assert pl.read_parquet(tmp_path / "t.parquet").height >= n
    code, _, err = run_cli(["redact", arc, "-o", tmp_path / "red", "-q"], monkeypatch, capsys)
    assert code == 0, err
    assert len([p for p in (tmp_path / "red").rglob("*") if p.is_file()]) == len(_files())


def _hostile_tar(dest: Path) -> Path:
    good = (LOGS / _files()[0].name).read_bytes()
    with tarfile.open(dest, "w:gz") as tf:
        for name, data in (("../escape.log", b"x\n"), ("/abs/escape.log", b"x\n"), ("ok/rank0.log", good)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("ok/link.log")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)
    return dest


def test_unpacking_stays_inside_and_says_what_it_skipped(tmp_path, private_tmp):
    arc = _hostile_tar(tmp_path / "evil.tar.gz")
    notes: list[str] = []
    with archive.opened(arc, notes) as root:
        written = sorted(
            p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()
        )
    assert written == ["evil.tar.gz!/ok/rank0.log"]
    assert [p for p in private_tmp.rglob("*")] == []
    assert not (private_tmp / "escape.log").exists() and not Path("/abs/escape.log").exists()
    joined = "\n".join(notes)
    assert "../escape.log: skipped, the name leaves the archive" in joined
    assert "/abs/escape.log: skipped, the name leaves the archive" in joined
    assert "ok/link.log: skipped, a link" in joined


def test_zip_bomb_stops_at_the_ratio_cap(tmp_path, private_tmp):
    dest = tmp_path / "bomb.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank0.log", b"\n" * (20 << 20))  # 20 MiB of newlines deflate ~1000:1
    notes: list[str] = []
    with archive.opened(dest, notes) as root:
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert size <= 500 * dest.stat().st_size + (1 << 20)  # stopped within one chunk of the cap
    assert any("compression ratio above 500:1" in n for n in notes)


def test_plain_logs_are_not_archives(tmp_path):
    import gzip

    gz = tmp_path / "rank0.log.gz"
    gz.write_bytes(gzip.compress(_files()[0].read_bytes()))
    assert archive.archive_kind(gz) is None
    assert archive.archive_kind(_files()[0]) is None
    assert archive.archive_kind(LOGS) is None
    with archive.opened(LOGS) as p:
        assert p == LOGS


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_output_over_the_input_archive_is_refused(tmp_path, private_tmp, monkeypatch, capsys, kind):
    """``-o`` naming the archive itself (or a folder holding it) is refused with exit 2, as for a folder or a
    plain file: the check is against the archive the user named, not its temporary unpacked copy. The
    archive keeps its bytes. Named with a graph's or a plot's extension, it is refused by those too."""
    arc = _zip(tmp_path / "job.zip") if kind == "zip" else _tar(tmp_path / "job.tar.gz", "w:gz")
    original = arc.read_bytes()
    calls = [
        ["timeline", arc, "-o", arc],
        ["timeline", arc, "-o", arc, "--streaming"],
        ["timeline", arc, "-o", arc, "--format", "csv"],
        ["timeline", arc, "-o", tmp_path, "--partition-by", "rank"],
        ["redact", arc, "-o", arc],
        ["redact", arc, "-o", tmp_path],
    ]
    for ext, command in ((".dot", "graph"), (".html", "plot")):
        named = tmp_path / f"job-{kind}{ext}"
        named.write_bytes(original)
        calls.append([command, named, "-o", named])
    for args in calls:
        before = Path(args[1]).read_bytes()
        code, _, err = run_cli([*args, "-q"], monkeypatch, capsys)
        assert code == 2, (args, err)
        assert "error:" in err and ("the input itself" in err or "holds the input" in err), (args, err)
        assert Path(args[1]).read_bytes() == before == original, args
    assert list(private_tmp.iterdir()) == []
    # an output elsewhere is still written
    code, _, err = run_cli(["timeline", arc, "-o", tmp_path / "t.parquet", "-q"], monkeypatch, capsys)
    assert code == 0, err
    assert (tmp_path / "t.parquet").read_bytes()[:4] == b"PAR1"


def _tar_of(dest: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(dest, "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return dest


def _folders(root: Path) -> int:
    import os

    return sum(len(dirs) for _, dirs, _ in os.walk(root))


def test_deep_member_names_are_skipped_with_one_warning(tmp_path, private_tmp):
    """A 2 KB tar.gz of 100 empty members, each under its own 900 folders, created 90,000 folders without a
    word (and a name past ~1,000 levels failed on recursion): a member deeper than MAX_DEPTH folders is
    skipped, one warning counts them all, the folders are made one by one, the rest is read."""
    boom = b"[rank0]: RuntimeError: boom\n"
    deep = [(f"{i}/" + "/".join(["d"] * 900) + "/rank0.log", b"") for i in range(100)]
    edge = [("/".join(["e"] * archive.MAX_DEPTH) + "/rank1.log", boom)]  # exactly MAX_DEPTH folders: kept
    over = [("/".join(["f"] * 1500) + "/rank2.log", boom)]  # deeper than the recursion limit
    arc = _tar_of(tmp_path / "dirbomb.tar.gz", [*deep, *edge, *over, ("rank0.log", boom)])
    assert arc.stat().st_size < 10_000
    notes: list[str] = []
    with archive.opened(arc, notes) as root:
        files = sorted(p.name for p in root.rglob("*") if p.is_file())
        assert _folders(root) == 1 + archive.MAX_DEPTH  # the archive's own folder and the edge member's
    assert files == ["rank0.log", "rank1.log"]
    deep_notes = [n for n in notes if f"deeper than {archive.MAX_DEPTH} folders" in n]
    assert len(deep_notes) == 1 and deep_notes[0].endswith("and 100 more members as deep"), notes
    assert not any("RecursionError" in n for n in notes), notes
    assert list(private_tmp.iterdir()) == []
    got = diagnose_path(arc).to_dict()
    assert got["failure_kind"] == "rank_crash" and 0 in got["initiating_ranks"], got


def test_empty_members_and_folders_count_against_the_ratio(tmp_path, private_tmp):
    """Empty members in folders of their own cost no bytes, so 20,000 of them passed the ratio cap: each
    entry and each folder created now counts, and unpacking stops with the ratio warning."""
    arc = _tar_of(tmp_path / "empties.tar.gz", [(f"a/{i}/rank0.log", b"") for i in range(20_000)])
    notes: list[str] = []
    with archive.opened(arc, notes) as root:
        made = _folders(root)
    budget = 500 * arc.stat().st_size
    assert made * archive.FOLDER_COST <= budget + archive.FOLDER_COST + archive.ENTRY_COST, (made, budget)
    assert made < 20_000
    assert any("compression ratio above 500:1" in n for n in notes), notes


def test_folders_created_are_capped(tmp_path, private_tmp, monkeypatch):
    monkeypatch.setattr(archive, "MAX_FOLDERS", 50)
    arc = _tar_of(tmp_path / "many.tar.gz", [(f"n{i}/rank{i}.log", b"[rank0]: step 1\n") for i in range(100)])
    notes: list[str] = []
    with archive.opened(arc, notes) as root:
        assert _folders(root) == 1 + 50  # the archive's own folder and the 50 its members needed
        assert len(list(root.rglob("*.log"))) == 50
    assert f"{arc.name}: stopped unpacking after creating 50 folders" in notes


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_while_reading_endless_stdin_removes_the_copy(tmp_path, sig):
    """``kubectl logs -f … | rankscope diagnose -`` ended by ``timeout``, SLURM or Ctrl-C: standard input is read
    to its end (its tail is kept), so the run ends by a signal, and SIGTERM killed the process without
    removing the copy of the stream in the temporary folder. Each of the three signals now ends the command
    with 128 + its number and the copy removed."""
    import os
    import signal
    import time

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "RANKSCOPE_MAX_FILE_MB": "1"}
    p = subprocess.Popen(
        [sys.executable, "-m", "correlator", "diagnose", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert p.stdin is not None
    line = b"[rank0]: step 1 loss 0.5 some padding text here\n" * 1000
    try:
        deadline = time.monotonic() + 60
        copies: list[Path] = []
        while time.monotonic() < deadline:  # the stream flows (past the cap) and is copied
            p.stdin.write(line)
            p.stdin.flush()
            copies = list(tmp.glob("rankscope-input-*/stdin"))
            if copies and copies[0].stat().st_size >= 1 << 20:
                break
        assert copies, "standard input was never copied"
        p.send_signal(getattr(signal, sig))
        _, err = p.communicate(timeout=60)  # (closes stdin too: the run must end by the signal, not EOF)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + getattr(signal, sig), err
    assert b"aborted" in err and b"Traceback" not in err, err
    assert list(tmp.iterdir()) == []
