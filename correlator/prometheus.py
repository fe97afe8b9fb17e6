"""The Prometheus text file of the live watcher (node exporter's textfile collector): ranks seen, their
progress, faults and alerts by kind, the verdict so far."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from correlator.tail import WatchState


def _label(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class PrometheusWriter(WatchState):
    """The Prometheus output of a :class:`correlator.watch.Watcher`."""

    def prometheus_text(self, job: str | None = None) -> str:
        """The node_exporter textfile-collector exposition of the current state (see ``write_prometheus``).

        Every sample carries ``training_job`` (``job``, default the watched folder's name; not ``job``, which
        Prometheus sets to the scrape job). Gauges: ranks seen, ranks behind, last progress age per rank,
        fault rows by kind, one sample per initiating rank, the failure flag; counter: alerts by type."""
        job = _label(job or self.root.resolve().name)
        now = self.clock()
        lines: list[str] = []

        def metric(name: str, help_: str, typ: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {typ}")
            for labels, value in samples:
                text = str(int(value)) if float(value).is_integer() else repr(float(value))
                lines.append(f'{name}{{training_job="{job}"{labels}}} {text}')

        metric(
            "rankscope_ranks_seen",
            "Ranks that have written at least one line.",
            "gauge",
            [("", len(self.ranks_seen()))],
        )
        metric(
            "rankscope_ranks_behind",
            "Ranks flagged as stragglers (no progress for --stall while others advanced, "
            "or the odd one out of a stalled job).",
            "gauge",
            [("", len(self.behind))],
        )
        metric(
            "rankscope_last_progress_age_seconds",
            "Seconds since the watcher last saw this rank advance (step, SeqNum or opCount).",
            "gauge",
            [(f',rank="{r}"', round(now - t, 3)) for r, t in sorted(self._last_adv.items())],
        )
        metric(
            "rankscope_faults",
            "Fault rows so far by kind (tee duplicates excluded).",
            "gauge",
            [(f',kind="{_label(k)}"', v) for k, v in sorted(self.faults_by_kind.items())],
        )
        d = self.diagnosis
        kind = d.failure_kind if d else "none"
        metric(
            "rankscope_initiating_rank",
            "1 for each rank the verdict so far names as initiating.",
            "gauge",
            [(f',rank="{r}",failure_kind="{_label(kind)}"', 1) for r in (d.initiating_ranks if d else [])],
        )
        metric(
            "rankscope_failure",
            "1 while the verdict so far is a failure (failure_kind label), else 0.",
            "gauge",
            [(f',failure_kind="{_label(kind)}"', 0 if kind == "none" else 1)],
        )
        metric(
            "rankscope_alerts_total",
            "Alerts raised by this watcher, by type.",
            "counter",
            [(f',type="{k}"', v) for k, v in sorted(self.alerts_by_type.items())],
        )
        metric(
            "rankscope_watch_exited",
            "1 once the launcher logged its exit.",
            "gauge",
            [("", 1 if self.exit_seen else 0)],
        )
        metric(
            "rankscope_watch_last_pass_timestamp_seconds",
            "Unix time of the last pass.",
            "gauge",
            [("", round(self.wallclock().timestamp(), 3))],
        )
        return "\n".join(lines) + "\n"

    def write_prometheus(self, path: str | os.PathLike[str], job: str | None = None) -> None:
        """Write :meth:`prometheus_text` to ``path`` atomically: a new temporary file in the same folder,
        created by :func:`tempfile.mkstemp` (a fresh name opened exclusively, so a link planted in a shared
        textfile-collector folder is never followed), named ``.<name>.<random>.tmp`` (not ``*.prom``: the
        collector never reads it half-written), given the usual mode (``0666`` less the umask: the
        collector runs as another user), then renamed over ``path``. Raises ``OSError``; no temporary file
        is left behind."""
        p = Path(path)
        text = self.prometheus_text(job)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{p.name}.", suffix=".tmp", dir=p.parent if str(p.parent) else "."
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
