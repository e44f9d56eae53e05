"""The verdict in the terminal: the last thing `poolbench report RUN` and a study run print.

Per workload a ranking table (fitted to the terminal like every other table), then one
sentence of answer; each factor's effect with what it costs and buys; what to do next.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from poolbench.report.data import RunData, fmt_bytes
from poolbench.report.layout import Column, config_columns, print_fitted
from poolbench.report.verdict import Ranking, Verdict, ratio_text
from poolbench.report.verdict_text import HOW_VERDICT, level_changes, next_steps, ranking_sentence

WHERE = "all of it is in `poolbench report RUN --json`, or widen the terminal (COLUMNS)"


def _usable(rk: Ranking, i: int) -> str:
    c = rk.standings[i].cost
    if c.usable_bytes is None:
        return "–"
    return fmt_bytes(c.usable_bytes) + (" (plan)" if c.usable_source == "planner" else "")


def ranking_columns(run: RunData, rk: Ranking) -> list[Column]:
    """#, the configuration, its figure, its ratio to the best, usable space, failures."""
    n = range(len(rk.standings))
    cols = [Column("rank", "#", [Text(str(i + 1)) for i in n], "right")]
    cols += config_columns(run, [s.config for s in rk.standings])
    head = "exact" if rk.exact else "mean ± 95% CI"
    cols.append(Column("figure", head, [Text(rk.figure_text(i)) for i in n], "right"))
    vs = [
        Text(ratio_text(s.ratio), style="bold" if s.ratio and s.ratio.significant else "")
        for s in rk.standings
    ]
    cols.append(Column("vs", "vs best", vs, prose=True))
    if any(s.cost.usable_bytes is not None for s in rk.standings):
        cols.append(Column("usable", "usable", [Text(_usable(rk, i)) for i in n], "right",
                           optional=2))  # fmt: skip
    fails = [s.cost.failures_survived for s in rk.standings]
    if any(f is not None for f in fails):
        texts = [Text("–" if f is None else str(f)) for f in fails]
        cols.append(Column("failures", "survives\nfailures", texts, "right", optional=1))
    return cols


def _bullets(console: Console, heading: str, items: Sequence[str]) -> None:
    if not items:
        return
    console.print(Text(heading, style="bold"))
    for item in items:
        console.print(Text(f"• {item}"))


def render(console: Console, run: RunData, v: Verdict, extra: Sequence[str] = ()) -> None:
    """The verdict; `extra`: next steps from the sections above (printed last, with the
    steps that would decide what is still undecided)."""
    console.print()
    console.print(Text(f"The answer (run {v.run_id})", style="bold underline"))
    if any(len(rk.standings) > 1 for rk in v.rankings):  # something was compared
        console.print(Text(HOW_VERDICT, style="dim"))
    for rk in v.rankings:
        if len(rk.standings) > 1:
            better = "higher" if rk.higher_better else "lower"
            title = Text(f"{rk.workload} ({rk.unit}), {better} is better", style="bold")
            print_fitted(console, title, ranking_columns(run, rk), lambda: WHERE)
            for s in rk.standings:
                if s.ratio is not None and s.ratio.undetermined:
                    console.print(Text(f"{s.label}: {s.ratio.undetermined}", style="dim"))
        console.print(Text(f"→ {ranking_sentence(rk)}"))
    _bullets(console, "What each choice costs and buys:",
             [lc.sentence() for lc in level_changes(v, run)])  # fmt: skip
    _bullets(console, "Next:", next_steps(v, run, extra))
