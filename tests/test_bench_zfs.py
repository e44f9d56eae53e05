"""`poolbench bench` on an existing ZFS mount: the device guard counts the pool's member
devices and catches a read served by the ARC (which drop_caches does not empty)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import IS_ROOT, poolbench, sh

from poolbench.system.runner import LocalRunner
from poolbench.zfs.pools import destroy as destroy_pool

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="needs root (loop devices, zfs-fuse)")


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

    meta = json.loads(sqlite3.connect(db).execute("SELECT metadata FROM runs").fetchone()[0])
    assert sorted(meta["target"]["devices"]) == sorted(members)
