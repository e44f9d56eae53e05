"""The write amplification model and its verdict (pure), figures computed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolbench.backends.base import Pool, PoolSpec
from poolbench.backends.btrfs import BtrfsBackend
from poolbench.backends.directory import DirectoryBackend
from poolbench.backends.md import MdBackend
from poolbench.backends.zfs import ZfsBackend
from poolbench.guards import amplification as amp
from poolbench.guards import geometry, reread
from poolbench.guards.devices import Counters, check
from poolbench.system.runner import RecordingRunner

K = 1024
M = K * K


@pytest.mark.parametrize(
    ("kind", "width", "ashift", "record", "expected"),
    [
        # 128K at ashift 12 = 32 sectors; parity p·ceil(32/(w−p)); total rounded up to p+1.
        ("raidz1", 4, 12, 128 * K, 44 / 32),  # 32 + 11 = 43 → 44 sectors (176K)
        ("raidz2", 6, 12, 128 * K, 48 / 32),  # 32 + 16 = 48, a multiple of 3 (192K)
        ("raidz1", 5, 12, 128 * K, 40 / 32),  # 32 + 8 = 40 (160K)
        ("raidz3", 8, 12, 128 * K, 56 / 32),  # 32 + 3·7 = 53 → 56 (224K)
        ("raidz1", 3, 9, 128 * K, 384 / 256),  # 256 + 128 = 384 sectors of 512 B
        ("raidz2", 4, 12, 4 * K, 3.0),  # 1 data + 2 parity sectors for a 4K record
        ("mirror", 3, 12, 128 * K, 3.0),  # three sides, each the whole record
        ("mirror", 2, 12, 4 * K, 2.0),
        ("stripe", 1, 12, 128 * K, 1.0),
        # dRAID2 4 data: ceil(128K / (4·4K)) = 8 rows of 6 sectors = 192K
        ("draid2:4d:7c:1s", 7, 12, 128 * K, 1.5),
    ],
)
def test_zfs_one_vdev_costs_what_the_allocator_allocates(
    kind: str, width: int, ashift: int, record: int, expected: float
) -> None:
    m = amp.zfs([(kind, width)], ashift, record)
    assert m.ratio == pytest.approx(expected) and m.low == m.high == pytest.approx(expected)
    assert m.expected_bytes(64 * M) == round(64 * M * expected)
    assert m.record_bytes == record


def test_zfs_mixed_vdevs_follow_free_space_and_bound_the_verdict() -> None:
    # raidz1 of 3 (a = 48/32 = 1.5, 1 copy, weight 3 disks) + mirror of 2 (a = 1, 2 copies,
    # weight 1 disk): Σ w·c / Σ w/a = (3 + 2) / (3/1.5 + 1) = 5/3.
    m = amp.zfs([("raidz1", 3), ("mirror", 2)], 12, 128 * K)
    assert m.ratio == pytest.approx(5 / 3)
    assert (m.low, m.high) == (pytest.approx(1.5), pytest.approx(2.0))
    # two vdevs of one kind cost what one does
    assert amp.zfs([("mirror", 2), ("mirror", 2)], 12, 128 * K).ratio == pytest.approx(2.0)
    assert amp.zfs([("stripe", 1)] * 3, 9, 128 * K).layout.startswith("stripe of 3")


@pytest.mark.parametrize(
    ("profile", "n", "expected"),
    [("single", 1, 1), ("dup", 1, 2), ("raid0", 2, 1), ("raid1", 2, 2), ("raid1c3", 3, 3),
     ("raid1c4", 4, 4), ("raid10", 4, 2), ("raid5", 3, 1.5), ("raid6", 4, 2.0)],
)  # fmt: skip
def test_btrfs_profiles(profile: str, n: int, expected: float) -> None:
    assert amp.btrfs(profile, n).ratio == pytest.approx(expected)


@pytest.mark.parametrize(
    ("level", "n", "expected"),
    [("raid0", 2, 1), ("raid1", 3, 3), ("raid10", 4, 2), ("raid5", 4, 4 / 3),
     ("raid6", 6, 1.5), ("linear", 2, 1)],
)  # fmt: skip
def test_md_levels(level: str, n: int, expected: float) -> None:
    assert amp.md(level, n).ratio == pytest.approx(expected)


def test_unknown_profiles_and_levels_are_refused() -> None:
    with pytest.raises(ValueError):
        amp.btrfs("raid7", 3)
    with pytest.raises(ValueError):
        amp.md("raid9", 3)
    with pytest.raises(ValueError):
        amp.md("raid6", 2)  # no data column
    with pytest.raises(ValueError):
        amp.zfs([("weird", 2)], 12, 128 * K)


# -- the verdict ----------------------------------------------------------------------------------
def test_a_three_way_mirror_with_a_third_of_the_data_on_disk_is_flagged() -> None:
    m = amp.zfs([("mirror", 3)], 12, 128 * K)
    v = amp.judge(m, 100 * M, 105 * M)  # 1.05× where 3× is due: 35% reached
    assert v.amplification == pytest.approx(1.05) and v.reached == pytest.approx(0.35)
    assert "65% of the written data did not reach the disks" in v.warning
    assert "sync=disabled" in v.warning and "faster than the disks" in v.warning
    # the old rule (device bytes ≥ 90% of the application's) would have passed it
    assert v.amplification > 0.9


def test_a_raidz2_at_65_percent_is_flagged_and_an_honest_one_is_not() -> None:
    m = amp.zfs([("raidz2", 6)], 12, 128 * K)  # 1.5×
    assert "35% of the written data" in amp.judge(m, 64 * M, round(64 * M * 1.5 * 0.65)).warning
    honest = amp.judge(m, 64 * M, round(64 * M * 1.5 * 1.04))  # 4% metadata on top
    assert honest.warning == honest.note == ""
    # the tolerance: 10% below the model is still metadata-free noise, 11% is flagged
    assert amp.judge(m, 100 * M, round(100 * M * 1.5 * 0.91)).warning == ""
    assert amp.judge(m, 100 * M, round(100 * M * 1.5 * 0.89)).warning != ""


def test_much_more_than_modelled_is_noted_with_the_record_size_as_cause() -> None:
    m = amp.zfs([("raidz1", 4)], 12, 128 * K)
    v = amp.judge(m, 10 * M, 40 * M, io_size=4 * K)
    assert v.warning == "" and v.note.startswith("note:")
    assert "4K writes are smaller than the 128K recordsize" in v.note
    assert "more than metadata explains" in amp.judge(m, 10 * M, 40 * M).note
    assert amp.judge(m, 100 * M, round(100 * M * 1.375 * 1.24)).note == ""  # metadata's room


def test_the_shortfall_names_declared_compressibility() -> None:
    w = amp.judge(amp.btrfs("raid1", 2), 100 * M, 100 * M, compressibility=50).warning
    assert "50% compressibility" in w and "50% of the written data" in w


def test_device_check_stores_amplification_and_says_when_unmodelled() -> None:
    m = amp.btrfs("raid1", 2)
    c = check("write", 64 * M, Counters(0, 128 * M + 512 * K), 1.0, model=m)
    assert c.warning == "" and c.ratio == pytest.approx(2.0078125)
    assert c.amplification is not None and c.amplification["expected_bytes"] == 128 * M
    # no model: compared with one copy, as before, and the record says why
    c = check("write", 64 * M, Counters(0, 40 * M), 1.0, unmodelled="no layout")
    assert "faster than the disks" in c.warning
    assert c.amplification is not None and c.amplification["unmodelled"] == "no layout"


# -- reread -----------------------------------------------------------------------------------
def test_reread_is_labelled_by_who_served_it() -> None:
    assert reread.served(100 * M, 2 * M).by == "cache"
    assert reread.served(100 * M, 10 * M).label == "cached by design"
    disks = reread.served(100 * M, 101 * M)
    assert disks.by == "disks" and disks.label == "served by the disks"
    assert "disk read, not a cached one" in disks.warning
    assert reread.served(100 * M, 50 * M).by == "partly cached"
    assert reread.served(100 * M, None).by == "unverified"
    # the device check of a cached test says the same
    w = check("read", 100 * M, Counters(100 * M, 0), 1.0, cached_by_design=True).warning
    assert "served by the disks" in w


# -- which model -----------------------------------------------------------------------------
def _pool(backend: str, layout: str, n: int, described: dict[str, object]) -> Pool:
    spec = PoolSpec(backend, layout, tuple(f"/dev/loop{i}" for i in range(n)), "pbgeo",
                    Path("/nonexistent"))  # fmt: skip
    return Pool(spec, Path("/nonexistent/pbgeo"), [f"loop{i}" for i in range(n)], described)


def test_a_study_pool_is_modelled_by_its_backend_from_its_read_back_description() -> None:
    runner = RecordingRunner({})
    described: dict[str, object] = {
        "topology": [{"kind": "raidz2", "width": 6, "leaves": []}],
        "vdev_ashift": [12],
        "properties": {"recordsize": {"value": "131072", "source": "local"}},
    }
    zfs = ZfsBackend(runner)
    m, why = zfs.write_model(_pool("zfs", "raidz2", 6, described), None)
    assert m is not None and why == "" and m.ratio == pytest.approx(1.5)
    # a zvol's 16K volblocksize on raidz2 of 6 at ashift 12: 4 data + 2 parity sectors
    v, _ = zfs.write_model(_pool("zfs", "raidz2", 6, described), 16384)
    assert v is not None and v.ratio == pytest.approx(1.5) and "volblocksize" in v.layout
    # ashift unreadable: 9, the least padding, so the model is a lower bound, and it says so
    m9, _ = zfs.write_model(_pool("zfs", "raidz2", 6, {**described, "vdev_ashift": []}), None)
    assert m9 is not None and m9.ratio <= m.ratio and "ashift unreadable" in m9.layout
    # btrfs: the data profile read back wins over the layout asked
    btrfs = BtrfsBackend(runner)
    b, _ = btrfs.write_model(_pool("btrfs", "raid1", 3, {"profiles": {"Data": "raid1c3"}}), None)
    assert b is not None and b.ratio == 3
    b1, _ = btrfs.write_model(_pool("btrfs", "raid1", 3, {}), None)
    assert b1 is not None and b1.ratio == 2
    md = MdBackend(runner)
    r, _ = md.write_model(_pool("md", "raid5", 4, {"level": "raid5", "raid_devices": 4}), None)
    assert r is not None and r.ratio == pytest.approx(4 / 3)
    r6, _ = md.write_model(_pool("md", "raid6", 5, {}), None)  # as asked: 5 members
    assert r6 is not None and r6.ratio == pytest.approx(5 / 3)
    none, why = DirectoryBackend(runner).write_model(_pool("directory", "", 0, {}), None)
    assert none is None and "no write model" in why


def test_btrfs_profile_from_sysfs(tmp_path: Path) -> None:
    fs = tmp_path / "1234-uuid"
    for d in ("devices/loop3", "devices/loop4", "allocation/data/raid1"):
        (fs / d).mkdir(parents=True)
    m, _ = geometry.btrfs_of(["loop4"], root=tmp_path)
    assert m is not None and m.ratio == 2 and "on 2 devices" in m.layout
    (fs / "allocation/data/single").mkdir()
    m, why = geometry.btrfs_of(["loop4"], root=tmp_path)
    assert m is None and "raid1, single" in why


def test_md_members_take_the_arrays_level(tmp_path: Path) -> None:
    for d in ("loop5", "loop6", "loop7"):
        (tmp_path / d / "holders" / "md127").mkdir(parents=True)
    (tmp_path / "md127" / "md").mkdir(parents=True)
    (tmp_path / "md127" / "md" / "level").write_text("raid5\n")
    (tmp_path / "md127" / "md" / "raid_disks").write_text("3\n")
    m, _ = geometry.md_of(["loop5", "loop6", "loop7"], sys_block=tmp_path)
    assert m is not None and m.ratio == pytest.approx(1.5)
    m, why = geometry.md_of(["loop5", "sda"], sys_block=tmp_path / "none")
    assert m is None and "not the members" in why


def test_untar_excess_is_explained_by_its_metadata_and_a_short_write_still_warns() -> None:
    model = amp.md("raid5", 4)  # 4/3
    why = "untar also writes the inodes and directory entries of 1,000 files"
    over = amp.judge(model, 100 * MiB_, 180 * MiB_, excess_why=why)  # > 4/3 × 1.25
    assert over.warning == "" and over.note.startswith("note: the devices wrote 1.80×")
    assert why in over.note and "more than metadata explains" not in over.note
    short = amp.judge(model, 100 * MiB_, 100 * MiB_, excess_why=why)  # one copy, no parity
    assert "did not reach the disks" in short.warning and short.note == ""
    # The workload's own reason for a shortfall replaces the list of usual suspects.
    lz4 = amp.judge(model, 100 * MiB_, 40 * MiB_, short_why="the pool compresses (lz4)")
    assert (
        "70% of the written data did not reach the disks (the pool compresses (lz4))"
        in (lz4.warning)
        and "fsync" not in lz4.warning
    )


MiB_ = 1 << 20
