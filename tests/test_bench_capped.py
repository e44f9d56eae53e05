"""Ground truth: a loop device capped at a known rate, and poolbench must measure that rate.

The cap is a cgroup v1 blkio throttle set in the ROOT blkio cgroup, so it applies to every bio
that reaches the loop device, including page-cache writeback done by kernel threads (a limit
in a child cgroup would only catch the I/O of its own tasks). The image lives on a private
tmpfs so the host disk's own speed and contention cannot pull the device below its cap.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import needs_fio, poolbench, sh
from tests.plugins.tiers import machine_fixture

pytestmark = needs_fio

BLKIO = Path("/sys/fs/cgroup/blkio")
CAP_MIB_S = 40


def _throttle(majmin: str, bps: int) -> None:
    for kind in ("read_bps_device", "write_bps_device"):
        (BLKIO / f"blkio.throttle.{kind}").write_text(f"{majmin} {bps}\n")


@machine_fixture(slow=True)
def capped_ext4(tmp_path: Path) -> Iterator[Path]:
    if not (BLKIO / "blkio.throttle.write_bps_device").exists():
        pytest.skip("no cgroup v1 blkio controller at /sys/fs/cgroup/blkio")
    ram = tmp_path / "ram"
    mnt = tmp_path / "mnt"
    ram.mkdir()
    mnt.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=600m", "pbcap", str(ram))
    dev = majmin = ""
    try:
        sh("truncate", "-s", "512M", str(ram / "d.img"))
        dev = sh("losetup", "--find", "--show", "--direct-io=on", str(ram / "d.img")).stdout.strip()
        st = os.stat(dev)
        majmin = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)
        _throttle(majmin, CAP_MIB_S * 2**20)
        sh("mount", dev, str(mnt))
        yield mnt
    finally:
        sh("umount", str(mnt), check=False)
        if majmin:
            _throttle(majmin, 0)
        if dev:
            sh("losetup", "--detach", dev, check=False)
        # Lazily: a detached loop device can hold its backing file for a moment, and a plain
        # umount then fails with EBUSY and leaves the tmpfs mounted (seen in a CI rehearsal).
        subprocess.run(["umount", "-l", str(ram)], check=False)


def test_streaming_write_and_cold_read_land_on_the_cap(capped_ext4: Path, tmp_path: Path) -> None:
    p = poolbench(
        "bench",
        str(capped_ext4),
        "--size",
        "96M",
        "--workloads",
        "seq-write,seq-read,reread",
        "--min-runs",
        "3",
        "--max-runs",
        "4",
        "--json",
        "--db",
        str(tmp_path / "r.db"),
    )
    assert p.returncode == 0, p.stderr
    by = {r["workload"]: r for r in json.loads(p.stdout)["results"]}
    for name in ("seq-write", "seq-read"):
        mean = by[name]["mean"]
        assert CAP_MIB_S * 0.9 <= mean <= CAP_MIB_S * 1.1, (name, mean, by[name]["values"])
        assert CAP_MIB_S * 0.9 <= by[name]["device_mean"] <= CAP_MIB_S * 1.1
        assert not any("devices" in w for w in by[name]["warnings"])
    # The deliberately cached read is far above the cap, and the device check says why.
    assert by["reread"]["mean"] > 3 * CAP_MIB_S
    assert any("measures the cache" in w for w in by["reread"]["warnings"])
