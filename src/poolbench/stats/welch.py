"""Degrees of freedom of the two-sample test behind every comparison (pure).

Welch–Satterthwaite's df evaluated under the null, and Hsu's conservative min(df) for tiny
samples with very unequal variances; the reasons are in `poolbench.stats.compare`.
"""

from __future__ import annotations

HSU_BELOW_DF = 5  # Hsu's df only matters for tiny samples (component df below this)
HSU_RATIO = 2.0  # ... whose variances of the mean differ by more than this factor


def welch_df(var_mean_a: float, n_a: int, var_mean_b: float, n_b: int, theta: float) -> float:
    """Welch–Satterthwaite degrees of freedom of B − θA (vA, vB are variances of the means,
    estimated with n_a − 1 and n_b − 1 degrees of freedom)."""
    va, vb = theta * theta * var_mean_a, var_mean_b
    num = (va + vb) ** 2
    den = (va * va / (n_a - 1) if va else 0.0) + (vb * vb / (n_b - 1) if vb else 0.0)
    if den == 0:
        return float(n_a + n_b - 2)  # both variances zero: t is multiplied by 0 anyway
    return num / den


def null_df(va: float, df_a: int, vb: float, df_b: int) -> float:
    """The test's df under the null θ = 1: Welch's, or Hsu's min(df) for tiny, very unequal
    samples (module doc)."""
    small, large = sorted((va, vb))
    if min(df_a, df_b) < HSU_BELOW_DF and large > HSU_RATIO * small:
        return float(min(df_a, df_b))
    return welch_df(va, df_a + 1, vb, df_b + 1, 1.0)
