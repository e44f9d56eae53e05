"""Monte-Carlo calibration of poolbench's replicate rules, full size (docs/statistics.md).

Run: PYTHONPATH=src python bench/stats_calibration.py [families] [--outliers]
Prints, per cell (normal/lognormal replicates × CV 3/8/15% × cap 6/10 × target 5/10%), the
coverage of the reported 95% interval, the family-wise false-positive rate of a Holm family
of 3 comparisons under the null, the mean number of replicates and how often the ±target
was met; then the tiny-and-unequal families, the power of the detectable difference, and
with --outliers the per-n cutoffs of the outlier flag and their false-flag rates.
Every simulated study goes through ReplicatePolicy exactly as the engine does (the same code
as tests/test_stats_policy.py, with more families). Default 20,000 families per cell
(coverage SE 0.08%, false-positive SE 0.15%); about 5 minutes on one core.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from poolbench.stats import ReplicatePolicy  # noqa: E402
from poolbench.stats import outliers as outlier_mod  # noqa: E402
from stats_sim import draws, run, simulate  # noqa: E402


def main_table(families: int) -> None:
    print("dist       CV   cap target  coverage  fam.FP  mean n  target met")
    cells = itertools.product(("normal", "lognormal"), (0.03, 0.08, 0.15), (6, 10), (0.05, 0.1))
    for i, (dist, cv, cap, target) in enumerate(cells):
        rng = np.random.default_rng(9000 + i)
        policy = ReplicatePolicy(ci_target=target, min_runs=3, max_runs=cap)
        sample = draws(rng, dist, cv, (families, 4, cap))
        cell = simulate(policy, sample)
        met = np.mean([policy.summarize(run(policy, r)).target_met for r in sample[:, 0].tolist()])
        print(
            f"{dist:9s} {cv:4.0%} {cap:4d} {target:5.0%}  {cell.coverage:7.2%} "
            f"{cell.fwer:7.2%} {cell.mean_n:7.1f} {met:10.0%}"
        )


def unequal_table(families: int) -> None:
    print("\nbaseline CV 2%, three others CV 15%, all equal means (Holm family of 3)")
    for i, cap in enumerate((3, 6, 10)):
        rng = np.random.default_rng(9100 + i)
        policy = ReplicatePolicy(ci_target=0.05, min_runs=3, max_runs=cap)
        quiet = draws(rng, "normal", 0.02, (families, 1, cap))
        noisy = draws(rng, "normal", 0.15, (families, 3, cap))
        cell = simulate(policy, np.concatenate([quiet, noisy], axis=1))
        print(f"  3 -> {cap:2d} replicates: family-wise false positives {cell.fwer:.2%}")


def power_table(sims: int) -> None:
    print("\npower at the stated detectable difference (two configurations, CV 5%, fixed n)")
    for n in (3, 5, 8):
        p = ReplicatePolicy(ci_target=0.05, min_runs=n, max_runs=n)
        d = p.detectable(0.05, n)
        rng = np.random.default_rng(9200 + n)
        a = rng.normal(100, 5, (sims, n)).tolist()
        b = rng.normal(100 * (1 + d), 5, (sims, n)).tolist()
        hit = np.mean([p.compare(x, y).significant for x, y in zip(a, b, strict=True)])
        print(f"  n = {n}: could detect >= {d:.1%}; found {hit:.1%} of the time")


def outlier_table(samples: int) -> None:
    print("\noutlier flags: n, 99th percentile of max |M| (the cutoff), clean samples flagged")
    rng = np.random.default_rng(20261122)
    for n in range(3, 31):
        x = rng.normal(size=(samples, n))
        med = np.median(x, axis=1, keepdims=True)
        mad = np.median(np.abs(x - med), axis=1, keepdims=True)
        q = np.quantile((outlier_mod.MAD_Z * np.abs(x - med) / mad).max(axis=1), 0.99)
        flagged = np.mean([bool(outlier_mod.flag(r)) for r in x[:20_000].tolist()])
        print(f"  n = {n:2d}: {q:6.2f}  used {outlier_mod.cutoff(n):6.2f}  flagged {flagged:.2%}")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    families = int(args[0]) if args else 20_000
    main_table(families)
    unequal_table(families)
    power_table(min(families, 20_000))
    if "--outliers" in sys.argv:
        outlier_table(400_000)


if __name__ == "__main__":
    main()
