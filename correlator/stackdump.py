"""``rankscope watch --on-stall dump-stacks``: collect every local rank's stack when the job stalls (issue #33).

When the watcher raises a ``stalled`` or ``straggler`` alert, :func:`dump_stacks` runs ``py-spy dump --pid P``
for each worker of the job it can find on this machine and writes the dumps beside the logs, in
``DIR/rankscope-stacks-<UTC time>/rank<R>.txt`` (named by rank, so the next pass places them), with a
``watch.log`` line stamped at the moment of the dumps (it tells the diagnosis how long the ranks had been quiet
when their stacks were taken). The next pass reads them like any stack dump (``parsers.stack``) and the verdict
uses them (``correlator.stacks``).

Workers are found (:func:`worker_pids`) from the processes of this machine whose environment says they belong to
the watched job: torchrun sets ``TORCHELASTIC_ERROR_FILE`` to ``<log-dir>/<run>/attempt_N/<local_rank>/error.json``
for each worker (``torch/distributed/elastic/agent/server/local_elastic_agent.py``), and ``RANK`` is the
worker's global rank; a worker whose stdout or stderr is a file inside DIR (``srun --output``, a shell
redirect) counts too. Reading another user's ``/proc/<pid>/environ`` and ptrace need the same user or root.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

#: Seconds one ``py-spy dump`` may take (``--native`` on a large process takes several).
DUMP_TIMEOUT_S = 60.0


def _environ(pid: int, proc: str = "/proc") -> dict[str, str]:
    try:
        raw = Path(f"{proc}/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for kv in raw.split(b"\0"):
        k, sep, v = kv.partition(b"=")
        if sep:
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def worker_pids(directory: str | os.PathLike[str], proc: str = "/proc") -> dict[int, int]:
    """Global rank -> pid of this machine's workers of the job whose logs are in ``directory``."""
    root = os.path.realpath(directory)
    out: dict[int, int] = {}
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return out
    for e in entries:
        pid = int(e)
        env = _environ(pid, proc)
        rank = env.get("RANK")
        if rank is None or not rank.isdigit():
            continue
        mine = _inside(os.path.realpath(env.get("TORCHELASTIC_ERROR_FILE", "/nonexistent")), root)
        if not mine:
            for fd in ("1", "2"):
                try:
                    mine = mine or _inside(os.path.realpath(os.readlink(f"{proc}/{pid}/fd/{fd}")), root)
                except OSError:
                    pass
        if mine:
            out.setdefault(int(rank), pid)
    return out


def dump_stacks(
    directory: str | os.PathLike[str],
    pids: dict[int, int],
    py_spy: str = "py-spy",
    why: str = "",
    now: dt.datetime | None = None,
) -> tuple[Path | None, list[int], list[str]]:
    """Run ``py-spy dump`` for each (rank, pid) and write the dumps under ``directory``. Returns (the folder,
    the ranks dumped, one warning per failure). Each file is written under a dot name and renamed, so a reader
    never sees half a dump."""
    if not pids:
        return None, [], ["--on-stall dump-stacks: no worker process of this job found on this machine"]
    now = now or dt.datetime.now(dt.UTC)
    folder = Path(directory) / f"rankscope-stacks-{now:%Y%m%dT%H%M%SZ}"
    folder.mkdir(parents=True, exist_ok=True)
    done: list[int] = []
    problems: list[str] = []
    for rank, pid in sorted(pids.items()):
        try:
            res = subprocess.run(
                [py_spy, "dump", "--pid", str(pid)],
                check=False,
                capture_output=True,
                text=True,
                timeout=DUMP_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            problems.append(f"--on-stall dump-stacks: py-spy dump --pid {pid} (rank {rank}) failed: {e}")
            continue
        if res.returncode != 0 or not res.stdout.startswith("Process "):
            problems.append(
                f"--on-stall dump-stacks: py-spy dump --pid {pid} (rank {rank}) exited {res.returncode}: "
                f"{(res.stderr or res.stdout).strip()[:200]}"
            )
            continue
        tmp = folder / f".rank{rank}.txt.part"
        tmp.write_text(res.stdout)
        os.replace(tmp, folder / f"rank{rank}.txt")
        done.append(rank)
    stamp = f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d}"
    line = f"{stamp} INFO rankscope watch: py-spy dump of ranks {', '.join(map(str, done)) or 'none'}{why}\n"
    (folder / "watch.log").write_text(line)
    return folder, done, problems
