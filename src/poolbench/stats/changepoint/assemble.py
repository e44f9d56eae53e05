"""From what the method decided to the typed answer: indexes, ratios, reasons (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from poolbench.stats import safemath
from poolbench.stats.changepoint import intervals, partition
from poolbench.stats.changepoint.choice import Choice, Points, welch_steps
from poolbench.stats.changepoint.intervals import Estimate
from poolbench.stats.changepoint.penalised import MIN_SIZE, Penalties
from poolbench.stats.changepoint.points import Array, Series
from poolbench.stats.changepoint.result import Drift, History, Outlier, Segment, Step


@dataclass(frozen=True)
class Inputs:
    series: Series
    kept: NDArray[np.intp]  # the indexes of the points that are not outliers
    pts: Points
    tau2: float
    alpha: float

    @property
    def confidence(self) -> float:
        return 1 - self.alpha

    def where(self, cut: int) -> str:
        i = int(self.kept[cut])
        return self.series.labels[i] or f"point {i + 1}"


@dataclass(frozen=True)
class Flags:
    out: NDArray[np.intp]
    scores: Array
    limit: float


def _exp(est: Estimate, confidence: float) -> tuple[float, float, float]:
    low, high = est.bounds(confidence)
    return safemath.exp(est.value), safemath.exp(low), safemath.exp(high)


def _pct(est: Estimate, confidence: float) -> str:
    r, low, high = (100 * (x - 1) for x in _exp(est, confidence))
    return f"{r:+.1f}% [{low:+.1f}%, {high:+.1f}%]"


def too_short(series: Series, alpha: float) -> History:
    return History(len(series), (), (), None, (), math.nan, 1 - alpha,
                   f"{len(series)} point(s): a series needs at least 2", ())  # fmt: skip


def _segments(inp: Inputs, cuts: list[int]) -> tuple[Segment, ...]:
    bounds = [0, *cuts, len(inp.kept)]
    starts = [0] + [int(inp.kept[c]) for c in cuts]
    ends = [s - 1 for s in starts[1:]] + [len(inp.series) - 1]
    out = []
    for j, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        ratio, low, high = _exp(intervals.level(*inp.pts.part(a, b)), inp.confidence)
        out.append(Segment(starts[j], ends[j], b - a, ratio, low, high))
    return tuple(out)


def _steps(inp: Inputs, choice: Choice) -> tuple[Step, ...]:
    out = []
    for cut, est in zip(choice.cuts, choice.steps, strict=True):
        i = int(inp.kept[cut])
        ratio, low, high = _exp(est, inp.confidence)
        out.append(Step(i, inp.series.labels[i], inp.series.labels[int(inp.kept[cut - 1])],
                        ratio, low, high, est.p_value, est.df))  # fmt: skip
    return tuple(out)


def _drift(inp: Inputs, est: Estimate | None) -> Drift | None:
    if est is None:
        return None
    per, low, high = _exp(est, inp.confidence)
    span = float(inp.pts.x.max() - inp.pts.x.min())
    whole = Estimate(est.value * span, est.se * span, est.df)
    total, t_low, t_high = _exp(whole, inp.confidence)
    unit = "covariate unit" if inp.series.covariate else "point"
    return Drift(per, low, high, unit, total, t_low, t_high, est.p_value)


def _outliers(inp: Inputs, segments: tuple[Segment, ...], flags: Flags) -> tuple[Outlier, ...]:
    out = []
    for i in flags.out:
        seg = next(s for s in segments if s.start <= i <= s.end)
        ratio = math.exp(float(inp.series.y[i])) / seg.level
        label = inp.series.labels[i]
        out.append(Outlier(int(i), label, ratio, float(flags.scores[i]), flags.limit))
    return tuple(out)


def _likeliest(inp: Inputs) -> str:
    """The single step the search would place first, with its interval, for the reason."""
    cut = partition.changes(inp.pts.y, inp.pts.w, MIN_SIZE, 1)[0]
    est = welch_steps(inp.pts, [cut])[0]
    return f"the likeliest single step, from {inp.where(cut)}, is {_pct(est, inp.confidence)}"


def _cut_names(inp: Inputs, cuts: tuple[int, ...] | list[int]) -> str:
    return ", ".join(inp.where(c) for c in cuts)


def _reason(inp: Inputs, pen: Penalties, choice: Choice) -> str:
    if choice.steps:
        return ""
    used = len(inp.kept)
    if used < 2 * MIN_SIZE:
        return (f"too few points for a step ({used} used): a step needs {MIN_SIZE} points on "
                "each side of it")  # fmt: skip
    if not pen.steps_allowed:
        return f"no change beyond the noise ({_likeliest(inp)})"
    if not choice.chosen.cuts and choice.drift is None:
        return ("the intervals cannot tell: a trend described the series best, but its "
                "slope's interval includes no change")  # fmt: skip
    if not choice.chosen.cuts:
        steps = f" (steps from {_cut_names(inp, choice.rival.cuts)})" if choice.rival else ""
        return f"the change is gradual: a trend describes it better than steps{steps}"
    cut, est = choice.dropped[-1]
    return (
        f"the intervals cannot tell: the step from {inp.where(cut)} would be "
        f"{_pct(est, inp.confidence)}, which includes no change"
    )


def _notes(inp: Inputs, choice: Choice) -> tuple[str, ...]:
    notes = []
    if choice.steps:
        notes += [f"a step from {inp.where(c)} was not reported: its interval "
                  f"{_pct(e, inp.confidence)} includes no change"
                  for c, e in choice.dropped]  # fmt: skip
    if choice.close_call and choice.rival is not None:
        if choice.chosen.cuts:
            other = "a gradual trend" if not choice.rival.trend else "a trend"
            notes.append(f"{other} describes this series nearly as well as the steps")
        else:
            notes.append(f"steps (from {_cut_names(inp, choice.rival.cuts)}) describe this "
                         "series nearly as well as the trend; the gradual change is preferred "
                         "when the two cannot be told apart")  # fmt: skip
    return tuple(notes)


def history(inp: Inputs, pen: Penalties, choice: Choice, flags: Flags) -> History:
    segments = _segments(inp, choice.cuts)
    return History(
        len(inp.series), segments, _steps(inp, choice), _drift(inp, choice.drift),
        _outliers(inp, segments, flags), math.sqrt(inp.tau2), inp.confidence,
        _reason(inp, pen, choice), _notes(inp, choice),
    )  # fmt: skip
