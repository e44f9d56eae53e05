"""ReplicatePolicy: Monte-Carlo calibration through the object as the engine uses it, and
every edge case of issue 12 (poolbench.stats).

Simulation sizes and their Monte-Carlo standard errors (binomial, sqrt(p(1-p)/N)):
- coverage: 2,000 families × 4 configurations = 8,000 intervals per cell; at p = 0.95 the
  SE is 0.24%, so the band 93.5–96.5% is ±6.2 SE around the promise: a rule that covered
  the 91.3% of the old one would fail by 9 SE, a correct one passes with room to spare.
- family-wise false positives: 2,000 families of 3 comparisons per cell; at p = 0.05 the
  SE is 0.49%, so ≤ 5.5% catches the old rule's 12.5% by 14 SE; the rule's own rates
  (docs/statistics.md, 20,000 families per cell) sit under 5%.
- outlier flags: 4,000 clean samples per n; at the designed 1% the SE is 0.16%.
All seeded: the figures are reproducible, and bench/stats_calibration.py reruns them larger.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from poolbench.stats import ReplicatePolicy
from poolbench.stats import outliers as outlier_mod
from poolbench.stats.compare import IDENTICAL, NO_DIFFERENCE, compare_family
from stats_sim import TRUE_MEAN, draws, run, simulate

FAMILIES = 2_000
CELLS = list(itertools.product(("normal", "lognormal"), (0.03, 0.08, 0.15), (6, 10), (0.05, 0.10)))


@pytest.mark.parametrize(("dist", "cv", "cap", "target"), CELLS)
def test_coverage_and_familywise_false_positives(
    dist: str, cv: float, cap: int, target: float
) -> None:
    seed = CELLS.index((dist, cv, cap, target))
    rng = np.random.default_rng(1200 + seed)
    policy = ReplicatePolicy(ci_target=target, min_runs=3, max_runs=cap)
    cell = simulate(policy, draws(rng, dist, cv, (FAMILIES, 4, cap)))
    assert 0.935 <= cell.coverage <= 0.965, cell
    assert cell.fwer <= 0.055, cell
    assert 3 <= cell.mean_n <= cap  # the rule used its room (stage one, at most the cap)


@pytest.mark.parametrize(("min_runs", "cap"), [(3, 3), (4, 10)])
def test_tiny_samples_with_very_unequal_noise_keep_the_family_rate(min_runs: int, cap: int) -> None:
    """Issue 12: n = 3, CV 2% vs 15% reached 7.2% with Welch's df; Hsu's df keeps it under 5%
    (simulated 4.3%). Adaptive at --min-runs 4, cap 10: 4.5% simulated (docs/statistics.md;
    at --min-runs 3 this case reaches 6.1%, the documented limit)."""
    rng = np.random.default_rng(77 + cap)
    policy = ReplicatePolicy(ci_target=0.05, min_runs=min_runs, max_runs=cap)
    quiet = draws(rng, "normal", 0.02, (FAMILIES, 1, cap))
    noisy = draws(rng, "normal", 0.15, (FAMILIES, 3, cap))
    cell = simulate(policy, np.concatenate([quiet, noisy], axis=1))
    assert cell.fwer <= 0.055, cell


def test_the_old_rule_fails_the_same_check() -> None:
    """The check can fail: the naive rule (stop when the t-interval of all values is within
    target) covers ~91% at CV 8%, 3→10, as issue 12 measured; coverage must drop below the
    band here, or this simulation could not tell a broken rule from a correct one."""
    rng = np.random.default_rng(5)
    x = draws(rng, "normal", 0.08, (10_000, 10))
    stopped = np.zeros(len(x), dtype=bool)
    covered = np.zeros(len(x), dtype=bool)
    for n in range(3, 11):  # vectorized over samples: the rule looks after every run
        mean = x[:, :n].mean(axis=1)
        half = stats.t.ppf(0.975, n - 1) * x[:, :n].std(axis=1, ddof=1) / math.sqrt(n)
        stop = ~stopped & ((half <= 0.05 * mean) | (n == 10))
        covered[stop] = np.abs(mean - TRUE_MEAN)[stop] <= half[stop]
        stopped |= stop
    assert covered.mean() < 0.935


@pytest.mark.parametrize("n", range(3, 21))
def test_false_outlier_flags_on_clean_samples(n: int) -> None:
    rng = np.random.default_rng(300 + n)
    samples = rng.normal(100, 8, (4_000, n)).tolist()
    rate = sum(bool(outlier_mod.flag(s)) for s in samples) / len(samples)
    assert rate <= 0.05
    if n < outlier_mod.MIN_N:
        assert rate == 0
    else:  # calibrated at 1% per sample: 4,000 samples, SE 0.16%, band ±4 SE
        assert 0.0035 <= rate <= 0.0165


def test_an_outlier_is_flagged_and_the_message_blames_no_machine() -> None:
    values = [100.0, 101, 99, 100.5, 99.5, 100.2, 60]
    assert outlier_mod.flag(values) == (6,)
    msg = outlier_mod.note("7")
    assert "machine" not in msg and "1 of 100" in msg and "Kept in the mean" in msg
    # MAD = 0 (most values identical): the mean absolute deviation is the scale instead.
    # 11 × 100 and one 101: MeanAD = 1/12, M = 1 / (1.2533 / 12) = 9.57 > 6.25 (n = 12).
    assert outlier_mod.flag([100.0] * 11 + [101]) == (11,)
    assert outlier_mod.flag([100.0] * 12) == ()


def test_more_is_steins_total_fixed_by_stage_one() -> None:
    p = ReplicatePolicy(ci_target=0.05, min_runs=3, max_runs=10)
    assert p.more([]) == 3 and p.more([100]) == 2
    # 100, 103, 97: mean 100, s₀ = 3, t(0.975, 2) = 4.302653;
    # n = ⌈(4.302653 · 3 / (0.05 · 100))²⌉ = ⌈6.665⌉ = 7: four more.
    first = [100.0, 103, 97]
    assert p.more(first) == 4
    # Stage one fixes the total: whatever the later values, the plan does not move.
    assert p.more(first + [150]) == 3 and p.more(first + [100, 100, 100]) == 1
    assert p.more(first + [1.0] * 4) == 0
    # s₀ = 4: ⌈(4.302653 · 4 / 5)²⌉ = ⌈11.85⌉ = 12, capped at 10; at ±10%: ⌈2.96⌉ = 3.
    assert p.more([100.0, 104, 96]) == 7
    assert ReplicatePolicy(0.10, 3, 10).more([100.0, 104, 96]) == 0


def test_summarize_reports_steins_interval() -> None:
    p = ReplicatePolicy(ci_target=0.05, min_runs=3, max_runs=10)
    values = [100.0, 103, 97, 101, 99, 100, 100]
    s = p.summarize(values)
    # Mean 100; half-width t(0.975, 2) · s₀ / √n = 4.302653 · 3 / √7 = 4.878750.
    assert s.n == 7 and s.mean == pytest.approx(100) and s.df == 2
    assert s.ci_low == pytest.approx(100 - 4.878750, abs=1e-5)
    assert s.ci_high == pytest.approx(100 + 4.878750, abs=1e-5)
    assert s.planned == 7 and s.target_met and s.warning() == "" and s.determined
    # At the cap the target is missed and the warning says the interval is still honest.
    wide = p.summarize([100.0, 104, 96] + [100] * 7)
    assert not wide.target_met and "not met" in wide.warning() and "honest" in wide.warning()
    assert wide.ci_high - 100 == pytest.approx(4.302653 * 4 / math.sqrt(10), abs=1e-5)
    d = wide.as_dict()
    assert d["planned"] == 10 and d["target_met"] is False and d["reason"] is None
    assert d["rel_halfwidth"] == pytest.approx(4.302653 * 4 / math.sqrt(10) / 100, abs=1e-7)
    assert p.summarize([5.0]).as_dict()["ci_low"] is None  # no nan in JSON


def test_engine_loop_collects_the_planned_total() -> None:
    p = ReplicatePolicy(ci_target=0.05, min_runs=3, max_runs=10)
    assert len(run(p, [100.0, 103, 97] + [100.0] * 7)) == 7


def test_non_finite_values_are_refused() -> None:
    p = ReplicatePolicy()
    s = p.summarize([100, math.nan, 101])
    assert s.reason.startswith("refused: replicate(s) 2 are not finite")
    assert math.isnan(s.ci_low) and not s.determined
    assert p.more([100, math.inf]) == 0  # no more runs on a broken figure
    r = p.compare([100, 101, 99], [100, math.nan, 101])
    assert not r.determined and not r.significant and r.reason.startswith("refused")
    assert "nan" not in r.text().replace("nan or inf", "")


def test_identical_replicates_are_undetermined() -> None:
    p = ReplicatePolicy()
    r = p.compare([100, 100, 100], [101, 101, 101])
    assert r.reason == IDENTICAL and not r.significant and math.isnan(r.p_value)
    assert p.summarize([100, 100, 100]).reason == IDENTICAL
    assert p.more([100, 100, 100]) == 0


@pytest.mark.parametrize("base", [[0.0, 0, 0], [-1.0, 0, 1]])
def test_a_baseline_mean_of_zero_has_a_clear_reason(base: list[float]) -> None:
    p = ReplicatePolicy()
    r = p.compare(base, [1.0, 2, 3])
    assert not r.determined and "0 or negative is undefined" in r.reason
    assert p.more(base) == 0  # a ±% target cannot apply: not "more until the cap"


def test_mean_of_zero_summary_says_the_relative_target_does_not_apply() -> None:
    s = ReplicatePolicy().summarize([-1.0, 0, 1])
    assert s.determined and "does not apply" in s.warning()


def test_detectable_difference_by_hand() -> None:
    p = ReplicatePolicy(ci_target=0.05, min_runs=3, max_runs=3)
    # Two configurations, 3 runs each, CV 5%: 2 df each, below 5, so the claim uses Hsu's
    # df = 2 (the test's fallback) rather than Welch's 4:
    # δ = λ · 0.05 · √(2/3), λ the noncentrality at which the two-sided t-test at 2 df
    # rejects 80% of the time: check the power at λ directly with scipy's noncentral t.
    d = p.detectable(0.05, 3)
    lam = d / (0.05 * math.sqrt(2 / 3))
    tc = stats.t.ppf(0.975, 2)
    assert stats.nct.sf(tc, 2, lam) + stats.nct.cdf(-tc, 2, lam) == pytest.approx(0.8, abs=1e-5)
    # ... which is more than the optimistic shortcut t(0.975, 2) + t(0.8, 2) = 5.363313.
    assert lam > 5.363313
    # In a Holm family of 4 the most demanding member is tested at 0.05 / 4.
    d4 = p.detectable(0.05, 3, family=4)
    tc4 = stats.t.ppf(1 - 0.0125 / 2, 2)
    lam4 = d4 / (0.05 * math.sqrt(2 / 3))
    assert stats.nct.sf(tc4, 2, lam4) == pytest.approx(0.8, abs=1e-4)  # lower tail ~0
    # Default n: what the rule would plan from that CV (CV 1%: stage one suffices).
    assert p.detectable(0.01) == pytest.approx(p.detectable(0.01, 3))


def test_detectable_difference_has_its_power() -> None:
    """A true change of exactly the detectable size is found at least ~80% of the time (the
    claim is conservative at tiny df, where it assumes Hsu's df)."""
    p = ReplicatePolicy(ci_target=0.05, min_runs=5, max_runs=5)
    delta = p.detectable(0.05, 5)
    rng = np.random.default_rng(11)
    a = rng.normal(100, 5, (3_000, 5)).tolist()
    b = rng.normal(100 * (1 + delta), 5, (3_000, 5)).tolist()  # equal noise, as assumed
    found = sum(p.compare(x, y).significant for x, y in zip(a, b, strict=True)) / 3_000
    assert 0.78 <= found <= 0.92  # SE ≤ 0.8%


def test_a_non_result_carries_its_interval_and_what_it_could_detect() -> None:
    p = ReplicatePolicy()
    r = p.compare([100, 104, 96], [101, 106, 98])
    assert not r.significant and r.text() == NO_DIFFERENCE
    text = r.full_text()
    lo, hi = (r.low - 1) * 100, (r.high - 1) * 100
    assert text.startswith(f"{NO_DIFFERENCE} ({lo:+.1f}% … {hi:+.1f}%; could detect ≥ ")
    assert text.endswith(f"{math.ceil(r.detectable * 100)}%)")
    assert r.detectable > max(-lo, hi) / 100 / 2  # it could not have seen a small change


def test_compare_family_is_holm_over_named_configurations() -> None:
    p = ReplicatePolicy(min_runs=4, max_runs=4)
    a, b, c = [100.0, 101, 99, 100], [104.0, 105, 103, 104], [100.0, 101, 99, 100.5]
    fam = p.compare_family(a, {"b": b, "c": c})
    ref = compare_family([(a, b), (a, c)], first_stage=4)
    assert list(fam) == ["b", "c"]
    assert (fam["b"].low, fam["b"].significant) == (ref[0].low, ref[0].significant)
    assert fam["b"].significant and not fam["c"].significant
    assert fam["b"].confidence == pytest.approx(1 - 0.05 / 2)


def test_invalid_policies_are_refused() -> None:
    for kwargs in ({"min_runs": 1}, {"min_runs": 5, "max_runs": 4}, {"ci_target": 0.0}):
        with pytest.raises(ValueError):
            ReplicatePolicy(**kwargs)  # type: ignore[arg-type]


@given(
    st.lists(st.floats(min_value=1, max_value=1e6), min_size=10, max_size=10),
    st.floats(min_value=1e-3, max_value=1e3),
)
def test_the_plan_is_fixed_by_stage_one_and_scale_free(xs: list[float], scale: float) -> None:
    p = ReplicatePolicy(ci_target=0.05, min_runs=3, max_runs=10)
    planned = p.more(xs[:3]) + 3
    assert 3 <= planned <= 10
    for k in range(3, 11):
        assert p.more(xs[:k]) == max(0, planned - k)
    # Units do not matter (MB/s or B/s); up to float rounding at an exact integer boundary.
    assert abs(p.more([x * scale for x in xs[:3]]) + 3 - planned) <= 1
