"""Student's t quantiles and tail probabilities, fast enough for Monte-Carlo loops (pure).

`scipy.stats.t` builds a frozen distribution object per call (~50 µs); the replicate policy is
called thousands of times by the calibration tests, so the ufuncs of `scipy.special` are used
directly (~1 µs), and integer-df quantiles (the only ones Stein's rule needs) are cached.
"""

from __future__ import annotations

from functools import lru_cache

# scipy.special is imported inside each function, not here: it costs ~0.3 s, which every CLI
# command would pay at start though most compute no interval. A repeated import of a loaded
# module is a dictionary lookup (well under the ufunc's ~1 µs).


def quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom (df may be fractional)."""
    if float(df).is_integer():
        return _quantile_int(p, int(df))
    from scipy import special

    return float(special.stdtrit(df, p))


@lru_cache(maxsize=1024)
def _quantile_int(p: float, df: int) -> float:
    from scipy import special

    return float(special.stdtrit(df, p))


def two_sided_p(t: float, df: float) -> float:
    """P(|T| ≥ |t|) for T ~ t(df)."""
    from scipy import special

    return float(2 * special.stdtr(df, -abs(t)))
