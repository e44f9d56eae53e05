"""The random-I/O studies where zfs-fuse cannot run them (guest tier, OpenZFS 2.x): sync-slog
with the sync property, geometry with dRAID; through the CLI on the guest's whole scratch
disks, figures checked and nothing left behind."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import rules_for_reported

from .studykit import blank, check_figures, export, leftovers, poolbench, scratch_disks

pytestmark = pytest.mark.openzfs
SMALL = ["--size", "64M", "--runtime", "3", "--replicates", "2", "--max-replicates", "2"]


def _study(tmp_path: Path, name: str, disks: list[str], *opts: str) -> tuple[list[Any], str]:
    db, scratch = tmp_path / f"{name}.db", tmp_path / "scratch"
    p = poolbench("study", name, "--disks", ",".join(disks), *opts, *SMALL,
                  "--db", str(db), "--scratch-dir", str(scratch), "--seed", "1")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(scratch) == []
    assert sqlite3.connect(db).execute("SELECT status FROM runs").fetchone()[0] == "finished"
    return export(db), p.stdout


def _mean(rows: list[dict[str, Any]], workload: str, needle: str) -> float:
    vals = [r["value"] for r in rows if r["workload"] == workload and needle in r["config"]]
    assert vals, (workload, needle)
    return sum(vals) / len(vals)


def test_sync_slog_study_sync_standard_vs_disabled(tmp_path: Path) -> None:
    disks = scratch_disks(2)
    blank(disks)
    rows, out = _study(tmp_path, "sync-slog", disks, "--levels", "standard,disabled",
                       "--logs", "none", "--jobs", "1")  # fmt: skip
    assert {r["config"] for r in rows} == {
        f"backend=zfs layout=mirror:2 ashift=12 sync={s}" for s in ("standard", "disabled")
    }
    check_figures(rows)
    std = _mean(rows, "sync-write-4k-j1", "sync=standard")
    off = _mean(rows, "sync-write-4k-j1", "sync=disabled")
    plain = _mean(rows, "rand-write-4k-j1", "sync=standard")
    # sync=disabled turns every fsync into a no-op: it must beat the honest fsync-per-write,
    # which must cost against writes made durable once at the end.
    assert off > 1.2 * std and plain > 1.2 * std, (std, off, plain)
    ratio = f"{off / std:.2f}× faster"
    assert f"log none, sync-write-4k-j1: sync=disabled {off:,.0f} IOPS" in out and ratio in out
    assert "acknowledges every fsync/O_DSYNC write before it is on disk" in out


def test_geometry_study_with_draid(tmp_path: Path) -> None:
    disks = scratch_disks(4)
    blank(disks)
    # datasets only: the zvol target has its own test (test_openzfs_zvol.py)
    rows, out = _study(tmp_path, "geometry", disks, "--layouts", "mirror:2+mirror:2,draid1:1s",
                       "--records", "4k", "--workloads", "rand-read-4k,rand-write-4k",
                       "--targets", "dataset")  # fmt: skip
    layouts = {dict(kv.split("=", 1) for kv in r["config"].split())["layout"] for r in rows}
    assert layouts == {"mirror:2+mirror:2", "draid1:1s"}
    check_figures(rows)
    version = rows[0]["pool"]["zfs_version"]
    size = int(Path(f"/sys/class/block/{Path(disks[0]).name}/size").read_text()) * 512
    plan = plan_pool(parse_layout("draid1:1s", (size,) * 4), 12, rules_for_reported(version))
    b4 = next(b for b in plan.vdevs[0].blocks if b.psize == 4096)
    # dRAID1 on 4 disks with a spare: groups of 2 data + 1 parity sectors, and every block
    # is padded to whole groups: a 4K block costs 12K raw (a mirror pair: 8K).
    assert b4.raw_bytes == 12 * 1024
    assert "draid1:1s: a 4k block writes 12K raw (33% efficient)" in out
    assert "mirror:2+mirror:2: a 4k block writes 8K raw (50% efficient)" in out
    for w in ("rand-read-4k", "rand-write-4k"):
        assert out.count(f"\n{w}: ") == 1  # each workload ranked once, both layouts in it
