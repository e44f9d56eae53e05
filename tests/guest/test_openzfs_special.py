"""The special study where it can run (guest tier, OpenZFS 2.x; zfs-fuse has no allocation
classes): raidz1 of 3 alone beside raidz1 of 3 + special mirror of 2 at special_small_blocks
0 and 16K, through the CLI on the guest's whole scratch disks. What must hold is computed from
what the workloads write: N files of 8K go to the special vdev at 16K (one copy counted in a
mirror's alloc) and stay off it at 0."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from .studykit import blank, check_figures, export, leftovers, poolbench, scratch_disks

pytestmark = pytest.mark.openzfs
FILES = 400
SMALL = 8192


def test_special_study_puts_small_files_on_the_special_mirror(tmp_path: Path) -> None:
    disks = scratch_disks(5)
    blank(disks)
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    p = poolbench("study", "special", "--disks", ",".join(disks), "--levels", "0,16K",
                  "--files", str(FILES), "--workloads", "meta-create-seq,meta-stat-seq,"
                  "smallfile-write-8k,smallfile-read-8k", "--replicates", "2",
                  "--max-replicates", "2", "--db", str(db), "--scratch-dir", str(scratch),
                  "--seed", "1")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(scratch) == []
    assert sqlite3.connect(db).execute("SELECT status FROM runs").fetchone()[0] == "finished"
    rows = export(db)
    check_figures(rows)
    by_config: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["workload"] == "smallfile-write-8k":
            by_config[r["config"]] = r["pool"]["class_alloc"]
    base = "backend=zfs layout=raidz1:3 ashift=12 recordsize=128K special_small_blocks="
    with_special = "backend=zfs layout=raidz1:3 + special mirror:2 ashift=12 recordsize=128K "
    assert set(by_config) == {
        base + "0",
        with_special + "special_small_blocks=0",
        with_special + "special_small_blocks=16K",
    }
    assert set(by_config[base + "0"]) == {"normal"}  # no special class to read
    small = by_config[with_special + "special_small_blocks=16K"]["special"]
    meta_only = by_config[with_special + "special_small_blocks=0"]["special"]
    # At 0 the special mirror holds metadata alone (the first run: 1.1 MB for both
    # workloads' 800 files and the pool's own), less than the small files' data; at 16K it
    # holds that and every 8K file's block besides (incompressible), counted once for the
    # mirror's two copies: the difference is the files' 3.2 MB, not twice that.
    assert 0 < meta_only < FILES * SMALL, meta_only
    assert FILES * SMALL * 0.95 <= small - meta_only <= FILES * SMALL * 1.5, (small, meta_only)
    assert "MiB of special per GiB on the data vdevs" in p.stdout
    # how full the special mirror is, from what iostat says is free there: a few MiB of a
    # 2 GiB mirror, far from the 75% threshold
    last = max((r for r in rows if r["workload"] == "smallfile-write-8k"
                and r["config"] == with_special + "special_small_blocks=16K"),
               key=lambda r: r["replicate"])  # the notes read the last replicate's  # fmt: skip
    held, free = last["pool"]["class_alloc"]["special"], last["pool"]["class_free"]["special"]
    assert held + free > 1 << 30, (held, free)
    assert f"({held / (held + free):.1%} of its " in " ".join(p.stdout.split())
    assert "special_small_blocks=16K, smallfile-write-8k:" in p.stdout
