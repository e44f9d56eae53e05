"""The emulator process: one disk image served through FUSE, each request given its service time.

    python -m poolbench.emulate.server --size BYTES --mount DIR --params JSON [--seed N] \
        [--pidfile F] [--log F] [--idle-exit S] [--foreground] [--no-wait]

The disk's bytes live in this process's memory (an anonymous mapping: never-written parts
read as the kernel's shared zero page and cost no memory), not in a file: a host file's
pages would leave with every cache drop (`drop_caches`, which the cold reads of btrfs and md
use), and the emulator would then wait for the host's own disk, setting the pace itself.

The mount holds two files: `disk.img`, the disk (a loop device goes over it), and `stats`,
what the disk has served so far as JSON (reading it costs no disk time). Both are opened with
FUSE's direct_io, so the kernel keeps no page cache of them: every read reaches the emulator.

One request at a time: libfuse runs single-threaded (`-s`), so the emulator takes the
requests from the kernel's queue in the order they were sent (FIFO) and serves each to its
end, sleeping until the disk would have finished it (emulate/clock.py), before it takes the
next. Nothing is reordered here. (Above it, libfuse 2 gives the kernel no asynchronous
direct I/O, so the loop device sends one request at a time anyway; docs/emulated-disks.md.)

Without --foreground, libfuse mounts and then puts the process in the background; the
command returns once the disk is mounted. The process ends when the file system is
unmounted, or by itself once the disk has not been open for --idle-exit seconds (its loop
device was detached, or was never attached): it never leaves while a loop device holds the
disk, which would pull it from under a pool.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import mmap
import os
import signal
import stat
import sys
import threading
import time
from typing import Any

from poolbench.emulate.clock import DiskClock, Tally, TallyJson, sharpen_timer, wait_until
from poolbench.emulate.model import Geometry, HddParams, Head

DISK = "/disk.img"
STATS = "/stats"
SUBTYPE = "poolbench-seekdisk"  # the mount's type is fuse.poolbench-seekdisk
IDLE_EXIT_S = 60.0
CHUNK = 64 << 10
ZEROS = bytes(1 << 20)
log = logging.getLogger("poolbench.emulate")


class StatsJson(TallyJson):
    """The server's `stats` file: how it runs, then what the disk served (Tally's)."""

    params: dict[str, float | str]
    size: int
    rss_bytes: int
    tracks: int
    waits: bool
    realtime: bool
    timer_slack_1us: bool
    queued_s: float
    stream_s: float
    uptime_s: float
    pid: int
    cpu_s: float


class SeekDisk:
    """The file system's operations (mfusepy calls them; raw_fi: `fi` is fuse_file_info)."""

    use_ns = True  # mfusepy: nanosecond times (none are used here)

    def __init__(self, size: int, params: HddParams, seed: int, wait: bool) -> None:
        self.size, self.wait = size, wait
        self.bytes = mmap.mmap(-1, size)
        # Which 64 KiB chunks were ever written: a read of only unwritten chunks is served
        # from one zero buffer (reading the mapping's untouched pages would fault on each).
        self.written = bytearray(-(-size // CHUNK))
        self.params = params
        self.geometry = Geometry(params, size)
        self.head = Head(self.geometry, seed)
        self.clock = DiskClock()
        self.tally = Tally()
        self.opens = 0
        self._snapshot = b""
        self.idle_since = time.monotonic()
        self.started = time.time()
        self.realtime = self.timer_slack_1us = False  # set in init()

    # -- what the mount holds ---------------------------------------------------------------
    def getattr(self, path: str, fh: object = None) -> dict[str, int]:
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o700, "st_nlink": 2}
        if path == DISK:
            return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": self.size}
        if path == STATS:
            return {"st_mode": stat.S_IFREG | 0o400, "st_nlink": 1, "st_size": 0}
        raise OSError(errno.ENOENT, "")

    def readdir(self, path: str, fh: object) -> list[str]:
        return [".", "..", DISK[1:], STATS[1:]]

    def open(self, path: str, fi: Any) -> int:
        if path not in (DISK, STATS):
            raise OSError(errno.ENOENT, "")
        fi.direct_io = 1  # no page cache: every read and write reaches the emulator
        if path == DISK:
            self.opens += 1
        return 0

    def release(self, path: str, fi: Any) -> int:
        if path == DISK:
            self.opens -= 1
            if self.opens == 0:
                self.idle_since = time.monotonic()
        return 0

    def flush(self, path: str, fi: Any) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fi: Any) -> int:
        return 0  # no write cache is modelled: a write is on the platter when it completes

    def truncate(self, path: str, length: int, fh: object = None) -> int:
        if path == DISK and length == self.size:
            return 0
        raise OSError(errno.EPERM, "")

    # -- the disk ---------------------------------------------------------------------------
    def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
        arrived = time.monotonic()
        if path == STATS:
            # one document per reading: a later piece is cut from the same snapshot
            if offset == 0 or not self._snapshot:
                self._snapshot = self.stats()
            return self._snapshot[offset : offset + size]
        size = max(0, min(size, self.size - offset))
        first, last = offset // CHUNK, (offset + size - 1) // CHUNK
        if size <= len(ZEROS) and self.written.find(1, first, last + 1) < 0:
            data = ZEROS[:size]
        else:
            data = self.bytes[offset : offset + size]
        self._serve(False, offset, size, arrived)
        return data

    def write(self, path: str, data: bytes, offset: int, fi: Any) -> int:
        arrived = time.monotonic()
        if path != DISK:
            raise OSError(errno.EBADF, "")
        if offset + len(data) > self.size:
            raise OSError(errno.ENOSPC, "")
        self.bytes[offset : offset + len(data)] = data
        first, last = offset // CHUNK, (offset + len(data) - 1) // CHUNK
        self.written[first : last + 1] = b"\x01" * (last - first + 1)
        self._serve(True, offset, len(data), arrived)
        return len(data)

    def _serve(self, write: bool, offset: int, size: int, arrived: float) -> None:
        service = self.head.serve(offset, size)
        gap = arrived - self.clock.busy_until
        wait = service.total_s if self.wait else 0.0
        deadline = self.clock.schedule(arrived, wait, streamed=not service.positioned)
        worked = time.monotonic() - arrived
        woke = wait_until(deadline)
        self.tally.add(write, size, service, woke - deadline, worked, gap)

    def stats(self) -> bytes:
        doc: StatsJson = {
            "params": self.params.as_dict(),
            "size": self.size,
            "rss_bytes": _rss_bytes(),
            "tracks": self.geometry.tracks,
            "waits": self.wait,
            "realtime": self.realtime,
            "timer_slack_1us": self.timer_slack_1us,
            "queued_s": self.clock.queued_s,
            "stream_s": self.clock.stream_s,
            "uptime_s": round(time.time() - self.started, 3),
            "pid": os.getpid(),
            "cpu_s": round(sum(os.times()[:2]), 3),
            **self.tally.as_dict(),
        }
        return (json.dumps(doc) + "\n").encode()

    # -- lifetime ---------------------------------------------------------------------------
    def init(self, path: str) -> None:
        """Called in the (backgrounded) serving process before the first request."""
        self.timer_slack_1us = sharpen_timer()
        self.realtime = _realtime()
        threading.Thread(target=self._watch, name="idle-exit", daemon=True).start()

    def _watch(self) -> None:
        # Signals go to the serving thread, whose wait for the next request they interrupt.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
        while True:
            time.sleep(0.5)
            if self.opens == 0 and time.monotonic() - self.idle_since > self.idle_exit_s:
                log.info("not open for %.0f s: leaving", self.idle_exit_s)
                os.kill(os.getpid(), signal.SIGTERM)  # libfuse's handler unmounts and exits
                return

    idle_exit_s = IDLE_EXIT_S


