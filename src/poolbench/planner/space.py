"""OpenZFS's space arithmetic, one transcribed function after another (pure).

The constants and the steps of the chain planner/capacity.py describes, from a device's size
to a vdev's metaslabs, its deflate ratio and the pool's slop; each comment names the OpenZFS
(or zfs-fuse 0.7.0) function it follows. capacity.py combines them into a pool's plan and
re-exports every name here.
"""

from __future__ import annotations

import math

from poolbench.errors import UsageError
from poolbench.planner.layout import VdevSpec
from poolbench.planner.rules import RuleSet

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
