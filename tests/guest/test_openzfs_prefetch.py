"""The prefetch study where it can run (guest tier, OpenZFS; zfs-fuse has no
zfs_prefetch_disable): a mirror of two scratch disks with prefetch on and off.

What must hold: every measurement ran with zfs_prefetch_disable as its level asks (the
factor's read-back after each one), the trial's section records the host's own value (set to
1 here, as a database host would have it), and that value is back after the study.

The ARC's demand counters do not tell the levels apart on OpenZFS 2.3: the cold stream's
demand reads were all hits at both levels (1.0, 1.0 against 1.0, 1.0 in the first run here),
since a multi-block read fetches its own blocks before it asks for them; they are printed for
the record only.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from .studykit import blank, leftovers, poolbench, scratch_disks

pytestmark = pytest.mark.openzfs
PARAM = Path("/sys/module/zfs/parameters/zfs_prefetch_disable")


def test_prefetch_study_sets_reads_back_and_puts_back_the_hosts_prefetch(tmp_path: Path) -> None:
    disks = scratch_disks(2)
    blank(disks)
    original = PARAM.read_text()
    PARAM.write_text("1\n")  # the host runs without prefetch, as many database hosts do
    try:
        db, scratch = tmp_path / "r.db", tmp_path / "scratch"
        p = poolbench("study", "prefetch", "--disks", ",".join(disks), "--size", "128M",
                      "--runtime", "3", "--replicates", "2", "--max-replicates", "2",
                      "--db", str(db), "--scratch-dir", str(scratch), "--seed", "1")  # fmt: skip
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        assert leftovers(scratch) == []
        assert PARAM.read_text() == "1\n"  # the host's own value, back
    finally:
        PARAM.write_text(original)
    rows = sqlite3.connect(db).execute(
        "SELECT config, workload, guards FROM measurements").fetchall()  # fmt: skip
    assert len(rows) == 2 * 2 * 2  # 2 levels × 2 replicates × 2 workloads
    hits: dict[str, list[float]] = {"on": [], "off": []}  # for the record (docstring)
    for config, workload, text in rows:
        g = json.loads(text)
        level = "off" if "prefetch=off" in config else "on"
        assert g["pool"]["prefetch"] == {"level": level, "disable": int(level == "off")}, g
        assert g["prefetch"]["host_had"] == 1, g["prefetch"]
        if workload == "seq-read":
            arc = g["cache"]["arc_during_read"]  # the cold read's ARC counters (guards/cache.py)
            hits[level].append(arc["demand_hits"] / arc["demand_reads"])
    print("prefetch guest: the cold stream's demand reads that found their block in the ARC", hits)
    assert "during all 4 measurements, as asked" in " ".join(p.stdout.split())
