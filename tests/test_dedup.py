"""The `dedup` factor and study without a pool: `zpool status -D` read in both dialects,
recorded from pools that had 64 MiB written in 128 KiB records half of them duplicates (fio
dedupe_percentage=50): zfs-fuse here, OpenZFS 2.3.2 in the guest (vm/, `zpool status -D -p`
and without -p; its format strings: cmd/zpool/zpool_main.c print_dedup_stats,
lib/libzutil/zutil_pool.c zpool_dump_ddt), the commands the factor runs and its dry run
prints, its refusal off ZFS, the dup-write job, and the notes' RAM figure computed by hand.
The real run is tests/test_studies_builtin.py's small-scale dedup study on zfs-fuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolbench.backends.base import Pool, PoolSpec
from poolbench.backends.zfs.backend import ZfsBackend
from poolbench.errors import PoolbenchError, UsageError
from poolbench.factors import dedup
from poolbench.factors import registry as factors
from poolbench.factors.base import AfterMeasurement, AfterPool, Preflight
from poolbench.safety.journal import Journal
from poolbench.study.builtin import dedup as study
from poolbench.study.builtin.context import Context
from poolbench.study.model import Disks
from poolbench.system.runner import CommandResult, RecordingRunner
from poolbench.workloads.fiojob import JobParams, render
from poolbench.workloads.library import get
from poolbench.zfs import commands
from poolbench.zfs.parse import DedupTable, nicenum, parse_dedup_table

DATA = Path(__file__).parent / "data" / "zfs"
MiB = 1 << 20
GiB = 1 << 30


def _text(name: str) -> str:
    return (DATA / name).read_text()


def test_nicenum_reads_what_zfs_prints_for_people_and_exactly() -> None:
    assert [nicenum(t) for t in ("597", "389B", "1.26K", "64M", "31.4M", "8K", "147456")] == [
        597, 389, 1290, 64 * MiB, round(31.4 * MiB), 8192, 147456,
    ]  # fmt: skip
    with pytest.raises(ValueError):
        nicenum("-")


def test_zfs_fuse_prints_the_tables_sizes_per_entry() -> None:
    # "DDT entries 288, size 597 on disk, 170 in core": onnv's ddt_get_dedup_object_stats
    # divides the sizes by the entries, so the totals are those times 288; the histogram's
    # total: 288 blocks allocated hold the 512 referenced (64 MiB written in 128 KiB records).
    got = parse_dedup_table(_text("zfsfuse-status-D-dedup.txt"), averaged=True)
    assert got == DedupTable(288, 597 * 288, 170 * 288, 512, 64 * MiB)


def test_openzfs_2_3_prints_the_tables_sizes_in_all_and_exactly_with_p() -> None:
    # " dedup: DDT entries 250, size 24576 on disk, 36000 in core": 2.3's
    # ddt_get_dedup_object_stats returns the totals (module/zfs/ddt_stats.c)
    got = parse_dedup_table(_text("openzfs-2.3.2-status-D-p.txt"), averaged=False)
    assert got == DedupTable(250, 24576, 36000, 512, 64 * MiB)
    # without -p the same figures for people: "size 24K on disk, 35.2K in core"
    people = parse_dedup_table(_text("openzfs-2.3.2-status-D.txt"), averaged=False)
    assert people.entries == 250 and people.disk_bytes == 24576
    assert abs(people.core_bytes - 36000) < 0.005 * 36000


def test_no_table_reads_as_none_in_either_dialect() -> None:
    empty = DedupTable(0, 0, 0, 0, 0)
    assert parse_dedup_table(_text("zfsfuse-status-D-no-table.txt"), averaged=True) == empty
    assert parse_dedup_table(_text("openzfs-2.3.2-status-D-p-empty.txt"), False) == empty


def test_the_status_command_asks_exact_sizes_where_the_dialect_has_them() -> None:
    assert commands.dedup_status("p", "openzfs") == ["zpool", "status", "-D", "-p", "p"]
    assert commands.dedup_status("p", "zfs-fuse") == ["zpool", "status", "-D", "p"]


def _pool() -> Pool:
    return Pool(PoolSpec("zfs", "mirror:2", ("/dev/loop1", "/dev/loop2"), "pbdd",
                         Path("/var/tmp/x")), Path("/var/tmp/x/pbdd"), [])  # fmt: skip


def _backend(
    dry_run: bool, dedup_value: str = "on", status: object = None, kmod: str = "2.3.2-1"
) -> ZfsBackend:
    runner = RecordingRunner(
        responses={
            ("zpool", "version"): f"zfs-2.3.2-1\nzfs-kmod-{kmod}\n",
            ("zpool", "list", "-H"): "",
            ("zfs", "get", "-Hp", "-o", "value", "dedup", "pbdd"): f"{dedup_value}\n",
            ("zpool", "status", "-D", "-p", "pbdd"): status
            or _text("openzfs-2.3.2-status-D-p.txt"),
            ("zpool", "get", "-Hp", "-o", "value", "dedupratio", "pbdd"): "2.04\n",  # as it said
        },
        dry_run=dry_run,
    )
    backend = ZfsBackend(runner)
    backend.check()
    runner.calls.clear()
    return backend


def test_dedup_on_is_set_read_back_and_a_dry_run_sets_it_and_reads_nothing() -> None:
    levels = {"dedup": "on"}
    real = _backend(dry_run=False)
    runner = real.runner
    assert isinstance(runner, RecordingRunner)
    made = factors.after_pool(AfterPool(runner, Journal(runner, None), real, _pool(), levels,
                                        MiB, 1, 1))  # fmt: skip
    assert made == {"dedup": {"level": "on", "set": "zfs set dedup=on"}}
    assert runner.argvs == [
        ("zfs", "set", "dedup=on", "pbdd"),
        ("zfs", "get", "-Hp", "-o", "value", "dedup", "pbdd"),
    ]
    # the same code under a dry run: the set (printed), no read-back of a pool not built
    dry = _backend(dry_run=True)
    assert isinstance(dry.runner, RecordingRunner)
    made = factors.after_pool(AfterPool(dry.runner, Journal(dry.runner, None), dry, _pool(),
                                        levels, MiB, 1, 1))  # fmt: skip
    assert made == {} and dry.runner.argvs == runner.argvs[:1]


def test_a_pool_that_does_not_take_the_level_is_refused() -> None:
    backend = _backend(dry_run=False, dedup_value="off")
    runner = backend.runner
    with pytest.raises(PoolbenchError, match="reads dedup=off after poolbench asked for dedup=on"):
        dedup.FACTOR.after_pool(AfterPool(runner, Journal(runner, None), backend, _pool(),
                                          {"dedup": "on"}, MiB, 1, 1))  # fmt: skip


def test_after_each_measurement_the_table_and_ratio_are_read_back_as_a_typed_section() -> None:
    backend = _backend(dry_run=False)
    at = AfterMeasurement(backend.runner, backend, _pool(), {"dedup": "on"})
    said = factors.after_measurement(at)
    reading = dedup.DedupReading.decode({"pool": said})
    assert reading == dedup.DedupReading("on", 2.04, 250, 24576, 36000, 512, 64 * MiB)
    assert reading.core_bytes_per_entry == 144.0
    assert reading.entries_per_block == pytest.approx(250 / 512)
    assert dedup.DedupReading.decode({"pool": {}}) is None


def test_the_kernel_modules_version_says_whether_the_sizes_are_per_entry() -> None:
    # OpenZFS 2.3 userland on a 2.2 kernel module (an upgrade not yet rebooted into): the
    # module divides the sizes by the entries (2.2's module/zfs/ddt.c), so they are per entry
    backend = _backend(dry_run=False, kmod="2.2.7-pve1")
    at = AfterMeasurement(backend.runner, backend, _pool(), {"dedup": "on"})
    reading = dedup.read_back(at)
    assert (reading.disk_bytes, reading.core_bytes) == (24576 * 250, 36000 * 250)


def test_a_table_that_cannot_be_read_is_said_in_the_reading_not_raised() -> None:
    # The measurement just taken, and the trial, must not be lost to a `zpool status -D`
    # that fails or to a wording the parse does not know: the reading says why, and the
    # study's notes warn instead of scaling a table that was not read.
    def failed(argv: tuple[str, ...]) -> CommandResult:
        return CommandResult(argv, 1, "", "internal error: out of memory\n", 0.0)

    unit = " dedup: DDT entries 250, size 24KiB on disk, 35.2KiB in core\n"  # a new unit
    wording = " dedup: DDT entries 250, 24K on disk, 35.2K in core\n"  # a new wording
    for status, why in ((failed, "Command failed with exit code 1: zpool status -D -p pbdd"),
                        (unit, "not a ZFS number: '24KiB'"),
                        (wording, "a DDT summary this parse does not know")):  # fmt: skip
        backend = _backend(dry_run=False, status=status)
        at = AfterMeasurement(backend.runner, backend, _pool(), {"dedup": "on"})
        reading = dedup.DedupReading.decode({"pool": factors.after_measurement(at)})
        assert reading is not None and reading.ratio == 2.04 and reading.entries == 0
        assert reading.unread.startswith(why), reading.unread
        line = study.table_line(reading)
        assert "WARNING: the dedup table could not be read" in line and why in line
        assert study.ram_line(reading, 1 << 40) is None
    # dedup=on with a table of no entry after a write: a warning, not "no dedup table"
    empty = dedup.DedupReading("on", 1.0, 0, 0, 0, 0, 0)
    assert "WARNING: dedup=on but the pool shows no dedup table" in study.table_line(empty)
    off = dedup.DedupReading("off", 1.0, 0, 0, 0, 0, 0)
    assert study.table_line(off) == "dedupratio 1.00x, no dedup table"


def test_dedup_is_refused_off_zfs_before_anything_is_built() -> None:
    disks = Disks(count=2, size="128M")
    with pytest.raises(UsageError, match="the btrfs backend has no inline deduplication"):
        factors.check(disks, {"dedup": "on"}, "btrfs", "")
    dedup.FACTOR.check(Preflight(disks, {"dedup": "on"}, "zfs", "zfs-fuse"))  # no refusal


def test_dup_write_asks_fio_for_half_its_records_duplicated() -> None:
    job = render(get("dup-write"), JobParams("/x", 64 * MiB))
    assert "dedupe_percentage=50\n" in job and "bs=131072\n" in job
    assert "refill_buffers=1\n" in job  # the rest fresh random data, never zeros


def test_the_ram_figure_is_blocks_times_entries_per_block_times_bytes_per_entry() -> None:
    d = dedup.DedupReading("on", 2.04, 251, 251 * 587, 251 * 163, 512, 64 * MiB)
    line = study.ram_line(d, 20 << 40)
    blocks = (20 << 40) / (128 * 1024)  # 163,840,000 records of 128 KiB
    ram = blocks * (251 / 512) * 163  # = 20 TiB × (in-core bytes per byte stored)
    assert f"{blocks:,.0f} blocks of 128 KiB × 0.49 entries per block × 163 B" in line
    assert f"= {ram / GiB:.2f} GiB" in line and "says 100.00 GiB" in line
    assert study.ram_line(dedup.DedupReading("off", 1.0, 0, 0, 0, 0, 0), 1 << 40) is None


def test_the_study_is_dedup_off_and_on_over_one_layout_with_the_duplicating_write() -> None:
    data = study.build(Context(2, "1G", dialect="zfs-fuse"))
    assert data.factors == {"backend": ["zfs"], "layout": ["mirror:2"], "dedup": ["off", "on"]}
    assert data.workloads["names"] == ["dup-write"]
    assert study.pool_bytes(Context(2, "1G")) == 2 * GiB
    assert study.pool_bytes(Context(2, "1G", options={"pool_size": "20T"})) == 20 << 40
    # the default is said, since a mirror of those disks holds half of it
    said = study.basis_line(Context(2, "1G"))
    assert said is not None and "takes the 2 disks' raw space, 2.00 GiB, as the data" in said
    assert study.basis_line(Context(2, "1G", options={"pool_size": "20T"})) is None


def test_the_notes_give_the_median_write_and_scale_the_last_replicates_table() -> None:
    from poolbench.store.factrows import FactRow
    from poolbench.store.facts import ConfigFacts, StudyFacts

    def row(replicate: int, d: dedup.DedupReading) -> FactRow:
        return FactRow(config="", workload="dup-write", replicate=replicate, value=0.0,
                       guards={"pool": {"dedup": d.to_json()}})  # fmt: skip

    first = dedup.DedupReading("on", 2.0, 256, 0, 256 * 100, 512, 64 * MiB)
    last = dedup.DedupReading("on", 2.04, 251, 251 * 587, 251 * 163, 512, 64 * MiB)
    on = ConfigFacts("backend=zfs dedup=on", {"dedup": "on"},
                     figures={"dup-write": (400.0, 100.0, 300.0, 200.0)},
                     rows=(row(2, last), row(1, first)))  # fmt: skip
    facts = StudyFacts("dedup", "loop", 2, GiB, (on,))
    lines = study.notes(Context(2, "1G"), facts)
    # the median of four replicates is the mean of the middle two, 250 (not 300)
    assert lines[1].startswith("  backend=zfs dedup=on: dup-write 250.0 MiB/s; dedupratio 2.04x")
    assert "DDT 251 entries for 512 blocks written (0.49 per block), 163 B in core" in lines[1]
    ram = 2 * GiB * (251 * 163) / (64 * MiB)  # the raw space × in-core bytes per byte stored
    assert "RAM for the DDT at 2.00 GiB stored like this" in lines[2]
    assert f"= {ram / MiB:.1f} MiB" in lines[2]
    assert "takes the 2 disks' raw space, 2.00 GiB, as the data" in lines[3]
