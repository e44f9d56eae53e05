"""The capacity model: what `zpool list` and `zfs list` will say for a new pool (pure).

Each function transcribes one piece of the OpenZFS (or, for rule set v23, zfs-fuse 0.7.0)
source; the comment above it names the function it follows. No code is copied: these are
re-statements of the arithmetic, checked against real zfs-fuse pools to the byte
(tests/test_planner_zfsfuse.py) and against hand-computed values (tests/test_planner_capacity.py).

The chain, from a device to `zfs list`:

1. the device's size as the vdev sees it: a file or partition as is; a whole disk on Linux
   after `zpool create` has written its GPT (partition 1 from 1 MiB, partition 9 of 8 MiB);
2. ``vdev_open``: round down to a 256 KiB label multiple, subtract 4 MiB of front labels and
   boot area and 512 KiB of back labels → the leaf's allocatable size (asize);
3. the top-level vdev's asize: a disk's own, a mirror's smallest, a raidz's smallest × width,
   a dRAID's rows and groups;
4. ``vdev_metaslab_set_size``: metaslab shift; only whole metaslabs count
   (asize >> shift of them) → `zpool list` SIZE is their sum;
5. ``vdev_set_deflate_ratio``: a raidz/dRAID vdev's space is charged in 128 KiB-block units,
   so `zfs list` sees space × 128K / asize(128K);
6. ``spa_get_slop_space`` / ``dsl_pool_adjustedsize``: slop is held back → AVAIL + USED of
   the root dataset.

Vdev classes (read in OpenZFS 2.3's spa.c, spa_misc.c and vdev.c; pool v23 checked on real
zfs-fuse pools): a log, special or dedup vdev gets metaslabs like a data vdev, but

- ``spa_prop_get_config``: SIZE = normal + special + dedup + embedded-log class space, so a
  special or dedup vdev counts in SIZE and a dedicated log does not;
- ``spa_update_dspace``: dspace = the normal class's deflated space (+ the dedup and block
  cloning savings, 0 in a new pool), so neither a special nor a dedup vdev adds to `zfs list`
  AVAIL, and the slop is taken from the data vdevs' space alone;
- ``vdev_metaslab_init``: only a normal-class vdev gives a metaslab to the embedded log;
- a spare or cache device is no part of any class: no SIZE, no AVAIL.

The arithmetic of steps 1-6 lives in planner/space.py; every name of it is re-exported here,
where callers have always imported it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from poolbench import is_digits
from poolbench.errors import UsageError
from poolbench.planner.layout import ALLOC_CLASSES, Layout, VdevSpec
from poolbench.planner.rules import RuleSet
from poolbench.planner.space import (
    ASHIFT_MAX,
    ASHIFT_MIN,
    BLOCK_SIZES,
    ZFS_EMBEDDED_SLOG_MIN_MS,
    deflate_ratio,
    deflated,
    device_osize,
    leaf_asize,
    metaslab_shift,
    metaslab_totals,
    psize_to_asize,
    slop_space,
    top_asize,
)
from poolbench.units import format_size


@dataclass(frozen=True)
class BlockCost:
    """What one block of `psize` bytes costs on one top-level vdev."""

    psize: int
    asize: int  # bytes allocated on the vdev (one side of a mirror)
    raw_bytes: int  # bytes written across all member disks
    charged_bytes: int  # what `zfs list` USED grows by: deflated asize (bp_get_dsize)
    efficiency: float  # psize / raw_bytes


@dataclass(frozen=True)
class VdevPlan:
    spec: VdevSpec
    ashift: int
    leaf_asizes: tuple[int, ...]
    asize: int  # allocatable size of the top-level vdev
    ms_shift: int
    ms_count: int
    ms_size: int  # 2^ms_shift (dRAID metaslabs are trimmed to whole groups)
    space: int  # Σ metaslab sizes: this vdev's part of `zpool list` SIZE
    embedded_log_space: int  # the metaslab moved to the embedded log class (2.1+)
    deflate_ratio: int  # in 1/512ths
    dspace: int  # deflated normal-class space: this vdev's part of `zfs list` space
    embedded_log_dspace: int
    blocks: tuple[BlockCost, ...] = field(default=())

    @property
    def unused_bytes(self) -> int:
        """Raw device bytes this vdev leaves unused (smaller members, labels, partial ms)."""
        return sum(self.spec.devices) - self.raw_capacity

    @property
    def raw_capacity(self) -> int:
        """Raw member bytes behind `space` (× width for a mirror)."""
        return self.space * (self.spec.width if self.spec.kind == "mirror" else 1)


@dataclass(frozen=True)
class ClassPlan:
    """A class vdev: log/special/dedup with metaslabs of its own, or a spare/cache device."""

    cls: str
    spec: VdevSpec
    plan: VdevPlan | None  # None for a spare or cache device: not part of any class's space

    @property
    def in_size(self) -> bool:
        """Whether `zpool list` SIZE counts it (special and dedup; not log, spare, cache)."""
        return self.cls in ("special", "dedup")

    def as_dict(self) -> dict[str, object]:
        p = self.plan
        return {
            "class": self.cls,
            "type": self.spec.type_name,
            "spec": self.spec.spec(),
            "devices": list(self.spec.devices),
            "asize_bytes": p.asize if p else None,
            "metaslab_shift": p.ms_shift if p else None,
            "metaslab_count": p.ms_count if p else None,
            "space_bytes": p.space if p else 0,
            "in_size": self.in_size,
            "failures_tolerated": self.spec.failures_tolerated,
        }


@dataclass(frozen=True)
class PoolPlan:
    layout: Layout
    rules: RuleSet
    ashift: int
    whole_disk: bool
    vdevs: tuple[VdevPlan, ...]
    size_bytes: int  # zpool list SIZE
    dspace: int  # spa_get_dspace(): deflated normal-class space
    slop_bytes: int
    usable_bytes: int  # AVAIL + USED of the root dataset of a new, empty pool
    classes: tuple[ClassPlan, ...] = ()  # log, special, dedup, spare, cache (as written)

    @property
    def deflate_ratio(self) -> float:
        """dspace / normal-class space: 1.0 without raidz/dRAID."""
        normal = sum(v.space - v.embedded_log_space for v in self.vdevs)
        return self.dspace / normal if normal else 0.0

    @property
    def raw_bytes(self) -> int:
        """Raw bytes of the data vdevs (class devices are in `class_raw_bytes`)."""
        return sum(sum(v.spec.devices) for v in self.vdevs)

    @property
    def class_raw_bytes(self) -> int:
        return sum(sum(c.spec.devices) for c in self.classes)

    def class_space(self, *classes: str) -> int:
        """SIZE bytes of the log/special/dedup vdevs of these classes."""
        return sum(c.plan.space for c in self.classes if c.plan and c.cls in classes)

    @property
    def failures_tolerated(self) -> int:
        return self.layout.failures_tolerated

    def as_dict(self) -> dict[str, object]:
        return {
            "layout": self.layout.spec(),
            "zfs_rules": self.rules.name,
            "zfs_rules_label": self.rules.label,
            "ashift": self.ashift,
            "whole_disk": self.whole_disk,
            "raw_bytes": self.raw_bytes,
            "size_bytes": self.size_bytes,
            "dspace_bytes": self.dspace,
            "slop_bytes": self.slop_bytes,
            "usable_bytes": self.usable_bytes,
            "deflate_ratio": round(self.deflate_ratio, 9),
            "failures_tolerated": self.failures_tolerated,
            "classes": [c.as_dict() for c in self.classes],
            "vdevs": [
                {
                    "type": v.spec.type_name,
                    "spec": v.spec.spec(),
                    "devices": list(v.spec.devices),
                    "leaf_asize_bytes": list(v.leaf_asizes),
                    "asize_bytes": v.asize,
                    "metaslab_shift": v.ms_shift,
                    "metaslab_size_bytes": v.ms_size,
                    "metaslab_count": v.ms_count,
                    "space_bytes": v.space,
                    "embedded_log_bytes": v.embedded_log_space,
                    "deflate_ratio": v.deflate_ratio / 512,
                    "deflate_ratio_512ths": v.deflate_ratio,
                    "dspace_bytes": v.dspace,
                    "failures_tolerated": v.spec.failures_tolerated,
                    "allocation": [
                        {
                            "block_bytes": b.psize,
                            "asize_bytes": b.asize,
                            "raw_bytes": b.raw_bytes,
                            "charged_bytes": b.charged_bytes,
                            "efficiency": round(b.efficiency, 6),
                        }
                        for b in v.blocks
                    ],
                }
                for v in self.vdevs
            ],
        }


def block_costs(spec: VdevSpec, ashift: int, ratio: int) -> tuple[BlockCost, ...]:
    out = []
    copies = spec.width if spec.kind == "mirror" else 1
    for psize in BLOCK_SIZES:
        asize = psize_to_asize(spec, psize, ashift)
        raw = asize * copies
        out.append(BlockCost(psize, asize, raw, deflated(asize, ratio), psize / raw))
    return tuple(out)


def check_ashift(ashift: int, rules: RuleSet) -> None:
    hi = 13 if rules.name == "v23" else ASHIFT_MAX
    if not ASHIFT_MIN <= ashift <= hi:
        raise UsageError(
            f"ashift {ashift} is out of range for {rules.label}.",
            f"Use an ashift from {ASHIFT_MIN} to {hi} (12 for 4K-sector disks).",
        )


@lru_cache(maxsize=4096)
def _leaf(device_bytes: int, whole_disk: bool, rules: RuleSet) -> int:
    """One device's leaf asize (a search plans the same few disk sizes thousands of times);
    a device too small is refused naming its size as written (a bare number is bytes)."""
    try:
        return leaf_asize(device_osize(device_bytes, whole_disk, rules))
    except UsageError as exc:
        written = format_size(device_bytes)
        bare = "; a number without a unit is bytes: 4T, 4TB" if is_digits(written) else ""
        raise UsageError(
            f"The device size '{written}' ({device_bytes:,} bytes{bare}) is too small for "
            f"ZFS: {exc.problem}",
            exc.fix,
        ) from exc


@lru_cache(maxsize=4096)
def plan_vdev(
    spec: VdevSpec,
    ashift: int,
    whole_disk: bool,
    rules: RuleSet,
    with_blocks: bool = True,
    normal_class: bool = True,
) -> VdevPlan:
    sizes = {d: _leaf(d, whole_disk, rules) for d in set(spec.devices)}
    leaves = [sizes[d] for d in spec.devices]
    asize = top_asize(spec, leaves, rules)
    shift = metaslab_shift(asize, rules)
    count, space, first = metaslab_totals(spec, asize, shift, ashift)
    if count == 0:
        raise UsageError(f"{spec.spec()} is too small to hold one metaslab.", "Use larger devices.")
    ratio = deflate_ratio(spec, ashift)
    elog = 0
    # vdev_metaslab_init() (2.1+): more than zfs_embedded_slog_min_ms metaslabs → the
    # emptiest one (metaslab 0 in a new pool: all are empty and the first wins) becomes the
    # embedded log metaslab.
    # Only a normal-class vdev gives one ("vd->vdev_mg->mg_class == spa_normal_class(spa)").
    if normal_class and rules.embedded_slog and count > ZFS_EMBEDDED_SLOG_MIN_MS:
        elog = first
    return VdevPlan(
        spec=spec,
        ashift=ashift,
        leaf_asizes=tuple(leaves),
        asize=asize,
        ms_shift=shift,
        ms_count=count,
        ms_size=1 << shift,
        space=space,
        embedded_log_space=elog,
        deflate_ratio=ratio,
        dspace=deflated(space - elog, ratio),
        embedded_log_dspace=deflated(elog, ratio),
        blocks=block_costs(spec, ashift, ratio) if with_blocks else (),
    )


def plan_pool(
    layout: Layout,
    ashift: int,
    rules: RuleSet,
    whole_disk: bool = False,
    *,
    with_blocks: bool = True,
) -> PoolPlan:
    """The whole pool: SIZE, dspace, slop and usable space, to the byte."""
    check_ashift(ashift, rules)
    vdevs = tuple(plan_vdev(v, ashift, whole_disk, rules, with_blocks) for v in layout.vdevs)
    classes = plan_classes(layout, ashift, whole_disk, rules)
    # spa_prop_get_config(): SIZE = normal class space (+ embedded log class, 2.1+) + the
    # special and dedup classes (0.8+); a dedicated log's space is not in it.
    size = sum(v.space for v in vdevs) + sum(c.plan.space for c in classes if c.in_size and c.plan)
    # spa_update_dspace(): dspace = normal class deflated space (special/dedup not in it).
    dspace = sum(v.dspace for v in vdevs)
    elog_dspace = sum(v.embedded_log_dspace for v in vdevs)
    slop = slop_space(dspace, elog_dspace, rules)
    # dsl_pool_adjustedsize() → dsl_dir_space_available() for the root dataset:
    # AVAIL = adjustedsize − USED, so AVAIL + USED = dspace − slop.
    usable = dspace - slop if dspace >= slop else 0
    return PoolPlan(layout, rules, ashift, whole_disk, vdevs, size, dspace, slop, usable, classes)


def plan_classes(
    layout: Layout, ashift: int, whole_disk: bool, rules: RuleSet
) -> tuple[ClassPlan, ...]:
    """Each class vdev: log/special/dedup planned like a data vdev (its own metaslabs, no
    embedded log metaslab); a spare or cache device only checked to be a usable device."""
    out = []
    for c in layout.classes:
        if c.cls in ("special", "dedup") and not rules.alloc_classes:
            raise UsageError(
                f"{rules.label} has no {c.cls} vdevs: allocation classes came with ZFS on "
                "Linux 0.8.0 (zfs-fuse's pool v23 has log, cache and spare devices only).",
                f"Drop the '{c.cls}' part, or plan for --zfs-version 0.8 or later.",
            )
        if c.cls in ALLOC_CLASSES:
            vp = plan_vdev(c.vdev, ashift, whole_disk, rules, False, normal_class=False)
            out.append(ClassPlan(c.cls, c.vdev, vp))
        else:
            for d in c.vdev.devices:  # vdev_open() refuses a device under 64 MiB
                leaf_asize(device_osize(d, whole_disk, rules))
            out.append(ClassPlan(c.cls, c.vdev, None))
    return tuple(out)


def nicenum(num: int) -> str:
    """zfs_nicenum(): the 1024-based, at most 5-character form `zpool list`/`zfs list` print."""
    n = num
    index = 0
    while n >= 1024 and index < 6:
        n //= 1024
        index += 1
    unit = " KMGTPE"[index]
    if index == 0:
        return str(n)
    if num & ((1 << (10 * index)) - 1) == 0:
        return f"{n}{unit}"
    text = ""
    for prec in (2, 1, 0):
        text = f"{num / (1 << (10 * index)):.{prec}f}{unit}"
        if len(text) <= 5:
            break
    return text


def predicted_usable(
    layout: str,
    ashift: int,
    n_disks: int,
    disk_bytes: int,
    zfs_version: str,
    whole_disk: bool = False,
) -> int:
    """Usable bytes (AVAIL + USED of the empty pool) of a study's pool: `layout` in the one
    grammar on `n_disks` disks of `disk_bytes`, for the ZFS the pool reported; `whole_disk`
    when the members were whole block devices (OpenZFS partitions them); raises UsageError
    for a layout or version the planner does not model."""
    from poolbench.planner.layout import parse_layout
    from poolbench.planner.rules import rules_for_reported

    disks = (disk_bytes,) * n_disks
    rules = rules_for_reported(zfs_version)
    return plan_pool(parse_layout(layout, disks), ashift, rules, whole_disk=whole_disk).usable_bytes
