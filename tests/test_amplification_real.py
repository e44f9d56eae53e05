"""Write amplification on real pools and real fio (sparse-file loop devices): what the members
absorbed against what the layout must write (guards/amplification).

The modelled figures are computed here by hand; the measured ones include metadata, which on
these 32–64 MiB writes adds 1–12% (docs/methodology.md, "Write amplification"), so a measured
figure is checked against the model from below exactly and from above within that envelope.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import needs_fio, poolbench, sh
from tests.plugins.tiers import machine_fixture

from poolbench.engine.device_window import DeviceWindow
from poolbench.guards import devices, geometry
from poolbench.guards.amplification import EXCESS_TOLERANCE
from poolbench.system.runner import LocalRunner
from poolbench.workloads import fio
from poolbench.zfs.pools import destroy as destroy_pool

pytestmark = needs_fio

K = 1024
M = K * K


def _loops(tmp_path: Path, n: int, size: str) -> list[str]:
    loops: list[str] = []
    for i in range(n):
        img = tmp_path / f"d{i}.img"
        sh("truncate", "-s", size, str(img))
        loops.append(sh("losetup", "--find", "--show", str(img)).stdout.strip())
    return loops


@pytest.fixture
def zpool(zfs_fuse: None, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    kind, width = request.param
    loops: list[str] = []
    created = False
    mnt = tmp_path / "mnt"
    # A zfs-fuse that died under an earlier attempt (the rerun's condition) brings its pools
    # back when it restarts: this test's own name, so destroying it harms no one else's.
    sh("zpool", "destroy", "-f", "pbampz", check=False)
    try:
        loops = _loops(tmp_path, width, "256M")
        sh("zpool", "create", "-o", "ashift=12", "-m", str(mnt), "pbampz", kind, *loops)
        created = True
        sh("zfs", "set", "recordsize=128K", "pbampz")
        yield mnt
    finally:
        try:
            if created:
                destroy_pool(LocalRunner(), "pbampz")
        finally:  # the loop devices go even when the pool could not be destroyed
            for d in loops:
                sh("losetup", "--detach", d, check=False)


# (layout, width) → modelled amplification, by hand: a 128K record at ashift 12 is 32 sectors;
# raidz adds p·ceil(32/(w−p)) parity sectors and pads to a multiple of p+1.
ZFS_CASES = [
    (("mirror", 3), 3.0),  # every record on three sides
    (("raidz1", 4), 44 / 32),  # 32 + 11 = 43 → 44 sectors: 1.375
    (("raidz2", 6), 48 / 32),  # 32 + 16 = 48: 1.5
]


@pytest.mark.parametrize(("zpool", "modelled"), ZFS_CASES, indirect=["zpool"],
                         ids=["mirror3", "raidz1x4", "raidz2x6"])  # fmt: skip
def test_bench_reports_zfs_write_amplification_against_the_layout(
    zpool: Path, modelled: float, tmp_path: Path
) -> None:
    p = poolbench("bench", str(zpool), "--size", "64M", "--workloads", "seq-write",
                  "--min-runs", "3", "--max-runs", "3", "--json", "--db",
                  str(tmp_path / "r.db"))  # fmt: skip
    assert p.returncode == 0, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    assert r["write_amplification_model"] == pytest.approx(modelled)
    each = r["write_amplification_values"]
    assert len(each) == 3 and r["write_amplification"] == pytest.approx(sum(each) / 3, abs=1e-3)
    print(f"measured write amplification {each}, modelled {modelled:.4f}")
    # Never below the model (data only), in any replicate.
    assert all(modelled * 0.999 <= got for got in each)
    # Above it by metadata alone: within 10% for raidz, 12% for a mirror (each metadata
    # block, itself in 2-3 ditto copies, on every side). Idle, raidz2 of 6 measures 1.553-
    # 1.583 (3.5-5.5% over) whether fio writes at full speed or at 2 MiB/s; raidz1 of 4
    # measured 1.474 (7.2% over) beside the suite and the guest. But one CI run's mean of
    # two replicates was 1.919 (28% over, the product's own excess note), a window whose
    # extra bytes no layout explains (another writer on a loaded machine): so the least
    # disturbed replicate is held to the envelope. A wrong model misses in every replicate,
    # and by far more: without parity 1.0 instead of 1.375, a mirror's copies 1 instead of 3.
    assert min(each) <= modelled * (1.12 if modelled == 3.0 else 1.10)
    assert not any("did not reach the disks" in w for w in r["warnings"])
    # The product notes an excess exactly when a replicate passed its tolerance (+25%).
    noted = any(w.startswith("note:") for w in r["warnings"])
    assert noted == (max(each) > modelled * (1 + EXCESS_TOLERANCE)), r["warnings"]


@machine_fixture(slow=True)
def btrfs_raid1(tmp_path: Path) -> Iterator[Path]:
    loops: list[str] = []
    mnt = tmp_path / "bmnt"
    mnt.mkdir()
    mounted = False
    try:
        loops = _loops(tmp_path, 2, "400M")
        sh("mkfs.btrfs", "-q", "-f", "-d", "raid1", "-m", "raid1", *loops)
        sh("mount", loops[0], str(mnt))
        mounted = True
        yield mnt
    finally:
        if mounted:
            sh("umount", str(mnt), check=False)
        for d in loops:
            sh("losetup", "--detach", d, check=False)


def _write(mnt: Path, name: str, durability: str) -> tuple[int, devices.DeviceCheck, list[str]]:
    """64 MiB written in 1 MiB blocks under a device window; returns app bytes, the check's
    raw figures and the window's warnings."""
    runner = LocalRunner()
    target = devices.resolve(mnt, runner)
    model, why = geometry.for_target(target, runner)
    assert model is not None and model.ratio == 2.0, why
    job = (f"[{name}]\ndirectory={mnt}\nfilename={name}\nrw=write\nbs=1M\nsize=64M\n"
           f"ioengine=psync\nrefill_buffers=1\n{durability}\n")  # fmt: skip
    window = DeviceWindow(target, model)
    res = fio.run_job(runner, job, mnt.parent / f"{name}.fio", "write")
    out = window.close("write", res.io_bytes, res.runtime_s, compressibility=0)
    amp = out.finding.more["amplification"]
    assert isinstance(amp, dict)
    return res.io_bytes, amp, list(out.warnings)  # type: ignore[return-value]


