"""A study on emulated disks, interrupted: Ctrl-C tears its emulators down with everything
else; a killed poolbench leaves them serving the pool (a disk must not vanish under a
mounted filesystem) until `poolbench cleanup` removes them: loop devices detached, mounts
gone, emulator processes gone, nothing left in the scratch directory. btrfs raid1 on two
256 MiB emulated disks; about 15 s per test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import HAS_FIO, poolbench

from poolbench.emulate import process as emulated

pytestmark = [
    pytest.mark.skipif(not HAS_FIO, reason="fio is not installed (Debian: fio)"),
    pytest.mark.slow,
    pytest.mark.usefixtures("machine"),
    pytest.mark.skipif(bool(emulated.unavailable()), reason=emulated.unavailable() or "-"),
]

STUDY = """name = "seek-interrupt"
replicates = 2
max_replicates = 2
[disks]
count = 2
size = "256M"
model = "hdd-7200"
[factors]
backend = ["btrfs"]
layout = ["raid1"]
[workloads]
names = ["rand-read-4k"]
size = "32M"
runtime = 20
"""


def _processes() -> dict[int, list[str]]:
    found = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                found[int(p.name)] = (
                    (p / "cmdline").read_bytes().decode(errors="replace").split("\0")
                )
            except OSError:
                continue
    return found


def _emulators(scratch: Path) -> list[int]:
    return [
        pid
        for pid, argv in _processes().items()
        if emulated.SERVER in argv and any(str(scratch) in a for a in argv)
    ]


def _running(pid: int) -> bool:
    """Alive, not a zombie (a daemon's parent is init, which may reap it later)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


def _leftovers(scratch: Path) -> list[str]:
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    left = [f"loop {x}" for x in loops.splitlines() if str(scratch) in x]
    left += [
        f"mount {x}" for x in Path("/proc/mounts").read_text().splitlines() if str(scratch) in x
    ]
    left += [f"emulator {pid}" for pid in _emulators(scratch)]
    if scratch.exists():
        left += [f"file {p}" for p in scratch.rglob("*")]
    return left


def _in_fio(scratch: Path, proc: subprocess.Popen[str]) -> None:
    """Wait until the trial's fio reads the pool on the emulated disks."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        timed = [a for a in _processes().values() if a[0].endswith("fio") and
                 any("/jobs/rand-read-4k." in x for x in a)]  # fmt: skip
        if timed and len(_emulators(scratch)) == 2:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the study ended ({proc.returncode}): {proc.communicate()[1]}")
        time.sleep(0.1)
    raise AssertionError("the study never reached its fio")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_study_leaves_no_emulator_behind(tmp_path: Path, sig: int) -> None:
    study, db, scratch = tmp_path / "s.toml", tmp_path / "r.db", tmp_path / "scratch"
    study.write_text(STUDY)
    proc = subprocess.Popen(
        [sys.executable, "-m", "poolbench", "run", str(study), "--db", str(db),
         "--scratch-dir", str(scratch)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _in_fio(scratch, proc)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        assert _leftovers(scratch) == []
        return
    assert proc.returncode == -signal.SIGKILL
    # Killed: the pool stays mounted on its loop devices, so its disks keep serving.
    servers = _emulators(scratch)
    assert len(servers) == 2
    assert sum("btrfs" in x for x in Path("/proc/mounts").read_text().splitlines()
               if str(scratch) in x) == 1  # fmt: skip
    c = poolbench("cleanup", "--db", str(db))
    assert c.returncode == 0, c.stderr
    assert _leftovers(scratch) == [], c.stdout
    assert not any(_running(pid) for pid in servers)
    os.sync()
