"""A study that dies without its handlers running: kill -9 in the middle of `zpool create`
(the create, orphaned, finishes after poolbench is gone: `poolbench cleanup` waits for it),
of fio (its job processes, orphaned, go on writing into the pool: cleanup stops them before
it destroys the pool) and of `zpool destroy` (the destroy, orphaned: cleanup lets it end first);
and the zfs-fuse daemon dying in the middle of a study.

Afterwards `poolbench cleanup` leaves nothing the study created and marks the run
interrupted, every finished measurement is in the store, and the command cleanup printed
(`poolbench study parity --resume RUN ...`), run exactly as printed, completes the run with
exactly the missing measurements. A slow `zpool create`/`zpool destroy` is injected by a
wrapper on PATH so the kill lands inside the step on purpose, not by luck. The stop signals
(SIGINT, SIGTERM, SIGHUP) in every phase, and kill -9 followed by a reboot, are
tests/test_stop_campaign.py's.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import poolbench
from tests.plugins.zfs_fuse import OwnDaemon
from tests.procs import processes_matching

pytestmark = pytest.mark.untimed

# One configuration: its two replicates are two trials, enough for a finished one before the
# interrupted one (each trial builds and destroys a pool; more would reach no other step).
STUDY = """
name = "interrupt"
replicates = 2
max_replicates = 2

[disks]
count = 3
size = "256M"
source = "loop"

[factors]
backend = ["zfs"]
layout = ["raidz1"]
ashift = [12]

