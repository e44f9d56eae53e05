"""Vdev sources on real loop devices: sparse files, loops, whole/partition/slice; the journal
(including loop_intent) leaves nothing behind. Everything lives under /var/tmp/pbbk-src-*."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.plugins.tiers import machine_fixture

from poolbench.backends import sources
from poolbench.backends.registry import BACKENDS, make
from poolbench.errors import UsageError
from poolbench.safety.journal import Journal
from poolbench.study.model import Disks
from poolbench.system.runner import LocalRunner, RecordingRunner

pytestmark = pytest.mark.untimed

MiB = 1 << 20


def loops_over(base: Path) -> list[str]:
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [line.split(":")[0] for line in out.splitlines() if str(base) in line]


@machine_fixture(slow=False)
def base() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="pbbk-src-", dir="/var/tmp"))
    try:
        yield d
    finally:
        for dev in loops_over(d):  # only if a test failed before its own teardown
            subprocess.run(["losetup", "--detach", dev], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def sys_block(dev: str) -> Path:
    return Path("/sys/class/block") / os.path.basename(dev)


def test_sparse_files_cost_nothing_and_are_removed(base: Path) -> None:
    j = Journal(LocalRunner())
    ds = sources.provide(LocalRunner(), j, source="files", scratch=base / "s", sizes=[64 * MiB] * 5)
    assert len(ds.devices) == 5 and ds.block_devices == []
    for f in ds.files:
        st = f.stat()
        assert st.st_size == 64 * MiB and st.st_blocks == 0
    assert j.teardown() == []
    assert not (base / "s").exists()


@pytest.mark.parametrize("mode", ["whole", "partition", "slice"])
def test_loops_and_partitions(base: Path, mode: str) -> None:
    r = LocalRunner()
    j = Journal(r)
    ds = sources.provide(r, j, source="loop", scratch=base / "s", sizes=[128 * MiB] * 3,
                         partitioning=mode, slice_bytes=96 * MiB)  # fmt: skip
    try:
        assert len(ds.whole) == 3 and len(loops_over(base)) == 3
        for loop, f in zip(ds.whole, ds.files, strict=True):
            node = sys_block(loop)
            assert (node / "loop" / "backing_file").read_text().strip() == str(f)
            assert (node / "loop" / "dio").read_text().strip() == "1"  # direct I/O
        for dev, loop in zip(ds.devices, ds.whole, strict=True):
            size = int((sys_block(dev) / "size").read_text()) * 512
            if mode == "whole":
                assert dev == loop and size == 128 * MiB
            else:
                assert dev == f"{loop}p1" and (sys_block(dev) / "partition").exists()
                # GPT: 1 MiB in front; sfdisk ends the spanning partition on a MiB boundary
                # before the 33 sectors of backup table.
                assert size == (96 * MiB if mode == "slice" else 128 * MiB - 2 * MiB)
        assert ds.block_devices == [os.path.basename(d) for d in ds.devices]
    finally:
        assert j.teardown() == []
    assert loops_over(base) == [] and not (base / "s").exists()


def test_loop_intent_detaches_a_loop_whose_name_was_never_recorded(base: Path) -> None:
    mine, other = base / "mine.img", base / "other.img"
    for f in (mine, other):
        f.write_bytes(b"")
        os.truncate(f, 16 * MiB)
    j = Journal(LocalRunner(), base / "journal.jsonl")
    j.loop_intent(str(mine))  # written before losetup ... then poolbench is killed
    dev = subprocess.run(["losetup", "--find", "--show", str(mine)],
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    keep = subprocess.run(["losetup", "--find", "--show", str(other)],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    try:
        loaded = Journal.load(LocalRunner(), base / "journal.jsonl")  # the next start
        assert loaded.teardown() == []
        assert (
            not (sys_block(dev) / "loop").exists()
            or str(mine) not in (sys_block(dev) / "loop" / "backing_file").read_text()
        )
        assert (sys_block(keep) / "loop" / "backing_file").read_text().strip() == str(other)
        assert not (base / "journal.jsonl").exists()
    finally:
        subprocess.run(["losetup", "--detach", keep], capture_output=True)


def test_make_disks_from_a_study_and_teardown_leaves_nothing(base: Path) -> None:
    r = LocalRunner()
    j = Journal(r)
    disks = Disks(count=2, size="80M", source="loop", vdev_source="slice", slice_size="64M")
    devices = sources.make_disks(r, j, disks, base / "trial")
    assert [Path(d).name[-2:] for d in devices] == ["p1", "p1"]
    assert sources.make_disks(r, j, Disks(count=0), base / "none") == []
    assert j.teardown() == []
    assert loops_over(base) == [] and os.listdir(base) == []


def _signatures(dev: str) -> str:
    return subprocess.run(["wipefs", "--no-act", "--noheadings", dev], capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def test_a_given_disk_is_partitioned_for_a_slice_and_given_back_blank(base: Path) -> None:
    # A device the user gave (here a loop device the test made, not poolbench): the slice
    # vdev source writes a GPT on it; teardown must leave it as found, with no table, or the
    # next study refuses the disk as "in use: has a gpt partition table" (found in the
    # OpenZFS guest: vdev-source, then qd-curve on the same disks).
    f = base / "given.img"
    f.write_bytes(b"")
    os.truncate(f, 160 * MiB)
    dev = subprocess.run(["losetup", "--find", "--show", str(f)],
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    try:
        assert _signatures(dev) == ""
        j = Journal(LocalRunner())
        parts = sources.partition(LocalRunner(), j, [dev], "slice", 64 * MiB)
        assert parts == [dev + "p1"] and Path(parts[0]).exists() and "gpt" in _signatures(dev)
        assert j.teardown() == []
        assert not Path(dev + "p1").exists() and _signatures(dev) == ""
        # A table that is no longer only ours (a second partition appeared) is left alone.
        sources.partition(LocalRunner(), j, [dev], "slice", 64 * MiB)
        subprocess.run(["sfdisk", "--quiet", "--append", dev], input="size=32MiB\n",
                       text=True, check=True, capture_output=True)  # fmt: skip
        subprocess.run(["partx", "--add", dev], capture_output=True)
        left = j.teardown()
        assert len(left) == 1 and "not only" in left[0] and "gpt" in _signatures(dev), left
    finally:
        # The partitions sfdisk and partx added stay registered on the loop device after it
        # is detached (it was attached without --partscan, so detaching drops none): the
        # next test to get this loop device would see them and be refused.
        subprocess.run(["partx", "--delete", dev], capture_output=True)
        subprocess.run(["wipefs", "--all", "--quiet", dev], capture_output=True)
        subprocess.run(["losetup", "--detach", dev], capture_output=True)


def test_refusals_without_touching_anything(tmp_path: Path) -> None:
    rec = RecordingRunner()
    j = Journal(rec)
    with pytest.raises(UsageError, match="only through the safety layer"):
        sources.provide(rec, j, source="devices")
    with pytest.raises(UsageError, match="needs block devices, not plain files"):
        sources.provide(rec, j, source="files", scratch=tmp_path / "x", sizes=[MiB],
                        partitioning="slice", slice_bytes=64 * MiB)  # fmt: skip
    with pytest.raises(UsageError, match="needs a slice size"):
        sources.partition(rec, j, ["/dev/loop0"], "slice")
    with pytest.raises(UsageError, match="Unknown disk source"):
        sources.provide(rec, j, source="nbd")
    assert rec.argvs == []


def test_parse_disks_and_partition_names() -> None:
    assert sources.parse_disks("5x512M") == ([512 * MiB] * 5, [])
    assert sources.parse_disks("2x1G,512M") == ([1 << 30, 1 << 30, 512 * MiB], [])
    assert sources.parse_disks("/dev/sdb,/dev/sdc") == ([], ["/dev/sdb", "/dev/sdc"])
    with pytest.raises(UsageError, match="mixes sizes and devices"):
        sources.parse_disks("/dev/sdb,2x1G")
    assert sources.partition_name("/dev/loop3") == "/dev/loop3p1"
    assert sources.partition_name("/dev/nvme0n1") == "/dev/nvme0n1p1"
    assert sources.partition_name("/dev/sdb") == "/dev/sdb1"
    assert sources.sfdisk_script("slice", 256 * MiB) == "label: gpt\nsize=262144KiB\n"


def test_dry_run_records_the_commands_and_makes_nothing(tmp_path: Path) -> None:
    rec = RecordingRunner(dry_run=True)
    j = Journal(rec)
    ds = sources.provide(rec, j, source="loop", scratch=tmp_path / "s", sizes=[MiB] * 2,
                         partitioning="partition")  # fmt: skip
    assert [a[0] for a in rec.argvs] == ["losetup", "losetup", "sfdisk", "sfdisk"]
    assert len(ds.devices) == 2 and not (tmp_path / "s").exists()
    assert j.teardown() == []


def test_registry_is_a_plain_dict_of_factories() -> None:
    assert sorted(BACKENDS) == ["btrfs", "directory", "md", "zfs"]
    assert make("btrfs", RecordingRunner()).name == "btrfs"
    with pytest.raises(UsageError, match="Unknown backend 'lvm'"):
        make("lvm", RecordingRunner())


@pytest.mark.usefixtures("machine")  # it drops the page cache: the machine's chain
def test_directory_backend_measures_an_existing_directory_as_it_is(tmp_path: Path) -> None:
    from poolbench.backends.base import PoolSpec

    r = LocalRunner()
    b = make("directory", r)
    spec = PoolSpec("directory", str(tmp_path), (), "pbbkdir", tmp_path)
    j = Journal(r)
    pool = b.create(spec, j)
    assert pool.mountpoint == tmp_path and j.entries == []
    assert b.verify(pool) == [] and pool.described["fstype"]
    (tmp_path / "data.0").write_bytes(os.urandom(1 << 20))
    drop = b.drop_cache(pool)
    assert drop["files_checked"] == 1
    if os.geteuid() == 0 and pool.described["fstype"] not in ("fuse", "fuse.zfs", "zfs"):
        assert drop["verified"], drop
    b.destroy(pool, j)
    assert (tmp_path / "data.0").exists()  # nothing of the user's is removed
    with pytest.raises(UsageError, match="is not an existing directory"):
        b.validate(PoolSpec("directory", str(tmp_path / "nope"), (), "x", tmp_path))


def test_partial_teardown_keeps_the_other_entries_in_the_journal_file(tmp_path: Path) -> None:
    rec = RecordingRunner()
    path = tmp_path / "j.jsonl"
    j = Journal(rec, path, mountinfo=tmp_path / "mountinfo")
    (tmp_path / "mountinfo").write_text("")
    disk, mp = tmp_path / "disk0.img", tmp_path / "mnt"
    disk.write_bytes(b"")
    mp.mkdir()
    j.path_created(str(disk))
    j.dir_created(str(mp))
    assert j.teardown(only=lambda e: e["kind"] == "dir") == []
    assert not mp.exists() and disk.exists()
    assert [e["kind"] for e in Journal.load(rec, path).entries] == ["path"]
    assert j.teardown() == [] and not path.exists() and not disk.exists()
