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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from poolbench import is_digits
from poolbench.errors import UsageError
from poolbench.planner.layout import ALLOC_CLASSES, Layout, VdevSpec
from poolbench.planner.rules import RuleSet
from poolbench.units import format_size

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

SPA_MINBLOCKSHIFT = 9
SPA_MINDEVSIZE = 64 * MiB  # include/sys/fs/zfs.h
VDEV_LABEL_SIZE = 256 * KiB  # sizeof (vdev_label_t): 8K + 8K pad, 112K nvlist, 128K uberblocks
VDEV_BOOT_SIZE = 7 << 19  # 3.5 MiB (include/sys/vdev_impl.h)
VDEV_LABEL_START_SIZE = 2 * VDEV_LABEL_SIZE + VDEV_BOOT_SIZE  # 4 MiB
VDEV_LABEL_END_SIZE = 2 * VDEV_LABEL_SIZE  # 512 KiB
ASHIFT_MIN, ASHIFT_MAX = 9, 16  # include/sys/fs/zfs.h (v23/zfs-fuse's pool property: 9-13)

# lib/libzfs(/os/linux/libzfs_pool_os.c) zpool_label_disk, include/sys/vdev_disk.h,
# include/sys/efi_partition.h
NEW_START_BLOCK = 2048
PARTITION_END_ALIGNMENT = 2048
EFI_MIN_RESV_SIZE = 16 * 1024  # sectors (8 MiB at 512 B)
EFI_NUMPAR = 128  # Linux
EFI_GPE_SIZE = 128  # sizeof (efi_gpe_t)
EFI_MIN_ARRAY_SIZE = 16 * 1024

# module/zfs/vdev.c (0.8.0-rc4 on)
ZFS_VDEV_DEFAULT_MS_COUNT = 200
ZFS_VDEV_MIN_MS_COUNT = 16
ZFS_VDEV_MS_COUNT_LIMIT = 1 << 17
ZFS_VDEV_DEFAULT_MS_SHIFT = 29
ZFS_VDEV_MAX_MS_SHIFT = 34
METASLABS_PER_VDEV = 200  # before 0.8: vdev_metaslab_set_size's "200" / metaslabs_per_vdev
ZFS_EMBEDDED_SLOG_MIN_MS = 64  # module/zfs/vdev.c (2.1.0 on)

# include/sys/vdev_draid.h: VDEV_DRAID_ROWSHIFT = SPA_MAXBLOCKSHIFT (24)
VDEV_DRAID_ROWHEIGHT = 1 << 24
VDEV_DRAID_REFLOW_RESERVE = 2 * VDEV_DRAID_ROWHEIGHT

# module/zfs/spa_misc.c
SPA_SLOP_SHIFT = 5
SPA_MIN_SLOP = 128 * MiB
SPA_MAX_SLOP = 128 * GiB

BLOCK_SIZES = tuple(1 << s for s in range(12, 21))  # 4K … 1M


def highbit64(x: int) -> int:
    """highbit64(): 1-based index of the highest set bit, 0 for 0."""
    return x.bit_length()


def p2align(x: int, align: int) -> int:
    return x - (x % align)


