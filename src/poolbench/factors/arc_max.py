"""The `arc_max` trial factor: the ARC's ceiling lowered for one trial, and put back.

A study whose question needs a working set larger than the ARC (the l2arc study) cannot ask
for gigabytes of disk: it lowers the ARC instead. OpenZFS takes a new `zfs_arc_max` at once
(arc_tuning_update in module/zfs/arc.c) only when it is at least 64 MiB and above the ARC's
floor (arcstats `c_min`), so the floor is lowered first when it stands in the way. Each
write is journaled before it is made (safety/journal.py `param_set`, with the ceiling or
floor then in effect), so the trial's teardown puts the values back on success, on error and
on Ctrl-C, and `poolbench cleanup` after a crash. The change is checked: arcstats `c_max`
must read the value asked for, or the trial stops with what OpenZFS did instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from poolbench import capabilities
from poolbench.errors import PoolbenchError, Unsupported, UsageError
from poolbench.factors.base import AfterPool, Factor, Preflight
from poolbench.factors.specs import Spec
from poolbench.guards.cache import ARCSTATS, read_arcstats
from poolbench.records import sections
from poolbench.safety.journal import Journal
from poolbench.system import modparams
from poolbench.units import parse_size

MiB = 1 << 20
KEY = "arc_max"
MIN_ARC_MAX = 64 * MiB  # OpenZFS ignores a smaller zfs_arc_max
MIN_ARC_MIN = 32 * MiB  # and a smaller zfs_arc_min (2 × the largest block, 16 MiB)


def _at_least_the_floor(v: object) -> bool:
    try:
        return parse_size(str(v)) >= MIN_ARC_MAX
    except UsageError:
        return False


def wanted(levels: Mapping[str, str]) -> int | None:
    """The ceiling the trial asks for, in bytes, or None (no `arc_max` factor)."""
    return parse_size(levels[KEY]) if KEY in levels else None


def check(levels: Mapping[str, str], dialect: str = "openzfs") -> None:
    """Refuse, before anything is built, a ceiling OpenZFS would ignore, or one asked of a
    ZFS that has no ARC parameters (zfs-fuse keeps its ARC inside its daemon)."""
    value = wanted(levels)
    if value is None:
        return
    if dialect == "zfs-fuse":
        raise capabilities.unsupported(
            "arc-limit",
            "The study lowers the ARC's ceiling (arc_max), but this machine's ZFS is zfs-fuse "
            "(pool version 23), which has no zfs_arc_max and no arcstats in /proc; nothing "
            "was created.",
            "Run the study on OpenZFS (the guest tier: vm/run-openzfs-tier.sh).",
        )
    if value < MIN_ARC_MAX:
        raise Unsupported(
            f"arc_max {value // MiB} MiB is below the 64 MiB OpenZFS accepts for zfs_arc_max "
            "(a smaller value is ignored, and the ARC would stay as large as it is).",
            "Use arc_max = 64M or more, and a working set a few times larger.",
        )


def apply(
    journal: Journal,
    levels: Mapping[str, str],
    root: Path = modparams.PARAMETERS,
    arcstats: Path = ARCSTATS,
) -> sections.ArcLimitRecord:
    """Lower the ARC's ceiling to the trial's `arc_max` (journaled first); returns what was
    done, for the trial's findings ({} without the factor, or in a dry run)."""
    want = wanted(levels)
    if want is None or journal.runner.dry_run:
        return sections.ArcLimitRecord()
    check(levels)
    stats = read_arcstats(arcstats) or {}
    c_max, c_min = stats.get("c_max"), stats.get("c_min")
    if modparams.read(modparams.ARC_MAX, root) is None or c_max is None or c_min is None:
        raise capabilities.unsupported(
            "arc-limit",
            f"The trial lowers the ARC to {want // MiB} MiB, but {root}/{modparams.ARC_MAX} "
            f"or {arcstats} cannot be read: this ZFS is not OpenZFS (zfs-fuse keeps its ARC "
            "in its daemon), or its module is not loaded.",
            "Run the study on OpenZFS (the guest tier: vm/run-openzfs-tier.sh).",
        )
    out = sections.ArcLimitRecord(asked=want, c_max_before=c_max, c_min_before=c_min)
    if c_min >= want:  # the floor must be below the new ceiling
        floor = max(MIN_ARC_MIN, want // 2)
        _set(journal, modparams.ARC_MIN, floor, c_min, root)
        out["zfs_arc_min_set"] = floor
    _set(journal, modparams.ARC_MAX, want, c_max, root)
    now = (read_arcstats(arcstats) or {}).get("c_max")
    if now != want:
        raise PoolbenchError(
            f"zfs_arc_max was set to {want} but arcstats c_max reads {now}: OpenZFS did not "
            "take the new ceiling, so the working set would not be larger than the ARC.",
            "Check the kernel log (OpenZFS says why it ignores a tunable), and c_min in "
            f"{arcstats}.",
        )
    out["c_max"] = now
    out["restored"] = "after the trial (its journal), also on error, Ctrl-C and cleanup"
    return out


def _set(journal: Journal, name: str, value: int, effective: int, root: Path) -> None:
    original = modparams.read(name, root) or 0
    journal.param_set(name, original, value, effective, str(root))
    try:
        modparams.write(name, value, root)
    except OSError as exc:
        raise PoolbenchError(
            f"Setting {name} to {value} failed: {exc.strerror or exc}.",
            "Run as root on OpenZFS; OpenZFS refuses a zfs_arc_max below 64 MiB, at or "
            "below the ARC's floor, or above the memory.",
        ) from exc


class ArcMax(Factor):
    """The ARC's ceiling lowered after the pool is built, before its workloads."""

    specs = (
        Spec(
            KEY,
            "OpenZFS: the ARC's ceiling (zfs_arc_max) during each trial, restored "
            "after: a size of at least 64M",
            _at_least_the_floor,
        ),
    )
    order = 30  # the ARC's ceiling before the pool's data is laid down
    section = sections.ARC_LIMIT

    def check(self, at: Preflight) -> None:
        check(at.levels, at.dialect)

    def after_pool(self, at: AfterPool) -> sections.ArcLimitRecord | None:
        return apply(at.journal, at.levels) or None


FACTOR = ArcMax()
