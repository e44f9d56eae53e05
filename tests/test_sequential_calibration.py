"""The calibration of the t-tests' sequential levels (stats/sequential.py): what it costs is
not what it computes."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from poolbench.stats import sequential
from poolbench.stats.sequential import CALIBRATION_PATHS, CALIBRATION_SEED, t_levels


def _two_pass_p_values(first: int, last: int) -> np.ndarray:
    """The p-values as the calibration first computed them: each look's mean and standard
    deviation re-read from the start of every path."""
    x = np.random.default_rng(CALIBRATION_SEED).standard_normal((CALIBRATION_PATHS, last))
    out = np.empty((CALIBRATION_PATHS, last - first + 1))
    for k, n in enumerate(range(first, last + 1)):
        m, s = x[:, :n].mean(axis=1), x[:, :n].std(axis=1, ddof=1)
        out[:, k] = 2 * special.stdtr(n - 1, -np.abs(m / (s / math.sqrt(n))))
    return out


def test_running_means_and_thresholds_cross_exactly_where_the_p_values_do() -> None:
    abs_t, ordered = sequential._null_t(2, 12)
    assert abs_t.shape == ordered.shape == (CALIBRATION_PATHS, 11)
    slow = _two_pass_p_values(2, 12)
    for k in range(11):
        df = 2 + k - 1
        p = 2 * special.stdtr(df, -abs_t[:, k])
        np.testing.assert_allclose(p, slow[:, k], rtol=1e-9, atol=1e-15)
        for level in (0.05, 0.01, 1e-3, 1e-4, 0.0):  # not one path crosses differently
            tau = sequential._threshold(ordered[:, k], df, level)
            assert np.array_equal(abs_t[:, k] >= tau, slow[:, k] <= level), (k, level)


def test_a_level_below_what_the_simulation_resolves_is_bonferroni_without_simulating() -> None:
    """α = 2e-5 (a 2,500-configuration study's family): the calibration's goal (α less the
    binomial margin of 40,000 paths) is below zero, which no simulated level reaches, so the
    search would end in Bonferroni; it is returned without a simulated path."""
    sequential._null_t.cache_clear()
    assert t_levels(2e-5, 4, 9) == (2e-5 / 6,) * 6
    assert sequential._null_t.cache_info().misses == 0
    # α = 1e-4: the goal is above zero (1.8e-5, under one path in 40,000), so it simulates.
    levels = t_levels(1e-4, 4, 9)
    assert sequential._null_t.cache_info().misses == 1
    assert len(levels) == 6 and all(0 < x <= 1e-4 for x in levels)
