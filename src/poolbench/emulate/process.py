"""An emulated disk's server process: started through the Runner, checked, stopped.

The server (emulate/server.py) mounts a FUSE file system at `mountpoint` whose `disk.img` is
the disk; a loop device goes over that file. It is started like the zfs-fuse daemon and
pg_ctl's server: one Runner call with a time limit that returns once the disk is mounted
(libfuse then puts the server in the background, out of the Runner's process group, so a
Ctrl-C meant for poolbench does not pull the disk from under a pool). Its lifetime is bounded
by its use: it leaves by itself once its disk has not been open for `idle_exit` seconds, and
never while a loop device holds it.

The safety journal records each server before it starts (`Journal.emulated_disk_intent`)
and undoes it with `stop`, after the loop device over it is detached: unmount (only a mount
of this file system type at that place), then the process is gone (only a process whose
command line is this server's for that mountpoint is ever signalled).
"""

from __future__ import annotations

import contextlib
import ctypes.util
import importlib.util
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from poolbench.emulate.server import DISK, IDLE_EXIT_S, SUBTYPE, StatsJson
from poolbench.errors import PoolbenchError, UsageError
from poolbench.guards.devices import mounts
from poolbench.system.runner import Runner

SERVER = "poolbench.emulate.server"
FSTYPE = f"fuse.{SUBTYPE}"
DISK_FILE = DISK.lstrip("/")
START_TIMEOUT_S = 30.0  # the Runner's limit on the starting command, and on the mount showing
STOP_GRACE_S = 10.0  # after the unmount, before SIGTERM, and again before SIGKILL
FIX = (
    "Install the FUSE binding and library: pip install 'poolbench[emulate]' (mfusepy) and "
    "apt-get install libfuse2; or remove `model` from [disks]."
)


@dataclass(frozen=True)
class EmulatedDisk:
    """Where one emulated disk lives: its mountpoint, and its pid file and log beside it."""

    mountpoint: Path

    @property
    def disk(self) -> Path:
        """The file the loop device goes over."""
        return self.mountpoint / DISK_FILE

    @property
    def stats_file(self) -> Path:
        return self.mountpoint / "stats"

    @property
    def pidfile(self) -> Path:
        return self.mountpoint.with_name(self.mountpoint.name + ".pid")

    @property
    def log(self) -> Path:
        return self.mountpoint.with_name(self.mountpoint.name + ".log")


def unavailable() -> str:
    """Why no disk can be emulated here ('' when one can)."""
    if importlib.util.find_spec("mfusepy") is None:
        return "the Python package mfusepy (the FUSE binding) is not installed"
    if ctypes.util.find_library("fuse") is None and ctypes.util.find_library("fuse3") is None:
        return "libfuse is not installed"
    if not Path("/dev/fuse").exists():
        return "/dev/fuse is missing (this kernel has no FUSE)"
    return ""


def check(total_bytes: int, name: str, meminfo: Path = Path("/proc/meminfo")) -> None:
    """Refuse, before anything is made, disks that cannot be emulated here: no FUSE, or
    more bytes than half the memory available (an emulated disk's bytes live in memory)."""
    why = unavailable()
    if why:
        raise UsageError(f"The disks cannot be emulated ({name}): {why}.", FIX)
    available = _mem_available(meminfo)
    if available is not None and total_bytes > available // 2:
        raise UsageError(
            f"The emulated disks ({name}) hold {total_bytes / 2**30:.1f} GiB together, more "
            f"than half the {available / 2**30:.1f} GiB of memory available: their bytes "
            "live in memory.",
            "Use fewer or smaller disks ([disks] count, size).",
        )


def _mem_available(meminfo: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def server_argv(
    d: EmulatedDisk,
    size: int,
    params: Mapping[str, object],
    seed: int,
    idle_exit: float,
    wait: bool = True,
) -> list[str]:
    """`wait=False`: a disk that serves at once (the emulator's own speed, bench/)."""
    return [sys.executable, "-m", SERVER, "--size", str(size), "--mount", str(d.mountpoint),
            "--params", json.dumps(dict(params), sort_keys=True), "--seed", str(seed),
            "--pidfile", str(d.pidfile), "--log", str(d.log),
            "--idle-exit", f"{idle_exit:g}"] + ([] if wait else ["--no-wait"])  # fmt: skip


def start(
    runner: Runner,
    d: EmulatedDisk,
    size: int,
    params: Mapping[str, object],
    seed: int = 0,
    idle_exit: float = IDLE_EXIT_S,
    wait: bool = True,
) -> None:
    """Start the server and wait until its disk answers with the size asked for."""
    runner.run(server_argv(d, size, params, seed, idle_exit, wait), reap_group=False,
               timeout=START_TIMEOUT_S)  # fmt: skip
    if runner.dry_run:
        return
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if d.disk.stat().st_size == size and server_pid(d) is not None:
                return
        time.sleep(0.05)
    raise PoolbenchError(
        f"The disk emulator at {d.mountpoint} did not come up within {START_TIMEOUT_S:g} s.",
        f"See its log, {d.log}; `poolbench cleanup` removes what was made.",
    )


def server_pid(d: EmulatedDisk) -> int | None:
    """The running server of this mountpoint, as its pid file names it: only a process whose
    command line is this server's for this mountpoint (not a stale file, nor a reused pid)."""
    try:
        pid = int(d.pidfile.read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return None
    ours = SERVER in argv and str(d.mountpoint) in argv
    return pid if ours and state not in ("Z", "X") else None


def stats(d: EmulatedDisk) -> StatsJson:
    """What the disk has served so far (the server's `stats` file: emulate/clock.py Tally)."""
    doc: StatsJson = json.loads(d.stats_file.read_bytes())
    return doc


def stop(runner: Runner, mountpoint: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> str:
    """Unmount the emulator at `mountpoint` and see its process gone; returns why something
    was left alone ('' when nothing was). A busy mount (a loop device still over the disk)
    raises the umount's CommandError, so the journal keeps the entry for `cleanup`."""
    d = EmulatedDisk(mountpoint)
    here = [m for m in mounts(mountinfo) if m.mountpoint == os.path.realpath(mountpoint)]
    if here and here[-1].fstype != FSTYPE:
        return (
            f"{mountpoint} is now a mount of {here[-1].source} ({here[-1].fstype}), not a "
            "poolbench disk emulator; left alone"
        )
    pid = server_pid(d)
    if here:
        runner.run(["umount", str(mountpoint)], timeout=STOP_GRACE_S * 3)
    if pid is not None:
        _end(pid)
    return ""


def _end(pid: int) -> None:
    """The server leaves once unmounted; one that does not is sent SIGTERM, then SIGKILL."""
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False
