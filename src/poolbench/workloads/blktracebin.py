"""blktrace's binary per-CPU files → the I/Os the device was asked for (pure but for reading).

The format is the kernel's `struct blk_io_trace` (include/uapi/linux/blktrace_api.h), in the
recording machine's byte order: magic (0x656174 << 8 | version), sequence, time (ns), sector,
bytes, action, pid, device, cpu, error, pdu_len — 48 bytes with padding — followed by
pdu_len bytes of payload. The action's low 16 bits say what happened (queue = 1) and its high
16 bits the categories (read 1, write 2, ..., discard 0x80, pc 0x200, notify 0x400 ...). The
same I/Os as `blkparse.parse` of blkparse's text (tests check the two agree on a real
recording): queue events that read or write data.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

from poolbench.errors import UsageError
from poolbench.workloads.blkparse import SECTOR
from poolbench.workloads.tracestats import TraceIO

MAGIC = 0x65617400
_HEAD = struct.Struct("<IIQQIIIIHHH2x")
QUEUE = 1
TC_WRITE, TC_DISCARD, TC_PC, TC_NOTIFY = 1 << 1, 1 << 7, 1 << 9, 1 << 10
_SKIP = (TC_DISCARD | TC_PC | TC_NOTIFY) << 16


def _records(data: bytes, source: str) -> Iterable[tuple[int, int, int, int]]:
    """(time ns, sector, bytes, action) of every record of one per-CPU file."""
    pos = 0
    while pos + _HEAD.size <= len(data):
        magic, _seq, t, sector, nbytes, action, _pid, _dev, _cpu, _err, pdu = _HEAD.unpack_from(
            data, pos
        )
        if magic & 0xFFFFFF00 != MAGIC:
            raise UsageError(
                f"{source} is not a blktrace binary file (bad magic at byte {pos}).",
                "Give blktrace's own per-CPU files (NAME.blktrace.N).",
            )
        yield t, sector, nbytes, action
        pos += _HEAD.size + pdu


def parse_files(paths: Iterable[Path]) -> list[TraceIO]:
    """The data I/Os of a recording's per-CPU files, by time, times from the first I/O."""
    ios: list[TraceIO] = []
    for path in paths:
        for t, sector, nbytes, action in _records(path.read_bytes(), str(path)):
            if action & 0xFFFF != QUEUE or action & _SKIP or nbytes == 0:
                continue
            ios.append(TraceIO(t, bool(action & (TC_WRITE << 16)), sector * SECTOR, nbytes))
    ios.sort(key=lambda io: io.t_ns)
    start = ios[0].t_ns if ios else 0
    return [TraceIO(io.t_ns - start, io.write, io.offset, io.length) for io in ios]
