"""A real OpenZFS pool suspended on I/O errors (guest tier): recognised, torn down as far as
it can be within its bound, named with what releases it, and destroyed once its disk is back.

The pool's one disk is a scsi_debug disk, taken offline (`echo offline >
/sys/block/sdX/device/state`: every I/O then fails, as a disk that died or a cable pulled)
while a writer waits for its data to reach it. OpenZFS (failmode=wait) suspends the pool:
the writer sleeps in the kernel, `zpool status` says so. What it said is kept in
$OZVM_OUT/openzfs-suspended-status.txt: tests/test_suspended_pool.py's OPENZFS_SUSPENDED
is that text.

A disk whose backing store is merely full does not do this on OpenZFS: a loop device over a
sparse file on a full tmpfs, measured here, fails the writes with ENOSPC and the pool stays
ONLINE, counting write errors on the leaf and "data errors" (nothing waits).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolbench.system import watchdog
from poolbench.system.runner import LocalRunner
from poolbench.zfs import commands, health, suspended

pytestmark = pytest.mark.openzfs
NAME = "pbozsusp"
SCALE = 0.1
PSEUDO = Path("/sys/bus/pseudo/drivers/scsi_debug")


def sh(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)


def _debug_disk() -> str:
    """The kernel name of the disk scsi_debug made (sdX)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = sorted(PSEUDO.glob("adapter*/host*/target*/*/block/*"))
        if found and Path(f"/dev/{found[0].name}").exists():
            return found[0].name
        time.sleep(0.2)
    raise AssertionError("scsi_debug made no disk")


@pytest.fixture
def dying_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A 256 MiB scsi_debug disk (RAM); whatever happens, it is brought back, the pool
    cleared and destroyed, and the module removed."""
    monkeypatch.setenv(watchdog.SCALE_ENV, str(SCALE))
    r = sh("modprobe", "scsi_debug", "dev_size_mb=256", "num_tgts=1", "max_luns=1")
    assert r.returncode == 0, f"modprobe scsi_debug: {r.stderr}"
    name = _debug_disk()
    state = Path(f"/sys/block/{name}/device/state")
    try:
        yield name
    finally:
        with contextlib.suppress(OSError):
            state.write_text("running\n")
        if sh("zpool", "list", NAME).returncode == 0:
            sh("zpool", "clear", NAME, timeout=120)
            sh("zpool", "destroy", "-f", NAME, timeout=120)
        for _ in range(50):  # the module goes once nothing holds its disk
            if sh("modprobe", "-r", "scsi_debug").returncode == 0:
                break
            time.sleep(0.2)


def _mounts(name: str) -> list[suspended.Mount]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        f = line.split()
        sep = f.index("-")
        if f[sep + 2] == name or f[sep + 2].startswith(name + "/"):
            out.append(suspended.Mount(f[4], f[sep + 2]))
    return out


def test_a_suspended_pool_is_named_and_released_once_its_disk_is_back(dying_disk: str) -> None:
    disk = f"/dev/{dying_disk}"
    mnt = Path("/var/tmp") / f"{NAME}-mnt"
    r = sh("zpool", "create", "-f", "-o", "failmode=wait", "-o", "cachefile=none",
           "-O", "compression=off", "-m", str(mnt), NAME, disk)  # fmt: skip
    assert r.returncode == 0, r.stderr
    Path(f"/sys/block/{dying_disk}/device/state").write_text("offline\n")  # the disk dies
    writer = subprocess.Popen(["dd", "if=/dev/urandom", f"of={mnt}/f", "bs=1M", "count=32",
                               "conv=fsync"], stderr=subprocess.DEVNULL)  # fmt: skip
    runner = LocalRunner()
    deadline = time.monotonic() + 120
    found = health.probe(runner, NAME, commands.OPENZFS)
    while not found.suspended and time.monotonic() < deadline:
        time.sleep(0.5)
        found = health.probe(runner, NAME, commands.OPENZFS)
    status = sh("zpool", "status", NAME).stdout
    (Path(os.environ.get("OZVM_OUT", "/tmp")) / "openzfs-suspended-status.txt").write_text(status)
    print(f"zpool status of the suspended pool:\n{status}")
    assert found.suspended, status
    assert found.health == "SUSPENDED" and found.failmode == "wait"
    assert writer.poll() is None  # asleep in the pool
    assert f"pool {NAME} is suspended (failmode=wait)" in found.describe()

    # The teardown: every step bounded, then the pool named with the way out.
    t0 = time.monotonic()
    with pytest.raises(suspended.PoolStuck) as info:
        suspended.destroy(runner, NAME, [disk], commands.OPENZFS, _mounts(NAME))
    took = time.monotonic() - t0
    steps = (suspended.CLEAR_S, suspended.FORCE_S, suspended.FORCE_S, 4 * health.PROBE_S)
    graces = 3 * (watchdog.TERM_GRACE_S + watchdog.KILL_GRACE_S)
    assert took <= watchdog.scaled(sum(steps) + graces) + 10, took
    text = str(info.value)
    print(f"{took:.1f} s: {text}")
    assert f"Pool {NAME} (on {disk}) stopped answering and could not be destroyed" in text
    assert f"run `zpool clear {NAME}`, then `poolbench cleanup`" in text
    assert sh("zpool", "list", NAME).returncode == 0  # still there: only its I/O frees it

    # The disk comes back: `zpool clear` resumes the pool, which is then destroyed.
    Path(f"/sys/block/{dying_disk}/device/state").write_text("running\n")
    suspended.destroy(runner, NAME, [disk], commands.OPENZFS, _mounts(NAME))
    assert sh("zpool", "list", NAME).returncode != 0
    writer.wait(timeout=120)  # released with its pool
