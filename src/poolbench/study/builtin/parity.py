"""parity: how much slower is raidz2 (raidz3) than raidz1 on the same disks, at each width?"""

from __future__ import annotations

from poolbench.errors import UsageError
from poolbench.study.builtin.base import Builtin, StudyDict, study_file, working_set
from poolbench.study.builtin.context import Context


def build(ctx: Context) -> StudyDict:
    widths = ctx.opt_ints("widths", [ctx.n])
    layouts: list[str] = []
    for w in widths:
        if w > ctx.n:
            raise UsageError(f"--widths {w} is wider than the {ctx.n} disks given.", "")
        layouts += [f"raidz{p}:{w}" for p in (1, 2, 3) if w >= p + 2]
    if not layouts:
        raise UsageError("No raidz layout fits these widths.", "Use widths of 3 or more.")
    return study_file(
        ctx,
        "parity",
        "raidz1 vs raidz2 vs raidz3 on the same disks, at each width: streaming write and "
        "cold read",
        {"backend": ["zfs"], "layout": layouts, "ashift": [12]},
        {"names": ["seq-write", "seq-read"], "size": working_set(ctx, 0.5)},
        disks={"count": max(widths)} if not ctx.devices else None,
    )


BUILTIN = Builtin(
    "parity",
    "How much slower is raidz2 (raidz3) than raidz1 on the same disks?",
    (6, "1G"),
    build,
    {"widths": "disk counts to compare at (default: all disks), e.g. 4,6"},
)
