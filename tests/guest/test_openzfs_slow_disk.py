"""`poolbench study slow-disk` on real OpenZFS (guest tier): three loop disks of 128 MiB capped
at PEER MiB/s, the first at half of that, under a 2-way mirror and a raidz1:3, each beside
itself without the slow member; streaming write and cold streaming read of 16 MiB, 2
replicates (8 trials).

The throttle is the cgroup v1 blkio cap in the root cgroup (system/throttle.py). The guest's
init mounts no cgroup hierarchy at all, so every controller is free and the `blkio` fixture
mounts a v1 blkio hierarchy at /sys/fs/cgroup/blkio for the run (and unmounts it after): the
same place and the same rule as on a host booted with the v1 hierarchy. In-kernel ZFS issues
its I/O from kernel threads, which are in the root cgroup, so the root's rule catches them.

What must hold, computed from the caps (PEER and SLOW MiB/s, per member):

* The caps bind: a healthy mirror reads at most 2 × PEER (both sides busy), a healthy raidz1:3
  writes at most 2 × PEER (two data disks' worth per stripe), 15% over for the throttle's
  slices.
* Writes wait for the slow member (every member holds its share of every transaction group):
  the mirror writes at most SLOW, the raidz1:3 at most 2 × SLOW (slow_disk.expected).
* Mirror reads avoid the slow side. OpenZFS's vdev_mirror.c sends each read to the child with
  the lowest load, its number of I/Os issued and not completed (vdev_queue_length, plus 1 for
  a non-sequential offset on non-rotating media, 0-5 on rotating): a throttled member keeps
  its I/Os pending longer, so it is chosen only while its queue is no longer than the fast
  side's. With queues held equal, each side serves in proportion to its speed: the mirror
  reads up to PEER + SLOW = 3 × SLOW, the slow side serving SLOW / (PEER + SLOW) = 1/3 of the
  bytes. A selection blind to load (zfs-fuse's: tests/test_slow_disk_real.py) splits reads
  evenly and waits on the slow half: 2 × SLOW. The figure must clear that even split by 20%
  (> 1.2 × 2 × SLOW = 2.4 × SLOW, 20% under the steered 3 × SLOW), and the slow member must
  have read less than 45% of the bytes (even split: 50%; steered: 33%).
* raidz1 reads skip parity, whose column rotates, so each member reads a third of the data:
  at most 3 × SLOW.
* The guard: the slow member writes as many bytes as its peers at half their rate, so it is
  busy longer by bytes × (1/SLOW - 1/PEER): 16 MiB × 0.25 = 4 s on the mirror, 8 MiB × 0.25 =
  2 s on the raidz1, far over the rule's 0.3 s (guards/members.py), so the writes name it in
  both replicates. A steered mirror read keeps both sides busy the whole window (the slow
  one with fewer bytes): the slow side is busy longer only while its last queued reads drain
  (a few 128K reads at SLOW: about 0.03 s each), so whether a read names it is recorded, not
  asserted. No healthy disk is ever named, and no cap outlives the run.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from statistics import mean
from typing import Any

import pytest

from poolbench.engine import slow_members
from poolbench.system import throttle

from .studykit import leftovers, poolbench, sh

pytestmark = pytest.mark.openzfs
PEER, SLOW = 4, 2  # MiB/s: low enough that the emulated guest's loop disks reach them
CGROUP = Path("/sys/fs/cgroup")
CONFIG = "backend=zfs layout="
MIRROR_SHARE = 0.45  # the slow side's share of a steered mirror read is under this


@pytest.fixture
def blkio() -> Iterator[None]:
    """A cgroup v1 blkio hierarchy at throttle.BLKIO for the test, where none is mounted."""
    if not throttle.unavailable():
        yield
        return
    mounts = Path("/proc/mounts").read_text()
    if f" {CGROUP} cgroup2 " in mounts:
        pytest.fail(f"{CGROUP} is a cgroup v2 mount: no v1 blkio hierarchy can be added there")
    made: list[Path] = []
    if f" {CGROUP} " not in mounts:
        sh("mount", "-t", "tmpfs", "-o", "mode=755", "cgroup", str(CGROUP), check=True)
        made.append(CGROUP)
    try:
        throttle.BLKIO.mkdir(exist_ok=True)
        p = sh("mount", "-t", "cgroup", "-o", "blkio", "blkio", str(throttle.BLKIO))
        assert p.returncode == 0, f"mounting a v1 blkio hierarchy failed: {p.stderr}"
        made.insert(0, throttle.BLKIO)
        assert throttle.unavailable() == "", throttle.unavailable()
        yield
    finally:
        for m in made:
            sh("umount", str(m))


def test_the_study_refuses_where_no_disk_can_be_slowed(tmp_path: Path) -> None:
    """Without a blkio hierarchy (the guest's init mounts none) the study stops before
    building anything, says why and exits 7 (unsupported here): a "slow disk" that is not
    slowed is no study. (Runs first: the other test mounts a hierarchy for its run.)"""
    if not throttle.unavailable():
        pytest.skip("a blkio hierarchy is mounted here")
    p = poolbench("study", "slow-disk", "--disks", "3x128M", "--db", str(tmp_path / "r.db"),
                  "--scratch-dir", "/var/tmp/pb-slow-refused")  # fmt: skip
    assert p.returncode == 7, p.stdout + p.stderr
    assert "blkio" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert (
        not os.path.exists("/var/tmp/pb-slow-refused")
        or leftovers(Path("/var/tmp/pb-slow-refused")) == []
    )


def _rows(db: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for config, workload, value, guards in sqlite3.connect(db).execute(
        "SELECT config, workload, value, guards FROM measurements ORDER BY replicate"
    ):
        out.setdefault((config, workload), []).append({"value": value, **json.loads(guards)})
    return out


def test_one_slow_member_on_openzfs_costs_what_the_caps_say(blkio: None) -> None:
    scratch = Path("/var/tmp/pb-slow-disk")  # loop disks need a disk-backed filesystem
    db = scratch.parent / "pb-slow-disk.db"
    before = throttle.caps()
    p = poolbench("study", "slow-disk", "--disks", "3x128M", "--cap", str(PEER),
                  "--fraction", f"{SLOW}/{PEER}", "--layouts", "mirror:2,raidz1:3",
                  "--workloads", "seq-write,seq-read", "--size", "16M", "--min-window", "0",
                  "--replicates", "2", "--max-replicates", "2", "--db", str(db),
                  "--scratch-dir", str(scratch), "--seed", "1")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    print(p.stdout[-4000:])
    assert leftovers(scratch) == []
    assert throttle.caps() == before
    rows = _rows(db)
    pct = 100 * SLOW // PEER

    def fig(layout: str, level: int, wl: str) -> float:
        return mean(r["value"] for r in rows[(f"{CONFIG}{layout} slow_member={level}", wl)])

    got = {(lay, lvl, wl): fig(lay, lvl, wl) for lay in ("mirror:2", "raidz1:3")
           for lvl in (100, pct) for wl in ("seq-write", "seq-read")}  # fmt: skip
    shown = {" ".join(map(str, k)): round(v, 2) for k, v in got.items()}
    print("figures (MiB/s):", shown)
    out = Path(os.environ.get("OZVM_OUT", "/tmp")) / "slow-disk-figures.json"
    out.write_text(
        json.dumps({"figures": shown, "rows": {" ".join(k): v for k, v in rows.items()}})
    )
    tol = 1.15
    assert got[("mirror:2", 100, "seq-read")] <= 2 * PEER * tol, got
    assert got[("raidz1:3", 100, "seq-write")] <= 2 * PEER * tol, got
    assert got[("mirror:2", pct, "seq-write")] <= SLOW * tol, got
    assert got[("raidz1:3", pct, "seq-write")] <= 2 * SLOW * tol, got
    assert 2.4 * SLOW < got[("mirror:2", pct, "seq-read")] <= (PEER + SLOW) * tol, got
    assert got[("raidz1:3", pct, "seq-read")] <= 3 * SLOW * tol, got
    _check_guard(rows, pct)


def _check_guard(rows: dict[tuple[str, str], list[dict[str, Any]]], pct: int) -> None:
    for layout in ("mirror:2", "raidz1:3"):
        healthy, slow = (f"{CONFIG}{layout} slow_member={lvl}" for lvl in (100, pct))
        device = rows[(slow, "seq-write")][0]["slow_member"]["device"]
        for wl in ("seq-write", "seq-read"):
            assert slow_members.named(rows[(healthy, wl)]) == [], (layout, wl)
            for r in rows[(slow, wl)]:
                flagged = set((r.get("members_slow") or {}).get("slow") or {})
                assert flagged <= {device}, (layout, wl, r)
            named = slow_members.named(rows[(slow, wl)])
            print(layout, wl, "named:", named)
            if wl == "seq-write":
                assert len(named) == 1 and named[0].startswith(f"member {device} "), named
        if layout == "mirror:2":
            for r in rows[(slow, "seq-read")]:
                read = {m: d["read_bytes"] for m, d in r["members"].items()}
                share = read[device] / sum(read.values())
                print("mirror read: bytes per member", read, f"slow share {share:.2f}")
                assert share < MIRROR_SHARE, read
