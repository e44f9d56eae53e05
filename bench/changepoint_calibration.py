"""Monte-Carlo calibration of the history's change-point method, full size (docs/statistics.md §8).

Run: PYTHONPATH=src python bench/changepoint_calibration.py SECTION [SECTION ...] [--n N]
Sections (N series per cell; a series of 50 points takes ~0.06 s, of 10 ~0.01 s; all five
at the default sizes ~35 minutes on one core):
  flat       no change: how often a step (any), a drift, an outlier point is reported
  steps      one step of 5/10/20/40% at a random place: found, placed, interval coverage
  drifts     a linear drift of the same total size: how often called a step, or a drift
  issue      the issue's targets: 20 points at CV 5%: no change; a 15% step
  covariate  a drift along the fill level, which rises and falls: with and without it
Every series goes through poolbench.stats.changepoint.detect exactly as a caller would
(tests/changepoint_sim.py, shared with the tests). Seeded per cell.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from changepoint_sim import (  # noqa: E402
    LEVEL,
    MIXED,
    Tally,
    drift_cell,
    flat_cell,
    points,
    step_cell,
    tally,
)
from poolbench.stats.changepoint import detect  # noqa: E402

LENGTHS = (10, 20, 50)
CVS = (0.01, 0.05, 0.10, MIXED)
TAUS = (0.0, 0.02, 0.05)
SIZES = (0.05, 0.10, 0.20, 0.40)
NOISES = ((0.01, 0.0), (0.05, 0.02), (0.10, 0.05), (MIXED, 0.02))


def _cv(cv: float) -> str:
    return "1–10% mixed" if cv == MIXED else f"{cv:.0%}"


def _se(p: float, n: int) -> str:
    return f"±{math.sqrt(max(p * (1 - p), 1e-9) / n):.1%}" if n else ""


def flat(runs: int) -> None:
    print("no change: series with a step / a drift / an outlier point reported")
    totals: dict[int, list[int]] = {n: [0, 0] for n in LENGTHS}
    for i, (n, cv, tau) in enumerate(itertools.product(LENGTHS, CVS, TAUS)):
        t = flat_cell(np.random.default_rng(8000 + i), n, cv, tau, runs)
        totals[n][0] += t.any_step
        totals[n][1] += t.series
        print(f"  | {n} | {_cv(cv)} | {tau:.0%} | {t.rate(t.any_step):.1%} | "
              f"{t.rate(t.drift):.1%} | {t.rate(t.outlier):.1%} |", flush=True)  # fmt: skip
    for n, (hits, total) in totals.items():
        print(f"  n = {n}: a step in {hits / total:.2%} of {total} flat series "
              f"({_se(hits / total, total)})")  # fmt: skip


def _step_row(t: Tally) -> str:
    cover = f"{t.rate(t.covered, t.located):.1%}" if t.located else "—"
    return (f"{t.rate(t.any_step):.1%} | {t.rate(t.located):.1%} | {cover} | "
            f"{t.rate(t.extra):.1%} | {t.rate(t.drift):.1%}")  # fmt: skip


def steps(runs: int) -> None:
    print("one step (after/before = 1 − size) at a random place with ≥ 3 points each side")
    print("  n | CV | between | size | any step | at ±1 | covers | other step | drift")
    for i, (n, (cv, tau), size) in enumerate(itertools.product(LENGTHS, NOISES, SIZES)):
        t = step_cell(np.random.default_rng(8100 + i), n, cv, tau, 1 - size, runs)
        print(f"  | {n} | {_cv(cv)} | {tau:.0%} | {size:.0%} | {_step_row(t)} |", flush=True)


def drifts(runs: int) -> None:
    print("a linear drift (in the log) from 1 to 1 − size over the series")
    print("  n | CV | between | size | a step reported | a drift reported")
    for i, (n, (cv, tau), size) in enumerate(itertools.product(LENGTHS, NOISES, SIZES)):
        t = drift_cell(np.random.default_rng(8200 + i), n, cv, tau, 1 - size, runs)
        print(f"  | {n} | {_cv(cv)} | {tau:.0%} | {size:.0%} | {t.rate(t.any_step):.1%} | "
              f"{t.rate(t.drift):.1%} |", flush=True)  # fmt: skip


def issue(runs: int) -> None:
    print("the issue's targets, 20 points, CV 5%")
    for tau in TAUS:
        f = flat_cell(np.random.default_rng(8300), 20, 0.05, tau, runs)
        s = step_cell(np.random.default_rng(8301), 20, 0.05, tau, 0.85, runs)
        print(
            f"  between {tau:.0%}: flat {f.rate(f.any_step):.1%} "
            f"({_se(f.rate(f.any_step), f.series)}); 15% step: {_step_row(s)}",
            flush=True,
        )


def covariate(runs: int) -> None:
    """Fill rises from 20% to 80% and falls back to 40% (data deleted); each fill percent
    costs 0.5% of throughput. Given the fill as covariate the change is a drift per fill
    percent; without it, the series goes down then up again."""
    print("a drift on fill (20 → 80 → 40%), −0.5% per fill percent, 30 points, CV 5%, 2%")
    rng = np.random.default_rng(8400)
    fill = np.concatenate([np.linspace(20, 80, 20), np.linspace(80, 40, 10)])
    levels = LEVEL * np.exp(np.log(0.995) * (fill - 20))
    with_cov, without = Tally(), Tally()
    slopes = []
    for _ in range(runs):
        pts = points(rng, levels, 0.05, 0.02, covariate=fill)
        h = detect(pts)
        tally(with_cov, h)
        if h.drift:
            slopes.append(h.drift.low <= 0.995 <= h.drift.high)
        bare = [type(p)(p.mean, p.n, values=p.values, label=p.label) for p in pts]
        tally(without, detect(bare))
    print(f"  with the fill: a step {with_cov.rate(with_cov.any_step):.1%}, a drift "
          f"{with_cov.rate(with_cov.drift):.1%} (its interval covers −0.5% per percent in "
          f"{sum(slopes) / max(len(slopes), 1):.1%})")  # fmt: skip
    print(f"  without it:    a step {without.rate(without.any_step):.1%}, a drift "
          f"{without.rate(without.drift):.1%}")  # fmt: skip


SECTIONS = {"flat": flat, "steps": steps, "drifts": drifts, "issue": issue,
            "covariate": covariate}  # fmt: skip
DEFAULT_RUNS = {"flat": 400, "steps": 300, "drifts": 300, "issue": 1000, "covariate": 400}


def main(argv: list[str]) -> None:
    runs = None
    if "--n" in argv:
        k = argv.index("--n")
        runs = int(argv[k + 1])
        argv = argv[:k] + argv[k + 2 :]
    for name in argv or list(SECTIONS):
        start = time.time()
        SECTIONS[name](runs or DEFAULT_RUNS[name])
        print(f"  ({time.time() - start:.0f} s)\n", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
