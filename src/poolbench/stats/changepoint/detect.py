"""Step changes in a history of measurements, each point weighted by its own uncertainty.

    history = detect(points)     # points: Sequence[Point], oldest first
    history.steps                # Step(index, label, ratio, low, high, …), after/before
    history.drift, history.outliers, history.segments, history.reason

The method, in order (docs/statistics.md §8 has its simulated false-alarm rate, power and
coverage):

1. **Each point's uncertainty** (`points`, `variance`): on the log scale, its own within-run
   variance (moderated across the series) plus a between-run variance τ² estimated from
   successive differences.
2. **Outlier points** (`excursions`): a point that agrees with neither its neighbours before
   nor after it, nor with the rest of its segment, is set aside and reported, so one
   disturbed run is not read as two steps.
3. **The search** (`partition`, `penalised`): the penalised piecewise-constant fit weighted by
   1/(vᵢ + τ̂²), its penalties set for this series by a Monte-Carlo test (`null`) so that a
   flat series reports a step with probability α.
4. **Step or drift** (`choice.choose`): steps, a trend on the covariate (or the point's
   position), both, or neither, whichever scores lowest (steps must beat the trend alone by
   a clear margin); so a gradual change is reported as a drift, not a staircase.
5. **Intervals** (`intervals`, `choice.confirm`): every step as a ratio after/before with its
   random-effects interval; a step or drift whose interval includes no change is not
   reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from poolbench.stats.changepoint import assemble, excursions, null
from poolbench.stats.changepoint.choice import Points, candidates, choose, detrended
from poolbench.stats.changepoint.penalised import MIN_SIZE, calibrate
from poolbench.stats.changepoint.points import Point, Series, prepare
from poolbench.stats.changepoint.result import History

ALPHA = 0.05
MIN_FOR_OUTLIERS = 5  # with fewer points, no point has neighbours enough to be told apart


def _suspects(series: Series, fitted: null.Weights, alpha: float) -> assemble.Flags:
    """Points whose neighbours disagree with them (`excursions`), before the segment check."""
    n = len(series)
    if n < MIN_FOR_OUTLIERS:
        return assemble.Flags(np.array([], dtype=np.intp), np.zeros(n), math.inf)
    sims = null.simulate(series, fitted, null.rng_for(series, "outliers"))
    limit = null.threshold(excursions.maxima(sims), alpha)
    scores, _ = excursions.scores(fitted)
    return assemble.Flags(np.flatnonzero(scores[0] > limit), scores[0], limit)


def _outliers(series: Series, fitted: null.Weights, alpha: float) -> assemble.Flags:
    """The suspects that also disagree with their own segment in the fit of all points."""
    flags = _suspects(series, fitted, alpha)
    if not len(flags.out):
        return flags
    pts = Points(fitted.y[0], fitted.v[0], series.x, fitted.w[0])
    best = candidates(pts, calibrate(series, fitted, alpha))[0]
    y = detrended(pts) if best.trend else pts.y
    suspects = [int(i) for i in flags.out]
    kept = excursions.confirmed(y, pts.w, suspects, best.cuts, alpha, MIN_SIZE)
    return assemble.Flags(np.array(kept, dtype=np.intp), flags.scores, flags.limit)


def detect(points: Sequence[Point], *, alpha: float = ALPHA) -> History:
    """Steps, a drift and outlier points of one series, oldest point first (module doc)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha} is not between 0 and 1")
    series = prepare(points)
    if len(series) < 2:
        return assemble.too_short(series, alpha)
    fitted = null.weigh(series.y, series.s2, series.d, series.n)
    flags = _outliers(series, fitted, alpha)
    kept = np.setdiff1d(np.arange(len(series)), flags.out)
    sub = series.take(kept)
    sub_fit = null.weigh(sub.y, sub.s2, sub.d, sub.n)
    pts = Points(sub_fit.y[0], sub_fit.v[0], sub.x, sub_fit.w[0])
    pen = calibrate(sub, sub_fit, alpha)
    return assemble.history(
        assemble.Inputs(series, kept, pts, float(sub_fit.tau2[0]), alpha),
        pen, choose(pts, pen, alpha), flags,
    )  # fmt: skip
