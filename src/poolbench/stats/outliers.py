"""Outlier flags calibrated for small samples (pure).

The statistic is Iglewicz and Hoaglin's modified z-score, M = 0.6745 (x − median) / MAD
("How to Detect and Handle Outliers", ASQ 1993). Their fixed cutoff |M| > 3.5 is meant for
large samples: on clean normal replicates it flagged 29% / 17% / 20% / 12.5% of samples at
n = 3 / 4 / 5 / 10 (issue 12), because the MAD of a handful of values is itself very noisy.

Here the cutoff depends on n. For n = 6…30 it is the 99th percentile of max |M| over clean
normal samples of that size (400,000 simulated samples per n; bench/stats_calibration.py
--outliers recomputes them, within ±0.05): a clean sample is flagged about once in 100, whatever
its size. Beyond 30 the Bonferroni normal quantile Φ⁻¹(1 − 0.005/n) is scaled by the factor
the simulation found at n = 30 (4.77 / 3.59 = 1.33); the MAD gets more precise as n grows, so
this errs towards fewer flags. Below 6 replicates nothing is flagged: with 3–5 values no
value can be told apart from ordinary scatter at a 1% false-alarm rate (the cutoffs would
exceed 10 robust standard deviations).

When the MAD is 0 (more than half the values identical, e.g. a quantized figure), the scale
falls back to the mean absolute deviation from the median, M = (x − median) / (1.2533·MeanAD)
(Iglewicz & Hoaglin's own fallback); when that is 0 too, all values are equal: no flag.

A flag says: this replicate lies farther from the others than steady runs would put it about
once in 100 samples. It does not say why; the cause (another job, a background scrub, a cold
cache, a slow member disk) has to come from the guards' evidence, not from the flag.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

MAD_Z = 0.6745
MEANAD_Z = 1.2533  # sqrt(pi/2): mean absolute deviation of a normal is sigma / 1.2533
MIN_N = 6
FALSE_FLAG_RATE = 0.01  # per clean sample, at every n (the calibration target)

# n -> cutoff for |M|: 99th percentile of max |M| over 400,000 clean normal samples of size n.
CUTOFFS: dict[int, float] = {
    6: 10.10, 7: 10.76, 8: 8.00, 9: 8.24, 10: 6.90, 11: 7.03, 12: 6.25, 13: 6.38,
    14: 5.86, 15: 5.95, 16: 5.60, 17: 5.66, 18: 5.41, 19: 5.40, 20: 5.23, 21: 5.28,
    22: 5.11, 23: 5.13, 24: 5.00, 25: 5.04, 26: 4.90, 27: 4.93, 28: 4.85, 29: 4.86,
    30: 4.77,
}  # fmt: skip
_LARGE_N_FACTOR = 1.33


def cutoff(n: int) -> float:
    """The |M| above which a replicate among n is flagged (inf below MIN_N)."""
    if n < MIN_N:
        return math.inf
    if n in CUTOFFS:
        return CUTOFFS[n]
    return _LARGE_N_FACTOR * NormalDist().inv_cdf(1 - FALSE_FLAG_RATE / 2 / n)


def scores(values: Sequence[float]) -> list[float]:
    """Modified z-scores |M| (MeanAD fallback when the MAD is 0; all 0 when values are equal)."""
    xs = sorted(values)
    med = _median(xs)
    dev = [abs(x - med) for x in values]
    mad = _median(sorted(dev))
    if mad > 0:
        return [MAD_Z * d / mad for d in dev]
    mean_ad = sum(dev) / len(dev)
    if mean_ad > 0:
        return [d / (MEANAD_Z * mean_ad) for d in dev]
    return [0.0] * len(dev)


def flag(values: Sequence[float]) -> tuple[int, ...]:
    """Indexes of the replicates that lie unusually far from the others (see module doc)."""
    n = len(values)
    if n < MIN_N or not all(math.isfinite(v) for v in values):
        return ()
    c = cutoff(n)
    return tuple(i for i, m in enumerate(scores(values)) if m > c)


def note(runs: str) -> str:
    """What a flag means, for a report line; `runs` names the flagged replicates."""
    return (
        f"replicate(s) {runs} lie unusually far from the others (steady runs put a value "
        f"this far out in about 1 of {round(1 / FALSE_FLAG_RATE)} samples of this size); "
        "the flag does not tell the cause: check what else ran at that time. "
        "Kept in the mean"
    )


def _median(sorted_xs: Sequence[float]) -> float:
    n = len(sorted_xs)
    mid = n // 2
    return sorted_xs[mid] if n % 2 else (sorted_xs[mid - 1] + sorted_xs[mid]) / 2
