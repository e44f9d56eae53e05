"""Hand-computed checks of the capacity model, rule by rule and version by version.

The OpenZFS 2.x rule set cannot be checked against a real pool on this machine (no kernel
module), so each expected value below is derived step by step in the comments from the cited
source function. The v23 values were also observed on real zfs-fuse pools (and are checked
there again by tests/test_planner_zfsfuse.py).
"""

from __future__ import annotations

import pytest

from poolbench.errors import UsageError
from poolbench.planner.capacity import nicenum, plan_pool
from poolbench.planner.layout import VdevSpec, parse_layout
from poolbench.planner.rules import (
    OZ_08,
    OZ_21,
    OZ_206,
    V23,
    ZOL_060,
    ZOL_065,
    ZOL_07,
    parse_zfs_version,
)
from poolbench.planner.space import (
    VDEV_LABEL_END_SIZE,
    VDEV_LABEL_SIZE,
    VDEV_LABEL_START_SIZE,
    deflate_ratio,
    leaf_asize,
    metaslab_shift,
    psize_to_asize,
    slop_space,
    whole_disk_partition_bytes,
)

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


def test_label_constants() -> None:
    # include/sys/vdev_impl.h: vdev_label_t = 8K + 8K + 112K + 128K; boot area 7 << 19.
    assert 256 * KiB == VDEV_LABEL_SIZE
    assert 4 * MiB == VDEV_LABEL_START_SIZE
    assert 512 * KiB == VDEV_LABEL_END_SIZE


def test_leaf_asize_rounds_to_label_size_and_removes_labels() -> None:
    # vdev_open(): osize = P2ALIGN(3 GiB + 777, 256K) = 3 GiB; asize = 3 GiB - 4.5 MiB.
    assert leaf_asize(3 * GiB + 777) == 3 * GiB - 4 * MiB - 512 * KiB
    # Exactly 64 MiB is allowed (SPA_MINDEVSIZE), one label-unit less is not.
    assert leaf_asize(64 * MiB) == 64 * MiB - 4608 * KiB
    with pytest.raises(UsageError, match="64 MiB"):
        leaf_asize(64 * MiB - 1)


def test_whole_disk_partition_4t() -> None:
    # zpool_label_disk() on a 4 TiB disk with 512 B sectors:
    #   capacity = 4 TiB / 512 = 8,589,934,592 sectors
    #   nblocks = 1 + ceil(128 * 128 / 512) = 33 (= 16K/512 + 1, the minimum)
    #   last_u_lba = 8,589,934,591 - 33 = 8,589,934,558
    #   slice = 8,589,934,558 + 1 - 16,384 - 2,048 = 8,589,916,127
    #   P2ALIGN(slice, 2048) = 4,194,294 * 2048 = 8,589,914,112 sectors
    #   = 4,398,036,025,344 bytes: 10 MiB less than the disk (1 MiB in front, 8 MiB
    #     partition 9, and 1 MiB of backup GPT and alignment tail)
    assert whole_disk_partition_bytes(4 * TiB) == 4_398_036_025_344
    assert 4 * TiB - whole_disk_partition_bytes(4 * TiB) == 10 * MiB


