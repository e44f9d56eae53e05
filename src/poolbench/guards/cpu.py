"""CPU cost of a measurement: CPU seconds per GiB the application moved.

Two parts, kept apart in the record because they are not equally precise:
- fio's own user + system time, from its JSON (workloads/fioparse: usr_cpu and sys_cpu
  are percentages of job_runtime, summed over the jobs);
- the filesystem's own CPU. zfs-fuse does its work (checksums, compression, parity) in its
  daemon, whose user + system time /proc/<pid>/stat gives exactly, but the daemon serves
  every pool on the machine, so another user's pool counts too. An in-kernel filesystem
  (OpenZFS, btrfs, md, ext4, xfs) works in kernel threads that belong to no process; the only
  account is the whole machine's kernel time from /proc/stat (system + irq + softirq), minus
  fio's own system time, which it already contains. That includes every other process's
  kernel time and is labelled so.
Compression trades CPU for I/O; this figure makes the trade visible.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from poolbench import is_digits

GiB = 1 << 30
PROC = Path("/proc")
TICK = os.sysconf("SC_CLK_TCK")


def process_seconds(pid: int, proc: Path = PROC) -> float | None:
    """User + system CPU seconds of one process (None: it is gone)."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


def kernel_seconds(proc: Path = PROC) -> float | None:
    """The whole machine's kernel CPU seconds (system + irq + softirq) since boot."""
    try:
        first = (proc / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if first[0] != "cpu" or len(first) < 8:
        return None
    return (int(first[3]) + int(first[6]) + int(first[7])) / TICK


def daemon_pid(name: str = "zfs-fuse", proc: Path = PROC) -> int | None:
    """The pid of the running process called `name` (the zfs-fuse daemon), or None."""
    try:
        entries = list(proc.iterdir())
    except OSError:
        return None
    for entry in entries:
        if is_digits(entry.name):
            try:
                if (entry / "comm").read_text().strip() == name:
                    return int(entry.name)
            except OSError:
                continue
    return None


@dataclass(frozen=True)
class FsClock:
    """Where the filesystem's own CPU is read, and how honestly."""

    scope: str  # "zfs-fuse daemon" | "whole machine kernel"
    label: str
    read: Callable[[], float | None]


def fs_clock(flavour: str | None, proc: Path = PROC) -> FsClock | None:
    """The filesystem's CPU clock: the zfs-fuse daemon, else the machine's kernel time."""
    if flavour == "zfs-fuse":
        pid = daemon_pid("zfs-fuse", proc)
        if pid is None:
            return None
        return FsClock(
            "zfs-fuse daemon",
            f"the zfs-fuse daemon's user + system time (pid {pid}; it serves every pool on "
            "this machine, so others' I/O counts too)",
            lambda: process_seconds(pid, proc),
        )
    return FsClock(
        "whole machine kernel",
        "kernel time of the whole machine (system + irq + softirq from /proc/stat) minus "
        "fio's own system time: every other process's kernel work counts too",
        lambda: kernel_seconds(proc),
    )


class CpuCost(TypedDict):
    """The `cpu` section of a measurement's findings (seconds, per GiB the application
    moved); None where the filesystem's own CPU could not be read."""

    fio_s: float
    fs_s: float | None
    fs_scope: str | None
    fs_label: str
    total_s: float
    s_per_gib: float | None


class CpuWindow:
    """Open before the timed part of a measurement, close right after it."""

    def __init__(self, flavour: str | None, proc: Path = PROC) -> None:
        self.clock = fs_clock(flavour, proc)
        self.start = self.clock.read() if self.clock else None

    def close(self, fio_usr_s: float, fio_sys_s: float, app_bytes: int) -> CpuCost:
        fs_s: float | None = None
        end = self.clock.read() if self.clock else None
        if self.clock and self.start is not None and end is not None:
            fs_s = max(0.0, end - self.start)
            if self.clock.scope == "whole machine kernel":
                fs_s = max(0.0, fs_s - fio_sys_s)  # fio's system time is already in it
        scope = self.clock.scope if self.clock else None
        label = self.clock.label if self.clock else "the filesystem's CPU could not be read"
        return cost(fio_usr_s + fio_sys_s, fs_s, app_bytes, scope, label)


def per_gib(record: object) -> float | None:
    """CPU seconds per GiB from a stored cpu record (None: absent, or nothing was moved)."""
    value = record.get("s_per_gib") if isinstance(record, dict) else None
    return float(value) if isinstance(value, int | float) else None


def cost(
    fio_s: float, fs_s: float | None, app_bytes: int, scope: str | None, label: str
) -> CpuCost:
    """The stored record: both parts, their sum, and the sum per GiB the application moved."""
    total = fio_s + (fs_s or 0.0)
    per_gib = total / (app_bytes / GiB) if app_bytes > 0 else None
    return {
        "fio_s": round(fio_s, 4),
        "fs_s": None if fs_s is None else round(fs_s, 4),
        "fs_scope": scope,
        "fs_label": label,
        "total_s": round(total, 4),
        "s_per_gib": None if per_gib is None else round(per_gib, 4),
    }
