"""ARC truth on real OpenZFS (guest tier): arcstats show whether a read came from the ARC.

fincore sees only the Linux page cache, never the ARC, so on ZFS a read served from RAM
used to pass as "cache drop verified". Here one pool is written, then read twice: once warm
(the ARC holds the file), which the ARC window must flag, and once after the export/import
drop, which the drop must verify (the ARC's data size once the only pool is exported) and
the ARC window must show was fetched from the pool, block for block.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from poolbench.backends import sources
from poolbench.backends.base import PoolSpec
from poolbench.backends.zfs import ZfsBackend
from poolbench.engine import cold_read
from poolbench.guards import cache
from poolbench.records.findings import CacheFinding, DeviceFinding
from poolbench.safety.journal import Journal
from poolbench.system.runner import LocalRunner
from poolbench.workloads import fio, fiodepth, fiojob, library

pytestmark = pytest.mark.openzfs
MiB = 1 << 20
SIZE = 16 * MiB


def pools() -> list[str]:
    out = subprocess.run(["zpool", "list", "-H", "-o", "name"], capture_output=True, text=True)
    return out.stdout.split()


def read_under_window(runner: LocalRunner, job: Path, params: fiojob.JobParams,
                      files: list[Path]) -> dict[str, object]:  # fmt: skip
    window = cache.ArcWindow("openzfs", files)
    r = fio.run_job(runner, fiojob.render(library.streaming("read"), params), job, "read")
    assert r.io_bytes == SIZE
    seen = window.close(r.io_bytes)
    assert seen is not None and seen["observable"] is True, seen
    print("arc during read:", seen)
    return seen


def test_arc_served_read_is_flagged_and_a_cold_read_after_export_is_verified() -> None:
    assert pools() == [], "the ARC check after the export needs no other pool imported"
    base = Path(tempfile.mkdtemp(prefix="pboz-arc-", dir="/var/tmp"))
    runner = LocalRunner()
    journal = Journal(runner)
    backend = ZfsBackend(runner)
    try:
        # Loop devices, not plain files: the direct-read check counts their bytes read.
        devs = sources.provide(runner, journal, source="loop", scratch=base / "disks",
                               sizes=[256 * MiB] * 2).devices  # fmt: skip
        spec = PoolSpec("zfs", "stripe", tuple(devs), f"pboz{uuid.uuid4().hex[:8]}", base,
                        {"ashift": "12"}, {"recordsize": "128K"})  # fmt: skip
        pool = backend.create(spec, journal)
        try:
            check_reads(runner, backend, pool)
        finally:
            backend.destroy(pool, journal)
    finally:
        assert journal.teardown() == []
        shutil.rmtree(base, ignore_errors=True)
    assert pools() == []


def check_reads(runner: LocalRunner, backend: ZfsBackend, pool: object) -> None:
    from poolbench.backends.base import Pool

    assert isinstance(pool, Pool)
    assert cache.zfs_flavour(pool.mountpoint) == "openzfs"
    params = fiojob.JobParams(directory=str(pool.mountpoint), size_bytes=SIZE)
    job = pool.spec.mount_root / f"{pool.spec.name}.fio"
    w = fio.run_job(runner, fiojob.render(library.streaming("write"), params), job, "write")
    assert w.io_bytes == SIZE
    files = [pool.mountpoint / n for n in fiojob.file_names(params, 1)]
    assert cache.block_size_of(files) == 128 * 1024  # ZFS reports the recordsize

    # Warm: read once, then measure the second read: the ARC (and dbuf cache) hold the file.
    fio.run_job(runner, fiojob.render(library.streaming("read"), params), job, "read")
    warm = read_under_window(runner, job, params, files)
    fetched = int(str(warm["blocks_from_pool"])) * 128 * 1024
    assert fetched <= 0.25 * SIZE, warm
    assert float(str(warm["served_fraction"])) >= 0.75 and warm["warning"], warm
    record, warnings = cold_read.settle(
        CacheFinding("drop_caches", True), warm, DeviceFinding(devices=("x",), read_bytes=0)
    )
    assert record.verified is False and any("the ARC served" in x for x in warnings)

    # Cold: export/import empties the ARC; each of the file's 128 records comes from the pool.
    drop = backend.drop_cache(pool)
    print("drop:", drop)
    assert drop["verified"] is True, drop
    assert drop["arc_data_bytes_exported"] <= cache.ARC_EMPTY_SLACK, drop
    cold = read_under_window(runner, job, params, files)
    assert int(str(cold["blocks_from_pool"])) >= SIZE // (128 * 1024), cold
    assert cold["served_fraction"] == 0.0 and not cold["warning"], cold
    record, warnings = cold_read.settle(CacheFinding.from_json(drop), cold, None)
    assert record.verified is True and warnings == [], (record, warnings)
    check_direct_reads(runner, backend, pool, job, files)
    job.unlink()


def device_read_bytes(devices: tuple[str, ...]) -> int:
    total = 0
    for dev in devices:
        stat = Path(f"/sys/block/{Path(dev).resolve().name}/stat").read_text().split()
        total += int(stat[2]) * 512  # sectors read
    return total


def check_direct_reads(runner: LocalRunner, backend: ZfsBackend, pool: object, job: Path,
                       files: list[Path]) -> None:  # fmt: skip
    """O_DIRECT (what --iodepth N > 1 runs): OpenZFS 2.3 reads around the ARC, whose
    counters then stay still, so they must not be read as "served from RAM"; the disks show
    where the bytes came from: each 4K read fetched its whole 128K record."""
    from poolbench.backends.base import Pool

    assert isinstance(pool, Pool)
    for depth, direct in ((16, True), (1, False)):
        backend.drop_cache(pool)
        params = fiojob.JobParams(directory=str(pool.mountpoint), size_bytes=SIZE,
                                  runtime_s=3, iodepth=depth)  # fmt: skip
        text = fiojob.render(library.random_io("read", 4096), params)
        assert ("direct=1" in text.splitlines()) is direct
        window = cache.ArcWindow("openzfs", files, direct=direct)
        disk0 = device_read_bytes(pool.spec.devices)
        r = fio.run_job(runner, text, job, "read")
        from_disks = device_read_bytes(pool.spec.devices) - disk0
        seen = window.close(r.io_bytes, r.total_ios)
        print(f"depth {depth}: {r.total_ios} reads, {from_disks} bytes from the disks, "
              f"submit busy {r.submit_busy}:", seen)  # fmt: skip
        assert seen is not None and seen["observable"] and seen["ios"] == r.total_ios > 0
        if direct:
            assert seen["demand_reads"] == 0 and seen["served_fraction"] is None, seen
            assert not seen["warning"], seen
            assert "O_DIRECT bypassed the ARC" in str(seen["direct_io"]), seen
            # Nothing cached between reads: a whole record per 4K read (32x the bytes;
            # measured 88.5 MB for 2.76 MB).
            assert from_disks >= 16 * r.io_bytes, (from_disks, r.io_bytes)
            # And OpenZFS 2.3 does each O_DIRECT read inside io_submit (95% of the run
            # there, measured): fio's distribution says 16 in flight, the record says 1.
            depth = fiodepth.achieved(r.depth_levels, 16, r.submit_busy)
            assert depth is not None and depth.blocking and depth.high == 1.0, depth
        else:
            # Buffered: the ARC counts every read, and what it fetched is what the disks
            # delivered (plus a little metadata); a record read twice comes from RAM.
            assert seen["demand_reads"] >= 0.9 * r.total_ios and "direct_io" not in seen, seen
            fetched = int(str(seen["blocks_from_pool"])) * 128 * 1024
            assert abs(fetched - from_disks) <= 0.1 * from_disks + MiB, (fetched, from_disks)
