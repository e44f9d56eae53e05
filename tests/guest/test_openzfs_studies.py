"""Built-in studies end to end on OpenZFS 2.x (guest tier), through the CLI as a user runs
them: `poolbench study NAME --disks /dev/vdb,...` on the guest's whole scratch disks, then
every stored figure checked (non-zero, verified at the member disks, the layouts' write cost
in the order parity demands, usable space equal to the planner's to the byte)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import rules_for_reported

from .studykit import (
    blank,
    check_figures,
    disk_bytes,
    export,
    leftovers,
    poolbench,
    raidz_write_cost,
    scratch_disks,
)

pytestmark = pytest.mark.openzfs


def _study(tmp_path: Path, name: str, disks: list[str], *opts: str) -> list[dict[str, Any]]:
    tmp_path.mkdir(exist_ok=True)
    db, scratch = tmp_path / f"{name}.db", tmp_path / "scratch"
    p = poolbench("study", name, "--disks", ",".join(disks), *opts,
                  "--db", str(db), "--scratch-dir", str(scratch), "--seed", "1")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (tmp_path / f"{name}.out").write_text(p.stdout)
    assert leftovers(scratch) == []
    status = sqlite3.connect(db).execute("SELECT status FROM runs").fetchone()[0]
    assert status == "finished"
    return export(db)


def test_parity_study_on_whole_disks(tmp_path: Path) -> None:
    # Five disks: the study gives raidz3 only from width 5 (parity plus at least two data
    # disks), so --widths 4 has no raidz3 configuration.
    disks = scratch_disks(5)
    blank(disks)
    rows = _study(tmp_path, "parity", disks, "--widths", "5", "--size", "64M",
                  "--replicates", "2", "--max-replicates", "2")  # fmt: skip
    configs = {r["config"] for r in rows}
    assert configs == {f"backend=zfs layout=raidz{p}:5 ashift=12" for p in (1, 2, 3)}
    assert len(rows) == 3 * 2 * 2  # configurations × replicates × (seq-write, seq-read)
    check_figures(rows)
    for r in rows:
        pool = r["pool"]
        assert pool["dialect"] == "openzfs" and pool["zfs_version"].startswith("zfs-2.")
        assert all(leaf.startswith(tuple(disks)) for leaf in pool["leaves"])
    # raidz1/2/3 over 5 disks write 1.25, 1.6875 and 2.5 times the data for 128K records at
    # ashift 12: the member disks saw that, plus a little metadata (labels, uberblocks,
    # indirect blocks), never less.
    amp = {p: [r["guards"]["device"]["ratio_to_app"] for r in rows
               if r["workload"] == "seq-write" and f"raidz{p}:" in r["config"]]
           for p in (1, 2, 3)}  # fmt: skip
    for p, ratios in amp.items():
        cost = raidz_write_cost(5, p)
        assert all(0.95 * cost <= x <= 1.2 * cost for x in ratios), (p, cost, ratios)


def test_capacity_study_matches_the_planner_to_the_byte(tmp_path: Path) -> None:
    # The four 300 MiB disks: there the partition `zpool create` makes on a whole disk costs
    # whole metaslabs, so the planner's whole-disk rule and the plain-device rule differ
    # (on the 2 GiB disks they give the same bytes and could not tell a wrong rule).
    disks = scratch_disks(4, 300 << 20)
    blank(disks)
    rows = _study(tmp_path, "capacity", disks, "--layouts", "raidz1,mirror:2+mirror:2",
                  "--levels", "9,12")  # fmt: skip
    assert len({r["config"] for r in rows}) == 4
    size = disk_bytes(disks[0])
    notes = (tmp_path / "capacity.out").read_text()
    for r in rows:
        levels = dict(kv.split("=", 1) for kv in r["config"].split())
        rules = rules_for_reported(r["pool"]["zfs_version"])
        layout = parse_layout(levels["layout"], (size,) * 4)
        # zpool create partitions a whole disk: the planner's --whole-disk rule
        plan = plan_pool(layout, int(levels["ashift"]), rules, whole_disk=True)
        bare = plan_pool(layout, int(levels["ashift"]), rules, whole_disk=False)
        assert plan.usable_bytes < bare.usable_bytes  # the disks' size tells the rules apart
        usable = r["guards"]["capacity"]["usable_bytes"]
        assert usable == plan.usable_bytes, (r["config"], usable, plan.usable_bytes)
        assert r["value"] == pytest.approx(usable / 2**30, rel=1e-3)
        # the study's own note sets the same whole-disk figure beside the pool's
        line = f"  {r['config']}: {usable / 2**20:,.1f} MiB; planner {usable / 2**20:,.1f} MiB"
        assert f"{line} (reported +0.00%)" in notes, notes


def test_a_study_follows_a_study_on_the_same_disks(tmp_path: Path) -> None:
    # Teardown wipes what poolbench's own pools left (labels, the GPT `zpool create` made):
    # the second study on the same disks needs no --destroy-data-on.
    disks = scratch_disks(4)
    blank(disks)
    size = disk_bytes(disks[0])
    for n in (1, 2):
        run = tmp_path / f"run{n}"
        rows = _study(run, "capacity", disks, "--layouts", "raidz1", "--levels", "12")
        assert [r["config"] for r in rows] == ["backend=zfs layout=raidz1 ashift=12"] * 2
        for r in rows:  # each study's figures, to the byte (2 GiB disks, partitioned whole)
            rules = rules_for_reported(r["pool"]["zfs_version"])
            plan = plan_pool(parse_layout("raidz1", (size,) * 4), 12, rules, whole_disk=True)
            assert r["guards"]["capacity"]["usable_bytes"] == plan.usable_bytes
            assert sorted(r["pool"]["leaves"]) == sorted(f"{d}1" for d in disks)
        for d in disks:  # returned as found: no partition left on any disk
            assert not list(Path("/sys/class/block", Path(d).name).glob(Path(d).name + "*[0-9]"))
