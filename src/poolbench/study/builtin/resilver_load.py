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
    from poolbench.store.facts import ConfigFacts, StudyFacts

Stored = dict[str, object]  # a stored section as the store decoded it


def _loads(c: ConfigFacts) -> list[Stored]:
    """Each replicate's `load` part of its resilver section."""
    out = []
    for s in c.sections.get("resilver", ()):
        got = s.get("load")
        if isinstance(got, dict):
            out.append(got)
    return out


def phase(loads: list[Stored], name: str, key: str) -> list[float]:
    """One figure (`value`, `p99_ms`) of the phase `name` (during, alone) per replicate."""
    out = []
    for ld in loads:
        got = ld.get(name)
        v = got.get(key) if isinstance(got, dict) else None
        if isinstance(v, int | float) and not isinstance(v, bool):
            out.append(float(v))
    return out


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


def _paired(loads: list[Stored]) -> tuple[list[Stored], list[str]]:
    """The replicates with a figure both during the resilver and alone, and why the others
    have none (a resilver too short for fio's log, stated in the row; older rows ran in
    slices and state nothing)."""
    kept, why = [], []
    for ld in loads:
        if phase([ld], "during", "value") and phase([ld], "alone", "value"):
            kept.append(ld)
            continue
        got = ld.get("during")
        reason = got.get("why") if isinstance(got, dict) else None
        why.append(str(reason) if reason else "no foreground interval ended within it")
    return kept, why


def _windows(loads: list[Stored]) -> str:
    """How the `during` figures were measured: each replicate's window and intervals."""
    parts = []
    for ld in loads:
        got = ld.get("during")
        if isinstance(got, dict) and "window_s" in got:
            parts.append(f"{got.get('window_s')} s ({got.get('intervals')} intervals)")
    if not parts:
        return ""
    ms = next((d.get("interval_ms") for ld in loads if isinstance(d := ld.get("during"), dict)),
              None)  # fmt: skip
    return f"    during: the resilver's window per replicate, {ms} ms intervals: " + ", ".join(
        parts
    )


def _workload_lines(loaded: ConfigFacts) -> list[str]:
    every = _loads(loaded)
    loads, why = _paired(every)
    out = [f"    no figure during the resilver in replicate(s) of it: {w}" for w in why]
    if not loads:
        return [*out, "    the workload has no figure during the resilver"]
    during, alone = phase(loads, "during", "value"), phase(loads, "alone", "value")
    first = loads[0].get("during")
    unit = str(first.get("unit", "")) if isinstance(first, dict) else ""
    text, _ = compared(alone, during)
    cost = 1 - statistics.fmean(during) / statistics.fmean(alone)
    p_d, p_a = phase(loads, "during", "p99_ms"), phase(loads, "alone", "p99_ms")
    tail = ""
    if p_d and p_a:
        tail = (
            f"; p99 {statistics.median(p_d):.2f} ms during vs "
            f"{statistics.median(p_a):.2f} ms alone (median of the replicates)"
        )
    windows = _windows(every)
    return [
        *out,
        f"    {loads[0].get('workload')} ({loads[0].get('rate')}): "
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