[workloads]
names = ["seq-write", "seq-read"]
size = "48M"
"""
EXPECTED = 1 * 2 * 2  # configurations × replicates × workloads


def _wrapper_dir(tmp: Path, slow: str) -> Path:
    """`zpool` that sleeps before `zpool <slow>` so a signal can land inside that step."""
    real = shutil.which("zpool")
    assert real
    d = tmp / "bin"
    d.mkdir()
    w = d / "zpool"
    w.write_text(f'#!/bin/bash\n[ "$1" = "{slow}" ] && sleep 1.5\nexec "{real}" "$@"\n')
    w.chmod(0o755)
    return d


def _procs_matching(text: str) -> list[int]:
    return [pid for pid, _argv in processes_matching(text)]


def _leftovers(scratch: Path) -> list[str]:
    # this study's pools: mounted (or to be mounted) under its scratch directory; another
    # session's pool, of another poolbench run 1, is not this test's
    pools = subprocess.run(["zfs", "list", "-H", "-d", "0", "-o", "name,mountpoint"],
                           capture_output=True, text=True).stdout  # fmt: skip
    left = [f"pool {line}" for line in pools.splitlines() if str(scratch) in line]
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    left += [f"loop {line}" for line in loops.splitlines() if str(scratch) in line]
    mounts = Path("/proc/mounts").read_text()
    left += [f"mount {line}" for line in mounts.splitlines() if str(scratch) in line]
    if scratch.exists():
        left += [f"file {p}" for p in scratch.rglob("*")]
    return left


# The same study as STUDY, started as the built-in study a user would run.
PARITY = ["study", "parity", "--disks", "3x256M", "--layouts", "raidz1:3", "--replicates",
          "2", "--max-replicates", "2", "--size", "48M", "--workloads",
          "seq-write,seq-read"]  # fmt: skip


def _start(args: list[str], db: Path, scratch: Path, env_path: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PATH=env_path)
    where = ["--db", str(db), "--scratch-dir", str(scratch), "--seed", "3"]
    return subprocess.Popen(
        [sys.executable, "-m", "poolbench", *args, *where],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def _wait_for(pred, proc: subprocess.Popen[str], timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        if proc.poll() is not None:  # ended before the step: say why at once
            out, err = proc.communicate()
            raise AssertionError(f"the study ended ({proc.returncode}) first: {err[-2000:]}")
        time.sleep(0.05)
    raise AssertionError("the study never reached the step to interrupt")


def _count(db: Path) -> int:
    # Read-only and only once poolbench made the store: connecting would create an empty file,
    # which poolbench rightly refuses as not its own. The tables appear after the preflight.
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM measurements").fetchone()[0])
    except sqlite3.OperationalError:  # created, tables not yet there
        return 0
    finally:
        conn.close()


@pytest.mark.parametrize("step", ["create", "fio", "destroy"])
def test_kill_nine_then_cleanup_and_its_printed_resume(
    zfs_fuse: None, tmp_path: Path, step: str
) -> None:
    db = tmp_path / "r.db"
    scratch = tmp_path / "scratch"
    path = os.environ["PATH"]
    if step != "fio":
        path = f"{_wrapper_dir(tmp_path, step)}:{path}"
    proc = _start(PARITY, db, scratch, path)
    orphans: list[int] = []
    try:
        if step == "fio":  # the second trial's: the first one's measurements are kept
            _wait_for(lambda: _count(db) >= 2 and bool(_fio_of(scratch)), proc)
        else:
            _wait_for(lambda: bool(_procs_matching(f"zpool {step}")), proc)
        before = _count(db)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=120)
        orphans = _fio_of(scratch) if step == "fio" else []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert step != "fio" or orphans, "fio must outlive the kill (or this proves nothing)"
    c = poolbench("cleanup", "--db", str(db))
    assert c.returncode == 0, c.stderr
    assert _leftovers(scratch) == [], c.stdout
    assert [p for p in orphans if _running(p)] == [], orphans  # stopped before the destroy
    assert "run 1 marked interrupted" in c.stdout, c.stdout  # its process is gone
    assert _count(db) >= before  # nothing finished was lost
    printed = re.findall(r"Finish it with: (.+)$", c.stdout, re.M)
    assert printed and printed[-1] == (
        f"poolbench study parity --resume 1 --db {db} --scratch-dir {scratch}"
    ), c.stdout
    r = poolbench(*shlex.split(printed[-1])[1:])  # exactly the printed command
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    con = sqlite3.connect(db)
    rows = con.execute("SELECT config, replicate, workload FROM measurements").fetchall()
    assert len(rows) == EXPECTED and len(set(rows)) == EXPECTED
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"
    assert _leftovers(scratch) == []


def _fio_of(scratch: Path) -> list[int]:
    """fio processes (the main one and its jobs) running a job file under `scratch`."""
    return [p for p in _procs_matching(str(scratch)) if _is_fio(p)]


def _is_fio(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "fio"
    except OSError:
        return False


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed fio, its files closed, waits for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_zfs_service_dies_mid_study_then_cleanup_and_resume(
    own_zfs_fuse: OwnDaemon, tmp_path: Path
) -> None:
    """zfs-fuse segfaulted in the middle of a study in one CI run. The study must stop with
    the trial's own failure and the way back, keep what it measured, and after the service
    is back, `cleanup` and `--resume` must finish the run as if nothing had happened."""
    study = tmp_path / "study.toml"
    study.write_text(STUDY)
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    proc = _start(["run", str(study)], db, scratch, os.environ["PATH"])
    try:
        _wait_for(lambda: _count(db) >= 2 and bool(_procs_matching("fio --output-format")), proc)
        before = _count(db)
        os.kill(own_zfs_fuse.pid, signal.SIGSEGV)  # what the CI run's daemon did by itself
        _out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    flat = " ".join(err.split())
    # The trial's own failure first, then what could not be removed, then the way back.
    assert re.search(r"Trial \d+ \(backend=zfs layout=\S+ ashift=12\) failed: ", flat), flat
    assert "teardown left these alone" in flat and "poolbench cleanup" in flat, flat
    # Both commands name this run's store, so they work as printed.
    squeezed = "".join(err.split())
    assert f"poolbenchcleanup--db{db}" in squeezed and f"run--resume1--db{db}" in squeezed, flat
    assert _count(db) >= before  # nothing finished was lost
    # The pool's loop devices stay: without its daemon the pool cannot be destroyed.
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert str(scratch) in loops

    own_zfs_fuse.restart()
    c = poolbench("cleanup", "--db", str(db))
    assert c.returncode == 0, c.stdout + c.stderr
    assert _leftovers(scratch) == [], c.stdout
    # No study file: the run carries its study.
    r = poolbench("run", "--resume", "1", "--db", str(db), "--scratch-dir", str(scratch))
    assert r.returncode == 0, r.stdout + r.stderr
    con = sqlite3.connect(db)
    rows = con.execute("SELECT config, replicate, workload FROM measurements").fetchall()
    assert len(rows) == EXPECTED and len(set(rows)) == EXPECTED
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"
    assert _leftovers(scratch) == []
