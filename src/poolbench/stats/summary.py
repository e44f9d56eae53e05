"""Summaries of replicate measurements, and the rule for when to stop repeating.

Replicates are whole, independent runs (separate fio invocations with the caches dropped in
between); fio's within-run spread is never used here. The confidence interval of the mean is
Student's t interval; outliers are flagged with the modified z-score of Iglewicz and Hoaglin
(1993): M = 0.6745 (x − median) / MAD, flagged when |M| > 3.5. Flagged values are kept in the
mean (they are real runs) but reported, so the user can see a disturbed run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

MAD_Z = 0.6745
OUTLIER_Z = 3.5


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    stdev: float
    ci_low: float
    ci_high: float
    confidence: float
    median: float
    mad: float
    outliers: tuple[int, ...]  # indexes into the values

    @property
    def rel_halfwidth(self) -> float:
        """Half the CI width relative to the mean (0.05 = ±5%); inf when it cannot be known."""
        if self.n < 2 or self.mean == 0 or math.isnan(self.ci_low):
            return math.inf
        return (self.ci_high - self.ci_low) / 2 / abs(self.mean)

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["rel_halfwidth"] = self.rel_halfwidth
        return d


def outliers(values: Sequence[float]) -> tuple[int, ...]:
    x = np.asarray(values, dtype=float)
    if len(x) < 3:
        return ()
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    if mad == 0:
        # More than half the values are identical: anything else is an outlier only if it
        # differs at all, which is too eager for measurements; flag nothing.
        return ()
    z = MAD_Z * (x - med) / mad
    return tuple(int(i) for i in np.nonzero(np.abs(z) > OUTLIER_Z)[0])


def summarize(values: Sequence[float], confidence: float = 0.95) -> Summary:
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        raise ValueError("no values to summarize")
    mean = float(x.mean())
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    if n < 2:
        return Summary(n, mean, math.nan, math.nan, math.nan, confidence, med, mad, ())
    sd = float(x.std(ddof=1))
    from scipy import stats  # here, not at the top: scipy.stats costs ~1 s at every start

    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return Summary(
        n, mean, sd, mean - half, mean + half, confidence, med, mad, outliers(x.tolist())
    )


@dataclass(frozen=True)
class StopRule:
    """Repeat at least `min_runs` times, then until the CI is within ±`target` of the mean,
    but never more than `max_runs` times."""

    min_runs: int = 3
    max_runs: int = 10
    target: float = 0.05
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.min_runs < 2:
            raise ValueError("at least 2 runs are needed for a confidence interval")
        if self.max_runs < self.min_runs:
            raise ValueError("max_runs must be ≥ min_runs")
        if not 0 < self.target < 1:
            raise ValueError("target must be a fraction between 0 and 1")

    def needs_more(self, values: Sequence[float]) -> bool:
        n = len(values)
        if n < self.min_runs:
            return True
        if n >= self.max_runs:
            return False
        return summarize(values, self.confidence).rel_halfwidth > self.target

    def verdict(self, values: Sequence[float]) -> str:
        """Empty when trustworthy, else a warning saying what to do."""
        s = summarize(values, self.confidence)
        if s.rel_halfwidth <= self.target:
            return ""
        if math.isinf(s.rel_halfwidth):
            return "fewer than 2 runs: no confidence interval"
        return (
            f"the {self.confidence:.0%} CI is ±{s.rel_halfwidth:.1%} of the mean after "
            f"{s.n} runs (target ±{self.target:.0%}, cap {self.max_runs}): the figure is "
            "noisy; raise --max-runs or quiet the machine"
        )
