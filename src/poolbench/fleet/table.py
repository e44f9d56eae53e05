"""A fleet run's results: per host, the sum over the hosts, and the slowest host."""

from __future__ import annotations

import math
import re
from typing import TypedDict

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from poolbench.fleet.probe import HostInfo
from poolbench.fleet.records import FleetWorkloadResult
from poolbench.stats.policy import ReplicatePolicy

# The policy of the run (FleetOptions.stop): its Stein interval is the one reported.
DEFAULT = ReplicatePolicy()


class StatsJson(TypedDict):
    """A host's figure, the fleet's sum or its slowest host's, in `bench --hosts --json`."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    replicates: int
    values: list[float]


class SlowestJson(StatsJson):
    hosts: list[str]


class FleetResultJson(TypedDict):
    """One workload of `bench --hosts --json`."""

    workload: str
    unit: str
    per_host: dict[str, StatsJson]
    sum: StatsJson
    slowest: SlowestJson
    partial: bool
    warnings: list[str]


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"


def _stats(values: list[float], policy: ReplicatePolicy = DEFAULT) -> StatsJson:
    if not values:
        return {"mean": None, "ci_low": None, "ci_high": None, "replicates": 0, "values": []}
    s = policy.summarize(values)
    return {
        "mean": s.mean,
        "ci_low": None if math.isnan(s.ci_low) else s.ci_low,
        "ci_high": None if math.isnan(s.ci_high) else s.ci_high,
        "replicates": s.n,
        "values": list(values),
    }


def as_json(
    results: list[FleetWorkloadResult], policy: ReplicatePolicy = DEFAULT
) -> list[FleetResultJson]:
    return [
        {
            "workload": r.workload.name,
            "unit": r.workload.unit,
            "per_host": {label: _stats(h.values, policy) for label, h in r.per_host.items()},
            "sum": _stats(r.total.values, policy),
            "slowest": {**_stats(r.slowest.values, policy), "hosts": list(r.slowest_host)},
            "partial": r.partial,
            "warnings": list(r.warnings),
        }
        for r in results
    ]


def _row(values: list[float], policy: ReplicatePolicy = DEFAULT) -> tuple[str, str, str]:
    if not values:
        return "–", "–", "0"
    s = policy.summarize(values)
    ci = "–" if math.isinf(s.rel_halfwidth) else f"±{s.rel_halfwidth:.1%}"
    return _fmt(s.mean), ci, str(s.n)


def group_host_warnings(warnings: list[str]) -> list[str]:
    """`host A: X`, `host B: X` -> `hosts A, B: X`, so a fleet's notes stay readable."""
    grouped: dict[str, list[str]] = {}
    order: list[str] = []
    for w in warnings:
        m = re.match(r"^host (\S+): (.*)$", w, re.S)
        key, label = (m.group(2), m.group(1)) if m else (w, "")
        if key not in grouped:
            grouped[key] = []
            order.append(key)
        if label:
            grouped[key].append(label)
    out = []
    for key in order:
        labels = grouped[key]
        if not labels:
            out.append(key)
        else:
            out.append(f"host{'s' if len(labels) > 1 else ''} {', '.join(labels)}: {key}")
    return out


def render(
    console: Console,
    results: list[FleetWorkloadResult],
    infos: list[HostInfo],
    not_applied: dict[str, list[str]],
    notes: list[str],
    header: str,
    policy: ReplicatePolicy = DEFAULT,
) -> None:
    table = Table(title=Text(header), title_justify="left")  # host names: data, not markup
    for col in ("workload", "host", "mean", "unit", "95% CI", "runs", "notes"):
        right = col in ("mean", "95% CI", "runs")
        table.add_column(col, justify="right" if right else "left", no_wrap=col != "notes")
    footnotes: list[str] = []
    for r in results:
        marks = []
        for w in group_host_warnings(r.warnings):
            if w not in footnotes:
                footnotes.append(w)
            marks.append(f"[yellow]⚠ {footnotes.index(w) + 1}[/]")
        unit = r.workload.unit
        for i, (label, host) in enumerate(r.per_host.items()):
            mean, ci, n = _row(host.values, policy)
            table.add_row(r.workload.name if i == 0 else "", escape(label), mean, unit, ci, n, "")
        mean, ci, n = _row(r.total.values, policy)
        partial = " [red]partial[/]" if r.partial else ""
        table.add_row("", "[bold]sum of hosts[/]", mean, unit, ci, n, " ".join(marks) + partial)
        mean, ci, n = _row(r.slowest.values, policy)
        slow = ", ".join(sorted(set(r.slowest_host)))
        label = f"slowest host ({slow})" if slow else "slowest host"
        table.add_row("", escape(label), mean, unit, ci, n, "", end_section=True)
    console.print(table)
    for i, text in enumerate(footnotes, 1):
        console.print(f"[yellow]⚠ {i}[/] {escape(text)}", highlight=False)
    by_notes: dict[tuple[str, ...], list[HostInfo]] = {}
    for info in infos:
        by_notes.setdefault(tuple(not_applied.get(info.label, [])), []).append(info)
    for texts, group in by_notes.items():
        names = ", ".join(
            f"{i.label} ({i.server_hostname or '?'}, {i.fio_version or 'fio ?'})" for i in group
        )
        console.print(f"guards not applied on {names}:", highlight=False, markup=False)
        for text in texts:
            console.print(f"    · {text}", highlight=False, markup=False)
    for text in notes:
        console.print(f"[yellow]note:[/] {escape(text)}", highlight=False)
