"""`plan --data`'s arithmetic: blocks from file sizes, their cost per layout, special vdev
levels (pure; every expected figure is worked out by hand in the comment beside it)."""

from __future__ import annotations

from collections import Counter

from poolbench.planner.capacity import plan_pool
from poolbench.planner.dataspace import WriteModel, blocks_of, data_space
from poolbench.planner.filesizes import FileSizes, ScanNotes, from_dict, units_of
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import parse_zfs_version
from poolbench.planner.special import special_levels

K = 1024
R23 = parse_zfs_version("2.3")
OFF = WriteModel(compression=False)


def hist(*sizes: tuple[int, int]) -> FileSizes:
    """(size, count) pairs → a histogram, as the scanner keeps it."""
    counts: Counter[int] = Counter()
    for size, n in sizes:
        counts[units_of(size)] += n
    return FileSizes(dict(counts), sum(s * n for s, n in sizes), 0, "test")


def test_a_4k_file_takes_three_sectors_on_raidz2_of_6_at_ashift_12() -> None:
    # 1 data sector + 2 parity × ceil(1 / 4 data columns) = 3 sectors, already a multiple of
    # parity + 1 = 3: 12K allocated for 4K, three times its size.
    plan = plan_pool(parse_layout("raidz2:6x4T"), 12, R23)
    got = data_space(plan, hist((4096, 1000)), OFF)
    assert got.psize_bytes == 4096 * 1000
    assert got.data_asize == 12 * K * 1000
    # all of it is small-file overhead but the 4K each file holds: 8K of 12K
    small_share = (8 * K * 1000) / got.asize
    assert abs(got.small_overhead_share - small_share) < 1e-9


def test_records_and_the_last_record() -> None:
    # 130K at recordsize 128K: two records. Compression off writes both whole (256K);
    # lz4 shrinks the last to its 2K of data: ceil(2048 × 256/255) = 2057 → 2560 (512-B
    # units), which saves more than 1/8 of 128K, so it is kept compressed.
    h = hist((130 * K, 1))
    assert blocks_of(h, OFF).all() == Counter({128 * K: 2})
    assert blocks_of(h, WriteModel()).all() == Counter({128 * K: 1, 2560: 1})
    # one record of a file up to the recordsize: its size rounded up to 512 B
    assert blocks_of(hist((5000, 3)), OFF).all() == Counter({5120: 3})


def test_compression_keeps_a_block_only_when_it_saves_an_eighth() -> None:
    m = WriteModel(embedded=False)
    assert m.psize(512, 100) == 512  # 101 B → 512, not below 512 − 64: stored as is
    assert m.psize(128 * K, 128 * K) == 128 * K  # random data does not shrink
    half = WriteModel(compressibility=0.5)
    assert half.psize(128 * K, 128 * K) == 129 * 512  # 65,793 B → 129 units of 512 B
    # a block that compresses into 112 bytes lives in its block pointer (embedded_data)
    assert WriteModel().psize(512, 100) == 0
    # ... but the histogram keeps sizes to 512 B, so a file of 100 B is taken as 512 B of
    # data: the model never embeds incompressible files (it errs by at most 512 B each)
    assert blocks_of(hist((100, 5)), WriteModel()).all() == Counter({512: 5})


def test_mirror_costs_and_charges() -> None:
    # 5000 B → a 5120-B block → 8K at ashift 12; the mirror writes it twice (16K raw) and
    # `zfs list` charges 8K (a mirror's deflate ratio is 1).
    plan = plan_pool(parse_layout("mirror:2x4T"), 12, R23)
    got = data_space(plan, hist((5000, 10)), OFF)
    assert (got.data_asize, got.data_raw, got.data_charged) == (81920, 163840, 81920)


def test_raidz_charge_is_the_deflated_allocation() -> None:
    # raidz1 of 3 at ashift 12: a 128K block is 32 data + 16 parity sectors = 192K; the
    # deflate ratio is 128K / 192K → (1 << 17) // (192K >> 9) = 341 (in 1/512ths), so a
    # 128K block is charged (192K >> 9) × 341 = 130,944 bytes.
    plan = plan_pool(parse_layout("raidz1:3x4T"), 12, R23)
    got = data_space(plan, hist((1 << 20, 1)), OFF)
    assert got.data_asize == 8 * 192 * K
    assert got.data_charged == 8 * 130944


def test_two_equal_vdevs_cost_what_one_does() -> None:
    one = plan_pool(parse_layout("raidz1:3x4T"), 12, R23)
    two = plan_pool(parse_layout("raidz1:3x4T + raidz1:3x4T"), 12, R23)
    h = hist((4096, 100), (300 * K, 20))
    assert data_space(one, h, OFF).data_asize == data_space(two, h, OFF).data_asize


def test_special_levels() -> None:
    # 10 files of 4K and 2 of 256K (2 records each) at recordsize 128K, compression off, on a
    # special mirror at ashift 12: level 4K takes the ten 4K blocks (40K); 128K takes all
    # (40K + 4 × 128K); metadata is the same at every level.
    plan = plan_pool(parse_layout("raidz2:6x4T + special mirror:2x100G"), 12, R23)
    levels = {lv.level: lv for lv in special_levels(plan, hist((4096, 10), (256 * K, 2)), OFF)}
    assert levels[0].small_bytes == 0
    assert levels[4 * K].small_bytes == 40 * K
    assert levels[64 * K].small_bytes == 40 * K
    assert levels[128 * K].small_bytes == 40 * K + 4 * 128 * K
    assert len({lv.metadata_bytes for lv in levels.values()}) == 1
    space = plan.class_space("special")
    assert levels[4 * K].space == space
    assert levels[4 * K].fill == (40 * K + levels[4 * K].metadata_bytes) / space
    assert levels[4 * K].fits


def test_special_fill_past_the_metadata_reserve_is_flagged() -> None:
    # 20,000 files of 16K on a special mirror of 2×256M: 312.5M of small blocks, over
    # 75% of the vdev's space, so that level does not fit; level 8K takes none of them.
    plan = plan_pool(parse_layout("raidz1:3x4T + special mirror:2x256M"), 12, R23)
    levels = {lv.level: lv for lv in special_levels(plan, hist((16 * K, 20000)), OFF)}
    assert levels[16 * K].small_bytes == 20000 * 16 * K
    assert levels[16 * K].fits is False
    assert levels[8 * K].fits is True


def test_histogram_round_trip() -> None:
    h = FileSizes({0: 3, 8: 10}, 40960, 45056, "/srv", notes=ScanNotes(dirs=2, unreadable=1))
    back = from_dict(h.as_dict(), "x")
    assert back == h
