"""A pool that stops answering in the middle of a real study (zfs-fuse), three ways:

- fio hangs in a pool whose disks stop taking writes (their backing files sit on a small
  ext4 that the test fills once the trial's pool is made), and stay so: the trial fails
  within the watchdog's bound, named with its pool and devices; the teardown gives up within
  its bound and names what is left and what releases it; the study stops (a teardown that
  left something); a resume is refused while the pool is stuck; once room is made, `poolbench
  cleanup` (and, where zfs-fuse still answers "pool is busy", a restart of the daemon, as the
  hint says) releases everything and `run --resume` measures exactly what is missing;
- the same, but the disks take writes again while the teardown waits on `zpool clear`: the
  pool resumes, is destroyed, and the study goes on (one failure is not three in a row);
- a zpool command hangs: the zfs-fuse daemon is stopped (SIGSTOP, by a wrapper, at the
  trial's `zpool export`) and continued only after poolbench gave up: ZFS itself not
  answering is named, the teardown ends within its bound, and after SIGCONT `cleanup` and
  `--resume` complete the run.

Every limit runs at POOLBENCH_TIME_LIMIT_SCALE=0.05 (docs/watchdog.md); each one printed is
checked against the scaled rule, and the time from the hang to poolbench's exit against the
sum of the limits it had to wait out, plus MARGIN_S. The zfs-fuse daemon must be this test
session's own: one test stops it, and a pool stuck in it is released by restarting it.

The first and the third are campaign tests (POOLBENCH_CAMPAIGN=1, docs/testing.md). The third,
after the daemon's SIGCONT, once met zfs-fuse's "pool is busy" in cleanup's destroy within
its scaled limits in a whole-suite run (and left the next test's destroy busy too): until
that is understood it runs in the campaign tier. The first: zfs-fuse's way out of
it varies from run to run (with room again the pool resumes, or stays "faulted in response
to IO failures" until the daemon is restarted), and it took 12 s to 90 s here; the other two
took 8 s and 18 s, and keep in the default tier a pool whose disks fail its writes, a failed
trial named with its pool, the teardown's bounded path, a ZFS that does not answer, cleanup
and a resume that measures exactly what is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest import poolbench
from tests.plugins.machine import LoopFs, MakeLoopFs
from tests.plugins.zfs_fuse import OwnDaemon
from tests.procs import processes_matching

from poolbench.system import watchdog
from poolbench.zfs import health, suspended

# Figures are outcomes and bounds on the watchdog's waits, not disk speeds.
pytestmark = pytest.mark.untimed

SCALE = 0.05
# What the bound leaves out: poolbench's own work between the hung commands (the probes that
# answered at once, the mount table, the journal, SQLite) on a loaded 2-core machine.
MARGIN_S = 10.0
MiB = 1 << 20
STUDY = """
name = "hang"
replicates = {replicates}
max_replicates = {replicates}

[disks]
count = 3
size = "128M"
source = "loop"

[factors]
backend = ["zfs"]
layout = ["raidz1"]

[workloads]
names = [{workloads}]
size = "16M"
"""
POOL = re.compile(r"pb1[0-9a-f]{4}t\d+")
# Room left on the disks' filesystem once trial 1's pool is mounted: what the trial writes
# before its fio (verify, workspace, job files; well under 1 MiB here) fits, the 16 MiB write
# (24 MiB on raidz1 of 3) does not. The fio runs too briefly to be caught in the act.
LEAVE = 4 * MiB


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment of every poolbench the test starts; the test computes its bounds
    under the same scale."""
    monkeypatch.setenv(watchdog.SCALE_ENV, str(SCALE))
    return {watchdog.SCALE_ENV: str(SCALE), "POOLBENCH_BUSY_SECONDS": "10"}


