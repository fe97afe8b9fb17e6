"""Alerts of the live watcher: the first initiating fault and verdict changes (from the diagnosis of the
table so far), stragglers, silent ranks and a stalled job (from progress), as :class:`Alert` records."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import polars as pl

from correlator.diagnose import diagnose
from correlator.schema import FAULT_KINDS, Kind
from correlator.tail import WatchState
from correlator.verdict import Diagnosis


@dataclass
class Alert:
    """One alert: a JSON line on stdout (``to_json``) or a readable line (``to_text``).

    ``alert``: ``initiator`` (a fault no other rank explains yet) | ``verdict_changed`` (also: the first
    fault when the verdict can name no initiating rank; ``rank`` is then null) | ``straggler`` (a
    collective every rank but a few entered, the rest silent for ``stall`` s) | ``silent`` (a rank that
    stopped advancing while others kept going for ``stall`` s) | ``stalled`` (every rank stopped for
    ``stall`` s; ``rank`` is the odd one out, or null when none stands out). ``kind`` is the rank's first
    fault kind (``initiator``), the failure kind (``verdict_changed``) or ``no_progress``. ``evidence`` is
    ``path:line`` relative to the watched directory. ``verdict``: the verdict so far (failure kind,
    initiating and collateral ranks, confidence, summary). ``time``: wall clock, ISO 8601 UTC.
    """

    time: str
    alert: str
    rank: int | None
    host: str | None
    kind: str | None
    signature: str | None
    evidence: str | None
    evidence_text: str | None
    reason: str
    verdict: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        from correlator.report import json_default

        return json.dumps(asdict(self), default=json_default)

    def to_text(self) -> str:
        who = "job" if self.rank is None else f"rank {self.rank}" + (f" ({self.host})" if self.host else "")
        sig = f" [{self.signature}]" if self.signature else ""
        at = f" at {self.evidence}" if self.evidence else ""
        v = self.verdict
        so_far = (
            f" | verdict so far: {v.get('failure_kind')}, initiating {v.get('initiating_ranks')}"
            if v.get("failure_kind") not in (None, "none")
            else ""
        )
        return f"{self.time} ALERT {self.alert}: {who} {self.kind or ''}{sig}{at} — {self.reason}{so_far}"


class AlertRules(WatchState):
    """The alert rules of a :class:`correlator.watch.Watcher` (see the module docstring)."""

    def _signatures(self, d: Diagnosis) -> Diagnosis:
        """``d`` with the signatures that match the table so far (a new record)."""
        if d.failure_kind == "none" and not self._sig_extra:
            return d
        try:
            from correlator import signatures
        except ModuleNotFoundError:  # a build without the signature library
            return d
        if self._sigs is None:
            self._sigs = signatures.load_signatures(self._sig_extra)
        return replace(d, signatures=signatures.match(d, self.table, self._sigs))

    def _verdict_dict(self) -> dict[str, Any]:
        d = self.diagnosis
        if d is None:
            return {
                "failure_kind": "none",
                "initiating_ranks": [],
                "collateral_ranks": [],
                "confidence": None,
                "summary": "no log lines yet",
            }
        return {
            "failure_kind": d.failure_kind,
            "initiating_ranks": d.initiating_ranks,
            "collateral_ranks": d.collateral_ranks,
            "confidence": d.confidence,
            "summary": d.summary,
            "signatures": [s.get("id") for s in d.signatures[:3]],
        }

    def _host(self, rank: int | None) -> str | None:
        if rank is None:
            return None
        h = self.table.filter((pl.col("rank") == rank) & pl.col("host").is_not_null())["host"]
        return h[0] if h.len() else None

    def _alert(
        self,
        kind: str,
        rank: int | None,
        what: str | None,
        reason: str,
        evidence: tuple[str | None, str | None] = (None, None),
    ) -> Alert:
        d = self.diagnosis
        sig = None
        if d is not None and d.signatures and kind in ("initiator", "verdict_changed"):
            sig = str(d.signatures[0].get("id"))
        ts = self.wallclock().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return Alert(
            ts,
            kind,
            rank,
            self._host(rank),
            what,
            sig,
            evidence[0],
            evidence[1],
            reason,
            self._verdict_dict(),
        )

    def _diagnosis_alerts(self) -> list[Alert]:
        d = self._signatures(diagnose(self.table))
        self.diagnosis = d
        out: list[Alert] = []
        if d.failure_kind == "none":
            return out
        n_init = len(d.initiating_ranks)
        if n_init > 1 and n_init * 2 > len(set(d.ranks_seen) | set(d.initiating_ranks)):
            return out  # most of the job "initiating" (silent while two ranks failed): no fingerprint yet
        key = (d.failure_kind, tuple(d.initiating_ranks))
        new = [r for r in d.initiating_ranks if r not in self._alerted_init]
        for r in new:
            ev = next((e for e in d.evidence if e.rank == r), None) or (d.evidence[0] if d.evidence else None)
            # the rank's own fault line (python_exception, cuda_oom …), else the failure kind (a silent rank)
            kind = ev.kind if ev is not None and ev.rank == r and ev.kind in FAULT_KINDS else d.failure_kind
            out.append(
                self._alert(
                    "initiator", r, kind, d.summary, (f"{ev.path}:{ev.line}", ev.text) if ev else (None, None)
                )
            )
            self._alerted_init.add(r)
        if not new and key != self._last_key and (self._last_key is not None or not d.initiating_ranks):
            r0 = d.initiating_ranks[0] if d.initiating_ranks else None
            ev = d.evidence[0] if d.evidence else None
            was = (
                f"was {self._last_key[0]} (initiating {list(self._last_key[1])}); now "
                if self._last_key
                else "a fault, no initiating rank named yet: "
            )
            out.append(
                self._alert(
                    "verdict_changed",
                    r0,
                    d.failure_kind,
                    was + d.summary,
                    (f"{ev.path}:{ev.line}", ev.text) if ev else (None, None),
                )
            )
        self._last_key = key
        return out

    def _rank_progress(self) -> dict[int, tuple]:
        """Per rank: (max step, ((pg, max seq), ...)) from the non-duplicate rows."""
        t = self.table.filter(pl.col("rank").is_not_null() & ~pl.col("duplicate"))
        prog: dict[int, tuple] = {}
        steps = dict(
            t.filter(pl.col("kind") == Kind.STEP_PROGRESS)
            .group_by("rank")
            .agg(pl.col("step").max())
            .iter_rows()
        )
        seqs: dict[int, list[tuple[str, int]]] = {}
        for r, pg, s in (
            t.filter(
                pl.col("kind").is_in(list(Kind.SEQUENCED))
                & pl.col("pg").is_not_null()
                & pl.col("seq").is_not_null()
            )
            .group_by("rank", "pg")
            .agg(pl.col("seq").max())
            .sort("rank", "pg")
            .iter_rows()
        ):
            seqs.setdefault(r, []).append((pg, s))
        for r in set(steps) | set(seqs):
            prog[r] = (steps.get(r), tuple(seqs.get(r, ())))
        return prog

    def _evidence_last(self, rank: int) -> tuple[str | None, str | None]:
        t = self.table.filter(
            (pl.col("rank") == rank)
            & ~pl.col("duplicate")
            & pl.col("kind").is_in([Kind.STEP_PROGRESS, *Kind.SEQUENCED])
        )
        if not t.height:
            return None, None
        r = t.sort("ts", "line", nulls_last=False).row(-1, named=True)
        return f"{r['path']}:{r['line']}", (r["message"] or "").split("\n")[0][:400]

    def _progress_alerts(self, now: float, changed: bool) -> list[Alert]:
        if changed:
            prog = self._rank_progress()
            for r, p in prog.items():
                if self._progress.get(r) != p:
                    self._progress[r] = p
                    self._last_adv[r] = now
                    self._flagged.pop(r, None)
                    self._stalled_alerted = False
        ranks = sorted(self._last_adv)
        out: list[Alert] = []
        self.behind = set()
        if len(ranks) < 2:
            return out
        age = {r: now - self._last_adv[r] for r in ranks}
        newest = max(self._last_adv.values())
        out += self._stragglers(ranks, age)
        out += self._silent(ranks, age, newest)
        out += self._stalled(ranks, age)
        return out

    def _stragglers(self, ranks: list[int], age: dict[int, float]) -> list[Alert]:
        out: list[Alert] = []
        # (1) a collective every rank but a few entered, the others silent for `stall`
        by_pg: dict[str, dict[int, int]] = {}
        for r in ranks:
            for pg, s in self._progress[r][1]:
                by_pg.setdefault(pg, {})[r] = s
        for pg, seqs in by_pg.items():
            if len(seqs) < 3:
                continue
            top = max(seqs.values())
            lag = [r for r, s in seqs.items() if s < top]
            if not lag or len(lag) * 4 > len(seqs) and len(lag) > 1:
                continue
            for r in lag:
                if age[r] > self.stall:
                    self.behind.add(r)
                    if r not in self._flagged:
                        self._flagged[r] = "straggler"
                        ahead = sorted(x for x, s in seqs.items() if s == top)
                        from correlator.report import ranges

                        out.append(
                            self._alert(
                                "straggler",
                                r,
                                "no_progress",
                                f"stuck at SeqNum {seqs[r]} of pg {pg} for {age[r]:.0f}s while ranks "
                                f"{ranges(ahead)} entered SeqNum {top}",
                                self._evidence_last(r),
                            )
                        )
        return out

    def _silent(self, ranks: list[int], age: dict[int, float], newest: float) -> list[Alert]:
        out: list[Alert] = []
        # (2) a rank that stopped while the others kept advancing for `stall`
        for r in ranks:
            if age[r] > self.stall and newest - self._last_adv[r] > self.stall:
                self.behind.add(r)
                if r not in self._flagged:
                    self._flagged[r] = "silent"
                    going = [x for x in ranks if self._last_adv[x] - self._last_adv[r] > self.stall]
                    from correlator.report import ranges

                    out.append(
                        self._alert(
                            "silent",
                            r,
                            "no_progress",
                            f"no progress for {age[r]:.0f}s while ranks {ranges(going)} kept advancing",
                            self._evidence_last(r),
                        )
                    )
        return out

    def _stalled(self, ranks: list[int], age: dict[int, float]) -> list[Alert]:
        out: list[Alert] = []
        # (3) every rank stopped for `stall`: name the odd one out (a progress state no other rank shares)
        if min(age.values()) > self.stall:
            counts: dict[tuple, list[int]] = {}
            for r in ranks:
                counts.setdefault(self._progress[r], []).append(r)
            common = max(counts.values(), key=len)
            odd = [r for r in ranks if r not in common] if len(common) * 2 > len(ranks) else []
            self.behind.update(odd)
            if not self._stalled_alerted:
                self._stalled_alerted = True
                quiet = min(age.values())
                if not odd:
                    out.append(
                        self._alert(
                            "stalled",
                            None,
                            "no_progress",
                            f"no rank has advanced for {quiet:.0f}s; no rank stands out",
                        )
                    )
                for r in odd:
                    if self._flagged.get(r) in ("straggler", "silent"):
                        continue
                    self._flagged[r] = "stalled"
                    mine = self._describe(self._progress[r])
                    theirs = self._describe(self._progress[common[0]])
                    from correlator.report import ranges

                    out.append(
                        self._alert(
                            "stalled",
                            r,
                            "no_progress",
                            f"no rank has advanced for {quiet:.0f}s; rank {r} stopped at {mine}, ranks "
                            f"{ranges(common)} at {theirs}",
                            self._evidence_last(r),
                        )
                    )
        return out

    @staticmethod
    def _describe(p: tuple) -> str:
        step, seqs = p
        parts = [f"step {step}"] if step is not None else []
        parts += [f"SeqNum {s} (pg {pg})" for pg, s in seqs[:2]]
        return ", ".join(parts) or "no progress line"

    # ------------------------------------------------------------------ state
