"""Shared fixtures: real filesystems on tmpfs and loop devices, always torn down.

Every fixture here creates what it uses (sparse files, loop devices, mounts) and removes it in
a finally block, so a failing test leaves nothing behind. Nothing here touches a device the
fixture did not create.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

IS_ROOT = os.geteuid() == 0
HAS_FIO = shutil.which("fio") is not None

# A suite started as a background job of a shell without job control (`cmd &` in a script,
# nohup) inherits SIGINT ignored, and every poolbench it starts would ignore it too, as Unix
# wants of background jobs: the Ctrl-C tests would then see a run finish instead of stop.
# A handler here (not "ignore") makes each child start with the default, whatever started us.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The suite checks mechanics and computed figures, not how steady a disk is: every poolbench
# it starts holds its windows to no minimum unless a test asks for one (--min-window, or a
# study file's min_window). The window rule itself is tested where it is set on purpose.
os.environ.setdefault("POOLBENCH_MIN_WINDOW", "0")

needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (mount, losetup, cgroups)")
needs_fio = pytest.mark.skipif(not HAS_FIO, reason="fio is not installed (Debian: fio)")


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A private tmpfs (64 MiB) mounted under the test's tmp dir."""
    if not IS_ROOT:
        pytest.skip("needs root to mount a tmpfs")
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=256m", "pbtest", str(mnt))
    try:
        yield mnt
    finally:
        sh("umount", "-l", str(mnt), check=False)


@dataclass
class LoopFs:
    mountpoint: Path
    device: str  # /dev/loopN
    image: Path

    @property
    def name(self) -> str:
        return self.device.removeprefix("/dev/")


@pytest.fixture
def make_loop_fs() -> Iterator[object]:
    """Factory: ext4 on a direct-I/O loop device over a sparse file; all removed at the end."""
    if not IS_ROOT:
        pytest.skip("needs root for loop devices")
    made: list[tuple[str, Path, Path]] = []
    base = Path(tempfile.mkdtemp(prefix="pbtest-loop-", dir="/var/tmp"))

    def make(size: str = "512M", image_dir: Path | None = None, fs: str = "ext4") -> LoopFs:
        d = image_dir or base
        img = d / f"disk{len(made)}.img"
        sh("truncate", "-s", size, str(img))
        dev = sh("losetup", "--find", "--show", "--direct-io=on", str(img)).stdout.strip()
        mnt = base / f"mnt{len(made)}"
        mnt.mkdir()
        made.append((dev, mnt, img))
        if fs == "ext4":
            sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)
        else:
            sh(f"mkfs.{fs}", "-f", dev) if fs in ("xfs", "btrfs") else sh(f"mkfs.{fs}", dev)
        sh("mount", dev, str(mnt))
        return LoopFs(mnt, dev, img)

    try:
        yield make
    finally:
        for dev, mnt, img in reversed(made):
            sh("umount", str(mnt), check=False)
            sh("losetup", "--detach", dev, check=False)
            img.unlink(missing_ok=True)
        shutil.rmtree(base, ignore_errors=True)