@dataclass
class Scene:
    tmp: Path
    disks_fs: LoopFs  # the ext4 the pools' loop disks live on
    env: dict[str, str]

    @property
    def db(self) -> Path:
        return self.tmp / "r.db"

    @property
    def scratch(self) -> Path:
        return self.disks_fs.mountpoint / "scratch"

    @property
    def filler(self) -> Path:
        return self.disks_fs.mountpoint / "filler"

    def study(self, replicates: int, workloads: str) -> Path:
        path = self.tmp / "study.toml"
        path.write_text(STUDY.format(replicates=replicates, workloads=workloads))
        return path

    def start(self, study: Path, path: str | None = None) -> subprocess.Popen[str]:
        env = dict(os.environ, **self.env)
        if path is not None:
            env["PATH"] = f"{path}:{env['PATH']}"
        argv = [sys.executable, "-m", "poolbench", "run", str(study), "--db", str(self.db),
                "--scratch-dir", str(self.scratch), "--seed", "11"]  # fmt: skip
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)  # fmt: skip

    def fill(self, leave: int = LEAVE) -> None:
        """Take the free blocks of the disks' filesystem but `leave`: the loop disks' sparse
        files can grow by that much more, then the pool's writes fail (as a disk that stops
        taking them)."""
        st = os.statvfs(self.disks_fs.mountpoint)
        size = st.f_bavail * st.f_frsize - leave
        subprocess.run(["fallocate", "-l", str(size), str(self.filler)], check=True)
        st = os.statvfs(self.disks_fs.mountpoint)
        assert st.f_bavail * st.f_frsize <= leave, "the disks' filesystem kept more room"

    def make_room(self) -> None:
        self.filler.unlink(missing_ok=True)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return poolbench(*args, "--db", str(self.db), env=self.env, timeout=300)

    def resume(self) -> subprocess.CompletedProcess[str]:
        return poolbench("run", "--resume", "1", "--db", str(self.db), "--scratch-dir",
                         str(self.scratch), env=self.env, timeout=300)  # fmt: skip

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        con = sqlite3.connect(self.db)
        try:
            return list(con.execute(sql))
        finally:
            con.close()

    def measured(self) -> list[tuple[object, ...]]:
        return sorted(self.rows("SELECT replicate, workload FROM measurements"))

    def pools(self) -> list[str]:
        """The pools of this test's run still imported (named pb1<token>t<trial>, a token
        per invocation)."""
        tokens = json.loads(str(self.rows("SELECT metadata FROM runs")[0][0]))["pool_tokens"]
        names = subprocess.run(["zpool", "list", "-H", "-o", "name"], capture_output=True,
                               text=True, timeout=30).stdout.split()  # fmt: skip
        return [n for n in names if POOL.fullmatch(n) and n[3:7] in tokens]

    def leftovers(self) -> list[str]:
        """Pools, loop devices, mounts, fio processes and files of this test still there."""
        left = [f"pool {n}" for n in self.pools()]
        loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
        left += [f"loop {x}" for x in loops.splitlines() if str(self.scratch) in x]
        mounts = Path("/proc/mounts").read_text()
        left += [f"mount {x}" for x in mounts.splitlines() if str(self.scratch) in x]
        left += [f"process {p}" for p in _processes(str(self.scratch))]
        if self.scratch.exists():
            left += [f"file {p}" for p in self.scratch.rglob("*")]
        return left


def _processes(text: str) -> list[str]:
    return [f"{pid} {argv[:120]}" for pid, argv in processes_matching(text)]


@pytest.fixture
def scene(
    own_zfs_fuse: OwnDaemon,
    make_loop_fs: MakeLoopFs,
    tmp_path: Path,
    env: dict[str, str],
) -> Iterator[Scene]:
    """The disks' filesystem (ext4 on a loop device, 96 MiB: trial 0's pool fits, the filler
    takes the rest) and, whatever the test ends in, room made and `poolbench cleanup` run,
    the daemon restarted if that is not enough: a pool left in zfs-fuse would keep it from
    answering the next test's pools (and go into its cache, to come back at its next start).
    The daemon is this session's own (a test stops it)."""
    s = Scene(tmp_path, make_loop_fs("96M"), env)
    try:
        yield s
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(own_zfs_fuse.pid, signal.SIGCONT)  # harmless if it runs
        s.make_room()
        _wait_gone(str(s.scratch))  # a process asleep in the pool ends with its I/O
        if s.db.exists():  # at the documented limits
            poolbench("cleanup", "--db", str(s.db), timeout=600)
            if s.pools():
                own_zfs_fuse.restart()
                poolbench("cleanup", "--db", str(s.db), timeout=600)
            assert s.pools() == [], "a pool of the test is still imported"


