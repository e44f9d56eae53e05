"""Honest non-results: the smallest difference a comparison could have detected (pure).

"No significant difference" alone reads as "they are the same"; with 3 replicates at CV 5% a
true +10% is found only 28% of the time (issue 28's simulation). So a non-result always
carries its interval and the smallest relative change the comparison would have called
significant with 80% power at its replicate counts and noise (this module: the unpaired
comparisons of stats.compare and stats.logscale, and planning; the blocked comparisons of
stats.blocked state theirs from an upper bound of the noise, docs/statistics.md §4):

    δ = λ · √(vA + vB) / x̄A

where λ is the noncentrality at which the two-sided t-test (df degrees of freedom, level α)
rejects with probability `power`: P(|T′| > t₁₋α/₂,df) = power for T′ ~ noncentral t(df, λ).
vA, vB are the variances of the means the replicate rule reports, α the level the comparison
was tested at (Holm's α/m for the most demanding member of a family of m). The shortcut
λ ≈ t₁₋α/₂ + t_power is optimistic at small df (its true power is 76.6% at 2 df and 79.1%
at 4, by the noncentral t), so the noncentral t is solved exactly.
"""

from __future__ import annotations

import math
from functools import lru_cache

from poolbench.stats import tdist
from poolbench.stats.welch import HSU_BELOW_DF, null_df

NO_DIFFERENCE = "no significant difference"


def pct(x: float) -> str:
    """+12.3%, or two decimals under 0.1%."""
    p = x * 100
    return f"{p:+.2f}%" if abs(p) < 0.1 else f"{p:+.1f}%"


def _ceil_pct(x: float) -> str:
    # Rounded *up*, so rounding never makes the claim finer than computed (the claim itself
    # holds only as far as its noise estimate does: stats.blocked uses an upper bound).
    if x < 0.1:
        return f"{math.ceil(x * 1000 - 1e-9) / 10:.1f}%"
    return f"{math.ceil(x * 100 - 1e-9):.0f}%"


# Past a detectable change of +100% (a 2× difference) a figure says nothing a reader can use:
# "could detect ≥ 13904%" is true and useless; the reports say there were too few replicates.
BLIND = 1.0


def no_difference_text(low: float, high: float, detectable: float) -> str:
    """'no significant difference (-4.0% … +9.0%; could detect ≥ 12%)' from the ratio
    interval [low, high] and the detectable relative change."""
    tail = f"; could detect ≥ {_ceil_pct(detectable)}" if math.isfinite(detectable) else ""
    if math.isfinite(detectable) and detectable > BLIND:
        tail = "; too few replicates at this noise to detect even a 2× change"
    return f"{NO_DIFFERENCE} ({pct(low - 1)} … {pct(high - 1)}{tail})"


def noncentrality(df: float, alpha: float, power: float) -> float:
    """λ with P(|T′| > t₁₋α/₂,df) = power, T′ ~ noncentral t(df, λ); df rounded to 0.01
    (a change of δ below 0.1%) so repeated calls are cached."""
    return _noncentrality(round(df, 2), alpha, power)


@lru_cache(maxsize=4096)
def _noncentrality(df: float, alpha: float, power: float) -> float:
    # Imported here: scipy.optimize costs ~0.3 s, which every CLI command would pay at
    # start (`poolbench runs` took 1.4 s) though most never solve this.
    from scipy import optimize

    tc = tdist.quantile(1 - alpha / 2, df)

    def shortfall(lam: float) -> float:
        # The lower tail (a significant change of the wrong sign) is negligible for λ ≫ 0,
        # where scipy's series can return nan: count it as 0 then.
        lower, upper = nct_tails(tc, df, lam)
        return upper + (lower if math.isfinite(lower) else 0.0) - power

    hi = tc + tdist.quantile(power, df) + 1
    while shortfall(hi) < 0:  # the shortcut is below the root; widen until bracketed
        hi *= 2
    return float(optimize.brentq(shortfall, 0.0, hi, xtol=1e-6))


def nct_tails(tc: float, df: float, lam: float) -> tuple[float, float]:
    """P(T′ < −tc) and P(T′ > tc), T′ ~ noncentral t(df, λ): the special functions that
    scipy.stats.nct.cdf and .sf evaluate (scipy 1.15), called directly, with the same
    clipping, because importing scipy.stats for them cost about 0.5 s of CPU of every dry
    run (docs/dryrun-scale.md). tests/test_stats_power.py holds them equal to nct's."""
    import numpy as np
    from scipy import special
    from scipy.special import _ufuncs

    lower = float(special.nctdtr(df, lam, -tc))
    with np.errstate(over="ignore"):  # as scipy.stats.nct._sf (scipy gh-17432)
        upper = float(np.clip(_ufuncs._nct_sf(tc, df, lam), 0, 1))
    return lower, upper


def detectable_change(
    cv: float,
    n: int,
    *,
    first_stage: int | None = None,
    family: int = 1,
    confidence: float = 0.95,
    power: float = 0.8,
) -> float:
    """The smallest relative change between two configurations of run-to-run CV `cv`, `n`
    replicates each, found with `power` (for --dry-run, from a pilot's CV). `first_stage`:
    the replicate rule's stage-one size, whose df the comparison uses (None: all n).
    A family of m comparisons is charged Holm's first level α/m. inf below 2 replicates."""
    if cv < 0 or family < 1 or n < 1:
        raise ValueError("cv must be ≥ 0, n and family ≥ 1")
    n0 = n if first_stage is None else min(n, first_stage)
    if n0 < 2:
        return math.inf
    # The df the comparison would use for two equal variances of the mean. Below 5 df each,
    # sampling noise alone often makes one estimate > 2× the other and the test falls back
    # to Hsu's df = n0 − 1 (52% of the time at 4 df, 67% at 2), so the claim uses that df:
    # it promises no more power than the test has.
    df = null_df(1.0, n0 - 1, 1.0, n0 - 1)
    if n0 - 1 < HSU_BELOW_DF:
        df = n0 - 1
    alpha = (1 - confidence) / family
    return noncentrality(df, alpha, power) * cv * math.sqrt(2 / n)


def upper_bound_var(var: float, df: int, confidence: float = 0.95) -> float:
    """The `confidence` upper bound of a variance estimated with `df` degrees of freedom."""
    if df < 1 or var <= 0:
        return var
    from scipy import special

    return var * df / float(special.chdtri(df, confidence))


def upper_detectable(
    va: float, df_a: int, vb: float, df_b: int, df: float, alpha: float, power: float
) -> float:
    """The change (in the units of the difference) a two-sample test at level `alpha` with
    `df` finds with `power` when the variance of the difference, vA + vB, is at its 95%
    upper bound with the test's df (Satterthwaite's approximation of its distribution): the
    noise estimates of a few df are smaller than the truth more often than not, and a claim
    from them overstated the resolution (issue 28). nan when untestable. df_a and df_b are
    kept for callers that bound each side (unused: the joint bound is tighter)."""
    del df_a, df_b
    if not (math.isfinite(va) and math.isfinite(vb) and math.isfinite(df)) or df <= 0:
        return math.nan
    se = math.sqrt(upper_bound_var(va + vb, max(1, math.floor(df))))
    return noncentrality(df, alpha, power) * se