def test_raidz2_6x4t_whole_disk_openzfs_23() -> None:
    # The example: poolbench plan --layout 'raidz2:6x4T' --ashift 12
    #   --zfs-version 2.3 --whole-disk
    p = plan_pool(parse_layout("raidz2:6x4T"), 12, parse_zfs_version("2.3"), whole_disk=True)
    v = p.vdevs[0]
    # leaf: partition 4,398,036,025,344 (above) is a 256K multiple; minus 4.5 MiB labels
    assert v.leaf_asizes[0] == 4_398_036_025_344 - 4_718_592 == 4_398_031_306_752
    # vdev_raidz_open(): min × 6
    assert v.asize == 6 * 4_398_031_306_752 == 26_388_187_840_512
    # vdev_metaslab_set_size(): asize >> 29 = 49,152 > 200 → highbit(asize / 200)
    #   asize / 200 = 131,940,939,202; 2^36 ≤ that < 2^37 → 37 > max 34 → 34;
    #   asize >> 34 = 1,535 ≤ 131,072 → shift stays 34 (16 GiB metaslabs)
    assert (v.ms_shift, v.ms_count) == (34, 1535)
    # SIZE = 1,535 × 16 GiB, including the embedded log metaslab (1,535 > 64)
    assert p.size_bytes == 1535 * 16 * GiB == 26_371_099_197_440
    assert v.embedded_log_space == 16 * GiB
    # vdev_raidz_asize(128K, ashift 12, 6 wide, p2): 32 sectors + 2 × ceil(32/4) = 48,
    #   roundup(48, 3) = 48 → 196,608 B; deflate = 131,072 / (196,608 >> 9) = 341 (floor)
    assert v.deflate_ratio == 341
    # dspace = (1,534 × 16 GiB >> 9) × 341 = 51,472,498,688 × 341
    assert p.dspace == 51_472_498_688 * 341 == 17_552_122_052_608
    # spa_get_slop_space(): MIN(dspace >> 5 = 548,503,814,144, 128 GiB) = 137,438,953,472;
    #   embedded log dspace = (16 GiB >> 9) × 341 = 11,442,061,312 (< half the slop), so
    #   slop = 137,438,953,472 - 11,442,061,312 = 125,996,892,160 (> 128 MiB floor)
    assert p.slop_bytes == 125_996_892_160
    assert p.usable_bytes == 17_552_122_052_608 - 125_996_892_160 == 17_426_125_160_448
    assert nicenum(p.usable_bytes) == "15.8T"


def test_raidz1_3x1g_small_pool_openzfs() -> None:
    p = plan_pool(parse_layout("raidz1:3x1G"), 12, OZ_21)
    v = p.vdevs[0]
    # asize = 3 × (1 GiB - 4.5 MiB) = 3,207,069,696
    assert v.asize == 3_207_069_696
    # asize >> 29 = 5 < 16 → highbit(asize / 16 = 200,441,856) = 28 (2^27 ≤ x < 2^28);
    #   28 ≥ 24, ≤ 34 → 256 MiB metaslabs, 3,207,069,696 >> 28 = 11 of them
    assert (v.ms_shift, v.ms_count) == (28, 11)
    assert p.size_bytes == 11 * 256 * MiB == 2_952_790_016
    # 11 ≤ 64 metaslabs: no embedded log metaslab
    assert v.embedded_log_space == 0
    # raidz1 3 wide ashift 12: 32 + ceil(32/2) = 48 sectors → 341
    assert v.deflate_ratio == 341
    assert p.dspace == (2_952_790_016 >> 9) * 341 == 1_966_604_288
    # slop: MIN(dspace >> 5 = 61,456,384, 128 GiB); MAX(that, MIN(dspace >> 1, 128 MiB))
    #   = 128 MiB (the floor wins on small pools)
    assert p.slop_bytes == 128 * MiB
    assert p.usable_bytes == 1_966_604_288 - 134_217_728 == 1_832_386_560


def test_mirror_100g_openzfs_21_embedded_log() -> None:
    p = plan_pool(parse_layout("mirror:2x100G"), 12, OZ_21)
    v = p.vdevs[0]
    # asize = 100 GiB - 4.5 MiB = 107,369,463,808; >> 29 = 199 ∈ [16, 200] → shift 29
    assert (v.asize, v.ms_shift, v.ms_count) == (107_369_463_808, 29, 199)
    # 199 > 64: metaslab 0 (512 MiB) becomes the embedded log (vdev_metaslab_init())
    assert v.embedded_log_space == 512 * MiB
    assert p.size_bytes == 199 * 512 * MiB
    # mirror deflate = 512 (no parity); dspace = 198 × 512 MiB = 106,300,440,576
    assert p.dspace == 198 * 512 * MiB == 106_300_440_576
    # slop = dspace >> 5 = 3,321,888,768; minus MIN(512 MiB, slop >> 1) = 2,785,017,856
    assert p.slop_bytes == 3_321_888_768 - 536_870_912 == 2_785_017_856
    assert p.usable_bytes == 103_515_422_720


