"""`plan --disk-speed-from screen:ID` (issue 41, item 5): a disk screen's median disk as the
planner's disk, and with a --layout each vdev at its slowest screened member, the disks taken
in the order screened. The figures asserted are computed here from the screen's figures and
the model's mirror rule (a W-way mirror reads at W x its disk, writes at 1 x)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.engine.screen.records import DiskScreen, Figure
from poolbench.errors import EXIT_INPUT
from poolbench.planner.layout import parse_layout
from poolbench.planner.performance import DEFAULT_SPEEDS, DiskSpeed, predict
from poolbench.planner.screened import fit_screen
from poolbench.report.screened_disk import disk_speed_from_screen
from poolbench.store.db import Store
from poolbench.store.screens import add_screen

MiB = 1024 * 1024
# Four screened disks, the fourth at half the others' speed on every figure.
SEQ = [100.0, 100.0, 100.0, 50.0]  # MiB/s, read and write alike
IOPS = [200.0, 200.0, 200.0, 100.0]  # 4K QD1, read and write alike


def _disk(i: int, seq: float, iops: float, writes: bool) -> DiskScreen:
    d = DiskScreen(f"/dev/sd{'bcde'[i]}", f"sd{'bcde'[i]}", f"S{i}", "M", 4 * 10**12, 512,
                   4096, True, "none", None)  # fmt: skip
    tests = [("seq-read", "MiB/s", seq), ("rand-read-4k-qd1", "IOPS", iops)]
    if writes:
        tests += [("seq-write", "MiB/s", seq), ("rand-write-4k-qd1", "IOPS", iops)]
    for test, unit, v in tests:
        d.figures[test] = Figure(test, unit, (v * 0.98, v, v * 1.02), "how")
    return d


def _store(tmp_path: Path, writes: bool = True) -> tuple[Path, str]:
    db = tmp_path / "r.db"
    store = Store(db)
    disks = [_disk(i, s, io, writes) for i, (s, io) in enumerate(zip(SEQ, IOPS, strict=True))]
    sid = add_screen(store, [d.to_json() for d in disks], writes, {})
    store.close()
    return db, sid


def _screen_disk(db: Path) -> DiskSpeed:
    store = Store(db)
    try:
        return disk_speed_from_screen(store, "latest", DEFAULT_SPEEDS["hdd"])
    finally:
        store.close()


def _plan(db: Path, *args: str) -> dict[str, object]:
    p = poolbench("plan", "--db", str(db), "--json", *args)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert isinstance(doc, dict)
    return doc


def test_each_mirror_runs_at_its_slowest_screened_member(tmp_path: Path) -> None:
    db, sid = _store(tmp_path)
    doc = _plan(db, "--layout", "mirror:2x4TB + mirror:2x4TB", "--disk-speed-from", "screen:latest")
    speed = doc["predicted_speed"]
    assert isinstance(speed, dict)
    # Disks 1-2 (100 MiB/s, 200 IOPS) and disks 3-4, bounded by the fourth (50, 100):
    # reads 2 x 100 + 2 x 50 MiB/s, 2 x 200 + 2 x 100 IOPS; writes 1 x 100 + 1 x 50 MiB/s.
    assert speed["stream_read_bytes_per_s"] == round(300 * MiB)
    # A random read of a 128K record also moves it: 5 ms a 4K read at 200 IOPS plus 124K at
    # 100 MiB/s (twice both on the slow pair, the same share).
    seek = 0.005 / (0.005 + (128 - 4) * 1024 / (100 * MiB))
    assert speed["random_read_iops"] == pytest.approx(600 * seek, abs=0.1)
    assert speed["stream_write_bytes_per_s"] == round(150 * MiB)
    assert f"disk screen {sid} of 4 disks (median per figure" in str(speed["disk"])
    assert "slowest member" in str(speed["disk"])
    # The same screen by its id; the median disk alone would have said 4 x 100 MiB/s.
    by_id = _plan(db, "--layout", "mirror:2x4TB + mirror:2x4TB", "--disk-speed-from",
                  f"screen:{sid}")["predicted_speed"]  # fmt: skip
    assert by_id == speed


def test_a_search_and_a_plain_layout_use_the_median_disk(tmp_path: Path) -> None:
    db, _ = _store(tmp_path)
    disk = _screen_disk(db)
    assert (disk.read_bps, disk.read_iops) == (100 * MiB, 200)  # the median of 100,100,100,50
    assert [m.read_bps for m in disk.members] == [s * MiB for s in SEQ]
    # A search's layouts are not the screened disks in order: every vdev at the median.
    searched = fit_screen(disk, None)
    assert searched.members == () and "every vdev at the median disk" in searched.source
    layout = parse_layout("mirror:2x4TB")
    assert predict(layout, searched).read_bps == 2 * 100 * MiB
    # A layout of the first two disks: both at 100, so the median's figures.
    two = fit_screen(disk, 2)
    assert predict(layout, two).read_bps == 2 * 100 * MiB and "first 2 of 4" in two.source


def test_a_read_only_screen_gives_reads_and_the_class_gives_writes(tmp_path: Path) -> None:
    db, _ = _store(tmp_path, writes=False)
    doc = _plan(db, "--layout", "raidz1:4x4TB", "--disk-speed-from", "screen:latest")
    speed = doc["predicted_speed"]
    assert isinstance(speed, dict)
    assert "write_bps, write_iops default for hdd" in str(speed["disk"])
    disk = _screen_disk(db)
    bounded = predict(parse_layout("raidz1:4x4TB"), disk)
    # One vdev of all four: the slowest disk's reads (50 MiB/s), the class's writes.
    slow = predict(parse_layout("raidz1:4x4TB"), disk.members[3])
    assert bounded.read_bps == slow.read_bps
    assert speed["stream_read_bytes_per_s"] == round(slow.read_bps)
    assert (
        bounded.write_bps == predict(parse_layout("raidz1:4x4TB"), DEFAULT_SPEEDS["hdd"]).write_bps
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--layout", "raidz2:6x4TB", "--disk-speed-from", "screen:latest"],
         "The layout has 6 disks; the screen behind --disk-speed-from has 4."),
        (["--layout", "mirror:2x4TB", "--disk-speed-from", "screen:nosuch"],
         "No disk screen 'nosuch'"),
    ],
)  # fmt: skip
def test_a_screen_that_cannot_serve_is_refused_in_one_paragraph(
    tmp_path: Path, args: list[str], says: str
) -> None:
    db, _ = _store(tmp_path)
    p = poolbench("plan", "--db", str(db), *args)
    assert p.returncode == EXIT_INPUT, p.stderr
    assert says in p.stderr and "Traceback" not in p.stderr


def test_a_report_takes_a_screens_median_disk_and_leaves_unmeasured_figures_unknown(
    tmp_path: Path,
) -> None:
    from poolbench.report.predicted import report_disk

    db, sid = _store(tmp_path, writes=False)
    store = Store(db)
    try:
        disk = report_disk(store, f"screen:{sid}")
    finally:
        store.close()
    # A study's disks are not the screen's in order: no per-vdev bound, the median disk.
    assert disk.members == () and (disk.read_bps, disk.read_iops) == (100 * MiB, 200)
    assert math.isnan(disk.write_bps) and math.isnan(disk.write_iops)  # never a class default
    assert "every vdev at the median disk" in disk.source
