"""One workload as poolbench defines it (`Workload`), its kinds and units, and the record-size
grammar of its name (pure).

workloads/library.py builds every named workload from these; `fiojob` renders them, the store
keeps each measurement's definition (`asdict`) beside its figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from poolbench.errors import UsageError
from poolbench.units import parse_size

# mixed: a random read/write mix (rand-mix70-4k); its figure counts the reads and the writes.
Direction = Literal["read", "write", "meta", "mixed"]
Unit = Literal["MiB/s", "IOPS", "ops/s", "GiB", "TPS"]
# fio: a fio job. untar: `tar -x` of a real tarball through the Runner, then a syncfs.
# pool: an operation on the pool itself (capacity read-back, resilver), done by the trial loop.
# pgbench: PostgreSQL's pgbench on a fresh cluster in the filesystem (engine/pgbench_run.py).
Kind = Literal["fio", "untar", "pool", "pgbench"]

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
    # A recorded block trace replayed (trace:NAME): its stored directory, and the highest
    # byte it reaches, which is the size of the file the replay runs on (workloads/replay.py).
    trace: str = ""
    trace_extent: int = 0

    @property
    def is_metadata(self) -> bool:
        """Works on many small files in the metadata directory (meta-*, smallfile-*)."""
        return self.direction == "meta" or self.many_files
