"""Device resolution (guards/blockdev): every name a pool member goes by leads to the block
devices whose counters move. The sysfs and /dev trees are built here for the pure cases; the
root cases use real loop devices, partitions of one, and symlinks of our own (udev's
/dev/disk/by-* trees are symlinks of exactly this kind)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import needs_fio, poolbench, sh
from tests.plugins.tiers import machine_fixture

from poolbench.guards import blockdev, devices
from poolbench.system.runner import LocalRunner
from poolbench.zfs.pools import destroy as destroy_pool

pytestmark = pytest.mark.untimed


def _fake_sys(root: Path, tree: dict[str, list[str]]) -> Path:
    for name, slaves in tree.items():
        (root / name / "slaves").mkdir(parents=True)
        for s in slaves:
            (root / name / "slaves" / s).mkdir()
    return root


def test_dm_and_md_stacks_resolve_to_the_devices_beneath(tmp_path: Path) -> None:
    # md0 = raid over (dm-1 = LUKS on loop6) and loop5; dm-0 = linear over loop3p1 + loop4.
    sysb = _fake_sys(tmp_path, {"md0": ["dm-1", "loop5"], "dm-1": ["loop6"], "loop5": [],
                                "loop6": [], "dm-0": ["loop3p1", "loop4"], "loop3p1": [],
                                "loop4": []})  # fmt: skip
    assert blockdev.underlying("md0", sysb) == ["loop6", "loop5"]
    assert blockdev.underlying("dm-0", sysb) == ["loop3p1", "loop4"]
    assert blockdev.underlying("loop4", sysb) == ["loop4"]
    # A device with no sysfs entry at all (gone) is itself: its stat read will say so.
    assert blockdev.underlying("sdz", sysb) == ["sdz"]


def test_a_device_beneath_two_branches_is_counted_once(tmp_path: Path) -> None:
    sysb = _fake_sys(tmp_path, {"md1": ["dm-2", "dm-3"], "dm-2": ["loop7"], "dm-3": ["loop7"],
                                "loop7": []})  # fmt: skip
    assert blockdev.underlying("md1", sysb) == ["loop7"]


def test_bare_zpool_status_words_are_found_under_dev_disk(tmp_path: Path) -> None:
    dev = tmp_path
    for rel in ("loop3", "mapper/crypt0", "disk/by-id/ata-FAKE_1-part1",
                "disk/by-path/pci-0000:00:1f.2-ata-2", "disk/by-partuuid/4f1c-aa"):  # fmt: skip
        (dev / rel).parent.mkdir(parents=True, exist_ok=True)
        (dev / rel).write_text("")
    assert blockdev.leaf_word_path("loop3", dev) == str(dev / "loop3")
    assert blockdev.leaf_word_path("crypt0", dev) == str(dev / "mapper/crypt0")
    # OpenZFS prints a whole-disk vdev without the partition it made on it.
    assert blockdev.leaf_word_path("ata-FAKE_1", dev) == str(dev / "disk/by-id/ata-FAKE_1-part1")
    assert blockdev.leaf_word_path("pci-0000:00:1f.2-ata-2", dev) == str(
        dev / "disk/by-path/pci-0000:00:1f.2-ata-2")  # fmt: skip
    assert blockdev.leaf_word_path("4f1c-aa", dev) == str(dev / "disk/by-partuuid/4f1c-aa")
    assert blockdev.leaf_word_path("nothing-here", dev) is None
    assert blockdev.leaf_word_path(str(dev / "loop3"), dev) == str(dev / "loop3")


def test_a_plain_file_is_no_block_device(tmp_path: Path) -> None:
    f = tmp_path / "disk.img"
    f.write_text("x")
    (tmp_path / "link").symlink_to(f)
    assert blockdev.kernel_name(str(tmp_path / "link")) is None
    assert blockdev.counter_devices([str(f), str(tmp_path / "link")]) == []


# -- real loop devices -----------------------------------------------------------------------
def _wait_for(path: str) -> None:
    deadline = time.monotonic() + 10
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear after the partition table was written")
        time.sleep(0.1)


@machine_fixture(slow=True)
def named_loops(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Two loop devices, the first split into two partitions, and udev-style symlinks of our
    own to a whole disk and to a partition: name -> link path, plus the kernel names."""
    loops: list[str] = []
    try:
        for i, size in enumerate(("300M", "300M")):
            img = tmp_path / f"d{i}.img"
            sh("truncate", "-s", size, str(img))
            loops.append(sh("losetup", "--find", "--show", "--partscan", str(img)).stdout.strip())
        subprocess.run(["sfdisk", "--quiet", loops[0]], input="label: gpt\n,140M\n,\n",
                       check=True, capture_output=True, text=True)  # fmt: skip
        sh("partx", "--update", loops[0], check=False)
        _wait_for(f"{loops[0]}p2")
        links = tmp_path / "by-id"
        links.mkdir()
        (links / "ata-FAKE_DISK_1").symlink_to(loops[1])
        (links / "ata-FAKE_DISK_0-part1").symlink_to(f"{loops[0]}p1")
        (links / "ata-FAKE_DISK_0-part2").symlink_to(f"{loops[0]}p2")
        yield {"whole": str(links / "ata-FAKE_DISK_1"),
               "part1": str(links / "ata-FAKE_DISK_0-part1"),
               "part2": str(links / "ata-FAKE_DISK_0-part2"),
               "loop0": os.path.basename(loops[0]),
               "loop1": os.path.basename(loops[1])}  # fmt: skip
    finally:
        for d in loops:
            sh("losetup", "--detach", d, check=False)


def test_symlinked_and_partition_names_resolve_to_their_devices(
    named_loops: dict[str, str],
) -> None:
    n = named_loops
    got = blockdev.counter_devices([n["whole"], n["part1"], n["part2"]])
    # The partitions stay partitions: the whole disk's counters also carry its other partitions.
    assert got == [n["loop1"], f"{n['loop0']}p1", f"{n['loop0']}p2"]
    assert Path(f"/sys/class/block/{got[1]}/stat").exists()


@pytest.fixture
def zfs_on_links(zfs_fuse: None, named_loops: dict[str, str], tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    sh("zpool", "create", "-m", str(mnt), "pbdevnames", named_loops["whole"], named_loops["part1"])
    try:
        yield mnt
    finally:
        destroy_pool(LocalRunner(), "pbdevnames")


@needs_fio
def test_zfs_pool_from_symlinked_names_is_verified_and_an_arc_read_flagged(
    zfs_on_links: Path, named_loops: dict[str, str], tmp_path: Path
) -> None:
    t = devices.resolve(zfs_on_links, LocalRunner())
    want = [named_loops["loop1"], f"{named_loops['loop0']}p1"]
    assert t.devices == want, t.unverified_reason
    db = tmp_path / "r.db"
    p = poolbench("bench", str(zfs_on_links), "--size", "24M", "--workloads",
                  "seq-write,seq-read", "--min-runs", "2", "--max-runs", "2", "--json",
                  "--db", str(db))  # fmt: skip
    assert p.returncode == 0, p.stderr
    by = {r["workload"]: r for r in json.loads(p.stdout)["results"]}
    # Before device resolution this read was "unverified"; now the ARC read is named as RAM.
    assert any("measures RAM" in w for w in by["seq-read"]["warnings"]), by["seq-read"]
    assert not any("unverified" in w for w in by["seq-read"]["warnings"])
    assert by["seq-write"]["device_mean"] > 0
