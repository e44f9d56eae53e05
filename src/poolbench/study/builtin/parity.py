"""parity: how much slower is raidz2 (raidz3) than raidz1 on the same disks, at each width?"""

from __future__ import annotations

from poolbench.errors import UsageError
from poolbench.study.builtin.base import Builtin, StudyDict, study_file, working_set
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.geometry import refuse_draid_on_fuse


def raidz_layouts(n: int, widths: list[int]) -> list[str]:
    layouts: list[str] = []
    for w in widths:
        if w > n:
            raise UsageError(f"--widths {w} is wider than the {n} disks given.", "")
        layouts += [f"raidz{p}:{w}" for p in (1, 2, 3) if w >= p + 2]
    if not layouts:
        raise UsageError("No raidz layout fits these widths.", "Use widths of 3 or more.")
    return layouts


def build(ctx: Context) -> StudyDict:
    # Explicit --layouts put dRAID at the same parity beside raidz (draid2:4d:6c:0s is raidz2:6's
    # twin: one redundancy group of 4 data + 2 parity over 6 children, no spare).
    count: dict[str, int] | None = None  # the disks a generated study file asks for
    if "layouts" in ctx.options:
        if "widths" in ctx.options:
            raise UsageError(
                "The parity study takes --widths or --layouts, not both.",
                "Give the layouts with their widths in --layouts (raidz2:6,draid2:4d:6c:0s).",
            )
        layouts = ctx.opt_list("layouts", [])
        refuse_draid_on_fuse(ctx, layouts, "parity")
    else:
        widths = ctx.opt_ints("widths", [ctx.n])
        layouts = raidz_layouts(ctx.n, widths)
        count = {"count": max(widths)}
    return study_file(
        ctx,
        "parity",
        "raidz1 vs raidz2 vs raidz3 on the same disks, at each width: streaming write and "
        "cold read",
        {"backend": ["zfs"], "layout": layouts, "ashift": [12]},
        {"names": ["seq-write", "seq-read"], "size": working_set(ctx, 0.5)},
        disks=count if not ctx.devices else None,
    )


BUILTIN = Builtin(
    "parity",
    "How much slower is raidz2 (raidz3) than raidz1 on the same disks?",
    (6, "1G"),
    build,
    {
        "widths": "disk counts to compare at (default: all disks), e.g. 4,6",
        "layouts": "explicit layouts instead, e.g. raidz1:6,raidz2:6,draid2:4d:6c:0s "
        "(dRAID: OpenZFS ≥ 2.1)",
    },
)
