"""prefetch: what does ZFS's read-ahead do for a streaming read, and cost a random one?

The same layout with OpenZFS's predictive prefetch on and off (the `prefetch` trial factor:
zfs_prefetch_disable, set for each trial and put back after it, factors/prefetch.py),
measured on a cold sequential read in 1 MiB requests (what prefetch is for: one reader,
one request at a time, the disks kept busy only if ZFS reads ahead) and cold random reads of
whole 128 KiB records (what the folklore says it wastes). The answer's table compares the
two levels per workload with their intervals; the notes say whether every measurement ran
with the host's prefetch as asked (it is read back after each).

zfs-fuse has no zfs_prefetch_disable: the study refuses there before anything is created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.factors.prefetch import PrefetchReading
from poolbench.study.builtin.base import (
    Builtin,
    StudyFile,
    need,
    refuse_on_zfs_fuse,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.store.facts import StudyFacts

WORKLOADS = ["seq-read", "rand-read-128k"]
PARAM = "zfs_prefetch_disable"  # the factor's (factors/prefetch.py), named to the user


def build(ctx: Context) -> StudyFile:
    refuse_on_zfs_fuse(
        ctx,
        "prefetch",
        "OpenZFS's predictive prefetch turned off and on (zfs_prefetch_disable)",
        "zfs_prefetch_disable",
        "its read-ahead lives inside the zfs-fuse daemon",
        "prefetch-tunable",
    )
    need(ctx, 2, "prefetch study")
    return study_file(
        ctx,
        "prefetch",
        "OpenZFS's predictive prefetch on and off: a cold streaming read in 1 MiB requests "
        "and cold random reads of whole 128 KiB records",
        {
            "backend": ["zfs"],
            "layout": ctx.opt_list("layouts", ["mirror:2"]),
            "prefetch": ["on", "off"],
        },
        {"names": list(WORKLOADS), "size": working_set(ctx, 0.25)},
    )


def pre_notes(ctx: Context) -> list[str]:
    """The host-wide change, said before anything is done: prefetch is every pool's."""
    return [
        f"prefetch is the host's, not the pool's: each trial sets {PARAM} (1 for prefetch "
        "off, 0 for on) for every pool on this host while it runs, and puts back the value "
        "it found, after the trial, on error, on Ctrl-C, or by `poolbench cleanup` after a "
        "crash"
    ]


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """Per configuration, whether each measurement ran with prefetch as asked."""
    lines = []
    for c in facts.configs:
        got = [PrefetchReading.decode(r["guards"]) for r in c.rows]
        read = [g for g in got if g is not None]
        if not read:
            lines.append(f"  {c.key}: the host's prefetch was not read back")
            continue
        wrong = [g for g in read if not g.as_asked]
        level = read[0].level
        if wrong:
            seen = sorted({str(g.disable) for g in wrong})
            lines.append(
                f"  {c.key}: WARNING: {len(wrong)} of {len(read)} measurements ran with "
                f"zfs_prefetch_disable={'/'.join(seen)}, not as prefetch {level} asks: "
                "something else on this host changed it; their figures are not prefetch "
                f"{level}'s"
            )
        else:
            lines.append(
                f"  {c.key}: zfs_prefetch_disable={read[0].disable} during all {len(read)} "
                "measurements, as asked"
            )
    if not lines:
        return []
    return ["the host's prefetch (zfs_prefetch_disable, read back after each measurement):",
            *lines]  # fmt: skip


BUILTIN = Builtin(
    "prefetch",
    "What does ZFS's read-ahead do for a streaming read, and cost a random one?",
    (2, "1G"),
    build,
    {"layouts": "layouts, e.g. mirror:2 or raidz1:4"},
    notes=notes,
    pre_notes=pre_notes,
)
