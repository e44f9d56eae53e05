"""The workload library: every test poolbench runs, as a named fio job.

Each workload has a stable name scripts can rely on (`seq-write`, `seq-read`, `rand-read-4k`,
`rand-write-4k`, `reread`, ...) and a one-line definition shown by `poolbench workloads`.
Parametrised families take their parameter from the name: `rand-read-64k`,
`iozone-bread-512k`, `streams-write-6`.

This module is pure: it builds `Workload` values; `fiojob` renders them, `fio` runs them.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal

from poolbench.errors import UsageError
from poolbench.units import parse_size
from poolbench.workloads import pgbench
from poolbench.workloads.iozone import IOZONE_TESTS, iozone
from poolbench.workloads.workload import (
    DEFAULT_METADATA_FILES,
    MiB,
    Workload,
    format_size,
    parse_record_size,
)


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


DUP_PERCENT = 50  # dup-write: the share of records that repeat an earlier record
DUP_RECORD = 128 * 1024  # ZFS's default recordsize: each record one block the DDT sees


def dup_write() -> Workload:
    """A sequential write whose records are half duplicates (fio's dedupe_percentage: each
    record is, with that probability, the last unique one again), for deduplication."""
    return Workload(
        name="dup-write",
        family="streaming",
        summary=f"Sequential write of the working set in 128 KiB records, {DUP_PERCENT}% of "
        "them repeating an earlier record (fio dedupe_percentage): data a dedup table halves; "
        "fsync counted.",
        direction="write",
        unit="MiB/s",
        fio={
            "rw": "write",
            "bs": str(DUP_RECORD),
            "ioengine": "psync",
            "dedupe_percentage": str(DUP_PERCENT),
        },  # fmt: skip
        fresh_file=True,
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


L2ARC_INTERVALS = 8  # the l2arc reads: the run time split into this many intervals


def l2arc_interval_s(runtime_s: int) -> int:
    """Each l2arc interval's length: the run time split L2ARC_INTERVALS ways, at least 1 s."""
    return max(1, -(-runtime_s // L2ARC_INTERVALS))


def l2arc_read(bs: int) -> Workload:
    """The l2arc study's reads (engine/l2arc_reads.py): a pool operation, because the ARC's
    counters are read between its intervals."""
    size = format_size(bs)
    return Workload(
        name=f"l2arc-read-{size}",
        family="cache",
        summary=f"Random {size} buffered reads of the working set in 8 consecutive intervals "
        "(the run time split), the ARC's and L2ARC's counters (OpenZFS arcstats) read between "
        "them: the cache device's warm-up and its steady hit rate; IOPS of the last half.",
        direction="read",
        unit="IOPS",
        fio={"rw": "randread", "bs": str(bs)},
        needs_data=True,
        kind="pool",
    )


# A recorded block trace replayed: timed (the recording's timing) or as fast as possible.
TRACE_PREFIXES = ("trace:", "trace-fast:")
SPECIAL = ("untar", "degraded-read", "resilver", "expand", "capacity", "pgbench-tpcb",
           "pgbench-select")  # fmt: skip


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
    (re.compile(r"^l2arc-read-(\d+[kmg])()$"), "l2arc-read-SIZE", "l2arc-read-16k"),
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


def _named_elsewhere(name: str) -> Workload | None:
    """A pgbench workload or a recorded trace's replay (each its own module's), else None."""
    if pgbench.is_pgbench(name):
        return pgbench.workload(name)
    if name.startswith(TRACE_PREFIXES):
        from poolbench.workloads import tracefile  # reads the stored trace's summary

        return tracefile.workload(name)
    return None


def get(name: str) -> Workload:
    """Look a workload up by its name; raises UsageError with the list of valid forms."""
    fixed = {
        "seq-write": lambda: streaming("write"),
        "seq-read": lambda: streaming("read"),
        "dup-write": dup_write,
        "reread": reread,
        "untar": untar,
        "degraded-read": degraded_read,
        "resilver": resilver,
        "expand": expand,
        "capacity": capacity,
    }
    if name in fixed:
        return fixed[name]()
    other = _named_elsewhere(name)
    if other is not None:
        return other
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
        if pattern.pattern.startswith("^l2arc"):
            return l2arc_read(parse_record_size(a))
        if pattern.pattern.startswith("^meta"):
            return metadata(a, b)  # type: ignore[arg-type]
        return streams(a, int(b))  # type: ignore[arg-type]
    forms = ", ".join(f for _p, f, _e in _FAMILIES)
    raise UsageError(
        f"Unknown workload '{name}'.",
        f"Run 'poolbench workloads' for the list: seq-write, seq-read, dup-write, reread, "
        f"{', '.join(SPECIAL)}, and the "
        f"families {forms}, {pgbench.FORMS}, and trace:NAME / trace-fast:NAME (a trace "
        "recorded with `poolbench record`).",
    )


def parse_load(level: str) -> tuple[Workload, int | None]:
    """`seq-read`, `rand-read-4k`, `rand-write-4k@2M`: (the workload, its rate in bytes/s or
    None for flat out). Refused: a workload that is not a fio job, or a size-bound write
    (seq-write writes a fresh file; it cannot run for as long as the resilver lasts)."""
    name, _, rate = level.partition("@")
    w = get(name)
    if w.kind != "fio" or w.is_metadata or (w.direction != "read" and not w.time_based):
        raise UsageError(
            f"The resilver's foreground load '{name}' cannot run for as long as the pool "
            "resilvers: it must be a streaming or random fio workload that reads, or a timed "
            "random write.",
            "Use e.g. --load seq-read, --load rand-read-4k or --load rand-write-4k@4M.",
        )
    return replace(w, time_based=True), parse_size(rate) if rate else None


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
    items = [streaming("write"), streaming("read"), reread(), dup_write()]
    items += [random_io("read", 4096), random_io("write", 4096)]
    items += [random_io("read", 64 * 1024), random_io("write", 64 * 1024)]
    items += [random_mix(70, 4096), random_io("read", 4096, iodepth=16, jobs=4)]
    items += [sync_write("sync", 4096), sync_write("dsync", 16 * 1024, jobs=4)]
    items += [iozone(t, record) for t in IOZONE_TESTS]
    items += [metadata(op, o) for op in ("create", "stat", "delete") for o in ("seq", "rand")]  # type: ignore[arg-type]
    items += [streams("write", n) for n in (1, 2, 6)] + [streams("read", n) for n in (1, 2, 6)]
    items += [smallfile("write", 16 * 1024), smallfile("read", 16 * 1024)]
    return items + [l2arc_read(16 * 1024)]


DEFAULT_BENCH = ("seq-write", "seq-read", "rand-read-4k", "rand-write-4k")
