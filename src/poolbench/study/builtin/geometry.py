"""geometry: the same N disks as striped mirrors, raidz1, raidz2 or dRAID, for random I/O
(databases, VM images): IOPS (p99 when recorded) of random 4K/16K reads, writes and a 70/30
mix, beside the space each block really costs on each layout (the planner's block table).

On a dataset (recordsize = the largest I/O size, so a record is one I/O) and, on OpenZFS, on
a zvol whose volblocksize is that same size (`target`: backends/zvol.py), with the space the
zvol was charged beside the planner's. zfs-fuse has neither zvols nor dRAID: there the
default is the dataset alone and without dRAID, and either is refused when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from poolbench import capabilities
from poolbench.errors import PoolbenchError
from poolbench.study.builtin.base import (
    Builtin,
    StudyFile,
    default_pairs,
    mirror_pairs,
    need,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.headline import figure
from poolbench.units import parse_size
from poolbench.workloads.workload import format_size, parse_record_size

if TYPE_CHECKING:
    from poolbench.planner.capacity import BlockCost
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
        raise capabilities.unsupported(
            "draid",
            f"The {study} study was asked for a dRAID layout, but this machine's ZFS is "
            "zfs-fuse (pool version 23), which has no dRAID (OpenZFS 2.1 added it); nothing "
            "was created.",
            "Drop the draid layouts from --layouts to run the rest here, or run the study "
            "on OpenZFS ≥ 2.1 (the guest tier: vm/run-openzfs-tier.sh).",
        )


def default_targets(dialect: str) -> list[str]:
    return ["dataset"] if dialect == "zfs-fuse" else ["dataset", "zvol"]


def refuse_zvol_on_fuse(ctx: Context, targets: list[str], study: str) -> None:
    if ctx.dialect == "zfs-fuse" and "zvol" in targets:
        raise capabilities.unsupported(
            "zvols",
            f"The {study} study was asked for a zvol target, but this machine's ZFS is "
            "zfs-fuse, which has no zvols; nothing was created.",
            "Drop zvol from --targets to measure datasets here, or run the study on OpenZFS "
            "(the guest tier: vm/run-openzfs-tier.sh).",
        )


def announce_defaults(ctx: Context) -> None:
    """What the default layouts and targets leave out on these disks and this ZFS."""
    fuse = ctx.dialect == "zfs-fuse"
    if fuse and "layouts" not in ctx.options:
        ctx.announce(
            "no dRAID layout: the study asks striped mirrors vs raidz vs dRAID, but this "
            "machine's ZFS is zfs-fuse, which has no dRAID (OpenZFS 2.1 added it); run it on "
            "OpenZFS ≥ 2.1 for the dRAID rows."
        )
    if fuse and "targets" not in ctx.options:
        ctx.announce("datasets only, no zvol target: zfs-fuse has no zvols.")
    if ctx.n >= 4 and "layouts" not in ctx.options:
        default_pairs(ctx)


def random_workloads(ctx: Context) -> tuple[list[int], list[str]]:
    """The I/O sizes (--records, default 4k,16k) and, at each, a random read, a random write
    and a 70/30 mix."""
    records = [parse_record_size(r) for r in ctx.opt_list("records", ["4k", "16k"])]
    names: list[str] = []
    for r in records:
        size = format_size(r)
        names += [f"rand-read-{size}", f"rand-write-{size}", f"rand-mix70-{size}"]
    return records, names


def build(ctx: Context) -> StudyFile:
    need(ctx, 4, "geometry study (two mirror pairs)")
    layouts = ctx.opt_list("layouts", default_layouts(ctx.n, ctx.dialect))
    refuse_draid_on_fuse(ctx, layouts, "geometry")
    targets = ctx.opt_list("targets", default_targets(ctx.dialect))
    refuse_zvol_on_fuse(ctx, targets, "geometry")
    announce_defaults(ctx)
    records, names = random_workloads(ctx)
    return study_file(
        ctx,
        "geometry",
        "the same disks as striped mirrors vs raidz1/raidz2"
        # the description says what is compared: no "vs dRAID" where none is planned
        + (" vs dRAID" if any(str(x).startswith("draid") for x in layouts) else "")
        + ": random reads, writes and a 70/30 mix on a dataset whose recordsize is the "
        "largest I/O size" + (" and on a zvol of that volblocksize" if "zvol" in targets else ""),
        {
            "backend": ["zfs"],
            "layout": layouts,
            "ashift": [ASHIFT],
            # on a zvol target this is its volblocksize (backends/zvol.py)
            "recordsize": [format_size(max(records)).upper()],
            "target": targets,
        },
        {"names": names, "size": working_set(ctx, 0.15, cap="512M"), "runtime": 10},
        disks={"count": ctx.n} if not ctx.devices else None,
    )


def planned_block(layout: str, facts: StudyFacts, block: int) -> BlockCost | str:
    """What one `block`-byte block costs on `layout` (first top-level vdev) per the
    planner's block table, or why it cannot say."""
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
    return cost if cost is not None else f"n/a (the planner has no {format_size(block)} row)"


