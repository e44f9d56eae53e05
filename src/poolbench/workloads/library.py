"""The workload library: every test poolbench runs, as a named fio job.

Each workload has a stable name scripts can rely on (`seq-write`, `seq-read`, `rand-read-4k`,
`rand-write-4k`, `reread`, ...) and a one-line definition shown by `poolbench workloads`.
Parametrised families take their parameter from the name: `rand-read-64k`,
`iozone-bread-512k`, `streams-write-6`.

This module is pure: it builds `Workload` values; `fiojob` renders them, `fio` runs them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from poolbench.errors import UsageError
from poolbench.units import parse_size

# mixed: a random read/write mix (rand-mix70-4k); its figure counts the reads and the writes.
Direction = Literal["read", "write", "meta", "mixed"]
Unit = Literal["MiB/s", "IOPS", "ops/s", "GiB"]
# fio: a fio job. untar: `tar -x` of a real tarball through the Runner, then a syncfs.
# pool: an operation on the pool itself (capacity read-back, resilver), done by the trial loop.
Kind = Literal["fio", "untar", "pool"]

MiB = 1024 * 1024
# iozone's default stride for its stride-read test is 17 records (`-j 17`).
IOZONE_STRIDE_RECORDS = 17
DEFAULT_METADATA_FILES = 20000


def parse_record_size(text: str) -> int:
    """'4k' → 4096, '1m' → 1 MiB: the one size grammar (units.parse_size: 4K = 4KiB = 4096,
    4KB = 4000). Record sizes are powers of two from 512 bytes to 64 MiB."""
    try:
        value = parse_size(text, what="record size")
    except UsageError:
        raise UsageError(
            f"'{text}' is not a record size.",
            "Write it as a number with K, M or G (powers of 1024), e.g. 4k, 128K, 1M, 4KiB.",
        ) from None
    if value < 512 or value > 64 * MiB or value & (value - 1):
        raise UsageError(
            f"Record size '{text}' must be a power of two between 512 bytes and 64m"
            + (" (KB, MB and GB are powers of 1000)." if "B" in text.upper() and "I" not in
               text.upper() else "."),
            "Use e.g. 4k, 64k, 1m.",
        )  # fmt: skip
    return value


def format_size(n: int) -> str:
    for unit, div in (("m", MiB), ("k", 1024)):
        if n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


@dataclass(frozen=True)
class Workload:
    """One measurable test.

    `fio` holds the job options that define the I/O (rw, bs, ioengine, ...); sizes, paths and
    data-pattern options are added by the renderer so that every workload gets the same guards.
    """

    name: str
    family: str
    summary: str
    direction: Direction
    unit: Unit
    fio: dict[str, str] = field(default_factory=dict)
    # Needs an existing data file written beforehand (reads, rewrites, random writes in place).
    needs_data: bool = False
    # Delete the data file first, so a write allocates fresh space like a new file would.
    fresh_file: bool = False
    # Drop caches before the run: the test must be served by the devices.
    cold: bool = False
    # Measures the cache on purpose (iozone's reread): labelled so, never "verified".
    cached_by_design: bool = False
    # Run for a fixed time instead of over the whole working set (random I/O).
    time_based: bool = False
    # Number of concurrent streams, each on its own file (streams family).
    streams: int = 1
    # The data file must be longer than the working set by one record (backwards read).
    tail_record: bool = False
    # Fraction of the working set actually transferred (stride read reads 1 record in 17).
    io_fraction: float = 1.0
    kind: Kind = "fio"
    # The pool state the workload runs in: "" (as built) or "degraded" (one member offline).
    pool_state: str = ""
    # Queue depth and concurrent jobs the workload itself asks for (rand-read-4k-qd8-j4,
    # sync-write-4k-j16); 0 = the study's [workloads] iodepth / jobs.
    iodepth: int = 0
    jobs: int = 0
    # Many small files (smallfile-write-16k): the metadata workspace, one I/O per file.
    many_files: bool = False
    # Read from the pool, not timed (capacity): the same on every build of a configuration.
    # Stored with each measurement's workload definition, so reports compare it exactly.
    exact: bool = False

    @property
    def is_metadata(self) -> bool:
        """Works on many small files in the metadata directory (meta-*, smallfile-*)."""
        return self.direction == "meta" or self.many_files


def streaming(direction: Literal["read", "write"]) -> Workload:
    opts = {"rw": direction, "bs": str(MiB), "ioengine": "psync"}
    if direction == "write":
        return Workload(
            name="seq-write",
            family="streaming",
            summary="Sequential write of the working set in 1 MiB records to a fresh file, "
            "fsync counted (dd done right).",
            direction="write",
            unit="MiB/s",
            fio=opts,
            fresh_file=True,
        )
    return Workload(
        name="seq-read",
        family="streaming",
        summary="Sequential read of the working set in 1 MiB records, caches dropped first.",
        direction="read",
        unit="MiB/s",
        fio=opts,
        needs_data=True,
        cold=True,
    )


def random_io(
    direction: Literal["read", "write"], bs: int, iodepth: int = 0, jobs: int = 0
) -> Workload:
    size = format_size(bs)
    rw = "randread" if direction == "read" else "randwrite"
    if direction == "read":
        summary = f"Random {size} reads over the working set for the run time, cold caches"
    else:
        summary = (
            f"Random {size} writes in place over the working set for the run time, fsync counted"
        )
    return Workload(
        name=f"rand-{direction}-{size}{_load_suffix(iodepth, jobs)}",
        family="random",
        summary=summary + _load_text(iodepth, jobs) + ".",
        direction=direction,
        unit="IOPS",
        fio={"rw": rw, "bs": str(bs), "ioengine": "psync", "randrepeat": "0"},
        needs_data=True,
        cold=direction == "read",
        time_based=True,
        iodepth=iodepth,
        jobs=jobs,
    )


def random_mix(read_percent: int, bs: int, iodepth: int = 0, jobs: int = 0) -> Workload:
    """Random reads and writes mixed in one job (rwmixread): the database / VM image pattern.
    The figure is reads + writes per second; the writes are made durable like any write."""
    if not 1 <= read_percent <= 99:
        raise UsageError(
            f"rand-mix{read_percent}: the read share must be 1 to 99 percent.",
            "Use e.g. rand-mix70-4k (70% reads, 30% writes).",
        )
    size = format_size(bs)
    return Workload(
        name=f"rand-mix{read_percent}-{size}{_load_suffix(iodepth, jobs)}",
        family="random",
        summary=f"Random {size} I/O, {read_percent}% reads and {100 - read_percent}% writes "
        "in place over the working set for the run time, cold caches, fsync counted; IOPS "
        "of reads and writes together" + _load_text(iodepth, jobs) + ".",
        direction="mixed",
        unit="IOPS",
        fio={
            "rw": "randrw",
            "rwmixread": str(read_percent),
            "bs": str(bs),
            "ioengine": "psync",
            "randrepeat": "0",
        },
        needs_data=True,
        cold=True,
        time_based=True,
        iodepth=iodepth,
        jobs=jobs,
    )


SyncKind = Literal["sync", "dsync"]


def sync_write(kind: SyncKind, bs: int, jobs: int = 0) -> Workload:
    """Synchronous random writes, the database-commit / NFS / VM pattern that a SLOG serves:
    `sync` calls fsync after every write (fio fsync=1); `dsync` opens the file O_DSYNC (fio
    sync=dsync), so every write returns only once it is on stable storage."""
    size = format_size(bs)
    how = "fsync after every write" if kind == "sync" else "file opened O_DSYNC"
    opts = {"rw": "randwrite", "bs": str(bs), "ioengine": "psync", "randrepeat": "0"}
    opts |= {"fsync": "1"} if kind == "sync" else {"sync": "dsync"}
    return Workload(
        name=f"{kind}-write-{size}{_load_suffix(0, jobs)}",
        family="sync",
        summary=f"Synchronous random {size} writes in place ({how}) for the run time"
        + _load_text(0, jobs)
        + "; every write waits for stable storage (the ZIL, or a SLOG).",
        direction="write",
        unit="IOPS",
        fio=opts,
        needs_data=True,
        time_based=True,
        iodepth=1,  # one synchronous write at a time per job, whatever the study's iodepth
        jobs=jobs,
    )


def _load_suffix(iodepth: int, jobs: int) -> str:
    return (f"-qd{iodepth}" if iodepth else "") + (f"-j{jobs}" if jobs else "")


def _load_text(iodepth: int, jobs: int) -> str:
    parts = [f"queue depth {iodepth} (libaio, direct)"] if iodepth else []
    parts += [f"{jobs} concurrent jobs"] if jobs else []
    return ", " + " and ".join(parts) if parts else ""


# The iozone set. iozone's f* tests use stdio (fwrite/fread); fio has no stdio engine. glibc's
# fwrite/fread pass a record at least as large as their 4 KiB buffer straight to write(2) /
# read(2), so at iozone's record sizes the f* tests are buffered write(2)/read(2) through the
# page cache; poolbench renders them with fio's `sync` engine (write/read at the file position,
# as stdio does) instead of `psync` (pwrite/pread) and says so in their definitions.
def _iozone_table(bs: int) -> dict[str, tuple[str, dict[str, object]]]:
    """Each iozone test: its summary and how fio does it (rw, engine, flags), for record size bs."""
    stdio_note = " (stdio-style: fio's sync engine, write(2)/read(2) at the file position)"
    table: dict[str, tuple[str, dict[str, object]]] = {
        "write": ("Sequential write of a new file", {"rw": "write"}),
        "rewrite": ("Sequential overwrite of an existing file", {"rw": "write", "in_place": True}),
        "read": ("Sequential read, cold caches", {"rw": "read"}),
        "reread": (
            "Sequential read right after a read, caches kept: measures the cache on purpose",
            {"rw": "read", "cached_by_design": True},
        ),
        "randread": ("Random reads, cold caches", {"rw": "randread"}),
        "randwrite": (
            "Random writes in place, fsync counted",
            {"rw": "randwrite", "in_place": True},
        ),
        "bread": (
            "Backwards read (last record first), cold caches; fio's negative offset modifier "
            "rw=read:-2×record reads every record once, the first one out of order",
            {"rw": f"read:-{2 * bs}", "tail_record": True},
        ),
        "strideread": (
            f"Stride read: one record every {IOZONE_STRIDE_RECORDS} records (rw=read:"
            f"{(IOZONE_STRIDE_RECORDS - 1)}×record), each once, cold caches",
            {
                "rw": f"read:{(IOZONE_STRIDE_RECORDS - 1) * bs}",
                "io_fraction": 1.0 / IOZONE_STRIDE_RECORDS,
            },
        ),
        "fwrite": ("Buffered write of a new file" + stdio_note, {"rw": "write", "engine": "sync"}),
        "frewrite": (
            "Buffered overwrite of an existing file" + stdio_note,
            {"rw": "write", "engine": "sync", "in_place": True},
        ),
        "fread": ("Buffered read, cold caches" + stdio_note, {"rw": "read", "engine": "sync"}),
        "freread": (
            "Buffered read right after a read, caches kept: measures the cache on purpose"
            + stdio_note,
            {"rw": "read", "engine": "sync", "cached_by_design": True},
        ),
    }
    return table


def iozone(test: str, bs: int) -> Workload:
    size = format_size(bs)
    name = f"iozone-{test}-{size}"
    table = _iozone_table(bs)
    if test not in table:
        raise UsageError(
            f"'{test}' is not an iozone test.",
            f"Use one of: {', '.join(IOZONE_TESTS)} (e.g. iozone-read-128k).",
        )
    summary, spec = table[test]
    spec = dict(spec)
    rw = str(spec.pop("rw"))
    engine = str(spec.pop("engine", "psync"))
    in_place = bool(spec.pop("in_place", False))
    cached = bool(spec.pop("cached_by_design", False))
    tail = bool(spec.pop("tail_record", False))
    fraction = float(spec.pop("io_fraction", 1.0))  # type: ignore[arg-type]
    direction: Direction = "write" if "write" in rw else "read"
    random = rw.startswith("rand")
    return Workload(
        name=name,
        family="iozone",
        summary=f"{summary}; {size} records, fsync counted for writes."
        if direction == "write"
        else f"{summary}; {size} records.",
        direction=direction,
        unit="MiB/s",
        fio={"rw": rw, "bs": str(bs), "ioengine": engine} | ({"randrepeat": "0"} if random else {}),
        needs_data=direction == "read" or in_place,
        fresh_file=direction == "write" and not in_place,
        cold=direction == "read" and not cached,
        cached_by_design=cached,
        tail_record=tail,
        io_fraction=fraction,
    )


IOZONE_TESTS = (
    "write",
    "rewrite",
    "read",
    "reread",
    "randread",
    "randwrite",
    "bread",
    "strideread",
    "fwrite",
    "frewrite",
    "fread",
    "freread",
)


def metadata(op: Literal["create", "stat", "delete"], order: Literal["seq", "rand"]) -> Workload:
    engine = {"create": "filecreate", "stat": "filestat", "delete": "filedelete"}[op]
    what = {"create": "Create", "stat": "stat()", "delete": "Delete"}[op]
    return Workload(
        name=f"meta-{op}-{order}",
        family="metadata",
        summary=(
            f"{what} {DEFAULT_METADATA_FILES} small files in one directory, "
            f"{'sequential' if order == 'seq' else 'random'} order (fio {engine})"
            + ("; a syncfs after the last one is counted." if op != "stat" else "; cold caches.")
        ),
        direction="meta",
        unit="ops/s",
        fio={
            "ioengine": engine,
            "file_service_type": "sequential" if order == "seq" else "random",
        },
        cold=op == "stat",
    )


def smallfile(direction: Literal["read", "write"], bs: int) -> Workload:
    """Small files at scale ([workloads] metadata_files of them, `bs` bytes each, written
    or read whole in one I/O, in one directory): mail spools, source trees, thumbnails.
    The figure is files per second; writes end with a timed syncfs, reads run cold."""
    size = format_size(bs)
    how = (
        "Create and write {n} files of {size} each (fresh random data), one directory; a "
        "syncfs after the last one is counted."
        if direction == "write"
        else "Read {n} files of {size} each, whole, one directory; cold caches."
    )
    return Workload(
        name=f"smallfile-{direction}-{size}",
        family="smallfile",
        summary=how.format(n="[workloads] metadata_files", size=size) + " Files per second.",
        direction=direction,
        unit="ops/s",
        fio={
            "rw": direction,
            "bs": str(bs),
            "filesize": str(bs),
            "ioengine": "psync",
            "file_service_type": "sequential",
        },  # fmt: skip
        cold=direction == "read",
        many_files=True,
    )


def streams(direction: Literal["read", "write"], count: int) -> Workload:
    if not 1 <= count <= 256:
        raise UsageError(f"streams-{direction}-{count}: the stream count must be 1 to 256.")
    rw = "write" if direction == "write" else "read"
    return Workload(
        name=f"streams-{direction}-{count}",
        family="streams",
        summary=(
            f"{count} concurrent sequential {direction}rs, 1 MiB records, each on its own file, "
            "the working set split between them; aggregate throughput"
            + (", fsync counted." if direction == "write" else ", cold caches.")
        ),
        direction=direction,
        unit="MiB/s",
        fio={"rw": rw, "bs": str(MiB), "ioengine": "psync"},
        needs_data=direction == "read",
        fresh_file=direction == "write",
        cold=direction == "read",
        streams=count,
    )


def untar() -> Workload:
    return Workload(
        name="untar",
        family="application",
        summary="Extract a real source tree (tar -x of [workloads] tarball, unpacked to plain "
        "tar beforehand) into the pool, then syncfs, both timed; MiB/s of extracted file data.",
        direction="write",
        unit="MiB/s",
        kind="untar",
        fresh_file=True,
    )


def degraded_read() -> Workload:
    w = streaming("read")
    return Workload(
        **{
            **w.__dict__,
            "name": "degraded-read",
            "family": "resilience",
            "summary": "Sequential read of the working set in 1 MiB records with one member "
            "offline (zpool offline), caches dropped first.",
            "pool_state": "degraded",
        }
    )


def resilver() -> Workload:
    return Workload(
        name="resilver",
        family="resilience",
        summary="Replace the offline member with a spare disk and time the resilver until "
        "`zpool status` reports it finished; MiB/s of resilvered bytes.",
        direction="write",
        unit="MiB/s",
        fio={"rw": "read", "bs": str(MiB)},
        needs_data=True,
        kind="pool",
        pool_state="degraded",
    )


def expand() -> Workload:
    return Workload(
        name="expand",
        family="capacity",
        summary="RAIDZ expansion (OpenZFS >= 2.3): attach the unused disk to the raidz vdev "
        "(`zpool attach -w`) with the working set on the pool, timed until the reflow is "
        "done; MiB/s of allocated data reflowed. Usable space before and after is recorded.",
        direction="write",
        unit="MiB/s",
        fio={"rw": "read", "bs": str(MiB)},
        needs_data=True,
        kind="pool",
    )


def capacity() -> Workload:
    return Workload(
        name="capacity",
        family="capacity",
        summary="No I/O: the pool's usable space as it reports it (ZFS: USED + AVAIL of the "
        "root dataset; others: statvfs), in GiB.",
        direction="read",
        unit="GiB",
        kind="pool",
        exact=True,
    )


SPECIAL = ("untar", "degraded-read", "resilver", "expand", "capacity")


def reread() -> Workload:
    w = iozone("reread", MiB)
    return Workload(**{**w.__dict__, "name": "reread", "family": "streaming"})


_LOAD = r"(?:-qd(\d+))?(?:-j(\d+))?$"  # optional queue depth and job count
_FAMILIES: list[tuple[re.Pattern[str], str, str]] = [
    (
        re.compile(r"^rand-(read|write|mix\d+)-(\d+[kmg])" + _LOAD),
        "rand-{read|write|mixPCT}-SIZE[-qdN][-jN]",
        "rand-read-4k-qd8-j4",
    ),
    (
        re.compile(r"^(sync|dsync)-write-(\d+[kmg])(?:-j(\d+))?$"),
        "{sync|dsync}-write-SIZE[-jN]",
        "sync-write-4k-j4",
    ),
    (re.compile(r"^iozone-([a-z]+)-(\d+[kmg])$"), "iozone-TEST-RECORD", "iozone-bread-512k"),
    (re.compile(r"^meta-(create|stat|delete)-(seq|rand)$"), "meta-OP-ORDER", "meta-create-rand"),
    (re.compile(r"^streams-(read|write)-(\d+)$"), "streams-{read|write}-N", "streams-write-6"),
    (
        re.compile(r"^smallfile-(read|write)-(\d+[kmg])$"),
        "smallfile-{read|write}-SIZE",
        "smallfile-write-16k",
    ),
]


def _load(name: str, qd: str | None, jobs: str | None) -> tuple[int, int]:
    """The -qdN / -jN parts of a workload name: queue depth 1..1024, jobs 1..256."""
    depth, count = int(qd or 0), int(jobs or 0)
    if (qd is not None and not 1 <= depth <= 1024) or (jobs is not None and not 1 <= count <= 256):
        raise UsageError(
            f"{name}: the queue depth must be 1 to 1024 (-qdN) and the jobs 1 to 256 (-jN).",
            "Use e.g. rand-read-4k-qd16-j4.",
        )
    return depth, count


def get(name: str) -> Workload:
    """Look a workload up by its name; raises UsageError with the list of valid forms."""
    fixed = {
        "seq-write": lambda: streaming("write"),
        "seq-read": lambda: streaming("read"),
        "reread": reread,
        "untar": untar,
        "degraded-read": degraded_read,
        "resilver": resilver,
        "expand": expand,
        "capacity": capacity,
    }
    if name in fixed:
        return fixed[name]()
    for pattern, _form, _example in _FAMILIES:
        m = pattern.match(name)
        if not m:
            continue
        a, b = m.group(1), m.group(2)
        if pattern.pattern.startswith("^rand"):
            qd, jobs = _load(name, m.group(3), m.group(4))
            if a.startswith("mix"):
                return random_mix(int(a[3:]), parse_record_size(b), qd, jobs)
            return random_io(a, parse_record_size(b), qd, jobs)  # type: ignore[arg-type]
        if pattern.pattern.startswith("^(sync"):
            return sync_write(a, parse_record_size(b), _load(name, None, m.group(3))[1])  # type: ignore[arg-type]
        if pattern.pattern.startswith("^iozone"):
            return iozone(a, parse_record_size(b))
        if pattern.pattern.startswith("^smallfile"):
            return smallfile(a, parse_record_size(b))  # type: ignore[arg-type]
        if pattern.pattern.startswith("^meta"):
            return metadata(a, b)  # type: ignore[arg-type]
        return streams(a, int(b))  # type: ignore[arg-type]
    forms = ", ".join(f for _p, f, _e in _FAMILIES)
    raise UsageError(
        f"Unknown workload '{name}'.",
        f"Run 'poolbench workloads' for the list: seq-write, seq-read, reread, "
        f"{', '.join(SPECIAL)}, and the "
        f"families {forms}.",
    )


def parse_list(text: str) -> list[Workload]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError(
            "No workload given.", "Name at least one, e.g. --workloads seq-write,seq-read."
        )
    if len(set(names)) != len(names):
        raise UsageError(f"A workload is named twice in '{text}'.", "Name each workload once.")
    return [get(n) for n in names]


def catalogue(record: int = 128 * 1024) -> list[Workload]:
    """Every workload, with the families shown at one example parameter."""
    items = [streaming("write"), streaming("read"), reread()]
    items += [random_io("read", 4096), random_io("write", 4096)]
    items += [random_io("read", 64 * 1024), random_io("write", 64 * 1024)]
    items += [random_mix(70, 4096), random_io("read", 4096, iodepth=16, jobs=4)]
    items += [sync_write("sync", 4096), sync_write("dsync", 16 * 1024, jobs=4)]
    items += [iozone(t, record) for t in IOZONE_TESTS]
    items += [metadata(op, o) for op in ("create", "stat", "delete") for o in ("seq", "rand")]  # type: ignore[arg-type]
    items += [streams("write", n) for n in (1, 2, 6)] + [streams("read", n) for n in (1, 2, 6)]
    items += [smallfile("write", 16 * 1024), smallfile("read", 16 * 1024)]
    return items


DEFAULT_BENCH = ("seq-write", "seq-read", "rand-read-4k", "rand-write-4k")
