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
   nor after it is set aside and reported, so one disturbed run is not read as two steps.
3. **The search** (`partition`, `penalised`): the penalised piecewise-constant fit weighted by
   1/(vᵢ + τ̂²), its penalties set for this series by a Monte-Carlo test (`null`) so that a
   flat series reports a step with probability α.
4. **Step or drift** (`choice.choose`): steps, a trend on the covariate (or the point's
   position), both, or neither, whichever scores lowest; so a gradual change is reported as a
   drift, not a staircase.
5. **Intervals** (`intervals`, `choice.confirm`): every step as a ratio after/before with its
   random-effects interval; a step or drift whose interval includes no change is not
   reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from poolbench.stats.changepoint import assemble, excursions, null
from poolbench.stats.changepoint.choice import Points, choose
from poolbench.stats.changepoint.penalised import calibrate
from poolbench.stats.changepoint.points import Array, Point, Series, prepare
from poolbench.stats.changepoint.result import History

ALPHA = 0.05
MIN_FOR_OUTLIERS = 5  # with fewer points, no point has neighbours enough to be told apart


def outliers(series: Series, fitted: null.Weights, alpha: float) -> tuple[NDArray[np.intp],
                                                                         Array, float]:  # fmt: skip
    """The outlier points, every point's score, and the threshold (`excursions`)."""
    if len(series) < MIN_FOR_OUTLIERS:
        return np.array([], dtype=np.intp), np.zeros(len(series)), math.inf
    sims = null.simulate(series, fitted, null.rng_for(series, "outliers"))
    limit = null.threshold(excursions.maxima(sims), alpha)
    scores = excursions.scores(fitted)[0]
    return np.flatnonzero(scores > limit), scores, limit


def detect(points: Sequence[Point], *, alpha: float = ALPHA) -> History:
    """Steps, a drift and outlier points of one series, oldest point first (module doc)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha} is not between 0 and 1")
    series = prepare(points)
    if len(series) < 2:
        return assemble.too_short(series, alpha)
    fitted = null.weigh(series.y, series.s2, series.d, series.n)
    out, scores, limit = outliers(series, fitted, alpha)
    kept = np.setdiff1d(np.arange(len(series)), out)
    sub = series.take(kept)
    sub_fit = null.weigh(sub.y, sub.s2, sub.d, sub.n)
    pts = Points(sub_fit.y[0], sub_fit.v[0], sub.x, sub_fit.w[0])
    pen = calibrate(sub, sub_fit, alpha)
    return assemble.history(
        assemble.Inputs(series, kept, pts, float(sub_fit.tau2[0]), alpha),
        pen, choose(pts, pen, alpha), assemble.Flags(out, scores, limit),
    )  # fmt: skip
