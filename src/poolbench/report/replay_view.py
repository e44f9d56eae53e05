"""The replay fidelity of every cell that replayed a recorded trace, in the terminal report:
how many replays were faithful, and the recorded-vs-achieved table (engine/replay_check)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from poolbench.engine.replay_check import report_lines
from poolbench.report.data import RunData


def render(console: Console, run: RunData) -> None:
    for (config, workload), cell in run.cells.items():
        docs = [g["replay"] for g in cell.guards if isinstance(g.get("replay"), dict)]
        if docs:
            for line in report_lines(config, workload, docs):
                console.print(Text(line))  # store text is data, never markup
