"""pgbench for real (PostgreSQL 15 from Debian): scale 1 for one second on a zfs-fuse mirror
and on btrfs, and a kill -9 of poolbench in the middle of a trial's pgbench, after which
`poolbench cleanup` stops the server and removes its cluster.

The device-bytes floor (workloads/pgbench.py `bytes_floor`): with one client every commit is
an fsync of the WAL, which no filesystem makes durable in less than one 4 KiB block (ZFS's
smallest intent-log block, btrfs's sector), and the CHECKPOINT closing the window writes at
least one data page, which ZFS writes as a whole record: per transaction at least
4096 + max(8192, recordsize) / transactions bytes. A mirror writes everything twice, so its
two members together must show twice that.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import poolbench, sh
from tests.plugins.machine import LoopFs

from poolbench.engine.pgbench_run import Pgbench, PgRequest
from poolbench.guards import devices, workingset
from poolbench.records.findings import Findings
from poolbench.system.runner import LocalRunner
from poolbench.workloads import pgbench
from poolbench.zfs.pools import destroy as destroy_pool

HAS_PG = (Path("/usr/lib/postgresql")).is_dir() and shutil.which("runuser") is not None
pytestmark = [
    pytest.mark.untimed,
    pytest.mark.skipif(not HAS_PG, reason="PostgreSQL is not installed (Debian: postgresql)"),
]
POOL = "pbpgz"


def _open_dir() -> Path:
    """A directory the postgres user can enter (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="pbtest-pg-", dir="/var/tmp"))
    d.chmod(0o755)
    return d


@pytest.fixture
def zfs_mirror(zfs_fuse: None) -> Iterator[Path]:
    base = _open_dir()
    loops: list[str] = []
    created = False
    sh("zpool", "destroy", "-f", POOL, check=False)  # a rerun after a zfs-fuse crash
    try:
        for i in range(2):
            img = base / f"d{i}.img"
            sh("truncate", "-s", "256M", str(img))
            loops.append(sh("losetup", "--find", "--show", str(img)).stdout.strip())
        mnt = base / "mnt"
        sh("zpool", "create", "-o", "ashift=12", "-m", str(mnt), POOL, "mirror", *loops)
        created = True
        sh("zfs", "set", "recordsize=8K", POOL)
        yield mnt
    finally:
        try:
            if created:
                destroy_pool(LocalRunner(), POOL)
        finally:
            for d in loops:
                sh("losetup", "--detach", d, check=False)
            shutil.rmtree(base, ignore_errors=True)


def _measure(mnt: Path, tmp: Path) -> tuple[float, int, int, dict[str, object], list[str]]:
    runner = LocalRunner()
    work = mnt / "pgwork"
    work.mkdir()
    req = PgRequest(work, devices.resolve(mnt, runner), workingset.choose(mnt, 16 << 20), 1, 1,
                    {"full_page_writes": "on"}, tmp / "journals")  # fmt: skip
    findings = Findings()
    op = Pgbench(runner).measure(pgbench.workload("pgbench-tpcb"), req, findings)
    assert not (work / "pgdata").exists() and not _postgres_on(str(work))
    pg = findings.to_json()["pgbench"]
    assert isinstance(pg, dict) and op.device_bytes is not None
    return op.value, op.ops, op.device_bytes, pg, op.warnings


def _postgres_on(path: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                argv = (p / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "postgres" in argv and path in argv:
                found.append(int(p.name))
    return found


def _check(tps: float, txns: int, written: int, pg: dict[str, object], copies: int,
           recordsize: int) -> None:  # fmt: skip
    assert tps > 0 and txns > 0 and pg["transactions"] == txns
    floor = copies * pgbench.bytes_floor(recordsize, txns, 1)
    assert written / txns >= floor, (written, txns, floor)
    assert pg["device_bytes_per_txn"] == round(written / txns, 1)
    # scale 1 (16 MB) on a machine with GBs of RAM: labelled warm, and said
    assert pg["scale"] == 1 and pg["cache"] == pg["cache"] | {"label": "warm"}  # type: ignore[operator]


def test_pgbench_on_a_zfs_fuse_mirror(zfs_mirror: Path, tmp_path: Path) -> None:
    # zfs-fuse (pool v23) has logbias: the database study keeps its levels there
    assert sh("zfs", "get", "-H", "-o", "value", "logbias", POOL).stdout.strip() == "latency"
    tps, txns, written, pg, warnings = _measure(zfs_mirror, tmp_path)
    _check(tps, txns, written, pg, copies=2, recordsize=8192)
    assert any(w.startswith("warm: the database") for w in warnings)


def test_pgbench_on_btrfs(make_loop_fs: object, tmp_path: Path) -> None:
    fs: LoopFs = make_loop_fs("384M", fs="btrfs")  # type: ignore[operator]
    fs.mountpoint.parent.chmod(0o755)
    tps, txns, written, pg, _w = _measure(fs.mountpoint, tmp_path)
    _check(tps, txns, written, pg, copies=1, recordsize=pgbench.PAGE)


STUDY = """
name = "pgkill"
replicates = 2
max_replicates = 2
[disks]
count = 0
[factors]
backend = ["directory"]
layout = ["{dir}"]
full_page_writes = ["off"]
[workloads]
names = ["pgbench-tpcb"]
size = "16M"
runtime = 60
"""


@pytest.mark.slow  # a PostgreSQL server started and killed
@pytest.mark.usefixtures("machine")  # starts PostgreSQL, kills it with poolbench
def test_kill_mid_trial_then_cleanup_stops_the_server(tmp_path: Path) -> None:
    base = _open_dir()
    try:
        study = tmp_path / "s.toml"
        study.write_text(STUDY.format(dir=base))
        db = tmp_path / "r.db"
        proc = subprocess.Popen(
            [sys.executable, "-m", "poolbench", "run", str(study), "--db", str(db)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not _timed_pgbench():
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
                time.sleep(0.1)
            proc.kill()
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
        servers = _postgres_on(str(base))
        assert servers, "the server must outlive a kill -9 (or this test proves nothing)"
        journals = list((db.parent / "journals").glob("pgbench-pid*.jsonl"))
        assert len(journals) == 1
        c = poolbench("cleanup", "--db", str(db))
        assert c.returncode == 0, c.stderr
        assert not _postgres_on(str(base))  # no server on our cluster is left
        assert not list(base.rglob("pgdata")) and not list(base.rglob("postmaster.pid"))
        assert not list((db.parent / "journals").glob("pgbench-pid*.jsonl"))
    finally:
        for pid in _postgres_on(str(base)):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


def _timed_pgbench() -> bool:
    """The trial's pgbench -T is running (the cluster is loaded, the window open)."""
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                argv = (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"pgbench") and b"-T" in argv:
                return True
    return False
