"""Studies survive a busy machine: `poolbench study parity` completes, every trial measured, while
a CPU hog (a busy loop) and an I/O hog (fio random read/write with O_DIRECT on a loop device of
its own) run beside them. The hog is this test's own, started and always stopped here; the
issue's failure it guards against was "cannot export: pool is busy" ending a whole study on a
loaded machine.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.conftest import poolbench

pytestmark = pytest.mark.untimed


@contextmanager
def _hog(tmp: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """A busy loop and fio hammering a 64 MiB loop device; all stopped and removed after."""
    img = tmp / "hog.img"
    with img.open("wb") as f:
        f.truncate(64 * 2**20)
    loop = subprocess.run(["losetup", "--find", "--show", str(img)],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        procs.append(subprocess.Popen(
            ["fio", "--name=hog", f"--filename={loop}", "--rw=randrw", "--bs=4k",
             "--direct=1", "--ioengine=psync", "--time_based", "--runtime=900",
             "--size=64M", "--output=/dev/null"],
        ))  # fmt: skip
        yield procs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        subprocess.run(["losetup", "--detach", loop], check=False)
        img.unlink(missing_ok=True)


def _leftovers(scratch: Path) -> list[str]:
    pools = subprocess.run(["zpool", "list", "-H", "-o", "name"], capture_output=True, text=True)
    left = [f"pool {n}" for n in pools.stdout.split() if re.fullmatch(r"pb[0-9a-f]+t\d+", n)]
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    left += [f"loop {line}" for line in loops.splitlines() if str(scratch) in line]
    left += [
        f"mount {m}" for m in Path("/proc/mounts").read_text().splitlines() if str(scratch) in m
    ]
    return left


def _measured(db: Path) -> tuple[int, int, int]:
    """(configurations, smallest replicate count of any configuration, failed trials)."""
    con = sqlite3.connect(db)
    try:
        per = con.execute(
            "SELECT config, count(DISTINCT replicate) FROM measurements GROUP BY config"
        ).fetchall()
        failed = con.execute("SELECT count(*) FROM failed_trials WHERE resolved=0").fetchone()[0]
    finally:
        con.close()
    return len(per), min((n for _, n in per), default=0), int(failed)


def test_parity_completes_beside_a_hog(zfs_fuse: None, tmp_path: Path) -> None:
    # The study only (the demo is the same engine at twice the length: ~6 min under this hog,
    # too long for the default suite).
    scratch = tmp_path / "scratch"
    with _hog(tmp_path) as procs:
        parity = poolbench(
            "study", "parity", "--disks", "4x192M", "--size", "16M", "--seed", "2",
            "--replicates", "2", "--max-replicates", "2",
            "--db", str(tmp_path / "parity.db"), "--scratch-dir", str(scratch), timeout=600,
        )  # fmt: skip
        assert [p.poll() for p in procs] == [None, None]
    assert parity.returncode == 0, parity.stderr
    assert _measured(tmp_path / "parity.db")[0] == 2  # raidz1 and raidz2 of 4 disks
    assert _measured(tmp_path / "parity.db")[1] == 2
    assert _measured(tmp_path / "parity.db")[2] == 0
    assert _leftovers(scratch) == []
