"""`poolbench demo` as a new user runs it, on disks of a known speed: four loop devices capped
at 20 MiB/s each (blkio throttle), raidz1 vs raidz2 on zfs-fuse. The answer is known from the
caps before anything runs: raidz1 of 4 streams writes through 3 data disks, raidz2 through 2
(the planner: 58.2 and 38.8 MiB/s at ashift 12), and raidz2 reads all four (80 MiB/s), so
the verdict must rank raidz1 first for seq-write with a significant difference whose
interval holds the capped-disk truth, every figure must sit near the planner's, no member
may be called slow (the disks are equal), no cold read may be shorter than the minimum
window (256 MiB at the most any layout can read, 4 × 20 MiB/s, lasts 3.2 s), and no cap,
loop device or pool may be left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import needs_fio, poolbench

from poolbench.cli.demo_cmd import demo_text
from poolbench.planner.layout import parse_layout
from poolbench.planner.performance import DiskSpeed, predict_detailed
from poolbench.study.model import parse
from poolbench.system import throttle
from poolbench.units import parse_size

MiB = 1 << 20
CAP = 20
STREAM_TOL = 0.15  # the planner's validated streaming tolerance (docs/planner.md)


def _predicted(layout: str, figure: str = "write_bps") -> float:
    disk = DiskSpeed(CAP * MiB, CAP * MiB, float("nan"), float("nan"), "cap", "transfer")
    found = predict_detailed(parse_layout(f"{layout}:4x512M"), disk, 128 << 10, 12)
    return float(getattr(found, figure).value)


def test_every_window_of_the_capped_demo_lasts_the_minimum() -> None:
    """No layout moves data faster than all its disks at their cap, so the working set at
    that rate is the shortest any window can be: 256 MiB / (4 × 20 MiB/s) = 3.2 s, above
    the 3 s minimum, for the cold reads too (never repeated to fill a window)."""
    study = parse(demo_text(zfs=True, capped=True), "demo")
    assert (study.disks.count, study.disks.cap) == (4, CAP)
    size = parse_size(study.workloads.size)
    fastest = study.disks.count * CAP * MiB
    assert size / fastest >= study.workloads.min_window == 3.0
    assert size / fastest == 3.2
    # the planner's figures: raidz2 reads all four disks (80 MiB/s), raidz1's writes are
    # the fastest write (3 data disks: 58.2 MiB/s)
    assert round(_predicted("raidz2", "read_bps") / MiB, 1) == 80.0
    assert size / _predicted("raidz1") > 4.3 and size / _predicted("raidz2") > 6.5


@needs_fio
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
    # equal disks: nobody is called slow; the planner's table is shown beside the figures,
    # in the JSON too, each prediction the planner's for the capped disks
    assert "slower than its peers" not in p.stdout
    assert "predicted vs measured (disk figures: the study's disk cap, 20 MiB/s" in p.stdout
    pred = {(r["short_label"], r["workload"]): r for r in doc["predicted"]["rows"]}
    for layout in ("raidz1", "raidz2"):
        assert pred[(layout, "seq-write")]["predicted"] == pytest.approx(_predicted(layout) / MiB)
    assert pred[("raidz2", "seq-read")]["predicted"] == pytest.approx(80.0)
    # every cold read lasted the minimum window: no "shorter than the 3 s minimum" warning
    for t in doc["tables"]:
        for row in t["rows"]:
            assert not [n for n in row["notes"] if "shorter than the" in n], (t["workload"], row)
    (read,) = [r for r in doc["verdict"]["rankings"] if r["workload"] == "seq-read"]
    raidz2 = next(r for r in read["ranked"] if "raidz2" in r["config"])
    assert abs(raidz2["figure"]["center"] / 80.0 - 1) < STREAM_TOL, raidz2