def _realtime() -> bool:
    """Serve at the lowest real-time priority (SCHED_FIFO 1): a disk has a processor of its
    own, the emulator borrows the host's, and without this a busy host delays its wake-ups
    by milliseconds (docs/emulated-disks.md). It mostly sleeps; the kernel's real-time
    throttling keeps even a runaway one from taking a whole core. Where it is not allowed
    (no CAP_SYS_NICE, a cgroup without real-time time), the emulator serves at its normal
    priority and its stats say so."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (OSError, AttributeError) as exc:
        log.warning("no real-time priority (%s): wake-ups may be late on a busy host", exc)
        return False
    return True


def _rss_bytes() -> int:
    """This process's resident memory: what the written parts of the disk hold."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m poolbench.emulate.server")
    ap.add_argument("--size", type=int, required=True, help="the disk's size in bytes")
    ap.add_argument("--mount", required=True, help="an empty directory to mount on")
    ap.add_argument("--params", required=True, help="the disk model's figures, as JSON")
    ap.add_argument("--seed", type=int, default=0, help="seeds the rotation draws")
    ap.add_argument("--pidfile", default=None)
    ap.add_argument("--log", default=None)
    ap.add_argument("--idle-exit", type=float, default=IDLE_EXIT_S)
    ap.add_argument("--foreground", action="store_true")
    ap.add_argument("--no-wait", action="store_true", help="serve at once (measure the emulator)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    try:
        import mfusepy
    except (ImportError, OSError) as exc:
        print(f"poolbench.emulate.server: no FUSE binding ({exc}); install "
              "'poolbench[emulate]' and libfuse2", file=sys.stderr)  # fmt: skip
        return 3
    params = HddParams.from_dict(json.loads(args.params))
    if params.problems():
        print("poolbench.emulate.server: " + "; ".join(params.problems()), file=sys.stderr)
        return 2
    if args.log:
        logging.basicConfig(filename=args.log, level=logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")  # fmt: skip
    mount = os.path.abspath(args.mount)
    ops = SeekDisk(args.size, params, args.seed, wait=not args.no_wait)
    ops.idle_exit_s = args.idle_exit
    pidfile = os.path.abspath(args.pidfile) if args.pidfile else None
    real_init = ops.init

    def init(path: str) -> None:  # after libfuse has put the process in the background
        if pidfile:
            with open(pidfile, "w") as fh:
                fh.write(f"{os.getpid()}\n")
        real_init(path)

    ops.init = init  # type: ignore[method-assign]
    options = {"fsname": SUBTYPE, "subtype": SUBTYPE, "attr_timeout": 3600,
               "entry_timeout": 3600, "big_writes": mfusepy.fuse_version_major == 2}  # fmt: skip
    try:
        mfusepy.FUSE(ops, mount, foreground=args.foreground, nothreads=True, raw_fi=True,
                     **options)  # fmt: skip
    except RuntimeError as exc:
        print(f"poolbench.emulate.server: mounting on {mount} failed ({exc})", file=sys.stderr)
        return 1
    log.info("unmounted: %s", ops.stats().decode().strip())
    if pidfile:
        with open(pidfile) as fh:
            if fh.read().strip() == str(os.getpid()):
                os.unlink(pidfile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
