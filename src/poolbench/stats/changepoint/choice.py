"""Which model describes the kept points, and which of its changes the intervals can tell.

**The candidates** (`candidates`), each scored as `penalised` says (n log C plus β per step
and β_T for a trend): no change; a trend; for every k the best k steps (`partition`); and for
every k the best k steps beside a trend (their places found on the series with the trend
taken out, then the slope and the levels fitted together). Models with steps are candidates
only when the search's statistic passed its penalty, so a flat series reports a step with
probability α whatever the trend does. The lowest score is chosen: a drift told apart from a
step by one stated criterion. A gradual change (a pool filling, fragmentation) fits a trend
better than a staircase, whose every step costs β; a step fits steps better than a line,
which misses its corners. Steps must beat the trend by at least `CLOSE`, else the change is
reported as the drift: a likelihood ratio below e is "not worth more than a bare mention" (R.
E. Kass and A. E. Raftery, J. Amer. Statist. Assoc. 90 (1995) 773–795), and a step claims
more than a drift does (an event at one point in time). On a 10% drift over 20 points at a
within-run CV of 5% and 2% between runs this halved the series called a step (17% to 9%)
and cost a 10% step 5% of its detections (96% to 91%). When the best model with steps and
the best without are that close, the answer says so.

**The intervals** (`confirm`): every step of the chosen model gets its interval (without a
trend, `intervals.step` from the two segments beside it; beside a trend, from the joint
weighted model), and so does the trend's slope. A drift whose interval includes no change is
dropped (the steps are then re-estimated alone); while a step's interval includes no change,
the least certain step is removed, its two segments merged, and the rest re-estimated. No
step is reported where the intervals cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from poolbench.stats.changepoint import intervals, partition
from poolbench.stats.changepoint.intervals import Estimate
from poolbench.stats.changepoint.penalised import MIN_SIZE, Penalties, line_costs, scaled
from poolbench.stats.changepoint.points import Array

CLOSE = 2.0  # on the n log C scale: twice a log-likelihood ratio of 1


@dataclass(frozen=True)
class Points:
    """The kept points of a series: log means, within-run variances, x, search weights."""

    y: Array
    v: Array
    x: Array
    w: Array

    def sizes(self, cuts: list[int]) -> list[int]:
        bounds = [0, *cuts, len(self.y)]
        return [b - a for a, b in zip(bounds, bounds[1:], strict=False)]

    def part(self, a: int, b: int) -> tuple[Array, Array]:
        return self.y[a:b], self.v[a:b]


@dataclass(frozen=True)
class Model:
    cuts: tuple[int, ...]
    trend: bool
    score: float


@dataclass(frozen=True)
class Choice:
    """The confirmed changes, what was dropped, and the models that competed."""

    cuts: list[int]
    steps: list[Estimate]
    drift: Estimate | None
    chosen: Model
    dropped: list[tuple[int, Estimate]] = field(default_factory=list)
    rival: Model | None = None  # the best model of the other kind (steps / no steps)

    @property
    def close_call(self) -> bool:
        return self.rival is not None and abs(self.rival.score - self.chosen.score) < CLOSE


def _wls_rss(pts: Points, design: Array) -> float:
    w = pts.w
    beta = np.linalg.lstsq(design * np.sqrt(w)[:, None], pts.y * np.sqrt(w), rcond=None)[0]
    return float(np.sum(w * (pts.y - design @ beta) ** 2))


def detrended(pts: Points) -> Array:
    design = intervals.segments_and_slope([len(pts.y)], pts.x)
    w = pts.w
    beta = np.linalg.lstsq(design * np.sqrt(w)[:, None], pts.y * np.sqrt(w), rcond=None)[0]
    return np.asarray(pts.y - design[:, 1] * beta[1])


def _score(cost: float, n: int) -> float:
    return float(scaled(np.array([cost]), n)[0])


def candidates(pts: Points, pen: Penalties) -> list[Model]:
    """Every candidate model with its score, best first (module doc)."""
    n = len(pts.y)
    c0, ct = line_costs(pts.y, pts.w[None, :], pts.x)
    models = [Model((), False, _score(c0[0], n)), Model((), True, _score(ct[0], n) + pen.trend)]
    if pen.steps_allowed:
        best, cuts = partition.every_fit(pts.y, pts.w, MIN_SIZE, pen.k_max)
        _, beside = partition.every_fit(detrended(pts), pts.w, MIN_SIZE, pen.k_max)
        for k in range(1, pen.k_max + 1):
            if cuts[k]:
                models.append(Model(tuple(cuts[k]), False, _score(best[k], n) + pen.step * k))
            if beside[k]:
                design = intervals.segments_and_slope(pts.sizes(beside[k]), pts.x)
                score = _score(_wls_rss(pts, design), n) + pen.step * k + pen.trend
                models.append(Model(tuple(beside[k]), True, score))
    return sorted(models, key=lambda m: m.score)


def welch_steps(pts: Points, cuts: list[int]) -> list[Estimate]:
    bounds = [0, *cuts, len(pts.y)]
    return [intervals.step(pts.part(bounds[j], bounds[j + 1]),
                           pts.part(bounds[j + 1], bounds[j + 2]))
            for j in range(len(cuts))]  # fmt: skip


def _contrasts(levels: int) -> tuple[Array, list[Array]]:
    """The slope's contrast and each step's (level j+1 − level j) in the joint design."""
    eye = np.eye(levels + 1)
    return eye[-1], [eye[j + 1] - eye[j] for j in range(levels - 1)]


def _estimates(pts: Points, cuts: list[int], trend: bool) -> tuple[list[Estimate],
                                                                  Estimate | None]:  # fmt: skip
    if not trend:
        return welch_steps(pts, cuts), None
    design = intervals.segments_and_slope(pts.sizes(cuts), pts.x)
    fit = intervals.linear(pts.y, pts.v, design)
    slope, steps = _contrasts(len(cuts) + 1)
    return [fit.estimate(c) for c in steps], fit.estimate(slope)


def confirm(pts: Points, chosen: Model, alpha: float) -> Choice:
    """The chosen model's changes that the intervals can tell (module doc)."""
    cuts, trend = list(chosen.cuts), chosen.trend
    dropped: list[tuple[int, Estimate]] = []
    while True:
        steps, slope = _estimates(pts, cuts, trend)
        if slope is not None and slope.p_value >= alpha:
            trend = False
            continue
        if not steps or max(s.p_value for s in steps) < alpha:
            return Choice(cuts, steps, slope, chosen, dropped)
        weakest = int(np.argmax([s.p_value for s in steps]))
        dropped.append((cuts.pop(weakest), steps[weakest]))


def choose(pts: Points, pen: Penalties, alpha: float) -> Choice:
    """The best candidate, confirmed, with the best rival of the other kind."""
    models = candidates(pts, pen)
    chosen = models[0]
    trend = next((m for m in models if m.trend and not m.cuts), None)
    if chosen.cuts and trend is not None and trend.score - chosen.score < CLOSE:
        chosen = trend  # the gradual explanation, when steps do not clearly do better
    rival = next((m for m in models if bool(m.cuts) != bool(chosen.cuts)), None)
    found = confirm(pts, chosen, alpha)
    return Choice(found.cuts, found.steps, found.drift, chosen, found.dropped, rival)
