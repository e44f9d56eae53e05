"""Vdev classes and RAIDZ expansion in the capacity model, against figures computed by hand
from the OpenZFS source (the steps are written out; see docs/planner.md)."""

from __future__ import annotations

import pytest

from poolbench.errors import UsageError
from poolbench.planner.capacity import plan_pool
from poolbench.planner.expansion import plan_expansion
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import (
    OZ_08,
    OZ_21,
    V23,
    ZOL_07,
    raidz_expansion_supported,
    reported_release,
)

K, M, G = 1 << 10, 1 << 20, 1 << 30
LEAF_1G = G - 4 * M - 512 * K  # 1069023232: labels and boot area off a 1 GiB file
LEAF_512M = 512 * M - 4 * M - 512 * K  # 532152320


def test_v23_log_cache_spare_count_in_nothing() -> None:
    # mirror of two 1 GiB files: v23 shift = highbit(LEAF_1G / 200 = 5345116) = 23,
    # 127 metaslabs of 8 MiB. The log (512 MiB file): highbit(2660761) = 22, 126 metaslabs,
    # but not in SIZE; slop = max(dspace / 64, 32 MiB) = 32 MiB. Same as a real zfs-fuse
    # pool: SIZE 1016M, USED + AVAIL 1031798784.
    plan = plan_pool(parse_layout("mirror:2x1G + log 512M + cache 1G + spare 1G"), 12, V23)
    assert plan.size_bytes == 127 * 8 * M == 1065353216
    assert plan.usable_bytes == 127 * 8 * M - 32 * M == 1031798784
    log, cache, spare = plan.classes
    assert log.plan is not None and (log.plan.asize, log.plan.ms_shift) == (LEAF_512M, 22)
    assert log.plan.ms_count == 126 and not log.in_size
    assert (cache.cls, cache.plan, spare.cls, spare.plan) == ("cache", None, "spare", None)
    bare = plan_pool(parse_layout("mirror:2x1G"), 12, V23)
    assert (bare.size_bytes, bare.usable_bytes) == (plan.size_bytes, plan.usable_bytes)


def test_special_counts_in_size_not_in_avail() -> None:
    # raidz2:6x1G: asize 6 × LEAF_1G = 6414139392, 11 metaslabs of 2^29 (fewer than 16,
    # so shift = highbit(asize / 16) = 29). special mirror of 512 MiB: LEAF_512M >> 29 = 0,
    # shift = highbit(LEAF_512M / 16 = 33259520) = 25, 15 metaslabs of 32 MiB.
    lay = parse_layout("raidz2:6x1G + special mirror:2x512M")
    plan = plan_pool(lay, 12, OZ_21)
    data = plan_pool(parse_layout("raidz2:6x1G"), 12, OZ_21)
    assert data.size_bytes == 11 << 29
    assert plan.size_bytes == (11 << 29) + 15 * 32 * M == 6408896512
    assert plan.class_space("special") == 15 * 32 * M
    # spa_update_dspace: normal class only, so AVAIL (and the slop) are the data vdevs'
    assert (plan.dspace, plan.slop_bytes, plan.usable_bytes) == (
        data.dspace,
        data.slop_bytes,
        data.usable_bytes,
    )
    assert plan.failures_tolerated == 1  # the special mirror, not the raidz2, is the weak spot


def test_class_vdevs_get_no_embedded_log_metaslab() -> None:
    # mirror:2x40G: asize 40G − 4.5M = 42944429568, 79 metaslabs of 512 MiB (16..200: shift
    # 29); over 64, so one goes to the embedded log class (2.1+) — but only in the normal
    # class: the identical special mirror keeps all 79 in SIZE.
    plan = plan_pool(parse_layout("mirror:2x40G + special mirror:2x40G"), 12, OZ_21)
    (data,) = plan.vdevs
    (special,) = plan.classes
    assert special.plan is not None
    assert (data.ms_count, data.embedded_log_space) == (79, 512 * M)
    assert (special.plan.ms_count, special.plan.embedded_log_space) == (79, 0)
    assert plan.size_bytes == 2 * 79 * 512 * M
    # dspace: 78 metaslabs (mirror deflate ratio 1); slop = 78 × 512M / 32 less the embedded
    # log metaslab (at most half of it): 1248 MiB − 512 MiB = 736 MiB
    assert plan.dspace == 78 * 512 * M
    assert plan.slop_bytes == 78 * 512 * M // 32 - 512 * M
    assert plan.usable_bytes == 78 * 512 * M - (78 * 16 * M - 512 * M)


def test_log_does_not_count_and_dedup_does() -> None:
    base = plan_pool(parse_layout("raidz1:3x1G"), 12, OZ_21)
    log = plan_pool(parse_layout("raidz1:3x1G + log mirror:2x1G"), 12, OZ_21)
    dedup = plan_pool(parse_layout("raidz1:3x1G + dedup mirror:2x1G"), 12, OZ_21)
    # a 1 GiB mirror: LEAF_1G >> 29 = 1 < 16, shift = highbit(LEAF_1G / 16) = 26, 15 × 64 MiB
    assert log.size_bytes == base.size_bytes
    assert dedup.size_bytes == base.size_bytes + 15 * 64 * M
    assert log.usable_bytes == dedup.usable_bytes == base.usable_bytes


