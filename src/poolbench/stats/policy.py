"""ReplicatePolicy: the single home of poolbench's replicate rules (pure).

    p = ReplicatePolicy(ci_target=0.05, min_runs=3, max_runs=10)

One configuration (the engine today):
    values = first p.more([]) replicates
    while k := p.more(values): run k more (interleaved with the other configurations)
    p.summarize(values)                      # mean, the reported interval, outlier flags

A baseline and configurations compared in blocks (values[i] of each list from block i):
    while any((k := p.more_family(base, others)).values()):
        run k[""] more of the baseline and k[name] more of each name, as one block each
    p.compare_family(base, others)           # per name: ratio, interval, Holm + sequential
    p.compare(base, other)                   # a family of one

`more` is Stein's two-stage rule (`replicates`): the total is fixed by stage one, and
`summarize` reports Stein's interval, which covers 95% whatever total the rule chose; when a
run may be disturbed (`outliers.suspect`) the interval is widened to the t-interval of all
values if that is wider, so one slow run cannot push the mean out of a stage-one interval.
`more_family` / `compare_family` aim at the decision (`blocked`): a group-sequential test of
the paired log ratios after every block, Holm over the family, stopping the configurations
whose order is clear. docs/statistics.md has the simulated figures;
tests/test_stats_policy.py checks them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from poolbench.stats import blocked, replicates, safemath
from poolbench.stats import outliers as outlier_mod
from poolbench.stats.compare import IDENTICAL, Ratio
from poolbench.stats.power import noncentrality
from poolbench.stats.sequential import t_levels

BASELINE = ""  # more_family's key for the baseline


@dataclass(frozen=True)
class MeanCI:
    """The reported mean of one figure's replicates with its interval, or why there is none."""

    n: int
    mean: float
    ci_low: float  # nan when undetermined
    ci_high: float
    confidence: float
    df: int  # degrees of freedom of the interval: stage-one size − 1
    first_stage_sd: float
    planned: int  # the total the rule committed to after stage one
    target: float
    outliers: tuple[int, ...]  # indexes into the values
    reason: str = ""  # why there is no interval ("" when there is one)

    @property
    def determined(self) -> bool:
        return not self.reason

    @property
    def rel_halfwidth(self) -> float:
        """Half the CI width relative to the mean (0.05 = ±5%); inf when it cannot be known."""
        if self.reason or self.mean <= 0:
            return math.inf
        return (self.ci_high - self.ci_low) / 2 / self.mean

    @property
    def target_met(self) -> bool:
        return self.rel_halfwidth <= self.target

    def as_dict(self) -> dict[str, object]:
        """For JSON export: every field, nan/inf as None, plus the derived figures."""

        def num(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "n": self.n,
            "mean": num(self.mean),
            "ci_low": num(self.ci_low),
            "ci_high": num(self.ci_high),
            "confidence": self.confidence,
            "df": self.df,
            "first_stage_sd": num(self.first_stage_sd),
            "planned": self.planned,
            "target": self.target,
            "rel_halfwidth": num(self.rel_halfwidth),
            "target_met": self.target_met,
            "outliers": list(self.outliers),
            "reason": self.reason or None,
            "warning": self.warning() or None,
        }

    def warning(self) -> str:
        """Empty when the interval meets the target, else what it means and what to do."""
        if self.reason:
            return self.reason
        if self.mean <= 0:
            return (
                f"the mean is {self.mean:g}: a relative (±%) target does not apply to it; "
                "the interval is reported in absolute units"
            )
        if self.target_met:
            return ""
        return (
            f"the {self.confidence:.0%} CI is ±{self.rel_halfwidth:.1%} of the mean after "
            f"{self.n} runs (target ±{self.target:.0%}, planned {self.planned}): the target "
            "was not met, but the interval is honest, only wide; raise --max-replicates or "
            "--replicates, or quiet the machine"
        )


