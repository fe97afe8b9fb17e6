"""torchrun / torch.distributed.elastic agent output and ``error.json`` (docs/log-formats.md §5); the exit codes of
workers a launcher reports dead by signal name (:func:`signal_exit_codes`).

Agent lines come in three layouts: ``WARNING:torch.distributed.elastic.multiprocessing.api:<msg>``
(torch ≤ 2.0), ``[2024-04-10 16:02:56,193] torch.distributed.elastic…: [WARNING] <msg>`` (≈2.1 – 2.2),
and glog-like ``W0409 07:28:49.531000 9120 torch/distributed/elastic/multiprocessing/api.py:897] <msg>``
(2.3 – 2.13, stripped by :data:`parsers.c10d.GLOG`). The ChildFailedError summary is grouped into one
record per ``[i]:`` block (``i`` is an index, not a rank); the block after ``Root Cause (first observed
failure):`` is only weak evidence — torchrun picks it by whole-second time on one host.
"""

from __future__ import annotations

import json
import re
import signal

import polars as pl

from parsers.rules import Prefix, Rule, ascii_classes

OLD_PYLOG = Prefix(
    "elastic_old",
    r"^(?P<sev_word>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<logger>torch\.distributed[\w.]*):(?P<rest>.*)$",
    layer="elastic",
    source="torch.distributed.elastic, torch ≤ 2.0 (logging.basicConfig default)",
    example="ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 812917) of "
    "binary: /home/user/anaconda3/envs/ColossalAI-Chat/bin/python",
)
TORCH_LOGGING_21 = Prefix(
    "torch_logging_21",
    r"^\[(?P<pyts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (?:\[[^\]]*\] )?(?P<logger>torch[\w.]*): \[(?P<sev_word>\w+)\] "
    r"(?P<rest>.*)$",
    layer="elastic",
    source="torch._logging TorchLogsFormatter, torch ≈2.1 – 2.2",
    example="[2024-01-16 22:29:36,221] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 41237 "
    "closing signal SIGTERM",
)

SRC = "torch.distributed.elastic {}"
_ENTRY = ascii_classes(
    r"^\[(?P<entry_idx>\d+)\]:\s*\n\s+time\s*: (?P<cf_time>\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d)\s*\n\s+host\s*: (?P<host_fqdn>\S+)"
    r"\s*\n\s+rank\s*: (?P<rank_stated>-?\d+) \(local_rank: (?P<local_rank_stated>-?\d+)\)\s*\n\s+exitcode\s*: "
    r"(?P<exit_code>-?\d+) \(pid: (?P<pid>\d+)\)(?:\s*\((?P<signal>SIG\w+)\))?"
)

