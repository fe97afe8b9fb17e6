"""Score diagnoses against a labelled corpus: ``rankscope eval CASES_DIR``.

A case is a folder with ``logs/`` and ``expected.json``:

- ``initiating_ranks``, ``collateral_ranks``, ``failure_kind`` (the verdict's vocabulary; a label outside it
  is not scored, and ``rankscope eval`` warns about it), ``source`` (``public``: a log a user posted;
  ``captured``: a real job run here; ``reconstructed``: built by hand; its first word counts, so
  ``captured: torch 2.13, gloo`` is ``captured``);
- optional ``accept_initiating``: other rank sets that are also right (readings the log cannot tell apart);
- optional ``collateral_scored: false``: the excerpt does not show every victim, so collateral is not scored;
- optional ``explained_by``: ``{"<collateral rank>": {"rank": R, "edge": "waits_for"}}``, the edge expected
  to explain that rank (scored when given);
- optional ``known_miss``: why the tool is known to get the verdict (initiating set, collateral set or
  kind) wrong;
- optional ``known_edge_miss``: why the tool is known to get an ``explained_by`` edge wrong while the verdict
  is right (kept apart from ``known_miss`` so that a later verdict regression of the case is still caught).

Each case is diagnosed by :func:`correlator.job.open_job`, the path ``rankscope diagnose`` takes (a
refusal of the input is a failed case). A case passes when the initiating set is one of the accepted sets,
the collateral set matches (when scored), the failure kind matches and every expected edge is found. Totals: initiating-rank accuracy,
collateral precision/recall/F1 (over scored collateral labels), kind accuracy, edge accuracy, time per
case — for all cases (``verdict_passed`` counts the cases whose verdict is right, edges aside) and separately for the real subset (``public`` + ``captured``) and the
``reconstructed`` one.

``rankscope eval`` diagnoses the cases in worker processes, one case each at a time
(:func:`correlator.pool.in_order`, as the batches of a large job are), on every core this process may use
unless told otherwise; each is diagnosed on its own, so the scores are the same one after another in this
process (:func:`evaluate`'s default).
"""

from __future__ import annotations

import difflib
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import cast

from correlator.batch import within_memory
from correlator.job import open_job
from correlator.limits import env_int
from correlator.pool import cores, in_order
from correlator.schema import FAILURE_KINDS


class LabelError(ValueError):
    """A case's ``expected.json`` is malformed; the message names the file and the field."""


#: Subsets reported separately: which ``source`` values each one holds (:func:`subset_of`).
SUBSETS: dict[str, tuple[str, ...]] = {"real": ("public", "captured"), "reconstructed": ("reconstructed",)}


def subset_of(source: str | None) -> str | None:
    """The subset of :data:`SUBSETS` a case's ``source`` puts it in, by the source's first word (any case):
    ``captured``, and ``captured: torch 2.13, gloo …`` alike, is ``real``. None for a case with no source or
    one whose first word names no subset: such a case counts in the totals of all cases only."""
    m = re.match(r"\s*([A-Za-z]+)", source or "")
    word = m.group(1).lower() if m else ""
    return next((sub for sub, names in SUBSETS.items() if word in names), None)


def kind_label_warning(name: str, label: object) -> str | None:
    """Why a case's ``failure_kind`` label is not scored (it names no kind of :data:`FAILURE_KINDS`, with the
    closest kind when one is close), else None (a known kind, or no label)."""
    if not isinstance(label, str) or label in FAILURE_KINDS:
        return None
    close = difflib.get_close_matches(label.lower().replace("-", "_"), FAILURE_KINDS, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"{name}: failure_kind {label!r} is not a known kind, so this case's kind is not scored{hint} "
        f"(known kinds: {', '.join(FAILURE_KINDS)})"
    )


