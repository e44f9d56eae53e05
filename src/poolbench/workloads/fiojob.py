"""Render a workload as a fio job file (pure).

Everything that makes a measurement honest is put here, in one place, for every workload:
the data pattern (never zeros: fresh random buffers, or a declared compressibility), durable
writes (end_fsync inside the timed window), no preallocation tricks, and JSON output. The job
file is complete on its own, so the same text can be stored, replayed by hand, or sent to a
remote `fio --server` (which ignores options given on the client's command line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from poolbench.workloads import replay
from poolbench.workloads.workload import Workload

# Completion-latency percentiles every measurement asks fio for (fio's default list, written
# out so a fio with another default still reports p50/p90/p99/p99.9; at most 20 entries).
PERCENTILES = (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)


@dataclass(frozen=True)
class JobParams:
    directory: str
    size_bytes: int  # the working set, shared between streams
    compressibility: int = 0  # percent; 0 = incompressible
    runtime_s: int = 30  # for time-based workloads
    iodepth: int = 1
    numjobs: int = 1  # for random workloads
    metadata_files: int = 20000
    file_prefix: str = "data"
    # fio's randseed for random workloads: the same seed replays the same offsets (with it
    # set, fio ignores randrepeat and seeds every generator from it). None = not seeded.
    randseed: int | None = None
    # A block device measured in place of files in `directory` (a zvol): fio opens it with
    # O_DIRECT (the block device's own page cache would otherwise serve reads), one stream.
    device: str | None = None
    # The shortest timed window worth a figure (DESIGN.md section 3 rule 7): a time-based
    # job runs at least this long; a size-bound write too short for it is repeated.
    min_window_s: float = 3.0
    # > 1: a size-bound write that one pass over the working set could not keep busy for the
    # minimum window, written this many times in one job (engine/window.py).
    loops: int = 1


# fio samples the group's bandwidth and IOPS once a second for its steady-state check and
# reports the last `steadystate_duration` of them (`steadystate.data` in its JSON). poolbench
# judges them by the SNIA rule in rounds of one or more seconds (stats/steady.py), so the ring
# holds every second of any window up to STEADY_RING_S (of a longer one, the last
# STEADY_RING_S). The criterion's limit is 0, which fio can never attain (it stops when the
# criterion falls strictly below the limit): fio must observe, never cut a window short,
# because a stop when the cache fills steadily would end a write before its data reached the
# disks. (fio 3.33 samples once a second only; `steadystate_check_interval` came later.)
STEADY_RING_S = 600
STEADY_OPTIONS = {"steadystate": "bw_slope:0%", "steadystate_duration": f"{STEADY_RING_S}s"}


def data_pattern(compressibility: int) -> dict[str, str]:
    """fio options for the data written. Never zeros.

    0%: every buffer refilled with fresh random data (refill_buffers), so nothing compresses
    or deduplicates. P%: fio's buffer_compress_percentage makes each buffer compress by about
    P%, refilled per I/O so blocks do not dedupe.
    """
    if not 0 <= compressibility <= 99:
        raise ValueError("compressibility must be 0..99 percent")
    opts = {"refill_buffers": "1", "zero_buffers": "0"}
    if compressibility:
        opts["buffer_compress_percentage"] = str(compressibility)
        opts["buffer_compress_chunk"] = "4096"
    return opts


def file_names(params: JobParams, streams: int) -> list[str]:
    if params.device is not None:
        return [params.device]
    if streams == 1:
        return [f"{params.file_prefix}.0"]
    return [f"{params.file_prefix}.s{streams}.{i}" for i in range(streams)]


def file_bytes(workload: Workload, params: JobParams) -> int:
    """Size of each data file the workload uses."""
    if workload.trace:
        return workload.trace_extent  # a replayed trace's file reaches its highest offset
    per_stream = params.size_bytes // max(1, workload.streams)
    if workload.tail_record:
        per_stream += int(workload.fio["bs"])
    return per_stream


def _render(sections: list[tuple[str, dict[str, str]]]) -> str:
    lines: list[str] = []
    for name, opts in sections:
        lines.append(f"[{name}]")
        lines.extend(f"{k}={v}" for k, v in opts.items())
        lines.append("")
    return "\n".join(lines)


def _many_files(workload: Workload, params: JobParams) -> dict[str, str]:
    """smallfile-*: writes carry fresh random data (never zeros, as every write); reads
    must find the files laid out whole, never create or extend them."""
    if workload.direction == "write":  # durable: fio's end_fsync, then the timed syncfs
        return data_pattern(params.compressibility) | {"end_fsync": "1"}
    return {"create_on_open": "0", "allow_file_create": "0"}


def _timed(workload: Workload, params: JobParams) -> dict[str, str]:
    """A time-based job's run time and load; a workload that names its load
    (rand-read-4k-qd8-j4, sync-write-4k) overrides the study's iodepth and jobs."""
    runtime = max(params.runtime_s, math.ceil(params.min_window_s))
    g = {"time_based": "1", "runtime": str(runtime)}
    iodepth = workload.iodepth or params.iodepth
    numjobs = workload.jobs or params.numjobs
    if iodepth > 1:
        # Queue depth only means something with async, direct I/O.
        g.update({"ioengine": "libaio", "iodepth": str(iodepth), "direct": "1"})
    if numjobs > 1:
        g["numjobs"] = str(numjobs)
    return g


