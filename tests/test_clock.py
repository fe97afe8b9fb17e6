"""``correlator.clock.estimate``: each host's offset against the host with the most collectives, the median of
the per-collective differences, with 3 × their median absolute deviation (at least 1 s) as the uncertainty."""

from __future__ import annotations

import statistics

from correlator.clock import estimate
from tests.test_diagnose_units import ev, table


def test_offsets_are_medians_of_shared_collectives_with_mad_uncertainty() -> None:
    # host a: 6 collectives (the reference); host b: the same seqs 5 s late except one 9 s late and one 0.5 s;
    # host c: no collective shared with a; host d: no collective at all
    late = {1: 5.0, 2: 5.0, 3: 9.0, 4: 5.0, 5: 0.5}
    rows = [ev(0, "nccl_coll", s, host="a", seq=s, pg="0") for s in range(1, 7)]
    rows += [ev(1, "nccl_coll", s + d, host="b", seq=s, pg="0") for s, d in late.items()]
    rows += [ev(2, "nccl_coll", 1, host="c", seq=99, pg="0"), ev(3, "log", 1, host="d")]
    clocks = estimate(table(rows))
    diffs = list(late.values())
    med = statistics.median(diffs)
    mad = statistics.median(abs(x - med) for x in diffs)
    assert (clocks["a"].offset_s, clocks["a"].uncertainty_s, clocks["a"].samples) == (0.0, 1.0, 6)
    assert clocks["b"].offset_s == med == 5.0
    assert clocks["b"].uncertainty_s == max(1.0, 3 * mad)
    assert clocks["b"].samples == 5
    assert (clocks["c"].offset_s, clocks["c"].uncertainty_s, clocks["c"].samples) == (0.0, 60.0, 0)
    assert (clocks["d"].offset_s, clocks["d"].uncertainty_s, clocks["d"].samples) == (0.0, 60.0, 0)


def test_wide_spread_gives_a_wide_uncertainty() -> None:
    late = {1: 2.0, 2: 10.0, 3: 30.0}
    rows = [ev(0, "nccl_coll", s, host="a", seq=s, pg="0") for s in range(1, 5)]
    rows += [ev(1, "nccl_coll", s + d, host="b", seq=s, pg="0") for s, d in late.items()]
    b = estimate(table(rows))["b"]
    assert (b.offset_s, b.uncertainty_s) == (10.0, 3 * 8.0)
