"""capacity: usable space per layout × ashift as the pool reports it, beside the planner's
prediction. Its note is shared by the ashift and width studies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.errors import PoolbenchError
from poolbench.study.builtin.base import (
    Builtin,
    MiB,
    StudyFile,
    default_left_out,
    default_pairs,
    need,
    study_file,
)
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts, StudyFacts


def build(ctx: Context) -> StudyFile:
    need(ctx, 4, "capacity study")
    n = ctx.n
    default = [f"stripe:{n}", default_pairs(ctx)] + [f"raidz{p}" for p in (1, 2, 3) if n >= p + 2]
    if n < 5:
        default_left_out(
            ctx, f"no raidz3 layout: raidz3 needs at least 5 disks; --disks gives {n}."
        )
    return study_file(
        ctx,
        "capacity",
        "usable space per layout × ashift as the pool reports it, beside the planner's "
        "prediction (no I/O beyond creating the pools)",
        {
            "backend": ["zfs"],
            "layout": ctx.opt_list("layouts", default),
            "ashift": ctx.opt_ints("levels", [9, 12]),
        },
        {"names": ["capacity"], "size": "8M"},
        replicates=2,
        max_replicates=2,
    )


def _planner(c: ConfigFacts, usable: int, facts: StudyFacts) -> str:
    """The planner's figure for this pool and how far the reported one is from it."""
    # Imported here: the registry (and so `poolbench study --help`) stays cheap to import.
    from poolbench.planner.capacity import predicted_usable

    if facts.disk_bytes is None:
        return "n/a (the disks' size was not recorded)"
    source = c.level("vdev_source", facts.vdev_source)
    if source != "whole":
        return f"n/a (the members are {source}s poolbench made; the planner is given whole disks)"
    try:
        p = predicted_usable(
            c.level("layout"), int(c.level("ashift", "12") or 12), facts.disk_count,
            facts.disk_bytes, c.zfs_version,
            # `zpool create` on a whole real disk partitions it (OpenZFS; the rules say
            # whether this ZFS does): the planner's --whole-disk rule, as `poolbench plan`.
            whole_disk=facts.disk_source == "devices",
        )  # fmt: skip
    except (PoolbenchError, ValueError) as exc:  # a layout or version the planner lacks
        return f"n/a ({exc})"
    diff = (usable - p) / p * 100 if p else 0.0
    return f"{p / MiB:,.1f} MiB (reported {diff:+.2f}%)"


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """Usable space as each pool reported it, beside the planner's prediction."""
    lines = []
    for c in facts.configs:
        if c.usable_bytes is not None:
            planner = _planner(c, c.usable_bytes, facts)
            lines.append(f"  {c.key}: {c.usable_bytes / MiB:,.1f} MiB; planner {planner}")
    header = "usable space as the pool reports it (zfs USED+AVAIL) vs the planner's prediction:"
    return [header, *lines] if lines else []


BUILTIN = Builtin(
    "capacity",
    "How much usable space does each layout × ashift give (no I/O)?",
    (6, "1G"),
    build,
    {"levels": "ashift values, e.g. 9,12", "layouts": "layouts, e.g. raidz1,raidz2"},
    notes=notes,
)
