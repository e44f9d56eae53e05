"""vdev-source: whole disks vs a partition spanning each disk vs a smaller slice per disk."""

from __future__ import annotations

from poolbench.study.builtin.base import Builtin, MiB, StudyFile, need, study_file, working_set
from poolbench.study.builtin.context import Context


def build(ctx: Context) -> StudyFile:
    need(ctx, 3, "vdev-source study")
    slice_bytes = ctx.options.get("slice_size") or f"{max(64, ctx.disk_bytes // 2 // MiB)}M"
    return study_file(
        ctx,
        "vdev-source",
        "whole disks vs a partition spanning each disk vs a smaller slice per disk",
        {
            "backend": ["zfs"],
            "layout": ctx.opt_list("layouts", ["raidz1"]),
            "vdev_source": ctx.opt_list("levels", ["whole", "partition", "slice"]),
        },
        {"names": ["seq-write", "seq-read"], "size": working_set(ctx, 0.2)},
        disks={"slice_size": slice_bytes.upper()},
    )


BUILTIN = Builtin(
    "vdev-source",
    "Whole disks vs a partition spanning each disk vs a smaller slice per disk?",
    (3, "1G"),
    build,
    {
        "levels": "vdev sources: whole,partition,slice",
        "layouts": "layouts, e.g. raidz1",
        "slice_size": "size of the slice per disk (default: half a disk)",
    },
    needs_loop=True,
)
