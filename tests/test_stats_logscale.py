"""Latency percentiles across replicates: the log-scale interval and comparison keep their
promise (stats/logscale.py; docs/statistics.md §7), checked by simulation through the code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from poolbench.stats import logscale
from poolbench.stats.policy import ReplicatePolicy

POLICY = ReplicatePolicy(0.05, 3, 10)


def _lognormal(rng: np.random.Generator, cv: float, size: int) -> list[float]:
    sigma = math.sqrt(math.log(1 + cv * cv))
    return [float(x) for x in 200_000.0 * np.exp(rng.normal(0.0, sigma, size))]


def _planned(rng: np.random.Generator) -> int:
    """How many replicates the throughput figure's Stein rule asks for (CV 6%): the latency
    rides on that count, as in a real run."""
    tp = [float(x) for x in rng.normal(1000.0, 60.0, 3)]
    return POLICY.planned(tp)


@pytest.mark.parametrize("cv", [0.15, 0.5, 1.0])
def test_geometric_mean_interval_covers_95_percent(cv: float) -> None:
    rng = np.random.default_rng(7)
    hits, trials = 0, 2000
    for _ in range(trials):
        s = logscale.summarize(POLICY, _lognormal(rng, cv, _planned(rng)))
        hits += s.ci_low <= 200_000.0 <= s.ci_high  # the true geometric mean (median)
    assert 0.935 <= hits / trials <= 0.965, hits / trials


def test_the_arithmetic_interval_would_not_keep_it_at_high_cv() -> None:
    """The check can tell: the arithmetic-scale interval of the same replicates under-covers."""
    rng = np.random.default_rng(8)
    cv, hits, trials = 1.0, 0, 2000
    true_mean = 200_000.0 * math.sqrt(1 + cv * cv)  # of a lognormal with median 200,000
    for _ in range(trials):
        s = POLICY.summarize(_lognormal(rng, cv, 3))
        hits += s.ci_low <= true_mean <= s.ci_high
    assert hits / trials < 0.92


def test_interval_is_asymmetric_around_the_geometric_mean() -> None:
    values = [100.0, 200.0, 400.0]
    s = logscale.summarize(POLICY, values)
    assert s.gmean == pytest.approx(200.0)
    # t(0.975, 2) = 4.303; sd of log2-spaced logs = ln 2; half-width on the log scale:
    half = 4.302652729911275 * math.log(2) / math.sqrt(3)
    assert s.ci_low == pytest.approx(200.0 / math.exp(half))
    assert s.ci_high == pytest.approx(200.0 * math.exp(half))
    assert s.factor == pytest.approx(math.exp(half))


def test_refusals_carry_a_reason_never_a_number() -> None:
    assert "not positive finite" in logscale.summarize(POLICY, [1.0, 0.0, 2.0]).reason
    assert "identical" in logscale.summarize(POLICY, [5.0, 5.0, 5.0]).reason
    assert "fewer than 2" in logscale.summarize(POLICY, [5.0]).reason
    r = logscale.compare_family([([1.0, 2.0, 3.0], [1.0, math.nan, 2.0])])[0]
    assert r.undetermined and math.isnan(r.low)


def test_family_false_positives_and_power() -> None:
    rng = np.random.default_rng(9)
    false_pos, found, trials = 0, 0, 1500
    for _ in range(trials):
        base = _lognormal(rng, 0.3, 4)
        same = [_lognormal(rng, 0.3, 4) for _ in range(3)]
        fam = logscale.compare_family([(base, o) for o in same], first_stage=3)
        false_pos += any(r.significant for r in fam)
        slower = [4.0 * v for v in _lognormal(rng, 0.3, 4)]
        r = logscale.compare_family([(base, slower)], first_stage=3)[0]
        found += r.significant and r.low > 1.0
    assert false_pos / trials <= 0.055, false_pos / trials
    assert found / trials > 0.8, found / trials


def test_ratio_of_geometric_means_by_hand() -> None:
    a, b = [100.0, 110.0, 120.0], [200.0, 230.0, 250.0]
    r = logscale.compare_family([(a, b)])[0]
    ga = math.exp(sum(map(math.log, a)) / 3)
    gb = math.exp(sum(map(math.log, b)) / 3)
    assert r.ratio == pytest.approx(gb / ga) and r.significant
    assert r.low < r.ratio < r.high and r.log_scale
    # On the log scale the detectable change is exp(λ·se) − 1, se of the difference of logs.
    from poolbench.stats.power import noncentrality

    la = [math.log(v) for v in a]
    lb = [math.log(v) for v in b]
    se = math.sqrt(float(np.var(la, ddof=1)) / 3 + float(np.var(lb, ddof=1)) / 3)
    lam = noncentrality(r.df, 1 - r.confidence, 0.8)
    assert r.se_rel == pytest.approx(se)
    # ... with the variance of the difference at its 95% upper bound with the test's df,
    # se² · df / χ²(0.05, df) (issue 28: the estimate itself overstated the resolution).
    df = math.floor(r.df)
    up = se * math.sqrt(df / stats.chi2.ppf(0.05, df))
    assert r.detectable == pytest.approx(math.expm1(lam * up), rel=1e-6)
    assert r.detectable > math.expm1(lam * se)
