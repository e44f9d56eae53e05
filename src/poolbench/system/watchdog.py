"""No child process runs without a time limit (docs/watchdog.md).

Every command the Runner starts gets a limit: the one its call site gives, else a default for
its kind of program (`limit_for`). Quick reads (zpool status, zfs get, lsblk) have QUICK_S;
administrative commands (zpool/zfs admin, mount, losetup, mkfs, initdb, pg_ctl, ...) have
ADMIN_S plus what they may legitimately have to wait for: PER_DEVICE_S for each device they
name, and, for a command that flushes (zpool export/destroy/sync, umount, sync), the dirty data
the kernel and ZFS may hold, written at FLUSH_RATE; a command that writes a whole device
(mkfs.ext*'s inode tables, an md resync) adds that device's share at FLUSH_RATE. Programs
whose duration is the work they are given (fio, pgbench, tar, blktrace, dd, `zpool wait`,
`zpool attach -w`) have no default: their call site derives the limit from the job, and a
call that forgets raises MissingLimit (a bug, found by any test that runs that call).

When a limit runs out the command is stopped (SIGTERM to its process group, then SIGKILL).
A process that sleeps uninterruptibly (state D, inside a pool that stopped answering) cannot
be killed: it is named (pid, argv, state, wchan), left behind, and the caller goes on
(`Stuck`, `CommandTimedOut`). What a long step is doing is said as it goes (`announce`).

POOLBENCH_TIME_LIMIT_SCALE (`scale`, 0.01 to 100, default 1) multiplies every limit derived
here and every allowance the call sites add (probes, graces, margins): a test makes a pool
stop answering and is told within seconds, a user on very slow hardware gives more. A run
time a job asks for by design (fio's runtime, pgbench -T, record --seconds) is never scaled.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from poolbench import is_digits
from poolbench.errors import PoolbenchError, UsageError

MiB = 1 << 20
QUICK_S = 60.0  # reads answered from memory: the slowest seen here, zdb -C on zfs-fuse, ~2 s
ADMIN_S = 120.0  # zpool/zfs admin: zfs-fuse's export under a loaded machine took up to ~8 s
PER_DEVICE_S = 5.0  # each device a command names (labels, partition tables, udev)
FLUSH_RATE = 20 * MiB  # the slowest a flush of dirty data may write (a capped or SMR disk)
ZFS_FUSE_DIRTY = 512 * MiB  # zfs-fuse's dirty data is bounded by its ARC (defaults to 128 M)
# Work (fio, pgbench, tar, ...): START_S + MARGIN × (its run time + bytes / FLOOR_RATE + files
# / FLOOR_OPS). The floors are the slowest a legitimate run goes: 256 random 4 KiB writes a
# second on one spinning disk, a member capped by the slow-disk study.
WORK_START_S = 60.0  # start (a cold zfs-fuse, fio's layout checks) and a closing fsync's tail
WORK_MARGIN = 2.0  # a run may take twice what the floors predict before it is called hung
FLOOR_RATE = 1 * MiB
FLOOR_OPS = 50.0  # files created, stat'ed or deleted per second
TERM_GRACE_S = 10.0  # after SIGTERM (fio stops its jobs cleanly) before SIGKILL
KILL_GRACE_S = 5.0  # after SIGKILL: a process still there is stuck in the kernel
ANNOUNCE_AFTER_S = 2.0  # a teardown step quiet for longer says what it is doing
SCALE_ENV = "POOLBENCH_TIME_LIMIT_SCALE"
SCALE_MIN, SCALE_MAX = 0.01, 100.0  # a quick read keeps 0.6 s; an admin command up to 3 h

# argv[0] basename -> the class of program (the default limit's rule).
QUICK_PROGRAMS = frozenset({
    "lsblk", "blkid", "fincore", "e2freefrag", "zdb", "findmnt", "stat", "true", "echo",
})  # fmt: skip
WORK_PROGRAMS = frozenset({"fio", "pgbench", "tar", "blktrace", "blkparse", "bonnie++"})
QUICK_ZPOOL = frozenset({"list", "get", "status", "iostat", "version", "upgrade", "history"})
QUICK_ZFS = frozenset({"list", "get"})
FLUSHING_ZPOOL = frozenset({"export", "destroy", "sync", "import", "offline", "clear"})
DEVICE_WRITERS = ("mkfs.ext2", "mkfs.ext3", "mkfs.ext4")  # lazy_itable_init=0: 1/64 of a disk


class MissingLimit(TypeError):
    """A call site ran a program whose duration is its work without saying how long it may
    take: a bug in poolbench, never the user's."""


