"""The built-in studies the other guest tests do not run, end to end on OpenZFS 2.x (guest
tier), one after another on the same whole scratch disks with no override, as a user would
run them: `poolbench study NAME --disks /dev/vdb,...`.

parity and capacity (test_openzfs_studies.py; here parity again with dRAID), sync-slog and geometry
(test_openzfs_iops_studies.py) and md alone (test_md_guest.py) run elsewhere. Here each
study uses OpenZFS's own features where it has them (lz4 and zstd, recordsize 1M, per-vdev
ashift, dRAID's sequential rebuild onto a distributed spare), and every stored figure is
checked: non-zero and verified at the member disks (studykit), and the study's own figure
(compressratio, recordsize and ashift read back, capacity to the planner's byte, fill
reached, bytes resilvered). The disks are made blank once, by the first study that uses
them; after every study no partition, label or pool may be left on them, so the next study
needs no --destroy-data-on. Last, fs-compare with every stack at once: ZFS, btrfs and md
(ext3, ext4, xfs) on the same loop disks.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import rules_for_reported
from poolbench.units import parse_size

from .studykit import (
    GUEST_TARBALL,
    blank,
    check_figures,
    disk_bytes,
    export,
    leftovers,
    poolbench,
    scratch_disks,
)

pytestmark = pytest.mark.openzfs
MiB = 1 << 20
SMALL = ["--replicates", "2", "--max-replicates", "2", "--seed", "1"]
_blanked: set[str] = set()


def _study(
    tmp_path: Path, name: str, disks: list[str], *opts: str, figures: bool = True
) -> tuple[list[Any], str]:
    if not set(disks) <= _blanked:  # once per disk: later studies find what the last left
        blank([d for d in disks if d not in _blanked])
        _blanked.update(disks)
    db, scratch = tmp_path / f"{name}.db", tmp_path / "scratch"
    p = poolbench("study", name, "--disks", ",".join(disks), *opts, *SMALL,
                  "--db", str(db), "--scratch-dir", str(scratch))  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(scratch) == []
    for d in disks:  # returned as found: no partition (and so no label in one) is left
        name_ = Path(d).name
        assert not list(Path("/sys/class/block", name_).glob(name_ + "*[0-9]")), d
    assert sqlite3.connect(db).execute("SELECT status FROM runs").fetchone()[0] == "finished"
    rows = export(db)
    if figures:
        check_figures(rows)
    return rows, p.stdout


def _level(row: dict[str, Any], factor: str) -> str:
    return dict(kv.split("=", 1) for kv in row["config"].split())[factor]


def _means(rows: list[dict[str, Any]], workload: str) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for r in rows:
        if r["workload"] == workload:
            by.setdefault(r["config"], []).append(r["value"])
    return {c: sum(v) / len(v) for c, v in by.items()}


def test_compression_lz4_and_zstd_reach_the_data_ratio(tmp_path: Path) -> None:
    rows, out = _study(tmp_path, "compression", scratch_disks(3), "--levels", "lz4,zstd",
                       "--compressibility", "0,50", "--size", "64M", figures=False)  # fmt: skip
    assert {(_level(r, "compression"), _level(r, "compressibility")) for r in rows} == {
        (c, p) for c in ("lz4", "zstd") for p in ("0", "50")
    }
    check_figures([r for r in rows if _level(r, "compressibility") == "0"])
    for r in rows:
        assert r["pool"]["properties"]["compression"]["value"] == _level(r, "compression")
        ratio = float(str(r["guards"]["pool"]["compressratio"]).rstrip("x"))
        if _level(r, "compressibility") == "0":
            assert 1.0 <= ratio <= 1.05, (r["config"], ratio)
            continue
        # fio's buffer_compress_percentage=50: each buffer compresses by about half, and the
        # disks move about half the bytes; both figures say so instead of passing silently.
        assert 1.6 <= ratio <= 2.4, (r["config"], ratio)
        dev = r["guards"]["device"]
        if r["workload"] == "seq-read":
            assert 0.95 / ratio <= dev["read_bytes"] / r["app_bytes"] <= 1.2 / ratio, dev
            assert any("decompressed bytes" in w for w in r["warnings"]), r["warnings"]
            assert not any("measures RAM" in w for w in r["warnings"]), r["warnings"]
        if r["workload"] == "seq-write":
            assert any("50% compressibility" in w for w in r["warnings"]), r["warnings"]
    assert "achieved compressratio" in out


def test_recordsize_up_to_1m(tmp_path: Path) -> None:
    rows, _ = _study(tmp_path, "recordsize", scratch_disks(3), "--levels", "128K,1M",
                     "--records", "1m", "--runtime", "2", "--size", "64M")  # fmt: skip
    assert {_level(r, "recordsize") for r in rows} == {"128K", "1M"}
    for r in rows:  # read back from the dataset, in bytes
        have = int(r["pool"]["properties"]["recordsize"]["value"])
        assert have == parse_size(_level(r, "recordsize")), r["pool"]["properties"]


def test_ashift_9_keeps_more_of_a_raidz1_than_12(tmp_path: Path) -> None:
    disks = scratch_disks(4)
    rows, _ = _study(tmp_path, "ashift", disks, "--layouts", "raidz1",
                     "--levels", "9,12", "--size", "32M")  # fmt: skip
    caps = _means(rows, "capacity")
    a9, a12 = (caps[f"backend=zfs layout=raidz1 ashift={a}"] for a in (9, 12))
    assert a9 > a12, caps
    layout = parse_layout("raidz1", (disk_bytes(disks[0]),) * 4)
    for r in rows:  # the pool was made with the ashift asked for, read back per vdev
        ashift = int(_level(r, "ashift"))
        assert r["pool"]["vdev_ashift"] == [ashift], r["pool"]
        if r["workload"] == "capacity":  # and holds what the planner says, to the byte
            rules = rules_for_reported(r["pool"]["zfs_version"])
            plan = plan_pool(layout, ashift, rules, whole_disk=True)
            assert r["guards"]["capacity"]["usable_bytes"] == plan.usable_bytes, r["config"]


def test_fill_reaches_the_levels_asked(tmp_path: Path) -> None:
    # The 300 MiB disks: filling 2 GiB disks to 50% would write gigabytes under emulation.
    rows, out = _study(tmp_path, "fill", scratch_disks(3, 300 * MiB), "--levels", "10,50",
                       "--size", "16M")  # fmt: skip
    for r in rows:
        f = r["guards"]["fill"]
        assert abs(f["achieved_percent"] - f["asked_percent"]) < 8, f
    assert "fill levels reached" in out


def test_resilver_heals_raidz_and_mirror_and_rebuilds_draid_onto_its_spare(
    tmp_path: Path,
) -> None:
    # mirror:2 and raidz1:3 leave a disk for the replacement; the dRAID uses all four and
    # rebuilds onto its distributed spare (`zpool replace -s`), then OpenZFS scrubs.
    rows, out = _study(tmp_path, "resilver", scratch_disks(4), "--layouts",
                       "mirror:2,raidz1:3,draid1:2d:4c:1s", "--size", "32M")  # fmt: skip
    resilvers = [r for r in rows if r["workload"] == "resilver"]
    assert len(resilvers) == 3 * 2  # three layouts, two replicates
    for r in rows:
        if r["workload"] == "degraded-read":
            assert r["guards"]["pool_state"]["state"] == "degraded"
    for r in resilvers:
        rs = r["guards"]["resilver"]
        assert rs["resilvered_bytes"] > 0 and r["seconds"] > 0 and r["value"] > 0, rs
        # The pool holds the 32 MiB working set: a mirror copies all of it, a member of a
        # raidz1 of 3 its share with parity (32 × 1.5 / 3 = 16 MiB), to ZFS's rounding. A
        # dRAID child's share depends on where ZFS allocated the data (2.3.2: 0.2 to 12.3
        # MiB): dRAID maps 16 MiB row slabs through its permutation, one child of four being
        # a row's spare space, and 32 MiB fills few rows.
        if "mirror" in r["config"]:
            assert rs["resilvered_bytes"] >= 0.95 * 32 * MiB, rs
        elif "raidz1" in r["config"]:
            assert rs["resilvered_bytes"] >= 0.95 * 16 * MiB, rs
        if "draid" in r["config"]:
            assert rs["kind"] == "sequential rebuild to a distributed spare", rs
            assert rs["with"] == "draid1-0-0" and rs["rebuilt_vdev"] == "draid1:2d:4c:1s-0"
            assert rs["verify_scrub"]["seen"] and rs["verify_scrub"]["seconds"] > 0, rs
            assert "scrub repaired" in rs["verify_scrub"]["status_line"]
        else:
            assert rs["kind"] == "healing resilver" and rs["with"].startswith("/dev/"), rs
    assert "resilvered in" in out
    assert "(sequential rebuild to a distributed spare; the verifying scrub:" in out


def test_width_with_draid_beside_raidz(tmp_path: Path) -> None:
    disks = scratch_disks(5)
    layouts = ["raidz1:4", "raidz1:3+raidz1:2", "draid1:3d:5c:0s"]
    rows, out = _study(tmp_path, "width", disks, "--layouts", ",".join(layouts),
                       "--size", "32M")  # fmt: skip
    assert "raidz1:4: 3 data disks, off" in out and "raidz1:2: 1 data disks, on" in out
    assert {_level(r, "layout") for r in rows} == set(layouts)
    size = disk_bytes(disks[0])
    for r in rows:  # each layout's usable space is the planner's, to the byte
        if r["workload"] == "capacity":
            rules = rules_for_reported(r["pool"]["zfs_version"])
            layout = parse_layout(_level(r, "layout"), (size,) * 5)
            plan = plan_pool(layout, 12, rules, whole_disk=True)
            assert r["guards"]["capacity"]["usable_bytes"] == plan.usable_bytes, r["config"]
    kinds = {r["pool"]["topology"][0]["kind"] for r in rows if "draid" in r["config"]}
    assert kinds == {"draid1:3d:5c:0s"}, kinds


def test_parity_with_draid_beside_raidz(tmp_path: Path) -> None:
    # draid2:2d:4c:0s is raidz2:4's twin: 2 data + 2 parity over 4 children, no spare. Both
    # must write twice the data (a 128K record: 32 data sectors and 32 of parity at ashift
    # 12), which the member disks confirm.
    layouts = ["raidz2:4", "draid2:2d:4c:0s"]
    rows, _ = _study(tmp_path, "parity", scratch_disks(4), "--layouts", ",".join(layouts),
                     "--size", "32M")  # fmt: skip
    assert {_level(r, "layout") for r in rows} == set(layouts)
    for r in rows:
        if r["workload"] == "seq-write":
            amp = r["guards"]["device"]["amplification"]["amplification"]
            assert 1.8 <= amp <= 2.6, (r["config"], amp)
    kinds = {r["pool"]["topology"][0]["kind"] for r in rows if "draid" in r["config"]}
    assert kinds == {"draid2:2d:4c:0s"}, kinds


def test_concurrency(tmp_path: Path) -> None:
    rows, _ = _study(tmp_path, "concurrency", scratch_disks(3), "--layouts", "raidz1",
                     "--streams", "1,2", "--size", "32M")  # fmt: skip
    assert {r["workload"] for r in rows} == {
        f"streams-{d}-{n}" for d in ("write", "read") for n in (1, 2)
    }


def test_mirror(tmp_path: Path) -> None:
    rows, _ = _study(tmp_path, "mirror", scratch_disks(2), "--levels", "1,2", "--records",
                     "64k,256k", "--tests", "write,read", "--size", "32M")  # fmt: skip
    assert {_level(r, "layout") for r in rows} == {"stripe:1", "mirror:2"}


def test_vdev_source(tmp_path: Path) -> None:
    rows, _ = _study(tmp_path, "vdev-source", scratch_disks(3), "--slice-size", "256M",
                     "--size", "32M")  # fmt: skip
    assert {_level(r, "vdev_source") for r in rows} == {"whole", "partition", "slice"}


def test_qd_curve(tmp_path: Path) -> None:
    rows, out = _study(tmp_path, "qd-curve", scratch_disks(2), "--depths", "1,8",
                       "--jobs", "1", "--runtime", "2", "--size", "32M")  # fmt: skip
    for r in rows:
        if "qd8" in r["workload"]:
            assert "iodepth=8" in r["job_file"] and "direct=1" in r["job_file"]
            assert "queue_depth" in r["guards"], r["guards"].keys()
    assert "qd1:" in out and "qd8:" in out


def test_expand_grows_a_raidz_as_planned(tmp_path: Path) -> None:
    # raidz1 of three whole 2 GiB disks, 64 MiB written, the fourth disk attached (RAIDZ
    # expansion, OpenZFS 2.3): USED + AVAIL before and after must be the planner's to the
    # byte (whole disks: zpool partitions each, the attached one too), the reflow must have
    # had the data on the pool to move, and the read after it is device-verified.
    from poolbench.planner.expansion import plan_expansion

    disks = scratch_disks(4)
    rows, out = _study(tmp_path, "expand", disks, "--layouts", "raidz1:3", "--size", "64M")
    version = rows[0]["pool"]["zfs_version"]
    size = disk_bytes(disks[0])
    before = plan_pool(parse_layout("raidz1:3", (size,) * 3), 12, rules_for_reported(version),
                       whole_disk=True)  # fmt: skip
    after = plan_expansion(before, 4, new_device=size)
    expansions = [r for r in rows if r["workload"] == "expand"]
    assert len(expansions) == 2
    for r in expansions:
        e = r["guards"]["expand"]
        assert (e["usable_before"], e["usable_after"]) == (before.usable_bytes, after.usable_bytes)
        assert e["width_before"] == 3 and e["seconds"] > 0
        assert e["allocated_bytes"] >= 64 << 20  # the working set (with its parity) moved
    capacity = {r["value"] for r in rows if r["workload"] == "capacity"}
    assert capacity == {after.usable_bytes / (1 << 30)}  # the capacity workload ran after it
    assert out.count("reported +0.00%") == 2, out


def test_cold_metadata_reads_reach_the_disks(tmp_path: Path) -> None:
    # fs-compare's first whole run found every cold stat of 200 files served from RAM (the
    # disks read 512 bytes on ZFS, 0 on btrfs): poolbench listed the files after the
    # export/import, and OpenZFS prefetches the dnodes of a listed directory; on this kernel
    # (6.1) drop_caches leaves btrfs's metadata pages, which the remount's own check loaded.
    # Now each stat must read its metadata: at least 16 bytes a file (32 dnodes in a 512-byte
    # sector), with no warning that RAM served it, and the drop verified.
    scratch = Path(tempfile.mkdtemp(prefix="pb-meta-", dir="/var/tmp")) / "scratch"
    study = {
        "name": "cold-metadata", "replicates": 2, "max_replicates": 2,
        "disks": {"count": 3, "size": "256M", "source": "loop"},
        "factors": {"backend": ["zfs", "btrfs"], "layout": ["parity1"]},
        "workloads": {"names": ["meta-create-seq", "meta-stat-seq"], "size": "16M",
                      "metadata_files": 200},
    }  # fmt: skip
    path, db = tmp_path / "meta.toml", tmp_path / "r.db"
    path.write_text(tomli_w.dumps(study))
    try:
        p = poolbench("run", str(path), "--db", str(db), "--scratch-dir", str(scratch))
    finally:
        left = leftovers(scratch)
        shutil.rmtree(scratch.parent, ignore_errors=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert left == []
    stats = [r for r in export(db) if r["workload"] == "meta-stat-seq"]
    assert len(stats) == 4
    for r in stats:
        read = r["guards"]["device"]["read_bytes"]
        assert read >= 200 * 16, (r["config"], read, r["warnings"])
        assert not [w for w in r["warnings"] if "RAM" in w], r["warnings"]
        assert r["guards"]["cache"]["verified"] is True, r["guards"]["cache"]
        if _level(r, "backend") == "zfs":  # the ARC fetched the dnodes: its counters agree
            seen = r["guards"]["cache"]["arc_during_read"]
            assert seen["metadata_blocks_fetched"] > 0, seen


def test_fs_compare_zfs_btrfs_and_md_on_the_same_disks(tmp_path: Path) -> None:
    # The built-in fs-compare as the guest offers it (md there), at small scale: its study
    # file from --print-toml, with 200 metadata files instead of 2000 and md's filesystems
    # spread over the two levels (ext3 and xfs on raid5, ext4 on raid6) to keep 7
    # configurations; loop disks under /var/tmp (the guest's /tmp is tmpfs).
    scratch = Path(tempfile.mkdtemp(prefix="pb-fsc-", dir="/var/tmp")) / "scratch"
    p = poolbench("study", "fs-compare", "--disks", "4x256M", "--size", "16M",
                  "--tarball", GUEST_TARBALL, "--replicates", "2", "--max-replicates", "2",
                  "--print-toml")  # fmt: skip
    assert p.returncode == 0, p.stderr
    study = tomllib.loads(p.stdout)
    assert study["factors"]["backend"] == ["zfs", "btrfs", "md"], study["factors"]
    study["workloads"]["metadata_files"] = 200
    study["exclude"] += [{"backend": "md", "layout": "parity1", "fs": "ext4"},
                         {"backend": "md", "layout": "parity2", "fs": "ext3"},
                         {"backend": "md", "layout": "parity2", "fs": "xfs"}]  # fmt: skip
    path, db = tmp_path / "fs-compare.toml", tmp_path / "r.db"
    path.write_text(tomli_w.dumps(study))
    try:
        p = poolbench("run", str(path), "--db", str(db), "--scratch-dir", str(scratch),
                      "--seed", "1")  # fmt: skip
    finally:
        left = leftovers(scratch)
        shutil.rmtree(scratch.parent, ignore_errors=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert left == []
    rows = export(db)
    assert {(_level(r, "backend"), _level(r, "layout"), _level(r, "fs")) for r in rows} == {
        ("zfs", "parity1", "zfs"), ("zfs", "parity2", "zfs"),
        ("btrfs", "parity1", "btrfs"), ("btrfs", "parity2", "btrfs"),
        ("md", "parity1", "ext3"), ("md", "parity1", "xfs"), ("md", "parity2", "ext4"),
    }  # fmt: skip
    assert len(rows) == 7 * 2 * 6  # configurations × replicates × workloads
    # OpenZFS compresses by default (compression=on, lz4), and a source tree is text: ZFS's
    # untar stores less than its file bytes (2.3.2: compressratio 2.23-2.36), which the
    # figure must say instead of passing as device-verified.
    zfs_untar = [r for r in rows if r["workload"] == "untar" and "backend=zfs" in r["config"]]
    check_figures([r for r in rows if r not in zfs_untar])
    for r in zfs_untar:
        ratio = float(str(r["guards"]["pool"]["compressratio"]).rstrip("x"))
        assert ratio > 1.5 and r["guards"]["device"]["write_bytes"] > 0, r["guards"]["pool"]
        short = [w for w in r["warnings"] if "did not reach the disks" in w]
        assert all("stores files compressed (compression=on)" in w for w in short), short
    assert "achieved compressratio 1.00, 2." in " ".join(p.stdout.split())  # the header says so
    for r in rows:
        backend, parity = _level(r, "backend"), int(_level(r, "layout")[-1])
        pool = r["pool"]
        if backend == "zfs":  # parity1 is raidz1 of the four disks, parity2 raidz2
            assert [(t["kind"], t["width"]) for t in pool["topology"]] == [(f"raidz{parity}", 4)]
        elif backend == "btrfs":  # the data profile read back from `btrfs filesystem df`
            assert pool["profiles"]["Data"] == f"raid{4 + parity}", pool["profiles"]
        else:
            assert pool["level"] == f"raid{4 + parity}" and pool["fstype"] == _level(r, "fs")
            assert pool["initial_resync"]["measured_during_resync"] is False
        if r["workload"] == "untar":
            assert r["ops"] > 1000 and r["guards"]["untar"]["files"] == r["ops"]
    report = poolbench("report", "latest", "--db", str(db))
    assert report.returncode == 0, report.stderr
    assert "md initial resync" in report.stdout
