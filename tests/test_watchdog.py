"""Every child runs under a time limit (system/watchdog.py), and one that cannot be killed is
named and left behind instead of waited on for ever."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.plugins.tiers import machine_fixture

from poolbench.errors import UsageError
from poolbench.system import runner as runner_mod
from poolbench.system import watchdog
from poolbench.system.runner import LocalRunner, RecordingRunner
from poolbench.system.watchdog import CommandTimedOut, MissingLimit, limit_for
from poolbench.workloads import fiolimit

MiB = 1 << 20


# -- the limits ---------------------------------------------------------------------------
def test_work_programs_must_be_given_a_limit() -> None:
    for argv in (["fio", "job.fio"], ["tar", "-x", "-f", "t"],
                 ["runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pgbench",
                  "-T", "10"], ["zpool", "attach", "-w", "p", "raidz1-0", "/dev/sdx"]):  # fmt: skip
        with pytest.raises(MissingLimit):
            limit_for(argv, None)
        assert limit_for(argv, 42).seconds == 42
    # the recording runner of the fast tests keeps the same rule, so a forgotten limit fails
    # there, not on a user's machine
    with pytest.raises(MissingLimit):
        RecordingRunner().run(["fio", "x.fio"])
    assert limit_for(["fio", "--version"], None).seconds == watchdog.QUICK_S


def test_defaults_by_kind_of_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchdog, "dirty_bytes", lambda: 200 * MiB)
    assert limit_for(["zpool", "status", "-x"], None).seconds == watchdog.QUICK_S
    assert limit_for(["zfs", "get", "-Hp", "used", "p"], None).seconds == watchdog.QUICK_S
    assert limit_for(["losetup", "--detach", "/dev/loop3"], None).seconds == (
        watchdog.ADMIN_S + watchdog.PER_DEVICE_S
    )
    create = ["zpool", "create", "-m", "/mnt/p", "p", "raidz1", *[f"/dev/sd{c}" for c in "bcde"]]
    assert limit_for(create, None).seconds == watchdog.ADMIN_S + 4 * watchdog.PER_DEVICE_S
    # a flush may have to write what is dirty now, at FLUSH_RATE: 200 MiB at 20 MiB/s
    export = limit_for(["zpool", "export", "p"], None)
    assert export.seconds == pytest.approx(watchdog.ADMIN_S + 10.0)
    assert "200 MiB to write at 20 MiB/s" in export.basis


def test_dirty_bytes_reads_the_page_cache_and_openzfs(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nDirty:   2048 kB\nWriteback:  1024 kB\n")
    params = tmp_path / "zfs" / "parameters"
    params.mkdir(parents=True)
    (params / "zfs_dirty_data_max").write_text(f"{64 * MiB}\n")
    assert watchdog.dirty_bytes(meminfo, params) == 3 * MiB + 64 * MiB
    # no OpenZFS module: zfs-fuse's bound instead
    assert watchdog.dirty_bytes(meminfo, tmp_path / "none" / "parameters") == (
        3 * MiB + watchdog.ZFS_FUSE_DIRTY
    )


def test_fio_limits_follow_the_job() -> None:
    start, margin = watchdog.WORK_START_S, watchdog.WORK_MARGIN
    timed = "[global]\ntime_based=1\nruntime=10\nramp_time=2\n[j]\nfilename=f\n"
    assert fiolimit.limit_s(timed) == start + margin * 12
    sized = "[global]\nsize=64m\nloops=3\n[a]\nfilename=a\n[b]\nfilename=b\nnumjobs=2\n"
    # job a: 3 passes of 64 MiB; job b: 2 processes of 3 passes; at 1 MiB/s, 1 file/50 s
    a, b = 3 * 64 + 3 / 50, 2 * 3 * 64 + 6 / 50
    assert fiolimit.limit_s(sized) == pytest.approx(start + margin * (a + b))
    meta = "[global]\nnrfiles=1000\nfilesize=4k\n[m]\n"
    assert fiolimit.limit_s(meta) == pytest.approx(start + margin * (1000 * 4096 / MiB + 20))
    # a job given on the command line (the disk screen's)
    argv = ["--name=s", "--filename=/dev/sdb", "--time_based=1", "--runtime=30"]
    assert fiolimit.limit_s("", argv) == start + margin * 30


def test_a_replay_lasts_its_trace(tmp_path: Path) -> None:
    log = tmp_path / "trace.iolog"
    log.write_text("fio version 3 iolog\n0 f add\n0 f open\n"
                   f"0 f write 0 {MiB}\n90000000 f read 0 {MiB}\n90000000 f close\n")  # fmt: skip
    job = f"[global]\nread_iolog={log}\n[replay]\n"
    assert fiolimit.limit_s(job) == pytest.approx(
        watchdog.WORK_START_S + watchdog.WORK_MARGIN * (90 + 2)
    )
    fast = f"[global]\nread_iolog={log}\nreplay_no_stall=1\n[replay]\n"
    assert fiolimit.limit_s(fast) == pytest.approx(watchdog.WORK_START_S + 2 * 2)


# -- stopping at the limit ----------------------------------------------------------------
def test_a_command_past_its_limit_is_stopped_and_named() -> None:
    r = LocalRunner()
    t0 = time.monotonic()
    with pytest.raises(CommandTimedOut) as info:
        r.run(["sleep", "30"], timeout=0.5)
    took = time.monotonic() - t0
    assert took < 0.5 + 2, took  # sleep dies on SIGTERM at once
    assert "`sleep 30` did not finish within its time limit of 0.5 s (set by its caller)" in str(
        info.value
    )
    assert info.value.stuck == ()
    assert r.calls[-1].returncode is None  # logged as interrupted


def test_one_that_ignores_sigterm_is_killed_within_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watchdog, "TERM_GRACE_S", 0.5)
    t0 = time.monotonic()
    with pytest.raises(CommandTimedOut) as info:
        LocalRunner().run(["bash", "-c", "trap '' TERM; sleep 30 & wait; sleep 30"], timeout=0.3)
    assert time.monotonic() - t0 < 0.3 + 0.5 + 2
    assert info.value.stuck == ()


FREEZER = Path("/sys/fs/cgroup/freezer")


@machine_fixture(slow=False)
def freezer_cgroup() -> Iterator[Path]:
    """A v1 freezer cgroup: its frozen tasks sleep uninterruptibly (state D) and SIGKILL
    does not end them until they are thawed, as a process inside a suspended pool."""
    if not FREEZER.is_dir():
        pytest.skip("this kernel has no v1 freezer cgroup at /sys/fs/cgroup/freezer")
    group = FREEZER / f"pbtest-{os.getpid()}"
    group.mkdir()
    try:
        yield group
    finally:
        (group / "freezer.state").write_text("THAWED\n")
        for pid in (group / "cgroup.procs").read_text().split():
            with_suppress_kill(int(pid))
        deadline = time.monotonic() + 10
        while (group / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        for p in list(runner_mod._ABANDONED):  # reap what the test left behind
            p.wait(timeout=10)
            runner_mod._ABANDONED.remove(p)
        group.rmdir()


def with_suppress_kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_a_process_asleep_in_the_kernel_is_named_and_left_behind(
    freezer_cgroup: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watchdog, "TERM_GRACE_S", 0.5)
    monkeypatch.setattr(watchdog, "KILL_GRACE_S", 0.5)
    script = (
        f"echo $$ > {freezer_cgroup}/cgroup.procs; "
        f"echo FROZEN > {freezer_cgroup}/freezer.state; sleep 30"
    )
    t0 = time.monotonic()
    with pytest.raises(CommandTimedOut) as info:
        LocalRunner().run(["bash", "-c", script], timeout=1.0)
    took = time.monotonic() - t0
    # the limit, then SIGTERM's and SIGKILL's grace: never waits for the process itself
    assert took < 1.0 + 0.5 + 0.5 + 2, took
    stuck = info.value.stuck
    assert len(stuck) == 1 and stuck[0].state == "D", stuck
    assert stuck[0].argv.startswith("bash -c echo")
    assert Path(f"/proc/{stuck[0].pid}").exists()  # really still there
    text = str(info.value)
    assert f"pid {stuck[0].pid} (bash -c echo" in text and "uninterruptible sleep" in text
    assert "it could not be killed and was left behind" in text


def test_ctrl_c_during_a_stuck_command_says_what_it_leaves(
    freezer_cgroup: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watchdog, "TERM_GRACE_S", 0.3)
    monkeypatch.setattr(watchdog, "KILL_GRACE_S", 0.3)
    said: list[str] = []
    old = watchdog.set_announcer(said.append)
    script = (
        f"echo $$ > {freezer_cgroup}/cgroup.procs; "
        f"echo FROZEN > {freezer_cgroup}/freezer.state; sleep 30"
    )
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            LocalRunner().run(["bash", "-c", script], timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        watchdog.set_announcer(old)
    assert len(said) == 1 and said[0].startswith("left behind, it could not be killed: pid ")


def test_a_slow_teardown_step_says_what_it_does() -> None:
    said: list[str] = []
    old = watchdog.set_announcer(said.append)
    try:
        with watchdog.narrated("teardown: destroying pool pb1t0", after=0.1, every=0.2):
            time.sleep(0.45)
        with watchdog.narrated("a quick step", after=0.5):
            pass
    finally:
        watchdog.set_announcer(old)
    assert said and all(s.startswith("teardown: destroying pool pb1t0 (") for s in said)
    assert 2 <= len(said) <= 3, said


def test_steps_share_one_narrator_and_each_is_said_on_its_own_clock() -> None:
    said: list[str] = []
    old = watchdog.set_announcer(said.append)
    try:
        for _ in range(200):  # quick steps: never said, and no thread of their own each
            with watchdog.narrated("quick", after=5.0):
                pass
        threads = threading.active_count()
        with watchdog.narrated("outer", after=0.1, every=10.0):
            with watchdog.narrated("inner", after=0.3, every=10.0):
                assert threading.active_count() == threads
                time.sleep(0.5)
            time.sleep(0.1)
    finally:
        watchdog.set_announcer(old)
    assert [s.split(" (")[0] for s in said] == ["outer", "inner"], said


# -- POOLBENCH_TIME_LIMIT_SCALE ---------------------------------------------------------------
def test_the_scale_multiplies_each_allowance_never_a_designed_run_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watchdog, "dirty_bytes", lambda: 200 * MiB)
    monkeypatch.setenv(watchdog.SCALE_ENV, "0.1")
    assert watchdog.scale() == 0.1
    status = limit_for(["zpool", "status", "p"], None)
    assert status.seconds == pytest.approx(watchdog.QUICK_S * 0.1)
    assert status.basis == "a read that answers at once, × 0.1 (POOLBENCH_TIME_LIMIT_SCALE)"
    export = limit_for(["zpool", "export", "p"], None)  # 120 s + 200 MiB at 20 MiB/s
    assert export.seconds == pytest.approx((watchdog.ADMIN_S + 10.0) * 0.1)
    assert limit_for(["fio", "j.fio"], 42).seconds == 42  # a caller's own figure: as given
    # a 10 s run (+ 2 s ramp) keeps its 12 s; only what is allowed beyond it shrinks
    timed = "[global]\ntime_based=1\nruntime=10\nramp_time=2\n[j]\nfilename=f\n"
    assert fiolimit.limit_s(timed) == pytest.approx(12 + 0.1 * (60 + 12))
    # a size-bound write's floor-rate estimate is an allowance: all of it is scaled
    sized = "[global]\nsize=16m\n[w]\nfilename=w\nend_fsync=1\n"
    assert fiolimit.limit_s(sized) == pytest.approx(0.1 * (60 + 2 * (16 + 1 / 50)))
    assert watchdog.work_limit(10) == pytest.approx(10 + 0.1 * 70)  # pgbench -T 10
    assert watchdog.scaled(watchdog.TERM_GRACE_S) == pytest.approx(1.0)
    # unset: the documented figures
    monkeypatch.delenv(watchdog.SCALE_ENV)
    assert fiolimit.limit_s(timed) == watchdog.WORK_START_S + watchdog.WORK_MARGIN * 12
    assert watchdog.work_limit(10) == 80


@pytest.mark.parametrize("text", ["", "abc", "0", "-1", "0.001", "101", "nan", "inf", "1e9"])
def test_a_scale_that_is_not_a_number_in_range_is_refused(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(watchdog.SCALE_ENV, text)
    with pytest.raises(UsageError) as info:
        watchdog.scale()
    assert f"POOLBENCH_TIME_LIMIT_SCALE={text!r} is not a number from 0.01 to 100" in str(
        info.value
    )
    with pytest.raises(UsageError):  # every limit asks it: none is derived from a bad one
        limit_for(["zpool", "status"], None)


def test_the_cli_refuses_a_bad_scale_before_anything_runs(tmp_path: Path) -> None:
    from tests.conftest import poolbench

    r = poolbench("runs", "--db", str(tmp_path / "r.db"),
                  env={watchdog.SCALE_ENV: "fast"})  # fmt: skip
    assert r.returncode == 5, r.stderr  # EXIT_INPUT, as a bad POOLBENCH_DB
    assert r.stderr.startswith("error: POOLBENCH_TIME_LIMIT_SCALE='fast' is not a number")
    assert "Traceback" not in r.stderr and not (tmp_path / "r.db").exists()


def test_the_grace_after_sigterm_is_scaled_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(watchdog.SCALE_ENV, "0.05")  # SIGTERM's 10 s grace: 0.5 s
    t0 = time.monotonic()
    with pytest.raises(CommandTimedOut):
        LocalRunner().run(["bash", "-c", "trap '' TERM; sleep 30 & wait; sleep 30"], timeout=0.3)
    assert time.monotonic() - t0 < 0.3 + 0.5 + 1.5


def test_a_run_records_the_scale_of_each_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(watchdog.SCALE_ENV, raising=False)
    assert watchdog.time_limit_scales() is None  # the documented limits: nothing to say
    monkeypatch.setenv(watchdog.SCALE_ENV, "1")
    assert watchdog.time_limit_scales() is None
    monkeypatch.setenv(watchdog.SCALE_ENV, "0.1")
    assert watchdog.time_limit_scales() == [0.1]
    # a resume: the earlier invocations (two pool tokens, no list) ran at 1
    assert watchdog.time_limit_scales(None, 2) == [1.0, 1.0, 0.1]
    monkeypatch.setenv(watchdog.SCALE_ENV, "4")
    assert watchdog.time_limit_scales([0.1], 1) == [0.1, 4.0]
    monkeypatch.delenv(watchdog.SCALE_ENV)
    assert watchdog.time_limit_scales([0.1], 1) == [0.1, 1.0]
