"""Coverage of three intervals for positive, skewed replicates (latency percentiles): the
arithmetic-scale t-interval, the log-scale t-interval (what poolbench reports, around the
geometric mean) and a bootstrap percentile interval of the mean, for lognormal replicates at
run-to-run CV 15/50/100% and n = 3/5/10. docs/statistics.md section 7 quotes its output.

    python bench/latency_calibration.py
"""

from __future__ import annotations

import numpy as np
from scipy import stats

SAMPLES = 20_000
BOOT_SAMPLES, RESAMPLES = 2_000, 400


def coverage(rng: np.random.Generator, cv: float, n: int) -> tuple[float, float, float]:
    s2 = float(np.log(1 + cv * cv))
    mean = float(np.exp(s2 / 2))  # arithmetic mean of a lognormal with median 1
    x = np.exp(rng.normal(0.0, np.sqrt(s2), (SAMPLES, n)))
    t = float(stats.t.ppf(0.975, n - 1))
    m, h = x.mean(1), t * x.std(1, ddof=1) / np.sqrt(n)
    arith = float(np.mean((m - h <= mean) & (mean <= m + h)))
    logs = np.log(x)
    lm, lh = logs.mean(1), t * logs.std(1, ddof=1) / np.sqrt(n)
    log_scale = float(np.mean(np.abs(lm) <= lh))  # the true median is 1: log 0
    idx = rng.integers(0, n, (BOOT_SAMPLES, RESAMPLES, n))
    boot = np.take_along_axis(np.repeat(x[:BOOT_SAMPLES, None, :], RESAMPLES, 1), idx, 2)
    means = boot.mean(2)
    lo, hi = np.quantile(means, 0.025, axis=1), np.quantile(means, 0.975, axis=1)
    return arith, log_scale, float(np.mean((lo <= mean) & (mean <= hi)))


def main() -> None:
    rng = np.random.default_rng(1)
    print("| CV | n | arithmetic t | log-scale t (reported) | bootstrap percentile |")
    print("|---|---|---|---|---|")
    for cv in (0.15, 0.5, 1.0):
        for n in (3, 5, 10):
            a, g, b = coverage(rng, cv, n)
            print(f"| {cv:.0%} | {n} | {a:.1%} | {g:.1%} | {b:.1%} |")


if __name__ == "__main__":
    main()
