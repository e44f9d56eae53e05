"""Differences between two sets of replicates, as a ratio with its confidence interval (pure).

A difference between configuration A (the baseline) and B is reported as the ratio of their
mean values, θ = μB / μA, with a confidence interval from **Fieller's theorem** (E. C. Fieller,
"Some problems in interval estimation", J. R. Stat. Soc. B 16 (1954) 175–185): the set of θ for
which B − θ·A is not significantly different from zero,

    (b − θ a)² ≤ t² (vB + θ² vA),        vA = sA²/nA,  vB = sB²/nB,

solved for θ:

    θ = [a b ± t √(a² vB + b² vA − t² vA vB)] / (a² − t² vA).

The two samples keep their own variances and their own sizes (nothing is pooled). Each
variance of a mean is the one the replicate rule reports (see `poolbench.stats.replicates`):
vA = s₀A² / nA with s₀ the standard deviation of the first `first_stage` replicates and
n₀ − 1 degrees of freedom. That is the only variance that stays honest after an adaptive
stopping rule: a sample that stopped early did so *because* its spread looked small, so its
full-sample variance understates the noise (all-adaptive families of 4 reached 12.5%
family-wise false positives, issue 12). With `first_stage=None` every value is stage one,
which is the ordinary analysis of a fixed number of replicates.

The degrees of freedom of t are Welch–Satterthwaite's for B − θA evaluated **under the
null, θ = 1** (the hypothesis the interval is tested against),

    df = (vA + vB)² / (vA²/dfA + vB²/dfB),

so "the interval excludes 1" and "p < α" always agree. At tiny samples with very unequal
variances Welch's df is liberal (n = 3, CV 2% vs 15%: 5.9% false positives in one comparison
at α = 5%, issue 28's simulation; more in families), so
when the smaller component df is below 5 and one variance of the mean exceeds twice the
other, Hsu's conservative df = min(dfA, dfB) is used instead. The threshold 2 was chosen by
simulation: families of equal noise stay at 1.7–3.5%, a quiet baseline against noisy
configurations at 4.3% with 3 fixed replicates, where a threshold of 4 let the adaptive
families reach 7–8%; always using Hsu's df cut the rate to ~0.5% and most of the power with
it. Known limit (docs/statistics.md): with stage-one df of 2 and the adaptive rule, that
quiet-vs-noisy family reaches 5.3–6.1%; `--min-runs 4` keeps it under 5%.

When a is not significantly different from zero (g = t² vA / a² ≥ 1) the Fieller set is
unbounded: the ratio is reported as undetermined, never as a number.

Several comparisons against one baseline (a table of configurations) control the familywise
error rate with Holm's step-down procedure (S. Holm, "A simple sequentially rejective
multiple test procedure", Scand. J. Statist. 6 (1979) 65–70): a comparison is significant
only if Holm rejects it, and its interval is computed at the level Holm used for it,
1 − α/(m − k) for the k-th smallest p-value (k from 0), so a significant change is always
shown with an interval that excludes no change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.stats import power as power_mod
from poolbench.stats import safemath, tdist
from poolbench.stats.replicates import stage
from poolbench.stats.welch import null_df

__all__ = [
    "IDENTICAL",
    "NO_DIFFERENCE",
    "Ratio",
    "compare_family",
    "constant",
    "exact_ratio",
    "holm",
    "ratio_ci",
]

NO_DIFFERENCE = power_mod.NO_DIFFERENCE
IDENTICAL = "undetermined: the replicates are identical, the measurement cannot resolve this"


@dataclass(frozen=True)
class Ratio:
    """B relative to A: `ratio` = mean(B) / mean(A) with its interval [low, high]."""

    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    ratio: float
    low: float  # nan when undetermined
    high: float
    confidence: float
    df: float
    p_value: float  # Welch's test of mean(B) = mean(A); nan when untestable
    significant: bool
    undetermined: str = ""  # why there is no interval ("" when there is one)
    se_rel: float = math.nan  # √(vA + vB) / mean(A): the comparison's relative noise
    power: float = 0.8  # for `detectable`
    # A ratio of geometric means (stats.logscale): se_rel is then the standard error of the
    # difference of the mean logs, and a detectable change is exp(λ·se) − 1.
    log_scale: bool = False
    # A figure with no noise (read from the pool, not measured: usable capacity): the ratio
    # is exact and has no interval (`exact_ratio`).
    exact: bool = False
    # The blocked, sequential rule (stats.blocked) states its own detectable change: from
    # an upper confidence bound of the noise, so the claim holds (nan: computed below).
    stated_detectable: float = math.nan

    @property
    def detectable(self) -> float:
        """The smallest relative change this comparison finds with `power`, at its level
        (nan when undetermined). Computed on demand: it solves a noncentral t."""
        if self.undetermined:
            return math.nan
        if math.isfinite(self.stated_detectable):
            return self.stated_detectable
        if math.isnan(self.se_rel):
            return math.nan
        lam = power_mod.noncentrality(self.df, 1 - self.confidence, self.power)
        return safemath.expm1(lam * self.se_rel) if self.log_scale else lam * self.se_rel

    @property
    def change(self) -> float:
        """Relative change (B − A) / A: 0.10 = B is 10% higher."""
        return self.ratio - 1

    @property
    def determined(self) -> bool:
        return not self.undetermined

    @property
    def reason(self) -> str:
        return self.undetermined

    def text(self) -> str:
        """'+12.3% [+8.1%, +16.5%]', 'no significant difference', or why it is unknown."""
        if self.undetermined:
            return self.undetermined
        if self.exact:
            return f"{_pct(self.change)} (exact)" if self.change else "the same (exact)"
        if not self.significant:
            return NO_DIFFERENCE
        return f"{_pct(self.change)} [{_pct(self.low - 1)}, {_pct(self.high - 1)}]"

    def full_text(self) -> str:
        """As `text`, but a non-result carries its interval and what could have been seen:
        'no significant difference (-4.0% … +9.0%; could detect ≥ 12%)'."""
        if self.undetermined or self.significant or self.exact:
            return self.text()
        return power_mod.no_difference_text(self.low, self.high, self.detectable)

    def as_dict(self) -> dict[str, object]:
        def num(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {
            "n_a": self.n_a,
            "n_b": self.n_b,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "ratio": num(self.ratio),
            "ratio_low": num(self.low),
            "ratio_high": num(self.high),
            "confidence": self.confidence,
            "df": num(self.df),
            "p_value": num(self.p_value),
            "significant": self.significant,
            "undetermined": self.undetermined or None,
            "detectable": num(self.detectable),
            "exact": self.exact,
            "text": self.text(),
        }


_pct = power_mod.pct


@dataclass(frozen=True)
class _Moments:
    n: int
    mean: float
    var_mean: float  # s₀²/n: the variance of the mean the replicate rule reports
    df: int  # of s₀: stage-one size − 1
    refused: str = ""  # why these values cannot be used ("" when they can)


def _moments(values: Sequence[float], first_stage: int | None) -> _Moments:
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        raise ValueError("no values to compare")
    bad = [i + 1 for i, v in enumerate(xs) if not math.isfinite(v)]
    if bad:
        why = (
            f"refused: replicate(s) {', '.join(map(str, bad))} are not finite numbers "
            "(nan or inf, a failed parse?); remove or re-measure them"
        )
        return _Moments(n, math.nan, math.nan, 0, why)
    st = stage(xs, n if first_stage is None else first_stage)
    mean = sum(xs) / n
    return _Moments(n, mean, st.sd * st.sd / n, st.df)


def ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = 0.95,
    first_stage: int | None = None,
) -> Ratio:
    """mean(b)/mean(a) with its Fieller interval (df under the null); significant iff it
    excludes 1. `first_stage`: the replicate rule's stage-one size (None: all values)."""
    return _ratio(_moments(a, first_stage), _moments(b, first_stage), confidence)