@dataclass
class CaseResult:
    name: str
    passed: bool
    initiating_ok: bool
    collateral_ok: bool
    kind_ok: bool | None  # None: no label, or one not in the vocabulary (see kind_warning)
    want: dict[str, object]
    got: dict[str, object]
    seconds: float
    known_miss: str | None = None
    error: str | None = None
    source: str | None = None
    collateral_scored: bool = True
    #: expected edges found / expected edges given (0/0 when the case names none)
    edges_ok: int = 0
    edges_total: int = 0
    known_edge_miss: str | None = None

    @property
    def kind_warning(self) -> str | None:
        """Why this case's ``failure_kind`` label is not scored (:func:`kind_label_warning`), else None."""
        return kind_label_warning(self.name, self.want.get("failure_kind"))

    @property
    def subset(self) -> str | None:
        """The subset of :data:`SUBSETS` the case's ``source`` puts it in (:func:`subset_of`), else None."""
        return subset_of(self.source)

    @property
    def verdict_ok(self) -> bool:
        """The initiating set, the collateral set (when scored) and the kind are right, with no error."""
        return self.initiating_ok and self.collateral_ok and self.kind_ok is not False and self.error is None

    @property
    def excused(self) -> bool:
        """The case fails in the way its label says it is known to: a wrong verdict with ``known_miss``, or
        a right verdict with a wrong edge and ``known_edge_miss``."""
        if self.passed:
            return False
        if not self.verdict_ok:
            return bool(self.known_miss)
        return bool(self.known_edge_miss)

    @property
    def stale_label(self) -> str | None:
        """Why a known-miss label no longer fits the result (the miss it names is gone), else None."""
        if self.known_miss and self.verdict_ok:
            return "known_miss set but the verdict is right"
        if self.known_edge_miss and self.edges_ok == self.edges_total:
            return "known_edge_miss set but every expected edge is found"
        return None


@dataclass
class EvalReport:
    cases: list[CaseResult] = field(default_factory=list)

    def totals(self, subset: str | None = None) -> dict[str, float | int]:
        """Scores over all cases, or over one of :data:`SUBSETS` (``real``, ``reconstructed``).
        ``kind_accuracy`` is over the ``kind_scored`` cases whose ``failure_kind`` names a known kind (0.0
        when none does); ``kind_unknown_labels`` counts the cases whose label names none."""
        cases = [c for c in self.cases if subset is None or c.subset == subset]
        n = len(cases)
        tp = fp = fn = 0
        for c in cases:
            if not c.collateral_scored:
                continue
            want = set(c.want.get("collateral_ranks") or [])  # type: ignore[call-overload]
            got = set(c.got.get("collateral_ranks") or [])  # type: ignore[call-overload]
            tp += len(want & got)
            fp += len(got - want)
            fn += len(want - got)
        prec = tp / (tp + fp) if tp + fp else 1.0
        rec = tp / (tp + fn) if tp + fn else 1.0
        kinds = [c.kind_ok for c in cases if c.kind_ok is not None]
        edges = sum(c.edges_total for c in cases)
        return {
            "cases": n,
            "passed": sum(c.passed for c in cases),
            "verdict_passed": sum(c.verdict_ok for c in cases),
            "known_misses": sum(1 for c in cases if c.excused),
            "regressions": sum(1 for c in cases if not c.passed and not c.excused),
            "initiating_accuracy": round(sum(c.initiating_ok for c in cases) / n, 3) if n else 0.0,
            "collateral_precision": round(prec, 3),
            "collateral_recall": round(rec, 3),
            "collateral_f1": round(2 * prec * rec / (prec + rec), 3) if prec + rec else 0.0,
            "kind_accuracy": round(sum(kinds) / len(kinds), 3) if kinds else 0.0,
            "kind_scored": len(kinds),
            "kind_unknown_labels": sum(1 for c in cases if c.kind_warning),
            "edges_expected": edges,
            "edge_accuracy": round(sum(c.edges_ok for c in cases) / edges, 3) if edges else 1.0,
            "seconds_per_case": round(sum(c.seconds for c in cases) / n, 3) if n else 0.0,
        }

    def bands(self, subset: str | None = "real") -> list[dict[str, object]]:
        """How often a verdict was right, per confidence band (:data:`BANDS`), over ``subset`` (default: the
        real cases; None: all). Each band: ``band`` (its label), ``low``/``high`` (``low`` <= confidence <
        ``high``), ``cases``, ``initiating_right`` (the initiating set is accepted), ``verdict_right`` (set,
        collateral and kind), and ``accuracy`` = initiating_right / cases (None for an empty band). A
        confidence means what it says when each band's accuracy is at least its ``low``."""
        cases = [c for c in self.cases if subset is None or c.subset == subset]
        out: list[dict[str, object]] = []
        for label, low, high in BANDS:
            inside = [c for c in cases if low <= _confidence_of(c) < high]
            right = sum(c.initiating_ok for c in inside)
            out.append(
                {
                    "band": label,
                    "low": low,
                    "high": high,
                    "cases": len(inside),
                    "initiating_right": right,
                    "verdict_right": sum(c.verdict_ok for c in inside),
                    "accuracy": round(right / len(inside), 3) if inside else None,
                }
            )
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "totals": self.totals(),
            "subsets": {s: self.totals(s) for s in SUBSETS},
            "confidence_bands": {s: self.bands(s) for s in SUBSETS},
            "cases": [
                {
                    **asdict(c),
                    "subset": c.subset,
                    "verdict_ok": c.verdict_ok,
                    "excused": c.excused,
                    "kind_warning": c.kind_warning,
                }
                for c in self.cases
            ],
        }


