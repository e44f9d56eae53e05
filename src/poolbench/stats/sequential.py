"""Group-sequential boundaries with error spending (pure).

A comparison that is looked at after every block of replicates (n = n₀, n₀ + 1, …, N) and
stopped as soon as it is significant must not test each look at the full α: eight looks at
5% each find a "difference" between identical configurations far more often than 5%. The
boundaries here spend α over the looks (K. K. G. Lan and D. L. DeMets, "Discrete sequential
boundaries for clinical trials", Biometrika 70 (1983) 659–663) with the Hwang–Shih–DeCani
spending function (I. K. Hwang, W. J. Shih and J. S. DeCani, "Group sequential designs
using a family of type I error probability spending functions", Stat. Med. 9 (1990)
1439–1445):

    α(t) = α · (1 − e^(−γ t)) / (1 − e^(−γ)),    t = n / N (the information fraction),

γ = GAMMA. At look k the cumulative probability of having crossed a two-sided boundary under
the null is exactly α(t_k); the boundaries c_k on the z scale are computed by the recursive
numerical integration of Armitage, McPherson and Rowe ("Repeated significance tests on
accumulating data", J. R. Stat. Soc. A 132 (1969) 235–244; Jennison & Turnbull, *Group
Sequential Methods with Applications to Clinical Trials*, 2000, ch. 19).

The noise is not known, it is estimated at every look with n − 1 df, so each look is tested
at its *nominal level* p_k = 2(1 − Φ(c_k)) with Student's t and n − 1 df (the "significance
level approach", Jennison & Turnbull 2000, §3.8), which keeps the overall level close to α
(simulated in docs/statistics.md).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

GAMMA = -4.0  # O'Brien–Fleming-like: little spent early, where the t has 2–4 df
_GRID = 401  # points of the integration grid per look


def spent(alpha: float, t: float, gamma: float = GAMMA) -> float:
    """The cumulative α spent by information fraction t (0 < t ≤ 1)."""
    t = min(max(t, 0.0), 1.0)
    if gamma == 0:
        return alpha * t
    return alpha * (1 - math.exp(-gamma * t)) / (1 - math.exp(-gamma))


Vector = np.ndarray[tuple[int, ...], np.dtype[np.float64]]


def _norm_sf(x: Vector) -> Vector:
    from scipy import special

    return np.asarray(0.5 * special.erfc(x / math.sqrt(2)), dtype=np.float64)


def _cross(density: Vector, grid: Vector, w: Vector, sd: float, b: float) -> float:
    """P(|S| > b) where S = u + N(0, sd²), u distributed as `density` on `grid`."""
    tail = _norm_sf((b - grid) / sd) + _norm_sf((b + grid) / sd)
    return float(np.sum(w * density * tail))


def _boundary(density: Vector, grid: Vector, w: Vector, sd: float, inc: float) -> float:
    """The boundary on S (inf when nothing is spent) that the paths still running cross
    with probability `inc`."""
    from scipy import optimize

    if inc <= 0:
        return math.inf
    if _cross(density, grid, w, sd, 1e-9) <= inc:
        return 0.0
    hi = 8.0 * (sd + float(np.max(np.abs(grid))))
    return float(
        optimize.brentq(lambda b: _cross(density, grid, w, sd, b) - inc, 1e-9, hi, xtol=1e-10)
    )


@lru_cache(maxsize=512)
def nominal_levels(alpha: float, first: int, last: int, gamma: float = GAMMA) -> tuple[float, ...]:
    """Two-sided nominal levels p_k of the looks at n = first, first + 1, …, last blocks
    (information fraction n / last) of z-tests, spending `alpha` in total."""
    if not 0 < alpha < 1 or first < 1 or last < first:
        raise ValueError("need 0 < alpha < 1 and 1 ≤ first ≤ last")
    from scipy import special

    levels: list[float] = []
    prev_spent = 0.0
    grid: Vector = np.zeros(1)
    w: Vector = np.ones(1)
    density: Vector = np.ones(1)  # S at "look 0" is 0 with probability 1
    prev_n = 0
    for n in range(first, last + 1):
        inc = spent(alpha, n / last, gamma) - prev_spent
        prev_spent += max(inc, 0.0)
        sd = math.sqrt(n - prev_n)
        c_s = _boundary(density, grid, w, sd, inc)
        levels.append(float(special.erfc(c_s / math.sqrt(n) / math.sqrt(2))))
        # The density of S_n on (−c_s, c_s) for the paths that have not crossed yet.
        edge = c_s if math.isfinite(c_s) else 12.0 * math.sqrt(n)
        new_grid: Vector = np.linspace(-edge, edge, _GRID, dtype=np.float64)
        h = float(new_grid[1] - new_grid[0])
        new_w: Vector = np.full(_GRID, h, dtype=np.float64)
        new_w[0] = new_w[-1] = h / 2
        diff = (new_grid[:, None] - grid[None, :]) / sd
        kernel = np.exp(-0.5 * diff * diff) / (sd * math.sqrt(2 * math.pi))
        density = np.asarray(kernel @ (w * density), dtype=np.float64)
        grid, w, prev_n = new_grid, new_w, n
    return tuple(levels)


def t_critical(level: float, df: int) -> float:
    """The two-sided Student-t critical value at `level` (inf when the look spends nothing)."""
    if level <= 0:
        return math.inf
    from poolbench.stats import tdist

    return tdist.quantile(1 - level / 2, df)


CALIBRATION_PATHS = 40_000
CALIBRATION_SEED = 20261124


@lru_cache(maxsize=64)
def _null_t(first: int, last: int) -> tuple[Vector, Vector]:
    """|t| of the one-sample t-test at every look of seeded normal paths under the null,
    (paths, looks), the same numbers every time (common random numbers); and each look's
    column sorted, for `_threshold`."""
    rng = np.random.default_rng(CALIBRATION_SEED)
    x = rng.standard_normal((CALIBRATION_PATHS, last))
    out = np.empty((CALIBRATION_PATHS, last - first + 1))
    # Each path's mean and sum of squared deviations, updated one value at a time (Welford:
    # as exact as a two-pass mean and std, without their cost of every look re-reading the
    # path so far, O(paths · looks²): 3 s of CPU at 100 looks, docs/dryrun-scale.md).
    m: Vector = np.zeros(CALIBRATION_PATHS)
    m2: Vector = np.zeros(CALIBRATION_PATHS)
    for n in range(1, last + 1):
        v = x[:, n - 1]
        delta = v - m
        m = m + delta / n
        m2 = m2 + delta * (v - m)
        if n >= first:
            s = np.sqrt(m2 / (n - 1))
            out[:, n - first] = np.abs(m / (s / math.sqrt(n)))
    return out, np.sort(out, axis=0)


def _threshold(ordered: Vector, df: int, level: float) -> float:
    """The smallest |t| of a look (`ordered`, ascending) whose two-sided p-value
    2·P(T_df < −|t|) is at most `level`, inf if none: a path crosses the look exactly when
    its |t| is at least this. The p-value falls as |t| grows, so a bisection finds it with
    ~16 p-values instead of one per path (each look's 40,000 of them took 12 ms, most of a
    small study's calibration, docs/dryrun-scale.md)."""
    from scipy import special

    lo, hi = 0, len(ordered)  # p > level below lo; p <= level from hi on
    while lo < hi:
        mid = (lo + hi) // 2
        if 2 * special.stdtr(df, -ordered[mid]) <= level:
            hi = mid
        else:
            lo = mid + 1
    return float(ordered[lo]) if lo < len(ordered) else math.inf


def _level_of(design: float, first: int, last: int) -> float:
    """The fraction of the null paths that cross some look's nominal level."""
    abs_t, ordered = _null_t(first, last)
    crossed = np.zeros(CALIBRATION_PATHS, dtype=bool)
    for k, level in enumerate(nominal_levels(design, first, last)):
        crossed |= abs_t[:, k] >= _threshold(ordered[:, k], first + k - 1, level)
    return float(np.mean(crossed))


@lru_cache(maxsize=512)
def t_levels(alpha: float, first: int, last: int) -> tuple[float, ...]:
    """Nominal levels for Student's t at looks first … last that spend `alpha` in total.

    The z boundaries' nominal levels applied to t-tests of 2–9 df cross more often than
    the z-tests they come from, because the noise estimate changes from look to look. So
    the boundary is computed for a design level α′ chosen by a seeded simulation of the
    t-tests under the null (CALIBRATION_PATHS normal paths) so that they cross with
    probability at most α: the simulated level's 95% upper confidence bound is α
    (docs/statistics.md §5)."""
    if first == last:
        return (alpha,)
    from scipy import optimize

    # The simulated level has its own noise (binomial, CALIBRATION_PATHS paths): aim so that
    # its 95% upper confidence bound is α, so the true level is at most α even when the
    # calibration's own sample happened to be kind.
    goal = alpha - 1.645 * math.sqrt(alpha * (1 - alpha) / CALIBRATION_PATHS)
    looks = last - first + 1
    if goal < 0:
        # α below 1.645² / CALIBRATION_PATHS (≈ 6.8e-5, a family of ~750 comparisons): no
        # simulated level (a fraction of paths) is below a negative goal, so the search below
        # would simulate seven designs to end in Bonferroni: said at once (2 s of a
        # 2,500-configuration dry run, docs/dryrun-scale.md).
        return (alpha / looks,) * looks

    def excess(design: float) -> float:
        return _level_of(design, first, last) - goal

    lo, hi = alpha / 3, alpha
    if excess(hi) <= 0:  # (the z levels themselves are not liberal here)
        return nominal_levels(alpha, first, last)
    while excess(lo) > 0 and lo > alpha / 300:
        lo /= 3
    if excess(lo) > 0:
        # A level this small (a large family: α/m) is below what the simulation resolves, or
        # its t-tests of 2–9 df stay liberal at every design tried: Bonferroni over the
        # looks, which holds for any tests (a 220-configuration study's dry run stopped
        # here with brentq's "f(a) and f(b) must have different signs").
        return (alpha / looks,) * looks
    design = float(optimize.brentq(excess, lo, hi, xtol=alpha * 1e-3))
    return nominal_levels(design, first, last)
