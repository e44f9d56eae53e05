"""A pool that stopped answering: recognised from what ZFS says (zfs/health.py), named as the
trial's failure (engine/stalled.py), and torn down by a path that can finish
(zfs/suspended.py); the PostgreSQL data directory inside it is never removed file by file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from poolbench.backends.base import Availability, Pool, PoolSpec
from poolbench.backends.zfs import ZfsBackend
from poolbench.engine import stalled
from poolbench.safety.journal import Journal
from poolbench.system import pgserver, watchdog
from poolbench.system.runner import CommandResult, RecordingRunner
from poolbench.system.watchdog import CommandTimedOut, Limit
from poolbench.zfs import health, suspended

# `zpool status` of a zfs-fuse (pool v23) raidz1 whose members' backing files sat on a full
# tmpfs, while fio wrote to it (measured here; `zpool list` said ONLINE throughout).
FUSE_FAILING = """  pool: pbwdx
 state: ONLINE
status: One or more devices has experienced an error resulting in data
    corruption.  Applications may be affected.
action: Restore the file in question if possible.  Otherwise restore the
    entire pool from backup.
   see: http://www.sun.com/msg/ZFS-8000-8A
 scrub: none requested
config:

    NAME        STATE     READ WRITE CKSUM
    pbwdx       ONLINE       0  159K     0
      raidz1-0  ONLINE       0  212K     0
        loop0   ONLINE       0  170K     0
        loop1   ONLINE       0  180K     0
        loop2   ONLINE       0  180K     0

errors: 2 data errors, use '-v' for a list
"""
HEALTHY = FUSE_FAILING.replace("159K", "0").replace("212K", "0").replace("170K", "0")
# OpenZFS 2.3.2, a pool whose only disk was set offline under failmode=wait (captured in the
# guest tier: tests/guest/test_openzfs_suspended.py; the rows are tab-indented as printed)
OPENZFS_SUSPENDED = """  pool: pbozsusp
 state: SUSPENDED
status: One or more devices are faulted in response to IO failures.
action: Make sure the affected devices are connected, then run 'zpool clear'.
   see: https://openzfs.github.io/openzfs-docs/msg/ZFS-8000-HC
config:

\tNAME        STATE     READ WRITE CKSUM
\tpbozsusp    ONLINE       0     0     0
\t  sda       ONLINE       3     6     0

