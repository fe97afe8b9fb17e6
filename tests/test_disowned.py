"""Issue #30 item 2 (in part): when every other rank says its model differs from one rank's, that rank is
the odd one (initiators.disowned_by_all). Lines in the format of torch's reducer.cpp
``verify_params_across_processes`` (torch 1.x - 2.15: ``"[", rank, "]: params[", p, "] in this process with
sizes ", sizes, " appears not to match sizes of the same param in process 0."``)."""

from __future__ import annotations

from pathlib import Path

from correlator.api import diagnose_path


def _line(rank: int, what: str = "sizes") -> str:
    if what == "sizes":
        return (
            f"[rank{rank}]: RuntimeError: [{rank}]: params[0] in this process with sizes [64, 32] appears not "
            "to match sizes of the same param in process 0.\n"
        )
    return (
        f"[rank{rank}]: RuntimeError: params[1] in this process with sizes [54275, 3] appears not to match "
        "strides of the same param in process 0.\n"
    )


def _job(root: Path, complainers: list[int], what: str = "sizes", world: int = 4) -> Path:
    root.mkdir()
    for r in range(world):
        text = _line(r, what) if r in complainers else f"[rank{r}]: building model\n"
        (root / f"rank{r}.log").write_text(text)
    return root


def test_every_other_rank_complains_about_rank_0(tmp_path):
    for what in ("sizes", "strides"):
        d = diagnose_path(_job(tmp_path / what, [1, 2, 3], what)).diagnosis
        assert (d.initiating_ranks, d.failure_kind) == ([0], "collective_mismatch"), what
        assert "DISOWNED_BY_ALL" in d.confidence_reason_codes
        assert d.collateral_ranks == [1, 2, 3]


def test_one_rank_complaining_is_the_odd_one_itself(tmp_path):
    d = diagnose_path(_job(tmp_path / "one", [3])).diagnosis
    assert d.initiating_ranks == [3]
    assert "DISOWNED_BY_ALL" not in d.confidence_reason_codes


def test_not_all_others_complain_names_no_one_by_disowning(tmp_path):
    d = diagnose_path(_job(tmp_path / "two", [1, 2])).diagnosis
    assert "DISOWNED_BY_ALL" not in d.confidence_reason_codes
    assert 0 not in d.initiating_ranks
