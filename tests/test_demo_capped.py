"""`poolbench demo` as a new user runs it, on disks of a known speed: four loop devices capped
at 20 MiB/s each (blkio throttle), raidz1 vs raidz2 on zfs-fuse. The answer is known from the
caps before anything runs: raidz1 of 4 streams writes through 3 data disks, raidz2 through 2
(the planner: 58.2 and 38.8 MiB/s at ashift 12), so the verdict must rank raidz1 first for
seq-write with a significant difference whose interval holds the capped-disk truth, every
figure must sit near the planner's, no member may be called slow (the disks are equal), and
no cap, loop device or pool may be left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import needs_fio, poolbench

from poolbench.planner.layout import parse_layout
from poolbench.planner.performance import DiskSpeed, predict_detailed
from poolbench.system import throttle

pytestmark = needs_fio
MiB = 1 << 20
CAP = 20
STREAM_TOL = 0.15  # the planner's validated streaming tolerance (docs/planner.md)


def _predicted(layout: str) -> float:
    disk = DiskSpeed(CAP * MiB, CAP * MiB, float("nan"), float("nan"), "cap", "transfer")
    return predict_detailed(parse_layout(f"{layout}:4x512M"), disk, 128 << 10, 12).write_bps.value


@pytest.mark.skipif(bool(throttle.unavailable()), reason="needs the cgroup v1 blkio throttle")
def test_demo_answers_what_the_caps_predict(zfs_fuse: None, tmp_path: Path) -> None:
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    before = throttle.caps()
    p = poolbench(
        "demo", "--db", str(db), "--scratch-dir", str(scratch), env={"POOLBENCH_MIN_WINDOW": "3"}
    )  # fmt: skip  (the demo as a user runs it)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "capped at 20 MiB/s each" in p.stdout
    assert throttle.caps() == before  # every cap removed again
    assert not scratch.exists() or not any(scratch.iterdir())
    assert max(len(line) for line in p.stdout.splitlines()) <= 80  # a pipe: 80 columns
    doc = json.loads(poolbench("report", "latest", "--json", "--db", str(db)).stdout)
    (write,) = [r for r in doc["verdict"]["rankings"] if r["workload"] == "seq-write"]
    first, second = write["ranked"][0], write["ranked"][1]
    assert "raidz1" in first["config"] and "raidz2" in second["config"]
    vs = second["vs_best"]
    assert vs["significant"] and vs["ratio"] < 1
    truth = _predicted("raidz2") / _predicted("raidz1")  # 0.667: two data disks of three
    assert vs["ci_low"] * (1 - STREAM_TOL) <= truth <= vs["ci_high"] * (1 + STREAM_TOL), vs
    for row in write["ranked"]:
        layout = "raidz1" if "raidz1" in row["config"] else "raidz2"
        want = _predicted(layout) / MiB
        assert abs(row["figure"]["center"] / want - 1) < STREAM_TOL, (layout, row, want)
    # equal disks: nobody is called slow; the planner's table is shown beside the figures
    assert "slower than its peers" not in p.stdout
    assert "predicted vs measured (disk figures: the study's disk cap, 20 MiB/s" in p.stdout
