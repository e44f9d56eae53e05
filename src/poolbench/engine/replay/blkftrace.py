"""The same block trace through the kernel's ftrace `blk` tracer, where blktrace cannot run.

blktrace reads the kernel's events through relay files in debugfs, which a kernel in lockdown
(integrity mode: `lockdown=integrity`, or built with LOCK_DOWN_KERNEL_FORCE_INTEGRITY) refuses
to open (EPERM), even to root. The kernel's blk tracer delivers the same events (the same
CONFIG_BLK_DEV_IO_TRACE tracepoints) through tracefs, which integrity lockdown allows:
`current_tracer` = blk, the device's `trace/enable` = 1 and its `trace/act_mask` = queue
(only the queue events are kept); the events are read from `trace_pipe` for the
recording's length. `current_tracer` and `enable` are journaled before they are written and
put back after (also on error and Ctrl-C; after a kill -9 by `poolbench cleanup`); the mask
goes with the device's trace when `enable` is 0 again. tracefs is mounted and unmounted like
debugfs if none is mounted. A device someone is tracing already is refused. Nothing on the
device changes.
"""

from __future__ import annotations

import os
import re
import select
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from poolbench.errors import PoolbenchError
from poolbench.safety.journal import Journal
from poolbench.system.runner import Runner

TRACEFS = Path("/sys/kernel/tracing")
SYS_BLOCK = Path("/sys/class/block")
_LOST = re.compile(r"\[LOST (\d+) EVENTS\]")


def _set(journal: Journal, path: Path, value: str) -> None:
    """Write one kernel setting, journaled first, and check that it took."""
    before = path.read_text().strip()
    journal.setting_changed(str(path), before, value)
    path.write_text(value + "\n")
    now = path.read_text().strip()
    if now != value:
        raise PoolbenchError(
            f"The kernel did not take {value!r} in {path} (it reads {now!r}).",
            "This kernel's blk tracer cannot record here; record on another machine.",
        )


@contextmanager
def tracing(
    journal: Journal, root: Path, device: str, sys_block: Path = SYS_BLOCK
) -> Iterator[Path]:
    """The blk tracer on for `device` (a kernel name), its trace_pipe yielded; every setting
    put back after, newest first."""
    trace = sys_block / device / "trace"
    if not (trace / "enable").exists() or not (root / "current_tracer").exists():
        raise PoolbenchError(
            f"Neither blktrace nor the kernel's blk tracer can record {device} here "
            f"({trace / 'enable'} or {root / 'current_tracer'} is missing).",
            "Record on a kernel built with CONFIG_BLK_DEV_IO_TRACE and tracefs.",
        )
    if (trace / "enable").read_text().strip() != "0":
        raise PoolbenchError(
            f"{device} is being traced already ({trace / 'enable'} reads 1): another blktrace "
            "or blk tracer is recording it, and poolbench will not change its settings.",
            "Wait until that recording ends, then record again.",
        )
    mark = len(journal.entries)
    try:
        _set(journal, root / "current_tracer", "blk")
        _set(journal, trace / "enable", "1")
        # Only the queue events. Not journaled: the kernel frees the device's trace, its
        # mask with it, when `enable` goes back to 0 (and reads "disabled" before it is on).
        (trace / "act_mask").write_text("queue\n")
        yield root / "trace_pipe"
    finally:
        ours = {id(e) for e in journal.entries[mark:]}
        journal.teardown_or_raise(
            "After the recording, the blk tracer's settings were left: ",
            "Inspect them; `poolbench cleanup` retries.",
            only=lambda e: id(e) in ours,
        )


def enabled(device: str) -> str | None:
    """What the device's `trace/enable` reads ('0' / '1'), or None without one."""
    path = SYS_BLOCK / device / "trace" / "enable"
    return path.read_text().strip() if path.exists() else None


def undo_refused_setup(device: str, before: str | None) -> None:
    """A blktrace refused its relay files may leave the device's trace set up: switch it
    off again if it was off before that blktrace ran (what it left is ours to undo)."""
    if before == "0" and enabled(device) == "1":
        (SYS_BLOCK / device / "trace" / "enable").write_text("0\n")


def drain(pipe: Path, seconds: float, out: Path) -> int:
    """Copy trace_pipe to `out` for `seconds`; the number of events the kernel says it lost."""
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    lost = 0
    deadline = time.monotonic() + seconds
    try:
        with open(out, "wb") as fh:
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([fd], [], [], min(left, 0.2))
                chunk = _read(fd) if ready else b""
                if not chunk and ready:
                    time.sleep(min(left, 0.05))  # at its end (a file in tests): no busy loop
                fh.write(chunk)
                lost += sum(int(n) for n in _LOST.findall(chunk.decode(errors="replace")))
            # what the buffer still holds when the time is up (tracing is still on: the
            # settings are put back after this)
            while chunk := _read(fd):
                fh.write(chunk)
                lost += sum(int(n) for n in _LOST.findall(chunk.decode(errors="replace")))
    finally:
        os.close(fd)
    return lost


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


def record(runner: Runner, journal: Journal, root: Path, device: Path, seconds: float,
           out: Path, sys_block: Path | None = None) -> int:  # fmt: skip
    """Record `device`'s queue events into `out` (text, one event a line); events lost."""
    with tracing(journal, root, device.name, sys_block or SYS_BLOCK) as pipe:
        lost = drain(pipe, seconds, out)
    if runner.dry_run:
        return 0
    return lost