def _place(params: JobParams) -> dict[str, str]:
    """Where the data lives: files in a directory, or a block device read and written with
    O_DIRECT (only the ZFS ARC may then cache a zvol's blocks, and the cold drop evicts it)."""
    if params.device is not None:
        return {"direct": "1"}
    return {"directory": params.directory}


def _global_options(workload: Workload, params: JobParams) -> dict[str, str]:
    """The options every measurement's job starts from."""
    return _place(params) | {
        "group_reporting": "1",
        # No posix_fallocate: a write must allocate as an application's write does.
        "fallocate": "none",
        # Never let fio lay out (write) a file it was asked to read: the caller prepares data.
        "allow_file_create": "1" if workload.direction != "read" else "0",
        # Completion latency percentiles (fioparse.Latency); the bins come with json+.
        "clat_percentiles": "1",
        "percentile_list": ":".join(format(q, "g") for q in PERCENTILES),
    }


def _passes(workload: Workload, params: JobParams) -> dict[str, str]:
    """A size-bound write repeated to fill the minimum window (engine/window.py). fio ends
    each pass with its end_fsync (traced: one fsync per loop), so every pass is durable
    before the next overwrites it; time_based would fsync once at the end and let the page
    cache fold the passes into one write to the disks."""
    if params.loops <= 1 or workload.time_based or workload.direction != "write":
        return {}
    opts = {"loops": str(params.loops)}
    # Each pass allocates afresh, as the one pass did; a block device has no file to unlink
    # (and the device node must never be asked to go).
    if workload.fresh_file and params.device is None:
        opts["unlink_each_loop"] = "1"
    return opts


def _render_replay(workload: Workload, params: JobParams) -> str:
    """A recorded trace's replay (workloads/replay.py) onto the target's one data file."""
    target = replay.target_of(params.directory, params.device, file_names(params, 1)[0])
    g = {
        "group_reporting": "1",
        "clat_percentiles": "1",
        "percentile_list": ":".join(format(q, "g") for q in PERCENTILES),
    }
    g.update(data_pattern(params.compressibility))
    g.update(replay.options(workload, target, params.directory))
    return _render([("global", g), ("replay", {})])


