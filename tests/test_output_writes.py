"""Issue #35 item 1: a write that fails never reports success, and an output that is a device is written in
place, never replaced by a regular file (as root, the old temporary-then-rename path replaced ``/dev/full``
itself with a file and exited 0)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import CASES, run_cli

CASE = CASES / "public-02-oom-rank2-multinode-timeouts" / "logs"


def _full_device(tmp_path: Path, name: str) -> Path:
    """A private copy of ``/dev/full`` (char device 1:7: every write fails with ENOSPC) in ``tmp_path``."""
    dev = tmp_path / name
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        with open(dev, "wb") as f:  # a `nodev` mount gives EACCES/EPERM on open: no device test here
            f.write(b"x")
    except PermissionError:
        pytest.skip("cannot make or open a device node here (not root, or a nodev mount)")
    except OSError as e:
        if e.errno != 28:
            pytest.skip(f"no device node here ({e})")
    return dev


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["timeline", CASE, "--format", "csv"], "full.csv"),
        (["timeline", CASE, "--format", "parquet"], "full.parquet"),
        (["timeline", CASE, "--format", "jsonl"], "full.jsonl"),
        (["timeline", CASE, "--format", "perfetto"], "full.json"),
        (["graph", CASE], "full.graphml"),
        (["plot", CASE], "full.html"),
    ],
)
def test_write_to_a_full_device_is_exit_2_and_keeps_the_device(tmp_path, monkeypatch, capsys, args, name):
    dev = _full_device(tmp_path, name)
    code, _out, err = run_cli([*args, "-o", dev, "-q"], monkeypatch, capsys)
    assert code == 2, err
    assert "No space left on device" in err and str(dev) in err
    assert stat.S_ISCHR(os.stat(dev).st_mode), "the device was replaced by a regular file"


def test_dash_output_is_standard_output(tmp_path):
    """``-o -`` writes the table to standard output (it used to create a file named ``-``)."""
    p = subprocess.run(
        [sys.executable, "-m", "correlator", "timeline", str(CASE), "--format", "csv", "-o", "-", "-q"],
        capture_output=True,
        check=False,
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "-").exists()
    got = pl.read_csv(p.stdout)
    from correlator.ingest import ingest

    assert got.height == ingest(CASE).table.height


def test_stdout_on_a_full_device_is_exit_2(tmp_path):
    dev = _full_device(tmp_path, "full")
    for args in (["diagnose", str(CASE)], ["diagnose", str(CASE), "-f", "json"], ["events", str(CASE)]):
        with open(dev, "wb") as sink:
            p = subprocess.run(
                [sys.executable, "-m", "correlator", *args, "-q"],
                stdout=sink,
                check=False,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
            )
        assert p.returncode == 2, (args, p.stderr)
        assert "No space left on device" in p.stderr
