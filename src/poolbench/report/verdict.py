"""The answer every run ends with (pure): which configuration is best for each workload, by
how much, each factor's effect, and what the faster choice costs (DESIGN.md §3 rule 6).

One computation, three media: the terminal (`verdict_view`), `report --json`
(`report_json`) and the HTML page (`verdict_html`) all print the `Verdict` built here, with
the same `ratio_text`, so a ratio never appears with two different intervals.

- **Ranking**: per workload, configurations best first (higher is better, except for
  times), each with its ratio to the best and the interval of that ratio.
- **Ties**: the configurations whose ratio to the best is not significant cannot be told
  apart from it; the report says so, with the widest interval, and how many replicates
  would detect the difference observed (the project's power function, from the CV the
  replicates showed — not a guess).
- **Effects**: each factor's effect without a chosen baseline: every pair of
  configurations that differ in that factor alone, the later level against the first
  (or against `--baseline FACTOR=LEVEL`).

Everything one workload's answer shows is **one Holm family** (`WorkloadFamily`): each pair
of configurations is tested once, whichever way round it is printed and however many times
(raidz1 ashift=9 against the best is also the ashift effect within raidz1), so a pair has
one interval wherever it appears — and Fieller's interval of A ÷ B is exactly the inverse of
B ÷ A's. A table that compares against `--baseline` shows these same comparisons
(`Verdict.ratio`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.report.costs import Cost, cost
from poolbench.report.data import Cell, RunData
from poolbench.report.metrics import VALUE, Figure
from poolbench.stats.compare import Ratio, constant, exact_ratio, holm, ratio_ci
from poolbench.stats.policy import ReplicatePolicy
from poolbench.stats.power import detectable_change, pct

# Units where a smaller figure is the better one (a duration); every other unit poolbench
# stores (MiB/s, IOPS, ops/s, GiB of capacity) is a rate or an amount: higher is better.
LOWER_IS_BETTER = frozenset({"ns", "µs", "us", "ms", "s", "sec", "seconds", "min", "h"})
# The search for the replicates that would decide a tie stops here.
MAX_REPLICATES = 10_000
# Beyond this many replicates per configuration a difference is not worth measuring: the
# next step says to treat the two as equal instead of asking for the impossible.
PRACTICAL = 100
NS = "n.s."
UNDECIDED = (
    "no decision at this noise"  # the short form of "no significant difference" in every medium
)


def higher_is_better(unit: str) -> bool:
    return unit.strip().lower() not in LOWER_IS_BETTER


def ratio_text(r: Ratio | None) -> str:
    """A comparison as every medium prints it: '-30.0% [-33.6%, -26.2%]' when
    significant, 'n.s. [-11.4%, +17.1%]' when the interval includes no change, '-33.3%
    (exact)' for a figure read from the pool, 'undetermined' (the reason is carried
    beside it), 'best' for the configuration the others are compared with."""
    if r is None:
        return "best"
    if r.undetermined:
        return "undetermined"
    if r.exact:
        return r.text()
    interval = f"[{pct(r.low - 1)}, {pct(r.high - 1)}]"
    return f"{pct(r.change)} {interval}" if r.significant else f"{NS} {interval}"


def exact_cells(cells: Sequence[Cell]) -> bool:
    """Figures read from the pool (`Cell.exact`) whose replicates all agree: compared
    exactly. Replicates that disagree fall back to the statistics, which say so."""
    return bool(cells) and all(c.exact and constant(c.values) and c.values[0] > 0 for c in cells)


def fieller(policy: ReplicatePolicy, a: Sequence[float], b: Sequence[float], confidence: float
            ) -> Ratio:  # fmt: skip
    """mean(b) ÷ mean(a) with Fieller's interval on Stein's first-stage variances (the first
    `min_runs` replicates): valid however many replicates the run then added, and for pairs
    of configurations that need not share a baseline or a number of blocks. (The engine's
    stop rule, ReplicatePolicy.more_family, pairs values by block; this interval does not
    lean on that pairing, so it holds for any run, an imported or a resumed one too.)"""
    return ratio_ci(a, b, confidence, first_stage=policy.min_runs)


class WorkloadFamily:
    """The comparisons one workload's answer shows, Holm-corrected as one family over the
    distinct pairs of configurations: a first pass gives each pair's p-value (the same
    either way round), Holm the level it is tested at, and the interval is Fieller's at
    that level (`fieller`)."""

    def __init__(
        self, policy: ReplicatePolicy, values: dict[str, list[float]],
        wanted: Sequence[tuple[str, str]],
    ) -> None:  # fmt: skip
        self.policy, self.values = policy, values
        pairs = list(dict.fromkeys(frozenset(p) for p in wanted if p[0] != p[1]))
        ordered = [sorted(p) for p in pairs]
        first = [fieller(policy, values[a], values[b], policy.confidence) for a, b in ordered]
        tests = holm([r.p_value for r in first], 1 - policy.confidence)
        self.size = sum(1 for r in first if not math.isnan(r.p_value))
        self._tests = {p: (r, *t) for p, r, t in zip(pairs, first, tests, strict=True)}

    def ratio(self, base: str, config: str) -> Ratio:
        """mean(config) ÷ mean(base) at the level Holm tested their pair."""
        a, b = self.values[base], self.values[config]
        first, rejected, level = self._tests[frozenset((base, config))]
        if first.undetermined and math.isnan(first.p_value):
            return fieller(self.policy, a, b, self.policy.confidence)  # untestable: says why
        adj = fieller(self.policy, a, b, 1 - level)
        significant = rejected and not adj.undetermined
        return dataclasses.replace(adj, p_value=first.p_value, significant=significant)


@dataclass(frozen=True)
class Standing:
    """One configuration's place in a workload's ranking."""

    config: str
    label: str
    figure: Figure  # mean with its 95% interval (or the exact figure)
    ratio: Ratio | None  # its mean ÷ the best's, Holm across the ranking; None: the best
    cost: Cost


@dataclass(frozen=True)
class ToDecide:
    """What would tell the best from the runner-up: replicates per configuration that
    detect the difference observed with the policy's power, at the CV observed."""

    best: str  # the two configurations' labels
    other: str
    change: float  # |other ÷ best − 1| as measured
    cv: float  # run-to-run CV of the two (root mean square of their stage-one CVs)
    replicates: int | None  # None: more than MAX_REPLICATES (too small to matter)
    have: int  # replicates the two have now (the smaller count)