def block_cost_line(layout: str, facts: StudyFacts, block: int) -> str:
    """What one `block`-byte block costs on `layout`: raw bytes written across the members
    and the efficiency."""
    cost = planned_block(layout, facts, block)
    if isinstance(cost, str):
        return cost
    return (
        f"a {format_size(block)} block writes {cost.raw_bytes // 1024}K raw "
        f"({cost.efficiency:.0%} efficient)"
    )


def zvol_space_line(label: str, c: ConfigFacts, facts: StudyFacts) -> str:
    """What a zvol target was charged per byte written, beside the planner's figure for a
    block of its volblocksize (BlockCost.charged_bytes: the deflated asize `zfs list` shows)."""
    space = c.zvol
    got = space.charged_per_byte if space else None
    if space is None or got is None:
        return f"  {label}: not recorded (read with zfs get referenced,logicalreferenced)"
    text = (
        f"  {label}: charged {got:.2f} bytes per byte written (referenced ÷ "
        f"logicalreferenced, volblocksize {format_size(space.volblocksize).upper()})"
    )
    cost = planned_block(c.level("layout"), facts, space.volblocksize)
    if isinstance(cost, str):
        return f"{text}; planner {cost}"
    planned = cost.charged_bytes / cost.psize
    off = got / planned - 1
    verdict = "as planned" if abs(off) <= SPACE_TOLERANCE else f"{off:+.1%} from the planner"
    return f"{text}; planner {planned:.2f} ({verdict})"


# A zvol's referenced bytes include its indirect blocks (one 128K L1 per 1024 blocks, before
# compression): a few percent over the data blocks' own charge.
SPACE_TOLERANCE = 0.03


def config_label(c: ConfigFacts) -> str:
    """A configuration as the notes name it: its layout, and its target when a zvol."""
    label = c.level("layout")
    if c.level("target") == "zvol":
        vbs = c.level("volblocksize") or c.level("recordsize")
        label += f" zvol{f' {vbs}' if vbs else ''}"
    return label


def ranked_lines(configs: Mapping[str, ConfigFacts]) -> list[str]:
    """Per workload, the configurations best first by IOPS (p99 when recorded)."""
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
    return lines


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """Per workload, the layouts (and targets) best first; per layout the space a block
    costs; per zvol what it was charged."""
    configs = {config_label(c): c for c in facts.configs if c.level("layout")}
    lines = ranked_lines(configs)
    blocks = {parse_size(c.level("recordsize", "16K")) for c in configs.values()}
    lines.append(
        "space each block really costs (planner block table, ashift 12; raidz pads each "
        "block to a multiple of parity+1 sectors, a mirror writes one copy per disk):"
    )
    for lay in dict.fromkeys(c.level("layout") for c in configs.values()):
        for b in sorted({4096, *blocks}):
            lines.append(f"  {lay}: {block_cost_line(lay, facts, b)}")
    zvols = [zvol_space_line(label, c, facts) for label, c in configs.items()
             if c.level("target") == "zvol"]  # fmt: skip
    if zvols:
        lines += ["space a zvol was charged once its working set was written:", *zvols]
    return lines


BUILTIN = Builtin(
    "geometry",
    "Striped mirrors vs raidz1/raidz2 vs dRAID on the same disks, for random I/O?",
    (6, "1G"),
    build,
    {
        "layouts": "layouts over the same disks, e.g. mirror:2+mirror:2,raidz1:4",
        "records": "random I/O sizes, e.g. 4k,16k",
        "targets": "dataset, zvol or both (zvol: OpenZFS only)",
    },
    notes=notes,
)