RULES: list[Rule] = [
    Rule(
        "worker_failed",
        "worker_failed",
        "elastic",
        "failed (exitcode:",
        r"failed \(exitcode: (?P<exit_code>-?\d+)\)(?:(?: for binary located at \S+ with)? local_rank: "
        r"(?P<local_rank_stated>\d+)(?: \((?:pid|process ID): (?P<pid>\d+)\))?)?",
        "error",
        SRC.format(
            "multiprocessing/api.py, torch 1.9 – 2.13; a vendor-patched agent's ``failed (exitcode: -9) for binary "
            "located at <python> with local_rank: 0 (process ID: 71)`` (MemoryVLA#20)"
        ),
        "E1129 23:08:36.815000 13396 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
        "local_rank: 2 (pid: 13401) of binary: /opt/venv/bin/python3",
    ),
    Rule(
        "sending_signal",
        "worker_signalled",
        "elastic",
        "Sending process ",
        r"Sending process (?P<pid>\d+) (?:the )?closing(?: signal (?P<signal>SIG\w+))?",
        "warning",
        SRC.format(
            "multiprocessing/api.py, torch 1.9 – 2.13; ``Sending process 73 the closing signal SIGTERM`` of a "
            "vendor-patched agent (MemoryVLA#20); ``Sending process 53038 closing`` cut in a paste (alpaca#183)"
        ),
        "W1129 23:08:36.614000 13396 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 13399 "
        "closing signal SIGTERM",
    ),
    Rule(
        "closing_via_signal",
        "worker_signalled",
        "elastic",
        "via signal",
        r"Closing process (?P<pid>\d+) via signal (?P<signal>SIG\w+)",
        "warning",
        SRC.format("function workers"),
        "W0409 07:28:49.531000 9120 torch/distributed/elastic/multiprocessing/api.py:897] Closing process 41237 via "
        "signal SIGTERM",
    ),
    Rule(
        "forcefully_exiting",
        "worker_signalled",
        "elastic",
        "forcefully exiting via",
        r"Unable to shutdown process (?P<pid>\d+) via .*forcefully exiting via (?:Signals\.)?(?P<signal>SIG\w+)",
        "warning",
        SRC.format("multiprocessing/api.py"),
        "W0409 07:28:49.531000 9120 torch/distributed/elastic/multiprocessing/api.py:900] Unable to shutdown process "
        "41237 via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL",
    ),
    Rule(
        "death_signal",
        "job_cancelled",
        "elastic",
        "death signal, shutting down workers",
        r"Received (?P<signal>\S+) death signal",
        "warning",
        SRC.format("agent/server/api.py"),
        "W0409 07:28:49.531000 9120 torch/distributed/elastic/agent/server/api.py:704] Received 15 death signal, "
        "shutting down workers",
    ),
    Rule(
        "restart",
        "restart",
        "elastic",
        "attempts left; will restart worker group",
        r"Worker group (?P<group_state>FAILED|UNHEALTHY)\. (?P<attempts_left>\d+)/(?P<max_restarts>\d+) attempts left",
        "warning",
        SRC.format("agent/server/api.py"),
        "W1129 23:12:01.120000 16000 torch/distributed/elastic/agent/server/api.py:725] [default] Worker group FAILED. "
        "1/1 attempts left; will restart worker group",
    ),
    Rule(
        "rendezvous_error",
        "launcher_error",
        "elastic",
        "Rendezvous",
        r"(?P<exc_type>Rendezvous\w*Error)",
        "error",
        SRC.format("rendezvous"),
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
    ),
    Rule(
        "rendezvous",
        "rendezvous",
        "elastic",
        "Rendezvous",
        None,
        "info",
        SRC.format("agent/server/api.py"),
        "I1129 23:12:01.120000 16000 torch/distributed/elastic/agent/server/api.py:525] [default] Rendezvous complete "
        "for workers. Result:",
    ),
    Rule(
        "summary_border",
        "log",
        "elastic",
        "==========",
        r"^={20,}\s*$",
        "error",
        SRC.format("ChildFailedError summary"),
        "============================================================",
    ),
    Rule(
        "summary_section",
        "log",
        "elastic",
        "----------",
        r"^-{20,}\s*$",
        "error",
        SRC.format("ChildFailedError summary"),
        "------------------------------------------------------------",
    ),
    Rule(
        "summary_title",
        "log",
        "elastic",
        " FAILED",
        r"^\S+ FAILED\s*$",
        "error",
        SRC.format("ChildFailedError summary"),
        "train.py FAILED",
    ),
    Rule(
        "summary_headers",
        "log",
        "elastic",
        "ailure",
        r"^(?:Failures:|Root Cause \(first observed failure\):|\s*<NO_OTHER_FAILURES>)\s*$",
        "error",
        SRC.format("ChildFailedError summary"),
        "Root Cause (first observed failure):",
    ),
    Rule(
        "child_failed",
        "launcher_error",
        "elastic",
        "ChildFailedError",
        None,
        "error",
        SRC.format("launcher/api.py"),
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    ),
]

