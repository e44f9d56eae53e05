"""Outlier flags for small samples, with a known false-alarm rate at every n (pure).

The test is Grubbs' (F. E. Grubbs, "Procedures for detecting outlying observations in
samples", Technometrics 11 (1969) 1–21; ASTM E178): the largest studentized deviation
G = max |yᵢ − ȳ| / s against its exact critical value under normality,

    G > (n − 1)/√n · √(t² / (n − 2 + t²)),   t = t₁₋α/(2n), n−2,

so a clean sample is flagged with probability α = FALSE_FLAG_RATE at every n ≥ 3. It is
applied to log(value) when every value is positive (run-to-run variation of a rate is
multiplicative, and a lognormal sample is then exactly normal), else to the values.

The rule before (Iglewicz–Hoaglin's modified z-score with cutoffs calibrated per n) flagged
nothing below 6 replicates and a 6σ slow run only 14–33% of the time at 6–10 (issue 28): the
MAD of a handful of values is itself too noisy to scale by. Grubbs' s uses every value and
its critical value is exact; simulated (docs/statistics.md §2) a 6σ slow run is named
30–82% of the time at n = 5–10 and a 30% slow run at a run-to-run CV of 2% (15σ) 70% at
n = 4 and 99–100% from 5. With 3 values no run can be told apart from the two others (G is
bounded by 2/√3 and reaches it only when two values coincide), so a flag needs 4 or more.

When the standard deviation is 0 (all values equal) nothing is flagged. A flag says: this
replicate lies farther from the others than steady runs would put it in 1 of 50 samples.
It does not say why; the cause has to come from the guards' evidence, not from the flag.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

MIN_N = 4  # below this no single run can be told apart (module doc)
FALSE_FLAG_RATE = 0.02  # per clean sample, at every n (exact under normality)
MOST = 2  # outliers looked for per sample (the generalized ESD's upper bound)
SUSPECT_RATE = 0.05  # for widening the interval only (suspect)
MAD_Z = 0.6745  # the modified z-score's constant (summary.Summary.mad reports the MAD)


@lru_cache(maxsize=256)
def cutoff(n: int, rate: float = FALSE_FLAG_RATE) -> float:
    """Grubbs' two-sided critical value of G among n values (inf below MIN_N)."""
    if n < MIN_N:
        return math.inf
    from poolbench.stats import tdist

    t = tdist.quantile(1 - rate / (2 * n), n - 2)
    return (n - 1) / math.sqrt(n) * math.sqrt(t * t / (n - 2 + t * t))


def _scale(values: Sequence[float]) -> list[float]:
    if all(v > 0 for v in values):
        return [math.log(v) for v in values]
    return [float(v) for v in values]


def scores(values: Sequence[float]) -> list[float]:
    """|yᵢ − ȳ| / s of each value (y = log(value) when all are positive); 0 when s = 0."""
    ys = _scale(values)
    return _studentized(ys) if len(ys) > 1 else [0.0] * len(ys)


def gesd(values: Sequence[float], rate: float, most: int = MOST) -> tuple[int, ...]:
    """Rosner's generalized ESD (Technometrics 25 (1983) 165–172): Grubbs' statistic on the
    values, the most extreme removed, again, up to `most` times; the outliers are the first
    k removed, k the last step whose statistic exceeded its critical value. Two slow runs
    mask each other from a single Grubbs test; this finds them. Indexes, in value order."""
    n = len(values)
    if n < MIN_N or not all(math.isfinite(v) for v in values):
        return ()
    left = list(range(n))
    ys = _scale(values)
    removed: list[int] = []
    found = 0
    for i in range(min(most, n - MIN_N + 1)):
        sub = [ys[j] for j in left]
        g = _studentized(sub)
        worst = max(range(len(sub)), key=lambda j: g[j])
        removed.append(left.pop(worst))
        if g[worst] > cutoff(n - i, rate):
            found = i + 1
    return tuple(sorted(removed[:found]))


def _studentized(ys: Sequence[float]) -> list[float]:
    n = len(ys)
    mean = sum(ys) / n
    sd = math.sqrt(sum((y - mean) ** 2 for y in ys) / (n - 1))
    return [abs(y - mean) / sd if sd > 0 else 0.0 for y in ys]


def flag(values: Sequence[float]) -> tuple[int, ...]:
    """The indexes of the replicates the generalized ESD names (two at most), or ()."""
    return gesd(values, FALSE_FLAG_RATE)


def suspect(values: Sequence[float]) -> bool:
    """Grubbs' test at the liberal SUSPECT_RATE: a run that may be disturbed, reason enough
    for the reported interval to take every value's spread into account (policy.summarize),
    not to name it."""
    return bool(gesd(values, SUSPECT_RATE))


def note(runs: str) -> str:
    """What a flag means, for a report line; `runs` names the flagged replicates."""
    return (
        f"replicate(s) {runs} lie unusually far from the others (steady runs put a value "
        f"this far out in about 1 of {round(1 / FALSE_FLAG_RATE)} samples of this size); "
        "the flag does not tell the cause: check what else ran at that time. "
        "Kept in the mean"
    )
