"""fill: how does throughput fall as the pool fills up to 90%?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.study.builtin.base import Builtin, MiB, StudyFile, need, study_file
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.store.facts import StudyFacts


def build(ctx: Context) -> StudyFile:
    need(ctx, 3, "fill study")
    levels = ctx.opt_ints("levels", [10, 25, 50, 75, 90])
    # The working set must fit on top of the highest fill level (raidz1: n-1 data disks).
    usable = ctx.disk_bytes * (ctx.n - 1) * 0.9
    room = usable * (0.97 - max(levels) / 100) / 2.5
    ws = f"{max(8, min(1024, int(room) // MiB))}M"
    if "size" not in ctx.options and not 8 <= int(room) // MiB <= 1024:
        ctx.announce(
            f"working set {ws}: it must fit on top of the {max(levels)}% fill level (raidz1 "
            f"over {ctx.n} disks has about {usable / MiB:.0f}M usable), leaving "
            f"{room / MiB:.0f}M for it, held between 8M and 1024M (--size sets it)."
        )
    return study_file(
        ctx,
        "fill",
        f"streaming write and cold read as the pool fills to {', '.join(map(str, levels))}% "
        "(incompressible filler, written untimed before the workloads)",
        {"backend": ["zfs"], "layout": ctx.opt_list("layouts", ["raidz1"]), "fill": levels},
        {"names": ["seq-write", "seq-read"], "size": ws},
    )


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """How full each configuration's pool was when it was measured."""
    lines = [
        f"  {c.key}: asked {c.fill.asked_percent:g}%, achieved {c.fill.achieved_percent:g}% "
        f"({c.fill.filler_bytes / MiB:.0f} MiB of filler)"
        for c in facts.configs
        if c.fill is not None
    ]
    return ["fill levels reached before measuring:", *lines] if lines else []


BUILTIN = Builtin(
    "fill",
    "How does throughput fall as the pool fills up to 90%?",
    (4, "1G"),
    build,
    {"levels": "fill percentages, e.g. 10,50,90", "layouts": "layouts, e.g. raidz1"},
    notes=notes,
)
