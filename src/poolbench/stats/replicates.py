"""How many replicates, and the interval reported for their mean: Stein's two-stage rule (pure).

Why not "repeat until the interval is narrow enough": stopping as soon as a t-interval looks
narrow selects samples whose spread happened to be small, so the interval printed at the stop
is too narrow. Simulated through the old rule (3→10 replicates, ±5% target, CV 8%) it covered
91.3% instead of 95% (issue 12; the intervals that stopped early covered 79.4%, issue 28).

Stein's two-stage procedure (C. Stein, "A two-sample test for a linear hypothesis whose power
is independent of the variance", Ann. Math. Statist. 16 (1945) 243–258) keeps the promise:

1. Stage one: run `min_runs` (= n₀) replicates; their mean x̄₀ and standard deviation s₀.
2. The total is fixed from stage one alone, so the half-width t·s₀/√n meets the target:
       n = max(n₀, ⌈(t₁₋α/₂,n₀₋₁ · s₀ / (target · x̄₀))²⌉),  capped at `max_runs`.
3. Run the other n − n₀ replicates; report x̄ₙ (all n values) ± t₁₋α/₂,n₀₋₁ · s₀ / √n.

Under normality x̄ₙ given s₀ is N(μ, σ²/n) and n depends on stage one only, so
√n (x̄ₙ − μ) / s₀ is exactly Student-t with n₀ − 1 degrees of freedom: the interval covers
95% whatever n the rule picked, including when the cap binds. At the cap the target is not
met, but the interval is still an honest 95% interval, only wider; the report says so.

The target is relative (±5% of the mean), so the absolute half-width d = target·x̄₀ uses the
stage-one mean as well; that makes n depend weakly on x̄₀ (not only on s₀) and the coverage
exact only approximately. Simulated (bench/stats_calibration.py): 94.6–95.2% for normal and
lognormal replicates at CV 3/8/15%, caps 6 and 10, targets 5% and 10%. Working on the log
scale would make the rule exact for lognormal data but would report a geometric mean, which
the rest of poolbench (and the user) reads as an arithmetic one; at run-to-run CVs ≤ 15% the
skew is small and the arithmetic scale keeps its coverage, so it is kept.

The price of exactness is the t quantile with n₀ − 1 degrees of freedom: with n₀ = 3 it is
4.30, so a ±5% target needs CV ≤ 2% to stop at 3 and CV ≈ 3.7% to be met within 10 runs.
A larger `--min-runs` (5: t = 2.78) buys narrower intervals at the cap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.stats import tdist


@dataclass(frozen=True)
class Stage:
    """Stage one of the rule: its size, mean and standard deviation."""

    n0: int
    mean: float
    sd: float

    @property
    def df(self) -> int:
        return self.n0 - 1


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (nan below 2 values), in plain Python: the policy
    runs on lists of 3–20 values, where numpy's call overhead dominates."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan
    return mean, math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))


def stage(values: Sequence[float], min_runs: int) -> Stage:
    """Stage one: the first `min_runs` values in measurement order (all of them when fewer)."""
    first = values[:min_runs]
    mean, sd = mean_sd(first)
    return Stage(len(first), mean, sd)


def total(st: Stage, target: float, confidence: float, max_runs: int) -> int:
    """The number of replicates stage one commits to (Stein's n, within [n₀, max_runs])."""
    if st.n0 < 2 or not (math.isfinite(st.mean) and math.isfinite(st.sd)) or st.mean <= 0:
        # No spread to plan from, or a relative target that cannot apply: stay at stage one.
        return st.n0
    t = tdist.quantile((1 + confidence) / 2, st.df)
    need = (t * st.sd / (target * st.mean)) ** 2
    # The 1e-9 keeps an exact integer from rounding up through float noise.
    return min(max(st.n0, math.ceil(need - 1e-9)), max_runs)


def halfwidth(st: Stage, n: int, confidence: float) -> float:
    """Half-width of the reported interval for the mean of all n replicates."""
    return tdist.quantile((1 + confidence) / 2, st.df) * st.sd / math.sqrt(n)


def halfwidth_all(values: Sequence[float], confidence: float) -> float:
    """Half-width of Student's t interval from every value: t₁₋α/₂,ₙ₋₁ · s / √n."""
    n = len(values)
    _mean, sd = mean_sd(values)
    return tdist.quantile((1 + confidence) / 2, n - 1) * sd / math.sqrt(n)