def poolbench(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess, as a user would."""
    import sys

    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "poolbench", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def loops_backed_by(directory: Path) -> list[str]:
    out = sh("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if str(directory) in line]


def _zpool_answers() -> bool:
    return subprocess.run(["zpool", "list", "-H"], capture_output=True).returncode == 0


def _stop_daemon(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return  # it died earlier: a crash that the zfs_fuse fixture recovered from
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state in ("Z", "X"):  # exited; a zombie only waits for its parent to reap it
            return
        time.sleep(0.2)


def _start_daemon(piddir: str) -> int:
    pidfile = os.path.join(piddir, f"pid{time.monotonic_ns()}")
    subprocess.run(["zfs-fuse", "--pidfile", pidfile], check=True, capture_output=True)
    # The daemon writes its pid file after it forks; its socket may answer first.
    deadline = time.monotonic() + 30
    started: int | None = None
    while started is None or not _zpool_answers():
        if started is None and os.path.exists(pidfile):
            text = Path(pidfile).read_text().strip()
            started = int(text) if text else None
        if time.monotonic() > deadline:
            pytest.fail("started zfs-fuse but it did not answer within 30 s")
        time.sleep(0.2)
    return started


@dataclass
class _Daemons:
    piddir: str
    started: list[int]
    segfaults_seen: int = field(default_factory=lambda: len(_segfaults()))


@pytest.fixture(scope="session")
def _zfs_fuse_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Daemons]:
    """Daemons this test session started (stopped at its end); someone else's is never
    stopped."""
    if not IS_ROOT:
        pytest.skip("needs root for zfs-fuse")
    if shutil.which("zfs-fuse") is None or shutil.which("zpool") is None:
        pytest.skip("zfs-fuse is not installed (Debian: zfs-fuse)")
    daemons = _Daemons(tempfile.mkdtemp(prefix="pbtest-zfsfuse-", dir="/var/tmp"), [])
    try:
        yield daemons
    finally:
        if daemons.started and not _zpool_answers():
            # The last test's daemon died: bring it back once more, for cleanup's sake.
            _recover(daemons, tmp_path_factory.getbasetemp())
        for pid in daemons.started:
            _stop_daemon(pid)
        if daemons.started and not _zpool_answers():
            _unmount_dead_fuse()  # the daemon leaves /zfs-kstat behind even on SIGTERM
        shutil.rmtree(daemons.piddir, ignore_errors=True)


def _recover(daemons: _Daemons, base: Path) -> str:
    """What a user does after a zfs-fuse crash: its dead FUSE mounts go, the daemon comes
    back, and `poolbench cleanup` imports, destroys and detaches what the trials left."""
    _unmount_dead_fuse()
    daemons.started.append(_start_daemon(daemons.piddir))
    return _cleanup_stale_journals(base)


@pytest.fixture
def zfs_fuse(_zfs_fuse_session: _Daemons, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A running zfs-fuse daemon. Checked before every test that needs it: zfs-fuse (a
    user-space port of pool v23) segfaults now and then (one CI run: a bad read inside libc, in the
    middle of the width study), and one crash must cost at most one test attempt, not every
    ZFS test after it, nor the pools and loop devices of the test it killed."""
    if _zpool_answers():
        return
    if not _zfs_fuse_session.started:
        _zfs_fuse_session.started.append(_start_daemon(_zfs_fuse_session.piddir))
        return
    undone = _recover(_zfs_fuse_session, tmp_path_factory.getbasetemp())
    warnings.warn(
        f"zfs-fuse had died ({_new_segfaults(_zfs_fuse_session) or 'no segfault in dmesg'});"
        f" restarted it, and poolbench cleanup undid {undone}",
        ZfsFuseCrashed,
        stacklevel=1,
    )


@pytest.fixture
def own_zfs_fuse(zfs_fuse: None, _zfs_fuse_session: _Daemons) -> Iterator[OwnDaemon]:
    """The zfs-fuse daemon this test session started, for a test that kills it on purpose;
    a daemon someone else started is never killed, so such a test is skipped then."""
    started = _zfs_fuse_session.started
    if not started or not Path(f"/proc/{started[-1]}").exists():
        pytest.skip("the running zfs-fuse was not started by this test session")

    def restart() -> None:
        started.append(_start_daemon(_zfs_fuse_session.piddir))

    yield OwnDaemon(started[-1], restart)


@dataclass
class OwnDaemon:
    pid: int
    restart: Callable[[], None]


class ZfsFuseCrashed(UserWarning):
    """Shown in the warnings summary, so a recovered crash is never silent."""


def _zfs_fuse_died() -> bool:
    """The rerun condition (pytest-rerunfailures, evaluated after a failed attempt): only a
    failure during which the daemon died is attempted again, and only once."""
    return not _zpool_answers()


# The fast tier (`pytest -m "not slow"`, the inner loop: under 3 minutes) leaves out what
# builds real pools, loop devices and filesystems, runs poolbench end to end on them, opens
# the HTML in a browser or runs the type checker. Said here once, by what a test uses, so a
# new test that takes one of these fixtures or lives in one of these modules is slow without
# anyone remembering to mark it. The whole suite (the README's command) runs everything.
SLOW_FIXTURES = frozenset({
    "zfs_fuse", "own_zfs_fuse", "make_loop_fs", "tmpfs", "loops", "named_loops", "zfs",
    "zpool", "zfs_mount", "zfs_on_links", "btrfs_raid1", "capped_ext4", "mirror_one_capped",
    "memory_capped", "fleet", "lab",
})  # fmt: skip
# Modules whose tests run poolbench for real (studies, benches, fleets on network namespaces).
SLOW_MODULES = frozenset({
    "test_amplification_real", "test_bench_capped", "test_bench_real", "test_bench_zfs",
    "test_cold_metadata", "test_hosts_fleet", "test_latency_real", "test_order_real",
    "test_plan_study_agree", "test_predicted_capped", "test_study_badinput",
    "test_study_devices", "test_study_interrupt", "test_study_load", "test_study_robust",
    "test_untar_compression", "test_planner_zfsfuse", "test_tier_host", "test_stop_campaign",
})  # fmt: skip
SLOW_NAMES = ("chromium", "mypy", "for_real", "monte_carlo", "simulat")


def _is_slow(item: pytest.Item) -> bool:
    module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    name = getattr(item, "originalname", item.name)
    return (
        module in SLOW_MODULES
        or bool(SLOW_FIXTURES & set(getattr(item, "fixturenames", ())))
        or any(word in name for word in SLOW_NAMES)
    )


# Tests that make loop devices, pools or mounts, or time real disks, run one after another
# on one worker (`--dist loadgroup`); the rest (pure, or fio on a directory) run beside them.
# Slow by name only (a browser, the type checker, simulations) is CPU, not the machine's disks.
# Fast, yet they make loop devices or read the machine's device inventory twice.
MACHINE_MODULES = frozenset({"test_sources", "test_zvol_target", "test_disks_width"})
CPU_ONLY_NAMES = ("chromium", "mypy", "monte_carlo", "simulat")
MACHINE_GROUP = "machine"


# Slow, yet using no disk, pool, cap or cache of the machine: the guest tier's script against
# a fake guest (slow by its timeouts), and the fleet (fio servers on tmpfs in network
# namespaces of its own, no cache drop: fleet/guards.py). They run beside the chain.
BESIDE_MODULES = frozenset({"test_tier_host", "test_hosts_fleet"})


def _uses_the_machine(item: pytest.Item) -> bool:
    module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    name = getattr(item, "originalname", item.name)
    if module in BESIDE_MODULES:
        return False
    if module in MACHINE_MODULES or module in SLOW_MODULES:
        return True
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    return _is_slow(item) and not any(word in name for word in CPU_ONLY_NAMES)


# In parallel the machine's worker starts with these, whose figures are bytes, counts and
# outcomes, not speeds: the other worker's fast tests take a core for the first minutes,
# and a loaded machine makes zfs-fuse write more transaction groups (more metadata bytes)
# and later. The tests that time capped disks or count a write's bytes come after.
UNTIMED_MODULES = frozenset({
    "test_study_interrupt", "test_dataspace_zfsfuse", "test_planner_zfsfuse",
    "test_study_robust", "test_study_badinput", "test_study_devices",
    "test_safety_matrix", "test_backend_zfs", "test_backend_btrfs", "test_sources",
    "test_zvol_target", "test_blockdev", "test_store_robustness", "test_study_load",
    "test_pgbench_real", "test_aging_real", "test_zfs_classes", "test_plan_study_agree",
    "test_stop_campaign",
})  # fmt: skip


def _chain_position(item: pytest.Item) -> int:
    if not _uses_the_machine(item):
        return 2
    module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    return 0 if module in UNTIMED_MODULES else 1


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the group into the node id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if getattr(config, "workerinput", {}).get("poolbench_dist") == "loadgroup":
        config.option.loadgroup = True  # read by pytest-xdist's worker right after this hook
    for item in items:
        if "zfs_fuse" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.flaky(reruns=1, condition=_zfs_fuse_died))
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
        if _uses_the_machine(item):
            item.add_marker(pytest.mark.xdist_group(MACHINE_GROUP))
    if config.getoption("loadgroup", False) or config.getoption("dist", "no") == "loadgroup":
        items.sort(key=_chain_position)  # stable: each module's tests stay together


