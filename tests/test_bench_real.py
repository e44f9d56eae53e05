"""`poolbench bench` end to end with real fio, on real filesystems this test makes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from tests.conftest import loops_backed_by, needs_fio, poolbench

pytestmark = needs_fio


def _json(stdout: str) -> dict:  # type: ignore[type-arg]
    return json.loads(stdout)


def test_bench_on_tmpfs_is_marked_unverified(tmpfs: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = poolbench(
        "bench",
        str(tmpfs),
        "--size",
        "32M",
        "--workloads",
        "seq-write,seq-read",
        "--min-runs",
        "2",
        "--max-runs",
        "3",
        "--json",
        "--db",
        str(db),
    )
    assert p.returncode == 0, p.stderr
    out = _json(p.stdout)
    by = {r["workload"]: r for r in out["results"]}
    for name in ("seq-write", "seq-read"):
        r = by[name]
        assert r["unit"] == "MiB/s" and r["mean"] > 0
        if r["ci_low"] is None:  # tmpfs can repeat a figure exactly: no interval, and says so
            assert any("identical" in w for w in r["warnings"]), r["warnings"]
        else:
            assert r["ci_low"] <= r["mean"] <= r["ci_high"]
        assert 2 <= r["replicates"] <= 3
        assert r["device_mean"] is None
        assert any("unverified" in w and "tmpfs" in w for w in r["warnings"])
    assert list(tmpfs.iterdir()) == []  # its files are gone
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"
    n = con.execute("SELECT count(*) FROM measurements").fetchone()[0]
    assert n == by["seq-write"]["replicates"] + by["seq-read"]["replicates"]


def test_bench_on_ext4_loop_is_device_verified(make_loop_fs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fs = make_loop_fs("512M")
    db = tmp_path / "r.db"
    workloads = (
        "seq-write,seq-read,reread,rand-read-4k,rand-write-4k,iozone-bread-1m,"
        "streams-write-2,streams-read-2,meta-create-seq,meta-stat-rand,meta-delete-seq"
    )
    p = poolbench(
        "bench",
        str(fs.mountpoint),
        "--size",
        "64M",
        "--workloads",
        workloads,
        "--runtime",
        "1",
        "--metadata-files",
        "1000",
        "--min-runs",
        "2",
        "--max-runs",
        "2",
        "--json",
        "--db",
        str(db),
    )
    assert p.returncode == 0, p.stderr
    by = {r["workload"]: r for r in _json(p.stdout)["results"]}
    assert set(by) == set(workloads.split(","))
    for name in ("seq-write", "seq-read", "iozone-bread-1m", "streams-read-2"):
        r = by[name]
        assert r["device_mean"] is not None and r["device_mean"] > 0
        # Served by the loop device: no device warning.
        assert not any("devices" in w for w in r["warnings"]), (name, r["warnings"])
    # The reread is cached on purpose: the devices served (nearly) nothing, and it says so.
    assert by["reread"]["cached_by_design"]
    assert any("measures the cache" in w for w in by["reread"]["warnings"])
    assert by["meta-create-seq"]["unit"] == "ops/s" and by["meta-create-seq"]["mean"] > 0
    assert by["rand-read-4k"]["unit"] == "IOPS"
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    meta = json.loads(con.execute("SELECT metadata FROM runs").fetchone()["metadata"])
    assert meta["fio_version"].startswith("fio-3")
    assert meta["devices"][0]["name"] == fs.name
    assert meta["devices"][0]["logical_sector"] == 512
    assert meta["working_set"]["size_bytes"] == 64 * 2**20
    assert meta["machine"]["kernel"]
    guards = json.loads(
        con.execute("SELECT guards FROM measurements WHERE workload='seq-read'").fetchone()[0]
    )
    assert guards["cache"]["method"] == "drop_caches" and guards["cache"]["verified"] is True
    assert "arc_during_read" not in guards["cache"]  # ext4: no ARC to ask
    # in-kernel filesystem: fio's CPU plus the whole machine's kernel time, labelled so
    assert guards["cpu"]["fs_scope"] == "whole machine kernel" and guards["cpu"]["s_per_gib"] > 0
    # The cold stat of 1000 empty files: fincore has nothing to count, so only the device
    # reads can verify it (≥ 16 bytes per file). Seen here (2026-11-22): 0 bytes read after
    # drop_caches, i.e. a stat served from cache that used to pass as "verified".
    rows = con.execute(
        "SELECT guards, warnings FROM measurements WHERE workload='meta-stat-rand'"
    ).fetchall()
    for text, warned in rows:
        g = json.loads(text)
        drop, read = g["cache"], g["device"]["read_bytes"]
        cold = read >= 16 * 1000
        assert drop["verified"] is cold, (read, drop)
        assert drop["metadata_read"].startswith("verified by device reads") is cold, drop
        assert (f"the devices read only {read} bytes for 1000 files" in warned) is not cold
    assert guards["device"]["devices"] == [fs.name]
    fio_cmds = con.execute("SELECT count(*) FROM commands WHERE argv LIKE '%fio%'").fetchone()[0]
    assert fio_cmds >= 22
    assert [p.name for p in fs.mountpoint.iterdir()] == ["lost+found"]


@pytest.mark.usefixtures("machine")  # --scratch: loop devices and a mount
@pytest.mark.slow
def test_scratch_bench_leaves_nothing_behind(tmp_path: Path) -> None:
    before = set(Path("/var/tmp").glob("poolbench-scratch-*"))
    p = poolbench(
        "bench",
        "--scratch",
        "256M",
        "--size",
        "32M",
        "--workloads",
        "seq-write,seq-read",
        "--min-runs",
        "2",
        "--max-runs",
        "2",
        "--db",
        str(tmp_path / "r.db"),
    )
    assert p.returncode == 0, p.stderr
    assert "seq-read" in p.stdout and "MiB/s" in p.stdout and "device" in p.stdout
    after = set(Path("/var/tmp").glob("poolbench-scratch-*"))
    assert after == before
    assert loops_backed_by(Path("/var/tmp/poolbench-scratch-")) == []
    assert "poolbench-scratch" not in Path("/proc/mounts").read_text()


def test_dry_run_changes_nothing(make_loop_fs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fs = make_loop_fs("128M")
    p = poolbench(
        "bench",
        str(fs.mountpoint),
        "--size",
        "16M",
        "--workloads",
        "seq-write,seq-read",
        "--dry-run",
        "--db",
        str(tmp_path / "r.db"),
    )
    assert p.returncode == 0, p.stderr
    assert "would run:" in p.stderr and "fio" in p.stderr
    assert [x.name for x in fs.mountpoint.iterdir()] == ["lost+found"]


def test_smallfile_write_then_cold_read_on_ext4(make_loop_fs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """smallfile-*: N files of 16K, one I/O each; the write reaches the device (syncfs
    counted), the cold read is served by it; the figure is files per second."""
    fs = make_loop_fs("256M")
    db, n, bs = tmp_path / "r.db", 300, 16384
    args = ["--metadata-files", str(n), "--min-runs", "2", "--max-runs", "2", "--size", "8M"]
    p = poolbench("bench", str(fs.mountpoint), "--workloads",
                  "smallfile-write-16k,smallfile-read-16k", *args, "--db", str(db))  # fmt: skip
    assert p.returncode == 0, p.stderr
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = con.execute("SELECT * FROM measurements").fetchall()
    assert (
        sorted(r["workload"] for r in rows)
        == ["smallfile-read-16k"] * 2 + ["smallfile-write-16k"] * 2
    )
    for r in rows:
        assert (r["ops"], r["app_bytes"], r["unit"]) == (n, n * bs, "ops/s")
        assert r["value"] == pytest.approx(n / r["seconds"])
        dev = json.loads(r["guards"])["device"]
        side = "read_bytes" if "read" in r["workload"] else "write_bytes"
        assert dev[side] >= 0.95 * n * bs, (r["workload"], dev)
        if "write" in r["workload"]:
            job = r["job_file"]
            assert "refill_buffers=1" in job and "end_fsync=1" in job and "nrfiles=300" in job
    assert [x.name for x in fs.mountpoint.iterdir()] == ["lost+found"]
