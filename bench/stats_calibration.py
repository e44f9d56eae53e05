"""Monte-Carlo calibration of poolbench's replicate rules, full size (docs/statistics.md).

Run: PYTHONPATH=src python bench/stats_calibration.py SECTION [SECTION ...] [--n N]
Sections (each well under 5 minutes of CPU at the default sizes):
  boundary  the sequential t-tests' overall level after calibration (200,000 null paths)
  single    coverage of the reported interval, one configuration at a time (policy.more),
            normal / lognormal replicates, clean and with 5% of runs 30% slow
  family    family-wise false positives and coverage through more_family / compare_family:
            a baseline and 4 identical configurations; disturbed runs; a drifting machine;
            a quiet baseline against noisy configurations
  power     a true +10% at CV 5%, alone and in a family of 4 (and the old rule's figures)
  claims    how often 'could detect ≥ X' on a non-result has ≥ 80% true power at X
  ratios    coverage of the comparisons' intervals, clean and with disturbed runs
  outliers  false flags on clean samples and how often a disturbed run is named
  p99       coverage of the pooled p99's interval (merged fio-like histograms)
  planning  at the change the dry run prints (p.detectable), how often the rule finds it
Every simulated study goes through ReplicatePolicy exactly as the engine would (the same
code as tests/test_stats_policy.py, tests/stats_sim.py, with more samples). Seeded.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from poolbench.stats import ReplicatePolicy  # noqa: E402
from poolbench.stats import outliers as outlier_mod  # noqa: E402
from poolbench.stats.compare import compare_family as old_compare_family  # noqa: E402
from stats_sim import (  # noqa: E402
    detectable_claims,
    disturb,
    draws,
    family,
    run,
    sigma_log,
    single,
    unpaired_claims,
)

DISTS = (("normal", 0.02), ("normal", 0.05), ("normal", 0.15), ("lognormal", 0.02),
         ("lognormal", 0.05), ("lognormal", 0.15), ("lognormal-sigma", 0.1),
         ("lognormal-sigma", 0.3))  # fmt: skip
TARGETS = (0.05, 0.10)


def _p(target: float = 0.05) -> ReplicatePolicy:
    return ReplicatePolicy(ci_target=target, min_runs=3, max_runs=10)


def _name(dist: str, cv: float) -> str:
    return f"lognormal σ {cv:g}" if dist == "lognormal-sigma" else f"{dist} CV {cv:.0%}"


def boundary(paths: int) -> None:
    from scipy import special

    from poolbench.stats.sequential import t_levels

    print("sequential t-tests at n = 3..10 under the null: overall level / nominal α")
    rng = np.random.default_rng(77)
    x = rng.standard_normal((paths, 10))
    p = np.empty((paths, 8))
    for k, n in enumerate(range(3, 11)):
        m, s = x[:, :n].mean(axis=1), x[:, :n].std(axis=1, ddof=1)
        p[:, k] = 2 * special.stdtr(n - 1, -np.abs(m / (s / math.sqrt(n))))
    for alpha in (0.05, 0.025, 0.05 / 3, 0.0125):
        lv = np.asarray(t_levels(alpha, 3, 10))
        level = float(np.mean((p <= lv).any(axis=1)))
        print(f"  α = {alpha:.4f}: {level:.4f} ({level / alpha:.3f} × α)")
    # A Holm family of 4 against one shared baseline, every test at every look, on the
    # block differences of normal values: the exact procedure of stats.blocked, vectorized.
    fams = paths // 2
    base = rng.standard_normal((fams, 10))
    crossed = {}
    for i in range(4):
        d = rng.standard_normal((fams, 10)) - base
        pv = np.empty((fams, 8))
        for k, n in enumerate(range(3, 11)):
            m, s = d[:, :n].mean(axis=1), d[:, :n].std(axis=1, ddof=1)
            pv[:, k] = 2 * special.stdtr(n - 1, -np.abs(m / (s / math.sqrt(n))))
        for j in (1, 2, 3, 4):
            crossed[i, j] = (pv <= np.asarray(t_levels(0.05 / j, 3, 10))).any(axis=1)
    rejected = np.zeros((4, fams), dtype=bool)
    for _step in range(4):
        left = 4 - rejected.sum(axis=0)  # Holm's level is α / left
        for i in range(4):
            for j in (1, 2, 3, 4):
                rejected[i] |= (left == j) & crossed[i, j]
    print(f"  Holm family of 4, shared baseline ({fams:,} families): "
          f"family-wise false positives {rejected.any(axis=0).mean():.2%}")  # fmt: skip


def single_table(n: int) -> None:
    print("one configuration at a time (more / summarize): coverage, mean n")
    for i, ((dist, cv), target, dis) in enumerate(itertools.product(DISTS, TARGETS, (0.0, 0.05))):
        rng = np.random.default_rng(9000 + i)
        x = disturb(rng, draws(rng, dist, cv, (n, 10)), dis)
        c = single(_p(target), x)
        what = "5% of runs 30% slow" if dis else "clean"
        cell = f"{_name(dist, cv):18s} ±{target:.0%} {what:20s}"
        print(f"  {cell} {c.coverage:.2%}  n {c.mean_n:.1f}")


def family_table(n: int) -> None:
    print("baseline + 4 identical configurations (more_family / compare_family)")
    print("  cell; family-wise false positives; coverage of every interval; mean n")
    cells = [(d, cv, t, 0.0, 1.0) for (d, cv), t in itertools.product(DISTS, TARGETS)]
    cells += [("normal", cv, t, 0.05, 1.0) for cv in (0.02, 0.05, 0.15) for t in TARGETS]
    cells += [("normal", cv, t, 0.0, 0.85) for cv in (0.02, 0.05, 0.15) for t in TARGETS]
    for i, (dist, cv, target, dis, drift) in enumerate(cells):
        rng = np.random.default_rng(9100 + i)
        sample = disturb(rng, draws(rng, dist, cv, (n, 5, 10)), dis)
        c = family(_p(target), sample, drift=drift)
        what = "5% slow" if dis else ("drift 15%" if drift != 1.0 else "clean")
        cov = "" if drift != 1.0 else f"{c.coverage:.2%}"
        print(f"  {_name(dist, cv):18s} ±{target:.0%} {what:9s} FWER {c.fwer:.2%}  "
              f"coverage {cov:7s} n {c.mean_n:.1f}")  # fmt: skip
    rng = np.random.default_rng(9199)
    quiet = draws(rng, "normal", 0.02, (n, 1, 10))
    noisy = draws(rng, "normal", 0.15, (n, 3, 10))
    c = family(_p(), np.concatenate([quiet, noisy], axis=1))
    print(f"  baseline CV 2% vs 3 at CV 15%: FWER {c.fwer:.2%}")


def power_table(n: int) -> None:
    print("a true +10% at CV 5% (normal), ±5% target, 3..10 runs")
    for configs in (1, 4):
        rng = np.random.default_rng(9300 + configs)
        sample = draws(rng, "normal", 0.05, (n, configs + 1, 10))
        c = family(_p(), sample.copy(), effect=0.10)
        print(f"  family of {configs}: found {c.power:.1%}, other configs' FWER {c.fwer:.2%}, "
              f"mean n {c.mean_n:.1f}")  # fmt: skip
        found = 0
        p = _p()
        for fam in sample.tolist():
            vals = [run(p, row) for row in fam]
            vals[1] = [v * 1.1 for v in vals[1]]
            r = old_compare_family([(vals[0], v) for v in vals[1:]], first_stage=3)[0]
            found += r.significant and r.low > 1
        print(f"    the old rule (Stein per configuration, stage-one variances): {found / n:.1%}")


def ratio_table(n: int) -> None:
    from stats_sim import run_family

    print("coverage of the comparisons' intervals (the true ratio: 1.10 for c1, 1 for the rest)")
    for i, (cv, dis) in enumerate(itertools.product((0.02, 0.05, 0.15), (0.0, 0.05))):
        rng = np.random.default_rng(9700 + i)
        sample = disturb(rng, draws(rng, "normal", cv, (n, 5, 10)), dis)
        covered = total = 0
        for fam in sample.tolist():
            fam[1] = [x * 1.1 for x in fam[1]]
            base, others = run_family(_p(), fam)
            for k, r in _p().compare_family(base, others).items():
                true = 1.1 if k == "c1" else 1.0
                covered += r.low <= true <= r.high
                total += 1
        what = "5% of runs 30% slow" if dis else "clean"
        print(f"  CV {cv:.0%}, {what}: {covered / total:.2%} of {total}")


def claims_table(n: int) -> None:
    print("non-results whose 'could detect ≥ X' has ≥ 80% true power at X (last look alone)")
    for i, (cv, effect, configs) in enumerate(
        [(0.02, 0.0, 4), (0.05, 0.0, 1), (0.05, 0.0, 4), (0.05, 0.10, 4), (0.15, 0.0, 4)]
    ):
        rng = np.random.default_rng(9400 + i)
        sample = draws(rng, "normal", cv, (n, configs + 1, 10))
        kept, total = detectable_claims(
            _p(), sample, math.sqrt(2) * sigma_log("normal", cv), effect
        )
        print(f"  CV {cv:.0%}, true change {effect:+.0%}, family of {configs}: "
              f"{kept / total:.1%} of {total} non-results")  # fmt: skip
    print("the unpaired comparison (report tables; Stein per configuration), no true change")
    for i, (cv, configs) in enumerate([(0.05, 1), (0.05, 4), (0.15, 4)]):
        rng = np.random.default_rng(9450 + i)
        sample = draws(rng, "normal", cv, (n, configs + 1, 10))
        kept, total = unpaired_claims(_p(), sample, cv)
        print(f"  unpaired CV {cv:.0%}, family of {configs}: "
              f"{kept / total:.1%} of {total} non-results")  # fmt: skip


def outlier_table(n: int) -> None:
    print("outlier flags (generalized ESD on the logs, 2%): clean false flags; named runs")
    rng = np.random.default_rng(9500)
    for k in range(3, 11):
        clean = np.exp(rng.normal(0, 0.05, (n, k)))
        false = np.mean([bool(outlier_mod.flag(r)) for r in clean.tolist()])
        six = clean.copy()
        six[:, 1] *= math.exp(-6 * 0.05)
        named6 = np.mean([1 in outlier_mod.flag(r) for r in six.tolist()])
        slow = np.exp(rng.normal(0, 0.02, (n, k)))
        slow[:, 1] *= 0.7
        named30 = np.mean([1 in outlier_mod.flag(r) for r in slow.tolist()])
        print(f"  n = {k:2d}: clean flagged {false:.2%}; a 6σ slow run named {named6:.1%}; "
              f"a 30% slow run at CV 2% named {named30:.1%}")  # fmt: skip


def _fio_bins(v: np.ndarray) -> dict[int, int]:
    v = np.maximum(v, 1.0)
    e = np.floor(np.log2(v))
    b = (2**e * (1 + np.floor((v / 2**e - 1) * 64) / 64)).astype(np.int64)
    keys, counts = np.unique(b, return_counts=True)
    return dict(zip(keys.tolist(), counts.tolist(), strict=True))


def p99_table(n: int) -> None:
    from scipy import optimize, stats

    from poolbench.stats.pooled import pooled_percentile

    print("pooled p99 of all I/Os: coverage of its 95% interval (Woodruff ∪ log jackknife)")
    print("  log-latency N(log 200 µs + u, 0.5²) per I/O, u ~ N(0, τ²) per run")
    mu, s = math.log(200_000), 0.5
    z, w = np.polynomial.hermite_e.hermegauss(60)
    w = w / w.sum()
    cells = itertools.product((0.1, 0.3, 0.5), (3, 5, 10), (2000, 20000))
    for i, (tau, runs, ios) in enumerate(cells):

        def f(lx: float, tau: float = tau) -> float:
            return float(np.sum(w * stats.norm.cdf((lx - mu - tau * z) / s))) - 0.99

        truth = next(iter(_fio_bins(np.array([math.exp(optimize.brentq(f, mu - 10, mu + 20))]))))
        rng = np.random.default_rng(9600 + i)
        hit = 0
        for _ in range(n):
            hists = [
                _fio_bins(np.exp(rng.normal(mu + rng.normal(0, tau), s, ios))) for _ in range(runs)
            ]
            got = pooled_percentile(hists)
            hit += got.low <= truth <= got.high
        print(f"  τ {tau:.1f}, {runs:2d} runs of {ios:6,d} I/Os: {hit / n:.1%}")


def planning_table(n: int) -> None:
    print("planning: at the change p.detectable prints, how often the family rule finds it")
    print("  lognormal replicates, 3..10 runs, one configuration that much faster")
    for i, (cv, configs) in enumerate(itertools.product((0.02, 0.05, 0.15), (1, 4))):
        p = _p()
        d = p.detectable(cv, family=configs)
        rng = np.random.default_rng(9700 + i)
        c = family(p, draws(rng, "lognormal", cv, (n, configs + 1, 10)), effect=d)
        print(f"  CV {cv:.0%}, family of {configs}: printed {d:.1%}, found {c.power:.1%}, "
              f"mean n {c.mean_n:.1f}")  # fmt: skip


SECTIONS = {
    "boundary": (boundary, 200_000),
    "single": (single_table, 20_000),
    "family": (family_table, 2_000),
    "power": (power_table, 4_000),
    "claims": (claims_table, 1_000),
    "ratios": (ratio_table, 1_000),
    "outliers": (outlier_table, 20_000),
    "p99": (p99_table, 2_000),
    "planning": (planning_table, 2_000),
}


def main() -> None:
    args = sys.argv[1:]
    size = None
    if "--n" in args:
        size = int(args[args.index("--n") + 1])
        del args[args.index("--n") : args.index("--n") + 2]
    for name in args or list(SECTIONS):
        fn, default = SECTIONS[name]
        fn(size or default)
        print(flush=True)


if __name__ == "__main__":
    main()
