"""The l2arc study where it can run (guest tier, OpenZFS 2.x; zfs-fuse has no arcstats): one
scratch disk alone beside the same disk + a cache device, the ARC's ceiling lowered to 96 MiB
for a 256 MiB working set, random 16K reads in 8 intervals of 5 s.

What must hold: the cache device received reads (l2_hits > 0 in the steady intervals of every
replicate with it, and none where no cache device exists), the ARC's ceiling was what the
trial asked while it ran and is back to what it was afterwards, and the verdict's direction
follows its own figures (it says "pays" only when the cached pool's steady IOPS are at least
1.10× the other's)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from poolbench.study.builtin.l2arc_notes import PAYS

from .studykit import blank, leftovers, poolbench, scratch_disks

pytestmark = pytest.mark.openzfs
MiB = 1 << 20
PARAMS = Path("/sys/module/zfs/parameters")


def _arc() -> tuple[str, str, int]:
    stats = Path("/proc/spl/kstat/zfs/arcstats").read_text().split("\n")
    c_max = next(int(line.split()[2]) for line in stats if line.startswith("c_max "))
    return (PARAMS / "zfs_arc_max").read_text(), (PARAMS / "zfs_arc_min").read_text(), c_max


def test_l2arc_study_warms_the_cache_device_and_puts_the_arc_back(tmp_path: Path) -> None:
    disks = scratch_disks(2)
    blank(disks)
    before = _arc()
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    p = poolbench("study", "l2arc", "--disks", ",".join(disks), "--arc-max", "96M",
                  "--size", "256M", "--runtime", "40", "--replicates", "2",
                  "--max-replicates", "2", "--db", str(db), "--scratch-dir", str(scratch),
                  "--seed", "1")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(scratch) == []
    assert _arc() == before  # the parameters' files and the ceiling in effect
    con = sqlite3.connect(db)
    rows = con.execute("SELECT config, value, guards FROM measurements").fetchall()
    assert len(rows) == 4
    iops: dict[bool, list[float]] = {True: [], False: []}
    for config, value, guards_text in rows:
        g = json.loads(guards_text)
        cached = "+ cache" in config
        assert g["arc_limit"]["c_max"] == 96 * MiB, g["arc_limit"]
        steady = g["l2arc"]["steady"]
        assert len(g["l2arc"]["intervals"]) == 8 and steady["intervals"] == 4
        if cached:
            assert steady["l2_hits"] > 0, g["l2arc"]
        else:
            assert steady["l2_hits"] == 0 and steady["l2_misses"] == 0, g["l2arc"]
        assert value == pytest.approx(steady["iops"])
        iops[cached].append(value)
    ratio = (sum(iops[True]) / 2) / (sum(iops[False]) / 2)
    verdict = re.search(r"verdict: (.*)", p.stdout)
    assert verdict, p.stdout
    print("l2arc guest:", iops, f"ratio {ratio:.2f}", verdict.group(1))
    if "L2ARC pays" in verdict.group(1):
        assert ratio >= PAYS, (ratio, verdict.group(1))
    elif ratio < 1.0:
        assert "does not pay" in verdict.group(1), (ratio, verdict.group(1))
