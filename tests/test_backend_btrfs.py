"""The btrfs backend on real loop devices: raid1, raid10, raid5 (and raid1c3), each created,
verified (profiles from `btrfs filesystem df`, compression from the mount options), measured
with a short fio write + cold read, and destroyed. Everything lives under /var/tmp/pbbk-btrfs-*
and is removed through the journal; each test checks nothing remains.
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
from poolbench.backends.base import Pool, PoolSpec
from poolbench.backends.btrfs import BtrfsBackend, _same_compress, parse_df
from poolbench.errors import UsageError
from poolbench.safety.journal import Journal
from poolbench.system.runner import LocalRunner, RecordingRunner
from poolbench.workloads import fio, fiojob, library

pytestmark = pytest.mark.untimed

MiB = 1 << 20
needs_btrfs = pytest.mark.skipif(
    shutil.which("mkfs.btrfs") is None, reason="needs btrfs-progs (Debian: btrfs-progs)"
)


@dataclass
class Lab:
    runner: LocalRunner
    journal: Journal
    base: Path
    backend: BtrfsBackend

    def loops(self, n: int, size: int = 256 * MiB) -> list[str]:
        return sources.provide(self.runner, self.journal, source="loop",
                               scratch=self.base / "disks", sizes=[size] * n).devices  # fmt: skip

    def spec(self, layout: str, devices: list[str], **fs: str) -> PoolSpec:
        return PoolSpec("btrfs", layout, tuple(devices), f"pbbk{uuid.uuid4().hex[:8]}",
                        self.base, {}, fs)  # fmt: skip


@machine_fixture(slow=True)
def lab() -> Iterator[Lab]:
    base = Path(tempfile.mkdtemp(prefix="pbbk-btrfs-", dir="/var/tmp"))
    runner = LocalRunner()
    journal = Journal(runner)
    try:
        yield Lab(runner, journal, base, BtrfsBackend(runner))
    finally:
        left = journal.teardown()
        shutil.rmtree(base, ignore_errors=True)
        assert left == []
        losetup = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
        assert str(base) not in losetup
        assert str(base) not in Path("/proc/self/mountinfo").read_text()


def short_fio(lab: Lab, pool: Pool) -> None:
    params = fiojob.JobParams(directory=str(pool.mountpoint), size_bytes=32 * MiB)
    job = lab.base / "job.fio"
    w = fio.run_job(lab.runner, fiojob.render(library.streaming("write"), params), job, "write")
    assert w.io_bytes == 32 * MiB
    drop = lab.backend.drop_cache(pool)
    assert drop["verified"], drop
    assert drop["files_checked"] == 1 and drop["resident_after"] == 0
    r = fio.run_job(lab.runner, fiojob.render(library.streaming("read"), params), job, "read")
    assert r.io_bytes == 32 * MiB


CASES = [
    ("raid1", 2, {"compression": "zstd:1"}, "raid1"),
    ("raid10", 4, {"compression": "lzo"}, "raid10"),
    ("raid5", 3, {"compression": "zstd"}, "raid1"),  # raid5 data keeps raid1 metadata
    ("raid1c3", 3, {}, "raid1c3"),
]


@needs_btrfs
@pytest.mark.parametrize(("layout", "n", "fs", "metadata"), CASES)
def test_btrfs_is_built_verified_measured_and_destroyed(
    lab: Lab, layout: str, n: int, fs: dict[str, str], metadata: str
) -> None:
    devices = lab.loops(n)
    pool = lab.backend.create(lab.spec(layout, devices, **fs), lab.journal)
    assert lab.backend.verify(pool) == []
    d = pool.described
    assert d["profiles"]["Data"] == layout and d["profiles"]["Metadata"] == metadata
    assert sorted(d["devices"]) == sorted(devices)
    assert sorted(pool.block_devices) == sorted(os.path.basename(x) for x in devices)
    comp = fs.get("compression")
    if comp:
        shown = "zstd:3" if comp == "zstd" else comp
        assert f"compress={shown}" in d["mount_options"].split(",")
    short_fio(lab, pool)
    assert lab.backend.verify(pool) == []  # mounted again with the same options
    lab.backend.destroy(pool, lab.journal)
    assert not pool.mountpoint.exists()
    assert str(pool.mountpoint) not in Path("/proc/self/mountinfo").read_text()


@needs_btrfs
def test_a_different_profile_and_missing_compression_are_reported(lab: Lab) -> None:
    devices = lab.loops(2)
    made = lab.backend.create(lab.spec("raid0", devices), lab.journal)
    asked = PoolSpec("btrfs", "raid1", made.spec.devices, made.spec.name, lab.base, {},
                     {"compression": "zstd"})  # fmt: skip
    problems = lab.backend.verify(Pool(asked, made.mountpoint, [], {}))
    assert "data profile is raid0, not raid1" in problems
    assert any("not compress=zstd" in p for p in problems)
    lab.backend.destroy(made, lab.journal)


def test_impossible_specs_are_refused() -> None:
    b = BtrfsBackend(RecordingRunner())
    devs = ("/dev/loop0", "/dev/loop1")

    def spec(layout: str, devices: tuple[str, ...] = devs, **kw: str) -> PoolSpec:
        return PoolSpec("btrfs", layout, devices, "pbbkx", Path("/var/tmp/x"), {}, kw)

    with pytest.raises(UsageError, match="raid6 needs at least 3 devices, not 2"):
        b.validate(spec("raid6"))
    with pytest.raises(UsageError, match="raid1c3 needs at least 3 devices"):
        b.validate(spec("raid1c3"))
    with pytest.raises(UsageError, match="not a btrfs data profile"):
        b.validate(spec("raidz1"))
    with pytest.raises(UsageError, match="needs block devices, not plain files"):
        b.validate(spec("raid1", ("/var/tmp/a.img", "/var/tmp/b.img")))
    with pytest.raises(UsageError, match="not a btrfs compress= value"):
        b.validate(spec("raid1", compression="lz4"))
    with pytest.raises(UsageError, match="given twice"):
        b.validate(spec("raid1", ("/dev/loop0", "/dev/loop0")))


def test_command_lines_and_parsing() -> None:
    b = BtrfsBackend(RecordingRunner())
    s = PoolSpec("btrfs", "raid5", ("/dev/loop0", "/dev/loop1", "/dev/loop2"), "pbbkx",
                 Path("/var/tmp/x"), {}, {"compression": "zstd:3"})  # fmt: skip
    assert b.mkfs_argv(s) == ["mkfs.btrfs", "-f", "-q", "-L", "pbbkx", "-d", "raid5", "-m",
                              "raid1", "/dev/loop0", "/dev/loop1", "/dev/loop2"]  # fmt: skip
    assert b.mount_argv(s) == ["mount", "-t", "btrfs", "-o",
                               "device=/dev/loop1,device=/dev/loop2,compress=zstd:3",
                               "/dev/loop0", "/var/tmp/x/pbbkx"]  # fmt: skip
    df = ("Data, single: total=0, used=0\nData, RAID5: total=201326592, used=0\n"
          "System, RAID1: total=8388608, used=16384\nMetadata, RAID1: total=3, used=1\n"
          "GlobalReserve, single: total=5767168, used=0\n")  # fmt: skip
    assert parse_df(df) == {"Data": "raid5", "System": "raid1", "Metadata": "raid1"}
    assert _same_compress("zstd", "rw,compress=zstd:3,space_cache=v2")
    assert not _same_compress("zstd:1", "rw,compress=zstd:3")
    assert _same_compress("no", "rw,space_cache=v2")
