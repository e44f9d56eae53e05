"""Studies on real block devices go through the safety layer (loop devices stand in for disks:
the test creates them, and only them)."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import poolbench, sh
from tests.plugins.tiers import machine_fixture

from poolbench.errors import EXIT_REFUSED

pytestmark = pytest.mark.untimed


def _study(devices: list[str]) -> str:
    return f"""
name = "on-devices"
replicates = 2
max_replicates = 2
[disks]
source = "devices"
devices = {devices!r}
[factors]
backend = ["zfs"]
layout = ["raidz1"]
[workloads]
names = ["seq-write", "seq-read"]
size = "32M"
""".replace("'", '"')


def _sha(dev: str) -> str:
    h = hashlib.sha256()
    with open(dev, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@machine_fixture(slow=True)
def loops(tmp_path: Path) -> Iterator[list[str]]:
    made: list[str] = []
    try:
        for i in range(3):
            img = tmp_path / f"d{i}.img"
            sh("truncate", "-s", "200M", str(img))
            made.append(sh("losetup", "--find", "--show", str(img)).stdout.strip())
        yield made
    finally:
        for dev in made:
            sh("losetup", "--detach", dev, check=False)


def test_in_use_device_is_refused_and_untouched(loops: list[str], tmp_path: Path) -> None:
    sh("mkfs.ext4", "-q", "-F", loops[1])
    before = [_sha(d) for d in loops]
    study = tmp_path / "s.toml"
    study.write_text(_study(loops))
    p = poolbench(
        "run",
        str(study),
        "--db",
        str(tmp_path / "r.db"),
        "--scratch-dir",
        str(tmp_path / "scratch"),
    )
    assert p.returncode == EXIT_REFUSED  # in use: refused for safety, nothing touched
    assert loops[1] in p.stderr and "ext4" in p.stderr and "--destroy-data-on" in p.stderr
    assert [_sha(d) for d in loops] == before


def test_dry_run_of_a_study_on_free_devices_changes_nothing(
    loops: list[str], tmp_path: Path
) -> None:
    before = [_sha(d) for d in loops]
    study = tmp_path / "s.toml"
    study.write_text(_study(loops))
    p = poolbench(
        "run",
        str(study),
        "--dry-run",
        "--db",
        str(tmp_path / "r.db"),
        "--scratch-dir",
        str(tmp_path / "scratch"),
    )
    assert p.returncode == 0, p.stderr
    assert "zpool create" in p.stderr and loops[0] in p.stderr
    assert [_sha(d) for d in loops] == before


def test_override_with_yes_runs_and_is_recorded(
    zfs_fuse: None, loops: list[str], tmp_path: Path
) -> None:
    sh("mkfs.ext4", "-q", "-F", loops[2])
    study = tmp_path / "s.toml"
    study.write_text(_study(loops))
    db = tmp_path / "r.db"
    p = poolbench(
        "run",
        str(study),
        "--db",
        str(db),
        "--scratch-dir",
        str(tmp_path / "scratch"),
        "--destroy-data-on",
        loops[2],
        "--yes",
    )
    assert p.returncode == 0, p.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM measurements").fetchone()[0] == 4
    row = con.execute("SELECT device, reasons FROM device_overrides").fetchone()
    assert row[0] == loops[2] and "ext4" in row[1]
    pools = sh("zpool", "list", "-H", "-o", "name").stdout.split()
    assert not [n for n in pools if re.fullmatch(r"pb[0-9a-f]+t\d+", n)]
