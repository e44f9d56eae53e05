"""The verdict in sentences (pure): the same words in the terminal, the JSON and the HTML.

Every number in a sentence is printed by `verdict.ratio_text` or from the `Verdict`'s own
figures, so the three media agree to the digit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.report.costs import Cost, disk_bytes
from poolbench.report.data import RunData, fmt_bytes
from poolbench.report.verdict import MAX_REPLICATES, PRACTICAL, Effect, Ranking, Verdict, ratio_text
from poolbench.stats.power import pct

HOW_VERDICT = (
    "ranked best first, each against the best; a factor's effect is every pair of "
    "configurations that differ in it alone. A change is the ratio of the means with its "
    "95% interval, Holm-corrected over everything shown for the workload (each pair once, "
    "the same interval wherever it appears); n.s. = no significant difference"
)


def ranking_sentence(rk: Ranking) -> str:
    """One line per workload: who is best and by how much, or that it cannot be told."""
    best = rk.best
    head = f"{rk.workload}: {best.label} is best at {rk.figure_text(0)} {rk.unit}"
    if len(rk.standings) == 1:
        return f"{rk.workload}: only {best.label} was measured ({rk.figure_text(0)} {rk.unit})"
    if rk.tied:
        return f"{rk.workload}: {rk.tie_text()}"
    nxt = rk.standings[1]
    return f"{head}; next, {nxt.label}: {ratio_text(nxt.ratio)}"


def _space(pairs: Sequence[tuple[Cost, Cost]], disk: int | None) -> str:
    """'costs 480M of usable space (-33.3%, 0.9 disk)'; '' when unknown or unchanged."""
    known = [(c.usable_bytes, p.usable_bytes) for c, p in pairs]
    diffs = [(u - b, (u - b) / b) for u, b in known if u is not None and b]
    if len(diffs) != len(pairs) or not diffs or all(d == 0 for d, _ in diffs):
        return ""
    lo, hi = min(diffs, key=lambda x: abs(x[0])), max(diffs, key=lambda x: abs(x[0]))

    def span(a: str, b: str) -> str:  # one figure, or the range over the pairs
        return a if a == b else f"{a}–{b}"

    amount = span(fmt_bytes(abs(lo[0])), fmt_bytes(abs(hi[0])))
    share = span(pct(lo[1]), pct(hi[1]))
    disks = f", {span(f'{abs(lo[0]) / disk:.1f}', f'{abs(hi[0]) / disk:.1f}')} disk" if disk else ""
    verb = "costs" if lo[0] < 0 else "adds"
    return f"{verb} {amount} of usable space ({share}{disks})"


def _failures(pairs: Sequence[tuple[Cost, Cost]]) -> str:
    """'survives 2 disk failures instead of 1'; '' when unknown or the same."""
    got = {(c.failures_survived, p.failures_survived) for c, p in pairs}
    if len(got) != 1:
        return ""
    fc, fp = got.pop()
    if fc is None or fp is None or fc == fp:
        return ""
    return f"survives {fc} disk failure{'s' if fc != 1 else ''} instead of {fp}"


@dataclass(frozen=True)
class LevelChange:
    """One factor moved from one level to another: its effect on every workload, and
    what it costs and buys."""

    factor: str
    base: str
    level: str
    effects: tuple[Effect, ...]
    costs: str  # '' when the change costs and buys nothing measured

    def sentence(self) -> str:
        parts = []
        for w in dict.fromkeys(e.workload for e in self.effects):
            items = [
                ratio_text(e.ratio) + (f" with {e.context}" if e.context else "")
                for e in self.effects if e.workload == w
            ]  # fmt: skip
            parts.append(f"{w} {', '.join(items)}")
        text = f"{self.factor}={self.level} instead of {self.base}: {'; '.join(parts)}"
        return text + (f"; it {self.costs}" if self.costs else "")


def level_changes(v: Verdict, run: RunData) -> list[LevelChange]:
    """The effects grouped by factor and level, each with its cost in space and safety."""
    groups: dict[tuple[str, str, str], list[Effect]] = {}
    for e in v.effects:
        groups.setdefault((e.factor, e.base, e.level), []).append(e)
    out = []
    for (factor, base, level), found in groups.items():
        pairs = list({(e.config, e.partner): (v.costs[e.config], v.costs[e.partner])
                      for e in found}.values())  # fmt: skip
        costs = [t for t in (_space(pairs, disk_bytes(run)), _failures(pairs)) if t]
        out.append(LevelChange(factor, base, level, tuple(found), " and ".join(costs)))
    return out


def next_steps(v: Verdict, run: RunData, extra: Sequence[str] = ()) -> list[str]:
    """What to do next: what would decide each tie, failed trials to measure, then `extra`
    (hints of the other sections, e.g. the model's disk figures)."""
    out = []
    for rk in v.rankings:
        d = rk.to_decide
        if d is None:
            continue
        seen = f"the {pct(d.change).lstrip('+')} seen between {d.best} and {d.other}"
        if d.replicates is None or d.replicates > PRACTICAL:
            need = "more than" if d.replicates is None else "about"
            n = d.replicates or MAX_REPLICATES
            out.append(f"{rk.workload}: {seen} would take {need} {n:,} replicates per "
                       f"configuration to detect at CV {d.cv:.1%}: call them equal")  # fmt: skip
            continue
        how = (
            f"set replicates = {d.replicates} in the study file and run it again"
            if v.kind == "study"
            else f"measure again with --replicates {d.replicates} --max-replicates {d.replicates}"
        )
        out.append(f"to rank {rk.workload}: {d.replicates} replicates per configuration "
                   f"(now {d.have}) would detect {seen} at CV {d.cv:.1%}; {how}")  # fmt: skip
    if v.resume_hint:
        out.append(f"measure the failed trials: {v.resume_hint}")
    out += extra
    if not out and any(len(rk.standings) > 1 for rk in v.rankings):
        out.append("nothing is left undecided at this noise")
    return out
