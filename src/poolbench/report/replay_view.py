"""The replay fidelity of every cell that replayed a recorded trace, in the terminal report
and the HTML page: how many replays were faithful, and the recorded-vs-achieved table
(engine/replay/check.py)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from poolbench.engine.replay.check import report_lines
from poolbench.report.data import RunData
from poolbench.report.svg import Safe, fmt


def cells(run: RunData) -> list[list[str]]:
    """Each replaying cell's lines, in the run's cell order."""
    out = []
    for (config, workload), cell in run.cells.items():
        docs = [d for f in cell.guards if isinstance(d := f.other.get("replay"), dict)]
        if docs:
            out.append(report_lines(config, workload, docs))
    return out


def render(console: Console, run: RunData) -> None:
    for lines in cells(run):
        for line in lines:
            console.print(Text(line))  # store text is data, never markup


def html_section(run: RunData) -> list[Safe]:
    found = cells(run)
    if not found:
        return []
    return [Safe('<h2 id="replay">Replay fidelity</h2>')] + [
        fmt("<pre>{}</pre>", "\n".join(lines)) for lines in found
    ]