errors: 5 data errors, use '-v' for a list
"""
FAILMODE = "NAME   PROPERTY  VALUE     SOURCE\npbwdx  failmode  wait      default\n"


def _status(text: str, health_word: str = "ONLINE", failmode: str = FAILMODE) -> RecordingRunner:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[1:3] == ("list", "-H"):
            return CommandResult(argv, 0, health_word + "\n", "", 0.0)
        if argv[1] == "get":
            return CommandResult(argv, 0, failmode, "", 0.0)
        return CommandResult(argv, 0, text, "", 0.0)

    return RecordingRunner({"zpool": answer})


def test_zfs_fuse_write_errors_mean_the_pool_may_have_stopped_answering() -> None:
    found = health.probe(_status(FUSE_FAILING), "pbwdx")
    assert found.io_errors == (0, 159_000) and not found.suspended
    assert found.stopped_answering and found.failmode == "wait"
    assert "pool pbwdx is ONLINE with 0 read and 159,000 write errors (failmode=wait)" in (
        found.describe()
    )
    assert not health.probe(_status(HEALTHY), "pbwdx").stopped_answering


def test_openzfs_suspended_pool_is_recognised() -> None:
    runner = _status(OPENZFS_SUSPENDED, "SUSPENDED", "wait\n")  # `zpool get -Hp -o value`
    found = health.probe(runner, "pbozsusp", "openzfs")
    # the pool's own row counts nothing: the state and the status line say it
    assert found.suspended and found.io_errors == (0, 0) and found.health == "SUSPENDED"
    assert (
        "pool pbozsusp is suspended (failmode=wait); zpool status says: pool: pbozsusp | "
        "state: SUSPENDED | status: One or more devices are faulted in response to IO "
        "failures." in found.describe()
    )


def test_a_zfs_that_does_not_answer_is_named() -> None:
    def hang(argv: tuple[str, ...]) -> CommandResult:
        raise CommandTimedOut(argv, Limit(health.PROBE_S, "x"), health.PROBE_S)

    found = health.probe(RecordingRunner({"zpool": hang}), "pbwdx")
    assert not found.answered and found.stopped_answering
    assert "ZFS itself did not answer `zpool status pbwdx` within 15 s" in found.describe()


def test_a_timed_out_trial_is_failed_with_its_pool_named(tmp_path: Path) -> None:
    spec = PoolSpec("zfs", "raidz1", ("/dev/loop0", "/dev/loop1", "/dev/loop2"), "pbwdx",
                    tmp_path)  # fmt: skip
    pool = Pool(spec, tmp_path / "pbwdx", [])
    argv = ("fio", "--output-format=json+", "seq-write.0.fio")
    timed_out = CommandTimedOut(argv, Limit(188.0, "set by its caller"), 188.2)
    failing = _status(FUSE_FAILING)
    failure = stalled.explain(failing, _zfs_fuse(failing), pool, timed_out)
    assert isinstance(failure, stalled.PoolStoppedAnswering)
    text = str(failure)
    assert text.startswith("Pool pbwdx (on /dev/loop0, /dev/loop1, /dev/loop2) stopped answering")
    assert (
        "`fio --output-format=json+ seq-write.0.fio` did not finish within its time limit "
        "of 188 s" in text
    )
    assert "159,000 write errors" in text and "ZFS-8000-8A" in text
    # a healthy pool keeps the failure as it was
    healthy = _status(HEALTHY)
    assert stalled.explain(healthy, _zfs_fuse(healthy), pool, timed_out) is timed_out


def _zfs_fuse(runner: RecordingRunner) -> ZfsBackend:
    """The ZFS backend as found on a zfs-fuse machine (its probe's answer given, not run)."""
    backend = ZfsBackend(runner)
    backend._avail = Availability(True, version="0.7.0", dialect="zfs-fuse")
    return backend


def test_the_teardown_of_a_pool_that_hangs_finishes_and_names_what_releases_it(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    old = watchdog.set_announcer(said.append)
    ran: list[tuple[str, ...]] = []

    def zpool(argv: tuple[str, ...]) -> CommandResult:
        ran.append(argv)
        if argv[1] in ("clear", "destroy", "export"):  # each waits for the failing I/O
            raise CommandTimedOut(argv, Limit(30.0, "set by its caller"), 30.0)
        return _status(FUSE_FAILING).responses["zpool"](argv)  # type: ignore[operator,no-any-return]

    runner = RecordingRunner({"zpool": zpool})
    mounts = [suspended.Mount("/var/tmp/pb/pbwdx", "pbwdx"),
              suspended.Mount("/elsewhere", "tank")]  # fmt: skip
    try:
        with pytest.raises(suspended.PoolStuck) as info:
            suspended.destroy(runner, "pbwdx", ["/dev/loop0"], "zfs-fuse", mounts)
    finally:
        watchdog.set_announcer(old)
    assert [a[1] for a in ran if a[1] in ("clear", "destroy", "export")] == ["clear", "destroy"]
    assert ("zpool", "destroy", "-f", "pbwdx") in ran
    # only this pool's own mount, detached lazily (its FUSE connection is never aborted:
    # measured, that left zfs-fuse unable to serve any later mount)
    assert ("umount", "-l", "/var/tmp/pb/pbwdx") in runner.argvs
    assert ("umount", "-l", "/elsewhere") not in runner.argvs
    text = str(info.value)
    assert "Pool pbwdx (on /dev/loop0) stopped answering and could not be destroyed" in text
    assert text.endswith(suspended.release_hint("pbwdx", "zfs-fuse"))
    assert "Make its disks take writes again" in text and "stopping the zfs-fuse daemon" in text
    assert said[0].startswith("teardown: pool pbwdx is ONLINE with 0 read and 159,000 write")
    assert not any("abort" in s for s in said)
    assert suspended.release_hint("tank", "openzfs").startswith(
        "OpenZFS keeps a suspended pool until its I/O can resume"
    )


def test_a_pool_that_resumes_after_clear_is_destroyed_as_usual() -> None:
    state = {"cleared": False}

    def zpool(argv: tuple[str, ...]) -> CommandResult:
        if argv[1] == "clear":
            state["cleared"] = True
        text = HEALTHY if state["cleared"] else FUSE_FAILING
        return _status(text).responses["zpool"](argv)  # type: ignore[operator,no-any-return]

    runner = RecordingRunner({"zpool": zpool})
    old = watchdog.set_announcer(lambda _s: None)
    try:
        suspended.destroy(runner, "pbwdx", ["/dev/loop0"], "zfs-fuse", [])
    finally:
        watchdog.set_announcer(old)
    assert ("zpool", "destroy", "pbwdx") in runner.argvs
    assert not any("-f" in a for a in runner.argvs if a[1] == "destroy")


def test_a_data_directory_inside_the_pool_is_left_to_go_with_it(tmp_path: Path) -> None:
    datadir, sockdir = tmp_path / "pool" / "pgdata", tmp_path / "sock"
    (datadir / "base").mkdir(parents=True)
    sockdir.mkdir()
    journal = Journal(RecordingRunner())
    journal.postgres_intent(str(datadir), str(sockdir), str(pgserver.PG_LIB), keep_datadir=True)
    assert journal.teardown() == []
    assert (datadir / "base").is_dir() and not sockdir.exists()
    other = tmp_path / "bench" / "pgdata"
    other.mkdir(parents=True)
    journal.postgres_intent(str(other), str(sockdir), str(pgserver.PG_LIB))
    assert journal.teardown() == [] and not other.exists()  # a bench's own file system


def test_a_teardown_that_zfs_does_not_answer_names_what_releases_the_pool() -> None:
    """The daemon stopped (or the kernel module stuck): the teardown's first question times
    out, and the pool is left in the journal named with the way out, not a bare timeout."""
    state = {"answering": True}

    def zpool(argv: tuple[str, ...]) -> CommandResult:
        if not state["answering"]:
            raise CommandTimedOut(argv, Limit(3.0, "a read that answers at once"), 3.0)
        return CommandResult(argv, 0, "pbwdx\t1234\n", "", 0.0)

    journal = Journal(RecordingRunner({"zpool": zpool}))
    journal.pool_created("pbwdx", ["/dev/loop0", "/dev/loop1"])
    state["answering"] = False
    (left,) = journal.teardown()
    assert "Pool pbwdx (on /dev/loop0, /dev/loop1) could not be destroyed: ZFS itself did " in left
    assert "did not finish within its time limit of 3.0 s" in left
    assert left.endswith(suspended.release_hint("pbwdx", "zfs-fuse"))
    assert [e["kind"] for e in journal.entries] == ["pool"]  # kept for `poolbench cleanup`


def test_no_study_starts_while_a_zfs_fuse_pool_of_an_earlier_run_is_stuck(tmp_path: Path) -> None:
    """The cleanup before a study could not destroy an earlier run's zfs-fuse pool: the study
    is refused before it makes anything (on zfs-fuse the new pools' file systems could then
    wait for ever, where no time limit reaches)."""
    from poolbench.engine import cleanup
    from poolbench.errors import EXIT_REFUSED

    def zpool(argv: tuple[str, ...]) -> CommandResult:
        if argv[1] == "list" and "name,guid" in " ".join(argv):
            return CommandResult(argv, 0, "pbwdx\t1234\n", "", 0.0)
        if argv[1] in ("clear", "destroy", "export"):
            raise CommandTimedOut(argv, Limit(30.0, "set by its caller"), 30.0)
        return _status(FUSE_FAILING).responses["zpool"](argv)  # type: ignore[operator,no-any-return]

    runner = RecordingRunner({"zpool": zpool})
    dead = subprocess.Popen(["true"])
    dead.wait()
    path = tmp_path / f"run1-pid{dead.pid}-trial1.jsonl"
    Journal(runner, path).pool_created("pbwdx", ["/dev/loop0"])
    old = watchdog.set_announcer(lambda _s: None)
    try:
        (outcome,) = cleanup.cleanup(runner, tmp_path)
    finally:
        watchdog.set_announcer(old)
    assert len(outcome.stuck) == 1 and outcome.stuck[0].startswith("Pool pbwdx (on /dev/loop0)")
    refused = cleanup.refuse_stuck(outcome, "poolbench cleanup --db /x/r.db")
    assert refused.exit_code == EXIT_REFUSED
    assert str(refused).startswith("A zfs-fuse pool an earlier run left could not be destroyed")
    assert "check that 'poolbench cleanup --db /x/r.db' leaves nothing" in str(refused)
    assert path.exists()  # kept for the next cleanup
    # an OpenZFS pool left suspended does not keep other pools from answering: not refused
    path.unlink()
    Journal(runner, path).pool_created("pbwdx", ["/dev/loop0"], dialect="openzfs")
    old = watchdog.set_announcer(lambda _s: None)
    try:
        (outcome,) = cleanup.cleanup(runner, tmp_path)
    finally:
        watchdog.set_announcer(old)
    assert outcome.left and outcome.stuck == []
