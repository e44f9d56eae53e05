"""Monte-Carlo helpers for the change-point calibration, shared by tests/test_stats_changepoint*
and bench/changepoint_calibration.py (docs/statistics.md §8).

A simulated history is a list of points as poolbench records them: each run has 3–10
replicates (uniform), normal with the run's mean and a coefficient of variation `cv` (or, for
cv = MIXED, each run its own CV drawn log-uniformly between 1% and 10%); the run's mean is the
series' level at that point times exp(u), u ~ N(0, tau²), the between-run variation that no
run's own interval shows. Every series goes through `detect` exactly as a caller would call
it, with the replicate values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from poolbench.stats.changepoint import History, Point, detect

LEVEL = 100.0
MIXED = -1.0  # cv: each run its own CV, log-uniform in [1%, 10%]


def points(rng: np.random.Generator, levels: np.ndarray, cv: float, tau: float,
           covariate: np.ndarray | None = None) -> list[Point]:  # fmt: skip
    out = []
    for i, level in enumerate(levels):
        n = int(rng.integers(3, 11))
        c = math.exp(rng.uniform(math.log(0.01), math.log(0.10))) if cv == MIXED else cv
        mean = level * math.exp(rng.normal(0.0, tau))
        values = mean * (1 + c * rng.standard_normal(n))
        cov = None if covariate is None else float(covariate[i])
        out.append(Point.from_values(values.tolist(), covariate=cov, label=f"run{i}"))
    return out


def step_position(rng: np.random.Generator, n: int, min_size: int = 3) -> int:
    """A step's first point, uniform among those with `min_size` points on each side."""
    return int(rng.integers(min_size, n - min_size + 1))


def step_levels(n: int, at: int, ratio: float) -> np.ndarray:
    return np.where(np.arange(n) < at, LEVEL, LEVEL * ratio)


def drift_levels(n: int, ratio: float) -> np.ndarray:
    """A linear drift in the log from LEVEL to LEVEL · ratio over the series."""
    return LEVEL * np.exp(np.linspace(0.0, math.log(ratio), n))


@dataclass
class Tally:
    """Counts over simulated series of one cell."""

    series: int = 0
    any_step: int = 0
    located: int = 0  # a step reported within ±1 point of the truth
    covered: int = 0  # ... whose interval covers the true ratio
    extra: int = 0  # series with a step reported away from the truth
    drift: int = 0
    outlier: int = 0
    ratios: list[float] = field(default_factory=list)

    def rate(self, count: int, of: int | None = None) -> float:
        total = self.series if of is None else of
        return count / total if total else math.nan


def tally(t: Tally, h: History, at: int | None = None, ratio: float | None = None) -> None:
    t.series += 1
    t.any_step += bool(h.steps)
    t.drift += h.drift is not None
    t.outlier += bool(h.outliers)
    if at is None or ratio is None:
        return
    near = [s for s in h.steps if abs(s.index - at) <= 1]
    t.extra += any(abs(s.index - at) > 1 for s in h.steps)
    if near:
        s = min(near, key=lambda s: abs(s.index - at))
        t.located += 1
        t.covered += s.low <= ratio <= s.high
        t.ratios.append(s.ratio)


def flat_cell(rng: np.random.Generator, n: int, cv: float, tau: float, runs: int) -> Tally:
    t = Tally()
    for _ in range(runs):
        tally(t, detect(points(rng, np.full(n, LEVEL), cv, tau)))
    return t


def step_cell(rng: np.random.Generator, n: int, cv: float, tau: float, ratio: float,
              runs: int) -> Tally:  # fmt: skip
    t = Tally()
    for _ in range(runs):
        at = step_position(rng, n)
        tally(t, detect(points(rng, step_levels(n, at, ratio), cv, tau)), at, ratio)
    return t


def drift_cell(rng: np.random.Generator, n: int, cv: float, tau: float, ratio: float,
               runs: int) -> Tally:  # fmt: skip
    t = Tally()
    for _ in range(runs):
        tally(t, detect(points(rng, drift_levels(n, ratio), cv, tau)))
    return t