def _wait(what: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 120) -> float:
    """Poll until `what` holds (returns the time it did); fails if the study ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if what():
            return time.monotonic()
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the study ended ({proc.returncode}) first: {err[-3000:]}")
        time.sleep(0.02)
    raise AssertionError("the study never reached the step")


def _wait_gone(text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _processes(text) and time.monotonic() < deadline:
        time.sleep(0.1)


def _running(program: str, *words: str) -> bool:
    return any(
        p.split(" ", 2)[1].endswith(program) and all(w in p for w in words)
        for p in _processes(words[0])
    )


def _mounted(trial: str) -> Callable[[], bool]:
    """Trial `trial`'s pool is created and mounted (its fio is yet to come)."""

    def mounted() -> bool:
        for line in Path("/proc/mounts").read_text().splitlines():
            source, _, fstype = line.split()[:3]
            if fstype == "fuse.zfs" and POOL.fullmatch(source) and source.endswith(trial):
                return True
        return False

    return mounted


def _limits(text: str) -> list[tuple[str, float, str]]:
    """Each (command, limit in s, basis) that a message says ran out of its time limit."""
    found = re.findall(r"`([^`]+)` did not finish within its time limit of ([\d.,]+) s \(([^)]*)\)",
                       text)  # fmt: skip
    return [(cmd, float(secs.replace(",", "")), basis) for cmd, secs, basis in found]


def _graces() -> float:
    """What the Runner waits after a limit: SIGTERM's grace, then SIGKILL's."""
    return watchdog.scaled(watchdog.TERM_GRACE_S) + watchdog.scaled(watchdog.KILL_GRACE_S)


def _fio_limit() -> float:
    """The rule for the study's seq-write of 16M (one job, one file, end_fsync), scaled."""
    return watchdog.work_limit(moved=16 * MiB, files=1)


@pytest.mark.campaign  # 20 s to 90 s, and zfs-fuse's way out varies (module docstring)
def test_fio_hangs_in_a_pool_whose_disks_stay_full(scene: Scene, own_zfs_fuse: OwnDaemon) -> None:
    study = scene.study(2, '"seq-write"')
    proc = scene.start(study)
    try:
        _wait(_mounted("t0"), proc)
        scene.fill()
        hung = time.monotonic()
        out, err = proc.communicate(timeout=300)
        took = time.monotonic() - hung
    finally:
        if proc.poll() is None:
            proc.kill()
    # The study stops: the teardown could not destroy the pool (not the three-in-a-row rule:
    # one trial failed). Exit 1, the pool and what releases it named, the resume printed.
    assert proc.returncode == 1, err
    assert "Its teardown left these alone" in err and "trials all failed" not in err
    ((pool, reason),) = scene.rows("SELECT pool, reason FROM failed_trials WHERE resolved = 0")
    said = " ".join(err.split())
    assert suspended.release_hint(str(pool), "zfs-fuse") in said
    assert f"poolbench run --resume 1 --db {scene.db}" in said
    assert re.fullmatch(r"pb1[0-9a-f]{4}t0", str(pool))
    devices = _devices(scene, str(pool))
    assert str(reason).startswith(f"Pool {pool} (on {', '.join(devices)}) stopped answering: ")
    assert re.search(rf"pool {pool} is ONLINE with 0 read and [\d,]+ write errors "
                     r"\(failmode=wait\); zpool status says: ", str(reason))  # fmt: skip
    # fio's limit is the rule's; the teardown's clear ran out of its own, and so did
    # destroy -f, or (seen here too) destroy -f failed at once and export -f ran out of it
    ((fio, fio_s, _),) = _limits(str(reason))
    assert fio.startswith("fio ") and fio_s == pytest.approx(_fio_limit(), abs=0.05)
    waited = {cmd.split(" ")[1]: s for cmd, s, _ in _limits(err) if cmd.startswith("zpool")}
    assert waited.pop("clear") == watchdog.scaled(suspended.CLEAR_S), waited
    ((forced, forced_s),) = waited.items()
    assert forced in ("destroy", "export") and forced_s == watchdog.scaled(suspended.FORCE_S)
    bound = fio_s + watchdog.scaled(suspended.CLEAR_S) + forced_s + 3 * _graces()
    print(f"hung to exit: {took:.1f} s; bound {bound:.1f} s + {MARGIN_S} s")
    assert took <= bound + MARGIN_S, (took, bound)
    assert scene.measured() == []  # the study stopped: trial 1 never started

    # While the pool is stuck, a resume is refused before it makes anything (on zfs-fuse a
    # new pool's file system could wait for ever behind it).
    refused = scene.resume()
    assert refused.returncode == 6, refused.stderr  # EXIT_REFUSED
    assert "A zfs-fuse pool an earlier run left could not be destroyed" in refused.stderr
    assert f"Pool {pool} (on {', '.join(devices)})" in refused.stderr
    assert len(json.loads(str(scene.rows("SELECT metadata FROM runs")[0][0]))["pool_tokens"]) == 1

    # The disks take writes again: the stuck fio ends, cleanup releases the pool; where
    # zfs-fuse still holds it ("pool is busy", seen here), the hint's next step: stop the
    # daemon, start it again, clean up.
    scene.make_room()
    t0 = time.monotonic()
    _wait_gone(str(scene.scratch))
    cleaned = scene.cli("cleanup")
    print(f"room to the first cleanup's end: {time.monotonic() - t0:.1f} s")
    assert cleaned.returncode == 0, cleaned.stderr
    if scene.pools():
        print(f"after room, `poolbench cleanup` left the pool: {cleaned.stdout[:600]}")
        assert "pool is busy" in cleaned.stdout or "could not be destroyed" in cleaned.stdout
        t0 = time.monotonic()
        own_zfs_fuse.restart()
        print(f"the daemon's restart: {time.monotonic() - t0:.1f} s")
        cleaned = scene.cli("cleanup")
    assert cleaned.returncode == 0 and "left alone" not in cleaned.stdout, cleaned.stdout
    assert scene.leftovers() == []
    resumed = scene.resume()
    assert resumed.returncode == 0, resumed.stderr
    assert scene.measured() == [(0, "seq-write"), (1, "seq-write")]
    assert scene.rows("SELECT resolved FROM failed_trials") == [(1,)]
    assert _created(scene, 1) == {"t0", "t1"}  # the resume built exactly the missing trials
    assert scene.leftovers() == []