#: A traceback cut before its exception line whose frames are torchrun's own (``torch/distributed/run.py`` ->
#: ``launch_agent``): the agent's ChildFailedError re-raise, pasted without its last line, never a worker's
#: exception. Run on the record, before :data:`parsers.python.CUT_TRACEBACK`.
AGENT_TRACEBACK = Rule(
    "agent_cut_traceback",
    "launcher_error",
    "elastic",
    "in launch_agent",
    r"^Traceback \(most recent call last\):\n(?s:.*)torch/distributed/(?:run|launcher/api)\.py\", line \d+, in "
    r"launch_agent",
    "error",
    SRC.format(
        "launcher/api.py launch_agent, torch 1.10 – 2.13 (ms-swift#6301 paste, cut before ChildFailedError)"
    ),
    "Traceback (most recent call last):\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/run.py", line 927, in run\n'
    "    elastic_launch(\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/launcher/api.py", line 156, in __call__\n'
    "    return launch_agent(self._config, self._entrypoint, list(args))\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/launcher/api.py", line 293, in launch_agent',
)

#: Rules run on the whole multi-line record (the ChildFailedError ``[i]:`` blocks).
RECORD_RULES: list[Rule] = [
    Rule(
        "failure_entry",
        "failure_entry",
        "elastic",
        "exitcode",
        _ENTRY,
        "error",
        SRC.format("errors/__init__.py ChildFailedError summary, torch 1.9 – 2.13"),
        "[1]:\n  time      : 2026-11-29_23:08:36\n  host      : localhost\n  rank      : 1 (local_rank: 1)\n"
        "  exitcode  : -15 (pid: 13400)  (SIGTERM)\n  error_file: <N/A>\n  traceback : Signal 15 (SIGTERM) received by PID 13400",
    ),
    Rule(
        # An entry of the summary cut before its rank line (a paste that lost the middle of an entry): its
        # traceback field alone still says which process died of which signal; identity maps the pid to the
        # rank by the pids of the entries around it (correlator.identity._pid_order).
        "failure_entry_signal",
        "worker_failed",
        "elastic",
        "received by PID",
        r"^\s*(?:\[\d+\]:\s*\n\s*)?traceback\s*: Signal \d+ \((?P<signal>SIG[A-Z]+)\) received by PID (?P<pid>\d+)",
        "error",
        SRC.format(
            "errors/__init__.py ChildFailedError summary, an entry's traceback field 'Signal {n} ({name}) received by "
            "PID {pid}' (torch 1.9 - 2.15; real: cap-t2150-early-exit-plain-r3 'Signal 15 (SIGTERM) received by PID "
            "11751'; a cut entry 'traceback : Signal 7 (SIGBUS) received by PID 16614' from a public paste)"
        ),
        "  traceback : Signal 7 (SIGBUS) received by PID 16614",
    ),
]


def mark_root_cause(df: pl.DataFrame) -> pl.DataFrame:
    """A failure entry right after ``Root Cause (first observed failure):`` becomes ``root_cause_entry``;
    an entry's message becomes its fields on one line (``[0]: time … | rank : 2 (local_rank: 2) | exitcode …``)."""
    if not (df["kind"] == "failure_entry").any():  # no entry: the record split below is skipped
        return df
    prev = pl.col("message").shift(1).over("path").fill_null("")
    entry = pl.col("kind") == "failure_entry"
    one_line = (
        pl.col("record")
        .str.split("\n")
        .list.slice(0, 7)
        .list.eval(pl.element().str.strip_chars())
        .list.join(" | ")
        .str.replace_all(r"\s{2,}", " ")
    )
    return df.with_columns(
        pl.when(entry & prev.str.starts_with("Root Cause"))
        .then(pl.lit("root_cause_entry"))
        .otherwise(pl.col("kind"))
        .alias("kind"),
        pl.when(entry).then(one_line).otherwise(pl.col("message")).alias("message"),
    )


