"""Resilver under load, for real on zfs-fuse: a 2-way mirror on capped loop devices resilvers
once idle and once under a flat-out streaming read, in one run.

Every loop device is capped (blkio throttle) at CAP MiB/s, so the mirror's surviving member
is the one narrow road both the resilver (it reads every block from it) and the foreground
read share: from the same run, the foreground's rate during the resilver must fall below its
rate alone on the healthy pool, and the resilver under load must take longer than the idle
one. The dataset caches no data (primarycache=metadata, as the study sets with --load), so
the foreground's repeated reads reach the disks rather than the ARC. Disks are small and few
(2 replicates of 2 configurations, 16 MiB) to keep the run short: 23.6 s for the test
itself here, 27.9 s with its setup and teardown (resilvers of 1.2 s idle, 2.0-2.2 s under
load: fio's log covers about 8 of its 250 ms intervals of each).
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.store.db import Store
from poolbench.store.facts import study_facts
from poolbench.study.builtin.resilver_load import load_notes, values

CAP = 20  # MiB/s per loop device
STUDY = f"""
name = "resilver-load"
replicates = 2
max_replicates = 2
[disks]
count = 3
size = "96M"
source = "loop"
cap = {CAP}
[factors]
backend = ["zfs"]
layout = ["mirror:2"]
load = ["none", "seq-read"]
primarycache = ["metadata"]
[workloads]
names = ["resilver"]
size = "16M"
"""


def _pools() -> set[str]:
    out = subprocess.run(["zpool", "list", "-H", "-o", "name"], capture_output=True, text=True)
    return {n for n in out.stdout.split() if re.fullmatch(r"pb[0-9a-f]+t\d+", n)}


def test_a_load_slows_the_resilver_and_the_resilver_slows_the_load(
    zfs_fuse: None, tmp_path: Path
) -> None:
    before = _pools()
    (tmp_path / "s.toml").write_text(STUDY)
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    p = poolbench("run", str(tmp_path / "s.toml"), "--db", str(db), "--scratch-dir",
                  str(scratch), "--seed", "3")  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert _pools() == before and not scratch.exists()
    run_id = int(sqlite3.connect(db).execute("SELECT max(id) FROM runs").fetchone()[0])
    store = Store(db, "read")
    try:
        facts = study_facts(store, run_id)
    finally:
        store.close()
    idle = next(c for c in facts.configs if c.level("load") == "none")
    loaded = next(c for c in facts.configs if c.level("load") == "seq-read")
    idle_s = [r.seconds for r in idle.resilvers if r.seconds]
    loaded_s = [r.seconds for r in loaded.resilvers if r.seconds]
    assert len(idle_s) == len(loaded_s) == 2
    # The same bytes were resilvered (the working set and metadata), so the time decides.
    assert sum(loaded_s) > sum(idle_s), (idle_s, loaded_s)
    loads = [r.load for r in loaded.resilvers if r.load is not None]
    during = values([ld.during for ld in loads])
    alone = values([ld.alone for ld in loads])
    assert len(during) == len(alone) == 2, loads
    # MiB/s over the resilver's window (fio's log) and alone, uncached (primarycache=metadata):
    # alone, a healthy 2-way mirror reads from both members, 2 × CAP at most; during the
    # resilver the foreground shares the surviving member's CAP with the resilver's reads.
    assert all(0 < a <= 2 * CAP * 1.15 for a in alone), alone
    assert all(0 < d < CAP * 1.15 for d in during), during
    assert sum(during) < sum(alone), (during, alone)
    # each "during" over its own resilver's window (the log covering most of it), and alone
    # for as long, as fio's runtime says
    for r in loaded.resilvers:
        assert r.seconds is not None and r.load is not None, r
        secs, d, a = r.seconds, r.load.during, r.load.alone
        assert d.window_s == pytest.approx(secs, abs=0.01), (d, secs)
        assert d.seconds is not None and d.intervals is not None, d
        assert 0.5 * secs <= d.seconds <= secs + 1e-3 and d.intervals >= 4, d
        assert a.seconds == pytest.approx(secs, abs=0.1), (a, secs)
    print("resilver s idle", idle_s, "loaded", loaded_s, "MiB/s during", during, "alone", alone)
    text = "\n".join(load_notes(facts))
    assert "under seq-read" in text and "the resilver costs the workload" in text, text
