"""Generators of hostile log folders (issue 16), shared by the defect tests and the bounded-time suite.

Each builder writes one folder under ``root``: the same small failing 2-rank job (rank 1 raises, rank 0's
watchdog times out waiting for it) plus one hostile thing. It returns the number of physical lines a
reader must account for (``lines_read``) when that number is known from the bytes written here, else
None (a bomb stopped at a cap: only what was read is counted). Builders that need root, a FIFO or a
device are skipped where the platform cannot make them.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
from collections.abc import Callable
from pathlib import Path

RANK0 = (
    "[rank0]:[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600037 "
    "milliseconds before timing out.\n"
)
RANK1 = (
    '[rank1]: Traceback (most recent call last):\n[rank1]:   File "t.py", line 1, in <module>\n'
    "[rank1]: RuntimeError: boom\n"
)
BASE_LINES = 4


def nlines(data: bytes) -> int:
    """Physical lines in ``data`` (a last line without newline counts)."""
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def write(path: Path, data: bytes | str) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    b = data.encode() if isinstance(data, str) else data
    path.write_bytes(b)
    return nlines(b)


def base(root: Path) -> int:
    write(root / "rank0.log", RANK0)
    write(root / "rank1.log", RANK1)
    return BASE_LINES


def _text(n: int, rank: int = 1) -> bytes:
    return "".join(f"[rank{rank}]: step {i} loss=0.{i:04d}\n" for i in range(n)).encode()


# ---------------------------------------------------------------------------------------- compression


def gz_damaged_mid(root: Path) -> int | None:
    base(root)
    text = _text(20000, 0)
    gz = bytearray(gzip.compress(text))
    mid = len(gz) // 2
    gz[mid : mid + 64] = b"\xff" * 64
    write(root / "extra.rank0.log.gz", bytes(gz))
    return None  # how much decompresses before the damage is zlib's business; the balance is checked


def gz_bomb_newlines(root: Path) -> int | None:
    base(root)
    write(root / "bomb.log.gz", gzip.compress(b"\n" * (24 << 20), compresslevel=9))
    return None


def bz2_bomb(root: Path) -> int | None:
    base(root)
    write(root / "bomb.log.bz2", bz2.compress(b"A" * (24 << 20)))
    return None


def xz_bomb(root: Path) -> int | None:
    base(root)
    write(root / "bomb.log.xz", lzma.compress(b"\x00" * (24 << 20)))
    return None


def zstd_text(root: Path) -> int | None:
    import pyarrow as pa

    n = base(root)
    data = _text(50, 0)
    buf = pa.BufferOutputStream()
    with pa.CompressedOutputStream(buf, "zstd") as f:
        f.write(data)
    write(root / "more.rank0.log.zst", buf.getvalue().to_pybytes())
    return n + nlines(data)


def compressed_without_suffix(root: Path) -> int:
    n = base(root)
    data = _text(30, 0)
    write(root / "rotated.rank0.log.1", gzip.compress(data))
    write(root / "rotated.rank1.log.1", bz2.compress(_text(5, 1)))
    return n + nlines(data) + 5


def gz_concat_then_garbage(root: Path) -> int | None:
    n = base(root)
    write(
        root / "cat.rank0.log.gz",
        gzip.compress(b"[rank0]: one\n") + gzip.compress(b"[rank0]: two\n") + b"garbage!!",
    )
    return n + 2


# -------------------------------------------------------------------------------------------- shapes


def long_line(root: Path) -> int:
    n = base(root)
    return n + write(root / "wide.log", "[rank0]: " + "ab." * 700_000 + "\n[rank0]: after\n")


def long_token_line(root: Path) -> int:
    n = base(root)
    return n + write(
        root / "tokens.log", "TOKEN" * 60_000 + "\n" + "a." * 100_000 + "\n" + "x@" * 50_000 + "\n"
    )


def cr_only(root: Path) -> int:
    n = base(root)
    write(root / "mac.rank1.log", "[rank1]: one\r[rank1]: two\r[rank1]: three\r")
    return n + 3


def utf16_bom(root: Path) -> int:
    n = base(root)
    write(root / "win.rank1.log", ("[rank1]: from windows\n[rank1]: second\n").encode("utf-16"))
    return n + 2


def utf16_no_bom(root: Path) -> int:
    n = base(root)
    write(root / "le.rank1.log", "[rank1]: little endian\n[rank1]: again\n".encode("utf-16-le"))
    write(root / "be.rank1.log", "[rank1]: big endian\n".encode("utf-16-be"))
    return n + 3


def nul_head(root: Path) -> int:
    n = base(root)
    return n + write(
        root / "holed.rank0.log", b"\x00" * 200_000 + b"[rank0]: after the hole\n[rank0]: more\n"
    )


def sparse_hole(root: Path) -> int:
    n = base(root)
    p = root / "sparse.rank0.log"
    with open(p, "wb") as f:
        f.write(b"[rank0]: before\n")
        f.seek(8 << 20)
        f.write(b"[rank0]: after\n")
    return n + nlines(p.read_bytes())


def binary_region(root: Path) -> int:
    n = base(root)
    blob = bytes(range(1, 32)) * 4000 + b"\n"
    return n + write(
        root / "mixed.rank0.log", b"[rank0]: text before\n" * 10 + blob + b"[rank0]: text after\n" * 10
    )


def terminal_escapes(root: Path) -> int:
    n = base(root)
    data = (
        "[rank1]: \x1b]0;pwned title\x07 osc\n[rank1]: \x1b]52;c;ZXZpbA==\x07 clipboard\n"
        "[rank1]: \x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\ \x9b31m c1 csi \x07 bell\n"
    )
    return n + write(root / "esc.log", data)


def evil_file_names(root: Path) -> int:
    n = base(root)
    n += write(root / "rank1\nfake: warning.log", "[rank1]: newline in the name\n")
    n += write(root / "\x1b]0;title\x07rank1.log", "[rank1]: escape in the name\n")
    bad = os.fsencode(str(root)) + b"/caf\xe9-rank1.log"
    with open(bad, "wb") as f:
        f.write(b"[rank1]: latin-1 name\n")
    return n + 1


def huge_numbers(root: Path) -> int:
    n = base(root)
    n += write(root / "rank99999999999.log", "[rank1]: a rank past int32 in the file name\n")
    n += write(
        root / "stray.log",
        "[rank99999]: stray line\n"
        "node-a:1:2 [0] NCCL INFO comm 0x5555 rank 3 nranks 100000 cudaDev 0 busId 1000 - Init COMPLETE\n"
        "[rank1]:[E1129 23:08:36.778382438 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=99999999999999999999999, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=99999999999999999999999) ran for 99999999999999999999 milliseconds before timing out.\n"
        "world_size=0 rank=-5 step=-1\nworld_size=1000000 rank=999999\n",
    )
    return n


def out_of_range_times(root: Path) -> int:
    n = base(root)
    n += write(
        root / "times.rank0.log",
        "[rank0]:[E0101 00:00:00.000000000 ProcessGroupNCCL.cpp:1 ] 1970\n"
        "1970-01-01 00:00:00,000 INFO rank=0 epoch\n"
        "2100-12-31 23:59:59,999 INFO rank=0 future\n"
        "36812-02-20 00:00:00,000 INFO rank=0 far future\n"
        "9999-99-99 99:99:99,999 INFO rank=0 impossible\n",
    )
    for i, stamp in enumerate((99999999999999, 1_099_511_627_776 * 1000, -5, 0)):
        n += write(
            root / "run" / "attempt_0" / str(i) / "error.json",
            json.dumps(
                {
                    "message": {
                        "message": "RuntimeError: x",
                        "extraInfo": {"py_callstack": "", "timestamp": str(stamp)},
                    },
                    "errorCode": None,
                }
            ),
        )
    return n


def deepspeed_mapping(root: Path) -> int:
    n = base(root)
    big = "{" + ", ".join(f"'node-{i}': [{', '.join(str(j) for j in range(8))}]" for i in range(2000)) + "}"
    return n + write(
        root / "launcher.log",
        "[2024-03-05 11:02:15,000] [INFO] [launch.py:162:main] global_rank_mapping="
        f"defaultdict(<class 'list'>, {big})\n" + "[2024-03-05 11:02:15,000] [INFO] [launch.py:162:main] "
        "global_rank_mapping=defaultdict(<class 'list'>, " + "[" * 100_000 + ")\n",
    )


# -------------------------------------------------------------------------------------------- trees


def symlink_fanout(root: Path) -> int:
    n = base(root)
    for name in ("a", "b", "c"):
        os.symlink(".", root / name)
    os.symlink("rank0.log", root / "again.rank0.log")
    return n


def symlink_out(root: Path) -> int:
    n = base(root)
    outside = root.parent / f"{root.name}-outside"
    write(outside / "secret.log", "[rank0]: a file outside DIR\n")
    os.symlink(outside / "secret.log", root / "linked.log")
    os.symlink(outside, root / "linkdir")
    if os.path.exists("/proc/self/environ"):
        os.symlink("/proc/self/environ", root / "environ.log")
    os.symlink("/dev/zero", root / "zero.log")
    return n


def fifo(root: Path) -> int:
    n = base(root)
    os.mkfifo(root / "pipe.rank1.log")
    return n


def deep_and_long_path(root: Path) -> int:
    """A folder chain deeper than PATH_MAX (made with dir fds): it is skipped with a warning, the rest read."""
    n = base(root)
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(50):  # 50 x 101 bytes > 4096
            os.mkdir("d" * 100, dir_fd=fd)
            nxt = os.open("d" * 100, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        f = os.open("rank0.log", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(f, b"[rank0]: deep\n")
        os.close(f)
    finally:
        os.close(fd)
    return n  # the deep file cannot be opened by path: not read (a warning), never a refusal


def parquet_plot_in_dir(root: Path) -> int:
    n = base(root)
    write(root / "report.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20)
    return n + nlines(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20)


BUILDERS: dict[str, Callable[[Path], int | None]] = {
    f.__name__: f
    for f in (
        base,
        gz_damaged_mid,
        gz_bomb_newlines,
        bz2_bomb,
        xz_bomb,
        zstd_text,
        compressed_without_suffix,
        gz_concat_then_garbage,
        long_line,
        long_token_line,
        cr_only,
        utf16_bom,
        utf16_no_bom,
        nul_head,
        sparse_hole,
        binary_region,
        terminal_escapes,
        evil_file_names,
        huge_numbers,
        out_of_range_times,
        deepspeed_mapping,
        symlink_fanout,
        symlink_out,
        fifo,
        deep_and_long_path,
        parquet_plot_in_dir,
    )
}

#: Caps lowered for the suite so that bombs stop after a few MiB (the defaults are documented in README).
SUITE_ENV = {"RANKSCOPE_MAX_FILE_MB": "8", "RANKSCOPE_MAX_LINES": "100000"}
