"""The zfs-fuse daemon the ZFS tests use: started by this session if none answers, checked
before every test that needs it, brought back after a crash, stopped at the session's end
only if this session started it (someone else's daemon is never stopped)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.plugins.machine import _sh
from tests.plugins.tiers import machine_fixture


def zpool_answers() -> bool:
    """The daemon answers (within 30 s: one stopped or stuck in a pool never does)."""
    try:
        r = subprocess.run(["zpool", "list", "-H"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0


def _stop_daemon(pid: int, grace: float = 30) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return  # it died earlier: a crash that the zfs_fuse fixture recovered from
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state in ("Z", "X"):  # exited; a zombie only waits for its parent to reap it
            return
        time.sleep(0.2)


def _start_daemon(piddir: str, *options: str) -> int:
    pidfile = os.path.join(piddir, f"pid{time.monotonic_ns()}")
    _sh("zfs-fuse", "--pidfile", pidfile, *options)
    # The daemon writes its pid file after it forks; its socket may answer first.
    deadline = time.monotonic() + 30
    started: int | None = None
    while started is None or not zpool_answers():
        if started is None and os.path.exists(pidfile):
            text = Path(pidfile).read_text().strip()
            started = int(text) if text else None
        if time.monotonic() > deadline:
            pytest.fail("started zfs-fuse but it did not answer within 30 s")
        time.sleep(0.2)
    return started


def _segfaults() -> list[str]:
    out = _sh("dmesg", check=False).stdout
    return [x.strip() for x in out.splitlines() if "zfs-fuse" in x and "segfault" in x]


@dataclass
class _Daemons:
    piddir: str
    started: list[int]
    segfaults_seen: int = field(default_factory=lambda: len(_segfaults()))


@machine_fixture(slow=True, scope="session")
def _zfs_fuse_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Daemons]:
    """Daemons this test session started (stopped at its end); someone else's is never
    stopped."""
    if shutil.which("zfs-fuse") is None or shutil.which("zpool") is None:
        pytest.skip(_no_zfs_fuse())
    daemons = _Daemons(tempfile.mkdtemp(prefix="pbtest-zfsfuse-", dir="/var/tmp"), [])
    try:
        yield daemons
    finally:
        if daemons.started and not zpool_answers():
            # The last test's daemon died: bring it back once more, for cleanup's sake.
            _recover(daemons, tmp_path_factory.getbasetemp())
        for pid in daemons.started:
            _stop_daemon(pid)
        if daemons.started and not zpool_answers():
            _unmount_dead_fuse()  # the daemon leaves /zfs-kstat behind even on SIGTERM
        shutil.rmtree(daemons.piddir, ignore_errors=True)


def _no_zfs_fuse() -> str:
    """Why the zfs-fuse tests skip: on a host with OpenZFS, scripts/setup.sh leaves zfs-fuse
    out on purpose (zfsutils-linux conflicts with it), and its pools are never the tests'."""
    from poolbench.system.runner import LocalRunner
    from poolbench.zfs import host

    if host.probe(LocalRunner()).openzfs:
        return (
            "zfs-fuse is not installed: this host's ZFS is OpenZFS, which scripts/setup.sh "
            "leaves alone (Debian's zfsutils-linux conflicts with zfs-fuse) and the suite "
            "never uses; OpenZFS is tested in the guest tier (vm/run-openzfs-tier.sh)"
        )
    return "zfs-fuse is not installed (Debian: zfs-fuse; scripts/setup.sh installs it)"


def _recover(daemons: _Daemons, base: Path) -> str:
    """What a user does after a zfs-fuse crash: its dead FUSE mounts go, the daemon comes
    back, and `poolbench cleanup` imports, destroys and detaches what the trials left."""
    _unmount_dead_fuse()
    daemons.started.append(_start_daemon(daemons.piddir))
    return _cleanup_stale_journals(base)


