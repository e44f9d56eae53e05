"""Differences between two sets of replicates, as a ratio with its confidence interval (pure).

A difference between configuration A (the baseline) and B is reported as the ratio of their
mean values, θ = μB / μA, with a confidence interval from **Fieller's theorem** (E. C. Fieller,
"Some problems in interval estimation", J. R. Stat. Soc. B 16 (1954) 175–185): the set of θ for
which B − θ·A is not significantly different from zero,

    (b − θ a)² ≤ t² (vB + θ² vA),        vA = sA²/nA,  vB = sB²/nB,

solved for θ:

    θ = [a b ± t √(a² vB + b² vA − t² vA vB)] / (a² − t² vA).

The two samples keep their own variances and their own sizes (nothing is pooled), and the
degrees of freedom of t are Welch–Satterthwaite's for the linear combination B − θ̂ A,

    df = (vB + θ̂² vA)² / (vB²/(nB − 1) + θ̂⁴ vA²/(nA − 1)),

the unequal-variance form used by Tamhane & Logan (J. Biopharm. Stat. 14 (2004) 843–856) and
by R's mratios::ttestratio(var.equal = FALSE). With vA = 0 it reduces to the t interval of μB
divided by a; with θ = 1 the test is exactly Welch's t-test of μB = μA with that df, so
"the interval excludes 1" and "p < α" always agree — unlike a test whose degrees of freedom
assume equal sample sizes (the pitfall in pyperf's comparison).

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

import numpy as np

NO_DIFFERENCE = "no significant difference"


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

    @property
    def change(self) -> float:
        """Relative change (B − A) / A: 0.10 = B is 10% higher."""
        return self.ratio - 1

    def text(self) -> str:
        """'+12.3% [+8.1%, +16.5%]', 'no significant difference', or why it is unknown."""
        if self.undetermined:
            return self.undetermined
        if not self.significant:
            return NO_DIFFERENCE
        return f"{_pct(self.change)} [{_pct(self.low - 1)}, {_pct(self.high - 1)}]"

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
            "text": self.text(),
        }


def _pct(x: float) -> str:
    p = x * 100
    return f"{p:+.2f}%" if abs(p) < 0.1 else f"{p:+.1f}%"


@dataclass(frozen=True)
class _Moments:
    n: int
    mean: float
    var_mean: float  # s²/n


def _moments(values: Sequence[float]) -> _Moments:
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        raise ValueError("no values to compare")
    mean = float(x.mean())
    var = float(x.var(ddof=1)) if n > 1 else math.nan
    return _Moments(n, mean, var / n)


def welch_df(var_mean_a: float, n_a: int, var_mean_b: float, n_b: int, theta: float) -> float:
    """Welch–Satterthwaite degrees of freedom of B − θA (vA, vB are variances of the means)."""
    va, vb = theta * theta * var_mean_a, var_mean_b
    num = (va + vb) ** 2
    den = (va * va / (n_a - 1) if va else 0.0) + (vb * vb / (n_b - 1) if vb else 0.0)
    if den == 0:
        return float(n_a + n_b - 2)  # both variances zero: t is multiplied by 0 anyway
    return num / den


def ratio_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Ratio:
    """mean(b)/mean(a) with its Fieller interval (Welch df); significant iff it excludes 1."""
    return _ratio(_moments(a), _moments(b), confidence)


def _ratio(ma: _Moments, mb: _Moments, confidence: float) -> Ratio:
    ratio = mb.mean / ma.mean if ma.mean else math.nan

    def undetermined(why: str, df: float = math.nan, p: float = math.nan) -> Ratio:
        return Ratio(
            ma.n, mb.n, ma.mean, mb.mean, ratio, math.nan, math.nan, confidence, df, p, False, why
        )

    if ma.n < 2 or mb.n < 2:
        return undetermined(f"too few runs ({ma.n} vs {mb.n}; 2 each needed)")
    if ma.mean <= 0:
        return undetermined("baseline mean is not positive")
    va, vb = ma.var_mean, mb.var_mean
    df = welch_df(va, ma.n, vb, mb.n, ratio)
    se = math.sqrt(va + vb)
    diff = mb.mean - ma.mean
    from scipy import stats  # here, not at the top: scipy.stats costs ~1 s at every start

    p = float(2 * stats.t.sf(abs(diff) / se, df)) if se else (1.0 if diff == 0 else 0.0)
    t = float(stats.t.ppf((1 + confidence) / 2, df))
    a2 = ma.mean * ma.mean
    denom = a2 - t * t * va
    if denom <= 0:
        return undetermined("ratio undetermined: the baseline's interval includes 0", df, p)
    root = math.sqrt(max(0.0, a2 * vb + mb.mean * mb.mean * va - t * t * va * vb))
    low = (ma.mean * mb.mean - t * root) / denom
    high = (ma.mean * mb.mean + t * root) / denom
    significant = not (low <= 1.0 <= high)
    return Ratio(ma.n, mb.n, ma.mean, mb.mean, ratio, low, high, confidence, df, p, significant)


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
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], confidence: float = 0.95
) -> list[Ratio]:
    """Each (A, B) pair as a Ratio, the family's error rate controlled by Holm (see above).
    With one pair this is exactly `ratio_ci`."""
    moments = [(_moments(a), _moments(b)) for a, b in pairs]
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
                rejected and not adj.undetermined,
                adj.undetermined,
            )
        )
    return out