def test_same_mirror_before_embedded_log() -> None:
    # 2.0.6: no embedded log; all 199 metaslabs normal; slop = dspace >> 5.
    p = plan_pool(parse_layout("mirror:2x100G"), 12, OZ_206)
    assert p.size_bytes == 199 * 512 * MiB
    assert p.dspace == 199 * 512 * MiB
    assert p.slop_bytes == (199 * 512 * MiB) >> 5


def test_draid2_4d_1s_8x1t() -> None:
    p = plan_pool(parse_layout("draid2:4d:1s:8x1T"), 12, OZ_21)
    v = p.vdevs[0]
    # leaf asize = 1 TiB - 4.5 MiB = 1,099,506,909,184
    # vdev_draid_open(): child = (1,099,506,909,184 - 32 MiB) // 16 MiB = 65,533 rows
    #   = 1,099,461,296,128; × (8 - 1 spare) = 7,696,229,072,896;
    #   // groupsz (6 × 16 MiB = 100,663,296) = 76,455 → × groupsz = 7,696,212,295,680
    assert v.asize == 7_696_212_295_680
    # >> 29 = 14,335 > 200 → highbit(asize / 200 = 38,481,061,478) = 36 → capped 34
    assert (v.ms_shift, v.ms_count) == (34, 447)
    # vdev_draid_metaslab_init(): group size = 6 << 12 = 24,576; metaslab m starts at
    #   m × 2^34, 2^34 mod 24,576 = 16,384, so starts fall at offsets 0, 16,384, 8,192 in a
    #   group (period 3); rounding up wastes 0, 8,192, 16,384 bytes and the size is then
    #   rounded down to whole groups: 2^34 // 24,576 = 699,050 groups → 17,179,852,800 in
    #   all three cases. 447 × that:
    assert p.size_bytes == 447 * 17_179_852_800 == 7_679_394_201_600
    # vdev_draid_psize_to_asize(128K): rows = ceil(131,072 / (4 << 12)) = 8;
    #   8 × 6 sectors × 4K = 196,608 → deflate 341
    assert v.deflate_ratio == 341
    assert v.embedded_log_space == 17_179_852_800
    assert p.dspace == (446 * 17_179_852_800 >> 9) * 341 == 5_103_154_478_400
    # slop = MIN(dspace >> 5, 128 GiB) = 128 GiB; minus elog dspace
    #   (17,179,852,800 >> 9) × 341 = 11,442,050,400 → 125,996,903,072
    assert p.slop_bytes == 137_438_953_472 - 11_442_050_400 == 125_996_903_072
    assert p.usable_bytes == 5_103_154_478_400 - 125_996_903_072


def test_draid_refused_before_21() -> None:
    with pytest.raises(UsageError, match="dRAID"):
        plan_pool(parse_layout("draid1:2d:4x1T"), 12, OZ_08)


# --- observed on zfs-fuse (pool v23); see test_planner_zfsfuse.py for the full set ---


def test_v23_raidz1_3x1g_ashift12_observed() -> None:
    # zdb -C: asize 3207069696, metaslab_shift 24; zpool list SIZE 2.98G;
    # zfs get -Hp: used 512864 + available 2100145312 = 2100658176.
    p = plan_pool(parse_layout("raidz1:3x1G"), 12, V23)
    v = p.vdevs[0]
    # highbit(3,207,069,696 / 200 = 16,035,348) = 24 → 191 metaslabs of 16 MiB
    assert (v.asize, v.ms_shift, v.ms_count) == (3_207_069_696, 24, 191)
    assert nicenum(p.size_bytes) == "2.98G"
    # dspace = (191 × 16 MiB >> 9) × 341 = 2,134,212,608; dspace >> 6 = 33,347,072 is under
    #   the 32 MiB floor, so slop = 33,554,432 (dsl_pool_adjustedsize())
    assert p.dspace == 2_134_212_608
    assert p.slop_bytes == 32 * MiB
    assert p.usable_bytes == 512_864 + 2_100_145_312


