"""Bad study input is refused with its own clear message before anything is created."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import loops_backed_by, poolbench, sh

from poolbench.errors import EXIT_INPUT, EXIT_UNSUPPORTED

pytestmark = pytest.mark.untimed


def _study(tmp: Path, body: str) -> Path:
    p = tmp / "study.toml"
    p.write_text('name = "bad"\n' + body)
    return p


CASES = {
    "raidz3-of-3": (
        '[disks]\ncount = 3\nsize = "128M"\n[factors]\nlayout = ["raidz3"]\n',
        "raidz3 of 3 disks is impossible",
    ),
    "recordsize-not-power-of-two": (
        '[disks]\ncount = 3\nsize = "128M"\n[factors]\nlayout = ["raidz1"]\nrecordsize = ["96K"]\n'
        '[workloads]\nsize = "32M"\n',  # fits: only the recordsize is wrong
        "96K",
    ),
    # a stack this machine lacks: exit 7 with the capability as `poolbench doctor` names it
    "unavailable-backend": (
        '[disks]\ncount = 4\nsize = "128M"\n[factors]\nbackend = ["md"]\nlayout = ["raid5"]\n',
        "The md backend is not available",
    ),
    "wider-than-the-disks": (
        '[disks]\ncount = 2\nsize = "128M"\n[factors]\nlayout = ["raidz1:4"]\n',
        "needs 4 disks but the study has 2",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_before_anything_is_created(zfs_fuse: None, tmp_path: Path, case: str) -> None:
    body, message = CASES[case]
    scratch = tmp_path / "scratch"
    p = poolbench("run", str(_study(tmp_path, body)), "--db", str(tmp_path / "r.db"),
                  "--scratch-dir", str(scratch))  # fmt: skip
    if case == "unavailable-backend":
        assert p.returncode == EXIT_UNSUPPORTED, p.stdout + p.stderr
        assert "`poolbench doctor` shows what this machine has: md RAID [md]." in p.stderr
    else:
        assert p.returncode == EXIT_INPUT, p.stdout + p.stderr
    assert message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert not scratch.exists() or not any(scratch.iterdir())
    assert loops_backed_by(scratch) == []


def test_a_disk_named_twice_is_refused(zfs_fuse: None, tmp_path: Path) -> None:
    img = tmp_path / "d.img"
    sh("truncate", "-s", "128M", str(img))
    dev = sh("losetup", "--find", "--show", str(img)).stdout.strip()
    try:
        body = (
            f'[disks]\nsource = "devices"\ndevices = ["{dev}", "{dev}"]\n'
            '[factors]\nlayout = ["mirror"]\n'
        )
        p = poolbench("run", str(_study(tmp_path, body)), "--db", str(tmp_path / "r.db"))
    finally:
        sh("losetup", "--detach", dev, check=False)
    assert p.returncode == EXIT_INPUT
    assert "twice" in p.stderr and dev in p.stderr