@machine_fixture(slow=True)
def zfs_fuse(_zfs_fuse_session: _Daemons, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A running zfs-fuse daemon. Checked before every test that needs it: zfs-fuse (a
    user-space port of pool v23) segfaults now and then (one CI run: a bad read inside libc, in the
    middle of the width study), and one crash must cost at most one test attempt, not every
    ZFS test after it, nor the pools and loop devices of the test it killed."""
    if zpool_answers():
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


@dataclass
class OwnDaemon:
    """The session's own zfs-fuse daemon, lent to one test that stops, kills or hangs it."""

    pid: int
    _session: _Daemons

    def restart(self, *options: str) -> None:
        """What a user does when the daemon died or holds what nothing else releases: stop
        it (SIGCONT first, if it was stopped; SIGTERM, then SIGKILL after 30 s), detach its
        dead FUSE mounts, start it again (it imports its cached pools), with `options`
        (zfs-fuse's command line; none: its defaults). `pid` follows."""
        if _alive(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)
            _stop_daemon(self.pid, grace=10)  # one holding a stuck pool never exits by itself
            if _alive(self.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                _wait_exit(self.pid, 10)
        _unmount_dead_fuse()
        # A daemon killed while it waited in its own pool's I/O goes only once its mounts
        # are detached; a new one started before that finds its socket taken and exits 1.
        _wait_exit(self.pid, 30)
        self.pid = _start_daemon(self._session.piddir, *options)
        self._session.started.append(self.pid)

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """No zfs-fuse running for the length of the block, for a test of a command that
        starts its own daemon; the session's is started again afterwards (`pid` follows)."""
        _stop_daemon(self.pid)
        _wait_exit(self.pid, 30)
        _unmount_dead_fuse()  # its /zfs-kstat stays mounted, dead, after a SIGTERM
        try:
            yield
        finally:
            if not zpool_answers():
                _unmount_dead_fuse()
                self.pid = _start_daemon(self._session.piddir)
                self._session.started.append(self.pid)


def _alive(pid: int) -> bool:
    """Running or stopped (not gone, not a zombie waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _wait_exit(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)


@machine_fixture(slow=True)
def own_zfs_fuse(zfs_fuse: None, _zfs_fuse_session: _Daemons) -> Iterator[OwnDaemon]:
    """The zfs-fuse daemon this test session started, for a test that stops or kills it; a
    daemon someone else started is never touched, so such a test is skipped then. Whatever
    the test did, the session's daemon is given back answering: continued if it was left
    stopped, restarted if it died or does not answer."""
    started = _zfs_fuse_session.started
    if not started or not _alive(started[-1]):
        pytest.skip("the running zfs-fuse was not started by this test session")
    own = OwnDaemon(started[-1], _zfs_fuse_session)
    try:
        yield own
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(own.pid, signal.SIGCONT)  # harmless if it runs
        if not zpool_answers():
            own.restart()


# zfs-fuse reading its devices as a disk is read: through no cache of the host's (its block
# devices opened with O_DIRECT, else the loop devices' page cache serves a block read twice)
# and no vdev cache (pool v23 reads 64K for every read under 16K and keeps 10 MB per device;
# OpenZFS 2.x has none). A measurement of the disks' own speed needs both off.
UNCACHED = ("--disable-block-cache", "--vdev-cache-size", "0")


@machine_fixture(slow=True)
def zfs_fuse_uncached(own_zfs_fuse: OwnDaemon) -> Iterator[OwnDaemon]:
    """The session's zfs-fuse daemon restarted with `UNCACHED` for one test, and restarted
    with its defaults after it (a restart is about a second each way)."""
    own_zfs_fuse.restart(*UNCACHED)
    try:
        yield own_zfs_fuse
    finally:
        own_zfs_fuse.restart()


class ZfsFuseCrashed(UserWarning):
    """Shown in the warnings summary, so a recovered crash is never silent."""


def _unmount_dead_fuse() -> None:
    """A dead zfs-fuse leaves its FUSE mounts (datasets, /zfs-kstat) answering 'Transport
    endpoint is not connected'; called only when no daemon answers, so none is live."""
    for line in Path("/proc/mounts").read_text().splitlines():
        source, target, fstype = line.split()[:3]
        if fstype.startswith("fuse") and (fstype == "fuse.zfs" or source == "kstat"):
            _sh("umount", "-l", target.replace("\\040", " "), check=False)


def _cleanup_stale_journals(base: Path) -> str:
    from poolbench.engine import cleanup
    from poolbench.system.runner import LocalRunner

    outcomes = [o for d in base.rglob("journals") for o in cleanup.cleanup(LocalRunner(), d)]
    left = [x for o in outcomes for x in o.left]
    return f"{sum(o.undone for o in outcomes)} item(s) of {len(outcomes)} journal(s)" + (
        f"; left alone: {left}" if left else ""
    )


def _new_segfaults(daemons: _Daemons) -> str:
    """The segfault lines dmesg gained since the last one reported (none for a kill)."""
    lines = _segfaults()
    new, daemons.segfaults_seen = lines[daemons.segfaults_seen :], len(lines)
    return "dmesg: " + " | ".join(new) if new else ""
