"""A real study stopped the ways studies really end, at a seeded point of each phase.

Each case (tests/stop_campaign.py) starts a study in a process group of its own, waits for
its phase (pool creation, the read-back of the properties `zpool create` set, the pre-fill,
fio, the cold read's export and import, pgbench, a resilver, a trial's teardown; btrfs's
creation, fio and cold read) and stops it: SIGTERM to the process (kill, timeout), SIGTERM to
the process group (systemd), SIGHUP to the process group (a terminal's hangup) or SIGINT to
the process group (Ctrl-C). Then, without `poolbench cleanup`:

* the exit code is 128 + the signal's number, and poolbench said at once what it was doing;
* no pool, loop device, mount, disk cap, PostgreSQL server, fio, journal or scratch file of
  the study is left;
* the run is `interrupted`, with the signal's name;
* every measurement stored before the signal is still there;
* exactly the command printed on the way out finishes the run, with exactly the
  measurements the study's matrix still owed, the earlier ones untouched.

The default tier runs one case per phase, each way of stopping at least twice, a second
signal during some teardowns. POOLBENCH_STOP_CAMPAIGN=SEEDS runs the manual tier: every
phase with every way, for SEEDS seeds (results in docs/long-runs.md).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from tests.conftest import IS_ROOT, OwnDaemon, _unmount_dead_fuse, poolbench
from tests.stop_campaign import (
    KILL,
    PHASES,
    WAYS,
    Case,
    Stopped,
    _processes,
    open_base,
    rows,
    run_row,
)

from poolbench.system import throttle

HAS_PG = Path("/usr/lib/postgresql").is_dir() and shutil.which("runuser") is not None
pytestmark = pytest.mark.skipif(
    not IS_ROOT or bool(throttle.unavailable()), reason="needs root and the blkio throttle"
)
# A terminal's hangup must reach poolbench even when this suite runs under nohup (which
# it would inherit): a handler here makes each child start with the default.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda *_: None)

TERM, TERM_GROUP = "SIGTERM to the process", "SIGTERM to the process group"
HUP_GROUP, INT_GROUP = "SIGHUP to the process group", "SIGINT to the process group"
# (phase, way, a second signal during the teardown): one case per phase, each way at least
# twice, seeded points (seed 1)
DEFAULT = [
    ("pool creation", TERM, False),
    ("property read-back", HUP_GROUP, False),
    ("fill", INT_GROUP, False),
    ("fio", TERM_GROUP, True),
    ("cold read export", HUP_GROUP, False),
    ("cold read import", TERM, True),
    ("teardown", INT_GROUP, True),
    ("pgbench", TERM_GROUP, False),
    ("resilver", HUP_GROUP, False),
    ("btrfs fio", TERM, False),
    ("btrfs cold read", INT_GROUP, False),
]
SEEDS = int(os.environ.get("POOLBENCH_STOP_CAMPAIGN") or 0)
CAMPAIGN = [
    (phase, way, seed % 2 == 1, seed)
    for seed in range(2, 2 + SEEDS)
    for phase in PHASES
    for way in WAYS
]


def _needs(phase: str, request: pytest.FixtureRequest) -> None:
    study = PHASES[phase].study
    if study != "btrfs":
        request.getfixturevalue("zfs_fuse")
    if study == "database" and not HAS_PG:
        pytest.skip("PostgreSQL is not installed")


@pytest.mark.parametrize(("phase", "way", "second"), DEFAULT)
def test_a_stop_in_each_phase(
    phase: str, way: str, second: bool, request: pytest.FixtureRequest
) -> None:
    _needs(phase, request)
    with open_base() as base:
        _stop_check_resume(Case(base, PHASES[phase], WAYS[way], 1), second)


@pytest.mark.skipif(not SEEDS, reason="manual tier: POOLBENCH_STOP_CAMPAIGN=SEEDS")
@pytest.mark.parametrize(("phase", "way", "second", "seed"), CAMPAIGN)
def test_stop_campaign(
    phase: str, way: str, second: bool, seed: int, request: pytest.FixtureRequest
) -> None:
    _needs(phase, request)
    with open_base() as base:
        _stop_check_resume(Case(base, PHASES[phase], WAYS[way], seed), second)


def _stop_check_resume(case: Case, second: bool) -> None:
    try:
        stopped = case.stop(second)
        _check_stopped(case, stopped, second)
        _check_resumed(case, stopped)
    finally:
        if case.leftovers():  # a failed case removes what it left, for the next one
            case.cleanup()


def _check_stopped(case: Case, stopped: Stopped, second: bool) -> None:
    name = signal.Signals(case.way.signum).name
    err = stopped.stderr
    how = f"{case.phase.name} ({stopped.mode}), {case.way.name}: {err[-3000:]}"
    assert stopped.returncode == 128 + case.way.signum, how
    assert "Traceback" not in err, how
    # heard at once, before the teardown; at the end, how it ended
    assert re.search(rf"^poolbench: {name}: stopping ", err, re.M), how
    assert f"Interrupted ({name})." in err, how
    if second:  # ignored, said so, and the teardown still finished (no leftovers below)
        assert re.search(rf"^poolbench: {name} ignored: still ", err, re.M), how
    assert case.leftovers() == [], how
    assert run_row(case.db) == ("interrupted", name), how
    kept = rows(case.db)
    assert stopped.before.items() <= kept.items(), how  # nothing measured was lost


def _check_resumed(case: Case, stopped: Stopped) -> None:
    kept = rows(case.db)
    cells = case.cells()
    assert set(kept) < cells
    r = case.resume(stopped.stderr)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    done = rows(case.db)
    # exactly the cells the matrix owed, each once; the ones kept were not measured again
    assert set(done) == cells and len(done) == len(cells)
    assert kept.items() <= done.items()
    assert run_row(case.db) == ("finished", None)
    assert case.leftovers() == []


def test_a_crash_then_a_reboot_bring_nothing_back(own_zfs_fuse: OwnDaemon) -> None:
    """kill -9 in the second trial's fio, then what a reboot does: every process gone (the
    orphaned fio, the ZFS daemon: killed too), its FUSE mounts dead, the loop devices
    detached; the disk caps are left in place (stricter than a reboot, which drops them).
    The ZFS daemon starting again brings no pool back (it is in no cache file it reads);
    `poolbench cleanup` removes every scratch file and cap the journal recorded and marks
    the run interrupted, and the command it prints finishes the run."""
    with open_base() as base:
        case = Case(base, PHASES["fio"], KILL, 1)
        try:
            _crash_reboot_cleanup_resume(case, own_zfs_fuse)
        finally:
            if case.leftovers():
                case.cleanup()


def _crash_reboot_cleanup_resume(case: Case, daemon: OwnDaemon) -> None:
    stopped = case.stop()
    assert stopped.returncode == -signal.SIGKILL
    for pid, _command in _ours(case):
        os.kill(pid, signal.SIGKILL)  # the orphaned fio: a reboot ends every process
    os.kill(daemon.pid, signal.SIGKILL)
    _gone(daemon.pid)
    _unmount_dead_fuse()
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    for line in loops.splitlines():
        if str(case.scratch) in line:
            subprocess.run(["losetup", "--detach", line.split(":")[0]], check=True)
    daemon.restart()
    names = subprocess.run(["zpool", "list", "-H", "-o", "name"], capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    assert not [n for n in names if n.startswith("pb1")], names  # nothing came back
    c = poolbench("cleanup", "--db", str(case.db))
    assert c.returncode == 0, c.stdout + c.stderr
    assert "run 1 marked interrupted" in c.stdout, c.stdout
    assert case.leftovers() == [], c.stdout  # files, caps and the journal: all gone
    assert run_row(case.db)[0] == "interrupted"
    _check_resumed(case, Stopped(0, c.stdout, stopped.before, "live"))


def _ours(case: Case) -> list[tuple[int, str]]:
    return [(p, c) for p, c in _processes() if str(case.scratch) in c and p != os.getpid()]


def _gone(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.1)
    raise AssertionError(f"process {pid} did not end")
