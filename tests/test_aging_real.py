"""The aging recipe on real pools, small: `poolbench study aging` on zfs-fuse and a study
file aging a btrfs raid1, both on 2 × 128 MiB loop disks (btrfs's smallest). Each trial's
recorded age is checked against what the recipe must reach: the rounds asked, its own live
bytes exactly the fill level of the usable space, and the fill statfs reports within a few
percent of it (the stack's metadata on top); the notes show it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import needs_fio, needs_root, poolbench

pytestmark = pytest.mark.slow  # real pools (the btrfs test takes no slow fixture)
FILL = 30


def _ages(db: Path) -> list[tuple[str, dict[str, Any]]]:
    rows = sqlite3.connect(db).execute("SELECT config, guards FROM measurements").fetchall()
    return [(c, json.loads(g)["aging"]) for c, g in rows]


def _check(age: dict[str, Any], rounds: int, tolerance: float) -> None:
    assert (age["rounds"], age["rounds_asked"], age["fill_percent_asked"]) == (rounds, rounds, FILL)
    assert age["live_bytes"] == age["usable_bytes"] * FILL // 100  # the recipe's own count
    # statfs: the room the files took, their metadata included; btrfs's f_bavail is itself
    # an estimate (unallocated space over the profile's copies), hence its wider tolerance
    assert abs(age["achieved_percent"] - FILL) <= tolerance, age
    if rounds:
        assert age["operations"]["delete"] > 0 and age["operations"]["overwrite"] > 0
        assert age["bytes_written"] > age["live_bytes"]


@needs_root
@needs_fio
def test_aging_on_zfs_fuse_reaches_its_fill_and_records_its_rounds(
    zfs_fuse: None, tmp_path: Path
) -> None:
    db = tmp_path / "r.db"
    p = poolbench(
        "study", "aging", "--disks", "2x128M", "--layouts", "mirror:2", "--levels", "1",
        "--fill", str(FILL), "--workloads", "seq-write", "--size", "4M", "--replicates", "2",
        "--max-replicates", "2", "--min-window", "0", "--seed", "3", "--db", str(db),
        "--scratch-dir", str(tmp_path / "scratch"),
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    ages = _ages(db)
    assert len(ages) == 2
    for _config, age in ages:
        _check(age, 1, tolerance=4)  # measured 40.9 at 40%
        assert age["frag_percent"] is None and "zfs-fuse (pool version 23)" in age["frag_how"]
    # The same seed, the same operations: both trials wrote the same bytes.
    assert ages[0][1]["bytes_written"] == ages[1][1]["bytes_written"]
    assert "aging: each pool aged before measuring" in p.stdout
    assert f"mirror:2 aging=1: 1 round(s); fill {FILL}% asked" in p.stdout


@needs_root
@needs_fio
def test_aging_a_btrfs_raid1_reaches_its_fill(tmp_path: Path) -> None:
    study = tmp_path / "aging-btrfs.toml"
    study.write_text(
        'name = "aging-btrfs"\nreplicates = 2\nmax_replicates = 2\nseed = 5\n'
        '[disks]\ncount = 2\nsize = "128M"\nsource = "loop"\n'
        f'[factors]\nbackend = ["btrfs"]\nlayout = ["raid1"]\naging = [1]\nfill = [{FILL}]\n'
        '[workloads]\nnames = ["seq-write"]\nsize = "4M"\nmin_window = 0\n'
    )
    db = tmp_path / "r.db"
    p = poolbench("run", str(study), "--db", str(db), "--scratch-dir", str(tmp_path / "s"))
    assert p.returncode == 0, p.stdout + p.stderr
    ages = _ages(db)
    assert len(ages) == 2
    for _config, age in ages:
        _check(age, 1, tolerance=8)  # measured 35.4 at 40%
        assert age["frag_percent"] is None and age["frag_how"].startswith("none: btrfs has no")
