"""The p99 of all I/Os of several runs, from their fio histograms (stats/pooled.py;
docs/statistics.md §7): the exact percentile of the concatenated completions, and an
interval that covers the percentile of the runs' common latency distribution."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import optimize, stats

from poolbench.stats import pooled
from poolbench.workloads.fioparse import percentile_from_bins


def _fio_bins(v: np.ndarray) -> dict[int, int]:
    """fio's histogram of latencies (ns): 64 bins per power of two, each named by its value."""
    v = np.maximum(v, 1.0)
    e = np.floor(np.log2(v))
    b = (2**e * (1 + np.floor((v / 2**e - 1) * 64) / 64)).astype(np.int64)
    keys, counts = np.unique(b, return_counts=True)
    return dict(zip(keys.tolist(), counts.tolist(), strict=True))


@pytest.mark.parametrize("q", [50.0, 90.0, 99.0, 99.9])
def test_pooled_percentile_is_the_percentile_of_all_completions(q: float) -> None:
    rng = np.random.default_rng(int(q * 10))
    runs = [rng.integers(1_000, 50_000, size) for size in (3_000, 5_000, 800)]
    runs[1] = runs[1] * 2  # a slower run: it has more of the slow I/Os, not one vote
    hists = [dict(Counter(r.tolist())) for r in runs]  # every value its own bin: exact
    got = pooled.pooled_percentile(hists, q)
    everything = np.sort(np.concatenate(runs))
    # fio's definition (and fioparse's): the first value whose running count reaches q%.
    assert got.value == everything[math.ceil(q / 100 * len(everything)) - 1]
    assert got.value == percentile_from_bins(pooled.merge(hists), q)
    assert got.ios == len(everything) and got.runs == 3
    assert got.low <= got.value <= got.high
    # Not the mean of the runs' own percentiles.
    per_run = [percentile_from_bins(h, q) for h in hists]
    assert got.value != pytest.approx(sum(p or 0.0 for p in per_run) / 3, rel=1e-9)


def test_refusals_and_labels() -> None:
    assert not pooled.pooled_percentile([{1000: 5}, {}]).determined
    one = pooled.pooled_percentile([{1000: 99, 2_000_000: 1}])
    assert one.reason == "one run: no interval" and math.isnan(one.low)
    two = pooled.pooled_percentile([{1_000_000: 990, 3_000_000: 10}, {1_000_000: 1000}])
    assert two.text().startswith("p99 of all I/Os 1.00 ms (95% CI ")
    assert two.as_dict()["scale"] == "pooled"


def _true_p99(mu: float, s: float, tau: float) -> float:
    """The p99 of the runs' common distribution: log-latency N(mu + u, s²), u ~ N(0, tau²)
    per run (a run's tail moves with its disturbances)."""
    z, w = np.polynomial.hermite_e.hermegauss(60)
    w = w / w.sum()

    def f(lx: float) -> float:
        return float(np.sum(w * stats.norm.cdf((lx - mu - tau * z) / s))) - 0.99

    return math.exp(optimize.brentq(f, mu - 10, mu + 20))


@pytest.mark.slow  # a simulation of thousands of studies (the whole suite runs it)
@pytest.mark.parametrize("n", [3, 10])
def test_the_interval_covers_the_p99_of_all_io(n: int) -> None:
    rng = np.random.default_rng(90 + n)
    mu, s, tau = math.log(200_000), 0.5, 0.1
    truth = next(iter(_fio_bins(np.array([_true_p99(mu, s, tau)]))))  # its fio bin
    sims, covered = 300, 0
    for _ in range(sims):
        runs = [_fio_bins(np.exp(rng.normal(mu + rng.normal(0, tau), s, 2_000))) for _ in range(n)]
        got = pooled.pooled_percentile(runs)
        covered += got.low <= truth <= got.high
    # 300 samples: SE 1.3% at 95%; simulated full size 94–96% (docs/statistics.md §7).
    assert 0.91 <= covered / sims <= 0.99


def _woodruff_alone(runs: list[dict[int, int]]) -> tuple[float, float]:
    """The interval before issue 28's fix: Woodruff's alone, at 95%."""
    from poolbench.stats import tdist

    merged = pooled.merge(runs)
    keys = sorted(merged)
    cum = list(np.cumsum([merged[k] for k in keys]).tolist())
    value = pooled._quantile(keys, cum, cum[-1], 0.99)
    t = tdist.quantile(0.975, len(runs) - 1)
    low, high, _ = pooled._woodruff(runs, [sum(b.values()) for b in runs], keys, cum, value,
                                    0.99, t)  # fmt: skip
    return low, high


@pytest.mark.slow  # a simulation of thousands of studies (the whole suite runs it)
def test_the_interval_covers_when_runs_differ_by_30_percent() -> None:
    """τ = 0.3 (a run's p99 ±30%), 10 runs: Woodruff's interval alone covered ~90%; the
    union with the log jackknife must cover ≥ 93.5% (full size: docs/statistics.md §7a)."""
    rng = np.random.default_rng(2893)
    mu, s, tau = math.log(200_000), 0.5, 0.3
    truth = next(iter(_fio_bins(np.array([_true_p99(mu, s, tau)]))))
    sims, covered, old = 400, 0, 0
    for _ in range(sims):
        runs = [_fio_bins(np.exp(rng.normal(mu + rng.normal(0, tau), s, 2_000)))
                for _ in range(10)]  # fmt: skip
        got = pooled.pooled_percentile(runs)
        covered += got.low <= truth <= got.high
        lo, hi = _woodruff_alone(runs)
        old += lo <= truth <= hi
    # 400 samples: SE 0.9% at 96%.
    assert covered / sims >= 0.935, covered / sims
    assert old / sims < 0.93 and old < covered, old / sims  # the same check fails the old


def _runs(rng: np.random.Generator, scale: float, n: int, tau: float = 0.1) -> list[dict[int, int]]:
    mu = math.log(200_000 * scale)
    return [_fio_bins(np.exp(rng.normal(mu + rng.normal(0, tau), 0.5, 2_000))) for _ in range(n)]


def test_difference_finds_a_halved_p99_and_rarely_one_that_is_not_there() -> None:
    rng = np.random.default_rng(77)
    half = pooled.difference(_runs(rng, 0.5, 3), _runs(rng, 1.0, 3))
    assert half.a_lower and not half.a_higher
    assert half.ratio == pytest.approx(0.5, rel=0.15)
    assert half.text().startswith("p99 of all I/Os 0.") and "lower beyond the noise" in half.text()
    assert half.a.confidence == 0.975  # each interval at 1 − α/2
    sims = 300
    false = 0
    for _ in range(sims):
        d = pooled.difference(_runs(rng, 1.0, 3), _runs(rng, 1.0, 3))
        false += d.a_lower or d.a_higher
    assert false / sims <= 0.05, false / sims  # Bonferroni: at most α in all
    same = pooled.difference(_runs(rng, 1.0, 3), _runs(rng, 1.0, 3))
    if not (same.a_lower or same.a_higher):
        assert "not told apart, 97.5% intervals overlap" in same.text()