@dataclass(frozen=True)
class Limit:
    seconds: float
    basis: str  # how it was derived, for the message when it runs out


@dataclass(frozen=True)
class Stuck:
    """A process that did not die after SIGKILL: asleep in the kernel, left behind."""

    pid: int
    state: str  # D: uninterruptible sleep (I/O that never returns)
    wchan: str  # the kernel function it waits in
    argv: str

    def describe(self) -> str:
        where = f" in {self.wchan}" if self.wchan and self.wchan != "0" else ""
        what = "uninterruptible sleep" if self.state == "D" else f"state {self.state}"
        return f"pid {self.pid} ({self.argv}) is in {what}{where}"


class CommandTimedOut(PoolbenchError):
    """A command did not end within its limit, and was stopped (or, stuck, left behind)."""

    def __init__(self, argv: Sequence[str], limit: Limit, elapsed: float,
                 stuck: Sequence[Stuck] = ()) -> None:  # fmt: skip
        self.argv = tuple(argv)
        self.limit = limit
        self.elapsed = elapsed
        self.stuck = tuple(stuck)
        problem = (
            f"`{_short(argv)}` did not finish within its time limit of {secs(limit.seconds)} s "
            f"({limit.basis})"
        )
        if self.stuck:
            problem += (
                "; it could not be killed and was left behind: "
                + "; ".join(s.describe() for s in self.stuck)
                + " (it ends when the I/O it waits for returns)"
            )
        super().__init__(problem + ".", "")


def secs(x: float) -> str:
    return f"{x:.1f}" if x < 10 else f"{x:,.0f}"


def _short(argv: Sequence[str], width: int = 160) -> str:
    text = " ".join(argv)
    return text if len(text) <= width else text[: width - 1] + "…"


def scale() -> float:
    """The factor every time limit is multiplied by: POOLBENCH_TIME_LIMIT_SCALE, else 1. A
    value that is not a number from SCALE_MIN to SCALE_MAX is refused (UsageError): a typo
    must not leave a study without time limits, nor kill every command at once."""
    text = os.environ.get(SCALE_ENV)
    if text is None:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not SCALE_MIN <= value <= SCALE_MAX:  # NaN and ±inf fail this too
        raise UsageError(
            f"{SCALE_ENV}={text!r} is not a number from {SCALE_MIN:g} to {SCALE_MAX:g}: it "
            "multiplies every time limit poolbench gives its commands (docs/watchdog.md).",
            "Set it to e.g. 0.1 (limits ten times shorter, for tests) or 4 (very slow "
            "hardware), or unset it for the documented limits.",
        )
    return value


def scaled(seconds: float) -> float:
    """`seconds` of allowance (a limit, a probe, a grace) under POOLBENCH_TIME_LIMIT_SCALE."""
    return seconds * scale()


def time_limit_scales(earlier: object = None, invocations: int = 0) -> list[float] | None:
    """What a run records of the scale (its metadata's `time_limit_scales`): one figure per
    invocation (as its `pool_tokens`), or None while every invocation ran at 1. `earlier`
    is the run's stored list, `invocations` how many invocations it had before this one."""
    before = [float(x) for x in earlier] if isinstance(earlier, list) else [1.0] * invocations
    now = [*before, scale()]
    return now if any(x != 1.0 for x in now) else None


def _program(argv: Sequence[str]) -> tuple[str, list[str]]:
    """The program's name and its arguments, past a `runuser -u USER --` prefix."""
    args = list(argv)
    if os.path.basename(args[0]) == "runuser" and "--" in args:
        args = args[args.index("--") + 1 :] or args
    return os.path.basename(args[0]), args[1:]


