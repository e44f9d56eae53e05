"""The resilver study's notes on its `load` factor (pure): how much a foreground workload
slows the resilver, and how much the resilver costs the workload.

Per layout, the idle resilver (load = none) against the resilver under load: the seconds and
the rate (resilvered MiB/s, with the Fieller interval of the ratio over the replicates). The
workload's figure during the resilver (over the resilver's own window) against the same
workload alone on the healthy pool right after it, in the same trial
(engine/resilver_load.py), with the interval of the ratio over the replicates, and the p99 of
each phase's completions; a replicate whose window was too short for a figure says why.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from poolbench.study.builtin.headline import compared, mean

if TYPE_CHECKING:
    from poolbench.records.sections import LoadPhase, ResilverLoad
    from poolbench.store.facts import ConfigFacts, StudyFacts


def _loads(c: ConfigFacts) -> list[ResilverLoad]:
    """Each replicate's load, in replicate order (the `load` part of its resilver section)."""
    return [r.load for r in c.resilvers if r.load is not None]


def values(phases: list[LoadPhase]) -> list[float]:
    """The phases' figures (MiB/s or IOPS), where there is one."""
    return [p.value for p in phases if p.value is not None]


def p99s(phases: list[LoadPhase]) -> list[float]:
    return [p.p99_ms for p in phases if p.p99_ms is not None]


def _seconds(c: ConfigFacts) -> float | None:
    got = [r.seconds for r in c.resilvers if r.seconds is not None]
    return statistics.fmean(got) if got else None


def _resilver_line(idle: ConfigFacts, loaded: ConfigFacts) -> str:
    a, b = _seconds(idle), _seconds(loaded)
    text, _ = compared(idle.figures.get("resilver", ()), loaded.figures.get("resilver", ()))
    if a is None or b is None:
        return "    the resilver's time was not recorded on both"
    ra, rb = mean(idle.figures.get("resilver", ())), mean(loaded.figures.get("resilver", ()))
    rates = "" if ra is None or rb is None else f" ({ra:.1f} → {rb:.1f} MiB/s)"
    longer = f"{b / a - 1:+.0%}" if a > 0 else "?"
    return (
        f"    resilver: {a:.2f} s idle vs {b:.2f} s under load ({longer} time); rate under "
        f"load vs idle{rates}: {text}"
    )


def _paired(loads: list[ResilverLoad]) -> tuple[list[ResilverLoad], list[str]]:
    """The replicates with a figure both during the resilver and alone, and why the others
    have none (a resilver too short for fio's log, stated in the row; older rows ran in
    slices and state nothing)."""
    kept, why = [], []
    for ld in loads:
        if ld.during.value is not None and ld.alone.value is not None:
            kept.append(ld)
            continue
        why.append(ld.during.why or "no foreground interval ended within it")
    return kept, why


def _windows(loads: list[ResilverLoad]) -> str:
    """How the `during` figures were measured: each replicate's window and intervals."""
    parts = [f"{d.window_s} s ({d.intervals} intervals)" for ld in loads
             if (d := ld.during).window_s is not None]  # fmt: skip
    if not parts:
        return ""
    ms = loads[0].during.interval_ms
    return f"    during: the resilver's window per replicate, {ms} ms intervals: " + ", ".join(
        parts
    )


def _workload_lines(loaded: ConfigFacts) -> list[str]:
    every = _loads(loaded)
    loads, why = _paired(every)
    out = [f"    no figure during the resilver in replicate(s) of it: {w}" for w in why]
    if not loads:
        return [*out, "    the workload has no figure during the resilver"]
    during = values([ld.during for ld in loads])
    alone = values([ld.alone for ld in loads])
    unit = loads[0].during.unit
    text, _ = compared(alone, during)
    cost = 1 - statistics.fmean(during) / statistics.fmean(alone)
    p_d, p_a = p99s([ld.during for ld in loads]), p99s([ld.alone for ld in loads])
    tail = ""
    if p_d and p_a:
        tail = (
            f"; p99 {statistics.median(p_d):.2f} ms during vs "
            f"{statistics.median(p_a):.2f} ms alone (median of the replicates)"
        )
    windows = _windows(every)
    return [
        *out,
        f"    {loads[0].workload} ({loads[0].rate}): "
        f"{statistics.fmean(during):,.1f} {unit} during the resilver vs "
        f"{statistics.fmean(alone):,.1f} alone: {text}{tail}",
        f"    the resilver costs the workload {cost:.0%} of its figure"
        + (f" ({len(loads)} of {len(every)} replicates)" if why else ""),
        *([windows] if windows else []),
    ]


def load_notes(facts: StudyFacts) -> list[str]:
    out: list[str] = []
    for loaded in facts.configs:
        if loaded.level("load", "none") == "none":
            continue
        layout = loaded.level("layout")
        idle = next((c for c in facts.configs if c.level("layout") == layout
                     and c.level("load", "none") == "none"), None)  # fmt: skip
        out.append(f"  {layout}, under {loaded.level('load')}:")
        if idle is not None:
            out.append(_resilver_line(idle, loaded))
        out += _workload_lines(loaded)
    if not out:
        return []
    head = (
        "resilver under load (means over the replicates; ratios with their 95% Fieller CI; "
        "the workload as one fio run from `zpool replace` to the resilver's end, its figure "
        "over the intervals of its latency-histogram log inside the resilver's own window, "
        "then alone on the healthy pool for as long, each phase from a cold cache):"
    )
    return [head, *out]
