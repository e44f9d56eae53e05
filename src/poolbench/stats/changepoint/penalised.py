"""The penalised fit's currency: costs with the scale profiled out, penalties set by simulation.

A model of the kept points (segments, possibly with a common trend) is scored by

    n · log C  +  β · (number of steps)  +  β_T · (1 if it has a trend),

C its weighted residual sum of squares (`partition`), weights 1/(vᵢ + τ̂²). n · log C is the
Gaussian likelihood with the variances' common scale profiled out: if every vᵢ + τ̂² is off by
one factor (τ̂² from a few differences is noisy), the scores are not. Without it the simulated
penalty was too small: a flat series of 20 points at a within-run CV of 5% and 2% between
runs reported a step in 7.3% of 1,000 series; with it, 5.3%.

Minimising this over segmentations is the complexity-penalised weighted L2 fit of asv (after
F. Friedrich, A. Kempe, V. Liebscher and G. Winkler, J. Comput. Graph. Statist. 17 (2008)
201–224) and PELT's penalised heteroscedastic mean-change cost (R. Killick, P. Fearnhead and
I. A. Eckley, J. Amer. Statist. Assoc. 107 (2012) 1590–1598), with one difference: the
penalties are not an information criterion (BIC assumes known variances and many points).
Each is the (1 − α) quantile, over series of this design simulated with no change (`null`),
of the gain it pays for:

- β, of M = max over k ≥ 1 of (n log C₀ − n log C_k) / k, C_k the best fit with k steps.
  The data may have steps only when their M exceeds β, so a flat series reports a step with
  probability α, and every step must then lower the score by β;
- β_T, of n log C₀ − n log C_T, C_T the best straight line (on the covariate or the point's
  position): a flat series prefers the trend to nothing with probability α.

Considering every k at once (not one split at a time, as binary segmentation does) also
finds a short excursion of several points, which no single split describes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from poolbench.stats.changepoint import null, partition
from poolbench.stats.changepoint.points import Array, Series

MIN_SIZE = 3  # points per segment (docs/statistics.md §8: one point is an outlier)
MAX_STEPS = 10  # the most steps one series is searched for


@dataclass(frozen=True)
class Penalties:
    step: float  # β
    trend: float  # β_T
    statistic: float  # the data's M
    k_max: int

    @property
    def steps_allowed(self) -> bool:
        return self.k_max >= 1 and self.statistic > self.step


def scaled(cost: Array, n: int) -> Array:
    """n · log C (module doc); a perfect fit (C = 0: identical values) scores as C = 10⁻³⁰⁰,
    so fits that are all perfect tie and the penalties decide."""
    return np.asarray(n * np.log(np.maximum(cost, 1e-300)), dtype=float)


def step_statistic(best: Array, n: int) -> Array:
    """M of each row of best[row, k] (the smallest cost with k steps); 0 for a flat row."""
    k = np.arange(1, best.shape[1])
    gains = (scaled(best[:, :1], n) - scaled(best[:, 1:], n)) / k
    gains = np.where(best[:, 1:] == np.inf, -np.inf, gains)
    return np.where(best[:, 0] > 0, gains.max(axis=1, initial=-np.inf), 0.0)


def line_costs(y: Array, w: Array, x: Array) -> tuple[Array, Array]:
    """(C₀, C_T) of each row: weighted residual sums of squares about the weighted mean and
    about the best straight line on x."""
    y = np.atleast_2d(y)
    total = w.sum(axis=1, keepdims=True)
    yc = y - (w * y).sum(axis=1, keepdims=True) / total
    xc = x[None, :] - (w * x[None, :]).sum(axis=1, keepdims=True) / total
    sxx = (w * xc * xc).sum(axis=1)
    sxy = (w * xc * yc).sum(axis=1)
    c0 = (w * yc * yc).sum(axis=1)
    explained = np.where(sxx > 0, sxy * sxy / np.where(sxx > 0, sxx, 1.0), 0.0)
    return c0, np.maximum(c0 - explained, 0.0)


def trend_gain(y: Array, w: Array, x: Array) -> Array:
    """n log C₀ − n log C_T of each row (0 for a flat row)."""
    c0, ct = line_costs(y, w, x)
    n = np.atleast_2d(y).shape[1]
    return np.where(c0 > 0, scaled(c0, n) - scaled(ct, n), 0.0)


def calibrate(sub: Series, fitted: null.Weights, alpha: float) -> Penalties:
    """β and β_T for this series' design, and the data's M (module doc)."""
    n = len(sub)
    k_max = min(n // MIN_SIZE - 1, MAX_STEPS)
    sims = null.simulate(sub, fitted, null.rng_for(sub, "steps"))
    trend = null.threshold(trend_gain(sims.y, sims.w, sub.x), alpha)
    if k_max < 1:
        return Penalties(np.inf, trend, 0.0, k_max)
    step = null.threshold(step_statistic(partition.best_costs(sims.y, sims.w, MIN_SIZE, k_max),
                                         n), alpha)  # fmt: skip
    data = step_statistic(partition.best_costs(fitted.y, fitted.w, MIN_SIZE, k_max), n)
    return Penalties(step, trend, float(data[0]), k_max)