def render(workload: Workload, params: JobParams) -> str:
    """The complete job file for one measurement of `workload`."""
    if workload.trace:
        return _render_replay(workload, params)
    g = _global_options(workload, params)
    if workload.is_metadata:
        g.update(
            {
                "nrfiles": str(params.metadata_files),
                "filesize": "4k",
                "bs": "4k",
                "openfiles": "1",
                "create_on_open": "1",
                "filename_format": "meta.$filenum",
                "allow_file_create": "1",
            }
        )
        g.update(workload.fio)  # smallfile-*: its own file size and rw
        if workload.many_files:
            g.update(_many_files(workload, params))
        return _render([("global", g), (workload.name, {})])

    g.update(workload.fio)
    g.update(data_pattern(params.compressibility))
    g.update(STEADY_OPTIONS)
    g.update(_passes(workload, params))
    if workload.cached_by_design:
        # fio drops a file's pages before each job by default (invalidate=1); a cached test
        # must keep what the previous read left in the cache.
        g["invalidate"] = "0"
    if params.randseed is not None and "rand" in g.get("rw", ""):
        g["randseed"] = str(params.randseed)
    if workload.direction in ("write", "mixed"):
        g["end_fsync"] = "1"  # durable: fio's runtime includes this fsync
    bs = int(workload.fio["bs"])
    if workload.time_based:
        g.update(_timed(workload, params))
    per_file = file_bytes(workload, params)
    if workload.tail_record:
        g["size"] = str(per_file)
        g["io_size"] = str(per_file - bs)
    elif workload.io_fraction < 1.0:
        g["size"] = str(per_file)
        n_records = per_file // bs
        g["io_size"] = str(max(1, int(n_records * workload.io_fraction)) * bs)
    else:
        g["size"] = str(per_file)
    names = file_names(params, workload.streams)
    if workload.streams == 1:
        return _render([("global", g), (workload.name, {"filename": names[0]})])
    sections: list[tuple[str, dict[str, str]]] = [("global", g)]
    for i, n in enumerate(names):
        sections.append((f"{workload.name}.{i}", {"filename": n}))
    return _render(sections)


PREPARE_BS = 1024 * 1024  # the prepare's record: large, so laying out data is quick


def prepare_blocks(size: int) -> tuple[int, int]:
    """(whole 1 MiB records, tail bytes) that lay out exactly `size` bytes.

    fio rounds a job's size down to a multiple of its bs, so one job cannot write an odd size
    in large records; a gcd-sized record could (307M over 6 streams gave bs=2: ~27 million
    writes per file). Instead a 1 MiB job writes the whole records and a second job, after it,
    writes the remaining tail in one record at its offset."""
    return size // PREPARE_BS, size % PREPARE_BS


def writes_prepared_data(
    writer: Workload, written: JobParams, reader: Workload, params: JobParams
) -> bool:
    """Whether `writer`'s job, run with `written`, left exactly the files `reader` reads as
    `render_prepare` would lay them out: fresh files written whole, in order, in PREPARE_BS
    records, with the same data pattern, synced at the end. Laying them out again would
    write the same bytes the same way, so the read may use them (a streaming write followed
    by a streaming read saves a third of its I/O). Anything else (random or partial writes,
    a block device, another size or data pattern) is laid out afresh. A write that stopped
    early leaves a short file, which `Workspace.prepare` lays out again by its size."""
    sequential_whole = (
        writer.fresh_file
        and writer.fio.get("rw") == "write"
        and int(writer.fio.get("bs", "0")) == PREPARE_BS
        and not writer.time_based
        and writer.io_fraction >= 1.0
        and not writer.tail_record
    )
    return (
        sequential_whole
        and reader.needs_data
        and not reader.is_metadata
        and written.device is None
        and file_names(written, writer.streams) == file_names(params, reader.streams)
        and file_bytes(writer, written) == file_bytes(reader, params)
        and data_pattern(written.compressibility) == data_pattern(params.compressibility)
    )


def render_prepare(workload: Workload, params: JobParams) -> str | None:
    """A job that writes the data a reading (or in-place writing) workload needs, or None."""
    if not workload.needs_data:
        return None
    size = file_bytes(workload, params)
    whole, tail = prepare_blocks(size)
    g: dict[str, str] = _place(params) | {
        "rw": "write",
        "ioengine": "psync",
        "fallocate": "none",
        "end_fsync": "1",
        "group_reporting": "1",
    }
    g.update(data_pattern(params.compressibility))
    names = file_names(params, workload.streams)
    sections: list[tuple[str, dict[str, str]]] = [("global", g)]
    if whole:  # all files at once, as the streams will read them
        sections += [(f"prepare.{i}", {"filename": n, "bs": str(PREPARE_BS),
                      "size": str(whole * PREPARE_BS)}) for i, n in enumerate(names)]  # fmt: skip
    for i, n in enumerate(names if tail else []):
        tail_opts = {"filename": n, "bs": str(tail), "offset": str(whole * PREPARE_BS),
                     "size": str(tail)}  # fmt: skip
        if i == 0 and whole:
            # The tails wait for every whole record to be written (stonewall: a barrier).
            tail_opts["stonewall"] = "1"
        sections.append((f"prepare.{i}.tail", tail_opts))
    return _render(sections)
