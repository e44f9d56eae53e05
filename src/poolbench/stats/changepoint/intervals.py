"""The intervals of what the search found: segment levels, steps, a drift (pure).

Every figure is a random-effects estimate on the log scale: point i has variance vᵢ + τ² (its
own within-run variance and the between-run variance beyond it), τ² by DerSimonian–Laird
over the chosen model (`variance.tau2_dl`), weights wᵢ = 1/(vᵢ + τ̂²).

The standard errors are those of Hartung–Knapp–Sidik–Jonkman (G. Knapp and J. Hartung,
"Improved tests for a random effects meta-regression with a single covariate", Stat. Med. 22
(2003) 2693–2710): the model-based variance times the weighted residual mean square q, with
Student's t on the residual degrees of freedom, which keeps its level with few points where
the plain normal interval does not. q is taken as at least 1 (C. Röver, G. Knapp and
T. Friede, BMC Med. Res. Methodol. 15 (2015) 99): when the points agree better than their
own variances say, the interval is not made narrower than those variances allow.

**A step** is the difference of two adjacent segments' means, each segment with its own q
and N − 1 degrees of freedom, combined by Welch–Satterthwaite (B. L. Welch, Biometrika 34
(1947) 28–35): after an upgrade a pool can be noisier as well as slower, and one segment's
scatter must not lend the other its degrees of freedom. Reported as the ratio after/before,
exp(μ̂_B − μ̂_A), with exp of the interval.

**A drift** is the slope of a weighted linear model (segment levels and a common slope on
the covariate, or on the point's position when none is given), with q from all its residuals
and N − p degrees of freedom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from poolbench.stats import tdist
from poolbench.stats.changepoint import variance
from poolbench.stats.changepoint.points import Array


@dataclass(frozen=True)
class Estimate:
    """A log-scale figure with its standard error and degrees of freedom."""

    value: float
    se: float
    df: float

    def bounds(self, confidence: float) -> tuple[float, float]:
        t = tdist.quantile((1 + confidence) / 2, self.df)
        return self.value - t * self.se, self.value + t * self.se

    @property
    def p_value(self) -> float:
        if self.se == 0:
            return 0.0 if self.value else 1.0
        return tdist.two_sided_p(self.value / self.se, self.df)


def _segment(y: Array, v: Array, tau2: float) -> tuple[float, float, int]:
    """(mean, its HKSJ variance, df) of one segment."""
    w = 1 / np.maximum(v + tau2, variance.FLOOR)
    total = float(w.sum())
    mean = float(np.sum(w * y) / total)
    dof = len(y) - 1
    q = float(np.sum(w * (y - mean) ** 2)) / dof if dof else 1.0
    return mean, max(1.0, q) / total, dof


def _groups(*sizes: int) -> Array:
    design = np.zeros((sum(sizes), len(sizes)))
    start = 0
    for j, size in enumerate(sizes):
        design[start : start + size, j] = 1.0
        start += size
    return design


def level(y: Array, v: Array) -> Estimate:
    """One segment's mean (log scale) on its own."""
    tau2 = variance.tau2_dl(y, v, _groups(len(y)))
    mean, var, dof = _segment(y, v, tau2)
    return Estimate(mean, math.sqrt(var), max(dof, 1))


def step(before: tuple[Array, Array], after: tuple[Array, Array]) -> Estimate:
    """log(after/before) of two adjacent segments, given each one's (y, v) (module doc)."""
    (ya, va), (yb, vb) = before, after
    tau2 = variance.tau2_dl(np.concatenate([ya, yb]), np.concatenate([va, vb]),
                            _groups(len(ya), len(yb)))  # fmt: skip
    ma, var_a, df_a = _segment(ya, va, tau2)
    mb, var_b, df_b = _segment(yb, vb, tau2)
    total = var_a + var_b
    dof = total**2 / (var_a**2 / max(df_a, 1) + var_b**2 / max(df_b, 1))
    return Estimate(mb - ma, math.sqrt(total), dof)


@dataclass(frozen=True)
class LinearFit:
    """A weighted linear model's coefficients with their HKSJ covariance."""

    beta: Array
    cov: Array
    df: int
    tau2: float

    def estimate(self, contrast: Array) -> Estimate:
        value = float(contrast @ self.beta)
        return Estimate(value, math.sqrt(float(contrast @ self.cov @ contrast)), self.df)


def linear(y: Array, v: Array, design: Array) -> LinearFit:
    """Random-effects weighted least squares of y on `design` (module doc)."""
    tau2 = variance.tau2_dl(y, v, design)
    w = 1 / np.maximum(v + tau2, variance.FLOOR)
    inv = np.linalg.pinv(design.T @ (design * w[:, None]))
    beta = inv @ (design.T @ (w * y))
    dof = len(y) - int(np.linalg.matrix_rank(design))
    q = float(np.sum(w * (y - design @ beta) ** 2)) / dof if dof > 0 else 1.0
    return LinearFit(np.asarray(beta, dtype=float), np.asarray(max(1.0, q) * inv, dtype=float),
                     max(dof, 1), tau2)  # fmt: skip


def segments_and_slope(sizes: list[int], x: Array) -> Array:
    """The design of segment levels (one column each) and a common slope on x."""
    centred = (x - x.mean()).reshape(-1, 1)
    return np.hstack([_groups(*sizes), centred])
