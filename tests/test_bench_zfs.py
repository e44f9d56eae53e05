"""`poolbench bench` on an existing ZFS mount: the device guard counts the pool's member
devices and catches a read served by the ARC (which drop_caches does not empty)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import poolbench, sh

from poolbench.guards import cache
from poolbench.store import fingerprints
from poolbench.store.db import Store
from poolbench.system.runner import LocalRunner
from poolbench.zfs.pools import destroy as destroy_pool


@pytest.fixture
def zfs_mount(zfs_fuse: None, tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    loops: list[str] = []
    mnt = tmp_path / "mnt"
    created = False
    try:
        for i in range(2):
            img = tmp_path / f"d{i}.img"
            sh("truncate", "-s", "300M", str(img))
            loops.append(sh("losetup", "--find", "--show", str(img)).stdout.strip())
        sh("zpool", "create", "-m", str(mnt), "pbbenchzfs", *loops)
        created = True
        yield mnt, [d.removeprefix("/dev/") for d in loops]
    finally:
        if created:
            destroy_pool(LocalRunner(), "pbbenchzfs")
        for d in loops:
            sh("losetup", "--detach", d, check=False)


def test_zfs_members_are_counted_and_an_arc_read_is_flagged(
    zfs_mount: tuple[Path, list[str]], tmp_path: Path
) -> None:
    mnt, members = zfs_mount
    db = tmp_path / "r.db"
    # Data of the user's beside the bench: the fill level it runs at is part of its record.
    sh("dd", "if=/dev/urandom", f"of={mnt}/user-data", "bs=1M", "count=48", "conv=fsync")
    before = os.statvfs(mnt)
    p = poolbench("bench", str(mnt), "--size", "32M", "--workloads", "seq-write,seq-read",
                  "--min-runs", "2", "--max-runs", "2", "--json", "--db", str(db))  # fmt: skip
    assert p.returncode == 0, p.stderr
    by = {r["workload"]: r for r in json.loads(p.stdout)["results"]}
    # The writes reached the member devices ...
    assert by["seq-write"]["device_mean"] > 0
    assert not any("absorbed" in w for w in by["seq-write"]["warnings"])
    # ... but the read came from the ARC: poolbench must say the figure measures RAM.
    assert any("measures RAM" in w and "ARC" in w for w in by["seq-read"]["warnings"])
    import sqlite3

    con = sqlite3.connect(db)
    meta = json.loads(con.execute("SELECT metadata FROM runs").fetchone()[0])
    assert sorted(meta["target"]["devices"]) == sorted(members)
    # drop_caches never reaches the ARC; fincore's "nothing resident" is no proof on ZFS.
    for (text,) in con.execute("SELECT guards FROM measurements WHERE workload='seq-read'"):
        drop = json.loads(text)["cache"]
        arc = drop["arc_during_read"]
        assert drop["verified"] is not True, drop
        if cache.read_arcstats(cache.FUSE_ARCSTATS) is None:  # zfs-fuse without /zfs-kstat
            assert drop["verified"] is None and drop["arc"] == cache.UNOBSERVABLE, drop
            continue
        # zfs-fuse publishes its ARC counters: the 32 MiB file is in its ARC (100 MiB),
        # so (nearly) none of its 128 KiB blocks were fetched from the pool.
        assert arc["observable"] and arc["block_size"] == 128 * 1024, arc
        assert arc["blocks_from_pool"] * arc["block_size"] <= 0.25 * arc["app_bytes"], arc
        assert drop["verified"] is False
    assert any("the ARC served" in w for w in by["seq-read"]["warnings"]) or (
        cache.read_arcstats(cache.FUSE_ARCSTATS) is None
    )
    # CPU cost: fio's and the zfs-fuse daemon's, per GiB written and read
    for name in ("seq-write", "seq-read"):
        assert by[name]["cpu_s_per_gib"] is not None and by[name]["cpu_s_per_gib"] > 0
    # The pool behind the path, as read back: its layout, its disks (loop devices, said so),
    # its properties as zfs-fuse reports them, and how full it was.
    (stored,) = fingerprints.of_run(Store(db, mode="read"), 1)
    fp = stored.fingerprint
    assert (fp.pool.stack, fp.pool.name, fp.pool.dataset) == ("zfs", "pbbenchzfs", "pbbenchzfs")
    assert fp.pool.layout == "stripe:2" and fp.zfs == "zfs-fuse (pool version 23)"
    assert sorted(d.name for d in fp.disks) == sorted(members)
    for d in fp.disks:
        assert d.serial is None and d.firmware is None and d.size_bytes == 300 << 20
        assert d.note.startswith("loop device backed by") and "/d" in d.note
    assert fp.pool.properties["version"] == "23" and "guid" not in fp.pool.properties
    assert fp.pool.dataset_properties["mountpoint"] == str(mnt)
    assert (
        fp.pool.dataset_properties["compression"]
        == sh("zfs", "get", "-Hp", "-o", "value", "compression", "pbbenchzfs").stdout.strip()
    )
    fill = 1 - before.f_bfree / before.f_blocks  # 48 MiB of ~550 MiB
    assert fp.pool.size_bytes == pytest.approx(before.f_blocks * before.f_frsize, rel=0.02)
    assert fill > 0.07 and fp.fill == pytest.approx(fill, abs=0.01)
    assert fp.pool.fragmentation is None and any("fragmentation" in n for n in fp.notes)


def bench_cpu(mnt: Path, db: Path) -> tuple[float, list[dict[str, object]]]:
    p = poolbench("bench", str(mnt), "--size", "32M", "--workloads", "seq-write",
                  "--compressibility", "75", "--min-runs", "2", "--max-runs", "2", "--json",
                  "--db", str(db))  # fmt: skip
    assert p.returncode == 0, p.stderr
    (res,) = json.loads(p.stdout)["results"]
    import sqlite3

    rows = sqlite3.connect(db).execute("SELECT guards FROM measurements").fetchall()
    return float(res["cpu_s_per_gib"]), [json.loads(g)["cpu"] for (g,) in rows]


def test_gzip_costs_more_cpu_per_gib_than_no_compression(
    zfs_mount: tuple[Path, list[str]], tmp_path: Path
) -> None:
    mnt, _members = zfs_mount
    cost = {}
    for comp in ("off", "gzip"):
        sh("zfs", "create", "-o", f"compression={comp}", "-o", f"mountpoint={mnt}/{comp}",
           f"pbbenchzfs/{comp}")  # fmt: skip
        per_gib, records = bench_cpu(mnt / comp, tmp_path / f"{comp}.db")
        for r in records:
            # The zfs-fuse daemon does the compression; its time is counted by its pid.
            assert r["fs_scope"] == "zfs-fuse daemon" and r["fs_s"] is not None, r
            assert r["total_s"] == pytest.approx(r["fio_s"] + r["fs_s"], abs=1e-3)
            assert r["s_per_gib"] == pytest.approx(r["total_s"] / (32 / 1024), rel=1e-2)
        cost[comp] = per_gib
    print("CPU s/GiB:", cost)
    # gzip-6 compresses at tens of MB/s per core: several seconds per GiB at least, and
    # clearly more than writing the same data uncompressed; neither beyond minutes per GiB.
    assert 0.05 < cost["off"] < 120, cost
    assert cost["gzip"] > 1.5 * cost["off"] and 2 < cost["gzip"] < 600, cost


def test_direct_reads_on_zfs_fuse_go_through_its_arc_one_at_a_time(
    zfs_mount: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """--iodepth 16 runs random reads with O_DIRECT. zfs-fuse accepts it and still reads
    through its ARC (OpenZFS >= 2.3 goes around it: tests/guest/test_arc_guest.py), so the
    record must say the ARC counted the reads, and the cached file is still called RAM."""
    if cache.read_arcstats(cache.FUSE_ARCSTATS) is None:
        pytest.skip("this zfs-fuse publishes no ARC counters (/zfs-kstat is not mounted)")
    mnt, _members = zfs_mount
    db = tmp_path / "r.db"
    p = poolbench("bench", str(mnt), "--size", "32M", "--workloads", "rand-read-4k",
                  "--iodepth", "16", "--runtime", "2", "--min-runs", "2", "--max-runs", "2",
                  "--json", "--db", str(db))  # fmt: skip
    assert p.returncode == 0, p.stderr
    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute("SELECT ops, job_file, guards FROM measurements").fetchall()
    assert len(rows) == 2
    for ops, job, text in rows:
        assert "direct=1" in job.splitlines() and "iodepth=16" in job.splitlines()
        arc = json.loads(text)["cache"]["arc_during_read"]
        assert arc["direct"] is True and arc["ios"] == ops > 0, arc
        # The ARC counted the reads: O_DIRECT did not go around it. Not every one (27384 of
        # 40486 in one run): the dbuf cache above the ARC answers some without asking it.
        assert arc["demand_reads"] >= 0.25 * ops, arc
        assert f"the ARC saw {arc['demand_reads']} of {ops} reads" in arc["direct_io"], arc
        # zfs-fuse does each O_DIRECT read inside io_submit (measured: 97% of the run there)
        # while fio's distribution says 16 in flight: the record must say depth 1.
        depth = json.loads(text)["queue_depth"]
        assert depth["blocking_submit"] is True and depth["achieved_high"] == 1.0, depth
    warnings = json.loads(p.stdout)["results"][0]["warnings"]
    assert any("the ARC served ~100% of this read from RAM" in w for w in warnings), warnings
    assert any("depth-1 figure per job" in w for w in warnings), warnings