def test_special_and_dedup_need_allocation_classes() -> None:
    for rules in (V23, ZOL_07):
        with pytest.raises(UsageError, match="no special vdevs"):
            plan_pool(parse_layout("raidz2:6x1G + special mirror:2x1G"), 12, rules)
    plan_pool(parse_layout("raidz2:6x1G + special mirror:2x1G"), 12, OZ_08)
    with pytest.raises(UsageError, match="64 MiB minimum"):
        plan_pool(parse_layout("mirror:2x1G + spare 32M"), 12, V23)


def test_raidz_expansion_by_hand() -> None:
    # raidz1:3x1G at ashift 12: asize 3 × LEAF_1G = 3207069696; 5 metaslabs of 2^29 < 16,
    # shift = highbit(asize / 16 = 200441856) = 28; 11 metaslabs of 256 MiB.
    before = plan_pool(parse_layout("raidz1:3x1G"), 12, OZ_21)
    assert (before.vdevs[0].ms_shift, before.vdevs[0].ms_count) == (28, 11)
    exp = plan_expansion(before, 4)
    # after: 4 × LEAF_1G = 4276092928, same shift 28 → 15 metaslabs
    assert (exp.asize, exp.ms_count, exp.size_bytes) == (4 * LEAF_1G, 15, 15 << 28)
    # deflate ratio stays width 3's: 128K = 32 data + 16 parity sectors = 48 (a multiple of
    # 2) → 196608 bytes → 131072 // 384 = 341
    assert exp.deflate_ratio == 341
    dspace = ((15 << 28) >> 9) * 341
    assert exp.dspace == dspace == 2681733120
    slop = max(min(dspace >> 5, 128 * G), min(dspace >> 1, 128 * M))  # = 128 MiB
    assert exp.usable_bytes == dspace - slop == 2547515392
    # a 128K record after: 32 + ceil(32 / 3) = 43 → 44 sectors = 180224 bytes, charged at
    # 341/512: 352 × 341 = 120032 bytes, not 128 KiB; before: 384 × 341 = 130944
    assert (exp.record_charge_old, exp.record_charge_new) == (130944, 120032)
    assert exp.new_record_bytes == 2547515392 // 120032 * 128 * K
    # a pool created 4 wide would say more: its own ratio, 131072 // 352 = 372
    assert exp.new_width_ratio == 372


def test_expansion_adds_an_embedded_log_metaslab_past_64() -> None:
    # raidz1:3x10G: asize 3 × (10G − 4.5M) = 32199671808 → 59 metaslabs of 512 MiB (no
    # embedded log: 59 <= 64); 4 wide → 42932895744 → 79: one new one goes to the log class.
    before = plan_pool(parse_layout("raidz1:3x10G"), 12, OZ_21)
    assert (before.vdevs[0].ms_count, before.vdevs[0].embedded_log_space) == (59, 0)
    exp = plan_expansion(before, 4)
    assert (exp.ms_count, exp.embedded_log_space) == (79, 512 * M)
    dspace = ((78 * 512 * M) >> 9) * 341
    assert exp.dspace == dspace
    elog = ((512 * M) >> 9) * 341
    assert exp.slop_bytes == (dspace >> 5) - min(elog, (dspace >> 5) >> 1)


def test_expansion_refuses_what_zpool_attach_refuses() -> None:
    raidz = plan_pool(parse_layout("raidz2:6x4T"), 12, OZ_21)
    with pytest.raises(UsageError, match="already 6 disks wide"):
        plan_expansion(raidz, 6)
    with pytest.raises(UsageError, match="smaller than the raidz vdev's smallest member"):
        plan_expansion(raidz, 7, new_device=2 << 40)
    for text in ("mirror:2x4T", "raidz1:3x1G + raidz1:3x1G", "draid1:4x1G"):
        with pytest.raises(UsageError, match="RAIDZ expansion grows one raidz vdev"):
            plan_expansion(plan_pool(parse_layout(text), 12, OZ_21), 5)
    assert raidz_expansion_supported("2.3") and raidz_expansion_supported("2.3.2")
    assert not any(raidz_expansion_supported(v) for v in ("2.2.7", "2.1", "v23", "zfs-fuse"))
    # as the pool reports it (`zpool version`), which the expand workload asks
    reported = {"zfs-2.3.2-2~bpo12+2": True, "zfs-2.2.2-0ubuntu9": False,
                "zfs-fuse, pool version 23": False, "": False}  # fmt: skip
    for text, ok in reported.items():
        assert raidz_expansion_supported(reported_release(text)) is ok, text
