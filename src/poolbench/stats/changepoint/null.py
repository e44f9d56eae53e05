"""What a series without any change looks like, simulated for this series' own design (pure).

The thresholds of the search (the penalty per step, the outlier score) are Monte-Carlo tests
(G. A. Barnard, J. R. Stat. Soc. B 25 (1963) 294; A. C. A. Hope, ibid. 30 (1968) 582–598):
the statistic of the data is compared with the same statistic of B series simulated under
the fitted no-change model, and the threshold is the ⌈(1 − α)(B + 1)⌉-th smallest of them.
Were the fitted model the truth, "the data's statistic exceeds it" would happen with
probability exactly α for any B with α(B + 1) an integer; B = 199 costs little power
(K.-H. Jöckel, Ann. Statist. 14 (1986) 336–347). The fitted model is a parametric bootstrap:
every point keeps its replicates and degrees of freedom, its true within-run variance is drawn
from what its replicates say of it (`variance.posterior_draw`: a point estimated from three
replicates may well be twice as noisy as it looks, and the simulation must contain such
points as often as the data do), and τ² is the series' own estimate. Each simulated series
then goes through exactly the estimation the data went through (moderation of its own
simulated sᵢ², τ² from its own differences), so the threshold allows for the noise of those
estimates too.

The random numbers are seeded by the data themselves, so `detect` is a pure function: the
same points give the same answer, and different series draw independent-looking numbers (a
fixed seed would give every series the same simulated threshold and its error with it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from poolbench.stats.changepoint import variance
from poolbench.stats.changepoint.points import Array, Series

SIMULATIONS = 199  # B: α(B + 1) is an integer for α = 5%, 2.5%, 1%


@dataclass(frozen=True)
class Weights:
    """Rows of series with their point variances, τ̂² and search weights."""

    y: Array  # (rows, n)
    v: Array  # each point's within-run variance of y: s̃²/n
    tau2: Array  # (rows,)
    w: Array  # 1 / (v + τ̂²)
    moderated: variance.Moderated


def weigh(y: Array, s2: Array, d: Array, n: Array) -> Weights:
    """The estimation every series goes through, data and simulated alike (module doc)."""
    y = np.atleast_2d(y)
    mod = variance.moderate(s2, d)
    v = mod.s2 / n
    tau2 = variance.tau2_differences(y, v)
    total = np.maximum(v + tau2[:, None], variance.FLOOR)
    return Weights(y, v, tau2, 1 / total, mod)


def rng_for(series: Series, purpose: str) -> np.random.Generator:
    """A generator seeded by the data and what it is for (module doc)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (series.y, series.s2, series.d, series.n):
        digest.update(np.ascontiguousarray(part).tobytes())
    digest.update(purpose.encode())
    return np.random.default_rng(int.from_bytes(digest.digest(), "big"))


def simulate(series: Series, fitted: Weights, rng: np.random.Generator) -> Weights:
    """B series of the no-change model fitted to `series`, weighed like the data."""
    rows, n = SIMULATIONS, len(series)
    prior = variance.Moderated(np.repeat(fitted.moderated.s2[:1], rows, axis=0),
                               np.repeat(fitted.moderated.d0[:1], rows))  # fmt: skip
    truth_s2 = variance.posterior_draw(prior, series.d, rng)
    total = truth_s2 / series.n + fitted.tau2[0]
    y = rng.standard_normal((rows, n)) * np.sqrt(total)
    has = series.d > 0
    chi = rng.chisquare(np.where(has, series.d, 1.0), (rows, n)) / np.where(has, series.d, 1.0)
    s2 = np.where(has, truth_s2 * chi, 0.0)
    return weigh(y, s2, series.d, series.n)


def threshold(statistics: Array, alpha: float) -> float:
    """The Monte-Carlo test's critical value: the ⌈(1 − α)(B + 1)⌉-th smallest."""
    rank = int(np.ceil((1 - alpha) * (len(statistics) + 1)))
    ordered = np.sort(statistics)
    return float(ordered[min(rank, len(ordered)) - 1])
