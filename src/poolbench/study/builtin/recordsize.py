"""recordsize: which dataset recordsize suits my application's I/O size?"""

from __future__ import annotations

from poolbench.study.builtin.base import Builtin, StudyFile, need, study_file, working_set
from poolbench.study.builtin.context import Context
from poolbench.workloads.workload import parse_record_size

ZFS_FUSE_RECORDSIZES = ["8K", "32K", "128K"]  # zfs-fuse: at most 128K
OPENZFS_RECORDSIZES = ["16K", "128K", "1M"]


def build(ctx: Context) -> StudyFile:
    need(ctx, 3, "recordsize study")
    default = ZFS_FUSE_RECORDSIZES if ctx.dialect == "zfs-fuse" else OPENZFS_RECORDSIZES
    if ctx.dialect == "zfs-fuse" and "levels" not in ctx.options:
        ctx.announce(
            f"recordsizes {','.join(default)}, not {','.join(OPENZFS_RECORDSIZES)}: zfs-fuse "
            "allows at most 128K."
        )
    sizes = ctx.opt_list("records", ["4k", "64k", "1m"])
    names: list[str] = []
    for r in sizes:
        parse_record_size(r)
        names += [f"iozone-write-{r}", f"iozone-read-{r}", f"rand-read-{r}", f"rand-write-{r}"]
    return study_file(
        ctx,
        "recordsize",
        "dataset recordsize × application I/O size, sequential and random",
        {
            "backend": ["zfs"],
            "layout": ctx.opt_list("layouts", ["raidz1"]),
            "recordsize": [x.upper() for x in ctx.opt_list("levels", default)],
        },
        {"names": names, "size": working_set(ctx, 0.25), "runtime": 10},
    )


BUILTIN = Builtin(
    "recordsize",
    "Which dataset recordsize suits my application's I/O size?",
    (3, "1G"),
    build,
    {
        "levels": "dataset recordsizes (default: what this ZFS offers)",
        "records": "application I/O sizes, e.g. 4k,64k,1m",
        "layouts": "layouts, e.g. raidz1",
    },
)
