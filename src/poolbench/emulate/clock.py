"""When each request starts and ends on an emulated disk, and the tally of what it served.

One request at a time, in the order the requests reach the emulator (a FIFO queue, never
reordered): a request starts when it arrives or, if the disk is still busy, when the one
before it ends. The emulator receives a request a little after the kernel sent it, and sends
the next one a little after replying: its own turnaround and the kernel's (the loop device's
worker, FUSE), a few hundred microseconds on this machine, more when the host is busy
(docs/emulated-disks.md). That is not disk time, so:

* a positioned request that arrives within `QUEUED_S` of the previous one's end starts at
  that end: it was queued behind it (the loop device sends one request at a time, so a
  queue shows up this way);
* a request that continues a stream (it starts where the previous one ended) and arrives
  within `STREAM_S` starts at that end too: a drive's read-ahead keeps reading the stream's
  next bytes while the host is away (13 ms is what a 2 MiB segment holds at 163 MB/s). The
  kernel splits a 1 MiB read into 128 KiB requests, sent one after another: without this,
  every piece would pay the round trip, and a stream would run below its zone's rate.

Either way the disk's time line only ever grows by the service times: over a run, nothing is
served faster than the model. A request after a longer gap starts when it arrives: the disk
was idle.

The emulator sleeps until each request's end (`wait_until`); with the process's timer slack
at 1 microsecond (`sharpen_timer`) the sleep ends within tens of microseconds. How late each
request really ended is tallied (`Tally.late_us`): a request that ended late because the
emulator itself was slow is the emulator setting the pace, which the tally makes visible.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from poolbench.emulate.model import Service

QUEUED_S = 0.0005  # see the module docstring; docs/emulated-disks.md has the measurements
STREAM_S = 0.010
PR_SET_TIMERSLACK = 29  # prctl(2)
LATE_BUCKETS_US = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
GAP_BUCKETS_US = (20, 50, 100, 200, 300, 500, 1000, 2000, 5000, 20000)


def sharpen_timer() -> bool:
    """Ask the kernel to end this process's sleeps within 1 microsecond of their deadline
    instead of the default 50 (prctl PR_SET_TIMERSLACK); whether it took."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


@dataclass
class DiskClock:
    """The disk's own time line: when it will be free again."""

    queued_s: float = QUEUED_S
    stream_s: float = STREAM_S
    busy_until: float = float("-inf")

    def schedule(self, arrived: float, service_s: float, streamed: bool = False) -> float:
        """The end of a request that reached the emulator at `arrived` and takes
        `service_s` on the disk (`streamed`: it continues the previous one); the disk is
        busy until then."""
        window = self.stream_s if streamed else self.queued_s
        start = self.busy_until if arrived - self.busy_until <= window else arrived
        self.busy_until = start + service_s
        return self.busy_until


def wait_until(deadline: float, now: Callable[[], float] = time.monotonic) -> float:
    """Sleep until `deadline` (monotonic seconds); returns the time it woke."""
    left = deadline - now()
    if left > 0:
        time.sleep(left)
    return now()


def _bucket(value: float, edges: tuple[int, ...]) -> str:
    for edge in edges:
        if value < edge:
            return f"<{edge}"
    return f">={edges[-1]}"


class TallyJson(TypedDict):
    """Tally's figures in the `stats` file."""

    requests: int
    reads: int
    writes: int
    bytes_read: int
    bytes_written: int
    positioned: int
    streamed: int
    seek_s: float
    rotation_s: float
    transfer_s: float
    service_s: float
    sizes: dict[str, int]
    late_us: dict[str, int]
    late_max_us: float
    work_s: float
    gap_us: dict[str, int]


@dataclass
class Tally:
    """What one emulated disk served, for its `stats` file (JSON)."""

    reads: int = 0
    writes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    positioned: int = 0  # requests that paid a seek and a rotation
    streamed: int = 0  # requests that continued where the previous one ended
    seek_s: float = 0.0
    rotation_s: float = 0.0
    transfer_s: float = 0.0
    sizes: dict[str, int] = field(default_factory=dict)  # request size in bytes -> count
    late_us: dict[str, int] = field(default_factory=dict)  # how late requests ended
    late_max_us: float = 0.0
    gap_us: dict[str, int] = field(default_factory=dict)  # idle before a request, from the
    # previous one's end to its arrival (a stream's pieces arrive within tens of microseconds)
    work_s: float = 0.0  # the emulator's own time per request (receive to reply, no sleep)

    def add(
        self, write: bool, size: int, s: Service, late_s: float, work_s: float, gap_s: float
    ) -> None:
        if write:
            self.writes += 1
            self.bytes_written += size
        else:
            self.reads += 1
            self.bytes_read += size
        if s.positioned:
            self.positioned += 1
        else:
            self.streamed += 1
        self.seek_s += s.seek_s
        self.rotation_s += s.rotation_s
        self.transfer_s += s.transfer_s
        self.sizes[str(size)] = self.sizes.get(str(size), 0) + 1
        late_us = max(0.0, late_s * 1e6)
        key = _bucket(late_us, LATE_BUCKETS_US)
        self.late_us[key] = self.late_us.get(key, 0) + 1
        self.late_max_us = max(self.late_max_us, late_us)
        self.work_s += work_s
        if gap_s >= 0:
            key = _bucket(gap_s * 1e6, GAP_BUCKETS_US)
            self.gap_us[key] = self.gap_us.get(key, 0) + 1

    @property
    def requests(self) -> int:
        return self.reads + self.writes

    @property
    def service_s(self) -> float:
        return self.seek_s + self.rotation_s + self.transfer_s

    def as_dict(self) -> TallyJson:
        return {
            "requests": self.requests, "reads": self.reads, "writes": self.writes,
            "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
            "positioned": self.positioned, "streamed": self.streamed,
            "seek_s": self.seek_s, "rotation_s": self.rotation_s,
            "transfer_s": self.transfer_s, "service_s": self.service_s,
            "sizes": dict(sorted(self.sizes.items(), key=lambda kv: int(kv[0]))),
            "late_us": self.late_us, "late_max_us": round(self.late_max_us, 1),
            "work_s": self.work_s, "gap_us": self.gap_us,
        }  # fmt: skip
