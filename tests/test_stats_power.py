"""The noncentrality the power lines solve for (stats/power.py), without scipy.stats."""

from __future__ import annotations

import subprocess
import sys

from scipy import stats

from poolbench.stats import power, tdist


def test_the_tails_are_scipy_stats_nct_s_to_the_last_bit() -> None:
    for df in (1.0, 2.0, 3.0, 4.5, 9.0, 22.0, 99.0, 1000.0):
        for alpha in (0.05, 0.01, 1e-4, 2e-5 / 6):
            tc = tdist.quantile(1 - alpha / 2, df)
            for lam in (0.0, 0.5, 2.0, 3.7, 8.0, 20.0, 60.0):
                lower, upper = power.nct_tails(tc, df, lam)
                want_lower = float(stats.nct.cdf(-tc, df, lam))
                assert lower == want_lower or (lower != lower and want_lower != want_lower)
                assert upper == float(stats.nct.sf(tc, df, lam)), (df, alpha, lam)


def test_the_noncentrality_has_the_power_asked_for() -> None:
    # 4 df at 5%: the shortcut t(0.975) + t(0.8) = 2.776 + 0.941 = 3.72 has 79.1% power;
    # the exact λ is a little above it.
    lam = power.noncentrality(4, 0.05, 0.8)
    tc = tdist.quantile(0.975, 4)
    got = float(stats.nct.sf(tc, 4, lam) + stats.nct.cdf(-tc, 4, lam))
    assert abs(got - 0.8) < 1e-5
    assert 3.72 < lam < 3.9


def test_solving_it_does_not_import_scipy_stats() -> None:
    """scipy.stats costs about 0.5 s of CPU to import: a dry run's power line must not."""
    code = (
        "import sys\nfrom poolbench.stats import power\n"
        "power.noncentrality(7, 0.01, 0.8)\nprint('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
