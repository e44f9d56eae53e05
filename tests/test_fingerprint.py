"""What a measurement ran on (records/fingerprint.py, engine/fingerprint.py, store/fingerprints.py):
the typed record and its versioned JSON, its own table beside the runs (an older store still
reads, an import carries it), and the probe on recorded zfs-fuse and OpenZFS output: settable
properties only (no free space, no guid), the layout as `zpool status` shows it, fill from
statvfs, what could not be read named in the notes. The probe on a real zfs-fuse pool and
real loop devices is in tests/test_bench_zfs.py; the bench and study paths store it
(tests/test_engine_loop.py, tests/test_study_recorded_fio.py)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from poolbench.engine import fingerprint
from poolbench.guards.devices import MountInfo, Target
from poolbench.records.fingerprint import VERSION, Disk, Fingerprint, FingerprintError, Pool
from poolbench.store import fingerprints, merge
from poolbench.store.db import Store
from poolbench.store.opening import StoreError
from poolbench.system import probes
from poolbench.system.runner import CommandResult, RecordingRunner
from poolbench.zfs import parse

DATA = Path(__file__).parent / "data" / "zfs"


def _fp(**pool: object) -> Fingerprint:
    p = Pool("zfs", "tank", "tank/a", "raidz1:3", {"ashift": "12"}, {"recordsize": "131072"},
             1000, 250, 12.0)  # fmt: skip
    return Fingerprint(
        "/tank/a", "0.5.0", "Linux 6.1.0", "host", p,
        (Disk("sda", "WDC X", "WD-1", "81.00A81", 4 << 40),
         Disk("loop3", None, None, None, 1 << 30, "loop device backed by /x.img: no serial")),
        "zfs-2.2.6-1", "fio-3.33", 24 << 30, 12 << 30, 1 << 30, ("a note",),
    )  # fmt: skip


def test_the_record_round_trips_and_a_newer_one_is_refused() -> None:
    fp = _fp()
    assert Fingerprint.from_text(fp.to_text()) == fp
    assert fp.fill == 0.25 and fp.disks[0].ident == "serial WD-1" and fp.disks[1].ident == "loop3"
    newer = json.loads(fp.to_text()) | {"version": VERSION + 1}
    with pytest.raises(FingerprintError, match=f"version {VERSION + 1}") as exc:
        Fingerprint.from_json(newer)
    assert exc.value.newer
    for bad in ("{", "[]", json.dumps({"path": "/x"})):
        with pytest.raises(FingerprintError) as exc:
            Fingerprint.from_text(bad)
        assert not exc.value.newer
    # A record of this version with fields missing (or of the wrong type) reads with defaults.
    bare = Fingerprint.from_json({"version": 1, "ram_bytes": "lots", "disks": [{"name": "sdb"}]})
    assert bare.ram_bytes is None and bare.pool.fill is None and bare.disks == (Disk("sdb"),)


def _runs(store: Store) -> tuple[int, int]:
    return (store.start_run("bench", "/tank/a", ["poolbench"], {}),
            store.start_run("study", "parity", ["poolbench"], {}))  # fmt: skip


def test_the_store_keeps_fingerprints_in_their_own_table_and_old_stores_read(
    tmp_path: Path,
) -> None:
    db = tmp_path / "r.db"
    store = Store(db)
    bench, study = _runs(store)
    fingerprints.add(store, bench, _fp())
    fingerprints.add(store, study, _fp(), "raidz1:3", 0)
    fingerprints.add(store, study, _fp(), "raidz1:3", 1)
    (b,) = fingerprints.of_run(store, bench)
    assert (b.config, b.replicate, b.fingerprint) == (None, None, _fp())
    assert [(s.config, s.replicate) for s in fingerprints.of_run(store, study)] == [
        ("raidz1:3", 0), ("raidz1:3", 1)]  # fmt: skip
    assert "fingerprint" not in json.loads(store.run(bench)["metadata"])  # not in runs.metadata
    # Imported with its run (store/merge.py carries every table with a run_id).
    other = Store(tmp_path / "other.db")
    report = merge.import_store(other, db)
    mine = dict(report.imported)
    assert fingerprints.of_run(other, mine[study])[1].replicate == 1
    store.close()
    other.close()
    # A store from before migration 0009: read-only it opens unchanged and has none.
    con = sqlite3.connect(db)
    con.executescript(
        "DROP TABLE fingerprints; DELETE FROM schema_migrations WHERE name = '0009_fingerprints';"
    )
    con.close()
    before = db.read_bytes()
    old = Store(db, mode="read")
    assert fingerprints.of_run(old, bench) == [] and db.read_bytes() == before
    old.close()
    assert fingerprints.of_run(Store(db), bench) == []  # migrated when opened to write


def test_a_damaged_or_newer_fingerprint_row_is_named(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    bench, _ = _runs(store)
    with store.transaction() as c:
        c.execute("INSERT INTO fingerprints (run_id, version, record, created_at) "
                  "VALUES (?, 1, 'not json', 0)", (bench,))  # fmt: skip
    with pytest.raises(StoreError, match="damaged.*fingerprints row 1"):
        fingerprints.of_run(store, bench)
    newer = json.dumps(_fp().to_json() | {"version": VERSION + 1})
    with store.transaction() as c:
        c.execute("UPDATE fingerprints SET record = ?", (newer,))
    with pytest.raises(StoreError, match="newer poolbench") as exc:
        fingerprints.of_run(store, bench)
    assert "Upgrade poolbench" in exc.value.fix


def _zpool(answers: dict[str, str]) -> RecordingRunner:
    def answer(argv: Sequence[str]) -> CommandResult:
        return CommandResult(tuple(argv), 0, answers.get(argv[1], ""), "", 0.0)

    return RecordingRunner({"zpool": answer, "zfs": lambda a: answer(["zfs", "get"])})


def test_zfs_fuse_pool_is_read_back_with_its_settable_properties(tmp_path: Path) -> None:
    props = parse.parse_pool_get_all(
        (DATA / "zfsfuse-zpool-get-all.txt").read_text(), "h2cap", "zfs-fuse"
    )
    assert props["autoreplace"] == {"value": "off", "source": "default"}
    assert props["free"]["source"] == "-" and props["dedupratio"]["value"] == "1.00x"
    runner = _zpool({
        "get": (DATA / "zfsfuse-zpool-get-all.txt").read_text().replace("h2cap", "zlrec"),
        "status": (DATA / "zfsfuse-status-raidz1-log-spare.txt").read_text(),
        "upgrade": "This system is currently running ZFS pool version 23.\n",
    })  # fmt: skip
    runner.responses["zfs"] = (DATA / "zfsfuse-zfs-get-all.txt").read_text()
    mount = MountInfo(str(tmp_path), "fuse.zfs", "zlrec", "0:40", "rw,relatime,user_id=0")
    fp = fingerprint.take(runner, tmp_path, Target(str(tmp_path), mount), "fio-3.33", mount)
    pool = fp.pool
    assert (pool.stack, pool.name, pool.dataset) == ("zfs", "zlrec", "zlrec")
    assert pool.layout == "raidz1:3 + logs disk:1 + spares disk:1"
    assert pool.properties["autoreplace"] == "off" and pool.properties["version"] == "23"
    assert not {"guid", "free", "size", "capacity", "health"} & set(pool.properties)
    ds = pool.dataset_properties
    assert (ds["recordsize"], ds["compression"], ds["mountpoint"]) == (
        "131072", "off", "/tmp/h2exp/cap/mnt")  # fmt: skip
    assert not {"used", "available", "creation", "version", "usedbydataset"} & set(ds)
    st = os.statvfs(tmp_path)
    assert pool.size_bytes == st.f_blocks * st.f_frsize
    assert fp.fill == pytest.approx((st.f_blocks - st.f_bfree) / st.f_blocks, abs=0.01)
    assert fp.zfs == "zfs-fuse (pool version 23)" and fp.fio == "fio-3.33"
    assert pool.fragmentation is None and fp.arc_max_bytes is None and fp.disks == ()
    notes = " | ".join(fp.notes)
    assert "zfs-fuse (pool version 23) has no fragmentation property" in notes
    assert "zfs-fuse keeps its ARC to itself" in notes and "no block device" in notes
    assert all(c.argv[0] in ("zpool", "zfs") for c in runner.calls)  # nothing else was run


def test_openzfs_fragmentation_and_version_are_read(tmp_path: Path) -> None:
    get = "size\t1000\t-\nfragmentation\t12\t-\nashift\t12\tlocal\nguid\t99\t-\n"
    status = (DATA / "openzfs-2.3.2-special-status.txt").read_text()
    runner = _zpool({"get": get, "version": "zfs-2.3.2-1\nzfs-kmod-2.3.2-1\n", "status": status})
    runner.responses["zfs"] = "recordsize\t1048576\tlocal\nused\t5\t-\n"
    mount = MountInfo(str(tmp_path), "zfs", "pbsp/a", "0:40")
    fp = fingerprint.take(runner, tmp_path, None, "", mount)
    assert fp.pool.fragmentation == 12.0 and fp.pool.properties == {"ashift": "12"}
    assert fp.pool.dataset_properties == {"recordsize": "1048576"}
    assert fp.pool.layout == "raidz1:3 + special mirror:2" and fp.zfs is not None
    assert fp.zfs.startswith("zfs-2.3.2-1") and fp.fio is None
    assert ("zpool", "get", "-Hp", "-o", "property,value,source", "all", "pbsp") in runner.argvs


def test_another_filesystem_records_its_mount_options(tmp_path: Path) -> None:
    mount = MountInfo(str(tmp_path), "ext4", "/dev/sdz1", "8:1", "rw,noatime,rw,errors=remount-ro")
    fp = fingerprint.take(RecordingRunner(), tmp_path, None, "fio-3.33", mount)
    assert fp.pool.stack == "ext4" and fp.pool.name == "/dev/sdz1" and fp.zfs is None
    assert fp.pool.dataset_properties == {"rw": "on", "noatime": "on", "errors": "remount-ro"}
    assert any("fragmentation: not read for ext4" in n for n in fp.notes)


def test_firmware_is_read_where_the_kernel_shows_it(tmp_path: Path) -> None:
    for name, leaf, rev in (("sda", "rev", "81.00A81"), ("nvme0n1", "firmware_rev", "2B2QEXM7")):
        (tmp_path / name / "device").mkdir(parents=True)
        (tmp_path / name / "device" / leaf).write_text(rev + "\n")
        assert probes.firmware(name, tmp_path) == rev
    (tmp_path / "loop0").mkdir()
    assert probes.firmware("loop0", tmp_path) is None