def test_disks_that_come_back_during_the_teardown(scene: Scene) -> None:
    study = scene.study(2, '"seq-write"')
    proc = scene.start(study)
    try:
        _wait(_mounted("t0"), proc)
        scene.fill()
        hung = time.monotonic()
        # room again while the teardown waits on `zpool clear` (a disk reconnected)
        back = _wait(lambda: _running("zpool", "clear", "pb1"), proc, timeout=60)
        scene.make_room()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    # The teardown finished, the trial failed with its reason, and the study went on: one
    # failure is not three in a row. Exit 4 (EXIT_TRIALS_FAILED).
    assert proc.returncode == 4, err
    assert "Study finished, 1 trial(s) failed" in err
    ((pool, index, reason),) = scene.rows("SELECT pool, trial_index, reason FROM failed_trials")
    assert index == 0
    devices = _devices(scene, str(pool))
    assert str(reason).startswith(f"Pool {pool} (on {', '.join(devices)}) stopped answering: ")
    ((fio, fio_s, _),) = _limits(str(reason))
    assert fio.startswith("fio ") and fio_s == pytest.approx(_fio_limit(), abs=0.05)
    # the teardown's `zpool clear` began within the fio's limit (and the probes after it)
    print(f"hung to `zpool clear`: {back - hung:.1f} s; fio's limit {fio_s} s")
    assert back - hung <= fio_s + _graces() + MARGIN_S, (back - hung, fio_s)
    assert scene.measured() == [(1, "seq-write")]  # the study went on to trial 1
    assert scene.leftovers() == []
    # (a resume measuring the failed trial: test_fio_hangs_in_a_pool_whose_disks_stay_full)


