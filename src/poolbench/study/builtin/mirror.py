"""mirror: single disk vs 2-way vs 3-way mirror across application record sizes 64K…8M
against the dataset recordsize, the iozone set."""

from __future__ import annotations

from poolbench.errors import UsageError
from poolbench.study.builtin.base import (
    Builtin,
    StudyFile,
    need,
    study_file,
    uses_disks,
    working_set,
)
from poolbench.study.builtin.context import Context
from poolbench.workloads.iozone import IOZONE_TESTS
from poolbench.workloads.workload import parse_record_size

RECORDS = ["64k", "128k", "256k", "512k", "1m", "2m", "4m", "8m"]


def build(ctx: Context) -> StudyFile:
    widths = ctx.opt_ints("levels", [1, 2, 3])
    need(ctx, max(widths), "mirror study")
    layouts = ["stripe:1" if w == 1 else f"mirror:{w}" for w in widths]
    uses_disks(ctx, max(widths), f"the widest layout, {layouts[widths.index(max(widths))]}, needs "
               f"{max(widths)}; --levels sets the mirror widths")  # fmt: skip
    records = ctx.opt_list("records", RECORDS)
    for r in records:
        parse_record_size(r)
    tests = ctx.opt_list("tests", IOZONE_TESTS)
    bad = [t for t in tests if t not in IOZONE_TESTS]
    if bad:
        raise UsageError(f"--tests: '{bad[0]}' is not an iozone test.", ", ".join(IOZONE_TESTS))
    rs = "128K" if ctx.dialect == "zfs-fuse" else "1M"  # zfs-fuse: recordsize at most 128K
    if ctx.dialect == "zfs-fuse":
        ctx.announce("dataset recordsize 128K, not 1M: zfs-fuse allows at most 128K.")
    return study_file(
        ctx,
        "mirror",
        f"single disk vs 2-way vs 3-way mirror, application records {records[0]}…{records[-1]} "
        f"against the dataset recordsize {rs}, the iozone set",
        {"backend": ["zfs"], "layout": layouts, "recordsize": [rs]},
        {
            "names": [f"iozone-{t}-{r.lower()}" for r in records for t in tests],
            "size": working_set(ctx, 0.25),
        },
        disks={"count": max(widths)} if not ctx.devices else None,
    )


BUILTIN = Builtin(
    "mirror",
    "Single disk vs 2-way vs 3-way mirror across application record sizes 64K…8M?",
    (3, "1G"),
    build,
    {
        "levels": "mirror widths (1 = a single disk), e.g. 1,2,3",
        "records": "application record sizes, e.g. 64k,1m,8m",
        "tests": f"iozone tests (default all: {','.join(IOZONE_TESTS)})",
    },
)