# Two test sessions that build pools on one machine break each other: a study's leftover check
# sees the other session's pools, both pick the same free loop device, one stops the zfs-fuse
# daemon the other uses. A session that will run slow (real-pool) tests takes this lock for
# its whole length; a second such session waits for it (and says so). Pure sessions take none.
MACHINE_LOCK = Path("/var/lock/poolbench-suite.lock")
LOCK_HELD_ENV = "POOLBENCH_SUITE_LOCK_HELD"  # a pytest started by a test inherits the lock
_held: list[Any] = []


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist turns `-n N` alone into --dist load
def pytest_cmdline_main(config: pytest.Config) -> None:
    """`-n N` distributes by group: the tests that use the machine's disks on one worker."""
    if config.getoption("numprocesses", None) and config.getoption("dist", "no") == "no":
        config.option.dist = "loadgroup"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """In parallel, the tests beside the machine's chain run at a low CPU priority: the
    chain's length is the suite's, and its zfs-fuse, fio and poolbench processes (started
    from this worker, so inheriting its priority) should not wait for a core."""
    if IS_ROOT and os.environ.get("PYTEST_XDIST_WORKER"):
        os.setpriority(os.PRIO_PROCESS, 0, 0 if _uses_the_machine(item) else 15)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: no error where it is absent
