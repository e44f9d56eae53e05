"""`study --files-from @NAME` for real: the recordsize study at one level on a zfs-fuse
raidz1 of three 256 MiB loop devices, its untar workload writing a tree drawn from a saved
histogram, through the real CLI. What must hold is computed here, independently of the run:
the sizes the draw gives for this histogram, seed and working set (planner/filedraw.py):
the stored untar figure counts exactly those files and bytes, and the disks wrote at least
those bytes and at most what the files' blocks take on the layout (planner/dataspace.py)
with room to spare."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import poolbench, stored_rows

from poolbench.planner.capacity import plan_pool
from poolbench.planner.dataspace import WriteModel, data_space
from poolbench.planner.filedraw import scaled_draw
from poolbench.planner.filesizes import FileSizes, ScanNotes, units_of
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import V23
from poolbench.store import histograms

COUNTS = {2: 300, 8: 150, 32: 40, 256: 10}  # 1K, 4K, 16K, 128K: 500 files, 2.8 MiB
SEED = 5


def test_untar_writes_the_drawn_sizes_onto_the_pool(zfs_fuse: None, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    logical = sum(u * 512 * c for u, c in COUNTS.items())
    h = FileSizes(COUNTS, logical, 0, "/srv/mail", notes=ScanNotes(dirs=5))
    histograms.save("mail", h.as_dict(), db)
    p = poolbench("study", "recordsize", "--disks", "3x256M", "--levels", "128K",
                  "--workloads", "untar", "--replicates", "2", "--max-replicates", "2",
                  "--files-from", "@mail", "--seed", str(SEED), "--db", str(db),
                  "--scratch-dir", str(tmp_path / "scratch"))  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    # the study's small-file count (2,000) and working set (64M) hold all 500 files
    drawn = scaled_draw(COUNTS, 2000, 64 << 20, SEED)
    assert len(drawn.sizes) == 500
    assert f"untar writes 500 files of {drawn.total / 2**20:.1f} MiB drawn (seed 5)" in " ".join(
        p.stdout.split()
    )
    rows = stored_rows(db, "untar")
    assert len(rows) == 2
    counts: dict[int, int] = {}
    for size in drawn.sizes:
        counts[units_of(size)] = counts.get(units_of(size), 0) + 1
    tree = FileSizes(counts, drawn.total, 0, "drawn", notes=ScanNotes(dirs=5))
    plan = plan_pool(parse_layout("raidz1:3x256M"), 12, V23)
    # everything the files take on the disks once their transaction group is written:
    # each block's raidz parity and padding at ashift 12, plus the metadata model
    raw = data_space(plan, tree, WriteModel(compression=False)).as_dict()["raw_bytes"]
    assert isinstance(raw, int) and raw > 2 * drawn.total  # 1K files cost 8K on raidz1:3
    for r in rows:
        assert r["guards"]["untar"] == r["guards"]["untar"] | {
            "files": 500, "file_bytes": sum(drawn.sizes)
        }  # fmt: skip
        device = r["guards"]["device"]
        assert "raidz1 of 3, ashift 12" in device["amplification"]["model"]["layout"]
        # Durable inside the window (syncfs): every file byte reached the disks, in place
        # or as ZFS intent-log records (zfs-fuse logs small files' data there first, which
        # is why the window can hold less than the final raidz allocation); never more
        # than that allocation with room for the log's own blocks.
        assert drawn.total <= device["write_bytes"] <= 1.5 * raw, (device, raw)
