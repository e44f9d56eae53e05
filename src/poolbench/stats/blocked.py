"""Comparisons against a baseline that decide, in randomized complete blocks, sequentially
(pure).

The design. Replicates run in *blocks*: block i measures the baseline and every
configuration still under comparison once each, in a random order (the engine's rounds).
values[i] of every configuration came from block i, so a comparison is analysed *within*
blocks: per block the difference of the logs, d_i = log(b_i) − log(a_i), and the ratio is
exp(mean d) (the ratio of geometric means over the common blocks). Anything that moves a
whole block, such as a machine that drifts slower through the study, cancels in d_i: a
configuration given more runs no longer looks slower or faster for it (the randomized
complete block design, R. A. Fisher, *The Design of Experiments*, 1935, ch. IV; the
analysis is the paired t-test on the logs).

The decision is group-sequential (`poolbench.stats.sequential`): after every block each
undecided comparison is tested with Student's t on its n − 1 df of d at the nominal level
of an α-spending boundary, so the configurations whose order is clear stop early and the
others are measured up to `max_runs`. A family of comparisons against one baseline is
controlled with Holm's step-down procedure over the sequential tests: a test is run at
α/m, and when some are rejected the rest are retested, at every look, at α/(m − r) (Holm
needs only valid marginal tests, which the spending boundaries give; the graphical form for
group-sequential designs is G. Maurer and F. Bretz, Stat. Biopharm. Res. 5 (2013) 311–320).

A comparison that is not significant is measured up to `max_runs`. Stopping it earlier
because its interval already lay within ±ci_target was tried and dropped: with 2–4 df the
spread that lets it stop is often a lucky small one, and the statement made at such a stop
("no difference beyond ±5%", "could detect ≥ X") was then not true often enough.

The interval reported is the intersection of the repeated confidence intervals of every look
(C. Jennison and B. W. Turnbull, "Interim analyses: the repeated confidence interval
approach", J. R. Stat. Soc. B 51 (1989) 305–361): they hold simultaneously with the
family's confidence, so their intersection does too, and it excludes "no change" exactly
when some look crossed its boundary: the interval and the decision always agree.

A non-result states what it could have detected with the noise's 95% upper confidence bound
(s · √(df / χ²₀.₀₅,df)), not the noise estimate: the estimate of 2–9 df is too small about
half the time, and a claim computed from it overstated the resolution (issue 28).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from poolbench.stats import safemath, tdist
from poolbench.stats.compare import IDENTICAL, Ratio
from poolbench.stats.power import noncentrality
from poolbench.stats.sequential import t_critical
from poolbench.stats.sequential import t_levels as nominal_levels

UPPER_NOISE = 0.95  # the confidence of the noise bound behind "could detect ≥ X"


@dataclass(frozen=True)
class Looks:
    """One comparison's statistics at every look n = first … n_last (common blocks)."""

    first: int
    last_info: int  # N of the information fraction n / N
    means: tuple[float, ...]  # mean of d over the first n blocks
    sds: tuple[float, ...]
    p_values: tuple[float, ...]  # two-sided, Student's t with n − 1 df

    @property
    def n(self) -> int:
        return self.first + len(self.means) - 1

    def rejects(self, level: float) -> bool:
        """Some look crossed the boundary that spends `level`."""
        nominal = nominal_levels(level, self.first, self.last_info)
        return any(p <= c for p, c in zip(self.p_values, nominal, strict=False))

    def interval(self, level: float) -> tuple[float, float]:
        """The intersection of the repeated confidence intervals for mean d (log scale)."""
        nominal = nominal_levels(level, self.first, self.last_info)
        low, high = -math.inf, math.inf
        for k, (m, s) in enumerate(zip(self.means, self.sds, strict=True)):
            n = self.first + k
            half = t_critical(nominal[k], n - 1) * s / math.sqrt(n)
            low, high = max(low, m - half), min(high, m + half)
        if low > high:  # disjoint (wild data): the last look's interval alone
            n = self.n
            half = t_critical(nominal[len(self.means) - 1], n - 1) * self.sds[-1] / math.sqrt(n)
            low, high = self.means[-1] - half, self.means[-1] + half
        return low, high

    def p_value(self, alpha: float) -> float:
        """A sequential p-value, approximately: the smallest ratio of a look's p-value to its
        nominal level at α, times α (the decision is the boundary's, not this figure's)."""
        nominal = nominal_levels(alpha, self.first, self.last_info)
        r = min(p / c if c > 0 else math.inf for p, c in zip(self.p_values, nominal, strict=False))
        return min(1.0, r * alpha)


def _refusal(a: Sequence[float], b: Sequence[float]) -> str:
    m = min(len(a), len(b))
    bad = [i + 1 for i, v in enumerate(b[:m]) if not math.isfinite(v)]
    bad_a = [i + 1 for i, v in enumerate(a[:m]) if not math.isfinite(v)]
    if bad or bad_a:
        return (
            f"refused: replicate(s) {', '.join(map(str, bad_a or bad))} are not finite numbers "
            "(nan or inf, a failed parse?); remove or re-measure them"
        )
    if m < 2:
        return f"too few runs ({len(a)} vs {len(b)}; 2 each needed)"
    mean_a = sum(a[:m]) / m
    if mean_a <= 0 or any(v <= 0 for v in a[:m]):
        return (
            f"undetermined: the baseline's mean is {mean_a:g}; a ratio to a mean that is "
            "0 or negative is undefined (is this figure a throughput at all?)"
        )
    if any(v <= 0 for v in b[:m]):
        return "undetermined: a replicate is 0 or negative; a ratio of rates needs positive ones"
    if len(set(a[:m])) == 1 and len(set(b[:m])) == 1:
        return IDENTICAL
    return ""


