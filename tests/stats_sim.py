"""Monte-Carlo helpers shared by the calibration tests and bench/stats_calibration.py.

Every simulated study goes through `ReplicatePolicy` exactly as the engine uses it. One
configuration: stage one (`more([])` values), then `more(values)` more until it says 0, then
`summarize`. A family (a baseline and configurations, in blocks): `more_family(base, others)`
until every count is 0, adding that many values to each, then `compare_family` and
`summarize`. Only the random numbers are drawn with numpy, in one block per cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from poolbench.stats import ReplicatePolicy

TRUE_MEAN = 100.0


def draws(rng: np.random.Generator, dist: str, cv: float, shape: tuple[int, ...]) -> np.ndarray:
    """Replicates with arithmetic mean TRUE_MEAN and coefficient of variation cv
    ("lognormal": exp of a normal; "lognormal-sigma": cv is then σ of the log)."""
    if dist == "normal":
        return rng.normal(TRUE_MEAN, TRUE_MEAN * cv, shape)
    s = cv if dist == "lognormal-sigma" else math.sqrt(math.log1p(cv * cv))
    return TRUE_MEAN * np.exp(rng.normal(-s * s / 2, s, shape))


def disturb(rng: np.random.Generator, x: np.ndarray, rate: float, slow: float = 0.3) -> np.ndarray:
    """Each value, with probability `rate`, `slow` (30%) slower: a disturbed run."""
    return np.where(rng.random(x.shape) < rate, x * (1 - slow), x)


def run(policy: ReplicatePolicy, row: list[float]) -> list[float]:
    """One configuration's replicates as the engine collects them, from a row of draws."""
    values = row[: policy.more([])]
    while k := policy.more(values):
        values = row[: len(values) + k]
    return values


def run_family(
    policy: ReplicatePolicy, rows: list[list[float]], drift: float = 1.0
) -> tuple[list[float], dict[str, list[float]]]:
    """A baseline (rows[0]) and configurations c1… in blocks, as `more_family` asks; every
    value of a block after stage one multiplied by `drift` (a machine that slows down)."""
    names = [f"c{i}" for i in range(1, len(rows))]
    vals: dict[str, list[float]] = {"": [], **{k: [] for k in names}}
    src = dict(zip(vals, rows, strict=True))
    while True:
        more = policy.more_family(vals[""], {k: vals[k] for k in names})
        if not any(more.values()):
            return vals[""], {k: vals[k] for k in names}
        for k, count in more.items():
            for _ in range(count):
                j = len(vals[k])
                vals[k].append(src[k][j] * (drift if j >= policy.min_runs else 1.0))


@dataclass
class Cell:
    covered: int = 0
    intervals: int = 0
    false_families: int = 0
    families: int = 0
    found: int = 0
    runs: int = 0

    @property
    def coverage(self) -> float:
        return self.covered / self.intervals

    @property
    def fwer(self) -> float:
        return self.false_families / self.families

    @property
    def power(self) -> float:
        return self.found / self.families

    @property
    def mean_n(self) -> float:
        return self.runs / self.intervals


def single(policy: ReplicatePolicy, sample: np.ndarray) -> Cell:
    """Coverage of the reported interval, one configuration at a time (policy.more)."""
    out = Cell()
    for row in sample.tolist():
        v = run(policy, row)
        s = policy.summarize(v)
        out.covered += s.ci_low <= TRUE_MEAN <= s.ci_high
        out.intervals += 1
        out.runs += len(v)
    return out