def p2roundup(x: int, align: int) -> int:
    return -(-x // align) * align


def whole_disk_partition_bytes(disk_bytes: int, sector_bytes: int = 512) -> int:
    """Size of partition 1 that `zpool create` makes on a whole disk on Linux.

    Transcribes efi_alloc_and_init() (lib/libefi/rdwr_efi.c) and zpool_label_disk()
    (lib/libzfs/libzfs_pool.c ≤0.8, lib/libzfs/os/linux/libzfs_pool_os.c ≥2.0), in force
    unchanged from ZoL 0.6.x to OpenZFS 2.4 (master after 2.4 scales the 1 MiB start and the
    8 MiB reserve for 4Kn disks; not modelled):

    - nblocks = NBLOCKS(128 entries, sector) = 1 + ceil(128·128 / sector), at least
      16K/sector + 1 (33 at 512 B): the backup GPT at the end;
    - last usable LBA = (capacity − 1) − nblocks;
    - slice = last usable LBA + 1 − EFI_MIN_RESV_SIZE (16384) − start (2048), rounded down
      to PARTITION_END_ALIGNMENT (2048 sectors);
    - partition 1 = [2048, 2048 + slice), partition 9 = 16384 sectors after it.
    """
    capacity = disk_bytes // sector_bytes
    nblocks = 1 + (EFI_NUMPAR * EFI_GPE_SIZE + sector_bytes - 1) // sector_bytes
    if nblocks * sector_bytes < EFI_MIN_ARRAY_SIZE + sector_bytes:
        nblocks = EFI_MIN_ARRAY_SIZE // sector_bytes + 1
    last_u_lba = (capacity - 1) - nblocks
    slice_size = last_u_lba + 1 - EFI_MIN_RESV_SIZE - NEW_START_BLOCK
    slice_size = p2align(slice_size, PARTITION_END_ALIGNMENT) if slice_size > 0 else 0
    part = slice_size * sector_bytes
    if part < SPA_MINDEVSIZE:
        raise UsageError(
            f"A whole disk of {disk_bytes} bytes leaves a partition of {part} bytes, under "
            "the 64 MiB minimum device size.",
            "Use larger disks.",
        )
    return part


def leaf_asize(osize: int) -> int:
    """vdev_open() for a leaf: P2ALIGN(osize, sizeof (vdev_label_t)), refuse < SPA_MINDEVSIZE,
    then asize = osize − (VDEV_LABEL_START_SIZE + VDEV_LABEL_END_SIZE). Same in v23 and 2.x."""
    given, osize = osize, p2align(osize, VDEV_LABEL_SIZE)
    if osize < SPA_MINDEVSIZE:
        raise UsageError(
            f"A device of {given:,} bytes is under ZFS's 64 MiB minimum device size "
            "(SPA_MINDEVSIZE).",
            "Use devices of at least 64 MiB.",
        )
    return osize - (VDEV_LABEL_START_SIZE + VDEV_LABEL_END_SIZE)


def device_osize(device_bytes: int, whole_disk: bool, rules: RuleSet) -> int:
    """What vdev_file_open()/vdev_disk_open() report: the file's size (va_size), or the
    partition's (bdev_capacity) when `zpool create` partitioned a whole disk on Linux."""
    if whole_disk and rules.linux_whole_disk_partition:
        return whole_disk_partition_bytes(device_bytes)
    return device_bytes


def top_asize(spec: VdevSpec, leaves: list[int], rules: RuleSet) -> int:
    """The top-level vdev's allocatable size from its leaves' asizes.

    - disk: the leaf's own;
    - mirror: vdev_mirror_open(): MIN over children (``MIN(asize - 1, c - 1) + 1``);
    - raidz: vdev_raidz_open(): MIN over children × children;
    - dRAID: vdev_draid_open() (2.1+): the smallest child less VDEV_DRAID_REFLOW_RESERVE
      (32 MiB) rounded down to a 16 MiB row, × (children − spares), rounded down to whole
      groups of (data + parity) rows.
    """
    smallest = min(leaves)
    if spec.kind == "disk":
        return smallest
    if spec.kind == "mirror":
        return smallest
    if spec.kind == "raidz":
        return smallest * spec.width
    if not rules.draid:
        raise UsageError(
            f"dRAID ({spec.type_name}) does not exist in {rules.label}.",
            "Use --zfs-version 2.1 or later, or a raidz layout.",
        )
    if smallest < VDEV_DRAID_REFLOW_RESERVE:
        raise UsageError(f"dRAID children of {smallest} bytes are too small.", "Use larger disks.")
    child = (smallest - VDEV_DRAID_REFLOW_RESERVE) // VDEV_DRAID_ROWHEIGHT * VDEV_DRAID_ROWHEIGHT
    ndisks = spec.width - spec.draid_spares
    groupsz = (spec.draid_data + spec.parity) * VDEV_DRAID_ROWHEIGHT
    return (child * ndisks) // groupsz * groupsz


def metaslab_shift(asize: int, rules: RuleSet) -> int:
    """vdev_metaslab_set_size().

    Before 0.8 (and v23): ``highbit(asize / 200)``, at least SPA_MAXBLOCKSHIFT (17 up to
    0.6.4, 24 from 0.6.5). From 0.8: aim for 200 metaslabs of 512 MiB…16 GiB: if fewer than
    16 metaslabs of 2^29 fit, shift = highbit(asize / 16); if more than 200,
    highbit(asize / 200); else 29; then at least 24, at most 34 unless that would give more
    than 2^17 metaslabs (then highbit(asize / 2^17)).
    """
    if rules.metaslab_rule == "per_vdev_200":
        return max(highbit64(asize // METASLABS_PER_VDEV), rules.max_block_shift)
    ms_count = asize >> ZFS_VDEV_DEFAULT_MS_SHIFT
    if ms_count < ZFS_VDEV_MIN_MS_COUNT:
        shift = highbit64(asize // ZFS_VDEV_MIN_MS_COUNT)
    elif ms_count > ZFS_VDEV_DEFAULT_MS_COUNT:
        shift = highbit64(asize // ZFS_VDEV_DEFAULT_MS_COUNT)
    else:
        shift = ZFS_VDEV_DEFAULT_MS_SHIFT
    if shift < rules.max_block_shift:
        shift = rules.max_block_shift
    elif shift > ZFS_VDEV_MAX_MS_SHIFT:
        shift = ZFS_VDEV_MAX_MS_SHIFT
        if (asize >> shift) > ZFS_VDEV_MS_COUNT_LIMIT:
            shift = highbit64(asize // ZFS_VDEV_MS_COUNT_LIMIT)
    return shift


def psize_to_asize(spec: VdevSpec, psize: int, ashift: int) -> int:
    """Bytes one top-level vdev allocates for a block of `psize` bytes (parity and padding
    included; for a mirror, on each side).

    - disk/mirror: vdev_default_asize(): P2ROUNDUP(psize, 1 << ashift);
    - raidz: vdev_raidz_asize() (vdev_raidz_psize_to_asize() in 2.3+): sectors
      s = ceil(psize / 2^ashift); plus parity × ceil(s / (width − parity)); rounded up to a
      multiple of (parity + 1) sectors so no unusable gap is left;
    - dRAID: vdev_draid_psize_to_asize(): whole rows of (data + parity) sectors:
      ceil(psize / (data · 2^ashift)) × (data + parity) sectors.
    """
    if spec.kind in ("disk", "mirror"):
        return p2roundup(psize, 1 << ashift)
    if spec.kind == "raidz":
        cols, nparity = spec.width, spec.parity
        asize = ((psize - 1) >> ashift) + 1
        asize += nparity * ((asize + cols - nparity - 1) // (cols - nparity))
        return p2roundup(asize, nparity + 1) << ashift
    rows = (psize - 1) // (spec.draid_data << ashift) + 1
    return (rows * (spec.draid_data + spec.parity)) << ashift


def deflate_ratio(spec: VdevSpec, ashift: int) -> int:
    """vdev_set_deflate_ratio() (vdev_metaslab_init() in v23): space per 512 B of raw space,
    in 1/512ths: (1 << 17) / (asize(128 KiB) >> SPA_MINBLOCKSHIFT), integer division."""
    return (1 << 17) // (psize_to_asize(spec, 1 << 17, ashift) >> SPA_MINBLOCKSHIFT)


def deflated(space: int, ratio: int) -> int:
    """vdev_deflated_space() / vdev_space_update(): (space >> 9) × ratio."""
    return (space >> SPA_MINBLOCKSHIFT) * ratio


def metaslab_totals(spec: VdevSpec, asize: int, shift: int, ashift: int) -> tuple[int, int, int]:
    """vdev_metaslab_init() + metaslab_init(): (count, Σ sizes, size of metaslab 0).

    There are asize >> shift metaslabs of 2^shift bytes. A dRAID metaslab is trimmed to
    whole groups (vdev_draid_metaslab_init(): start rounded up to (data + parity) << ashift,
    size rounded down to a multiple of it). The trim depends only on start mod group size,
    which repeats with a period of at most 255 metaslabs, so the sum is taken per period.
    """
    count = asize >> shift
    size = 1 << shift
    if spec.kind != "draid" or count == 0:
        return count, count * size, size if count else 0
    sz = (spec.draid_data + spec.parity) << ashift

    def trimmed(m: int) -> int:
        start = m << shift
        return (size - (p2roundup(start, sz) - start)) // sz * sz

    period = sz // math.gcd(sz, size)
    one_period = [trimmed(m) for m in range(min(period, count))]
    full, rest = divmod(count, len(one_period))
    total = full * sum(one_period) + sum(one_period[:rest])
    return count, total, one_period[0]


def slop_space(dspace: int, embedded_log_dspace: int, rules: RuleSet) -> int:
    """Space held back from AVAIL.

    - v23, ZoL < 0.6.5: dsl_pool_adjustedsize(): MAX(dspace >> 6, SPA_MINDEVSIZE >> 1);
    - 0.6.5.x: spa_get_slop_space(): MAX(dspace >> 5, 32 MiB);
    - 0.7.0-rc4 … 2.0.5: MAX(dspace >> 5, MIN(dspace >> 1, 128 MiB));
    - 2.0.6 on: MIN(dspace >> 5, 128 GiB), then (2.1 on) less MIN(embedded log space,
      half of it), then MAX(that, MIN(dspace >> 1, 128 MiB)).
    """
    if rules.slop_rule == "v23":
        return max(dspace >> 6, SPA_MINDEVSIZE >> 1)
    if rules.slop_rule == "shift5_min32m":
        return max(dspace >> SPA_SLOP_SHIFT, SPA_MINDEVSIZE >> 1)
    if rules.slop_rule == "shift5_min128m":
        return max(dspace >> SPA_SLOP_SHIFT, min(dspace >> 1, SPA_MIN_SLOP))
    slop = min(dspace >> SPA_SLOP_SHIFT, SPA_MAX_SLOP)
    if rules.embedded_slog:
        slop -= min(embedded_log_dspace, slop >> 1)
    return max(slop, min(dspace >> 1, SPA_MIN_SLOP))


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
