"""Fixed-n summaries of replicate measurements, and the old `StopRule` interface.

Replicates are whole, independent runs (separate fio invocations with the caches dropped in
between); fio's within-run spread is never used here. `summarize` is Student's t interval for
a *fixed* number of replicates (every value is stage one); for replicates collected by the
adaptive rule the reported interval is `ReplicatePolicy.summarize` (Stein's), which callers
should use. Outliers are flagged by the calibrated rule of `poolbench.stats.outliers`.
Flagged values are kept in the mean (they are real runs) but reported.

`StopRule` is kept for its callers as a thin wrapper over `ReplicatePolicy`: the decision to
repeat has one home.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from poolbench.stats import outliers as outlier_mod
from poolbench.stats.policy import ReplicatePolicy

MAD_Z = outlier_mod.MAD_Z


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
    """Indexes of flagged replicates (calibrated per n; none below 6 values)."""
    return outlier_mod.flag(values)


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
    """Repeat at least `min_runs` times, then as many times as Stein's rule plans from them
    to reach ±`target`, but never more than `max_runs` times (see `ReplicatePolicy`)."""

    min_runs: int = 3
    max_runs: int = 10
    target: float = 0.05
    confidence: float = 0.95

    def __post_init__(self) -> None:
        self.policy()  # validates

    def policy(self) -> ReplicatePolicy:
        return ReplicatePolicy(self.target, self.min_runs, self.max_runs, self.confidence)

    def needs_more(self, values: Sequence[float]) -> bool:
        return self.policy().more(values) > 0

    def verdict(self, values: Sequence[float]) -> str:
        """Empty when trustworthy, else a warning saying what to do."""
        return self.policy().summarize(values).warning()
