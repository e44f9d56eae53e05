"""Stops on real OpenZFS 2.3, on whole disks (guest tier): the host's zfs-fuse cannot show
what a boot of a real OpenZFS machine imports.

* A study on three of the guest's blank disks: while it runs, its pool's `cachefile` is the
  pool's own file and /etc/zfs/zpool.cache (what `zfs-import-cache.service` imports at boot)
  never names it, the cold read's import included; SIGTERM to the process group in the cold
  read's import leaves no pool and no label on the disks (without `poolbench cleanup`), the
  run is interrupted by SIGTERM, and the printed command finishes it.
* kill -9 in a write, then a power cut's state (the pool no longer imported, its labels on
  the disks): what the boot's `zpool import -c /etc/zfs/zpool.cache -aN`
  (zfs-import-cache.service) does brings nothing back. What zfs-import-scan.service does on
  a host without that file (`zpool import -aN -o cachefile=none`, every pool whose labels
  it finds) does bring it back; `poolbench cleanup` then destroys it, clears the labels,
  marks the run interrupted, and the command it prints finishes the run; a scan after
  cleanup finds nothing.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .studykit import ROOT, blank, leftovers, poolbench, scratch_disks, sh

pytestmark = pytest.mark.openzfs
SYSTEM_CACHE = Path("/etc/zfs/zpool.cache")
SMALL = 300 << 20  # the guest's four 300 MiB disks


def _study(disks: list[str], db: Path, scratch: Path) -> list[str]:
    return ["study", "parity", "--disks", ",".join(disks), "--layouts", "raidz1:3",
            "--replicates", "2", "--max-replicates", "2", "--size", "32M", "--no-screen",
            "--db", str(db), "--scratch-dir", str(scratch), "--seed", "1"]  # fmt: skip


def _start(args: list[str], env: dict[str, str], out: Path) -> subprocess.Popen[str]:
    with open(out, "w") as fh:
        return subprocess.Popen([sys.executable, "-m", "poolbench", *args], stdout=fh,
                                stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                                process_group=0)  # fmt: skip


def _our_pool() -> str | None:
    names = sh("zpool", "list", "-H", "-o", "name").stdout.split()
    return next((n for n in names if re.fullmatch(r"pb\d+[0-9a-f]{4}t\d+", n)), None)


def _in_system_cache(pool: str) -> bool:
    return SYSTEM_CACHE.exists() and pool.encode() in SYSTEM_CACHE.read_bytes()


def _running(pattern: str) -> bool:
    """A process whose whole command line matches (`ps` would cut it to 80 columns)."""
    return sh("pgrep", "-f", pattern).returncode == 0


def _devices(disks: list[str]) -> list[str]:
    """The disks and their partitions (a pool on a whole disk has its label on partition 1)."""
    parts = [sorted(str(p) for p in Path("/dev").glob(Path(d).name + "[0-9]*")) for d in disks]
    return [x for d, ps in zip(disks, parts, strict=True) for x in (d, *ps)]


def _labels(disks: list[str]) -> list[str]:
    """ZFS labels on the disks or their partitions (`zdb -l` reads them without a pool)."""
    return [dev for dev in _devices(disks) if "pool_guid" in sh("zdb", "-l", dev).stdout]


def _wait(pred, proc: subprocess.Popen[str], log: Path, timeout: float = 1200) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        if proc.poll() is not None:
            raise AssertionError(f"ended ({proc.returncode}) first: {log.read_text()[-3000:]}")
        time.sleep(0.1)
    raise AssertionError("never reached the step")


def _command(words: str) -> list[str]:
    argv = shlex.split(words)
    assert argv[0] == "poolbench", words
    return argv[1:]


def _finish(printed: str, db: Path) -> None:
    """The printed command, run as printed: the run finishes with its 2 × 2 cells."""
    line = re.findall(r"Finish it with: (.+)$", printed, re.M)
    assert line, printed[-3000:]
    r = poolbench(*_command(line[-1]))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    con = sqlite3.connect(db)
    cells = con.execute("SELECT DISTINCT config, replicate, workload FROM measurements").fetchall()
    assert len(cells) == 2 * 2 == con.execute("SELECT count(*) FROM measurements").fetchone()[0]
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"


def _hold_import(tmp: Path) -> dict[str, str]:
    """`zpool import` held 20 s after it imported (the cold read's), so that a signal lands
    right after it and the pool's cache file can be read meanwhile."""
    real = sh("sh", "-c", "command -v zpool").stdout.strip()
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    w = bin_dir / "zpool"
    w.write_text(f'#!/bin/bash\nif [ "$1" = "import" ]; then "{real}" "$@"; rc=$?; sleep 20; '
                 f'exit $rc; fi\nexec "{real}" "$@"\n')  # fmt: skip
    w.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_sigterm_in_the_cold_read_leaves_nothing_and_no_pool_enters_the_boot_cache(
    tmp_path: Path,
) -> None:
    disks = scratch_disks(3, SMALL)
    blank(disks)
    db, scratch, log = tmp_path / "r.db", tmp_path / "scratch", tmp_path / "out"
    proc = _start(_study(disks, db, scratch), _hold_import(tmp_path), log)
    try:
        _wait(lambda: _our_pool() is not None, proc, log)
        pool = _our_pool()
        assert pool is not None
        own = sh("zpool", "get", "-H", "-o", "value", "cachefile", pool).stdout.strip()
        assert own.startswith(str(scratch)) and own.endswith(f"{pool}.cache"), own
        assert not _in_system_cache(pool)
        # the cold read's import (held): the pool is back, in its own cache file again
        _wait(lambda: _running("zpool import"), proc, log)
        _wait(lambda: _our_pool() == pool, proc, log)
        again = sh("zpool", "get", "-H", "-o", "value", "cachefile", pool).stdout.strip()
        assert again == own and not _in_system_cache(pool)
        os.killpg(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = log.read_text()
    assert rc == 143, out[-3000:]
    assert "poolbench: SIGTERM: stopping" in out and "Interrupted (SIGTERM)." in out
    assert leftovers(scratch) == [] and _labels(disks) == [], out[-3000:]
    con = sqlite3.connect(db)
    assert con.execute("SELECT status, stopped_by FROM runs").fetchone() == (
        "interrupted",
        "SIGTERM",
    )
    con.close()
    _finish(out, db)
    assert leftovers(scratch) == [] and _labels(disks) == []


def test_a_power_cut_brings_nothing_back_at_boot_and_cleanup_finishes_it(tmp_path: Path) -> None:
    disks = scratch_disks(3, SMALL)
    blank(disks)
    db, scratch, log = tmp_path / "r.db", tmp_path / "scratch", tmp_path / "out"
    proc = _start(_study(disks, db, scratch), dict(os.environ), log)
    try:
        _wait(lambda: _running(f"fio .*{scratch}.*seq-write"), proc, log)
        pool = _our_pool()
        proc.kill()  # kill -9: no handler runs
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert pool is not None
    sh("pkill", "-9", "-f", str(scratch))  # the orphaned fio: a power cut ends every process
    time.sleep(1)
    # The power cut: the pool is no longer imported, its labels stay on the disks (export
    # -f writes what a crash would not, but neither the labels' pool nor any cache file is
    # changed by it: the boot below reads the same system cache file).
    assert sh("zpool", "export", "-f", pool).returncode == 0
    if SYSTEM_CACHE.exists():  # what zfs-import-cache.service runs at boot
        sh("zpool", "import", "-c", str(SYSTEM_CACHE), "-aN")
    assert _our_pool() is None  # nothing came back
    assert _labels(disks)  # yet the disks still hold it: cleanup's to remove
    # A host without /etc/zfs/zpool.cache runs zfs-import-scan.service at boot instead,
    # which imports every pool whose labels it finds (here: on these disks only), ours too:
    # no cache-file setting prevents that; the pool stays until cleanup destroys it.
    scanned = _scan_import(disks)
    assert _our_pool() == pool, scanned
    c = poolbench("cleanup", "--db", str(db))
    assert c.returncode == 0, c.stdout + c.stderr
    assert "run 1 marked interrupted" in c.stdout, c.stdout
    assert leftovers(scratch) == [] and _labels(disks) == [], c.stdout
    scanned = _scan_import(disks)  # the next boot, either way, finds nothing: no label is left
    assert _our_pool() is None, scanned
    _finish(c.stdout, db)
    assert leftovers(scratch) == [] and _labels(disks) == []


def _scan_import(disks: list[str]) -> str:
    """zfs-import-scan.service's `zpool import -aN -o cachefile=none`, over `disks` and their
    partitions only (`-d DISK` reads that device alone, not the partition holding the label)."""
    r = sh("zpool", "import", "-aN", "-o", "cachefile=none",
           *[w for d in _devices(disks) for w in ("-d", d)])  # fmt: skip
    return f"zpool import -aN: {r.returncode} {r.stdout} {r.stderr}"