@dataclass(frozen=True)
class ReplicatePolicy:
    """How many replicates, the reported interval, outliers, comparisons (see module doc)."""

    ci_target: float = 0.05
    min_runs: int = 3
    max_runs: int = 10
    confidence: float = 0.95
    power: float = 0.8

    def __post_init__(self) -> None:
        if self.min_runs < 2:
            raise ValueError("at least 2 runs are needed for a confidence interval")
        if self.max_runs < self.min_runs:
            raise ValueError("max_runs must be ≥ min_runs")
        if not 0 < self.ci_target < 1:
            raise ValueError("ci_target must be a fraction between 0 and 1")
        if not 0 < self.confidence < 1 or not 0 < self.power < 1:
            raise ValueError("confidence and power must be fractions between 0 and 1")

    def planned(self, values: Sequence[float]) -> int:
        """The total number of replicates: min_runs until stage one is complete, then the
        total Stein's rule fixed from it (it never changes after stage one)."""
        if len(values) < self.min_runs:
            return self.min_runs
        st = replicates.stage(values, self.min_runs)
        return replicates.total(st, self.ci_target, self.confidence, self.max_runs)

    def more(self, values: Sequence[float]) -> int:
        """Replicates still to run, given those measured so far (0 = done). Non-finite values
        stop the rule (summarize refuses them with a reason)."""
        if not all(math.isfinite(v) for v in values):
            return 0
        return max(0, self.planned(values) - len(values))

    def summarize(self, values: Sequence[float]) -> MeanCI:
        """The mean of all values ± t(n₀ − 1) · s₀ / √n (Stein's interval), or ± t(n − 1) ·
        s / √n of all values when a run may be disturbed and that is wider."""
        xs = [float(v) for v in values]
        n = len(xs)
        if n == 0:
            raise ValueError("no values to summarize")
        mean = sum(xs) / n
        st = replicates.stage(xs, self.min_runs)
        flags = outlier_mod.flag(xs)
        planned = self.planned(xs) if all(math.isfinite(v) for v in xs) else n

        def est(low: float, high: float, reason: str = "") -> MeanCI:
            return MeanCI(
                n, mean, low, high, self.confidence, st.df, st.sd, planned, self.ci_target,
                flags, reason,
            )  # fmt: skip

        reason = _no_interval(xs, st)
        if reason:
            return est(math.nan, math.nan, reason)
        half = replicates.halfwidth(st, n, self.confidence)
        if outlier_mod.suspect(xs):
            # A run that may lie apart from the others (a disturbed one, kept in the mean):
            # the spread of every value, which includes it, when that is wider (module doc).
            half = max(half, replicates.halfwidth_all(xs, self.confidence))
        return est(mean - half, mean + half)

    def compare(self, base: Sequence[float], other: Sequence[float]) -> Ratio:
        """other against base: a family of one (`compare_family`)."""
        return self.compare_family(base, {"other": other})["other"]

    def compare_family(
        self, base: Sequence[float], others: Mapping[str, Sequence[float]]
    ) -> dict[str, Ratio]:
        """Each named configuration against one baseline, analysed within blocks (values[i]
        of every list from block i) by the group-sequential test that `more_family` stops
        on, Holm over the family (`poolbench.stats.blocked`)."""
        return {k: d.ratio for k, d in self._decide(base, others).items()}

    def more_family(
        self, base: Sequence[float], others: Mapping[str, Sequence[float]]
    ) -> dict[str, int]:
        """How many more replicates the baseline (key "") and each configuration need, all
        lists in time order (block i: values[i] of each). Stage one: up to min_runs each.
        Then one more block for the baseline and every comparison still undecided (not yet
        significant), until max_runs; 0 for the decided ones (and for all when none is
        undecided). A configuration with a non-finite value is decided (refused, with the
        reason, by compare_family); a non-finite baseline stops them all."""
        lists = {BASELINE: base, **others}
        if not all(math.isfinite(v) for v in base):
            return {k: 0 for k in lists}  # a broken baseline: compare_family says why
        if any(len(vs) < self.min_runs for vs in lists.values()):
            return {k: max(0, self.min_runs - len(vs)) for k, vs in lists.items()}
        decisions = self._decide(base, others)
        active = [
            k for k, d in decisions.items()
            if not (d.significant or d.ratio.undetermined)
            and d.blocks < self.max_runs
        ]  # fmt: skip
        out = {k: 0 for k in lists}
        if not active:
            return out
        upto = min(self.max_runs, max(len(lists[k]) for k in [BASELINE, *active]) + 1)
        for k in [BASELINE, *active]:
            out[k] = max(0, upto - len(lists[k]))
        return out

    def _decide(
        self, base: Sequence[float], others: Mapping[str, Sequence[float]]
    ) -> dict[str, blocked.Decision]:
        return blocked.decide(
            [float(v) for v in base],
            {k: [float(v) for v in vs] for k, vs in others.items()},
            confidence=self.confidence, first=self.min_runs, max_runs=self.max_runs,
            power=self.power,
        )  # fmt: skip

    def detectable(self, cv: float, n: int | None = None, family: int = 1) -> float:
        """The smallest relative change between two configurations of run-to-run CV `cv` (a
        pilot's) that the family rule (`more_family` / `compare_family`) finds with `power`,
        inside a family of `family` comparisons, for planning. An undecided comparison runs
        to max_runs blocks, so `n` defaults to max_runs. The figure is the change at which
        the last look alone (n blocks, n − 1 df, at its nominal level of the α/family
        spending boundary, Holm's most demanding level) rejects with `power`; the sequential
        rule also rejects at earlier looks, so it finds that change at least as often
        (simulated in docs/statistics.md §4). Within a block the log ratio's spread is
        √2 · σ of log(value), σ² = log(1 + cv²)."""
        n = self.max_runs if n is None else n
        if cv < 0 or family < 1 or n < 1:
            raise ValueError("cv must be ≥ 0, n and family ≥ 1")
        if n < 2:
            return math.inf
        first = max(2, min(self.min_runs, n))
        alpha = (1 - self.confidence) / family
        nominal = t_levels(alpha, first, max(self.max_runs, n))[n - first]
        if nominal <= 0:
            return math.inf
        sigma_d = math.sqrt(2 * math.log1p(cv * cv))
        lam = noncentrality(n - 1, nominal, self.power)
        return safemath.expm1(lam * sigma_d / math.sqrt(n))


def _no_interval(xs: Sequence[float], st: replicates.Stage) -> str:
    """Why these replicates have no interval, or ""."""
    bad = [i + 1 for i, v in enumerate(xs) if not math.isfinite(v)]
    if bad:
        return (
            f"refused: replicate(s) {', '.join(map(str, bad))} are not finite numbers "
            "(nan or inf, a failed parse?); remove or re-measure them"
        )
    if len(xs) < 2:
        return "fewer than 2 runs: no confidence interval"
    if st.sd == 0:
        return IDENTICAL
    return ""