def test_btrfs_raid1_honest_write_is_verified_and_a_half_durable_one_flagged(
    btrfs_raid1: Path,
) -> None:
    app, honest, warned = _write(btrfs_raid1, "honest", "end_fsync=1")
    # Only a member-speed warning may appear (two loop files on one busy disk can differ by
    # 40%, CI saw it); nothing about durability or the copies written.
    assert app == 64 * M and [w for w in warned if not w.startswith("member ")] == []
    assert 2.0 <= honest["amplification"] <= 2.0 * 1.05  # type: ignore[index, operator]
    # fsync after the first 48 blocks and never again: the last 16 MiB stay dirty in the page
    # cache (the kernel's default background limit is 10% of RAM and expiry 30 s), so the
    # disks hold 2 × 48 MiB = 1.5× the application's bytes — more than one copy, which the
    # old one-copy rule passed, but a quarter short of raid1's two.
    app, lazy, warned = _write(btrfs_raid1, "lazy", "fsync=48")
    print(f"btrfs raid1: honest {honest['amplification']}, lazy {lazy['amplification']}")
    assert app == 64 * M
    assert 1.0 < lazy["amplification"] < 1.8  # type: ignore[index, operator]
    assert "of the written data did not reach the disks" in " ".join(warned)
    assert "btrfs raid1 on 2 devices must write 2.00×" in " ".join(warned)


MEMCG = Path("/sys/fs/cgroup/memory")


@machine_fixture(slow=True)
def memory_capped(tmp_path: Path) -> Iterator[Path]:
    """A cgroup v1 memory cgroup of 160 MiB: the page cache of what runs in it is held to
    that, so a working set above it cannot stay cached."""
    if not (MEMCG / "memory.limit_in_bytes").exists():
        pytest.skip("no cgroup v1 memory controller at /sys/fs/cgroup/memory")
    cg = MEMCG / f"pbamp-{tmp_path.name}"
    cg.mkdir()
    try:
        (cg / "memory.limit_in_bytes").write_text(str(160 * M))
        yield cg
    finally:
        for pid in (cg / "cgroup.procs").read_text().split():
            (MEMCG / "cgroup.procs").write_text(pid)
        cg.rmdir()


def test_reread_is_labelled_by_the_device_bytes(
    make_loop_fs,  # type: ignore[no-untyped-def]
    memory_capped: Path,
    tmp_path: Path,
) -> None:
    import os
    import subprocess
    import sys

    fs = make_loop_fs("700M")

    def reread(size: str, cgroup: Path | None) -> dict[str, object]:
        def enter() -> None:
            if cgroup is not None:
                (cgroup / "cgroup.procs").write_text(str(os.getpid()))

        p = subprocess.run(
            [sys.executable, "-m", "poolbench", "bench", str(fs.mountpoint), "--size", size,
             "--workloads", "reread", "--min-runs", "2", "--max-runs", "2", "--json",
             "--db", str(tmp_path / f"{size}.db")],
            capture_output=True, text=True, preexec_fn=enter, timeout=300,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        (r,) = json.loads(p.stdout)["results"]
        return r  # type: ignore[no-any-return]

    # 16 MiB, no cap: the warm pass leaves it all in the page cache.
    small = reread("16M", None)
    assert small["served_by"] == ["cache", "cache"]
    assert any("measures the cache" in str(w) for w in small["warnings"])  # type: ignore[attr-defined]
    # 320 MiB through a 160 MiB cache: the warm pass evicts its own start, the disks serve it.
    big = reread("320M", memory_capped)
    assert big["served_by"] == ["disks", "disks"]
    assert any("served by the disks" in str(w) for w in big["warnings"])  # type: ignore[attr-defined]
