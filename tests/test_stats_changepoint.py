"""Step changes in a history (poolbench.stats.changepoint): hand-made series with a known
answer, the pieces the method is built from checked against what they must compute, and the
input refusals. The calibration (false alarms, power, coverage) is in
test_stats_changepoint_calibration.py; docs/statistics.md §8 states the method."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import special

from poolbench.stats import tdist
from poolbench.stats.changepoint import (
    History,
    Point,
    choice,
    detect,
    excursions,
    null,
    partition,
    penalised,
    points,
    variance,
)

# Three replicates a point, at (1 − CV, 1, 1 + CV) times its level: their sample standard
# deviation is exactly CV · level (that of −1, 0, 1 is 1), their mean exactly the level.
SPREAD = (-1.0, 0.0, 1.0)


def _point(level: float, cv: float = 0.03, label: str = "", cov: float | None = None) -> Point:
    return Point.from_values([level * (1 + cv * s) for s in SPREAD], label=label, covariate=cov)


# A point-to-point wobble of about ±1.5% (between-run variation beyond each point's own CV),
# fixed so each series is the same every run.
WOBBLE = [1.0, 1.012, 0.991, 1.006, 0.985, 1.015, 0.996, 1.003, 0.988, 1.009,
          0.994, 1.011, 0.99, 1.004, 0.987, 1.013, 0.998, 1.007, 0.989, 1.002,
          0.993, 1.01, 0.986, 1.005, 0.997, 1.014, 0.992, 1.001, 0.995, 1.008]  # fmt: skip


def _series(levels: list[float], cv: float = 0.03) -> list[Point]:
    return [_point(level * WOBBLE[i % len(WOBBLE)], cv, f"run{i}") for i, level in
            enumerate(levels)]  # fmt: skip


def test_the_replicates_of_a_hand_made_point_have_the_stated_cv() -> None:
    p = _point(100.0, 0.03)
    assert np.std(p.values, ddof=1) / np.mean(p.values) == pytest.approx(0.03)


def test_an_obvious_40_percent_step_is_found_where_it_is_with_its_interval() -> None:
    h = detect(_series([100.0] * 10 + [60.0] * 10))
    assert [s.index for s in h.steps] == [10]
    step = h.steps[0]
    assert step.label == "run10" and step.before_label == "run9"
    assert step.low <= 0.6 <= step.high
    assert step.ratio == pytest.approx(0.6, rel=0.02)
    assert step.high < 0.65 and step.p_value < 0.05
    assert h.drift is None and h.outliers == () and h.reason == ""
    assert [(s.start, s.end, s.points) for s in h.segments] == [(0, 9, 10), (10, 19, 10)]
    assert h.segments[0].low <= 100.0 <= h.segments[0].high
    assert h.segments[1].low <= 60.0 <= h.segments[1].high


def test_a_flat_noisy_series_reports_no_step_and_says_why() -> None:
    h = detect(_series([100.0] * 20, cv=0.05))
    assert h.steps == () and h.drift is None and h.outliers == ()
    assert h.reason.startswith("no change beyond the noise (the likeliest single step, from")
    assert [(s.start, s.end) for s in h.segments] == [(0, 19)]


def test_a_drift_is_a_drift_not_a_staircase() -> None:
    """−1% a point over 24 points (−21% in all) at the same noise as the step above."""
    h = detect(_series([100.0 * 0.99**i for i in range(24)]))
    assert h.steps == ()
    assert h.drift is not None and h.drift.per == "point"
    assert h.drift.low <= 0.99 <= h.drift.high
    assert h.drift.span_low <= 0.99**23 <= h.drift.span_high
    assert h.reason.startswith("the change is gradual: a trend describes it better than steps")


def test_a_drift_on_a_covariate_is_per_covariate_unit() -> None:
    """Fill rises and falls (data deleted): speed follows fill, not time."""
    fill = [20, 26, 32, 38, 44, 50, 56, 62, 68, 74, 80, 72, 64, 56, 48, 40, 46, 52, 58, 64]
    pts = [_point(100.0 * 0.995 ** (f - 20) * WOBBLE[i], 0.03, f"run{i}", float(f))
           for i, f in enumerate(fill)]  # fmt: skip
    h = detect(pts)
    assert h.steps == ()
    assert h.drift is not None and h.drift.per == "covariate unit"
    assert h.drift.low <= 0.995 <= h.drift.high


def test_a_single_outlier_is_an_outlier_not_two_steps() -> None:
    levels = [100.0] * 20
    levels[9] = 60.0
    h = detect(_series(levels))
    assert [o.index for o in h.outliers] == [9]
    assert h.outliers[0].label == "run9"
    assert h.outliers[0].ratio == pytest.approx(0.6 * WOBBLE[9], rel=0.03)
    assert h.outliers[0].score > h.outliers[0].limit
    assert h.steps == () and h.drift is None
    assert h.segments[0].points == 19


def test_an_excursion_of_several_points_is_two_steps() -> None:
    """A bad release, fixed in the next: down 20% for 6 points, then back."""
    h = detect(_series([100.0] * 7 + [80.0] * 6 + [100.0] * 7))
    assert [s.index for s in h.steps] == [7, 13]
    assert h.steps[0].low <= 0.8 <= h.steps[0].high
    assert h.steps[1].low <= 1.25 <= h.steps[1].high


def test_a_step_and_a_drift_together() -> None:
    """A pool filling (−0.5% a point) and an upgrade at point 15 (−25%)."""
    levels = [100.0 * 0.995**i * (0.75 if i >= 15 else 1.0) for i in range(30)]
    h = detect(_series(levels, cv=0.02))
    assert [s.index for s in h.steps] == [15]
    assert h.steps[0].low <= 0.75 <= h.steps[0].high
    assert h.drift is not None and h.drift.low <= 0.995 <= h.drift.high


def test_too_few_points_for_a_step() -> None:
    h = detect(_series([100.0, 100.0, 60.0, 60.0, 60.0]))
    assert h.steps == ()
    assert (
        h.reason == "too few points for a step (5 used): a step needs 3 points on each side of it"
    )
    assert detect(_series([100.0])).reason == "1 point(s): a series needs at least 2"


def test_an_interval_gives_what_its_replicates_give() -> None:
    """A point given by its t-interval carries the same within-run variance as its values."""
    values = [101.0, 97.0, 104.0, 99.0, 95.0]
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    half = tdist.quantile(0.975, 4) * sd / math.sqrt(5)
    by_values = points.prepare([Point.from_values(values)])
    by_ci = points.prepare([Point(mean, 5, mean - half, mean + half)])
    assert by_ci.s2[0] == pytest.approx(by_values.s2[0]) == pytest.approx((sd / mean) ** 2)
    assert by_ci.d[0] == by_values.d[0] == 4
    stein = points.prepare([Point(mean, 5, mean - half, mean + half, df=2)])
    assert stein.d[0] == 2  # a Stein interval: the stage-one df, and a larger t


def test_the_same_points_give_the_same_answer() -> None:
    pts = _series([100.0] * 8 + [90.0] * 8, cv=0.05)
    assert detect(pts) == detect(pts)


def test_the_answer_is_json() -> None:
    h = detect(_series([100.0] * 10 + [60.0] * 10))
    text = json.dumps(h.as_dict(), allow_nan=False)
    assert json.loads(text)["steps"][0]["index"] == 10
    assert isinstance(h, History) and "-40" in h.summary()


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ([Point(0.0, 3, values=(0.0, 0.0, 0.0))], "point 1: its mean 0.0 is not a positive"),
        ([Point(5.0, 2, values=(4.0, 5.0, 6.0))], "point 1: 3 values but n = 2"),
        ([Point(5.0, 3, 4.0)], "an interval needs both ci_low and ci_high"),
        ([Point(5.0, 3, 6.0, 4.0)], "is not an interval"),
        ([_point(100.0, cov=1.0), _point(100.0)], "the covariate is given for 1 of 2 points"),
        ([Point(5.0, 3, 4.0, 6.0, label="r7", covariate=math.nan)], "point 1 (r7): its covariate"),
    ],
)
def test_bad_points_are_refused_with_what_to_fix(bad: list[Point], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        detect(bad)
    with pytest.raises(ValueError, match="alpha 1.5"):
        detect(_series([100.0] * 4), alpha=1.5)


# --- the pieces -----------------------------------------------------------------------------


def _brute_force(y: np.ndarray, w: np.ndarray, min_size: int, k: int) -> float:
    """The smallest cost with exactly k changes, by trying every placement."""
    n, best = len(y), math.inf
    for cuts in itertools.combinations(range(1, n), k):
        bounds = [0, *cuts, n]
        if min(b - a for a, b in itertools.pairwise(bounds)) < min_size:
            continue
        best = min(best, sum(partition.segment_cost(y[a:b], w[a:b])
                             for a, b in itertools.pairwise(bounds)))  # fmt: skip
    return best


def test_optimal_partitioning_is_exact() -> None:
    rng = np.random.default_rng(5)
    y, w = rng.normal(size=(3, 11)), rng.uniform(0.2, 3.0, size=(3, 11))
    best = partition.best_costs(y, w, 3, 2)
    for r in range(3):
        for k in range(3):
            assert best[r, k] == pytest.approx(_brute_force(y[r], w[r], 3, k))
    assert np.isinf(partition.best_costs(y[:1, :8], w[:1, :8], 3, 2)[0, 2])  # 3 × 3 > 8


def test_the_places_of_a_noise_free_staircase() -> None:
    y = np.array([0.0] * 4 + [1.0] * 5 + [-0.5] * 3)
    best, cuts = partition.every_fit(y, np.ones_like(y), 3, 3)
    assert cuts[2] == [4, 9] and best[2] == pytest.approx(0.0)
    # one change: at 9 the cost is 4 · (5/9)² + 5 · (4/9)² = 2.22, at 4 it is 4.22
    assert cuts[1] == [9] and best[1] == pytest.approx(20 / 9)


def test_moderation_pools_equal_variances_and_keeps_a_noisy_point_noisy() -> None:
    d = np.full(12, 4.0)
    # far less scattered than s² with 4 df would be (CV 71%): the points pool completely
    s2 = 0.0025 * np.array([0.9, 1.1, 1.0, 0.95, 1.05, 1.0, 0.92, 1.08, 1.0, 0.97, 1.03, 1.0])
    pooled = variance.moderate(s2, d)
    assert np.isinf(pooled.d0[0]) and np.allclose(pooled.s2, s2.mean())  # one pooled value
    noisy = np.full(12, 0.0025)
    noisy[[2, 5, 9]] = 0.0025 * np.array([0.6, 1.4, 1.0])
    noisy[7] = 0.25  # one run 10× as noisy
    got = variance.moderate(noisy, d).s2[0]
    assert got[7] > 10 * np.median(got)
    no_info = variance.moderate(np.array([0.0025, 0.0036, 0.0, 0.0016]), np.array([4, 4, 0, 4.0]))
    assert no_info.s2[0, 2] == pytest.approx((0.0025 + 0.0036 + 0.0016) / 3)  # pooled, d = ∞


def test_trigamma_inverse() -> None:
    x = np.array([1e-5, 0.01, 0.3, 1.0, 7.0, 1e4])
    assert np.allclose(special.polygamma(1, variance._trigamma_inverse(x)), x, rtol=1e-8)


def test_between_run_variance_from_differences_ignores_a_step() -> None:
    rng = np.random.default_rng(11)
    tau, v = 0.03, np.full(41, 0.0001)
    y = rng.normal(0.0, math.sqrt(tau**2 + 0.0001), (400, 41))
    y[:, 20:] += 0.5  # a 65% step: one difference in 40
    est = variance.tau2_differences(y, np.broadcast_to(v, y.shape))
    assert np.median(np.sqrt(est)) == pytest.approx(tau, rel=0.1)
    assert variance.tau2_differences(np.zeros((1, 5)), np.ones((1, 5)))[0] == 0.0


def test_the_threshold_is_the_stated_order_statistic() -> None:
    stats = np.arange(1.0, 200.0)  # 199 values
    assert null.threshold(stats, 0.05) == 190.0  # ⌈0.95 · 200⌉ = 190th smallest
    assert null.threshold(stats, 0.01) == 198.0


def test_the_score_is_blind_to_a_common_scale_of_the_variances() -> None:
    best = np.array([[10.0, 4.0, 3.0]])
    assert penalised.step_statistic(best, 12) == pytest.approx(12 * math.log(10 / 4))
    assert penalised.step_statistic(best * 7.0, 12) == pytest.approx(12 * math.log(10 / 4))


def test_an_outlier_score_is_the_closest_side_spelled_out() -> None:
    """excursions._raw from cumulative sums equals the definition, point by point."""
    rng = np.random.default_rng(9)
    y, w = rng.normal(size=(2, 7)), rng.uniform(0.5, 4.0, size=(2, 7))
    got = excursions._raw(null.Weights(y, 1 / w, np.zeros(2), w, variance.moderate(w, w[0])))
    sides = {0: [[1, 2], [1]], 6: [[4, 5], [5]], 1: [[0], [2, 3]], 5: [[3, 4], [6]]}
    for r, i in itertools.product(range(2), range(7)):
        groups = sides.get(i, [[i - 2, i - 1], [i + 1, i + 2]])
        want = min(abs(y[r, i] - np.average(y[r, g], weights=w[r, g]))
                   / math.sqrt(1 / w[r, i] + 1 / w[r, g].sum()) for g in groups)  # fmt: skip
        assert got[r, i] == pytest.approx(want)


def test_the_first_runs_after_a_change_are_not_outliers() -> None:
    """Two runs after an upgrade: not a step yet (3 points needed), and not outliers."""
    h = detect(_series([100.0] * 12 + [60.0] * 2))
    assert h.outliers == () and h.steps == ()
    one = detect(_series([100.0] * 12 + [60.0]))
    assert [o.index for o in one.outliers] == [12]


def test_a_step_whose_interval_includes_no_change_is_not_reported() -> None:
    """confirm: a placed step between two segments at one level is dropped, with its
    interval kept for the reason; the real one beside it stays."""
    y = np.log(np.array([100.0, 101, 99, 100.5, 99.5, 100, 60, 61, 59, 60.5]))
    pts = choice.Points(y, np.full(10, 1e-4), np.arange(10.0), np.full(10, 1e4))
    found = choice.confirm(pts, choice.Model((3, 6), False, 0.0), 0.05)
    assert found.cuts == [6] and [c for c, _ in found.dropped] == [3]
    low, high = found.dropped[0][1].bounds(0.95)
    assert low < 0 < high
    assert found.steps[0].bounds(0.95)[1] < math.log(0.62)
