"""Issue 16 items 3, 4 and 8 on real OpenZFS (guest tier).

- A pool built from symlinked names (a by-id-like directory of our own) resolves to its loop
  devices: OpenZFS's `zpool status` without -P prints only "ata-FAKE_0", so poolbench reads
  the leaves with -P; the read that the ARC served is then flagged, not "unverified".
- `zpool iostat -vlp` is read back after a measurement: the members' rows show the writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolbench.backends.base import Pool, PoolSpec
from poolbench.backends.zfs import ZfsBackend
from poolbench.engine.pool_hooks import PoolHooks
from poolbench.system.runner import LocalRunner
from poolbench.workloads.library import get

pytestmark = pytest.mark.openzfs
MiB = 1 << 20
BY_ID = Path("/dev/disk/by-id")  # in the throw-away guest only (pytestmark: openzfs)


def sh(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout


@pytest.fixture
def linked_pool() -> Iterator[tuple[Path, list[str]]]:
    base = Path(tempfile.mkdtemp(prefix="pbozdev-", dir="/var/tmp"))
    loops: list[str] = []
    links: list[Path] = []
    try:
        for i in range(2):
            sh("truncate", "-s", "256M", str(base / f"d{i}.img"))
            loops.append(sh("losetup", "--find", "--show", str(base / f"d{i}.img")).strip())
        # The links go where udev puts them, /dev/disk/by-id: OpenZFS shortens only names
        # under /dev (a link under /var/tmp is printed in full, and nothing is missed).
        BY_ID.mkdir(parents=True, exist_ok=True)
        for i, d in enumerate(loops):
            link = BY_ID / f"ata-FAKE_{i}"
            link.unlink(missing_ok=True)  # a link of an earlier, killed run of this test
            link.symlink_to(d)
            links.append(link)
        sh("zpool", "create", "-f", "-m", str(base / "mnt"), "pbozdev", "mirror",
           *map(str, links))  # fmt: skip
        yield base / "mnt", [os.path.basename(d) for d in loops]
    finally:
        subprocess.run(["zpool", "destroy", "-f", "pbozdev"], capture_output=True)
        for d in loops:
            subprocess.run(["losetup", "--detach", d], capture_output=True)
        for link in links:
            link.unlink(missing_ok=True)
        subprocess.run(["rm", "-rf", str(base)])


def test_symlinked_members_are_found_and_an_arc_read_flagged(
    linked_pool: tuple[Path, list[str]], tmp_path: Path
) -> None:
    mnt, loops = linked_pool
    status = sh("zpool", "status", "pbozdev")
    assert "ata-FAKE_0" in status and "/by-id/" not in status  # the bare name: the old miss
    db = tmp_path / "r.db"
    argv = [sys.executable, "-m", "poolbench", "bench", str(mnt), "--size", "32M",
            "--workloads", "seq-write,seq-read", "--min-runs", "2", "--max-runs", "2",
            "--json", "--db", str(db)]  # fmt: skip
    p = subprocess.run(argv, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    by = {r["workload"]: r for r in json.loads(p.stdout)["results"]}
    assert any("measures RAM" in w for w in by["seq-read"]["warnings"]), by["seq-read"]
    import sqlite3

    meta = json.loads(sqlite3.connect(db).execute("SELECT metadata FROM runs").fetchone()[0])
    # OpenZFS partitions nothing here (the members are given as loop links, not whole disks).
    assert sorted(meta["target"]["devices"]) == sorted(loops)
    # Both mirror members absorbed each write: per-member rows stored with the measurement.
    g = json.loads(sqlite3.connect(db).execute(
        "SELECT guards FROM measurements WHERE workload='seq-write'").fetchone()[0])  # fmt: skip
    assert sorted(g["members"]) == sorted(loops)
    assert all(m["write_bytes"] >= 32 * MiB for m in g["members"].values())
    # The run's fingerprint as OpenZFS gives it (zpool get -Hp ... all, fragmentation, the
    # ARC's ceiling from arcstats): what zfs-fuse's path never reads.
    from poolbench.records.fingerprint import Fingerprint

    (text,) = sqlite3.connect(db).execute("SELECT record FROM fingerprints").fetchone()
    fp = Fingerprint.from_text(text)
    version = sh("zfs", "version").splitlines()[0].strip()
    assert fp.zfs is not None and version in fp.zfs, (fp.zfs, version)
    assert (fp.pool.stack, fp.pool.name, fp.pool.layout) == ("zfs", "pbozdev", "mirror:2")
    assert fp.pool.properties["ashift"] == sh("zpool", "get", "-Hpo", "value", "ashift",
                                              "pbozdev").strip()  # fmt: skip
    assert fp.pool.fragmentation is not None and 0 <= fp.pool.fragmentation <= 100
    arc_max = next(int(line.split()[2]) for line in
                   Path("/proc/spl/kstat/zfs/arcstats").read_text().splitlines()
                   if line.startswith("c_max "))  # fmt: skip
    assert fp.arc_max_bytes == arc_max and fp.ram_bytes and fp.ram_bytes > arc_max
    assert sorted(d.name for d in fp.disks) == sorted(loops)
    assert all(d.serial is None and "loop" in d.note for d in fp.disks), fp.disks


def test_zpool_iostat_snapshot_after_a_measurement(linked_pool: tuple[Path, list[str]]) -> None:
    mnt, _loops = linked_pool
    runner = LocalRunner()
    backend = ZfsBackend(runner)
    spec = PoolSpec("zfs", "mirror", (), "pbozdev", mnt.parent, {}, {})
    pool = Pool(spec, mnt, [], {})
    with open(mnt / "f", "wb") as fh:
        fh.write(os.urandom(8 * MiB))
        os.fsync(fh.fileno())
    said = PoolHooks(runner, backend, pool).after(get("seq-write"))
    rows = {r["name"]: r for r in said["zpool_iostat"]}
    assert "pbozdev" in rows and "ata-FAKE_0" in rows and "ata-FAKE_1" in rows
    for leaf in ("ata-FAKE_0", "ata-FAKE_1"):
        assert rows[leaf]["write_ops"] and rows[leaf]["write_ops"] > 0
        assert rows[leaf]["disk_wait_write_ns"] is not None
