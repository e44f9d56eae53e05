"""One point of a history, and the series the method works on (pure).

A point is one run's figure: the mean of its replicates with either the replicate values or
the mean's confidence interval, the number of replicates, an optional covariate (the pool's
fill level, say) and an opaque label (run id, date) that the result hands back.

The method works on the log scale, where a step is a ratio and run-to-run variation of a rate
is multiplicative: yᵢ = log(meanᵢ). Each point brings its own within-run uncertainty as the
relative variance of one replicate, sᵢ² (CV²), with dᵢ degrees of freedom, so the variance of
yᵢ from within the run is sᵢ²/nᵢ (the delta method: var log x̄ ≈ var x̄ / x̄², exact enough at
the few-percent CVs of a benchmark):

- from replicate values: sᵢ² = var(values)/mean², dᵢ = n − 1;
- from an interval [low, high] at confidence c with df degrees of freedom (default n − 1; a
  Stein interval has the stage-one size − 1): the mean's relative standard error is
  (high − low)/2 / (t₍₁₊c₎/₂,df · mean), and sᵢ² = n · se²;
- one replicate and no interval: no within-run information (dᵢ = 0); the point takes the
  series' typical value (`variance.moderate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from poolbench.stats import tdist

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Point:
    """One run's figure. Give `values` (the replicates), or `ci_low`/`ci_high` with `n`."""

    mean: float
    n: int
    ci_low: float | None = None
    ci_high: float | None = None
    values: tuple[float, ...] = ()
    confidence: float = 0.95
    df: int | None = None  # of the interval; None: n − 1
    covariate: float | None = None
    label: str = ""

    @classmethod
    def from_values(
        cls, values: Sequence[float], *, covariate: float | None = None, label: str = ""
    ) -> Point:
        vals = tuple(float(v) for v in values)
        mean = sum(vals) / len(vals) if vals else math.nan
        return cls(mean, len(vals), values=vals, covariate=covariate, label=label)


@dataclass(frozen=True)
class Series:
    """The points as the method sees them (arrays of one row, see module doc)."""

    y: Array  # log(mean)
    s2: Array  # relative variance of one replicate (0 where d = 0)
    d: Array  # its degrees of freedom
    n: Array  # replicates
    x: Array  # the covariate, or the point's position
    covariate: bool  # whether x is a given covariate
    labels: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.y)

    def take(self, keep: NDArray[np.intp]) -> Series:
        return Series(self.y[keep], self.s2[keep], self.d[keep], self.n[keep], self.x[keep],
                      self.covariate, tuple(self.labels[i] for i in keep))  # fmt: skip


def _problem(i: int, p: Point) -> str:
    where = f"point {i + 1}" + (f" ({p.label})" if p.label else "")
    if not (math.isfinite(p.mean) and p.mean > 0):
        return f"{where}: its mean {p.mean!r} is not a positive finite number"
    if p.n < 1:
        return f"{where}: n = {p.n}, at least one replicate is needed"
    if p.values and len(p.values) != p.n:
        return f"{where}: {len(p.values)} values but n = {p.n}"
    if any(not (math.isfinite(v) and v > 0) for v in p.values):
        return f"{where}: a replicate value is not a positive finite number"
    if (p.ci_low is None) != (p.ci_high is None):
        return f"{where}: an interval needs both ci_low and ci_high"
    if p.ci_low is not None and p.ci_high is not None:
        if not (math.isfinite(p.ci_low) and math.isfinite(p.ci_high) and p.ci_low <= p.ci_high):
            return f"{where}: the interval [{p.ci_low}, {p.ci_high}] is not an interval"
        if not 0 < p.confidence < 1:
            return f"{where}: confidence {p.confidence} is not between 0 and 1"
    if p.covariate is not None and not math.isfinite(p.covariate):
        return f"{where}: its covariate {p.covariate!r} is not a finite number"
    return ""


def _within(p: Point) -> tuple[float, float]:
    """(s², d) of one point (module doc)."""
    if len(p.values) >= 2:
        v = np.asarray(p.values)
        return float(v.var(ddof=1) / p.mean**2), float(len(v) - 1)
    if p.ci_low is not None and p.ci_high is not None and p.n >= 2:
        df = p.df if p.df is not None else p.n - 1
        if df >= 1:
            t = tdist.quantile((1 + p.confidence) / 2, df)
            se = (p.ci_high - p.ci_low) / 2 / (t * p.mean)
            return p.n * se * se, float(df)
    return 0.0, 0.0


def prepare(points: Sequence[Point]) -> Series:
    """The series of `points`, or ValueError naming the first bad point and what to fix."""
    for i, p in enumerate(points):
        why = _problem(i, p)
        if why:
            raise ValueError(f"{why}; remove or re-measure that run")
    given = sum(p.covariate is not None for p in points)
    if 0 < given < len(points):
        raise ValueError(
            f"the covariate is given for {given} of {len(points)} points: give it for every "
            "point or for none"
        )
    within = [_within(p) for p in points]
    x = [p.covariate if p.covariate is not None else float(i) for i, p in enumerate(points)]
    return Series(
        np.log(np.array([p.mean for p in points], dtype=float)),
        np.array([w[0] for w in within]), np.array([w[1] for w in within]),
        np.array([float(p.n) for p in points]), np.array(x, dtype=float), given > 0,
        tuple(p.label for p in points),
    )  # fmt: skip
