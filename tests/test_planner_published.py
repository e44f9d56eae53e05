"""The planner's capacity and block-allocation tables against figures other people published.

Each test names its source. The numbers are copied from the source as published; the planner
computes everything else from its own rules (planner/capacity.py), so a wrong rule makes the
comparison fail.
"""

from __future__ import annotations

import pytest

from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import VdevSpec, parse_layout
from poolbench.planner.rules import parse_zfs_version
from poolbench.planner.space import psize_to_asize

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
TB = 10**12


def _raidz(width: int, parity: int) -> VdevSpec:
    return VdevSpec(kind="raidz", devices=(TB,) * width, parity=parity)


# --- openzfs/zfs#15467 "dRAID usable capacity underestimate" (OpenZFS 2.2.0, TrueNAS SCALE
# 23.10): `zpool create test draid2:6d:24c:0s` on 24 × 1 TB, ms_count 1396, ms_size 16 GiB,
# `zfs list -p test`: USED 2095104, AVAIL 15835676542976 (USED + AVAIL = 15835678638080).
# https://github.com/openzfs/zfs/issues/15467
ISSUE_15467_USED_PLUS_AVAIL = 2095104 + 15835676542976


def test_draid_pool_of_openzfs_issue_15467() -> None:
    assert ISSUE_15467_USED_PLUS_AVAIL == 15_835_678_638_080
    rules = parse_zfs_version("2.2.0")
    plan = plan_pool(parse_layout(f"draid2:6d:24c:0s:24x{TB}"), 12, rules)
    vdev = plan.vdevs[0]
    # The reporter's zdb figures: 1396 metaslabs of 16 GiB.
    assert (vdev.ms_count, vdev.ms_size) == (1396, 16 * GiB)
    # 128 KiB costs 6 rows of 6 data + 2 parity sectors (48 × 4 KiB = 192 KiB), so the
    # deflate ratio is 131072 / (196608 / 512) = 341/512 (the "0.6660" of the issue).
    assert vdev.deflate_ratio == 341
    assert plan.usable_bytes == ISSUE_15467_USED_PLUS_AVAIL


def test_issue_15467_pins_the_disk_size() -> None:
    """Which "1 TB" was it? 10^12-byte devices give the published 1396 metaslabs and bytes;
    the common 1 TB drive of 1,000,204,886,016 bytes gives 1397 metaslabs and another total,
    so the devices were 10^12 bytes (to within the ~0.7 GB band that gives 1396 metaslabs)."""
    rules = parse_zfs_version("2.2.0")

    def usable(disk: int) -> tuple[int, int]:
        p = plan_pool(parse_layout(f"draid2:6d:24c:0s:24x{disk}"), 12, rules)
        return p.usable_bytes, p.vdevs[0].ms_count

    assert usable(TB) == (ISSUE_15467_USED_PLUS_AVAIL, 1396)
    other, count = usable(1_000_204_886_016)
    assert count == 1397 and other != ISSUE_15467_USED_PLUS_AVAIL
    # Smaller by 1 GB: 1395 metaslabs, another total.
    assert usable(TB - 10**9)[0] != ISSUE_15467_USED_PLUS_AVAIL


# --- openzfs/zfs#13727 "Draid and available space" (zfs-2.1.5): `zpool create tank
# draid1:16d:36c:2s` on 36 whole ST18000NM000J disks of 18000207937536 bytes (lsblk -b), whose
# partition 1 is 18000197451776 bytes; `zfs get available -p tank` = 574804246033080.
# https://github.com/openzfs/zfs/issues/13727
def test_draid_pool_of_openzfs_issue_13727() -> None:
    rules = parse_zfs_version("2.1.5")
    plan = plan_pool(
        parse_layout("draid1:16d:36c:2s:36x18000207937536"), 12, rules, whole_disk=True
    )
    avail = 574_804_246_033_080
    # AVAIL = usable − USED of the new pool's root dataset; the issue does not print USED,
    # which for a new pool is its initial metadata: a few MiB at most (2 MiB in #15467).
    used = plan.usable_bytes - avail
    assert 0 < used < 8 * MiB, used


def test_whole_disk_partition_of_openzfs_issue_13727() -> None:
    from poolbench.planner.space import whole_disk_partition_bytes

    # lsblk -b in the issue: sdc 18000207937536, sdc1 18000197451776, sdc9 8388608.
    assert whole_disk_partition_bytes(18_000_207_937_536) == 18_000_197_451_776


# --- OpenZFS documentation, "RAIDZ" (Basic Concepts), section "Space efficiency":
# https://openzfs.github.io/openzfs-docs/Basic%20Concepts/RAIDZ.html
# (source: github.com/openzfs/openzfs-docs, docs/Basic Concepts/RAIDZ.rst)
def test_raidz_doc_raidz1_of_3_small_block_costs_as_much_as_a_mirror() -> None:
    # "for raidz1 of 3 disks with ashift=12 and recordsize=4K we will allocate on disk: one
    # 4K block of data, one 4K padding block and usable space ratio will be 50%".
    spec = _raidz(3, 1)
    assert psize_to_asize(spec, 4 * KiB, 12) == 8 * KiB
    assert 4 * KiB / psize_to_asize(spec, 4 * KiB, 12) == 0.5


def test_raidz_doc_raidz1_of_3_128k_block_is_two_thirds_efficient() -> None:
    # "for ashift=12 and recordsize=128K for raidz1 of 3 disks: ... 128K/2 = 64 stripes with
    # 8K of data and 4K of parity each, so usable space ratio in this case will be 66%".
    # (The page's "64 stripes" is 128K/2 = 64K per data column: 16 rows of two 4K data
    # sectors and one 4K parity sector, i.e. 3 columns × 64K = 192K allocated.)
    spec = _raidz(3, 1)
    asize = psize_to_asize(spec, 128 * KiB, 12)
    assert asize == 3 * 64 * KiB == 16 * (8 + 4) * KiB
    assert 128 * KiB / asize == pytest.approx(2 / 3)


def test_raidz_doc_raidz2_of_5_stripe_has_3_data_and_2_parity() -> None:
    # "for raidz2 of 5 disks there will be 3 blocks of data and 2 blocks of parity": a block
    # of 3 sectors fills one stripe of 5; 5 is not a multiple of P + 1 = 3, so the allocation
    # is rounded up to 6 sectors (one padding sector).
    spec = _raidz(5, 2)
    assert psize_to_asize(spec, 12 * KiB, 12) == 6 * 4 * KiB
    # Six data sectors: two stripes of 3 + 2 parity = 10 sectors, rounded up to 12.
    assert psize_to_asize(spec, 24 * KiB, 12) == 12 * 4 * KiB


# --- OpenZFS documentation, "dRAID" (Basic Concepts, dRAID Howto): "with the default D=8 and
# 4k disk sectors the minimum allocation size is 32k".
# https://openzfs.github.io/openzfs-docs/Basic%20Concepts/dRAID%20Howto.html
@pytest.mark.parametrize("parity", [1, 2, 3])
def test_draid_doc_minimum_allocation_is_one_row_of_32k(parity: int) -> None:
    spec = VdevSpec(kind="draid", devices=(TB,) * 20, parity=parity, draid_data=8)
    row = (8 + parity) * 4 * KiB  # 32 KiB of data plus the parity sectors
    assert psize_to_asize(spec, 4 * KiB, 12) == row
    assert psize_to_asize(spec, 32 * KiB, 12) == row
    assert psize_to_asize(spec, 32 * KiB + 1, 12) == 2 * row