def test_v23_stripe_1g_observed() -> None:
    # zdb: asize 1069023232, shift 23, 127 metaslabs; SIZE 1016M; used+avail 1031798784
    p = plan_pool(parse_layout("stripe:1G"), 9, V23)
    assert p.size_bytes == 127 * 8 * MiB
    assert nicenum(p.size_bytes) == "1016M"
    assert p.usable_bytes == 73_728 + 1_031_725_056


# --- rules that changed between releases ---


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("v23", V23),
        ("zfs-fuse", V23),
        ("0.6.3", ZOL_060),
        ("0.6.4.2", ZOL_060),
        ("0.6.5", ZOL_065),
        ("0.6.5.11", ZOL_065),
        ("0.7.0-rc3", ZOL_065),
        ("0.7.0-rc4", ZOL_07),
        ("0.7", ZOL_07),
        ("0.7.13", ZOL_07),
        ("0.8.0-rc3", ZOL_07),
        ("0.8", OZ_08),
        ("2.0", OZ_08),
        ("2.0.5", OZ_08),
        ("2.0.6", OZ_206),
        ("2.1", OZ_21),
        ("zfs-2.3.1", OZ_21),
        ("2.4", OZ_21),
    ],
)
def test_version_parsing(text: str, rules: object) -> None:
    assert parse_zfs_version(text) is rules


