"""The iozone set as fio jobs: `iozone-TEST-SIZE` for each test of IOZONE_TESTS (pure).

Each iozone test is re-stated as the fio job that does the same I/O, with what differs said in
its definition; workloads/library.py names them and re-exports every name here.
"""

from __future__ import annotations

from poolbench.errors import UsageError
from poolbench.workloads.workload import (
    IOZONE_STRIDE_RECORDS,
    Direction,
    Workload,
    format_size,
)


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