def family(
    policy: ReplicatePolicy,
    sample: np.ndarray,  # (families, configurations, max_runs); configuration 0 = baseline
    effect: float = 0.0,  # configuration c1 is this much faster (0: all equal)
    drift: float = 1.0,
) -> Cell:
    """Families through more_family / compare_family: coverage of every configuration's
    interval (meaningful when effect = 0 and drift = 1), family-wise false positives among
    the configurations with no true difference, and how often c1's true change was found."""
    out = Cell()
    for fam in sample.tolist():
        if effect:
            fam[1] = [x * (1 + effect) for x in fam[1]]
        base, others = run_family(policy, fam, drift)
        ratios = policy.compare_family(base, others)
        if effect:
            r = ratios["c1"]
            out.found += r.significant and r.low > 1
        nulls = [r for k, r in ratios.items() if not (effect and k == "c1")]
        out.false_families += any(r.significant for r in nulls)
        out.families += 1
        for v in [base, *others.values()]:
            s = policy.summarize(v)
            out.covered += s.ci_low <= TRUE_MEAN <= s.ci_high
            out.intervals += 1
            out.runs += len(v)
    return out


def sigma_log(dist: str, cv: float) -> float:
    """The standard deviation of log(value) of `draws(…, dist, cv, …)` (normal: the
    lognormal with the same CV, which it is close to at CV ≤ 15%)."""
    return cv if dist == "lognormal-sigma" else math.sqrt(math.log1p(cv * cv))


def true_power(policy: ReplicatePolicy, ratio: object, sigma_d: float) -> float:
    """The probability that the last look of a non-result's own test (its blocks, its
    level) finds a true change of the size it says it could detect, when the per-block log
    ratio has standard deviation sigma_d: Student's noncentral t."""
    from scipy import stats

    from poolbench.stats.compare import Ratio
    from poolbench.stats.sequential import t_levels

    assert isinstance(ratio, Ratio)
    n = int(ratio.df) + 1
    first = min(policy.min_runs, n)
    nominal = t_levels(1 - ratio.confidence, first, max(policy.max_runs, n))[n - first]
    tc = float(stats.t.ppf(1 - nominal / 2, n - 1))
    ncp = math.log1p(ratio.detectable) / (sigma_d / math.sqrt(n))
    lower = float(stats.nct.cdf(-tc, n - 1, ncp))  # nan far in the tail: it is ~0 there
    return float(stats.nct.sf(tc, n - 1, ncp)) + (lower if math.isfinite(lower) else 0.0)


def detectable_claims(
    policy: ReplicatePolicy, sample: np.ndarray, sigma_d: float, effect: float = 0.0
) -> tuple[int, int]:
    """(non-results whose stated 'could detect ≥ X' has ≥ 80% true power, non-results)."""
    kept = total = 0
    for fam in sample.tolist():
        if effect:
            fam[1] = [x * (1 + effect) for x in fam[1]]
        base, others = run_family(policy, fam)
        for r in policy.compare_family(base, others).values():
            if r.significant or r.undetermined or not math.isfinite(r.detectable):
                continue
            total += 1
            kept += true_power(policy, r, sigma_d) >= 0.8
    return kept, total


def unpaired_claims(policy: ReplicatePolicy, sample: np.ndarray, cv: float) -> tuple[int, int]:
    """The same for the unpaired comparison the report tables use
    (stats.compare.compare_family on the stage-one variances, each configuration collected
    by `more`): a t-test with the comparison's df and the true noise, σ·√(1/nA + 1/nB)."""
    from scipy import stats

    from poolbench.stats.compare import compare_family

    kept = total = 0
    for fam in sample.tolist():
        vals = [run(policy, row) for row in fam]
        pairs = [(vals[0], v) for v in vals[1:]]
        for r in compare_family(pairs, first_stage=policy.min_runs):
            if r.significant or r.undetermined or not math.isfinite(r.detectable):
                continue
            total += 1
            tc = float(stats.t.ppf(1 - (1 - r.confidence) / 2, r.df))
            ncp = r.detectable / (cv * math.sqrt(1 / r.n_a + 1 / r.n_b))
            lower = float(stats.nct.cdf(-tc, r.df, ncp))
            p = float(stats.nct.sf(tc, r.df, ncp)) + (lower if math.isfinite(lower) else 0.0)
            kept += p >= 0.8
    return kept, total
