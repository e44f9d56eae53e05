"""ARC truth and CPU cost as pure functions: arcstats (OpenZFS's kstat file, zfs-fuse's kstat
directory) read and differenced, what a cold read's record says after it ran, CPU seconds from
fio's JSON, a process's /proc/<pid>/stat and the machine's /proc/stat. No root, no pools: every
input is written by hand and every figure is computed here and asserted."""

from __future__ import annotations

import json
import os
from pathlib import Path

from poolbench.engine import cold_read
from poolbench.guards import cache, cpu
from poolbench.records.findings import CacheFinding, DeviceFinding
from poolbench.store.facts import facts_from_records
from poolbench.study.builtin import compression
from poolbench.study.builtin.context import Context
from poolbench.workloads.fioparse import parse

MiB = 1 << 20
REC = 128 * 1024
TICK = os.sysconf("SC_CLK_TCK")


def kstat_file(path: Path, **values: int) -> Path:
    """An OpenZFS kstat file: two header lines, then `name type value`."""
    lines = ["13 1 0x01 147 39984 1 2", "name                            type data"]
    lines += [f"{k:<32}4    {v}" for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


# -- reading arcstats -----------------------------------------------------------------------
def test_openzfs_and_zfs_fuse_arcstats_are_read(tmp_path: Path) -> None:
    f = kstat_file(tmp_path / "arcstats", size=5000, data_size=4096, demand_data_hits=7)
    assert cache.read_arcstats(f) == {"size": 5000, "data_size": 4096, "demand_data_hits": 7}
    d = tmp_path / "fuse"
    d.mkdir()
    for i, k in enumerate(cache._FUSE_KEYS):
        (d / k).write_text(f"{i * 10}\n")
    assert cache.read_arcstats(d) == {k: i * 10 for i, k in enumerate(cache._FUSE_KEYS)}
    (d / "size").unlink()  # a stale or partial kstat mount: nothing is trusted
    assert cache.read_arcstats(d) is None
    assert cache.read_arcstats(tmp_path / "absent") is None and cache.read_arcstats(None) is None


def test_arc_read_counts_blocks_fetched_against_bytes_read() -> None:
    before = {"size": 900, "data_size": 800, "demand_data_hits": 10, "demand_data_misses": 5}
    # 16 MiB read, 128 KiB records: 128 blocks. Cold: prefetch fetched 120, demand 8; demand
    # hit 120 blocks that prefetch brought in for this read.
    after = {**before, "demand_data_hits": 130, "demand_data_misses": 13,
             "prefetch_data_misses": 120, "demand_hit_predictive_prefetch": 120}  # fmt: skip
    cold = cache.arc_read(before, after, REC, 16 * MiB)
    assert (cold.blocks_from_pool, cold.demand_reads, cold.demand_hits) == (128, 128, 120)
    assert cold.served_fraction == 0.0 and cold.warning() == ""
    assert (cold.size_at_start, cold.data_size_at_start) == (900, 800)
    # Warm: only 32 of the 128 blocks came from the pool: 3/4 of the bytes from RAM.
    warm = cache.arc_read(before, {**before, "demand_data_misses": 37}, REC, 16 * MiB)
    assert warm.blocks_from_pool == 32 and warm.served_fraction == 0.75
    assert "the ARC served ~75% of this read from RAM" in warm.warning()
    assert "32 blocks of 131072 bytes fetched from the pool for 16777216 bytes" in warm.warning()
    # Just under the limit (24 of 128 blocks from RAM = 18.75%): no warning.
    near = cache.arc_read(before, {**before, "demand_data_misses": 109}, REC, 16 * MiB)
    assert near.served_fraction == 0.1875 and near.warning() == ""
    # Nothing read (a stat), or an unknown block size: no figure, no warning.
    assert cache.arc_read(before, before, REC, 0).served_fraction is None
    assert cache.arc_read(before, before, 0, MiB).warning() == ""


def test_direct_reads_that_bypass_the_arc_are_not_called_ram() -> None:
    """Counters from the guest (OpenZFS 2.3.2, recordsize 128K, 4K random reads at depth 16
    for 8 s after an export/import): with O_DIRECT the ARC's demand data counters did not move
    (0 of 2816 reads, 369 MB from the disk); buffered, they counted every read (852 hits +
    1316 misses = 2168 reads, 1316 + 23 prefetch blocks = 175.5 MB from the disk)."""
    before = {"size": 900, "data_size": 800, "demand_data_hits": 10, "demand_data_misses": 5}
    direct = cache.arc_read(before, dict(before), REC, 2816 * 4096, direct=True, ios=2816)
    assert direct.bypassed and direct.served_fraction is None and direct.warning() == ""
    said = direct.as_dict()["direct_io"]
    assert "O_DIRECT bypassed the ARC: its demand counters saw 0 of 2816 reads" in str(said)
    # Counted as before, it would have claimed the whole read came from RAM.
    assert cache.arc_read(before, dict(before), REC, 2816 * 4096).served_fraction == 1.0

    after = {**before, "demand_data_hits": 862, "demand_data_misses": 1321,
             "prefetch_data_misses": 23}  # fmt: skip
    buffered = cache.arc_read(before, after, REC, 2168 * 4096, ios=2168)
    assert not buffered.bypassed and buffered.demand_reads == 2168
    assert buffered.served_fraction == 0.0 and "direct_io" not in buffered.as_dict()
    # O_DIRECT asked, but read through the ARC (zfs-fuse, OpenZFS <= 2.2): counted as usual,
    # and the record says O_DIRECT did not go around it.
    through = cache.arc_read(before, after, REC, 2168 * 4096, direct=True, ios=2168)
    assert not through.bypassed and through.served_fraction == 0.0
    assert "the ARC saw 2168 of 2168 reads" in str(through.as_dict()["direct_io"])


def test_arc_window_reads_before_and_after(tmp_path: Path) -> None:
    stats = kstat_file(tmp_path / "arcstats", size=1, data_size=1, demand_data_misses=0)
    data = tmp_path / "data.0"
    data.write_bytes(b"x" * 100)
    win = cache.ArcWindow("openzfs", [data], arcstats=stats)
    assert win.block_size == os.stat(data).st_blksize
    kstat_file(stats, size=1, data_size=1, demand_data_misses=4)
    seen = win.close(8 * win.block_size)
    assert seen is not None and seen.observable is True and seen.source == str(stats)
    assert isinstance(seen.read, cache.ArcRead) and seen.read.blocks_from_pool == 4
    assert seen.served_fraction == 0.5 and "~50%" in seen.warning
    stored = seen.to_json()  # the cache record's arc_during_read: the warning goes elsewhere
    assert stored["blocks_from_pool"] == 4 and stored["served_fraction"] == 0.5
    assert list(stored)[:2] == ["observable", "source"] and "warning" not in stored
    assert cache.ArcWindow(None).close(1) is None  # not ZFS: nothing to say
    gone = cache.ArcWindow("zfs-fuse", arcstats=tmp_path / "no-kstat").close(1)
    assert gone is not None and gone.observable is False
    assert gone.to_json() == {"observable": False, "note": cache.UNOBSERVABLE}


def test_a_cold_stat_is_judged_by_the_arcs_metadata_counters(tmp_path: Path) -> None:
    # The guest's cold stat of 200 files on OpenZFS 2.3: no data block fetched (a stat reads
    # none) while the disks read ~5 KiB of dnodes. The data reckoning called that "~100% from
    # RAM"; the metadata counters show the blocks came from the pool.
    zero = {"size": 1, "data_size": 1, "demand_data_misses": 0, "demand_metadata_hits": 10,
            "demand_metadata_misses": 0, "prefetch_metadata_misses": 0}  # fmt: skip
    stats = kstat_file(tmp_path / "arcstats", **zero)
    win = cache.ArcWindow("openzfs", arcstats=stats, block_size=REC, metadata=True)
    kstat_file(stats, **{**zero, "demand_metadata_hits": 400, "demand_metadata_misses": 7,
                         "prefetch_metadata_misses": 2})  # fmt: skip
    seen = win.close(200 * 4096)
    assert seen is not None and seen.warning == ""
    assert seen.read == cache.ArcMetaRead(demand_hits=390, fetched=9)
    assert seen.served_fraction is None  # a data share means nothing for a stat
    assert "served_fraction" not in seen.to_json()
    record, warnings = cold_read.settle(
        CacheFinding("export-import", None), seen, DeviceFinding(("vdb",), read_bytes=5120), 200
    )
    assert record.verified is True and warnings == []
    # Every metadata block a hit, none fetched: RAM answered, whatever else was read.
    win = cache.ArcWindow("openzfs", arcstats=stats, block_size=REC, metadata=True)
    kstat_file(stats, **{**zero, "demand_metadata_hits": 610, "demand_metadata_misses": 7,
                         "prefetch_metadata_misses": 2})  # fmt: skip
    warm = win.close(200 * 4096)
    assert warm is not None and "210 demand metadata hits, no block fetched" in warm.warning
    record, warnings = cold_read.settle(
        CacheFinding("export-import", None), warm, DeviceFinding(("vdb",), read_bytes=5120), 200
    )
    assert record.verified is False and warnings == [warm.warning]
    # A ZFS without metadata counters (zfs-fuse publishes data ones only): nothing to say.
    fuse = cache.arc_meta_read({"size": 1}, {"size": 1, "demand_data_misses": 3})
    assert fuse.warning() == "" and fuse.as_dict()["metadata_blocks_fetched"] is None


def test_the_arc_after_an_export_is_checked() -> None:
    emptied = (True, "the ARC holds 4096 bytes of data after the export")
    assert cache.arc_after_export({"data_size": 4096}, 0) == emptied
    assert cache.arc_after_export({"data_size": 4096}, 3) == emptied  # others' pools hold none
    ok, said = cache.arc_after_export({"data_size": 64 * MiB}, 0)
    assert ok is False and "did not empty it" in said
    ok, said = cache.arc_after_export({"data_size": 64 * MiB}, 2)
    assert ok is None and "2 other imported pool(s)" in said
    assert cache.arc_after_export(None, 0) == (None, cache.UNOBSERVABLE)


# -- settling a cold read ---------------------------------------------------------------------
DEV = DeviceFinding(devices=("loop0",), read_bytes=0)


def _read(fetched: int, blocks: int = 10) -> cache.ArcRead:
    """A data read of `blocks` records of which the pool delivered `fetched`."""
    return cache.ArcRead(0, 0, blocks, blocks - fetched, fetched, REC, blocks * REC)


def test_a_read_the_arc_served_is_not_verified_whatever_fincore_said() -> None:
    # 10 blocks read, 1 fetched from the pool: the ARC served 90%
    arc = cache.ArcSeen(_read(fetched=1), source="arcstats")
    record, warnings = cold_read.settle(CacheFinding("drop_caches", True), arc, DEV)
    assert record.verified is False and len(warnings) == 1
    assert warnings[0].startswith("the ARC served ~90% of this read from RAM")
    stored = record.more["arc_during_read"]
    assert stored["observable"] is True and stored["served_fraction"] == 0.9
    assert "warning" not in stored
    cold = cache.ArcSeen(_read(fetched=10), source="arcstats")
    record, warnings = cold_read.settle(CacheFinding("export-import", None), cold, DEV)
    assert record.verified is True and warnings == []  # the read's counters decide
    record, _ = cold_read.settle(CacheFinding("export-import", False, "not exported"), cold, DEV)
    assert record.verified is False  # a failed step stays failed


def test_an_unobservable_cache_is_never_verified() -> None:
    arc = cache.ArcSeen(None, note=cache.UNOBSERVABLE)
    record, warnings = cold_read.settle(CacheFinding("export-import", True), arc, DEV)
    assert record.verified is None and record.more["arc"] == cache.UNOBSERVABLE
    assert warnings == []  # the device byte check speaks for the disks
    record, warnings = cold_read.settle(CacheFinding("export-import", True), arc, DeviceFinding())
    assert record.verified is None and "nothing shows the disks served it" in warnings[0]
    assert record.to_json()["verified"] is None


def test_a_cold_stat_is_verified_by_device_reads_or_labelled_unverified() -> None:
    files = 1000
    need = cache.MIN_META_BYTES_PER_FILE * files
    zero = CacheFinding("drop_caches", None, cache.ZERO_BYTES)
    read = DeviceFinding(devices=("loop0",), read_bytes=need)
    record, warnings = cold_read.settle(zero, None, read, files)
    assert record.verified is True and warnings == []
    said = record.more["metadata_read"]
    assert said == f"verified by device reads: {need} bytes for 1000 files' metadata"
    short = DeviceFinding(devices=("loop0",), read_bytes=need - 1)
    record, warnings = cold_read.settle(zero, None, short, files)
    assert record.verified is False and f"a cold read needs ≥ {need}" in warnings[0]
    record, warnings = cold_read.settle(zero, None, DeviceFinding(unverified="tmpfs"), files)
    assert record.verified is None and warnings == []
    assert "unverified" in record.more["metadata_read"]


# -- CPU ----------------------------------------------------------------------------------------
def test_fio_cpu_seconds_come_from_usr_sys_percent_of_job_runtime() -> None:
    text = (Path(__file__).parent / "data" / "fio-seq-write.json").read_text()
    job = json.loads(text)["jobs"][0]
    r = parse(text, "write")
    assert r.cpu_usr_s == job["usr_cpu"] / 100 * job["job_runtime"] / 1000  # 50% of 14 ms
    assert r.cpu_sys_s == job["sys_cpu"] / 100 * job["job_runtime"] / 1000


def fake_proc(root: Path, pid_ticks: tuple[int, int], machine: tuple[int, int, int]) -> None:
    (root / "4242").mkdir(parents=True, exist_ok=True)
    (root / "4242" / "comm").write_text("zfs-fuse\n")
    utime, stime = pid_ticks
    # comm with spaces and parentheses: the fields are counted from the last ')'
    (root / "4242" / "stat").write_text(
        f"4242 (zfs (fuse) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 {utime} {stime} 0 0 20 0\n"
    )
    system, irq, softirq = machine
    (root / "stat").write_text(f"cpu  500 7 {system} 9999 30 {irq} {softirq} 0 0 0\ncpu0 1\n")


def test_cpu_window_counts_the_daemon_or_the_machine_kernel(tmp_path: Path) -> None:
    fake_proc(tmp_path, (100, 50), (1000, 10, 20))
    fuse, kernel = cpu.CpuWindow("zfs-fuse", tmp_path), cpu.CpuWindow(None, tmp_path)
    fake_proc(tmp_path, (100 + 3 * TICK, 50 + TICK), (1000 + 5 * TICK, 10 + TICK, 20 + TICK))
    got = fuse.close(0.5, 0.25, 2 << 30)  # 2 GiB moved
    assert got["fs_scope"] == "zfs-fuse daemon" and "pid 4242" in got["fs_label"]
    assert got["fs_s"] == 4.0 and got["total_s"] == 4.75 and got["s_per_gib"] == 2.375
    got = kernel.close(0.5, 0.25, 1 << 30)
    # 7 s of machine kernel time, of which fio's own 0.25 s system time: 6.75 s
    assert got["fs_scope"] == "whole machine kernel" and "every other process" in got["fs_label"]
    assert got["fs_s"] == 6.75 and got["total_s"] == 7.5 and got["s_per_gib"] == 7.5
    assert cpu.CpuWindow("zfs-fuse", tmp_path / "none").clock is None
    assert cpu.per_gib(got) == 7.5 and cpu.per_gib(None) is None


def test_compression_notes_show_cpu_per_gib() -> None:
    text = "\n".join([
        'name = "compression"', "[disks]", "count = 3", 'size = "128M"', "[factors]",
        'backend = ["zfs"]', 'layout = ["raidz1"]', 'compression = ["off", "gzip"]', "[workloads]",
        'names = ["seq-write"]', 'size = "16M"',
    ])  # fmt: skip

    def row(comp: str, rep: int, per_gib: float) -> dict[str, object]:
        g = {"cpu": {"s_per_gib": per_gib, "fs_scope": "zfs-fuse daemon"}}
        return {"config": f"backend=zfs layout=raidz1 compression={comp}", "workload": "seq-write",
                "replicate": rep, "value": 1.0, "guards": g}  # fmt: skip

    rows = [row("off", 0, 1.0), row("off", 1, 2.0), row("gzip", 0, 20.0), row("gzip", 1, 30.0)]
    facts = facts_from_records({"study_text": text}, rows)
    assert facts.configs[1].cpu_s_per_gib == {"seq-write": (20.0, 30.0)}
    lines = compression.notes(Context(3, "128M"), facts)
    assert lines[0].startswith("CPU seconds per GiB moved (fio's user + system, plus the "
                               "filesystem's own: zfs-fuse daemon)")  # fmt: skip
    key = "  backend=zfs layout=raidz1 compression="
    assert lines[1:] == [f"{key}off: seq-write 1.50", f"{key}gzip: seq-write 25.00"]