def limit_for(argv: Sequence[str], timeout: float | None) -> Limit:
    """The limit a command runs under: `timeout` when the call site gives one, else its
    program's default; MissingLimit for a program whose duration is its work."""
    if timeout is not None:  # derived by its caller, with the scale (`scaled`, `work_limit`)
        return Limit(float(timeout), "set by its caller")
    name, rest = _program(argv)
    if name in WORK_PROGRAMS and rest not in (["--version"], ["-V"]):
        raise MissingLimit(f"{name} runs without a time limit: {_short(argv)}")
    if name == "zpool" and (rest[:1] == ["wait"] or (rest[:1] == ["attach"] and "-w" in rest)):
        raise MissingLimit(f"`zpool {rest[0]}` waits for a resilver or reflow: give a limit")
    if name in QUICK_PROGRAMS or _is_quick(name, rest):
        return _scaled(Limit(QUICK_S, "a read that answers at once"))
    seconds, basis = ADMIN_S, [f"{ADMIN_S:.0f} s for an administrative command"]
    devices = [a for a in rest if a.startswith("/dev/")]
    if devices:
        seconds += PER_DEVICE_S * len(devices)
        basis.append(f"{PER_DEVICE_S:.0f} s for each of its {len(devices)} device(s)")
    written = _device_bytes(devices) // 64 if name in DEVICE_WRITERS else 0
    if name == "mdadm" and rest[:1] == ["--wait"]:
        written = _device_bytes(devices)  # the resync reads and writes every member
    flush = dirty_bytes() if _flushes(name, rest) else 0
    if written + flush:
        seconds += (written + flush) / FLUSH_RATE
        basis.append(f"{(written + flush) / MiB:,.0f} MiB to write at {FLUSH_RATE // MiB} MiB/s")
    return _scaled(Limit(seconds, ", ".join(basis)))


def _scaled(limit: Limit) -> Limit:
    factor = scale()
    if factor == 1.0:
        return limit
    return Limit(limit.seconds * factor, f"{limit.basis}, × {factor:g} ({SCALE_ENV})")


def work_limit(seconds: float = 0.0, moved: int = 0, files: int = 0) -> float:
    """The limit of a command whose duration is its work: `seconds` it runs by design, bytes
    it moves, files it creates or removes. START_S + MARGIN × (seconds + moved / FLOOR_RATE +
    files / FLOOR_OPS), written as the run time by design plus the allowance, which alone is
    scaled: a 10 s fio run is never stopped before its 10 s."""
    allowance = (WORK_START_S + (WORK_MARGIN - 1) * seconds
                 + WORK_MARGIN * (moved / FLOOR_RATE + files / FLOOR_OPS))  # fmt: skip
    return seconds + scaled(allowance)


def _is_quick(name: str, rest: list[str]) -> bool:
    if rest in (["--version"], ["-V"]):
        return True
    first = next((a for a in rest if not a.startswith("-")), "")
    if name == "zpool":
        return first in QUICK_ZPOOL
    if name == "zfs":
        return first in QUICK_ZFS
    if name == "losetup":
        return any(a in ("--find", "--list", "-a", "--all") for a in rest) and "--show" not in rest
    if name == "wipefs":
        return "--no-act" in rest or "-n" in rest
    if name == "mdadm":
        return any(a in ("--detail", "--version", "--examine") for a in rest)
    if name == "btrfs":
        return first == "filesystem" and ("df" in rest or "show" in rest)
    return name.startswith("mkfs.") and rest == ["--version"]


def _flushes(name: str, rest: list[str]) -> bool:
    if name == "zpool":
        return bool(rest) and rest[0] in FLUSHING_ZPOOL
    return name in ("umount", "sync") or (name == "zfs" and rest[:1] == ["destroy"])


def dirty_bytes(meminfo: Path = Path("/proc/meminfo"),
                zfs_params: Path = Path("/sys/module/zfs/parameters")) -> int:  # fmt: skip
    """What a flush may have to write now: the page cache's dirty and writeback bytes, and
    what ZFS may hold dirty (OpenZFS's zfs_dirty_data_max; zfs-fuse's ARC bound)."""
    total = 0
    with contextlib.suppress(OSError):
        for line in meminfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("Dirty", "Writeback") and value.split():
                total += int(value.split()[0]) * 1024
    try:
        total += int((zfs_params / "zfs_dirty_data_max").read_text().strip())
    except (OSError, ValueError):
        total += ZFS_FUSE_DIRTY if not zfs_params.parent.exists() else 0
    return total


