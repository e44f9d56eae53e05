"""One run that agrees with neither its neighbours before nor after it: an outlier, not a step.

A single disturbed run (a scrub started, another job ran) is one point far from the others.
Allowed as a segment it would be two steps, one down and one back; the minimum segment length
forbids that, but then it drags a neighbouring segment's mean. So each point is first
compared with its neighbours, the nearest two on each side separately:

    rᵢ = min over sides |yᵢ − ȳ_side| / √(Vᵢ + 1/W_side),    Vᵢ = vᵢ + τ̂²,

the weighted mean and weight sum W of the side's points. A point at a step agrees with the
side it belongs to, a point on a drift with both, so only a point that agrees with neither
side scores high. The first and the last point have one side only; they are also compared
with their single nearest neighbour, so the last of 100, 100, 60, 60 (the first two runs
after a change) agrees with the 60 before it instead of being compared with 100 and 60.
(Comparing every point with single neighbours too was tried: two runs that happen to agree
closely then score near 0, the median below falls, and a 40% step at 10 points was missed
in 1% of series, its end points flagged instead.) Two neighbouring disturbed runs inside a
series are both flagged (neither agrees with its other side).

Each rᵢ is divided by the median of the series' r: if every Vᵢ is off by one factor (τ̂² from
few differences is noisy), the ratio is not, which keeps the simulated threshold honest
(without it a flat series of 20 points at a within-run CV of 5% and 2% between runs had an
outlier flagged in 7.3% of 1,000 series instead of 5%). The threshold is the Monte-Carlo test
of `null` on the largest score: a series without any outlier has a point flagged with
probability α (per series, not per point).

A point above the threshold is then checked against its own segment in the fit of all the
points (`confirmed`): it stays an outlier only if it also differs from the rest of its
segment (a two-sided z-test at level α with the points' own variances, not divided by the
median: a quiet stretch makes every small difference look large against it), and, when that
segment has only the minimum number of points, only if the rest of it agrees with a
neighbouring segment (else the segment is a real level, which its removal would destroy).
The first of three runs after a step has the old level on one side and only two new runs on
the other; a chance disagreement with those two removed it and, with it, the step (a 40% step
at 10 points was missed in 1% of series that way). An outlier big enough to make the fit
carve a segment of three around it is still an outlier: its two neighbours agree with the
levels beside them. A confirmed outlier is left out of the search and the intervals and
reported on its own.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

from poolbench.stats.changepoint.null import Weights
from poolbench.stats.changepoint.points import Array

WINDOW = 2


def _cumulative(a: Array) -> Array:
    return np.concatenate([np.zeros((a.shape[0], 1)), np.cumsum(a, axis=1)], axis=1)


def _groups(n: int) -> list[tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.bool_]]]:
    """The neighbour groups [a, b) of every point, with where each applies: the nearest two
    on each side (one where only one is there), and at the two ends, where only one side
    exists, also the single nearest point (module doc)."""
    i = np.arange(n)
    left = (np.maximum(i - WINDOW, 0), i, i >= 1)
    right = (np.minimum(i + 1, n), np.minimum(i + 1 + WINDOW, n), i + 1 < n)
    first = (np.minimum(i + 1, n), np.minimum(i + 2, n), (i == 0) & (n > 1))
    last = (np.maximum(i - 1, 0), i, (i == n - 1) & (n > 1))
    return [left, right, first, last]


def _raw(weights: Weights) -> Array:
    """r[row, i] of every point of every row (0 where a point has no neighbour): each group
    [a, b) of neighbours from cumulative sums, all points at once."""
    y, w = weights.y, weights.w
    rows, n = y.shape
    cw, cwy = _cumulative(w), _cumulative(w * y)
    best: Array = np.full((rows, n), np.inf)
    for a, b, valid in _groups(n):
        total = np.where(valid, cw[:, b] - cw[:, a], 1.0)
        mean = (cwy[:, b] - cwy[:, a]) / total
        r = np.abs(y - mean) / np.sqrt(1 / w + 1 / total)
        best = np.where(valid, np.minimum(best, r), best)
    return np.where(np.isinf(best), 0.0, best)


def scores(weights: Weights) -> tuple[Array, Array]:
    """rᵢ / median(r) of every point of every row, and each row's median (module doc)."""
    raw = _raw(weights)
    scale = np.median(raw, axis=1, keepdims=True)
    return np.where(scale > 0, raw / np.where(scale > 0, scale, 1.0), 0.0), scale[:, 0]


def maxima(simulated: Weights) -> Array:
    """max rᵢ of every simulated row: the null distribution of the test statistic."""
    return np.asarray(scores(simulated)[0].max(axis=1), dtype=float)


def _differ(y: Array, w: Array, a: list[int], b: list[int], z: float) -> bool:
    """Whether the weighted means of a and b differ by a two-sided z-test (z its quantile)."""
    wa, wb = float(w[a].sum()), float(w[b].sum())
    ma, mb = float(np.sum(w[a] * y[a]) / wa), float(np.sum(w[b] * y[b]) / wb)
    return abs(ma - mb) / float(np.sqrt(1 / wa + 1 / wb)) > z


def confirmed(y: Array, w: Array, suspects: list[int], cuts: tuple[int, ...], alpha: float,
              min_size: int) -> list[int]:  # fmt: skip
    """The suspects that are outliers in the fit of all the points (`cuts`; module doc)."""
    from scipy import special

    z = float(special.ndtri(1 - alpha / 2))
    bounds = [0, *cuts, len(y)]
    spans = [[k for k in range(a, b) if k not in suspects] for a, b in itertools.pairwise(bounds)]
    out = []
    for i in suspects:
        j = max(k for k in range(len(bounds) - 1) if bounds[k] <= i)
        others = spans[j]
        if len(others) < WINDOW:
            out.append(i)
        elif not _differ(y, w, [i], others, z):
            continue
        elif bounds[j + 1] - bounds[j] > min_size or not all(
            _differ(y, w, others, spans[k], z) for k in (j - 1, j + 1) if 0 <= k < len(spans)
        ):
            out.append(i)
    return out
