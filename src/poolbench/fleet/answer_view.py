"""The fleet's answer on the terminal (fleet/answer.py computes it): per workload each
configuration's hosts side by side, ⚠ on a figure whose measurements carry a guard's warning
there (each said below it), hosts slower than their peers named, and each configuration
against the best over the fleet."""

from __future__ import annotations

import math
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench.fleet import answer

Warned = dict[str, dict[tuple[str, str], list[str]]]


def render(measured: answer.Measured, warned: Warned) -> None:
    table = answer.rows(measured)
    if not table:
        return
    console = Console(width=None if sys.stdout.isatty() else 120)
    _tables(console, table, list(measured), warned)
    for host, per in warned.items():
        for (config, workload), texts in per.items():
            for text in texts:
                console.print(f"⚠ {escape(host)} {escape(config)} {escape(workload)}: "
                              f"{escape(text)}", highlight=False)  # fmt: skip
    for r in table:
        for h in r.slow:
            f = next(f for f in r.hosts if f.host == h)
            console.print(f"[yellow]warning:[/] {escape(h)} is slower than its peers on "
                          f"{escape(r.workload)} ({escape(r.config)}: {f.mean:.3g} {r.unit}): "
                          f"{answer.SLOW_HOST_RULE}; compare its disks and their path "
                          "(poolbench disks --screen there)", highlight=False)  # fmt: skip
    _verdict(console, answer.verdict(table))


def _tables(console: Console, table: list[answer.Row], hosts: list[str], warned: Warned) -> None:
    for workload in sorted({r.workload for r in table}):
        mine = [r for r in table if r.workload == workload]
        t = Table(title=f"{workload} ({mine[0].unit}), mean ± 95% CI per host",
                  title_justify="left")  # fmt: skip
        t.add_column("configuration")
        for h in hosts:
            t.add_column(escape(h))
        for r in mine:
            cells = {
                f.host: _figure(f, f.host in r.slow)
                + (" ⚠" if warned.get(f.host, {}).get((r.config, r.workload)) else "")
                for f in r.hosts
            }
            t.add_row(escape(r.config), *(cells.get(h, "–") for h in hosts))
        console.print(t)


def _verdict(console: Console, changes: list[answer.Change]) -> None:
    if changes:
        console.print(f"Over the fleet ({answer.BLOCK_RULE}):", highlight=False)
    for c in changes:
        if math.isnan(c.low):
            said = f"{c.ratio - 1:+.1%} on one host (no fleet interval)"
        else:
            verdict = "" if c.significant else " n.s."
            said = f"{c.ratio - 1:+.1%} [{c.low - 1:+.1%}, {c.high - 1:+.1%}]{verdict}"
        console.print(f"• {escape(c.workload)}: {escape(c.config)} against {escape(c.best)}: "
                      f"{said} over {c.hosts} host(s)", highlight=False)  # fmt: skip


def _figure(f: answer.HostFigure, slow: bool) -> str:
    text = f"{f.mean:.3g}" if math.isnan(f.low) else f"{f.mean:.3g} ± {(f.high - f.low) / 2:.2g}"
    return f"[red]{text} slow[/]" if slow else text


def to_json(measured: answer.Measured, warned: Warned) -> dict[str, object]:
    """The fleet's answer for `--json`: what `render` prints, as numbers (null where a figure
    has no interval)."""
    table = answer.rows(measured)
    return {
        "rows": [
            {
                "config": r.config, "workload": r.workload, "unit": r.unit,
                "hosts": [
                    {"host": f.host, "n": f.n, "mean": f.mean, "ci_low": _num(f.low),
                     "ci_high": _num(f.high), "slow": f.host in r.slow,
                     "warnings": warned.get(f.host, {}).get((r.config, r.workload), [])}
                    for f in r.hosts
                ],
            }
            for r in table
        ],
        "verdict": [
            {"workload": c.workload, "config": c.config, "best": c.best, "ratio": c.ratio,
             "ci_low": _num(c.low), "ci_high": _num(c.high), "hosts": c.hosts,
             "significant": c.significant}
            for c in answer.verdict(table)
        ],
        "rules": {"slow_host": answer.SLOW_HOST_RULE, "verdict": answer.BLOCK_RULE},
    }  # fmt: skip


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x
