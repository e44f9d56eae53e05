"""The aging study on real OpenZFS (guest tier): the pool's own `fragmentation` property (what
`zpool list -o frag` shows, which zfs-fuse lacks) is recorded with each trial's age, and a
pool aged two rounds has at least the free-space fragmentation of the same pool filled once;
a fragmentation target makes the recipe go on past its rounds until the pool reports it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from statistics import mean
from typing import Any

import pytest

from poolbench.backends.fragmentation import ZFS_HOW

from .studykit import poolbench

pytestmark = pytest.mark.openzfs
FILL = 50


def _ages(db: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for config, guards in sqlite3.connect(db).execute("SELECT config, guards FROM measurements"):
        out.setdefault(config, []).append(json.loads(guards)["aging"])
    return out


def _study(tmp: Path, *opts: str) -> tuple[dict[str, list[dict[str, Any]]], str]:
    db = tmp / "r.db"
    # The guest's /tmp is tmpfs, where loop disks are refused: scratch on /var/tmp.
    scratch = Path(tempfile.mkdtemp(prefix="pboz-aging-", dir="/var/tmp"))
    try:
        p = _run(db, scratch, *opts)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return _ages(db), p.stdout


def _run(db: Path, scratch: Path, *opts: str) -> subprocess.CompletedProcess[str]:
    return poolbench(
        "study", "aging", "--disks", "3x128M", "--layouts", "raidz1", "--fill", str(FILL),
        "--workloads", "seq-write", "--size", "8M", "--replicates", "2",
        "--max-replicates", "2", "--min-window", "0", "--seed", "4", *opts,
        "--db", str(db), "--scratch-dir", str(scratch / "s"),
    )  # fmt: skip


def test_the_fragmentation_property_is_recorded_and_grows_with_age(tmp_path: Path) -> None:
    ages, out = _study(tmp_path, "--levels", "0,2")
    by_rounds: dict[int, list[float]] = {}
    for records in ages.values():
        for a in records:
            assert a["frag_how"] == ZFS_HOW and isinstance(a["frag_percent"], float), a
            assert 0 <= a["frag_percent"] <= 100
            assert abs(a["achieved_percent"] - FILL) <= 5, a
            by_rounds.setdefault(a["rounds"], []).append(a["frag_percent"])
    print("fragmentation by rounds:", by_rounds)
    assert sorted(by_rounds) == [0, 2]
    assert mean(by_rounds[2]) >= mean(by_rounds[0])
    assert "free-space fragmentation" in out


def test_a_fragmentation_target_adds_rounds_until_the_pool_reports_it(tmp_path: Path) -> None:
    ages, _out = _study(tmp_path, "--levels", "1", "--frag", "1")
    for records in ages.values():
        for a in records:
            assert a["frag_target"] == 1 and a["rounds"] >= 1
            # reached, or stopped at the cap (1 asked + 10 more) and said so
            assert a["frag_reached"] is (a["frag_percent"] >= 1)
            assert a["frag_reached"] or a["rounds"] == 11, a