def constant(values: Sequence[float]) -> bool:
    """Every value the same finite number (at least one)."""
    return bool(values) and all(math.isfinite(v) and v == values[0] for v in values)


def exact_ratio(a: Sequence[float], b: Sequence[float]) -> Ratio:
    """mean(b)/mean(a) for figures that carry no noise (each side `constant`): the ratio
    itself, exact, with no interval and no test: there is nothing to estimate."""
    if not (constant(a) and constant(b)) or a[0] <= 0:
        raise ValueError("exact_ratio needs constant, positive baseline values")
    r = b[0] / a[0]
    return Ratio(len(a), len(b), a[0], b[0], r, r, r, 1.0, math.inf, math.nan, r != 1.0,
                 exact=True)  # fmt: skip


def _refusal(ma: _Moments, mb: _Moments) -> str:
    """Why no ratio can be computed, or ""."""
    if ma.refused or mb.refused:
        return ma.refused or mb.refused
    if ma.n < 2 or mb.n < 2:
        return f"too few runs ({ma.n} vs {mb.n}; 2 each needed)"
    if ma.mean <= 0:
        return (
            f"undetermined: the baseline's mean is {ma.mean:g}; a ratio to a mean that is "
            "0 or negative is undefined (is this figure a throughput at all?)"
        )
    if ma.var_mean == 0 and mb.var_mean == 0:
        return IDENTICAL
    return ""


