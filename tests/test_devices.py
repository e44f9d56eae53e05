from pathlib import Path

import pytest

from poolbench.guards import devices
from poolbench.guards.devices import Counters, MountInfo, check, mount_of, read_counters
from poolbench.system.runner import LocalRunner

MiB = 2**20


def test_read_from_cache_is_flagged() -> None:
    c = check("read", 100 * MiB, Counters(5 * MiB, 0), 1.0)
    assert "measures RAM" in c.warning and c.ratio == 0.05


def test_read_served_by_devices_passes_with_readahead() -> None:
    assert check("read", 100 * MiB, Counters(104 * MiB, 0), 1.0).warning == ""


def test_write_not_absorbed_is_flagged_and_compressibility_named() -> None:
    assert "faster than the disks" in check("write", 100 * MiB, Counters(0, 50 * MiB), 1.0).warning
    w = check("write", 100 * MiB, Counters(0, 50 * MiB), 1.0, compressibility=50).warning
    assert "50% compressibility" in w


def test_a_read_of_compressed_data_is_told_from_a_cached_one() -> None:
    # Measured on OpenZFS 2.3.2, lz4, fio's buffer_compress_percentage=50 (compressratio
    # 1.96x): the disks served 51% of a cold read's bytes. That is compression, not a cache.
    w = check("read", 100 * MiB, Counters(51 * MiB, 0), 1.0, compressibility=50).warning
    assert "50% compressibility lets a compressing filesystem store 50%" in w, w
    assert "decompressed bytes" in w and "measures RAM" not in w
    # Far below what compression explains: still a cache (or never-written ranges).
    w = check("read", 100 * MiB, Counters(20 * MiB, 0), 1.0, compressibility=50).warning
    assert "measures RAM" in w
    # Incompressible data declared, half served: a cache, as before.
    assert "measures RAM" in check("read", 100 * MiB, Counters(51 * MiB, 0), 1.0).warning


def test_cached_test_carries_a_cache_warning_saying_it_is_intended() -> None:
    w = check("read", 100 * MiB, Counters(0, 0), 1.0, cached_by_design=True).warning
    assert "measures the cache" in w and "intends" in w


def test_mount_of_picks_the_longest_prefix() -> None:
    table = [
        MountInfo("/", "ext4", "/dev/vda", "254:0"),
        MountInfo("/mnt", "tmpfs", "t", "0:50"),
        MountInfo("/mnt/pool", "btrfs", "/dev/loop1", "0:51"),
    ]
    assert mount_of(Path("/mnt/pool/x"), table).fstype == "btrfs"
    assert mount_of(Path("/mnt/poolx"), table).fstype == "tmpfs"
    assert mount_of(Path("/etc"), table).fstype == "ext4"


def test_counters_from_a_fake_sys_tree(tmp_path: Path) -> None:
    d = tmp_path / "loop9"
    d.mkdir()
    # fields: reads merges sectors_read ticks writes merges sectors_written ...
    d.joinpath("stat").write_text("10 0 2048 5 20 0 4096 7 0 9 12\n")
    c = read_counters(["loop9"], sys_block=tmp_path)["loop9"]
    assert (c.read_bytes, c.write_bytes) == (2048 * 512, 4096 * 512)


def test_tmpfs_is_unverified(tmpfs: Path) -> None:
    t = devices.resolve(tmpfs, LocalRunner())
    assert not t.verifiable and "tmpfs" in t.unverified_reason


def test_ext4_on_loop_resolves_to_the_loop_device(make_loop_fs) -> None:  # type: ignore[no-untyped-def]
    fs = make_loop_fs("64M")
    t = devices.resolve(fs.mountpoint / ".", LocalRunner())
    assert t.devices == [fs.name]


@pytest.mark.usefixtures("machine")  # loop devices and a mount made here
def test_btrfs_raid1_resolves_to_every_member(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if not shutil.which("mkfs.btrfs"):
        import pytest

        pytest.skip("btrfs-progs not installed")
    imgs = [tmp_path / f"b{i}.img" for i in range(2)]
    loops: list[str] = []
    mnt = tmp_path / "m"
    mnt.mkdir()
    try:
        for img in imgs:
            subprocess.run(["truncate", "-s", "300M", str(img)], check=True)
            loops.append(
                subprocess.run(
                    ["losetup", "--find", "--show", str(img)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout.strip()
            )
        subprocess.run(
            ["mkfs.btrfs", "-q", "-f", "-d", "raid1", "-m", "raid1", *loops],
            check=True,
            capture_output=True,
        )
        subprocess.run(["mount", loops[0], str(mnt)], check=True)
        t = devices.resolve(mnt, LocalRunner())
        assert sorted(t.devices) == sorted(x.removeprefix("/dev/") for x in loops)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        for lp in loops:
            subprocess.run(["losetup", "--detach", lp], check=False)
