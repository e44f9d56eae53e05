"""A cold metadata read reaches the disks: nothing poolbench does between its cache drop and
the timed stat may load the files' inodes or dnodes again.

Found in the OpenZFS guest (fs-compare, meta-stat-seq of 200 files): the disks read 512 bytes
on ZFS and 0 on btrfs, because the cache drop's own check (open and stat every file after the
remount) and a listing of the directory after the export/import (which makes OpenZFS prefetch
every dnode) warmed what the read measures. Real zfs-fuse and btrfs pools on loop devices, the
real CLI."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import poolbench, stored_rows

FILES = 200


def test_cold_stat_of_every_file_reads_their_metadata_from_the_disks(
    zfs_fuse: None, tmp_path: Path
) -> None:
    study = tmp_path / "meta.toml"
    study.write_text(f"""
name = "cold-metadata"
replicates = 2
max_replicates = 2

[disks]
count = 3
size = "256M"
source = "loop"

[factors]
backend = ["zfs", "btrfs"]
layout = ["parity1"]

[workloads]
names = ["meta-create-seq", "meta-stat-seq"]
size = "16M"
metadata_files = {FILES}
""")
    p = poolbench("run", str(study), "--db", str(tmp_path / "r.db"),
                  "--scratch-dir", str(tmp_path / "scratch"))  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    rows = stored_rows(tmp_path / "r.db", "meta-stat-seq")
    assert {r["config"].split()[0] for r in rows} == {"backend=zfs", "backend=btrfs"}
    assert len(rows) == 4
    for r in rows:
        read = r["guards"]["device"]["read_bytes"]
        cached = [w for w in r["warnings"] if "came from a cache" in w]
        if "backend=zfs" in r["config"]:
            # zfs-fuse answers these stats from its own daemon's caches: its ARC counts no
            # demand read at all during them, though the export emptied it. Not poolbench's
            # doing, so not fixable here; what must hold is that the figure says so.
            assert read < FILES * 16 and cached, (read, r["warnings"])
            continue
        # A stat of a file whose inode is not cached reads it: at least 16 bytes a file, what
        # the metadata guard asks (a 512-byte sector holds at most 32 inodes or dnodes).
        assert read >= FILES * 16, (r["config"], read, r["warnings"])
        assert not cached, r["warnings"]