#: Confidence bands of :meth:`EvalReport.bands`: (label, low, high), low inclusive, high exclusive.
BANDS: tuple[tuple[str, float, float], ...] = (
    ("< 0.5", 0.0, 0.5),
    ("0.5-0.8", 0.5, 0.8),
    (">= 0.8", 0.8, 1.01),
)


def _confidence_of(c: CaseResult) -> float:
    """The verdict's confidence (0 for a case whose diagnosis failed: no verdict claims anything)."""
    v = c.got.get("confidence")
    return float(v) if isinstance(v, (int, float)) else 0.0


def find_cases(root: Path) -> list[Path]:
    """Case folders under ``root`` (any folder holding an ``expected.json``), sorted by name."""
    return sorted(p.parent for p in root.rglob("expected.json"))


_EXPECTED_MAX_BYTES = 1 << 20


def _rank_list(want: dict[str, object], key: str, where: Path) -> list[int]:
    v = want.get(key)
    if not isinstance(v, list) or not all(
        isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31 for r in v
    ):
        raise ValueError(
            f"{where}: field {key!r} must be a list of rank numbers (integers 0 … 2^31-1), got "
            f"{type(v).__name__}" + (f" {str(v)[:60]}" if isinstance(v, list) else "")
        )
    return v  # type: ignore[return-value]


