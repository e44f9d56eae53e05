import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from poolbench.stats.summary import StopRule, outliers, summarize


def test_hand_computed_t_interval() -> None:
    # mean 12, sd 2, n 3; t(0.975, 2) = 4.302653; half = 4.302653 * 2 / sqrt(3) = 4.968275
    s = summarize([10, 12, 14])
    assert s.mean == 12 and s.stdev == pytest.approx(2)
    assert s.ci_low == pytest.approx(12 - 4.968275, abs=1e-5)
    assert s.ci_high == pytest.approx(12 + 4.968275, abs=1e-5)
    assert s.rel_halfwidth == pytest.approx(4.968275 / 12, abs=1e-6)


def test_one_value_has_no_interval() -> None:
    s = summarize([5.0])
    assert math.isnan(s.ci_low) and math.isinf(s.rel_halfwidth)


def test_outlier_is_named_from_four_values() -> None:
    # Grubbs on the logs (stats/outliers.py). 10, 10.1, 9.9, 10, 30: the log of 30 lies
    # G = 1.78867 sample standard deviations from the mean log; the critical value at n = 5,
    # 2% false alarms, is (4/√5)·√(t²/(3 + t²)) with t = t(1 − 0.02/10, 3) = 8.0526:
    # 1.74886. 1.78867 > 1.74886: flagged (the old MAD rule needed 6 values).
    assert outliers([10, 10.1, 9.9, 10, 30]) == (4,)
    assert outliers([10, 10.1, 9.9, 10, 10.05, 30]) == (5,)
    assert outliers([10, 11, 12, 13, 14, 15]) == ()
    # Three values: G is bounded by 2/√3, no run can be told apart from the two others.
    assert outliers([10, 10.1, 30]) == ()


def test_stop_rule() -> None:
    rule = StopRule(min_runs=3, max_runs=6, target=0.05)
    assert rule.needs_more([100, 100])
    assert not rule.needs_more([100, 100.5, 99.5])  # tight: stop at the minimum
    assert rule.needs_more([100, 130, 70])  # wide: go on
    assert not rule.needs_more([100, 130, 70, 100, 130, 70])  # cap reached
    wide = rule.verdict([100, 130, 70, 100, 130, 70])
    assert "not met" in wide and "honest" in wide and "planned 6" in wide
    assert rule.verdict([100, 100.5, 99.5]) == ""
    with pytest.raises(ValueError):
        StopRule(min_runs=1)


@given(st.lists(st.floats(min_value=1, max_value=1e6), min_size=2, max_size=30))
def test_interval_contains_the_mean_and_is_scale_free(xs: list[float]) -> None:
    s = summarize(xs)
    assert s.ci_low <= s.mean + 1e-9 * abs(s.mean)
    assert s.ci_high >= s.mean - 1e-9 * abs(s.mean)
    s2 = summarize([x * 1000 for x in xs])
    if math.isfinite(s.rel_halfwidth):
        assert s2.rel_halfwidth == pytest.approx(s.rel_halfwidth, rel=1e-6, abs=1e-9)


@given(st.lists(st.floats(min_value=1, max_value=1e6), min_size=3, max_size=30))
def test_more_confidence_is_wider(xs: list[float]) -> None:
    a, b = summarize(xs, 0.90), summarize(xs, 0.99)
    assert b.ci_high - b.ci_low >= a.ci_high - a.ci_low - 1e-9
