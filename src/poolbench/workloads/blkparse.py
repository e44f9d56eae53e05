"""blkparse's text output → the I/Os the device was asked for (pure).

blkparse's default line is
`  7,0    1       12     0.001245713  4242  Q   W 2048 + 8 [fio]`: device, CPU, sequence,
seconds.nanoseconds, pid, action, RWBS, sector, '+', sectors, process; the kernel's ftrace blk
tracer (engine/replay/blkftrace.py) prints `fio-4242 [001] ..... 1234.567890: 7,0 Q W 2048 + 8
[fio]`, the same event after the ftrace header. One I/O is one queue
event (`Q`): the bio as submitted to this device, before the block layer merges or splits it
(fio's own blktrace replay takes the same events). Events without data (a flush `F`, or
`N`one) and the summary blkparse prints at the end are not I/Os and are skipped. Sectors are
512 bytes whatever the device's sector size: blktrace counts in them.
"""

from __future__ import annotations

import re

from poolbench import is_digits
from poolbench.errors import UsageError
from poolbench.workloads.tracestats import TraceIO

SECTOR = 512
_TIME = re.compile(r"^\d+\.\d+:?$")


def _time_ns(text: str) -> int | None:
    seconds, dot, frac = text.partition(".")
    if not dot or not is_digits(seconds) or not is_digits(frac):
        return None
    return int(seconds) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])


def parse_line(line: str) -> TraceIO | None:
    """The I/O on one line, or None for a line that is not a queue event carrying data.

    The time is the first `seconds.fraction` field; the action is two fields after it (the
    pid between them in blkparse's line, the device in the kernel blk tracer's)."""
    f = line.split()
    i = next((k for k, x in enumerate(f) if _TIME.match(x)), None)
    if i is None or len(f) < i + 7 or f[i + 2] != "Q" or f[i + 5] != "+":
        return None
    rwbs, sector, count = f[i + 3], f[i + 4], f[i + 6]
    t_ns = _time_ns(f[i].rstrip(":"))
    if t_ns is None or not is_digits(sector) or not is_digits(count) or int(count) == 0:
        return None
    if "W" in rwbs:
        write = True
    elif "R" in rwbs:
        write = False
    else:
        return None  # a discard (D) or a data-less event: nothing to replay as read/write
    return TraceIO(t_ns, write, int(sector) * SECTOR, int(count) * SECTOR)


def parse(text: str, *, source: str = "blkparse output") -> list[TraceIO]:
    """Every data I/O of a blkparse text, in the order printed; times from the first I/O."""
    ios = [io for line in text.splitlines() if (io := parse_line(line)) is not None]
    if not ios and text.strip() and not any(" Q " in ln for ln in text.splitlines()):
        raise UsageError(
            f"{source} holds no blkparse event lines (none with a 'Q' queue action).",
            "Give blkparse's default text output (blkparse -i NAME), not a custom -f format.",
        )
    if not ios:
        return []
    start = min(io.t_ns for io in ios)
    return [TraceIO(io.t_ns - start, io.write, io.offset, io.length) for io in ios]
