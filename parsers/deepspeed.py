"""DeepSpeed launcher output (``deepspeed/launcher/{runner,launch,multinode_runner}.py``, 0.9 – 0.16;
docs/log-formats.md §7.2). The per-node ``launch.py`` states the host -> global-rank map
(``global_rank_mapping=…``), the pid of each local rank it spawned, which local rank died with what return
code, and that it killed the other subprocesses afterwards. Lines arrive behind pdsh's ``<host>: `` prefix.
"""

from __future__ import annotations

import ast
import re

from parsers.rules import Rule

SRC = "DeepSpeed launcher launch.py (0.9 – 0.19.8)"

RULES: list[Rule] = [
    Rule(
        "ds_rank_mapping",
        "rendezvous",
        "elastic",
        "global_rank_mapping=",
        None,
        "info",
        SRC,
        "[2024-03-05 11:02:15,000] [INFO] [launch.py:162:main] global_rank_mapping=defaultdict(<class 'list'>, "
        "{'node-a': [0, 1], 'node-b': [2, 3]})",
    ),
    Rule(
        "ds_spawned",
        "log",
        "elastic",
        "spawned with command",
        r"process (?P<pid>\d+) spawned with command: .*--local_rank=(?P<local_rank_stated>\d+)",
        "info",
        SRC,
        "[2024-11-29 22:41:07,512] [INFO] [launch.py:256:main] process 52011 spawned with command: "
        "['/usr/bin/python', '-u', 'train.py', '--local_rank=3']",
    ),
    # The command in this line is NOT the failed worker's: sigkill_handler formats ``{cmd}``, the loop variable
    # left over from spawning, i.e. always the LAST local rank's command (launch.py, 0.3 – 0.19.8; seen in
    # fixtures/cases/cap-27: local rank 2 raised, the line says '--local_rank=3'). Only the return code is the
    # failed worker's, so the line states no rank.
    Rule(
        "ds_exits",
        "worker_failed",
        "elastic",
        "exits with return code",
        r"exits with return code = (?P<exit_code>-?\d+)",
        "error",
        SRC,
        "[2026-12-01 19:08:33,669] [ERROR] [launch.py:259:sigkill_handler] ['/opt/venv/bin/python3', '-u', 'train.py', "
        "'--local_rank=3', '--fault', 'exception', '--fault-rank', '2', '--fault-step', '3'] exits with return code = 1",
    ),
    Rule(
        "ds_killing",
        "worker_signalled",
        "elastic",
        "Killing subprocess",
        r"Killing subprocess (?P<pid>\d+)",
        "warning",
        SRC,
        "[2024-03-05 12:17:32,314] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 41237",
        (("signal", "SIGKILL"),),
    ),
]

_MAPPING = re.compile(r"global_rank_mapping=defaultdict\(<class 'list'>, (\{.*\})\)")


def rank_mapping(message: str) -> dict[str, list[int]]:
    """``global_rank_mapping=defaultdict(<class 'list'>, {'node-a': [0, 1]})`` -> ``{'node-a': [0, 1]}``.

    Uses ``ast.literal_eval`` (literals only, nothing executed); a malformed line gives ``{}``.
    """
    m = _MAPPING.search(message)
    if not m:
        return {}
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return {}
    if not isinstance(value, dict):
        return {}
    out: dict[str, list[int]] = {}
    for k, v in value.items():
        if isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v):
            out[str(k)] = list(v)
    return out
