"""Monte-Carlo helpers shared by the calibration tests and bench/stats_calibration.py.

Every simulated study goes through `ReplicatePolicy` exactly as the engine uses it: stage one
(`more([])` values), then `more(values)` more until it says 0, then `summarize` and
`compare_family`. Only the random numbers are drawn with numpy, in one block per cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from poolbench.stats import ReplicatePolicy

TRUE_MEAN = 100.0


def draws(rng: np.random.Generator, dist: str, cv: float, shape: tuple[int, ...]) -> np.ndarray:
    """Replicates with arithmetic mean TRUE_MEAN and coefficient of variation cv."""
    if dist == "normal":
        return rng.normal(TRUE_MEAN, TRUE_MEAN * cv, shape)
    s = math.sqrt(math.log1p(cv * cv))  # lognormal with E[X] = TRUE_MEAN, CV = cv
    return TRUE_MEAN * np.exp(rng.normal(-s * s / 2, s, shape))


def run(policy: ReplicatePolicy, row: list[float]) -> list[float]:
    """One configuration's replicates as the engine collects them, from a row of draws."""
    values = row[: policy.more([])]
    while k := policy.more(values):
        values = row[: len(values) + k]
    return values


@dataclass
class Cell:
    covered: int = 0
    intervals: int = 0
    false_families: int = 0
    families: int = 0
    runs: int = 0

    @property
    def coverage(self) -> float:
        return self.covered / self.intervals

    @property
    def fwer(self) -> float:
        return self.false_families / self.families

    @property
    def mean_n(self) -> float:
        return self.runs / self.intervals


def simulate(
    policy: ReplicatePolicy,
    sample: np.ndarray,  # (families, configurations, max_runs); configuration 0 = baseline
) -> Cell:
    """Coverage of every reported interval and family-wise false positives under the null
    (all configurations have the same true mean)."""
    out = Cell()
    for fam in sample.tolist():
        vals = [run(policy, row) for row in fam]
        for v in vals:
            s = policy.summarize(v)
            out.covered += s.ci_low <= TRUE_MEAN <= s.ci_high
            out.intervals += 1
            out.runs += len(v)
        others = {f"c{i}": v for i, v in enumerate(vals[1:], 1)}
        ratios = policy.compare_family(vals[0], others)
        out.false_families += any(r.significant for r in ratios.values())
        out.families += 1
    return out