def _ratio(ma: _Moments, mb: _Moments, confidence: float, power: float = 0.8) -> Ratio:
    ratio = mb.mean / ma.mean if ma.mean and math.isfinite(ma.mean) else math.nan

    def undetermined(why: str, df: float = math.nan, p: float = math.nan) -> Ratio:
        return Ratio(
            ma.n, mb.n, ma.mean, mb.mean, ratio, math.nan, math.nan, confidence, df, p, False, why
        )

    why = _refusal(ma, mb)
    if why:
        return undetermined(why)
    va, vb = ma.var_mean, mb.var_mean
    df = null_df(va, ma.df, vb, mb.df)
    se = math.sqrt(va + vb)
    p = tdist.two_sided_p((mb.mean - ma.mean) / se, df)
    t = tdist.quantile((1 + confidence) / 2, df)
    a2 = ma.mean * ma.mean
    denom = a2 - t * t * va
    if denom <= 0:
        return undetermined("ratio undetermined: the baseline's interval includes 0", df, p)
    root = math.sqrt(max(0.0, a2 * vb + mb.mean * mb.mean * va - t * t * va * vb))
    # Every figure compared is a rate or a time, never negative, so θ ≥ 0: the Fieller set
    # cut at 0 keeps its coverage and never prints a change below −100%.
    low = max(0.0, (ma.mean * mb.mean - t * root) / denom)
    high = (ma.mean * mb.mean + t * root) / denom
    significant = not (low <= 1.0 <= high)
    return Ratio(
        ma.n, mb.n, ma.mean, mb.mean, ratio, low, high, confidence, df, p, significant, "",
        se / ma.mean, power,
        stated_detectable=power_mod.upper_detectable(
            va, ma.df, vb, mb.df, df, 1 - confidence, power
        ) / ma.mean,
    )  # fmt: skip


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[tuple[bool, float]]:
    """Holm's step-down procedure: per p-value (in the given order), whether it is rejected
    and the significance level Holm tests it at (α/(m − k) for the k-th smallest). NaN
    p-values (untestable comparisons) are not part of the family and never rejected."""
    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    m = len(idx)
    out: list[tuple[bool, float]] = [(False, alpha)] * len(p_values)
    still = True
    for k, i in enumerate(sorted(idx, key=lambda j: p_values[j])):
        level = alpha / (m - k)
        still = still and p_values[i] <= level
        out[i] = (still, level)
    return out


def compare_family(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    confidence: float = 0.95,
    first_stage: int | None = None,
) -> list[Ratio]:
    """Each (A, B) pair as a Ratio, the family's error rate controlled by Holm (see above).
    With one pair this is exactly `ratio_ci`."""
    moments = [(_moments(a, first_stage), _moments(b, first_stage)) for a, b in pairs]
    first = [_ratio(ma, mb, confidence) for ma, mb in moments]
    alpha = 1 - confidence
    out = []
    for (ma, mb), r, (rejected, level) in zip(
        moments, first, holm([r.p_value for r in first], alpha), strict=True
    ):
        if r.undetermined and math.isnan(r.p_value):
            out.append(r)
            continue
        adj = _ratio(ma, mb, 1 - level)
        # The Holm-level interval excludes 1 exactly when p ≤ level; Holm may still stop
        # earlier (a smaller p-value was not rejected), so the decision is Holm's.
        significant = rejected and not adj.undetermined
        out.append(
            Ratio(
                adj.n_a,
                adj.n_b,
                adj.mean_a,
                adj.mean_b,
                adj.ratio,
                adj.low,
                adj.high,
                adj.confidence,
                adj.df,
                r.p_value,
                significant,
                adj.undetermined,
                adj.se_rel,
                adj.power,
                stated_detectable=adj.stated_detectable,
            )  # fmt: skip
        )
    return out
