"""parity: how much slower is raidz2 (raidz3) than raidz1 on the same disks, at each width?"""

from __future__ import annotations

from poolbench.errors import UsageError
from poolbench.study.builtin.base import (
    Builtin,
    DisksTable,
    StudyFile,
    study_file,
    uses_disks,
    working_set,
)
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.geometry import refuse_draid_on_fuse


def raidz_layouts(n: int, widths: list[int], given: bool = True) -> list[str]:
    """raidz1/2/3 at each width; `given` says whether --widths was written (else the width
    is every disk), so a refusal names what is actually wrong."""
    layouts: list[str] = []
    for w in widths:
        if w > n:
            raise UsageError(f"--widths {w} is wider than the {n} disks given.", "")
        layouts += [f"raidz{p}:{w}" for p in (1, 2, 3) if w >= p + 2]
    if layouts:
        return layouts
    if not given:
        raise UsageError(
            f"The parity study compares raidz1, raidz2 and raidz3 over all the disks; {n} "
            f"disk{'s make' if n != 1 else ' makes'} none of them (raidz1 needs 3).",
            "Give 3 or more disks (--disks 6x1G, or 3 or more devices), or explicit --layouts.",
        )
    raise UsageError(
        f"No raidz layout fits widths {','.join(map(str, widths))}: raidz1 needs 3 disks, "
        "raidz2 4, raidz3 5.",
        "Use widths of 3 or more.",
    )


def build(ctx: Context) -> StudyFile:
    # Explicit --layouts put dRAID at the same parity beside raidz (draid2:4d:6c:0s is raidz2:6's
    # twin: one redundancy group of 4 data + 2 parity over 6 children, no spare).
    count: DisksTable | None = None  # the disks a generated study file asks for
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
        layouts = raidz_layouts(ctx.n, widths, given="widths" in ctx.options)
        count = {"count": max(widths)}
        uses_disks(ctx, max(widths), f"the widest raidz asked for (--widths) is {max(widths)}")
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
