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
from poolbench.engine.records import CacheFinding, DeviceFinding
from poolbench.guards import cache
from poolbench.safety.journal import Journal
from poolbench.system.runner import LocalRunner
from poolbench.workloads import fio, fiojob, library

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
        devs = sources.provide(runner, journal, source="files", scratch=base / "disks",
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
    job.unlink()
