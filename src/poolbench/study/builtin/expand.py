"""expand: RAIDZ expansion (OpenZFS >= 2.3, `zpool attach` of one more disk to a raidz vdev):
usable space before and after as ZFS reports it and as the planner predicts, the time the
reflow takes with the working set on the pool, and a cold streaming read after it (of the
working set laid out again after the expansion, so at the new width).

Blocks written before an expansion keep their old data:parity ratio (they are moved, not
re-striped), and `zfs list` keeps charging every block at the old ratio: the notes say what a
new 128K record costs of the AVAIL the pool shows (planner/expansion.py).

Refused on zfs-fuse, which has no RAIDZ expansion; on OpenZFS older than 2.3 the trial fails
at the attach with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.errors import PoolbenchError
from poolbench.study.builtin.base import (
    Builtin,
    MiB,
    StudyFile,
    default_left_out,
    need,
    refuse_on_zfs_fuse,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.planner.expansion import ExpansionPlan
    from poolbench.store.facts import ConfigFacts, Expansion, StudyFacts

ASHIFT = 12
WORKLOADS = ["seq-write", "expand", "seq-read", "capacity"]


def build(ctx: Context) -> StudyFile:
    refuse_on_zfs_fuse(
        ctx,
        "expand",
        "to attach a disk to a raidz vdev",
        "RAIDZ expansion",
        "OpenZFS 2.3 added it; `poolbench plan --expand-to` predicts its space",
        "raidz-expansion",
    )
    need(ctx, 4, "expand study (a raidz1 of 3 and the disk to attach)")
    w = ctx.n - 1  # one disk stays out of the pool: the one attached
    default = [f"raidz1:{w}"] + ([f"raidz2:{w}"] if w >= 4 else [])
    if w < 4:
        default_left_out(
            ctx,
            f"no raidz2 layout: it needs 4 disks besides the one attached; --disks gives {ctx.n}.",
        )
    return study_file(
        ctx,
        "expand",
        "RAIDZ expansion: write the working set, attach one more disk to the raidz vdev "
        "(zpool attach -w, timed), then a cold streaming read at the new width; usable space "
        "before and after, beside the planner's",
        {"backend": ["zfs"], "layout": ctx.opt_list("layouts", default), "ashift": [ASHIFT]},
        {"names": list(WORKLOADS), "size": working_set(ctx, 0.25)},
    )


def planned(c: ConfigFacts, facts: StudyFacts, e: Expansion) -> ExpansionPlan | str:
    """The planner's expansion of this configuration's pool by one disk, or why not."""
    from poolbench.planner.capacity import plan_pool
    from poolbench.planner.expansion import plan_expansion
    from poolbench.planner.layout import parse_layout
    from poolbench.planner.rules import rules_for_reported

    if facts.disk_bytes is None:
        return "n/a (the disks' size was not recorded)"
    disk = facts.disk_bytes
    try:
        layout = parse_layout(c.level("layout"), (disk,) * facts.disk_count)
        rules = rules_for_reported(c.zfs_version)
        # `zpool create` and `zpool attach` on a whole real disk partition it (OpenZFS)
        pool = plan_pool(layout, int(c.level("ashift", str(ASHIFT))), rules,
                         whole_disk=facts.disk_source == "devices")  # fmt: skip
        return plan_expansion(pool, e.width_before + 1, new_device=disk)
    except (PoolbenchError, ValueError) as exc:
        return f"n/a ({exc})"


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / MiB:,.1f} MiB"


def _line(c: ConfigFacts, facts: StudyFacts, e: Expansion) -> list[str]:
    plan = planned(c, facts, e)
    rate = e.allocated_bytes / e.seconds / MiB if e.seconds > 0 else 0.0
    head = (
        f"  {c.level('layout')} (replicate {e.replicate + 1}), {e.width_before} → "
        f"{e.width_before + 1} disks: usable {_mib(e.usable_before)} → {_mib(e.usable_after)}"
    )
    took = (
        f"    the reflow of {_mib(e.allocated_bytes)} allocated took {e.seconds:g} s "
        f"({rate:,.1f} MiB/s)"
    )
    if isinstance(plan, str):
        return [head + f"; planner {plan}", took]
    diff = ""
    if e.usable_after is not None and plan.usable_bytes:
        diff = f", reported {(e.usable_after - plan.usable_bytes) / plan.usable_bytes:+.2%}"
    charge = (
        f"    a 128K record written after it is charged {plan.record_charge_new / 1024:.1f}K "
        f"of AVAIL, one written before {plan.record_charge_old / 1024:.1f}K: the empty "
        f"expanded pool would hold {plan.new_record_bytes / MiB:,.0f} MiB of new 128K records "
        f"in its {_mib(plan.usable_bytes)}"
    )
    return [head + f"; planner {_mib(plan.usable_bytes)} after{diff}", took, charge]


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    lines = [x for c in facts.configs for e in c.expansions for x in _line(c, facts, e)]
    if not lines:
        return []
    return [
        "RAIDZ expansion: usable space as ZFS reports it (USED + AVAIL) and the planner's "
        "prediction, the reflow's time:",
        *lines,
        "Old blocks keep their old data:parity ratio (moved, not re-striped), and `zfs list` "
        "keeps the old ratio for every block: rewrite old data to give it the new width's "
        "space efficiency.",
    ]


BUILTIN = Builtin(
    "expand",
    "What does attaching a disk to a raidz vdev (RAIDZ expansion) give, and how long does it take?",
    (4, "1G"),
    build,
    {"layouts": "raidz layouts, one disk fewer than given, e.g. raidz1:3,raidz2:4"},
    notes=notes,
)
