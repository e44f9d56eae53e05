"""l2arc: does a cache device (L2ARC) pay for a working set larger than the ARC?

The pool alone beside the same pool `+ cache 1`, with the ARC's ceiling lowered for every
trial (the `arc_max` trial factor: factors/arc_max.py, journaled and put back afterwards)
so that a working set of a few hundred MiB is several times the ARC. Random reads run in
consecutive intervals with the ARC's and L2ARC's counters read between them
(engine/l2arc_reads.py), so the notes show the cache device warming up, its steady hit
rate, and the verdict: steady IOPS and p99 with the cache device against without.

zfs-fuse (pool version 23) keeps its ARC inside its daemon: no arcstats in /proc, no
zfs_arc_max to lower. The study refuses there before anything is created, and runs on
OpenZFS (the guest tier).
"""

from __future__ import annotations

from poolbench.errors import UsageError
from poolbench.study.builtin.base import (
    Builtin,
    MiB,
    StudyFile,
    need,
    refuse_on_zfs_fuse,
    study_file,
)
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.l2arc_notes import notes
from poolbench.units import parse_size
from poolbench.workloads.workload import format_size, parse_record_size

ARC_MAX = "128M"
WS_PER_ARC = 3  # the working set's default size, in ARC ceilings
RUNTIME = 48  # 8 intervals of 6 s


def cached(base: str) -> str:
    return f"{base} + cache 1"


def _sizes(ctx: Context, arc: int) -> int:
    """The working set: --size, else WS_PER_ARC × the ARC's ceiling; refused when it is not
    larger than the ARC, or does not fit a disk (the cache device must hold it too)."""
    ws = parse_size(ctx.options["size"]) if "size" in ctx.options else WS_PER_ARC * arc
    if ws <= arc:
        raise UsageError(
            f"The l2arc study's working set ({ws // MiB} MiB) is not larger than the ARC "
            f"({arc // MiB} MiB): every read would come from RAM and the cache device would "
            "have nothing to serve.",
            f"Give --size at least 2× --arc-max, e.g. --size {2 * arc // MiB}M.",
        )
    if not ctx.devices and ws > 0.8 * ctx.disk_bytes:
        raise UsageError(
            f"The l2arc study's working set ({ws // MiB} MiB) does not fit one "
            f"{ctx.disk_size} disk with room to spare (the data disk and the cache device "
            "must each hold it).",
            f"Give larger disks, e.g. --disks 3x{2 * ws // MiB}M, or a smaller --size.",
        )
    return ws


def build(ctx: Context) -> StudyFile:
    refuse_on_zfs_fuse(
        ctx,
        "l2arc",
        "the ARC's own counters (arcstats l2_hits, l2_misses) and a lower ARC ceiling "
        "(zfs_arc_max)",
        "arcstats in /proc and no zfs_arc_max",
        "its ARC lives inside the zfs-fuse daemon",
        "arc-limit",
    )
    need(ctx, 2, "l2arc study (a data disk and a cache device)")
    arc = parse_size(ctx.options.get("arc_max", ARC_MAX))
    if arc < 64 * MiB:
        raise UsageError(
            f"--arc-max {ctx.options.get('arc_max')} is below the 64 MiB OpenZFS accepts for "
            "zfs_arc_max (it would ignore it).",
            "Use --arc-max 64M or more.",
        )
    ws = _sizes(ctx, arc)
    record = format_size(parse_record_size(ctx.options.get("record", "16k")))
    base = ctx.options.get("base", "stripe:1")
    ctx.announce(
        f"sets the ARC's ceiling (zfs_arc_max) to {arc // MiB} MiB for every trial and puts "
        "back the value it found after each (also on error or Ctrl-C; `poolbench cleanup` "
        f"after a crash); the working set is {ws // MiB} MiB, {ws / arc:.1f}× the ARC."
    )
    return study_file(
        ctx,
        "l2arc",
        f"random {record} reads of a working set {ws / arc:.1f}× the ARC, in intervals, with "
        "and without a cache device: the L2ARC's warm-up, its steady hit rate, and whether it "
        "pays (steady IOPS and p99)",
        {
            "backend": ["zfs"],
            "layout": [base, cached(base)],
            "arc_max": [f"{arc // MiB}M"],
            "recordsize": [record.upper()],
        },
        {"names": [f"l2arc-read-{record}"], "size": f"{ws // MiB}M", "runtime": RUNTIME},
    )


def pre_notes(ctx: Context) -> list[str]:
    return [
        "the ARC's ceiling is lowered for each trial and restored after it; the reads run "
        "right after the working set is written, so the first intervals show the cache "
        "device warming up (l2arc_write_max per second, plus l2arc_write_boost until warm)"
    ]


BUILTIN = Builtin(
    "l2arc",
    "Does a cache device (L2ARC) pay for a working set larger than the ARC?",
    (2, "1G"),
    build,
    {
        "arc_max": "the ARC's ceiling during each trial (zfs_arc_max, restored after), e.g. 128M",
        "record": "the read size and recordsize, e.g. 16k",
        "base": "the pool's layout without its cache device, e.g. stripe:1 or mirror:2",
    },
    notes=notes,
    pre_notes=pre_notes,
)