def _device_bytes(devices: Sequence[str], sys_block: Path = Path("/sys/class/block")) -> int:
    total = 0
    for d in devices:
        name = os.path.basename(os.path.realpath(d))
        with contextlib.suppress(OSError, ValueError):
            total += int((sys_block / name / "size").read_text().strip()) * 512
    return total


# -- processes that do not die ------------------------------------------------------------
def group_members(pgid: int, proc: Path = Path("/proc")) -> list[int]:
    """The live processes of process group `pgid`."""
    found = []
    for entry in proc.iterdir():
        if not is_digits(entry.name):
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (entry / "stat").read_bytes().rpartition(b")")[2].split()
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                found.append(int(entry.name))
    return found


def describe_process(pid: int, proc: Path = Path("/proc")) -> Stuck | None:
    """pid's state, wait channel and argv; None once it is gone (or a zombie)."""
    base = proc / str(pid)
    try:
        state = (base / "stat").read_bytes().rpartition(b")")[2].split()[0].decode()
        argv = (base / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, IndexError):
        return None
    if state in ("Z", "X"):
        return None
    wchan = ""
    with contextlib.suppress(OSError):
        wchan = (base / "wchan").read_text().strip()
    return Stuck(pid, state, wchan, _short(argv.split(), 120))


# -- saying what a slow step does ---------------------------------------------------------
def _stderr(line: str) -> None:
    # sys.stderr looked up at each call: a progress display may have redirected it
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


_sink: list[Callable[[str], None]] = [_stderr]


def set_announcer(sink: Callable[[str], None]) -> Callable[[str], None]:
    """Where `announce` writes (a test's list; the CLI keeps stderr); returns the old one."""
    old, _sink[0] = _sink[0], sink
    return old


def announce(line: str) -> None:
    _sink[0](line)


@dataclass
class _Step:
    what: str
    t0: float
    due: float  # when it is next said (monotonic)
    every: float


class _Narrator:
    """One daemon thread says every narrated step that has gone on too long. A thread of
    its own per step cost about 1 ms to start and join (more on a loaded machine), and a
    teardown narrates each entry it undoes: 3.6 s of a 200-trial dry run's 10 s
    (docs/dryrun-scale.md). A step now costs a lock and a dict entry; the thread wakes when
    the earliest step is due, and is woken only when a step is due before that."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._steps: dict[int, _Step] = {}
        self._next_key = 0
        self._wake_at = math.inf  # when the thread looks next (inf: it waits to be woken)
        self._thread: threading.Thread | None = None

    def begin(self, what: str, after: float, every: float) -> int:
        t0 = time.monotonic()
        with self._cond:
            key, self._next_key = self._next_key, self._next_key + 1
            self._steps[key] = _Step(what, t0, t0 + after, every)
            if self._thread is None or not self._thread.is_alive():  # (a sink that raised)
                self._thread = threading.Thread(
                    target=self._speak, name="poolbench-narrator", daemon=True
                )
                self._thread.start()
            elif t0 + after < self._wake_at:
                self._cond.notify()
        return key

    def end(self, key: int) -> None:
        with self._cond:
            self._steps.pop(key, None)

    def _speak(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                lines = []
                for s in self._steps.values():
                    if s.due <= now:
                        lines.append(f"{s.what} ({now - s.t0:.0f} s so far)")
                        s.due = now + s.every
                if lines:  # said without the lock: a blocked stderr never holds up a step
                    self._cond.release()
                    try:
                        for line in lines:
                            announce(line)
                    finally:
                        self._cond.acquire()
                    continue  # steps may have begun or ended meanwhile
                self._wake_at = min((s.due for s in self._steps.values()), default=math.inf)
                self._cond.wait(None if math.isinf(self._wake_at) else self._wake_at - now)


_narrator = [_Narrator()]
# A forked child has no narrator thread, and its copy of the lock may be held: a fresh one.
os.register_at_fork(after_in_child=lambda: _narrator.__setitem__(0, _Narrator()))


@contextlib.contextmanager
def narrated(what: str, after: float = ANNOUNCE_AFTER_S, every: float = 15.0) -> Iterator[None]:
    """Say `what` is being done once it has taken `after` seconds, then every `every`
    seconds how long it has taken, until it ends: a teardown waiting on a pool that stopped
    answering is never silent."""
    narrator = _narrator[0]
    key = narrator.begin(what, after, every)
    try:
        yield
    finally:
        narrator.end(key)
