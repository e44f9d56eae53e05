"""The HTML report sets each pool's reported usable space beside the planner's prediction."""

from __future__ import annotations

from pathlib import Path

from poolbench.planner.capacity import plan_pool, predicted_usable
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import V23, parse_zfs_version, rules_for_reported
from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.report.data import load_run
from poolbench.report.html import render
from poolbench.store.db import Store

MiB = 1024 * 1024


def test_study_layout_and_version_read_as_the_planner_reads_them() -> None:
    # One grammar: a study layout with widths on its disks is the sized layout.
    widths = predicted_usable("raidz1:3+mirror:2", 12, 5, 1 << 30, "2.3.2-2~bpo12+2")
    sized = parse_layout("raidz1:3x1G + mirror:2x1G")
    assert widths == plan_pool(sized, 12, parse_zfs_version("2.3.2")).usable_bytes
    assert rules_for_reported("zfs-fuse 0.7.0, pool version 23") is V23
    assert rules_for_reported("") is V23
    assert rules_for_reported("2.3.2-2~bpo12+2") == parse_zfs_version("2.3.2")
    # As OpenZFS's backend records it (`zpool version`'s first line): the guest tier's
    # capacity study found "zfs-2.3.2-2~bpo12+2" refused as "not a ZFS release".
    assert rules_for_reported("zfs-2.3.2-2~bpo12+2") == parse_zfs_version("2.3.2")
    assert rules_for_reported("zfs-kmod-2.1.5-1") == parse_zfs_version("2.1.5")
    assert rules_for_reported("zfs-0.6.5.11-1") == parse_zfs_version("0.6.5.11")
    # An early rc keeps its old rules (0.8.0-rc2 still had 0.7's metaslab rule).
    assert rules_for_reported("zfs-0.8.0-rc2") == parse_zfs_version("0.8.0-rc2")
    assert rules_for_reported("zfs-0.8.0-rc2") != parse_zfs_version("0.8.0")


def test_space_chart_shows_pool_and_planner(tmp_path: Path) -> None:
    # What the planner predicts for raidz1 over 3 × 256 MiB loop disks on zfs-fuse; the
    # store says the pool reported 1 MiB less, so the chart must show that difference.
    predicted = predicted_usable("raidz1", 12, 3, 256 * MiB, "zfs-fuse")
    reported = predicted - MiB
    store = Store(tmp_path / "r.db")
    study = {"name": "s", "disks": {"count": 3, "size": "256M", "source": "loop"},
             "factors": {"layout": ["raidz1"]}}  # fmt: skip
    run = store.start_run("study", "s", ["poolbench"], {"study": study})
    for rep, value in enumerate([100.0, 102.0]):
        store.add_measurement(
            run,
            Measurement(
                "backend=zfs layout=raidz1 ashift=12", "seq-write", rep, value, "MiB/s", 1, 1,
                1.0, None, None, [],
                Findings(pool={"usable_bytes": reported, "zfs_version": "zfs-fuse"}), {}, "",
            ),
        )  # fmt: skip
    store.finish_run(run, "finished")
    html = render(load_run(store, str(run)), None)
    assert 'id="chart-space"' in html
    assert "(planner)" in html and "(pool)" in html
    pct = -MiB / predicted * 100
    assert f"{pct:+.2f}% vs plan" in html