@dataclass(frozen=True)
class Ranking:
    workload: str
    unit: str
    higher_better: bool
    standings: tuple[Standing, ...]  # best first
    tied: tuple[str, ...]  # labels of the best and those not told apart from it (≥ 2), or ()
    within: float  # the widest |change| inside the tied ones' intervals (nan: no tie)
    to_decide: ToDecide | None
    exact: bool = False  # figures read from the pool: exact ratios, no intervals

    @property
    def best(self) -> Standing:
        return self.standings[0]

    def figure_text(self, i: int) -> str:
        """A standing's figure as every medium prints it: '310 ± 5.0', or an exact figure
        with three decimals (0.318 GiB of a small test pool, not 0.3)."""
        f = self.standings[i].figure
        return f"{f.center:,.3f}" if self.exact else f.text()

    def tie_text(self) -> str:
        """'raidz1 and raidz2 are within ±6% of each other: no decision at this noise'."""
        if not self.tied:
            return ""
        bound = f"±{math.ceil(self.within * 100 - 1e-9):.0f}%"
        if len(self.tied) == 2:
            return (
                f"{self.tied[0]} and {self.tied[1]} are within {bound} of each other: {UNDECIDED}"
            )
        names = ", ".join(self.tied[1:-1]) + f" and {self.tied[-1]}"
        return f"{names} are each within {bound} of {self.tied[0]}: {UNDECIDED}"


@dataclass(frozen=True)
class Effect:
    """One factor's effect on one workload, other levels held: `config` ÷ `partner`."""

    workload: str
    factor: str
    base: str  # the level compared against
    level: str
    context: str  # the other levels that vary, held equal ("ashift=9"; "" when none)
    config: str
    partner: str
    ratio: Ratio


@dataclass(frozen=True)
class Verdict:
    run_id: int
    kind: str
    rankings: tuple[Ranking, ...]
    effects: tuple[Effect, ...]
    costs: dict[str, Cost]
    resume_hint: str = ""  # failed trials to measure ("" when none)
    # (workload, base, config) → config ÷ base: every comparison the answer shows.
    ratios: dict[tuple[str, str, str], Ratio] = dataclasses.field(default_factory=dict)

    def ratio(self, workload: str, base: str, config: str) -> Ratio | None:
        """The answer's comparison of `config` with `base`, None when it shows none."""
        return self.ratios.get((workload, base, config))


def _cells(run: RunData, workload: str) -> list[Cell]:
    cells = [run.cell(cfg, workload) for cfg in run.configs]
    return [c for c in cells if c is not None and c.values]


def _cv(cell: Cell) -> float:
    s = cell.summary
    return s.first_stage_sd / s.mean if s.mean > 0 and math.isfinite(s.first_stage_sd) else math.nan


def to_decide(run: RunData, best: Cell, other: Cell, r: Ratio, m: int) -> ToDecide | None:
    """The replicates per configuration at which the difference observed between `best`
    and `other` would be found with the policy's power, inside a Holm family of `m`."""
    p = run.policy()
    change = abs(r.ratio - 1)
    cv = math.sqrt((_cv(best) ** 2 + _cv(other) ** 2) / 2)
    have = min(len(best.values), len(other.values))
    if not (math.isfinite(cv) and math.isfinite(change)) or cv == 0:
        return None

    def found(n: int) -> bool:
        d = detectable_change(cv, n, first_stage=p.min_runs, family=max(1, m),
                              confidence=p.confidence, power=p.power)  # fmt: skip
        return d <= change

    if change == 0 or not found(MAX_REPLICATES):
        return ToDecide(run.label(best.config), run.label(other.config), change, cv, None, have)
    lo, hi = max(2, have), MAX_REPLICATES  # found(hi) holds; find the smallest such n
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if found(mid) else (mid + 1, hi)
    return ToDecide(run.label(best.config), run.label(other.config), change, cv, lo, have)