def read_expected(path: Path) -> dict[str, object]:
    """Read and validate one ``expected.json``. Raises ``ValueError`` naming the file and the field."""
    from correlator.smallfile import SmallFileError, read_small

    try:
        small = read_small(path, str(path), _EXPECTED_MAX_BYTES)
        if small.truncated:
            raise ValueError(small.too_big(f"{path}: expected.json"))
        want = json.loads(small.data.decode("utf-8"))
    except SmallFileError as e:
        raise ValueError(str(e)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not readable ({getattr(e, 'strerror', None) or e})") from None
    except RecursionError:
        raise ValueError(f"{path}: not readable JSON (nested too deeply)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(want, dict):
        raise ValueError(  # noqa: TRY004 - callers treat every malformed expected.json alike
            f"{path}: must be a JSON object with initiating_ranks and collateral_ranks, got "
            f"{type(want).__name__}"
        )
    for key in ("initiating_ranks", "collateral_ranks"):
        if key not in want:
            raise ValueError(f"{path}: needs initiating_ranks and collateral_ranks (field {key!r} missing)")
        _rank_list(want, key, path)
    for key in ("failure_kind", "known_miss", "known_edge_miss", "source"):
        if want.get(key) is not None and not isinstance(want[key], str):
            raise ValueError(f"{path}: field {key!r} must be a string, got {type(want[key]).__name__}")
    return want


def _accepted(want: dict[str, object], where: Path) -> list[list[int]]:
    """The initiating sets that count as right: ``initiating_ranks`` plus each ``accept_initiating`` set."""
    sets = [sorted(_rank_list(want, "initiating_ranks", where))]
    extra = want.get("accept_initiating") or []
    if not isinstance(extra, list):
        raise LabelError(f"{where}: accept_initiating must be a list of rank lists")
    for alt in extra:
        if not isinstance(alt, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in alt):
            raise LabelError(f"{where}: accept_initiating must be a list of rank lists")
        sets.append(sorted(alt))
    return sets


def _edges(want: dict[str, object], d: dict[str, object], where: Path) -> tuple[int, int]:
    """(found, expected) for the ``explained_by`` edges the case names."""
    exp = want.get("explained_by") or {}
    if not isinstance(exp, dict):
        raise LabelError(f"{where}: explained_by must map a collateral rank to {{rank, edge}}")
    got = {int(p["rank"]): p.get("explained_by") or {} for p in d.get("per_rank") or []}  # type: ignore[attr-defined]
    ok = 0
    for r, e in exp.items():
        if not isinstance(e, dict) or "rank" not in e or "edge" not in e or not str(r).lstrip("-").isdigit():
            raise LabelError(f'{where}: explained_by[{r!r}] must be {{"rank": R, "edge": E}}')
        g = got.get(int(r)) or {}
        ok += g.get("rank") == e["rank"] and g.get("edge") == e["edge"]
    return ok, len(exp)


def run_case(case: Path) -> CaseResult:
    where = case / "expected.json"
    want = read_expected(where)
    accepted = _accepted(want, where)
    want_coll = sorted(_rank_list(want, "collateral_ranks", where))
    logs = case / "logs" if (case / "logs").is_dir() else case
    t0 = time.perf_counter()
    try:
        # The path ``rankscope diagnose`` takes (reduced table, refusal of unrecognised input, signatures),
        # so the score is the answer a user gets.
        d = open_job(logs).diagnose().to_json()
        err: str | None = None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - a crash (a polars panic too) is a failed case, not a crashed scorer
        d, err = {}, f"{type(e).__name__}: {e}"
    secs = time.perf_counter() - t0
    got = {k: d.get(k) for k in ("initiating_ranks", "collateral_ranks", "failure_kind", "confidence")}
    init_ok = sorted(got["initiating_ranks"] or []) in accepted  # type: ignore[arg-type]
    scored = want.get("collateral_scored", True) is not False
    coll_ok = (sorted(got["collateral_ranks"] or []) == want_coll) if scored else True  # type: ignore[arg-type]
    wk = want.get("failure_kind")
    kind_ok = (got["failure_kind"] == wk) if wk in FAILURE_KINDS else None
    e_ok, e_n = _edges(want, d, where) if not err else (0, len(want.get("explained_by") or {}))  # type: ignore[arg-type]
    passed = init_ok and coll_ok and kind_ok is not False and err is None and e_ok == e_n
    src = want.get("source")
    return CaseResult(
        case.name,
        passed,
        init_ok,
        coll_ok,
        kind_ok,
        {
            "initiating_ranks": accepted[0],
            "accept_initiating": accepted[1:],
            "collateral_ranks": want_coll,
            "failure_kind": wk,
        },
        got,
        round(secs, 3),
        cast("str | None", want.get("known_miss")),
        err,
        src if isinstance(src, str) else None,
        scored,
        e_ok,
        e_n,
        cast("str | None", want.get("known_edge_miss")),
    )


def eval_workers(workers: int | None, cases: int, case_bytes: int = 0) -> int:
    """Cases diagnosed at once: ``workers``, else ``RANKSCOPE_EVAL_WORKERS`` (read by
    :func:`correlator.limits.env_int`: 0 or not a whole number counts as unset), else the cores this process may
    use within the memory budget for cases of up to ``case_bytes`` of logs each
    (:func:`correlator.batch.within_memory`); at most ``cases``, at least 1. Raises ``ValueError`` for
    ``workers`` below 1."""
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if workers is None:
        workers = env_int("RANKSCOPE_EVAL_WORKERS", 0) or within_memory(cores(), case_bytes)
    return max(1, min(workers, cases))


def _logs_bytes(case: Path) -> int:
    """The bytes of the files a diagnosis of the case reads (:func:`correlator.discover.input_size`)."""
    from correlator.discover import input_size

    return input_size(case / "logs" if (case / "logs").is_dir() else case)


def evaluate(
    root: Path, on_case: Callable[[int, int, CaseResult], None] | None = None, workers: int | None = 1
) -> EvalReport:
    """Diagnose every case under ``root`` and compare with its ``expected.json``. ``on_case(done, total,
    result)``: called after each case, in order (``done`` counts from 1 to ``total``). ``workers``: cases
    diagnosed at once (None: :func:`eval_workers`' default, every core within the memory budget for the
    largest case; ``rankscope eval`` takes it): above 1, each in a worker process (started with ``spawn``:
    ~0.5 s of imports each, paid once; a script that calls this must guard its own top level with
    ``if __name__ == "__main__":``, as for any ``multiprocessing`` pool), results taken in case order; 1 (the
    default): one after another in this process. A case's ``seconds`` is its diagnosis's wall
    time where it ran (cases running beside it share the cores). Raises :class:`LabelError` on a malformed
    ``expected.json``."""
    cases = find_cases(root)
    results: list[CaseResult] = []
    largest = max((_logs_bytes(c) for c in cases), default=0) if workers is None else 0
    for res in in_order(run_case, cases, eval_workers(workers, len(cases), largest), kind="processes"):
        results.append(res)
        if on_case is not None:
            on_case(len(results), len(cases), res)
    return EvalReport(results)
