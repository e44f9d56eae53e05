"""The best piecewise-constant fit with k changes, for every k, exactly (pure, vectorised).

The cost of a segment is its weighted residual sum of squares about its weighted mean,

    C(a, b) = Σ_{a≤i<b} wᵢ (yᵢ − ȳ_w)²,   wᵢ = 1 / (vᵢ + τ²),

the Gaussian negative log-likelihood (up to constants) of a segment whose points have known,
unequal variances: the heteroscedastic mean-change cost of PELT (R. Killick, P. Fearnhead and
I. A. Eckley, J. Amer. Statist. Assoc. 107 (2012) 1590–1598) and the weighted L2 cost of the
complexity-penalised fit that asv uses (F. Friedrich, A. Kempe, V. Liebscher and G. Winkler,
"Complexity penalized M-estimation: fast computation", J. Comput. Graph. Statist. 17 (2008)
201–224). Segments shorter than `min_size` are not allowed.

Optimal partitioning (B. Jackson et al., IEEE Signal Process. Lett. 12 (2005) 105–108) fills
F_k(j) = min_i F_{k−1}(i) + C(i, j) for k = 0…K: O(K n²) per series, exact. A history has
tens to a few hundred points, where this is milliseconds; the calibration runs it on a block
of simulated series at once (rows), in chunks that keep the n × n table small.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from poolbench.stats.changepoint.points import Array

_CELLS = 2_000_000  # floats per chunk of the (rows, n+1, n+1) cost table


def _segment_costs(y: Array, w: Array, min_size: int) -> Array:
    """C[r, a, b] for every row r and segment [a, b) (inf where b − a < min_size)."""
    rows, n = y.shape
    zero = np.zeros((rows, 1))
    centred = y - (w * y).sum(axis=1, keepdims=True) / w.sum(axis=1, keepdims=True)
    c0 = np.concatenate([zero, np.cumsum(w, axis=1)], axis=1)
    c1 = np.concatenate([zero, np.cumsum(w * centred, axis=1)], axis=1)
    c2 = np.concatenate([zero, np.cumsum(w * centred * centred, axis=1)], axis=1)
    s0 = c0[:, None, :] - c0[:, :, None]
    s1 = c1[:, None, :] - c1[:, :, None]
    s2 = c2[:, None, :] - c2[:, :, None]
    idx = np.arange(n + 1)
    allowed = (idx[None, :] - idx[:, None]) >= min_size
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = np.maximum(s2 - s1 * s1 / s0, 0.0)
    return np.where(allowed[None, :, :], cost, np.inf)


def _fill(cost: Array, k_max: int) -> tuple[Array, NDArray[np.intp]]:
    """Optimal partitioning: best[r, k] and the argmin table arg[k, r, j]."""
    rows, n1, _ = cost.shape
    f = cost[:, 0, :]
    best = np.full((rows, k_max + 1), np.inf)
    best[:, 0] = f[:, -1]
    arg = np.zeros((k_max + 1, rows, n1), dtype=np.intp)
    for k in range(1, k_max + 1):
        total = f[:, :, None] + cost
        arg[k] = np.argmin(total, axis=1)
        f = np.take_along_axis(total, arg[k][:, None, :], axis=1)[:, 0, :]
        best[:, k] = f[:, -1]
    return best, arg


def _minima(cost: Array, k_max: int) -> Array:
    """best[r, k] alone (what the simulations need: no argmin table)."""
    f = cost[:, 0, :]
    best = np.empty((cost.shape[0], k_max + 1))
    best[:, 0] = f[:, -1]
    for k in range(1, k_max + 1):
        f = (f[:, :, None] + cost).min(axis=1)
        best[:, k] = f[:, -1]
    return best


def best_costs(y: Array, w: Array, min_size: int, k_max: int) -> Array:
    """best[r, k]: the smallest total cost of row r with exactly k changes (inf if none fit)."""
    y, w = np.atleast_2d(y), np.atleast_2d(w)
    rows, n = y.shape
    chunk = max(1, _CELLS // ((n + 1) * (n + 1)))
    out = np.empty((rows, k_max + 1))
    for start in range(0, rows, chunk):
        part = slice(start, start + chunk)
        out[part] = _minima(_segment_costs(y[part], w[part], min_size), k_max)
    return out


def every_fit(y: Array, w: Array, min_size: int, k_max: int) -> tuple[Array, list[list[int]]]:
    """For one series: the smallest cost with k changes and where they are, k = 0…k_max
    (each list: the first point of every new segment; empty where no fit exists)."""
    best, arg = _fill(_segment_costs(np.atleast_2d(y), np.atleast_2d(w), min_size), k_max)
    cuts = []
    for k in range(k_max + 1):
        found, j = [], len(y)
        for level in range(k, 0, -1):
            j = int(arg[level, 0, j])
            found.append(j)
        cuts.append(sorted(found) if np.isfinite(best[0, k]) else [])
    return best[0], cuts


def changes(y: Array, w: Array, min_size: int, k: int) -> list[int]:
    """Where the best fit of one series with exactly k changes starts each new segment."""
    return every_fit(y, w, min_size, k)[1][k]


def segment_cost(y: Array, w: Array) -> float:
    """C of one segment (module doc)."""
    mean = float(np.sum(w * y) / np.sum(w))
    return float(np.sum(w * (y - mean) ** 2))