def _ranking(
    run: RunData, ordered: list[Cell], ratios: dict[tuple[str, str], Ratio],
    costs: dict[str, Cost], exact: bool, family_size: int,
) -> Ranking:  # fmt: skip
    """The ranking from the workload's comparisons: ties, and what would decide them."""
    best, workload, unit = ordered[0], ordered[0].workload, ordered[0].unit
    standings = [
        Standing(c.config, run.label(c.config), c.figure(VALUE),
                 ratios[(best.config, c.config)] if c is not best else None, costs[c.config])
        for c in ordered
    ]  # fmt: skip
    up = higher_is_better(unit)
    apart = [s for s in standings[1:] if s.ratio is not None and s.ratio.determined
             and not s.ratio.significant and not s.ratio.exact]  # fmt: skip
    if not apart:
        return Ranking(workload, unit, up, tuple(standings), (), math.nan, None, exact)
    within = max(max(abs(s.ratio.low - 1), abs(s.ratio.high - 1)) for s in apart if s.ratio)
    tied = (standings[0].label, *(s.label for s in apart))
    closest = apart[0]  # the tied configuration ranked highest after the best
    other = run.cell(closest.config, workload)
    assert other is not None and closest.ratio is not None
    decide = to_decide(run, best, other, closest.ratio, family_size)
    return Ranking(workload, unit, up, tuple(standings), tied, within, decide, exact)


def _pairs(run: RunData, cells: list[Cell], factor: str, base: str) -> list[tuple[Cell, Cell, str]]:
    """(configuration, its partner at `base`, the other varying levels) for every
    configuration whose `factor` is not at `base` and whose partner was measured."""
    by_levels = {tuple(sorted(run.levels(c.config).items())): c for c in cells}
    varying = run.factors()
    out = []
    for c in cells:
        levels = run.levels(c.config)
        if levels.get(factor, base) == base:
            continue
        partner = by_levels.get(tuple(sorted({**levels, factor: base}.items())))
        if partner is not None:
            held = [f"{k}={v}" for k, v in levels.items() if k in varying and k != factor]
            out.append((c, partner, " ".join(held)))
    return out


def _comparisons(
    run: RunData, cells: list[Cell], wanted: list[tuple[str, str]]
) -> tuple[dict[tuple[str, str], Ratio], bool, int]:
    """Each wanted (base, config) comparison, whether they are exact, the family's size."""
    if exact_cells(cells):  # read from the pool: nothing to estimate, no family
        values = {c.config: c.values for c in cells}
        return {(a, b): exact_ratio(values[a], values[b]) for a, b in wanted}, True, 0
    fam = WorkloadFamily(run.policy(), {c.config: c.values for c in cells}, wanted)
    return {(a, b): fam.ratio(a, b) for a, b in wanted}, False, fam.size


def answer(
    run: RunData, workload: str, bases: dict[str, str], costs: dict[str, Cost]
) -> tuple[Ranking | None, list[Effect], dict[tuple[str, str], Ratio]]:
    """One workload's ranking and factor effects, all one Holm family."""
    cells = _cells(run, workload)
    if not cells:
        return None, [], {}
    up = higher_is_better(cells[0].unit)
    ordered = sorted(cells, key=lambda c: -c.summary.mean if up else c.summary.mean)
    wanted = [(ordered[0].config, c.config) for c in ordered[1:]]
    found = []
    for factor, levels in run.factors().items():
        base = bases.get(factor, levels[0])
        found += [(factor, base, c, p, ctx) for c, p, ctx in _pairs(run, cells, factor, base)]
    wanted += [(p.config, c.config) for _f, _b, c, p, _ctx in found]
    ratios, exact, size = _comparisons(run, cells, wanted)
    effects = [
        Effect(workload, f, base, run.levels(c.config)[f], ctx, c.config, p.config,
               ratios[(p.config, c.config)])
        for f, base, c, p, ctx in found
    ]  # fmt: skip
    return _ranking(run, ordered, ratios, costs, exact, size), effects, ratios


def verdict(run: RunData, bases: dict[str, str] | None = None) -> Verdict:
    """The run's answer; `bases`: factor → the level its effects are measured against
    (default: each factor's first level in study order)."""
    costs = {c: cost(run, c) for c in run.configs}
    rankings, effects, ratios = [], [], {}
    for w in run.workloads:
        rk, found, pairs = answer(run, w, bases or {}, costs)
        rankings += [rk] if rk is not None else []
        effects += found
        ratios.update({(w, a, b): r for (a, b), r in pairs.items()})
    hint = run.resume_hint if run.failed_trials else ""
    return Verdict(run.id, run.kind, tuple(rankings), tuple(effects), costs, hint, ratios)
