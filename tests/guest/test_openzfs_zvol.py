"""zvol targets where they exist (guest tier, OpenZFS 2.x; zfs-fuse has no zvols): the
volblocksize study and the geometry study's zvol target, through the CLI on the guest's whole
scratch disks. What must hold is computed here from the layouts, independently of the
planner: the space a sparse zvol is charged per byte written (raidz pads each block to a
multiple of parity + 1 sectors, then `zfs list` deflates by the vdev's 128K ratio), and that
a 4K write into a 64K block rewrites the whole block."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from .studykit import blank, check_figures, export, leftovers, poolbench, scratch_disks

pytestmark = pytest.mark.openzfs
SECTOR = 4096  # ashift 12


def raidz_charge_per_byte(block: int, width: int, parity: int) -> float:
    """What `zfs list` charges per byte of a `block`-byte block on a raidz of `width`."""

    def sectors(nbytes: int) -> int:
        data = nbytes // SECTOR
        total = data + parity * math.ceil(data / (width - parity))
        return -(-total // (parity + 1)) * (parity + 1)  # padded to a multiple of parity+1

    # the vdev's deflate ratio: data sectors of a 128K block over the sectors it takes
    deflate = (128 * 1024 // SECTOR) / sectors(128 * 1024)
    return sectors(block) * SECTOR * deflate / block


def _charged(rows: list[dict[str, Any]], config: str) -> float:
    """referenced ÷ logicalreferenced of the config's fullest reading."""
    got = [r["pool"]["zvol"] for r in rows if r["config"] == config and "zvol" in r["pool"]]
    assert got, f"no zvol space recorded for {config}"
    best = max(got, key=lambda z: z["logicalreferenced"])
    return float(best["referenced"]) / best["logicalreferenced"]


def _amplification(rows: list[dict[str, Any]], config: str, workload: str) -> float:
    mine = [r for r in rows if r["config"] == config and r["workload"] == workload]
    assert mine, (config, workload)
    return sum(r["guards"]["device"]["write_bytes"] for r in mine) / sum(
        r["app_bytes"] for r in mine
    )


def test_volblocksize_study_charges_what_the_layout_must(tmp_path: Path) -> None:
    disks = scratch_disks(4)
    blank(disks)
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    p = poolbench("study", "volblocksize", "--disks", ",".join(disks), "--levels", "8K,64K",
                  "--records", "4k", "--size", "96M", "--runtime", "3", "--replicates", "2",
                  "--max-replicates", "2", "--db", str(db), "--scratch-dir", str(scratch),
                  "--seed", "1")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(scratch) == []
    assert sqlite3.connect(db).execute("SELECT status FROM runs").fetchone()[0] == "finished"
    rows = export(db)
    check_figures(rows)
    key = "backend=zfs layout={} ashift=12 compression=off target=zvol volblocksize={}"
    mirrors, raidz = "mirror:2+mirror:2", "raidz1:4"
    assert {r["config"] for r in rows} == {
        key.format(lay, v) for lay in (mirrors, raidz) for v in ("8K", "64K")
    }
    for r in rows:  # fio ran on the zvol's block device, with O_DIRECT
        assert "filename=/dev/zvol/" in r["job_file"] and "direct=1" in r["job_file"], r["job_file"]
    # A mirror is charged one copy per byte; raidz1 of 4 charges an 8K block 4 sectors
    # (2 data + 1 parity, padded to 4) deflated by 32/44: 1.45 bytes per byte; a 64K block
    # 22 sectors: 1.00.
    expect = {
        (mirrors, "8K"): 1.0,
        (mirrors, "64K"): 1.0,
        (raidz, "8K"): raidz_charge_per_byte(8192, 4, 1),
        (raidz, "64K"): raidz_charge_per_byte(65536, 4, 1),
    }
    assert round(expect[(raidz, "8K")], 3) == 1.455
    for (lay, v), want in expect.items():
        got = _charged(rows, key.format(lay, v))
        assert abs(got / want - 1) <= 0.03, (lay, v, got, want)
    assert p.stdout.count("as planned") >= 4, p.stdout[-4000:]
    # A 4K random write into a 64K block rewrites the block: far more written per byte
    # than into an 8K block.
    amp8 = _amplification(rows, key.format(mirrors, "8K"), "rand-write-4k")
    amp64 = _amplification(rows, key.format(mirrors, "64K"), "rand-write-4k")
    assert amp64 > 1.5 * amp8, (amp8, amp64)
    assert "rand-write-4k write less than one 64K block" in p.stdout


def test_geometry_on_a_zvol_beside_a_dataset(tmp_path: Path) -> None:
    disks = scratch_disks(4)
    blank(disks)
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    p = poolbench("study", "geometry", "--disks", ",".join(disks), "--layouts", "raidz1:4",
                  "--targets", "dataset,zvol", "--records", "16k", "--size", "64M",
                  "--runtime", "3", "--replicates", "2", "--max-replicates", "2",
                  "--db", str(db), "--scratch-dir", str(scratch), "--seed", "2")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(scratch) == []
    rows = export(db)
    check_figures(rows)
    base = "backend=zfs layout=raidz1:4 ashift=12 recordsize=16K target="
    assert {r["config"] for r in rows} == {base + "dataset", base + "zvol"}
    zvol_rows = [r for r in rows if r["config"] == base + "zvol"]
    # the zvol took the recordsize level as its volblocksize, as ZFS read it back
    assert {r["pool"]["zvol"]["volblocksize"] for r in zvol_rows} == {16384}
    assert all("zvol" not in r["pool"] for r in rows if r["config"] == base + "dataset")
    want = raidz_charge_per_byte(16384, 4, 1)  # 6 sectors × 32/44: 1.09
    assert abs(_charged(rows, base + "zvol") / want - 1) <= 0.03
    assert "raidz1:4 zvol 16K" in p.stdout and "as planned" in p.stdout


def test_volblocksize_dry_run_plans_each_zvol_and_estimates(tmp_path: Path) -> None:
    disks = scratch_disks(4)
    blank(disks)
    scratch = tmp_path / "scratch"
    p = poolbench("study", "volblocksize", "--disks", ",".join(disks), "--dry-run",
                  "--db", str(tmp_path / "r.db"), "--scratch-dir", str(scratch),
                  "--seed", "1")  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    # 2 layouts × 3 volblocksizes × 3 replicates, each trial making its sparse zvol
    assert "estimated duration: about" in out and "for 18 trials" in out, out[-3000:]
    for vbs in ("8K", "16K", "64K"):
        assert f"-o volblocksize={vbs}" in out, vbs
    assert "zfs create -s -V" in out and "/pbvol" in out
    assert "dry run: nothing was changed" in p.stderr and not scratch.exists()
    assert leftovers(scratch) == []
