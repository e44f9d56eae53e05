"""The speed model (planner/performance.py) on hand-worked layouts.

Each expected figure is worked out in the comment above it from the raidz map rules (first
column on member (offset / sector) mod W, P + 1 rounding, the raidz1 swap at offset bit 20),
not read back from the code. The measured side is bench/validate_speed.py (docs/planner.md).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolbench.planner.layout import VdevSpec, parse_layout
from poolbench.planner.performance import (
    DiskSpeed,
    member_read_share,
    parse_disk_speed,
    predict,
    predict_detailed,
    vdev_multipliers,
)
from poolbench.planner.queueing import fork_join_share, members_per_read, queued_share
from poolbench.planner.raidz_work import first_column_step, raidz_mixed, raidz_work
from poolbench.planner.space import psize_to_asize

KiB, MiB = 1 << 10, 1 << 20
SSD = DiskSpeed(100 * MiB, 100 * MiB, 1000, 1000, "test", "transfer")
HDD = DiskSpeed(100 * MiB, 100 * MiB, 100, 100, "test", "media")


def _raidz(width: int, parity: int) -> VdevSpec:
    return VdevSpec(kind="raidz", devices=(10**12,) * width, parity=parity)


def test_raidz1_of_4_keeps_parity_on_two_members() -> None:
    # 128K at ashift 12: 32 data sectors in 3 columns (11, 11, 10) + 11 parity = 43, rounded
    # up to 44 (a multiple of P + 1 = 2). 44 ≡ 0 (mod 4): every block starts on the same
    # member, so parity sits on member 0, or member 1 where bit 20 of the offset swaps it.
    # Members 2 and 3 read 11 and 10 data sectors of every block: a stream reads at
    # 32/11 = 2.909 disks, not (W − P) = 3 and not W = 4.
    read, write, rand, _ = vdev_multipliers(_raidz(4, 1), 128 * KiB, 12, "transfer")
    assert read == pytest.approx(32 / 11)
    # Every member writes 11 sectors per block (the short column gets the padding sector).
    assert write == pytest.approx(32 / 11)
    # A random read of a whole block reads its 3 data columns. Back to back that is member 2
    # every time (one disk of IOPS), but over a working set runs of blocks start on member
    # 0 or 2 (allocations are multiples of 2 sectors; correction 8, docs/planner.md) and the
    # swap moves the parity by one: 3 reads per block over all 4 members → about 4/3 disks
    # (the swapped and unswapped MiB of the 8 MiB counted are not exactly halves).
    assert rand == pytest.approx(4 / 3, rel=0.05)
    assert raidz_work(4, 1, 12, 128 * KiB).max_read_ios == raidz_work(4, 1, 12, 128 * KiB).blocks


def test_raidz2_of_4_alternates_parity_so_reads_use_every_member() -> None:
    # 128K: 32 data sectors in 2 columns of 16 + 2 parity columns of 16 = 64, rounded up to
    # 66 (multiple of 3). 66 ≡ 2 (mod 4): blocks alternate between parity on members {0, 1}
    # (data on 2, 3) and parity on {2, 3} (data on 0, 1). Reads: every member serves 16
    # data sectors per 2 blocks, 64 per 16 → 4 disks (the issue measured 100 MiB/s on four
    # 25 MiB/s disks, where (W − P) predicted 50).
    read, write, rand, _ = vdev_multipliers(_raidz(4, 2), 128 * KiB, 12, "transfer")
    assert read == pytest.approx(4.0)
    # Writes: 66 sectors per block over 4 members, 33 each per 2 blocks → 64/33 = 1.939.
    assert write == pytest.approx(64 / 33, rel=1e-3)
    # Random whole-block reads: each block needs 2 of the 4 members → 2 disks of IOPS.
    assert rand == pytest.approx(2.0, rel=1e-3)


def test_random_reads_spread_over_every_member_where_back_to_back_would_not() -> None:
    # 4K blocks on raidz2 of 6: 1 data + 2 parity sectors = 3, a multiple of P + 1 = 3.
    # Back to back the first column alternates between members 0 and 3, so the data sector
    # sits only on members 2 and 5: 2 disks of IOPS. The validation measured 758 IOPS on six
    # members capped at 150 (more than two members can give): metaslabs start at powers of
    # two, not multiples of 3, so runs of blocks start on every member → 6 disks.
    _, _, rand, _ = vdev_multipliers(_raidz(6, 2), 4 * KiB, 12, "transfer")
    assert rand == pytest.approx(6.0)
    work = raidz_work(6, 2, 12, 4 * KiB)
    assert work.blocks / work.max_read_ios == pytest.approx(2.0, rel=1e-2)  # back to back


def test_which_first_columns_a_real_pool_allows() -> None:
    # Allocations are multiples of P + 1 sectors, metaslabs start at powers of two: starts
    # differ by multiples of gcd(largest power of 2 dividing P + 1, W).
    assert first_column_step(4, 1) == 2  # raidz1, even width: P + 1 = 2
    assert first_column_step(5, 1) == 1
    assert first_column_step(6, 2) == 1  # P + 1 = 3 has no factor 2
    assert first_column_step(6, 3) == 2  # P + 1 = 4, gcd(4, 6) = 2
    assert first_column_step(8, 3) == 4
    # raidz3 of 6, 4K: 1 data + 3 parity = 4 sectors; starts on members 0, 2, 4 only, so the
    # data sector (column 3) is on 3, 5 or 1: 3 disks of IOPS (measured 391 of 450).
    assert raidz_mixed(6, 3, 12, 4 * KiB)[1] == pytest.approx(3.0, rel=1e-2)


def test_spinning_disk_reads_pay_for_the_parity_it_passes() -> None:
    # On a disk whose rate is its medium, skipping parity sectors saves nothing: a read is
    # as slow as the write of the same sectors.
    r_media, w_media, _, _ = vdev_multipliers(_raidz(4, 2), 128 * KiB, 12, "media")
    assert r_media == w_media == pytest.approx(64 / 33, rel=1e-3)


def test_small_blocks_spread_random_reads_over_all_members() -> None:
    # 4K blocks on raidz1 of 4: one data + one parity sector; the data sector's member
    # moves with the offset (and the 1 MiB swap), so random reads use all 4 members.
    _, write, rand, _ = vdev_multipliers(_raidz(4, 1), 4 * KiB, 12, "transfer")
    assert rand == pytest.approx(4.0, rel=1e-2)
    # ... and each 4K costs 2 sectors written: 4 members / 2 = 2 disks of streaming write.
    assert write == pytest.approx(2.0, rel=1e-2)


@settings(max_examples=60, deadline=None)
@given(
    parity=st.integers(1, 3),
    extra=st.integers(1, 9),
    ashift=st.sampled_from([9, 12, 13]),
    psize=st.sampled_from([512, 4096, 8192, 16384, 65536, 131072, 1 << 20]),
)
@pytest.mark.slow  # a simulation
def test_simulated_writes_equal_the_allocation_table(
    parity: int, extra: int, ashift: int, psize: int
) -> None:
    """The member loads and the capacity model's allocation table (psize_to_asize, checked
    against real pools) must agree on how much a block writes: they are the same rules."""
    width = parity + extra
    work = raidz_work(width, parity, ashift, psize)
    asize = psize_to_asize(_raidz(width, parity), psize, ashift)
    assert work.total_written == work.blocks * (asize >> ashift)
    # No member can be busier than the whole, nor idler than an even share.
    assert work.total_written / width <= work.max_written <= work.total_written


def test_mirror_and_stripe() -> None:
    s = predict(parse_layout("mirror:3x1T"), SSD)
    assert (s.read_bps, s.write_bps, s.read_iops, s.write_iops) == (
        300 * MiB,
        100 * MiB,
        3000,
        1000,
    )
    s = predict(parse_layout("stripe:4x1T"), SSD)
    assert (s.read_bps, s.write_bps, s.read_iops) == (400 * MiB, 400 * MiB, 4000)


def test_draid_random_iops_take_whole_groups_only() -> None:
    # OpenZFS dRAID documentation: random IOPS ≈ floor((N − S)/(D + P)) × one drive.
    # draid2:4d:0s of 13: 13 / 6 = 2.17 groups → 2 (the model used to say 2.17).
    s = predict(parse_layout("draid2:4d:0s:13x1T"), HDD)
    assert s.read_iops == 200
    # draid1:8d:1s of 20: 19 / 9 → 2.
    s = predict(parse_layout("draid1:8d:1s:20x1T"), HDD)
    assert s.read_iops == 200
    # Streaming: 128K = 32 sectors = 8 rows of 4 data sectors; a stream sees one group of
    # 6 children, each writing 8 sectors per block: 32/8 = 4 disks (not 13 × 32/48 = 8.67,
    # the figure spread over every child, which the basis gives as the ceiling).
    s = predict(parse_layout("draid2:4d:0s:13x1T"), HDD)
    assert s.write_bps == pytest.approx(4 * 100 * MiB)


def test_detail_says_what_the_model_cannot_know() -> None:
    d = predict_detailed(parse_layout("raidz2:6x1T"), SSD)
    assert d.write_iops.basis.startswith("not predicted")
    assert any("ARC" in n for n in d.notes) and any("CPU" in n for n in d.notes)
    assert "dRAID" in predict_detailed(parse_layout("draid1:4d:0s:10x1T"), SSD).read_bps.basis


def test_disk_class_sets_the_medium() -> None:
    assert parse_disk_speed("180M,250iops").medium == "media"
    assert parse_disk_speed("500M,20000iops", "transfer").medium == "transfer"


def test_requests_in_flight_limit_random_iops() -> None:
    # Q requests spread at random over K equal members keep Q/(Q + K − 1) of them busy:
    # one request keeps one member busy (queue depth 1 → one disk, whatever the layout);
    # 8 requests on 4 members: 8/11 of 4 members. The validation measured 418 and 488 IOPS
    # on raidz1/raidz2 of 4 capped at 150 IOPS each with 8 jobs: 4 × 150 × 8/11 = 436.
    assert queued_share(1, 4) == pytest.approx(1 / 4)
    assert queued_share(8, 4) == pytest.approx(8 / 11)
    s = predict(parse_layout("stripe:4x1T"), SSD, recordsize=4 * KiB, outstanding=8)
    assert s.read_iops == pytest.approx(4 * 1000 * 8 / 11)
    # Streaming figures do not change.
    assert s.read_bps == predict(parse_layout("stripe:4x1T"), SSD).read_bps
    with pytest.raises(ValueError):
        queued_share(0, 4)


def test_a_read_that_needs_several_spinning_members_waits_for_the_slowest() -> None:
    # A 128K record on raidz1 of 4 (ashift 12) is 32 data sectors on its 3 data columns: one
    # read needs 3 members and ends with the slowest. Service times spread evenly within ±2/3
    # of their mean: the largest of 3 is the mean × (1 + (2/3)(2/4)) = 4/3, so at queue depth
    # 1 the vdev gives 3/4 of one disk (emulated hdd-7200 disks under zfs-fuse: 0.84 of the
    # single-disk pool at QD 1, the host's turnaround diluting it; docs/planner.md).
    # (A disk without a known transfer rate: positioning only, see the next test.)
    hdd = DiskSpeed(float("nan"), 180e6, 100, 100)
    rz = parse_layout("raidz1:4x1T")
    assert members_per_read(rz.vdevs[0], 128 * KiB, 12) == 3
    assert members_per_read(rz.vdevs[0], 4 * KiB, 12) == 1  # a 4K block: one data sector
    assert members_per_read(parse_layout("mirror:2x1T").vdevs[0], 128 * KiB, 12) == 1
    assert fork_join_share(3, 1) == pytest.approx(3 / 4)
    assert fork_join_share(1, 1) == 1.0
    assert predict(rz, hdd, 128 * KiB, 12, outstanding=1).read_iops == pytest.approx(75)
    # The loss falls as 1/Q: at 16 in flight, 1/(1 + 1/3/16) of the queued figure (the
    # vdev's many-in-flight figure is about 4/3 disks: W over the data columns a read needs).
    busy = predict(rz, hdd, 128 * KiB, 12).read_iops
    queued = busy * queued_share(16, busy / 100)
    assert predict(rz, hdd, 128 * KiB, 12, outstanding=16).read_iops == pytest.approx(
        queued / (1 + 1 / 3 / 16)
    )
    # Mirrors and 4K raidz blocks need one member: queue depth 1 is one disk, not two.
    assert predict(parse_layout("mirror:2x1T"), hdd, 4 * KiB, 12, 1).read_iops == 100
    assert predict(rz, hdd, 4 * KiB, 12, 1).read_iops == pytest.approx(100)
    # A transfer-bound device (SSD, a capped loop device) has no seek to wait for.
    ssd = predict(rz, SSD, 128 * KiB, 12, outstanding=1).read_iops
    assert ssd == pytest.approx(SSD.read_iops)


def test_raidz_stream_read_is_marked_a_lower_bound_on_transfer_bound_disks() -> None:
    # Two raidz1 of 3 measured 1.42 × the back-to-back figure (docs/planner.md): the plan
    # must not present it as validated; the ceiling is all 6 members: 600 MiB/s here.
    d = predict_detailed(parse_layout("raidz1:3x1T + raidz1:3x1T"), SSD)
    assert d.read_bps.basis.startswith("outside the validated range")
    assert "600 MiB/s" in d.read_bps.basis
    assert not d.write_bps.basis.startswith("outside")
    # A stripe's read is not a range.
    assert not predict_detailed(parse_layout("stripe:2x1T"), SSD).read_bps.basis.startswith(
        "outside"
    )


def test_draid_stream_says_one_group_at_a_time() -> None:
    # draid1:8d:1s of 14: dRAID fills one group of D + P = 9 children at a time; a 128K
    # block (32 sectors) is 4 rows of 8 data sectors, so each child of the group moves 4
    # sectors per block: 32/4 = 8 disks, 800 MiB/s of 100 MiB/s disks. Spread over the 13
    # non-spare children: reads 13 × 32/(4 × 8) = 13 disks, the ceiling the basis prints.
    d = predict_detailed(parse_layout("draid1:8d:1s:14x1T"), SSD)
    assert d.write_bps.value == d.read_bps.value == pytest.approx(800 * MiB)
    assert d.read_bps.basis.startswith("model, a lower bound")
    assert "at most 1,300 MiB/s" in d.read_bps.basis


def test_a_raidz_member_reads_its_column_not_the_record() -> None:
    """On a disk that seeks a random read costs positioning plus its transfer: a mirror side
    moves the whole 128K record, a raidz1 of 4 member its 11-sector (44K) column. With the
    disk figure taken at 128K (a one-disk pool's records, 125 IOPS = 8 ms) at 100 MB/s, a
    member's read is 8 ms − 84K/100 MB/s = 7.1192 ms: the vdev's many-in-flight figure
    rises by 8/7.1192, while it still has 4/3 members as servers, so at queue depth 1 the
    read waits for the slowest of 3 such reads: 125 × (8/7.1192) × 3/4."""
    disk = DiskSpeed(100e6, 100e6, 125, 125, medium="media", iops_size=128 * KiB)
    rz = parse_layout("raidz1:4x1T")
    member = 0.008 - (128 - 44) * KiB / 100e6
    assert member_read_share(rz.vdevs[0], disk, 128 * KiB, 12) == pytest.approx(0.008 / member)
    assert predict(rz, disk, 128 * KiB, 12, 1).read_iops == pytest.approx(
        125 * 0.008 / member * 3 / 4
    )
    mirror = parse_layout("mirror:2x1T")
    assert predict(mirror, disk, 128 * KiB, 12, 1).read_iops == pytest.approx(125)
    # The emulator's own model (hdd-7200, 24 MiB of 256 MiB, a Monte Carlo of the max of 3
    # heads) gives 0.794 of the one disk's 128K QD 1 figure; this rule 0.818, the old 0.75.
    flat = DiskSpeed(100e6, 100e6, 125, 125, medium="transfer", iops_size=128 * KiB)
    assert member_read_share(rz.vdevs[0], flat, 128 * KiB, 12) == 1.0