def pytest_configure_node(node: Any) -> None:  # in the controller
    """A worker parses the command line again, so `-n N` without --dist would leave it
    believing the run is not grouped: it is told the controller's mode."""
    node.workerinput["poolbench_dist"] = node.config.getoption("dist")


def pytest_configure(config: pytest.Config) -> None:
    """In parallel (pytest-xdist), every test that uses the machine's disks must run on one
    worker (`--dist loadgroup`), and the session takes the machine lock before the workers
    start (they inherit it): two workers building pools at once would break each other."""
    parallel = (config.getoption("numprocesses", None) or 0) != 0
    if not parallel or hasattr(config, "workerinput"):
        return
    if config.getoption("dist", "no") != "loadgroup":
        raise pytest.UsageError(
            "tests that build pools run one at a time on one worker: leave out --dist (-n 2 "
            "alone distributes by group), or give --dist loadgroup"
        )
    if "not slow" not in config.option.markexpr:
        _take_machine_lock()


def pytest_collection_finish(session: pytest.Session) -> None:
    slow = any(item.get_closest_marker("slow") for item in session.items)
    if slow:
        _take_machine_lock()


def _take_machine_lock() -> None:
    import fcntl

    if os.environ.get(LOCK_HELD_ENV) or not IS_ROOT:
        return
    fh = open(MACHINE_LOCK, "a+")  # noqa: SIM115  (held until the session ends)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"\nwaiting for {MACHINE_LOCK}: another test session is building pools here")
        fcntl.flock(fh, fcntl.LOCK_EX)
    _held.append(fh)
    os.environ[LOCK_HELD_ENV] = str(os.getpid())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    while _held:
        _held.pop().close()  # closing the file releases the lock
        os.environ.pop(LOCK_HELD_ENV, None)


def _unmount_dead_fuse() -> None:
    """A dead zfs-fuse leaves its FUSE mounts (datasets, /zfs-kstat) answering 'Transport
    endpoint is not connected'; called only when no daemon answers, so none is live."""
    for line in Path("/proc/mounts").read_text().splitlines():
        source, target, fstype = line.split()[:3]
        if fstype.startswith("fuse") and (fstype == "fuse.zfs" or source == "kstat"):
            sh("umount", "-l", target.replace("\\040", " "), check=False)


def _cleanup_stale_journals(base: Path) -> str:
    from poolbench.engine import cleanup
    from poolbench.system.runner import LocalRunner

    outcomes = [o for d in base.rglob("journals") for o in cleanup.cleanup(LocalRunner(), d)]
    left = [x for o in outcomes for x in o.left]
    return f"{sum(o.undone for o in outcomes)} item(s) of {len(outcomes)} journal(s)" + (
        f"; left alone: {left}" if left else ""
    )


def _segfaults() -> list[str]:
    out = sh("dmesg", check=False).stdout
    return [x.strip() for x in out.splitlines() if "zfs-fuse" in x and "segfault" in x]


def _new_segfaults(daemons: _Daemons) -> str:
    """The segfault lines dmesg gained since the last one reported (none for a kill)."""
    lines = _segfaults()
    new, daemons.segfaults_seen = lines[daemons.segfaults_seen :], len(lines)
    return "dmesg: " + " | ".join(new) if new else ""


def stored_rows(db: Path, workload: str) -> list[dict[str, Any]]:
    """One workload's stored measurements, their guards and warnings decoded from JSON."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    q = "SELECT * FROM measurements WHERE workload = ?"
    rows = [dict(r) for r in con.execute(q, (workload,))]
    for r in rows:
        r["guards"] = json.loads(r["guards"] or "{}")
        r["warnings"] = json.loads(r["warnings"] or "[]")
    return rows
