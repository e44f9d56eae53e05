"""How uncertain each point is, and how much runs vary beyond that (pure, row-vectorised).

Three estimates, each chosen for what it must survive:

**Each point's own variance, moderated.** A point from 3 replicates knows its spread with 2
degrees of freedom: one run in twenty has s² below 1/20 of the truth, and weighting by 1/s²
would let such a point dominate. The per-point variances are therefore moderated towards the
series' typical value by empirical Bayes (G. K. Smyth, "Linear models and empirical Bayes
methods for assessing differential expression in microarray experiments", Stat. Appl.
Genet. Mol. Biol. 3 (2004) art. 3, §6): the sᵢ² are taken as draws of s₀² · χ²_d₀/d₀ scaled
variances, d₀ and s₀² estimated from the moments of log sᵢ², and each point gets

    s̃ᵢ² = (d₀ s₀² + dᵢ sᵢ²) / (d₀ + dᵢ).

Points that agree with each other pool completely (d₀ = ∞); a point that is really noisier
keeps most of its own spread. A point without replicates (dᵢ = 0) gets s₀².

**Between-run variance for the search, from successive differences.** Runs of one series
vary more than their own intervals say (another day, a warmer disk, a background scrub):
yᵢ = μᵢ + uᵢ + eᵢ with uᵢ ~ N(0, τ²). The search must know τ² before it knows where the
steps are, so τ² is estimated from successive differences, which a few steps or a drift
barely touch: Δᵢ = yᵢ₊₁ − yᵢ has variance 2τ² + vᵢ + vᵢ₊₁ (vᵢ = s̃ᵢ²/nᵢ) away from a change,
and τ̂² solves median(Δᵢ² / (2τ² + vᵢ + vᵢ₊₁)) = the median of χ²₁. A median, so one step
or one disturbed run among the differences does not move it (difference-based scale
estimates are the usual choice in change-point search: P. Fryzlewicz, "Wild binary
segmentation", Ann. Statist. 42 (2014) 2243–2281, uses the MAD of the differences).

**Between-run variance for the intervals, DerSimonian–Laird.** Once the model is chosen (the
segments, with or without a trend), τ² is the method-of-moments estimate of the
random-effects meta-regression (R. DerSimonian and N. Laird, Control. Clin. Trials 7 (1986)
177–188; for a linear model, e.g. W. Viechtbauer, J. Stat. Softw. 36 (2010) §3): the excess
of the fixed-effect residual Q over its degrees of freedom.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from poolbench.stats.changepoint.points import Array

CHI2_1_MEDIAN = 0.454936423119572  # median of χ² with 1 df
FLOOR = 1e-12  # a point variance below this (a CV of 0.0001%) is taken as this


def _trigamma_inverse(x: Array) -> Array:
    """y with ψ′(y) = x (x > 0), by Newton's method on 1/ψ′, which is nearly linear in y."""
    from scipy import special

    y = np.where(x > 1e6, 1 / np.sqrt(x), np.where(x < 1e-6, 1 / x, 0.5 + 1 / x))
    for _ in range(50):
        tri = special.polygamma(1, y)
        step = tri * (1 - tri / x) / special.polygamma(2, y)
        y = y + step
        if np.all(np.abs(step) <= 1e-10 * y):
            break
    return np.asarray(y, dtype=float)


@dataclass(frozen=True)
class Moderated:
    """The moderated variances s̃² of each row, and the prior's degrees of freedom d₀ (∞ when
    the points agree so well that they pool completely)."""

    s2: Array  # (rows, n)
    d0: Array  # (rows,)


def moderate(s2: Array, d: Array) -> Moderated:
    """The moderated s̃² of every row of `s2` (rows: series, columns: points; d per column)."""
    from scipy import special

    s2 = np.atleast_2d(s2)
    ok = (s2 > 0) & (d > 0)
    count = ok.sum(axis=1)
    half = np.where(d > 0, d / 2, 1.0)
    e = np.where(ok, np.log(np.where(ok, s2, 1.0)) - special.digamma(half) + np.log(half), 0.0)
    emean = e.sum(axis=1) / np.maximum(count, 1)
    resid2 = np.where(ok, (e - emean[:, None]) ** 2, 0.0)
    trig = np.where(ok, special.polygamma(1, half), 0.0).sum(axis=1) / np.maximum(count, 1)
    evar = resid2.sum(axis=1) / np.maximum(count - 1, 1) - trig
    finite = (evar > 0) & (count >= 3)
    d0 = np.where(finite, 2 * _trigamma_inverse(np.where(finite, evar, 1.0)), np.inf)
    h0 = np.where(finite, d0 / 2, 1.0)
    s0_smyth = np.exp(emean + special.digamma(h0) - np.log(h0))
    pooled = (np.where(ok, s2, 0.0) * d).sum(axis=1) / np.maximum((ok * d).sum(axis=1), 1e-300)
    s0 = np.where(finite, s0_smyth, pooled)
    own = np.where(ok, s2, 0.0) * d
    prior = np.where(finite, d0, 0.0)[:, None]  # d₀ = ∞ (complete pooling) is taken below
    mixed = (prior * s0[:, None] + own) / np.maximum(prior + d, 1e-300)
    return Moderated(np.where(finite[:, None], mixed, s0[:, None] * np.ones_like(s2)), d0)


def posterior_draw(mod: Moderated, d: Array, rng: np.random.Generator) -> Array:
    """A draw of each point's true variance given its replicates: scaled inverse χ² with
    d₀ + dᵢ degrees of freedom about s̃ᵢ² (Smyth 2004, §6), s̃ᵢ² itself when d₀ = ∞."""
    df = mod.d0[:, None] + d[None, :]
    finite = np.isfinite(df) & (df > 0)
    safe = np.where(finite, df, 1.0)
    chi = rng.chisquare(safe) / safe
    return np.asarray(np.where(finite, mod.s2 / chi, mod.s2))


def tau2_differences(y: Array, v: Array) -> Array:
    """τ̂² per row from successive differences (module doc); v: each point's variance.

    Δᵢ²/(2τ² + bᵢ) exceeds the χ²₁ median exactly when τ² < cᵢ = (Δᵢ²/m − bᵢ)/2, so the τ²
    at which half of the ratios exceed it is the ⌈(n−1)/2⌉-th largest cᵢ (the median for an
    odd number of differences, the upper median for an even one), or 0 if that is negative.
    """
    y, v = np.atleast_2d(y), np.atleast_2d(v)
    if y.shape[1] < 2:
        return np.zeros(y.shape[0])
    dy2 = np.diff(y, axis=1) ** 2
    base = v[:, :-1] + v[:, 1:]
    crossing = (dy2 / CHI2_1_MEDIAN - base) / 2
    half = (crossing.shape[1] + 1) // 2
    kth = np.sort(crossing, axis=1)[:, -half]
    return np.maximum(kth, 0.0)


def tau2_dl(y: Array, v: Array, design: Array) -> float:
    """DerSimonian–Laird τ̂² of the linear model y = design · β (one series; module doc)."""
    w = 1 / np.maximum(v, FLOOR)
    xtwx = design.T @ (design * w[:, None])
    inv = np.linalg.pinv(xtwx)
    beta = inv @ (design.T @ (w * y))
    q = float(np.sum(w * (y - design @ beta) ** 2))
    dof = len(y) - np.linalg.matrix_rank(design)
    trace = float(w.sum() - np.trace(inv @ (design.T @ (design * (w * w)[:, None]))))
    if dof <= 0 or trace <= 0:
        return 0.0
    return max(0.0, float(q - dof) / trace)
