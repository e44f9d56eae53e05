"""geometry: the same N disks as striped mirrors, raidz1, raidz2 or dRAID, for random I/O
(databases, VM images): IOPS (p99 when recorded) of random 4K/16K reads, writes and a 70/30
mix, beside the space each block really costs on each layout (the planner's block table).

On a dataset (recordsize = the largest I/O size, so a record is one I/O). dRAID needs
OpenZFS ≥ 2.1: on zfs-fuse it is left out of the default layouts and refused when asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.errors import PoolbenchError, Unsupported
from poolbench.study.builtin.base import (
    Builtin,
    StudyDict,
    mirror_pairs,
    need,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context, parse_size
from poolbench.study.builtin.headline import figure
from poolbench.workloads.library import format_size, parse_record_size

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts, StudyFacts

ASHIFT = 12


def default_layouts(n: int, dialect: str) -> list[str]:
    """Striped 2-way mirrors, raidz1 and raidz2 over all n disks, and (OpenZFS) dRAID1 with
    one distributed spare over them."""
    out = [mirror_pairs(n), f"raidz1:{n}"] + ([f"raidz2:{n}"] if n >= 4 else [])
    if dialect != "zfs-fuse" and n >= 4:
        out.append("draid1:1s")
    return out


def refuse_draid_on_fuse(ctx: Context, layouts: list[str], study: str) -> None:
    if ctx.dialect == "zfs-fuse" and any(x.strip().startswith("draid") for x in layouts):
        raise Unsupported(
            f"The {study} study was asked for a dRAID layout, but this machine's ZFS is "
            "zfs-fuse (pool version 23), which has no dRAID (OpenZFS 2.1 added it); nothing "
            "was created.",
            "Drop the draid layouts from --layouts to run the rest here, or run the study "
            "on OpenZFS ≥ 2.1 (the guest tier: vm/run-openzfs-tier.sh).",
        )


def build(ctx: Context) -> StudyDict:
    need(ctx, 4, "geometry study (two mirror pairs)")
    layouts = ctx.opt_list("layouts", default_layouts(ctx.n, ctx.dialect))
    refuse_draid_on_fuse(ctx, layouts, "geometry")
    records = [parse_record_size(r) for r in ctx.opt_list("records", ["4k", "16k"])]
    names: list[str] = []
    for r in records:
        size = format_size(r)
        names += [f"rand-read-{size}", f"rand-write-{size}", f"rand-mix70-{size}"]
    return study_file(
        ctx,
        "geometry",
        "the same disks as striped mirrors vs raidz1/raidz2 vs dRAID: random reads, writes "
        "and a 70/30 mix on a dataset whose recordsize is the largest I/O size",
        {
            "backend": ["zfs"],
            "layout": layouts,
            "ashift": [ASHIFT],
            "recordsize": [format_size(max(records)).upper()],
        },
        {"names": names, "size": working_set(ctx, 0.15, cap="512M"), "runtime": 10},
        disks={"count": ctx.n} if not ctx.devices else None,
    )


def block_cost_line(layout: str, facts: StudyFacts, block: int) -> str:
    """What one `block`-byte block costs on `layout` (first top-level vdev), per the
    planner's block table: raw bytes written across the members and the efficiency."""
    from poolbench.planner.capacity import plan_pool
    from poolbench.planner.layout import parse_layout
    from poolbench.planner.rules import rules_for_reported

    if facts.disk_bytes is None:
        return "n/a (the disks' size was not recorded)"
    version = next((c.zfs_version for c in facts.configs if c.zfs_version), "")
    try:
        disks = (facts.disk_bytes,) * facts.disk_count
        plan = plan_pool(parse_layout(layout, disks), ASHIFT, rules_for_reported(version))
    except (PoolbenchError, ValueError) as exc:
        return f"n/a ({exc})"
    cost = next((b for b in plan.vdevs[0].blocks if b.psize == block), None)
    if cost is None:
        return f"n/a (the planner has no {format_size(block)} row)"
    return (
        f"a {format_size(block)} block writes {cost.raw_bytes // 1024}K raw "
        f"({cost.efficiency:.0%} efficient)"
    )


def _by_layout(facts: StudyFacts) -> dict[str, ConfigFacts]:
    return {c.level("layout"): c for c in facts.configs if c.level("layout")}


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """Per workload, the layouts best first; then per layout the space a block costs."""
    configs = _by_layout(facts)
    workloads = list(dict.fromkeys(w for c in configs.values() for w in c.figures))
    lines: list[str] = []
    for w in workloads:
        ranked = sorted(
            ((lay, f) for lay, c in configs.items() if (f := figure(c, w)) is not None),
            key=lambda x: x[1].iops,
            reverse=True,
        )
        if len(ranked) < 2:
            continue
        lines.append(f"{w}: " + " > ".join(f"{lay} {f.text()}" for lay, f in ranked))
    blocks = {parse_size(c.level("recordsize", "16K")) for c in configs.values()}
    lines.append(
        "space each block really costs (planner block table, ashift 12; raidz pads each "
        "block to a multiple of parity+1 sectors, a mirror writes one copy per disk):"
    )
    for lay in configs:
        for b in sorted({4096, *blocks}):
            lines.append(f"  {lay}: {block_cost_line(lay, facts, b)}")
    return lines


BUILTIN = Builtin(
    "geometry",
    "Striped mirrors vs raidz1/raidz2 vs dRAID on the same disks, for random I/O?",
    (6, "1G"),
    build,
    {
        "layouts": "layouts over the same disks, e.g. mirror:2+mirror:2,raidz1:4",
        "records": "random I/O sizes, e.g. 4k,16k",
    },
    notes=notes,
)
