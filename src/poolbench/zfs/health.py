"""Whether a pool still answers, and when it does not, what ZFS says about it.

A pool whose devices fail its I/O is *suspended* by ZFS (failmode=wait, the default): every
read and write waits, in the kernel (OpenZFS) or in the zfs-fuse daemon, until the devices
come back and `zpool clear` resumes it. `zpool status` says so in both dialects ("One or more
devices are faulted in response to IO failures", OpenZFS's "pool I/O is currently
suspended"); OpenZFS's `zpool list -o health` reads SUSPENDED. A ZFS that does not answer
`zpool status` at all within PROBE_S (a daemon stuck, or stopped) is named as such.

zfs-fuse (pool v23) shows it differently (measured here: the members' backing files on a full
tmpfs): the pool stays ONLINE in `zpool list`, and `zpool status` counts write errors on the
pool's own row ("pbwdx ONLINE 0 159K 0") with "One or more devices has experienced an error
resulting in data corruption"; fio sleeps in the FUSE request, and `zpool clear`, `destroy -f`
and `export -f` wait for ever, until the devices take writes again. So a pool whose own row
counts read or write errors is taken as one that may have stopped answering too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from poolbench.system.runner import Runner
from poolbench.system.watchdog import CommandTimedOut, scaled, secs
from poolbench.zfs import commands

PROBE_S = 15.0  # `zpool status` answers from memory: seconds mean ZFS itself is stuck
SUSPENDED = re.compile(
    r"faulted in response to IO failures|I/O is currently suspended|\bSUSPENDED\b", re.I
)
HEALTHY = ("ONLINE", "DEGRADED")  # a degraded pool still serves its I/O


@dataclass(frozen=True)
class PoolHealth:
    name: str
    answered: bool  # `zpool status` answered within PROBE_S
    health: str  # ONLINE, DEGRADED, SUSPENDED, UNAVAIL, FAULTED, ... ("" if unknown)
    suspended: bool
    failmode: str  # wait (ZFS's default), continue, panic; "" if unknown
    status: str  # `zpool status NAME` as it answered ("" if it did not)

    io_errors: tuple[int, int] = (0, 0)  # read and write errors on the pool's own row

    @property
    def stopped_answering(self) -> bool:
        return self.suspended or not self.answered or any(self.io_errors)

    def describe(self) -> str:
        if not self.answered:
            return (
                f"ZFS itself did not answer `zpool status {self.name}` within "
                f"{secs(scaled(PROBE_S))} s "
                "(the zfs-fuse daemon or the kernel module is stuck)"
            )
        what = "is suspended" if self.suspended else f"is {self.health or 'in an unknown state'}"
        if any(self.io_errors) and not self.suspended:
            what += f" with {self.io_errors[0]:,} read and {self.io_errors[1]:,} write errors"
        fail = f" (failmode={self.failmode})" if self.failmode else ""
        return f"pool {self.name} {what}{fail}; zpool status says: {_quote(self.status)}"


def _quote(status: str, lines: int = 12) -> str:
    kept = [ln.strip() for ln in status.strip().splitlines() if ln.strip()][:lines]
    return " | ".join(kept) or "(nothing)"


def probe(runner: Runner, name: str, dialect: str = commands.ZFS_FUSE) -> PoolHealth:
    """The pool's health, each question bounded by PROBE_S (scaled)."""
    limit = scaled(PROBE_S)
    try:
        listed = runner.run(["zpool", "list", "-H", "-o", "health", name], check=False,
                            mutates=False, timeout=limit)  # fmt: skip
        health = listed.stdout.strip().upper() if listed.returncode == 0 else ""
        status = runner.run(commands.status(name), check=False, mutates=False, timeout=limit)
        errors = io_errors(status.stdout, name)
        if health in HEALTHY and not any(errors) and not SUSPENDED.search(status.stdout):
            return PoolHealth(name, True, health, False, "", status.stdout)
        mode = runner.run(commands.pool_prop(name, "failmode", dialect), check=False,
                          mutates=False, timeout=limit)  # fmt: skip
    except CommandTimedOut:
        return PoolHealth(name, False, "", False, "", "")
    text = status.stdout + status.stderr
    failmode = _failmode(mode.stdout, name) if mode.returncode == 0 else ""
    suspended = bool(SUSPENDED.search(text)) or health == "SUSPENDED"
    return PoolHealth(name, True, health, suspended, failmode, text, errors)


_SCALE = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9}


def _count(text: str) -> int:
    """zpool status's error counts: 0, 12, 159K, 1.2M."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)", text)
    return int(float(m.group(1)) * _SCALE[m.group(2)]) if m else 0


def io_errors(status: str, name: str) -> tuple[int, int]:
    """Read and write errors on the pool's own row of `zpool status` (0, 0 if none)."""
    for line in status.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0] == name:
            return _count(f[2]), _count(f[3])
    return 0, 0


def _failmode(out: str, name: str) -> str:
    """OpenZFS prints the value alone; zfs-fuse a table: NAME PROPERTY VALUE SOURCE."""
    for line in out.splitlines():
        f = line.split()
        if len(f) == 1:
            return f[0]
        if len(f) >= 3 and f[0] == name and f[1] == "failmode":
            return f[2]
    return ""