def looks(a: Sequence[float], b: Sequence[float], first: int, max_runs: int) -> Looks:
    """Every look's statistics of the paired log differences (a, b valid: see _refusal)."""
    m = min(len(a), len(b))
    d = [math.log(y) - math.log(x) for x, y in zip(a[:m], b[:m], strict=True)]
    start = max(2, min(first, m))
    means, sds, ps = [], [], []
    for n in range(start, m + 1):
        mean = sum(d[:n]) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in d[:n]) / (n - 1))
        means.append(mean)
        sds.append(sd)
        if sd == 0:
            ps.append(1.0 if mean == 0 else 0.0)
        else:
            ps.append(tdist.two_sided_p(mean / (sd / math.sqrt(n)), n - 1))
    return Looks(start, max(max_runs, m), tuple(means), tuple(sds), tuple(ps))


@dataclass(frozen=True)
class Decision:
    """One comparison's state after the family's Holm procedure."""

    ratio: Ratio
    significant: bool
    blocks: int  # common blocks analysed


def decide(
    base: Sequence[float],
    others: Mapping[str, Sequence[float]],
    *,
    confidence: float,
    first: int,
    max_runs: int,
    power: float = 0.8,
) -> dict[str, Decision]:
    """Holm over the sequential tests of every named configuration against `base`."""
    alpha = 1 - confidence
    refused = {k: _refusal(base, v) for k, v in others.items()}
    stats = {k: looks(base, v, first, max_runs) for k, v in others.items() if not refused[k]}
    m = len(stats)
    rejected: set[str] = set()
    while len(rejected) < m:  # Holm step-down, each test at every look (module doc)
        level = alpha / (m - len(rejected))
        new = {k for k, lk in stats.items() if k not in rejected and lk.rejects(level)}
        if not new:
            break
        rejected |= new
    final_level = alpha / max(1, m - len(rejected))
    out: dict[str, Decision] = {}
    for k, v in others.items():
        if refused[k]:
            out[k] = Decision(_undetermined(base, v, refused[k], confidence), False, 0)
            continue
        lk = stats[k]
        # A rejected test: the Holm level it was rejected at; the others: the last level.
        level = _rejecting_level(lk, alpha, m, len(rejected)) if k in rejected else final_level
        low, high = lk.interval(level)
        sig = k in rejected
        ratio = _ratio(base, v, lk, low, high, 1 - level, sig, power, lk.p_value(alpha))
        out[k] = Decision(ratio, sig, lk.n)
    return out


def _upper_sd(sd: float, df: int) -> float:
    """The UPPER_NOISE upper confidence bound of a standard deviation with df degrees."""
    from scipy import special

    return sd * math.sqrt(df / float(special.chdtri(df, UPPER_NOISE)))


def _rejecting_level(lk: Looks, alpha: float, m: int, rejected: int) -> float:
    """The lowest Holm level (α/m, α/(m − 1), …) at which this test was rejected."""
    for j in range(rejected):
        level = alpha / (m - j)
        if lk.rejects(level):
            return level
    return alpha / (m - rejected + 1)


def _ratio(
    a: Sequence[float],
    b: Sequence[float],
    lk: Looks,
    low: float,
    high: float,
    confidence: float,
    significant: bool,
    power: float,
    p: float,
) -> Ratio:
    n = lk.n
    mean_a, mean_b = sum(a[:n]) / n, sum(b[:n]) / n
    se = lk.sds[-1] / math.sqrt(n)
    return Ratio(
        len(a), len(b), mean_a, mean_b, safemath.exp(lk.means[-1]), max(0.0, safemath.exp(low)),
        safemath.exp(high), confidence, float(n - 1), p, significant, "", se, power,
        log_scale=True,
        stated_detectable=detectable(lk.sds[-1], n, 1 - confidence, lk, power),
    )  # fmt: skip


def detectable(sd: float, n: int, level: float, lk: Looks, power: float) -> float:
    """The change the last look alone finds with `power` when the noise is at its 95% upper
    confidence bound (the sequential test finds it at least as often)."""
    df = n - 1
    upper = _upper_sd(sd, df)
    nominal = nominal_levels(level, lk.first, lk.last_info)[n - lk.first]
    if nominal <= 0:
        return math.inf
    lam = noncentrality(df, nominal, power)
    return safemath.expm1(lam * upper / math.sqrt(n))


def _undetermined(a: Sequence[float], b: Sequence[float], why: str, confidence: float) -> Ratio:
    def mean(xs: Sequence[float]) -> float:
        return sum(xs) / len(xs) if xs else math.nan

    ma, mb = mean(a), mean(b)
    ratio = mb / ma if ma and math.isfinite(ma) and math.isfinite(mb) else math.nan
    return Ratio(len(a), len(b), ma, mb, ratio, math.nan, math.nan, confidence, math.nan,
                 math.nan, False, why)  # fmt: skip
