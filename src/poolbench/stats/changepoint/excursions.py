"""One run that agrees with neither its neighbours before nor after it: an outlier, not a step.

A single disturbed run (a scrub started, another job ran) is one point far from the others.
Allowed as a segment it would be two steps, one down and one back; the minimum segment length
forbids that, but then it drags a neighbouring segment's mean. So each point is first
compared with its neighbours: the nearest one and the nearest two on each side,

    rᵢ = min over those groups |yᵢ − ȳ_group| / √(Vᵢ + 1/W_group),    Vᵢ = vᵢ + τ̂²,

the weighted mean and weight sum W of the group's points. A point at a step agrees with the
side it belongs to, a point on a drift with both, a point next to another disturbed run with
that run: only a point that agrees with no neighbour scores high. (Groups of two alone
failed at the ends: the first point of 100, 100, 60, 60, 60 was compared with 100 and 60
only.) Each rᵢ is divided by the median of the series' r: if every Vᵢ is off by one factor
(τ̂² from few differences is noisy), the ratio is not, which keeps the simulated threshold
honest (without it a flat series of 20 points at a within-run CV of 5% and 2% between runs
had an outlier flagged in 7.3% of 1,000 series instead of 5%). The threshold is the
Monte-Carlo test of `null` on the largest score: a series without any outlier has a point
flagged with probability α (per series, not per point). A flagged point is left out of the
search and the intervals and reported on its own. Two neighbouring disturbed runs are
neither outliers (they agree with each other) nor a segment (too short): their neighbours'
segment absorbs them, or a step's interval widens.
"""

from __future__ import annotations

import numpy as np

from poolbench.stats.changepoint.null import Weights
from poolbench.stats.changepoint.points import Array

WINDOW = 2


def _cumulative(a: Array) -> Array:
    return np.concatenate([np.zeros((a.shape[0], 1)), np.cumsum(a, axis=1)], axis=1)


def _raw(weights: Weights) -> Array:
    """r[row, i] of every point of every row (0 where a point has no neighbour): each group
    [a, b) of neighbours from cumulative sums, all points at once."""
    y, w = weights.y, weights.w
    rows, n = y.shape
    cw, cwy = _cumulative(w), _cumulative(w * y)
    i = np.arange(n)
    best: Array = np.full((rows, n), np.inf)
    for k in range(1, WINDOW + 1):
        for a, b, valid in (
            (np.maximum(i - k, 0), i, i >= 1),
            (np.minimum(i + 1, n), np.minimum(i + 1 + k, n), i + 1 < n),
        ):
            total = cw[:, b] - cw[:, a]
            mean = (cwy[:, b] - cwy[:, a]) / np.where(valid, total, 1.0)
            r = np.abs(y - mean) / np.sqrt(1 / w + 1 / np.where(valid, total, 1.0))
            best = np.where(valid, np.minimum(best, r), best)
    return np.where(np.isinf(best), 0.0, best)


def scores(weights: Weights) -> Array:
    """rᵢ / median(r) of every point of every row (module doc)."""
    raw = _raw(weights)
    scale = np.median(raw, axis=1, keepdims=True)
    return np.where(scale > 0, raw / np.where(scale > 0, scale, 1.0), 0.0)


def maxima(simulated: Weights) -> Array:
    """max rᵢ of every simulated row: the null distribution of the test statistic."""
    return np.asarray(scores(simulated).max(axis=1), dtype=float)
