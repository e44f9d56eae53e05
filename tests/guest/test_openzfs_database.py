"""`poolbench study database` at its smallest on real OpenZFS (guest tier): pgbench's
read-write transactions at scale 1 on a mirror of two scratch disks, full_page_writes on and
off, through the CLI; every figure and its device bytes per transaction checked, nothing left
behind (no pool, no PostgreSQL server).

Needs PostgreSQL in the guest image (vm/ozvm.sh TOOLS_PKGS: postgresql); an image built
without it skips this file with that reason."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest

from poolbench.workloads import pgbench

from .studykit import blank, export, leftovers, poolbench, scratch_disks, sh

pytestmark = [
    pytest.mark.openzfs,
    pytest.mark.skipif(not Path("/usr/lib/postgresql").is_dir(),
                       reason="the guest image has no PostgreSQL (vm/ozvm.sh TOOLS_PKGS)"),
]  # fmt: skip


def test_database_study_at_scale_one(tmp_path: Path) -> None:
    disks = scratch_disks(2)
    blank(disks)
    # the postgres user must reach its clusters under the scratch dir (pytest's is 0700)
    scratch = Path(tempfile.mkdtemp(prefix="pbdb-", dir="/var/tmp"))
    scratch.chmod(0o755)
    db = tmp_path / "db.db"
    p = poolbench("study", "database", "--disks", ",".join(disks), "--layouts", "mirror:2",
                  "--levels", "8K", "--fpw", "on,off", "--logbias", "latency", "--modes",
                  "tpcb", "--clients", "1", "--size", "16M", "--runtime", "3",
                  "--replicates", "2", "--max-replicates", "2", "--db", str(db),
                  "--scratch-dir", str(scratch), "--seed", "1")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(scratch) == [] and "postgres -D" not in sh("ps", "-eo", "args").stdout
    assert sqlite3.connect(db).execute("SELECT status FROM runs").fetchone()[0] == "finished"
    rows = export(db)
    assert len(rows) == 2 * 2  # full_page_writes on/off × 2 replicates
    for r in rows:
        pg = r["guards"]["pgbench"]
        txns = pg["transactions"]
        assert r["value"] > 0 and txns > 0 and pg["cache"]["label"] == "warm"
        # a mirror: every commit's fsync at least one 4 KiB block on both members
        assert pg["device_bytes_per_txn"] >= 2 * pgbench.bytes_floor(8192, txns, 1), pg
    assert "pgbench-tpcb-c1: the winner per layout" in p.stdout
    assert "KiB/txn" in p.stdout and "warm: the database was smaller" in p.stdout
