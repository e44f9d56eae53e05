"""A real study stopped the ways studies really end, at a seeded point of each phase.

Each stop (tests/stop_campaign.py) waits for a phase of a study running in a process group of
its own (pool creation, the read-back of the properties `zpool create` set, the pre-fill,
fio, the cold read's export and import, pgbench, a resilver, a trial's teardown; btrfs's
creation, fio and cold read) and stops it: SIGTERM to the process (kill, timeout), SIGTERM to
the process group (systemd), SIGHUP to the process group (a terminal's hangup) or SIGINT to
the process group (Ctrl-C). Then, without `poolbench cleanup`:

* the exit code is 128 + the signal's number, and poolbench said at once what it was doing;
* no pool, loop device, mount, disk cap, PostgreSQL server, fio, journal or scratch file of
  the study is left;
* the run is `interrupted`, with the signal's name;
* every measurement stored before the signal is still there, unchanged;
* exactly the command printed on the way out resumes the run.

The default tier is one study (two trials of a streaming write, a cold read and pgbench, on
capped zfs-fuse disks) stopped in each phase in turn, each time resumed by the command the
last stop printed, until a kill -9 and a simulated reboot end it; `poolbench cleanup`'s
printed command then finishes it, with exactly the measurements its matrix asks for. One
btrfs stop beside it. POOLBENCH_STOP_CAMPAIGN=SEEDS runs the manual tier: every phase (the
resilver and the demo too) with every way, a fresh study each, for SEEDS seeds (results in
docs/long-runs.md).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from tests.conftest import poolbench
from tests.plugins.zfs_fuse import OwnDaemon, _unmount_dead_fuse
from tests.stop_campaign import (
    KILL,
    PHASES,
    WAYS,
    Case,
    Stopped,
    _processes,
    open_base,
    resume_words,
    rows,
    run_row,
)

from poolbench.system import throttle

HAS_PG = Path("/usr/lib/postgresql").is_dir() and shutil.which("runuser") is not None
# Outcomes, not speeds (the caps only lengthen the windows a signal must land in): early in
# the machine's chain.
pytestmark = [
    pytest.mark.untimed,
    pytest.mark.skipif(bool(throttle.unavailable()), reason="needs the blkio throttle"),
]
# A terminal's hangup must reach poolbench even when this suite runs under nohup (which
# it would inherit): a handler here makes each child start with the default.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda *_: None)

TERM, TERM_GROUP = "SIGTERM to the process", "SIGTERM to the process group"
HUP_GROUP, INT_GROUP = "SIGHUP to the process group", "SIGINT to the process group"
# The default tier's study, stopped in each phase in turn: (phase, way, a second signal
# during the teardown). Each way twice. Trial by trial: 1 is stopped seven times (creation to
# its own teardown, each resume measuring only what it still owes), 2 in its write, then by
# kill -9 in its write; cleanup's printed command measures all of trial 2.
CHAIN = [
    ("pool creation", TERM, False),
    ("property read-back", HUP_GROUP, False),
    ("fill", INT_GROUP, False),
    ("cold read export", TERM_GROUP, False),
    ("cold read import", HUP_GROUP, True),
    ("pgbench", TERM, False),
    ("teardown", TERM_GROUP, False),
    ("fio", INT_GROUP, True),
]
# The chain's disks run at twice the campaign's cap: its fio windows are half as long.
CHAIN_WINDOWS = {"fill": 0.3, "fio": 0.2}
SEEDS = int(os.environ.get("POOLBENCH_STOP_CAMPAIGN") or 0)
CAMPAIGN = [
    (phase, way, (i + seed) % 2 == 1, seed)  # a second signal in every other case
    for seed in range(2, 2 + SEEDS)
    for phase in PHASES
    for i, way in enumerate(WAYS)
]


def test_one_study_stopped_in_every_phase_then_crashed(own_zfs_fuse: OwnDaemon) -> None:
    if not HAS_PG:
        pytest.skip("PostgreSQL is not installed")
    with open_base() as base:
        case = Case(base, dataclasses.replace(PHASES["pool creation"], study="chain"),
                    WAYS[TERM], 1)  # fmt: skip
        try:
            argv: list[str] | None = None  # the first run: the study file
            for phase, way, second in CHAIN:
                # each phase's first command in the process that resumes the run
                window = CHAIN_WINDOWS.get(phase, PHASES[phase].window)
                case.phase = dataclasses.replace(PHASES[phase], study="chain", nth=1,
                                                 window=window)  # fmt: skip
                case.way = WAYS[way]
                kept = rows(case.db)
                stopped = case.stop(second, argv)
                _check_stopped(case, stopped, second)
                assert kept.items() <= rows(case.db).items(), phase  # nothing redone
                argv = resume_words(stopped.stderr)
            case.phase = dataclasses.replace(PHASES["fio"], study="chain", nth=1, window=0.2)
            case.way = KILL
            _crash_reboot_cleanup_resume(case, own_zfs_fuse, argv)
        finally:
            if case.leftovers():  # a failed stop removes what it left, for the next test
                case.cleanup()


@pytest.mark.slow
@pytest.mark.usefixtures("machine")  # loop devices, btrfs, caps
def test_a_btrfs_study_stopped_in_its_cold_read() -> None:
    with open_base() as base:
        _stop_check_resume(Case(base, PHASES["btrfs cold read"], WAYS[HUP_GROUP], 1), False)


@pytest.mark.skipif(not SEEDS, reason="manual tier: POOLBENCH_STOP_CAMPAIGN=SEEDS")
@pytest.mark.slow
@pytest.mark.usefixtures("machine")  # zfs-fuse (requested below, by the phase's study) or btrfs
@pytest.mark.parametrize(("phase", "way", "second", "seed"), CAMPAIGN)
def test_stop_campaign(
    phase: str, way: str, second: bool, seed: int, request: pytest.FixtureRequest
) -> None:
    study = PHASES[phase].study
    if study != "btrfs":
        request.getfixturevalue("zfs_fuse")
    if study == "database" and not HAS_PG:
        pytest.skip("PostgreSQL is not installed")
    with open_base() as base:
        _stop_check_resume(Case(base, PHASES[phase], WAYS[way], seed), second)


def _stop_check_resume(case: Case, second: bool) -> None:
    try:
        stopped = case.stop(second)
        _check_stopped(case, stopped, second)
        _check_resumed(case, stopped.stderr)
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
    assert stopped.before.items() <= rows(case.db).items(), how  # nothing measured was lost
    assert "\x1b[" not in err + (case.base / "stdout").read_text(), how  # a log, not a screen


def _check_resumed(case: Case, printed: str) -> None:
    """The printed command, run as printed, measures exactly the cells the matrix still
    owes, once each, and leaves nothing behind; its per-trial lines are plain text."""
    kept = rows(case.db)
    least, most = case.cells()
    assert set(kept) < least
    r = case.resume(printed)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    done = rows(case.db)  # one row per cell (the store's unique key)
    assert least <= set(done) <= most, sorted(set(done) ^ least)
    if least == most:  # exactly the matrix: the missing cells, each once
        assert len(done) - len(kept) == len(least - set(kept))
    assert kept.items() <= done.items()  # the kept ones were not measured again
    assert run_row(case.db) == ("finished", None)
    assert case.leftovers() == []
    assert "\x1b[" not in r.stdout + r.stderr
    assert re.search(r"^trial \d+ of \d+: ", r.stderr, re.M), r.stderr[-2000:]


def _crash_reboot_cleanup_resume(case: Case, daemon: OwnDaemon, argv: list[str]) -> None:
    """kill -9 in a trial's write, then what a reboot does: every process gone (the
    orphaned fio, the ZFS daemon: killed too), its FUSE mounts dead, the loop devices
    detached; the disk caps are left in place (stricter than a reboot, which drops them).
    The ZFS daemon starting again brings no pool back (it is in no cache file it reads);
    `poolbench cleanup` removes every scratch file and cap the journal recorded and marks
    the run interrupted, and the command it prints finishes the run."""
    stopped = case.stop(False, argv)
    assert stopped.returncode == -signal.SIGKILL, stopped.stderr[-2000:]
    for pid, _command in _ours(case):
        os.kill(pid, signal.SIGKILL)  # the orphaned fio: a reboot ends every process
    os.kill(daemon.pid, signal.SIGKILL)
    _gone(daemon.pid)
    _unmount_dead_fuse()
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    for line in loops.splitlines():
        if str(case.scratch) in line:
            subprocess.run(["losetup", "--detach", line.split(":")[0]], check=True)
    _start_again(daemon)
    assert case.own_pools() == []  # nothing came back
    c = poolbench("cleanup", "--db", str(case.db))
    assert c.returncode == 0, c.stdout + c.stderr
    assert "run 1 marked interrupted" in c.stdout, c.stdout
    assert case.leftovers() == [], c.stdout  # files, caps and the journal: all gone
    assert run_row(case.db) == ("interrupted", None)
    assert stopped.before.items() <= rows(case.db).items()
    _check_resumed(case, c.stdout)


def _ours(case: Case) -> list[tuple[int, str]]:
    return [(p, c) for p, c in _processes() if str(case.scratch) in c and p != os.getpid()]


def _gone(pid: int, timeout: float = 30) -> None:
    """Every thread of `pid` ended (a killed daemon's leader is a zombie while its other
    threads still finish their FUSE requests, and a new daemon cannot start till then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
            states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks]
        except (FileNotFoundError, IndexError):
            return
        if all(x in ("Z", "X") for x in states):
            return
        time.sleep(0.1)
    raise AssertionError(f"process {pid} did not end")


def _start_again(daemon: OwnDaemon) -> None:
    """The ZFS daemon after the reboot; zfs-fuse refuses to start while the kernel still
    tears down the dead one's FUSE connection, so it is given a few tries."""
    for attempt in range(10):
        try:
            daemon.restart()
            return
        except subprocess.CalledProcessError:
            if attempt == 9:
                raise
            time.sleep(1)