@pytest.mark.parametrize("bad", ["", "banana", "0.5.2", "2.x", "v22"])
def test_bad_versions_are_refused(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_zfs_version(bad)


def test_metaslab_shift_rules() -> None:
    # Before 0.6.5 the floor is SPA_MAXBLOCKSHIFT 17, from 0.6.5 it is 24.
    small = 100 * MiB  # / 200 = 524,288 = 2^19 → highbit 20
    assert metaslab_shift(small, V23) == 20
    assert metaslab_shift(small, ZOL_060) == 20
    assert metaslab_shift(small, ZOL_065) == 24
    # 0.8+: 8 GiB → >> 29 = 16 (not < 16, not > 200) → the default shift 29
    assert metaslab_shift(8 * GiB, OZ_08) == 29
    # 8 GiB - 1 → 15 < 16 → highbit((8 GiB - 1) / 16) = 29
    assert metaslab_shift(8 * GiB - 1, OZ_08) == 29
    # 4 GiB → 8 < 16 → highbit(256 MiB) = 29
    assert metaslab_shift(4 * GiB, OZ_08) == 29
    # 2 PiB + : >> 34 over 131,072 → highbit(asize / 2^17)
    huge = 4 << 50  # 4 PiB: / 200 → highbit 45 > 34 → 34; 4 PiB >> 34 = 262,144 > 131,072
    assert metaslab_shift(huge, OZ_21) == (huge // (1 << 17)).bit_length() == 36


def test_slop_rules_per_version() -> None:
    d = 10 * GiB
    assert slop_space(d, 0, V23) == max(d >> 6, 32 * MiB) == 160 * MiB
    assert slop_space(d, 0, ZOL_065) == d >> 5 == 320 * MiB
    small = 1 * GiB
    assert slop_space(small, 0, ZOL_065) == 32 * MiB
    assert slop_space(small, 0, ZOL_07) == 128 * MiB
    tiny = 200 * MiB  # MIN(dspace / 2, 128 MiB) = 100 MiB
    assert slop_space(tiny, 0, ZOL_07) == 100 * MiB
    big = 10 * 1024 * GiB  # 10 TiB >> 5 = 320 GiB: capped at 128 GiB from 2.0.6 only
    assert slop_space(big, 0, OZ_08) == 320 * GiB
    assert slop_space(big, 0, OZ_206) == 128 * GiB
    assert slop_space(big, 4 * GiB, OZ_206) == 128 * GiB  # no embedded log before 2.1
    assert slop_space(big, 4 * GiB, OZ_21) == 124 * GiB
    # the embedded log takes at most half the slop
    assert slop_space(big, 100 * GiB, OZ_21) == 64 * GiB


def test_psize_to_asize_examples() -> None:
    rz1_5 = VdevSpec("raidz", (1,) * 5, parity=1)
    # 4K on raidz1 ashift 12: 1 data sector + 1 parity = 2, multiple of 2 → 8K
    assert psize_to_asize(rz1_5, 4 * KiB, 12) == 8 * KiB
    # 16K: 4 + ceil(4/4) = 5 → roundup(5, 2) = 6 sectors = 24K (one padding sector)
    assert psize_to_asize(rz1_5, 16 * KiB, 12) == 24 * KiB
    rz2_6 = VdevSpec("raidz", (1,) * 6, parity=2)
    # 4K on raidz2: 1 + 2 = 3 sectors = 12K (a 4K block costs 3x)
    assert psize_to_asize(rz2_6, 4 * KiB, 12) == 12 * KiB
    # 1M on raidz2 6 wide ashift 12: 256 + 2 × 64 = 384 → 384 = 1.5M
    assert psize_to_asize(rz2_6, MiB, 12) == 1536 * KiB
    draid = VdevSpec("draid", (1,) * 11, parity=2, draid_data=8, draid_spares=1)
    # dRAID 8d+2p ashift 12: a 4K block fills one row of 10 sectors = 40K
    assert psize_to_asize(draid, 4 * KiB, 12) == 40 * KiB
    # mirror/disk: rounded up to the sector
    assert psize_to_asize(VdevSpec("mirror", (1, 1)), 5000, 12) == 8 * KiB
    assert psize_to_asize(VdevSpec("disk", (1,)), 5000, 9) == 5120


def test_deflate_ratio_raidz_examples() -> None:
    # raidz1 of 5 at ashift 12: 128K = 32 + 8 = 40 sectors (even) → 160K → 131072/320 = 409
    assert deflate_ratio(VdevSpec("raidz", (1,) * 5, parity=1), 12) == 409
    # ashift 9: 256 + 64 = 320 sectors (even) = 160K → the same 409
    assert deflate_ratio(VdevSpec("raidz", (1,) * 5, parity=1), 9) == 409
    # raidz2 of 5 at ashift 12: 32 + 2 × 11 = 54 → roundup 3 = 54 → 216K → 131072/432 = 303
    assert deflate_ratio(VdevSpec("raidz", (1,) * 5, parity=2), 12) == 303
    assert deflate_ratio(VdevSpec("mirror", (1, 1)), 12) == 512


def test_mixed_member_sizes_use_the_smallest() -> None:
    p = plan_pool(parse_layout("raidz1:2x1G,1536M"), 9, V23)
    assert p.vdevs[0].asize == 3 * (GiB - 4608 * KiB)
    m = plan_pool(parse_layout("mirror:1G,1536M"), 9, V23)
    assert m.vdevs[0].asize == GiB - 4608 * KiB


def test_whole_disk_ignored_for_zfs_fuse() -> None:
    # zfs-fuse's is_whole_disk() returns B_FALSE: no partitioning.
    a = plan_pool(parse_layout("stripe:1G"), 9, V23, whole_disk=True)
    b = plan_pool(parse_layout("stripe:1G"), 9, V23, whole_disk=False)
    assert a.size_bytes == b.size_bytes


def test_nicenum_matches_zfs_examples() -> None:
    assert nicenum(1023) == "1023"
    assert nicenum(1024) == "1K"
    assert nicenum(1016 * MiB) == "1016M"
    assert nicenum(3_204_448_256) == "2.98G"
    assert nicenum(10239) == "10.0K"
    assert nicenum(512_864) == "501K"


def test_ashift_range() -> None:
    with pytest.raises(UsageError, match="ashift"):
        plan_pool(parse_layout("stripe:1G"), 14, V23)
    with pytest.raises(UsageError, match="ashift"):
        plan_pool(parse_layout("stripe:1G"), 8, OZ_21)
    plan_pool(parse_layout("stripe:1G"), 16, OZ_21)
