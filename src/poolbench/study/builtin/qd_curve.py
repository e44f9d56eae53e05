"""qd-curve: how IOPS and latency grow with queue depth × jobs, per layout: where more
outstanding I/O stops buying IOPS and only adds latency (the knee of the curve).

Each point is one workload on the same pool (rand-read-4k-qd8-j4: queue depth 8 with libaio
and O_DIRECT, 4 jobs), so one pool per configuration serves the whole sweep. The HTML report
draws each layout's curve as IOPS against p99 latency (the mean latency Little's law gives
when no percentile was recorded, labelled so).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from poolbench.errors import UsageError
from poolbench.study.builtin.base import (
    Builtin,
    StudyFile,
    default_pairs,
    need,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.headline import Figure, figure, littles_law_ms, load
from poolbench.workloads.fiodepth import BLOCKING_SUBMIT
from poolbench.workloads.workload import format_size, parse_record_size

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts, StudyFacts

MODES = ("read", "write", "mix70")
KNEE = 0.9  # the knee: the lightest load reaching this share of the peak IOPS


def build(ctx: Context) -> StudyFile:
    need(ctx, 2, "qd-curve study")
    depths = ctx.opt_ints("depths", [1, 4, 16, 32])
    jobs = ctx.opt_ints("jobs", [1, 4])
    mode = ctx.options.get("mode", "read")
    if mode not in MODES:
        raise UsageError(f"--mode {mode} is not one of {', '.join(MODES)}.", "e.g. --mode read")
    if any(not 1 <= d <= 1024 for d in depths) or any(not 1 <= j <= 256 for j in jobs):
        raise UsageError(
            "--depths must be 1 to 1024 and --jobs 1 to 256.", "e.g. --depths 1,4,16 --jobs 1,4"
        )
    size = format_size(parse_record_size(ctx.options.get("records", "4k")))
    names = [f"rand-{mode}-{size}-qd{d}-j{j}" for j in jobs for d in depths]
    # The same disks as striped mirror pairs and as one raidz1 (the geometry study's pair).
    layouts = ctx.opt_list(
        "layouts", [default_pairs(ctx)] + ([f"raidz1:{ctx.n}"] if ctx.n >= 3 else [])
    )
    return study_file(
        ctx,
        "qd-curve",
        f"random {size} {mode} IOPS and latency at queue depths {', '.join(map(str, depths))} × "
        f"{', '.join(map(str, jobs))} jobs, per layout: the IOPS-against-latency curve",
        {"backend": ["zfs"], "layout": layouts, "ashift": [12]},
        {"names": names, "size": working_set(ctx, 0.15, cap="512M"), "runtime": 10},
    )


def curve(c: ConfigFacts) -> dict[tuple[str, int], list[tuple[int, Figure]]]:
    """(base workload, jobs) → [(queue depth, figure)] in depth order."""
    out: dict[tuple[str, int], list[tuple[int, Figure]]] = defaultdict(list)
    for w in c.figures:
        base, qd, jobs = load(w)
        f = figure(c, w)
        if f is not None:
            out[(base, jobs)].append((qd, f))
    return {k: sorted(v, key=lambda x: x[0]) for k, v in out.items()}


def _point(qd: int, jobs: int, f: Figure) -> str:
    lat = f.p99.text() if f.p99 is not None else None
    if lat is None:
        mean = littles_law_ms(f.iops, qd * jobs)
        lat = f"mean {mean:.2f} ms (Little's law)" if mean is not None else "latency n/a"
    return f"qd{qd}: {f.iops:,.0f} IOPS, {lat}"


def knee_text(points: list[tuple[int, Figure]], jobs: int) -> str:
    """The lightest queue depth within 10% of the peak IOPS, and what deeper queues cost."""
    peak_qd, peak = max(points, key=lambda p: p[1].iops)
    knee_qd, knee = next((qd, f) for qd, f in points if f.iops >= KNEE * peak.iops)
    deepest_qd, deepest = points[-1]
    text = f"knee at qd{knee_qd} ({knee.iops / peak.iops:.0%} of the peak {peak.iops:,.0f} IOPS)"
    if deepest_qd > knee_qd:
        a = littles_law_ms(knee.iops, knee_qd * jobs) or 0.0
        b = littles_law_ms(deepest.iops, deepest_qd * jobs) or 0.0
        if deepest.p99_ms is not None and knee.p99_ms is not None:
            a, b, what = knee.p99_ms, deepest.p99_ms, "p99"
        else:
            what = "mean latency"
        text += (
            f"; qd{deepest_qd} gives {deepest.iops / knee.iops:.2f}× the IOPS for "
            f"{b / a:.1f}× the {what}"
            if a > 0
            else ""
        )
    return text


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    lines = ["queue-depth curves (each point: IOPS and latency at one queue depth):"]
    for c in facts.configs:
        for (base, jobs), points in curve(c).items():
            if len(points) < 2:
                continue
            lines.append(f"  {c.key}, {base}, {jobs} job(s): {knee_text(points, jobs)}")
            lines.append("    " + "; ".join(_point(qd, jobs, f) for qd, f in points))
    if len(lines) == 1:
        return []
    blocked = sorted({w for c in facts.configs for w in c.blocking_submit if load(w)[1] > 1})
    if blocked:
        lines.append(
            "  at depth > 1 each I/O was done inside the submit call on this stack (fio spent "
            f"≥ {BLOCKING_SUBMIT:.0%} of the run there: {', '.join(blocked)}), so those points "
            "kept one I/O per job in flight: their IOPS is the depth-1 figure, their latency "
            "counts the wait to be reaped, not a queue at the disks; only more jobs add "
            "concurrency here (docs/queue-depth.md)."
        )
    if not any(
        f.p99_ms is not None for c in facts.configs for p in curve(c).values() for _qd, f in p
    ):
        lines.append(
            "  no latency percentiles were recorded: latencies are means by Little's law "
            "(outstanding I/Os / IOPS), exact for a fixed queue depth, but a mean hides the "
            "tail a p99 shows."
        )
    return lines


BUILTIN = Builtin(
    "qd-curve",
    "How do IOPS and latency grow with queue depth and jobs, and where is the knee?",
    (4, "1G"),
    build,
    {
        "depths": "queue depths, e.g. 1,4,16,32",
        "jobs": "concurrent jobs per point, e.g. 1,4",
        "mode": "read, write or mix70 (random, 70% reads)",
        "records": "the I/O size, e.g. 4k",
        "layouts": "layouts, e.g. mirror:2,raidz1",
    },
    notes=notes,
)