@pytest.mark.campaign  # its cleanup met zfs-fuse's 'pool is busy' once in a whole-suite run
def test_a_zpool_command_hangs_on_a_stopped_daemon(scene: Scene, own_zfs_fuse: OwnDaemon) -> None:
    study = scene.study(2, '"seq-write", "seq-read"')
    stopped = scene.tmp / "stopped"
    real = shutil.which("zpool")
    wrapper = scene.tmp / "bin" / "zpool"
    wrapper.parent.mkdir()
    # the cold read's `zpool export` of trial 1: the daemon stops, then the real zpool runs
    wrapper.write_text(
        "#!/bin/bash\n"
        f'if [ "$1" = export ] && [[ "$2" == pb1*t1 ]] && [ ! -e {stopped} ]; then\n'
        f"  touch {stopped}; kill -STOP {own_zfs_fuse.pid}\n"
        "fi\n"
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    proc = scene.start(study, str(wrapper.parent))
    try:
        hung = _wait(stopped.exists, proc)
        out, err = proc.communicate(timeout=300)
        took = time.monotonic() - hung
    finally:
        os.kill(own_zfs_fuse.pid, signal.SIGCONT)  # never left stopped: it hangs everything
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    ((pool, reason),) = scene.rows("SELECT pool, reason FROM failed_trials WHERE resolved = 0")
    devices = _devices(scene, str(pool))
    probe = watchdog.secs(watchdog.scaled(health.PROBE_S))
    assert str(reason).startswith(f"Pool {pool} (on {', '.join(devices)}) stopped answering: ")
    assert f"ZFS itself did not answer `zpool status {pool}` within {probe} s" in str(reason)
    # What waited: the export, the probe that found ZFS silent, the teardown's first
    # question (each limit as the rule gives it), each followed by the Runner's graces.
    ran_out = {cmd: (s, basis) for cmd, s, basis in _limits(err)}
    export_s, basis = ran_out.pop(f"zpool export {pool}")
    found = re.search(r"([\d,]+) MiB to write", basis)
    assert found, basis
    dirty = float(found.group(1).replace(",", ""))
    assert export_s == pytest.approx((watchdog.ADMIN_S + dirty / 20) * SCALE, abs=0.05)
    ((asked, (asked_s, _)),) = ran_out.items()
    assert asked.startswith("zpool list") and asked_s == watchdog.scaled(watchdog.QUICK_S)
    assert "could not be destroyed: ZFS itself did not answer" in err
    assert suspended.release_hint(str(pool), "zfs-fuse") in " ".join(err.split())
    bound = export_s + watchdog.scaled(health.PROBE_S) + asked_s + 3 * _graces()
    print(f"stopped to exit: {took:.1f} s; bound {bound:.1f} s + {MARGIN_S} s")
    assert took <= bound + MARGIN_S, (took, bound)
    assert scene.measured() == [(0, "seq-read"), (0, "seq-write"), (1, "seq-write")]

    cleaned = scene.cli("cleanup")
    assert cleaned.returncode == 0 and "left alone" not in cleaned.stdout, cleaned.stdout
    assert scene.leftovers() == []
    resumed = scene.resume()
    assert resumed.returncode == 0, resumed.stderr
    assert scene.measured() == [(0, "seq-read"), (0, "seq-write"), (1, "seq-read"),
                                (1, "seq-write")]  # fmt: skip
    assert scene.leftovers() == []


def _devices(scene: Scene, pool: str) -> list[str]:
    """The pool's members as its `zpool create` named them (the stored command log)."""
    for (argv,) in scene.rows("SELECT argv FROM commands ORDER BY id"):
        a = json.loads(str(argv))
        if a[:2] == ["zpool", "create"] and pool in a:
            return [x for x in a if x.startswith("/dev/")]
    raise AssertionError(f"no zpool create of {pool} stored")


def _created(scene: Scene, invocation: int) -> set[str]:
    """The trials (t1, t2, ...) whose pools an invocation of the run created."""
    meta = json.loads(str(scene.rows("SELECT metadata FROM runs")[0][0]))
    token = meta["pool_tokens"][invocation]
    assert meta["time_limit_scales"][invocation] == SCALE
    names = set()
    for (argv,) in scene.rows("SELECT argv FROM commands ORDER BY id"):
        a = json.loads(str(argv))
        if a[:2] == ["zpool", "create"]:
            names |= {x[len(f"pb1{token}") :] for x in a if x.startswith(f"pb1{token}t")}
    return names
