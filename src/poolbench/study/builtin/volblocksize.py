"""volblocksize: zvols (the block devices VMs and iSCSI use) at volblocksize 8K/16K/64K on
striped mirrors vs raidz1 over the same disks: random IOPS and p99 latency of 4K and 16K
reads, writes and a 70/30 mix, and the space each zvol is charged per byte written, beside
the planner's block table.

The question it answers (openzfs/zfs#548, #11407): a small volblocksize on raidz pays parity
and padding per block (an 8K block on raidz1 with 4K sectors writes 2 data + 1 parity
sectors, padded to 4), so a zvol can take far more space than it holds; a large one makes
every small write a read-modify-write of the whole block. Mirrors pay neither. fio runs on
the zvol's block device with O_DIRECT (backends/zvol.py, workloads/fiojob.py); the cold read
exports and imports the pool, which evicts the ARC and re-creates the device.

zfs-fuse has no zvols: the study refuses there before anything is created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.errors import UsageError
from poolbench.study.builtin.base import (
    Builtin,
    StudyFile,
    mirror_pairs,
    need,
    refuse_on_zfs_fuse,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.geometry import (
    ASHIFT,
    config_label,
    planned_block,
    random_workloads,
    ranked_lines,
    zvol_space_line,
)
from poolbench.workloads.workload import format_size, parse_record_size

if TYPE_CHECKING:
    from poolbench.store.facts import StudyFacts

LEVELS = ["8K", "16K", "64K"]


def _levels(ctx: Context) -> list[str]:
    """The volblocksize levels, each a power of two from 512 (parse_record_size says so;
    the backend checks the ZFS's own upper bound before anything is built)."""
    levels = [v.upper() for v in ctx.opt_list("levels", LEVELS)]
    for v in levels:
        parse_record_size(v)
    return levels


def build(ctx: Context) -> StudyFile:
    refuse_on_zfs_fuse(
        ctx, "volblocksize", "zvols", "ZFS volumes", "zvols are not part of it", "zvols"
    )
    need(ctx, 4, "volblocksize study (two mirror pairs, or a raidz1 of 4)")
    layouts = ctx.opt_list("layouts", [mirror_pairs(ctx.n), f"raidz1:{ctx.n}"])
    _, names = random_workloads(ctx)
    return study_file(
        ctx,
        "volblocksize",
        "zvols at volblocksize " + ", ".join(_levels(ctx)) + " on "
        + " vs ".join(layouts) + ": random reads, writes and a 70/30 mix on the block "
        "device, and the space each zvol is charged per byte written",
        {
            "backend": ["zfs"],
            "layout": layouts,
            "ashift": [ASHIFT],
            # off: the space figure is the layout's, not lz4's (fio's data is random anyway)
            "compression": ["off"],
            "target": ["zvol"],
            "volblocksize": _levels(ctx),
        },
        {"names": names, "size": working_set(ctx, 0.15, cap="512M"), "runtime": 10},
        disks={"count": ctx.n} if not ctx.devices else None,
    )  # fmt: skip


def _rmw_lines(facts: StudyFacts) -> list[str]:
    """Where an I/O is smaller than the volblocksize: each write rewrites a whole block."""
    lines = []
    for c in facts.configs:
        block = c.zvol.volblocksize if c.zvol else 0
        small = sorted({w for w in c.figures if "write" in w or "mix" in w
                        if _io_size(w) and 0 < _io_size(w) < block})  # fmt: skip
        if small:
            lines.append(
                f"  {config_label(c)}: {', '.join(small)} write less than one "
                f"{format_size(block).upper()} block, so each write rewrites a whole block "
                "(read-modify-write when it is not cached)"
            )
    return lines


def _io_size(workload: str) -> int:
    try:
        return parse_record_size(workload.split("-")[2])
    except (IndexError, UsageError, ValueError):
        return 0


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """Per workload the zvols best first; per zvol its space against the planner's; where
    small writes rewrite whole blocks."""
    configs = {config_label(c): c for c in facts.configs if c.level("layout")}
    lines = ranked_lines(configs)
    lines.append(
        "space each zvol was charged once its working set was written (sparse zvols, "
        "compression off; the planner's charge is the block's allocated size, parity and "
        "padding included, deflated as `zfs list` shows it):"
    )
    lines += [zvol_space_line(label, c, facts) for label, c in configs.items()]
    for c in facts.configs:  # the block table row that explains a charge above 1
        block = c.zvol.volblocksize if c.zvol else 0
        cost = planned_block(c.level("layout"), facts, block) if block else "n/a"
        if (
            not isinstance(cost, str)
            and cost.raw_bytes > cost.psize
            and "mirror" not in (c.level("layout"))
        ):
            lines.append(
                f"  {config_label(c)}: each {format_size(block).upper()} block writes "
                f"{cost.raw_bytes // 1024}K raw ({cost.efficiency:.0%} efficient)"
            )
    rmw = _rmw_lines(facts)
    return lines + (["small writes:", *rmw] if rmw else [])


BUILTIN = Builtin(
    "volblocksize",
    "Which zvol volblocksize on raidz vs mirrors: IOPS, latency and the space it costs?",
    (4, "1G"),
    build,
    {
        "levels": "volblocksize values, e.g. 8K,16K,64K",
        "layouts": "layouts over the same disks, e.g. mirror:2+mirror:2,raidz1:4",
        "records": "random I/O sizes, e.g. 4k,16k",
    },
    notes=notes,
)