def parse_error_json(text: str) -> dict[str, object] | None:
    """Parse a torchelastic ``error.json`` (errors/error_handler.py, torch 1.9 – 2.13).

    Returns ``{"message", "exc_type", "epoch_s", "exit_code"}`` (values may be None), or None when the
    text is not JSON of a known shape. Never unpickles or evaluates anything.
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    msg = doc.get("message")
    ts = doc.get("timestamp")
    code = None
    if isinstance(msg, dict):
        code = msg.get("errorCode")
        extra = msg.get("extraInfo") or {}
        ts = extra.get("timestamp", ts) if isinstance(extra, dict) else ts
        msg = msg.get("message")
    if not isinstance(msg, str):
        return None
    exc_type = msg.split(":", 1)[0] if ":" in msg and " " not in msg.split(":", 1)[0] else None
    try:
        epoch = int(float(ts)) if ts is not None else None
    except (TypeError, ValueError):
        epoch = None
    return {
        "message": msg,
        "exc_type": exc_type,
        "epoch_s": epoch,
        "exit_code": code if isinstance(code, int) else None,
    }


#: The start of an ``error.json`` up to the opening quote of its message (``{"message": {"message": "`` or the
#: older ``{"message": "``).
_MSG_START = re.compile(r'\A\s*\{\s*"message"\s*:\s*(?:\{\s*"message"\s*:\s*)?"')
#: The body of a JSON string (up to its closing quote or the end of the text), unrolled: linear time.
_STR_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
#: An escape cut short at the end of a string head (``\``, ``\u00``, the first half of a surrogate pair).
_CUT_ESCAPE = re.compile(r"(?:\\u[dD][89abAB][0-9a-fA-F]{2})?(?:\\u[0-9a-fA-F]{0,3})?\Z")
_TAIL_TS = re.compile(r'"timestamp"\s*:\s*"?(-?\d{1,20})(?:\.\d{0,20})?"?')
_TAIL_CODE = re.compile(r'"errorCode"\s*:\s*(-?\d{1,20})\b')


def parse_error_json_head(head: str, tail: str = "") -> dict[str, object] | None:
    """The fields of a torchelastic ``error.json`` that was cut: ``head`` is its start (decoded text, the
    message cut anywhere), ``tail`` its last bytes decoded (torchelastic writes ``extraInfo.timestamp`` and
    the agent's ``errorCode`` after the message, so they are looked for there).

    Returns the shape of :func:`parse_error_json` (``message`` is the head of the message, as much as
    ``head`` holds), or None when ``head`` does not start like an ``error.json``. Linear in the text.
    """
    m = _MSG_START.match(head)
    if m is None:
        return None
    body = _STR_BODY.match(head, m.end())
    raw = body.group(0) if body else ""
    raw = raw[:-12] + _CUT_ESCAPE.sub("", raw[-12:])
    try:
        msg = json.loads('"' + raw + '"')
    except ValueError:  # a bad escape: the text as written
        msg = raw
    if not isinstance(msg, str):
        return None
    exc_type = msg.split(":", 1)[0] if ":" in msg and " " not in msg.split(":", 1)[0] else None
    ts = _TAIL_TS.findall(tail)
    code = _TAIL_CODE.findall(tail)
    return {
        "message": msg,
        "exc_type": exc_type,
        "epoch_s": int(ts[-1]) if ts else None,
        "exit_code": int(code[-1]) if code else None,
    }


#: Signal name -> the exit code Python's ``subprocess`` / torch report for a process that signal killed (-N).
_SIGNAL_EXIT = {
    sig.name: -sig.value for sig in signal.Signals if sig.name.startswith("SIG") and "_" not in sig.name
}


def signal_exit_codes(df: pl.DataFrame) -> pl.DataFrame:
    """A launcher that reports a worker's death by signal NAME (mp.spawn ``terminated with signal SIGKILL``,
    mpirun ``exited on signal 9 (Killed)``) gives ``worker_failed`` rows a signal but no exit code; they get the
    exit code Python reports for that death (``-9`` for SIGKILL: mp.spawn's own ``ProcessExitedException.exit_code``,
    torchrun's ``exitcode: -9``), so they read like torchrun's failure lines."""
    fill = (
        (pl.col("kind") == "worker_failed") & pl.col("exit_code").is_null() & pl.col("signal").is_not_null()
    )
    code = pl.col("signal").replace_strict(_SIGNAL_EXIT, default=None, return_dtype=pl.Int32)
    return df.with_columns(pl.when(fill).then(code).otherwise(pl.col("exit_code")).alias("exit_code"))
