"""Comparison statistics against hand-computed cases (poolbench.stats.compare)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from poolbench.stats.compare import NO_DIFFERENCE, compare_family, holm, ratio_ci
from poolbench.stats.welch import welch_df


def test_zero_variance_baseline_reduces_to_a_t_interval_of_b() -> None:
    # A = 100 exactly; B = 110, 120, 130: mean 120, s = 10, n = 3, df = 2.
    # t(0.975, 2) = 4.302653 (tables); half-width of the mean = 4.302653 · 10/√3 = 24.8414,
    # so the ratio interval is 1.2 ± 0.248414 = [0.951586, 1.448414]: it includes 1.
    # Welch's test: T = 20 / (10/√3) = 3.464102; with df = 2 the two-sided p-value has the
    # closed form 1 − T/√(2 + T²) = 1 − 3.464102/3.741657 = 0.074180.
    r = ratio_ci([100, 100, 100], [110, 120, 130])
    assert r.ratio == pytest.approx(1.2)
    assert r.df == pytest.approx(2.0)
    assert r.low == pytest.approx(0.951586, abs=1e-6)
    assert r.high == pytest.approx(1.448414, abs=1e-6)
    assert r.p_value == pytest.approx(0.074180, abs=1e-6)
    assert not r.significant
    assert r.text() == NO_DIFFERENCE


def test_equal_means_with_very_different_spread_use_hsu_df() -> None:
    # A = 99, 100, 101 (s² = 1), B = 80, 100, 120 (s² = 400): both means 100, ratio 1.
    # vA = 1/3, vB = 400/3: one variance of the mean is 400× the other at 2 df each, where
    # Welch's df (2.0099937) is liberal; Hsu's conservative min(dfA, dfB) = 2 is used.
    r = ratio_ci([99, 100, 101], [80, 100, 120])
    assert r.ratio == 1.0
    assert r.df == 2.0
    assert r.p_value == 1.0
    assert r.low < 1 < r.high
    assert not r.significant and r.text() == NO_DIFFERENCE
    # The interval is as wide as B's own relative uncertainty demands: B's t half-width is
    # t(0.975, 2)·20/√3 = 4.302653·11.547 = 49.68, so the ratio interval spans about 0.5 … 1.5.
    assert 0.45 < r.low < 0.55 and 1.45 < r.high < 1.55
    # Swapping the spreads changes which mean is uncertain, not the verdict.
    s = ratio_ci([80, 100, 120], [99, 100, 101])
    assert not s.significant and s.df == pytest.approx(r.df)


def test_welch_df_is_evaluated_under_the_null() -> None:
    # A: 98, 99, 100, 100, 101, 102 (n 6, mean 100, SS 10, s² 2, vA = 1/3, 5 df);
    # B: 88, 89, 90, 90, 90, 90, 91, 92 (n 8, mean 90, SS 10, s² 10/7, vB = 10/56, 7 df).
    # df at θ = 1: (vA + vB)² / (vA²/5 + vB²/7) = 0.2620465 / 0.0267776 = 9.78603;
    # at θ̂ = 0.9 it would be welch_df(vA, 6, vB, 8, 0.9) = 10.52, a different test.
    va, vb = 1 / 3, 10 / 56
    df_null = (va + vb) ** 2 / (va * va / 5 + vb * vb / 7)
    assert df_null == pytest.approx(9.78603, abs=1e-4)
    r = ratio_ci([98, 99, 100, 100, 101, 102], [88, 89, 90, 90, 90, 90, 91, 92])
    assert r.df == pytest.approx(df_null)
    assert r.df != pytest.approx(welch_df(va, 6, vb, 8, 0.9))
    from scipy import stats

    t = float(stats.t.ppf(0.975, df_null))
    root = math.sqrt(100**2 * vb + 90**2 * va - t * t * va * vb)
    denom = 100**2 - t * t * va
    assert r.low == pytest.approx((9000 - t * root) / denom)
    assert r.high == pytest.approx((9000 + t * root) / denom)
    # The test at θ = 1 and the interval agree: T = 10 / √(vA + vB) = 13.977.
    assert r.p_value == pytest.approx(2 * stats.t.sf(10 / math.sqrt(va + vb), df_null))
    assert r.significant and r.high < 1


def test_unequal_replicate_counts_use_each_sample_size() -> None:
    # A: 100, 102, 98 (n 3, mean 100, s² 4, vA = 4/3); B: 90, 91, 89, 90, 90 (n 5, mean 90,
    # s² 0.5, vB = 0.1). Each variance of the mean uses its own n (nothing pooled); vA is
    # 13× vB at 2 df, so Hsu's df = min(2, 4) = 2, not the pooled nA + nB − 2 = 6.
    a, b = [100, 102, 98], [90, 91, 89, 90, 90]
    r = ratio_ci(a, b)
    assert r.df == 2.0
    # Fieller: θ = [ab ± t √(a² vB + b² vA − t² vA vB)] / (a² − t² vA), t = t(0.975, 2).
    t = 4.302653
    root = math.sqrt(100**2 * 0.1 + 90**2 * 4 / 3 - t * t * 4 / 3 * 0.1)
    denom = 100**2 - t * t * 4 / 3
    assert r.low == pytest.approx((9000 - t * root) / denom, rel=1e-6)
    assert r.high == pytest.approx((9000 + t * root) / denom, rel=1e-6)
    assert r.high < 1 and r.significant
    assert r.text().startswith("-10.0% [")


def test_interval_excludes_one_exactly_when_welch_test_rejects() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        na, nb = rng.integers(2, 8, size=2)
        a = rng.normal(100, rng.uniform(0.5, 10), na)
        b = rng.normal(rng.uniform(95, 105), rng.uniform(0.5, 10), nb)
        r = ratio_ci(list(a), list(b))
        if r.undetermined:
            continue
        assert r.significant == (r.p_value < 0.05)


@pytest.mark.slow  # a simulation of thousands of comparisons
def test_false_significance_rate_with_unequal_sizes_and_spreads() -> None:
    """pyperf's pitfall: unequal sample sizes must not inflate "significant". With equal
    means, 3 noisy replicates against 10 quiet ones, about 5% of comparisons may be
    called significant — a pooled-variance t-test calls far more."""
    rng = np.random.default_rng(1)
    sims, called, pooled_called = 2000, 0, 0
    from scipy import stats

    for _ in range(sims):
        a = rng.normal(100, 10, 3)
        b = rng.normal(100, 1, 10)
        called += ratio_ci(list(a), list(b)).significant
        pooled_called += stats.ttest_ind(a, b, equal_var=True).pvalue < 0.05
    assert 0.02 < called / sims < 0.08
    assert pooled_called / sims > 0.12  # what the naive test would have claimed


def test_coverage_of_the_true_ratio() -> None:
    rng = np.random.default_rng(2)
    sims, covered = 2000, 0
    for _ in range(sims):
        a = rng.normal(100, 5, 4)
        b = rng.normal(130, 12, 7)
        r = ratio_ci(list(a), list(b))
        covered += r.low <= 1.3 <= r.high
    assert 0.92 < covered / sims < 0.98


def test_too_few_runs_and_unbounded_sets_are_undetermined() -> None:
    r = ratio_ci([100.0], [120, 121, 119])
    assert r.undetermined.startswith("too few runs") and not r.significant
    assert math.isnan(r.low) and r.text() == r.undetermined
    # A baseline whose own interval includes 0: Fieller's set is unbounded.
    u = ratio_ci([1, 2, 30], [10, 11, 12])
    assert u.undetermined.startswith("ratio undetermined") and not u.significant


def test_holm_step_down_by_hand() -> None:
    # Sorted: 0.005 ≤ 0.05/4 reject; 0.01 ≤ 0.05/3 reject; 0.03 > 0.05/2 stop; 0.04 kept.
    out = holm([0.01, 0.04, 0.03, 0.005])
    assert [x[0] for x in out] == [True, False, False, True]
    assert [x[1] for x in out] == pytest.approx([0.05 / 3, 0.05, 0.05 / 2, 0.05 / 4])
    assert holm([0.04, math.nan]) == [(True, 0.05), (False, 0.05)]


def test_family_of_one_is_the_plain_interval_and_holm_widens_a_family() -> None:
    a, b = [100, 101, 99, 100], [104, 105, 103, 104]
    single = ratio_ci(a, b)
    (fam,) = compare_family([(a, b)])
    assert (fam.low, fam.high, fam.significant) == (single.low, single.high, single.significant)
    # Three comparisons: the smallest p-value is tested at 0.05/3, with a wider interval.
    fam3 = compare_family([(a, b), (a, [100, 101, 99, 100.5]), (a, [99, 100, 101, 100])])
    assert fam3[0].confidence == pytest.approx(1 - 0.05 / 3)
    assert fam3[0].low < single.low and fam3[0].high > single.high
    assert fam3[0].significant and not fam3[1].significant and not fam3[2].significant
    assert fam3[1].text() == NO_DIFFERENCE


def test_a_noisy_b_never_gets_a_change_below_minus_100_percent() -> None:
    # B's own interval reaches below 0 (mean 30, sd 40, n=3): Fieller's lower end would be
    # a negative throughput ratio. The set is cut at 0, the only physically possible end.
    a, b = [100.0, 101.0, 99.0], [5.0, 10.0, 75.0]
    r = ratio_ci(a, b)
    assert r.low == 0.0 and r.high > 1.0 and not r.significant
    raw_low = ratio_ci(a, b, confidence=0.5).low  # at 50% the set does not reach 0 …
    assert 0 < raw_low < r.ratio  # … so the cut only ever replaces a negative end
    assert r.full_text().startswith("no significant difference (-100.0% … +27.1%")


def test_figures_without_noise_compare_exactly() -> None:
    from poolbench.stats.compare import constant, exact_ratio

    r = exact_ratio([325.5, 325.5], [214.0, 214.0])
    assert r.exact and r.ratio == r.low == r.high == 214.0 / 325.5 and r.significant
    assert r.text() == r.full_text() == "-34.3% (exact)"
    assert exact_ratio([2.0, 2.0], [2.0]).text() == "the same (exact)"
    assert not constant([1.0, 1.0000001]) and not constant([]) and not constant([math.nan])
    with pytest.raises(ValueError):
        exact_ratio([1.0, 2.0], [2.0, 2.0])  # noisy: the statistics' job, not this one
