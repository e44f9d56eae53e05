"""Layout search, speed prediction and resilience on hand-worked examples."""

from __future__ import annotations

import math

import pytest

from poolbench.errors import UsageError
from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_devices, parse_layout
from poolbench.planner.performance import DEFAULT_SPEEDS, DiskSpeed, parse_disk_speed, predict
from poolbench.planner.resilience import RiskInputs, binomial_tail, pool_risk, resilver_hours
from poolbench.planner.rules import OZ_21, V23
from poolbench.planner.search import search
from poolbench.planner.space import whole_disk_partition_bytes

MiB, TB = 1 << 20, 10**12
DISK = DiskSpeed(100e6, 100e6, 100, 100, "test")


def seek_and(member: int) -> float:
    """A spinning disk's random read of `member` bytes against its 4K figure: 10 ms a 4K read
    (100 IOPS), plus the rest of the read at 100 MB/s."""
    return 0.01 / (0.01 + (member - 4096) / 100e6)


def test_speed_rules_hand_worked() -> None:
    # 2 x 2-way mirror: reads from all 4 disks, writes at 2 disks' speed; a random read of
    # a 128K record on a side moves the whole record
    s = predict(parse_layout("mirror:2x1T + mirror:2x1T"), DISK)
    assert (s.read_bps, s.write_bps, s.write_iops) == (400e6, 200e6, 200)
    assert s.read_iops == pytest.approx(400 * seek_and(128 * 1024))
    # raidz2 of 6: 4 data disks streaming; a random 128K read reads 4 data columns, and
    # over a working set they fall on all 6 members alike: 6/4 = 1.5 disks of IOPS
    s = predict(parse_layout("raidz2:6x1T"), DISK)
    # members each move their 32K column of the record
    assert (s.read_bps, s.write_bps, s.write_iops) == (400e6, 400e6, 100)
    assert s.read_iops == pytest.approx(150 * seek_and(32 * 1024))
    # two raidz1 of 3: 2 + 2 data disks; each vdev 3 members / 2 data columns of IOPS
    s = predict(parse_layout("raidz1:3x1T + raidz1:3x1T"), DISK)
    assert s.read_bps == 400e6 and s.read_iops == pytest.approx(300 * seek_and(64 * 1024))
    # draid2:4d:1s of 13: 12 disks in groups of 6 → 2 groups of IOPS; a stream sees one
    # group: 32 sectors in 8 rows of 4 data → 4 disks
    s = predict(parse_layout("draid2:4d:1s:13x1T"), DISK)
    assert (s.read_bps, s.read_iops) == (400e6, 200)


def test_parse_disk_speed() -> None:
    d = parse_disk_speed("180M,250iops")
    assert (d.read_bps, d.write_bps, d.read_iops, d.write_iops) == (180 * MiB,) * 2 + (250, 250)
    d = parse_disk_speed("500MB/450MB,20000iops/15000iops")
    assert (d.read_bps, d.write_bps, d.read_iops, d.write_iops) == (500e6, 450e6, 20000, 15000)
    with pytest.raises(UsageError):
        parse_disk_speed("fast")


def test_failures_and_risk_model() -> None:
    r = pool_risk(parse_layout("raidz2:6x4TB + mirror:2x4TB"), DISK, RiskInputs())
    assert r.failures_tolerated == 1
    assert [v.failures_tolerated for v in r.vdevs] == [2, 1]
    # resilver: fill 0.8 × 4 TB at half of 100 MB/s = 3.2e12 / 5e7 s = 64,000 s
    assert resilver_hours(r.vdevs[1].spec, DISK, RiskInputs()) == pytest.approx(64000 / 3600)
    # per-disk failure probability during the window, λ = -ln(1 - 0.015)/8766 h
    p = 1 - math.exp(math.log(1 - 0.015) / 8766 * 64000 / 3600)
    # mirror: the one survivor failing loses the pool
    assert r.vdevs[1].p_loss_during_resilver == pytest.approx(p)
    # raidz2 of 6: lost if 2 of the 5 survivors fail
    assert r.vdevs[0].p_loss_during_resilver == pytest.approx(binomial_tail(5, p, 1))
    # URE only matters with no redundancy left (mirror): 3.2e12 bytes × 8 × 1e-15
    assert r.vdevs[1].p_data_error_during_resilver == pytest.approx(1 - math.exp(-0.0256))
    assert r.vdevs[0].p_data_error_during_resilver == 0.0
    stripe = pool_risk(parse_layout("stripe:2x1T"), DISK)
    assert stripe.failures_tolerated == 0
    assert stripe.vdevs[0].p_loss_during_resilver == 1.0


