"""Resilver under load on OpenZFS (guest tier): `poolbench study resilver --load rand-read-4k`
on three whole disks (a 2-way mirror and its replacement), the resilver once idle and once
under flat-out random 4K reads, 2 replicates. (A first run with `seq-read` showed why not
streaming here: uncached 1 MiB reads on the emulated disks ran at 0.3-0.5 MiB/s.)

The foreground is one fio run from before `zpool replace` to the resilver's end, its figure
read from fio's 250 ms latency-histogram log over the resilver's own window: an earlier
design (consecutive 1 s fio runs) had no figure for one of two replicates here, where starting
fio takes seconds and the resilver lasted 5.9 s.

What must hold, from the same run: the foreground read less per second during the resilver
than alone on the healthy pool right after it (the resilver reads every block from the
surviving member the foreground reads too, and a healthy mirror reads from both), and the
resilver under load took longer than the idle one (the same bytes, shared disks)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from .studykit import blank, leftovers, poolbench, scratch_disks

pytestmark = pytest.mark.openzfs


def test_a_load_slows_the_resilver_and_the_resilver_slows_the_load(tmp_path: Path) -> None:
    disks = scratch_disks(3)
    blank(disks)
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    p = poolbench("study", "resilver", "--disks", ",".join(disks), "--layouts", "mirror:2",
                  "--load", "rand-read-4k", "--workloads", "resilver", "--size", "384M",
                  "--replicates", "2", "--max-replicates", "2", "--db", str(db),
                  "--scratch-dir", str(scratch), "--seed", "1")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(scratch) == []
    rows = sqlite3.connect(db).execute("SELECT config, guards FROM measurements").fetchall()
    idle, loaded, during, alone = [], [], [], []
    for config, text in rows:
        rs = json.loads(text)["resilver"]
        if "load=none" in config:
            idle.append(rs["seconds"])
            continue
        loaded.append(rs["seconds"])
        d = rs["load"]["during"]
        during.append(d["value"])
        alone.append(rs["load"]["alone"]["value"])
        print("during:", {k: d.get(k) for k in ("window_s", "intervals", "seconds", "p99_ms",
                                                "fio_start_s", "fio_late_s", "why")})  # fmt: skip
    print("resilver guest: idle", idle, "loaded", loaded, "during", during, "alone", alone)
    assert len(idle) == len(loaded) == 2 and None not in during, during
    assert sum(loaded) > sum(idle), (idle, loaded)
    assert sum(during) < sum(alone), (during, alone)
    assert "the resilver costs the workload" in p.stdout
