"""The ZFS backend's OpenZFS 2.x dialect on real OpenZFS pools (guest tier).

tests/test_backend_zfs.py checks the backend on zfs-fuse (its real-pool tests need the
zfs-fuse daemon, so they skip in the guest). Here the same life cycle runs against the
OpenZFS kernel module of vm/run-openzfs-tier.sh. For each case: create, verify (nothing
reported), read back the dialect, layout, ashift and properties, write and read 16 MiB with
fio across a cache drop (export and import), verify again, destroy; nothing remains. Members
are sparse files, loop devices over them, or the guest's whole scratch disks, which
`zpool create` partitions.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.plugins.tiers import machine_fixture

from poolbench.backends import sources
from poolbench.backends.base import Pool, PoolSpec, parse_topology
from poolbench.backends.zfs import ZfsBackend, expected_shape
from poolbench.safety.journal import Journal
from poolbench.system.runner import LocalRunner
from poolbench.workloads import fio, fiojob, library

pytestmark = pytest.mark.openzfs
MiB = 1 << 20


def sh(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True).stdout


def pools() -> list[str]:
    return [p for p in sh("zpool", "list", "-H", "-o", "name").split() if p.startswith("pboz")]


@dataclass
class Lab:
    runner: LocalRunner
    journal: Journal
    base: Path
    backend: ZfsBackend

    def spec(self, layout: str, devices: list[str], pool_options: dict[str, str] | None = None,
             **fs: str) -> PoolSpec:  # fmt: skip
        name = f"pboz{uuid.uuid4().hex[:8]}"
        return PoolSpec("zfs", layout, tuple(devices), name, self.base, pool_options or {}, fs)

    def disks(self, n: int, source: str) -> list[str]:
        if source == "whole":
            disks = os.environ.get("OZVM_DISKS", "").split()
            if len(disks) < n:
                pytest.skip(f"needs {n} scratch disks, the guest has {len(disks)}")
            for d in disks[:n]:
                subprocess.run(["wipefs", "-a", "-q", d], capture_output=True)
            return disks[:n]
        made = sources.provide(self.runner, self.journal, source=source,
                               scratch=self.base / "disks", sizes=[256 * MiB] * n)  # fmt: skip
        return made.devices


@machine_fixture(slow=True)
def lab() -> Iterator[Lab]:
    base = Path(tempfile.mkdtemp(prefix="pboz-zfs-", dir="/var/tmp"))
    runner = LocalRunner()
    journal = Journal(runner)
    try:
        yield Lab(runner, journal, base, ZfsBackend(runner))
    finally:
        left = journal.teardown()
        shutil.rmtree(base, ignore_errors=True)
        assert left == []
        assert pools() == []
        assert not [line for line in sh("losetup", "-a").splitlines() if str(base) in line]
        assert str(base) not in Path("/proc/self/mountinfo").read_text()


def test_the_backend_sees_openzfs_2(lab: Lab) -> None:
    a = lab.backend.check()
    assert (a.ok, a.dialect) == (True, "openzfs"), a
    assert a.version.startswith("zfs-2."), a.version


CASES = [
    # layout, disks, source, ashift, dataset properties
    ("stripe", 2, "files", "9", {}),
    ("mirror", 2, "loop", "12", {"recordsize": "1M", "compression": "lz4"}),
    ("raidz1", 3, "files", "12", {"compression": "zstd", "atime": "off", "sync": "disabled"}),
    ("raidz2", 4, "loop", "13", {"primarycache": "metadata"}),
    ("raidz3", 5, "files", "12", {"recordsize": "16K"}),
    ("raidz1:3+mirror:2", 5, "files", "9", {"compression": "zle"}),
    ("draid1:2d:1s", 5, "files", "12", {}),
    ("raidz1", 3, "whole", "12", {"compression": "lz4"}),
    ("mirror", 2, "whole", "9", {}),
]


@pytest.mark.parametrize(("layout", "n", "source", "ashift", "props"), CASES)
def test_pool_is_built_verified_measured_and_destroyed(
    lab: Lab, layout: str, n: int, source: str, ashift: str, props: dict[str, str]
) -> None:
    devices = lab.disks(n, source)
    spec = lab.spec(layout, devices, {"ashift": ashift}, **props)
    pool = lab.backend.create(spec, lab.journal)
    try:
        assert lab.backend.verify(pool) == []
        d = pool.described
        assert d["dialect"] == "openzfs" and d["zfs_version"].startswith("zfs-2.")
        want = expected_shape(parse_topology(layout, n))
        assert [(t["kind"], t["width"]) for t in d["topology"]] == want
        assert d["vdev_ashift"] == [int(ashift)] * len(want)
        for key, value in props.items():
            got = d["properties"][key]["value"]
            assert got == (str(int(value[:-1]) << (20 if value[-1] == "M" else 10))
                           if key == "recordsize" else value)  # fmt: skip
        if source == "whole":  # OpenZFS partitions a whole disk: the leaves are partitions
            assert all(leaf.startswith(tuple(devices)) and leaf[-1] == "1" for leaf in d["leaves"])
        params = fiojob.JobParams(directory=str(pool.mountpoint), size_bytes=16 * MiB)
        job = pool.spec.mount_root / f"{pool.spec.name}.fio"
        w = fio.run_job(lab.runner, fiojob.render(library.streaming("write"), params), job, "write")
        assert w.io_bytes == 16 * MiB
        drop = lab.backend.drop_cache(pool)
        assert drop["verified"], drop
        r = fio.run_job(lab.runner, fiojob.render(library.streaming("read"), params), job, "read")
        assert r.io_bytes == 16 * MiB and r.bw_bytes > 0
        job.unlink()
        assert lab.backend.verify(pool) == []  # the import brought back the same pool
    finally:
        lab.backend.destroy(pool, lab.journal)
    assert spec.name not in pools()
    assert not pool.mountpoint.exists()


def test_a_silently_different_ashift_and_property_are_reported(lab: Lab) -> None:
    devices = lab.disks(2, "files")
    made = lab.backend.create(lab.spec("mirror", devices, {"ashift": "9"}), lab.journal)
    try:
        asked = PoolSpec("zfs", "raidz1", made.spec.devices, made.spec.name, lab.base,
                         {"ashift": "12"}, {"recordsize": "32K"})  # fmt: skip
        text = "\n".join(lab.backend.verify(Pool(asked, made.mountpoint, [], made.described)))
        assert "top-level vdev 0 has ashift 9, not 12 as asked" in text
        assert "layout is mirror:2, not raidz1:2 as asked" in text
        assert "recordsize is 131072, not 32K as asked" in text
    finally:
        lab.backend.destroy(made, lab.journal)


def test_a_zvol_target_is_made_measured_across_a_cache_drop_and_goes_with_its_pool(
    lab: Lab,
) -> None:
    """A sparse 8K zvol on raidz1 of 3 (ashift 12): made with its device node, written and
    read with O_DIRECT across an export/import (which re-creates the node), and charged
    what raidz1 of 3 charges an 8K block: 2 data + 1 parity sectors padded to 4, times the
    vdev's 128K deflate ratio 32/48, i.e. 1.33 bytes per byte."""

    devices = lab.disks(3, "loop")
    spec = PoolSpec("zfs", "raidz1", tuple(devices), f"pboz{uuid.uuid4().hex[:8]}", lab.base,
                    {"ashift": "12"}, {"compression": "off"},
                    volume={"target": "zvol", "volblocksize": "8K"})  # fmt: skip
    lab.backend.validate(spec)
    pool = lab.backend.create(spec, lab.journal)
    try:
        made = lab.backend.create_volume(pool, 32 * MiB)
        node = Path(made["path"])
        assert node == Path(f"/dev/zvol/{spec.name}/pbvol") and node.exists(), made
        assert (made["volblocksize"], made["volsize"]) == (8192, 33 * MiB), made
        params = fiojob.JobParams(str(pool.mountpoint), 32 * MiB, device=str(node))
        job = pool.spec.mount_root / f"{pool.spec.name}.fio"
        w = fio.run_job(lab.runner, fiojob.render(library.streaming("write"), params), job, "write")
        assert w.io_bytes == 32 * MiB
        drop = lab.backend.drop_cache(pool)
        assert drop["verified"] is not False and node.exists(), drop
        r = fio.run_job(lab.runner, fiojob.render(library.streaming("read"), params), job, "read")
        assert r.io_bytes == 32 * MiB
        space = lab.backend.volume_space(pool)
        assert space["logicalreferenced"] >= 32 * MiB, space
        charged = space["referenced"] / space["logicalreferenced"]
        assert abs(charged / (4 / 2 * 32 / 48) - 1) <= 0.03, space
        job.unlink()
    finally:
        lab.backend.destroy(pool, lab.journal)
    assert spec.name not in pools() and not Path(f"/dev/zvol/{spec.name}").exists()