def test_binomial_tail() -> None:
    assert binomial_tail(2, 0.5, 0) == pytest.approx(0.75)
    assert binomial_tail(3, 0.1, 3) == 0.0


def test_search_2x3t_3x2t_finds_the_tiered_raidz1() -> None:
    # The hand-made plan for 2 × 3 TB + 3 × 2 TB with one failure tolerated: a 2 TB
    # partition on all five disks in raidz1 (4 data × 2 TB) plus the two 1 TB leftovers
    # as a mirror (1 TB) — about 9 TB of raw data space, against 4 × 2 TB = 8 TB for a
    # plain raidz1 of the five disks (the 3 TB disks' extra space is wasted).
    disks = list(parse_devices("2x3TB,3x2TB", context=""))
    cands = search(
        disks, ashift=12, rules=OZ_21, disk_speed=DISK, min_failures=1, objective="space"
    )
    best = cands[0]
    assert best.pareto and best.partitioned
    assert best.name == "tiered raidz1, one pool"
    kinds = [(v.kind, v.width) for v in best.pools[0].vdevs]
    assert kinds == [("raidz", 5), ("mirror", 2)]
    part1 = whole_disk_partition_bytes(2 * TB) // MiB * MiB
    assert best.pools[0].vdevs[0].devices[0] == part1
    plain = next(c for c in cands if c.name == "1 x raidz1 of 5")
    assert best.usable_bytes > plain.usable_bytes
    # and the plain raidz1's usable equals the capacity model's for that layout
    assert plain.usable_bytes == plan_pool(plain.pools[0], 12, OZ_21, whole_disk=True).usable_bytes
    assert all(c.failures_tolerated >= 1 for c in cands)


def test_search_pareto_front_and_objectives() -> None:
    disks = [4 * TB] * 6
    space = search(disks, ashift=12, rules=OZ_21, disk_speed=DISK, objective="space")
    speed = search(disks, ashift=12, rules=OZ_21, disk_speed=DISK, objective="speed")
    assert space[0].name == "stripe of 6"  # most space, no redundancy
    assert speed[0].pareto
    # a stripe has all 6 disks for every figure → fastest by the model
    assert speed[0].name == "stripe of 6"
    front = [c for c in space if c.pareto]
    for c in front:
        for o in space:
            better = (
                o.usable_bytes >= c.usable_bytes
                and o.failures_tolerated >= c.failures_tolerated
                and o.speed_score >= c.speed_score
            )
            strictly = (o.usable_bytes, o.failures_tolerated, o.speed_score) != (
                c.usable_bytes,
                c.failures_tolerated,
                c.speed_score,
            )
            assert not (better and strictly)
    three = search(disks, ashift=12, rules=OZ_21, disk_speed=DISK, min_failures=3)
    # only raidz3 and dRAID3 survive 3 failures (a 3-way mirror survives 2)
    assert {c.failures_tolerated for c in three} == {3}
    assert all("raidz3" in c.name or "draid3" in c.name for c in three)


def test_search_without_draid_on_old_rules() -> None:
    cands = search([2 * TB] * 6, ashift=9, rules=V23, disk_speed=DEFAULT_SPEEDS["hdd"])
    assert not any("draid" in c.name for c in cands)
