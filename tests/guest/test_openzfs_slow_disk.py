"""`poolbench study slow-disk` on real OpenZFS (guest tier): three loop disks of 128 MiB capped
at PEER MiB/s, the first at half of that, under the study's own layouts on three disks (a
2-way mirror, raidz1:3, draid1:2d:3c:0s), each beside itself without the slow member;
streaming write and cold streaming read of SIZE MiB, 2 replicates (12 trials).

The throttle is the cgroup v1 blkio cap in the root cgroup (system/throttle.py). The guest's
init mounts no cgroup hierarchy at all, so every controller is free and the `blkio` fixture
mounts a v1 blkio hierarchy at /sys/fs/cgroup/blkio for the run (and unmounts it after): the
same place and the same rule as on a host booted with the v1 hierarchy. In-kernel ZFS tags
its bios with the queue's root blkcg (vdev_disk.c), so the root's rule catches them. Without
a hierarchy the study refuses to run (exit 7), checked first.

What must hold, computed from the caps (PEER and SLOW MiB/s per member; d = 1 data disk's
worth for the mirror, 2 for raidz1:3 and draid1:2d:3c:0s):

* The throttle held in every window: none lasted less than its busiest member's bytes at
  that member's cap (15% off for the throttle's 0.1 s slices). The caps bind: a healthy
  mirror reads at most 2 × PEER, a healthy raidz/dRAID writes at most d × PEER.
* Writes wait for the slow member (every member holds its share of every transaction
  group): d × SLOW, between half of it and 15% over, and under 0.75 of the healthy figure.
* Mirror reads, from OpenZFS's vdev_mirror.c: a read goes to the side with the fewest
  active I/Os, but the side that served the previous offset is ahead by the seek penalty
  (5 I/Os on rotational members, 2 within 1 MiB; 1 on non-rotational ones), and prefetch
  keeps at most 3 async reads active per side: on these rotational loop devices a stream
  may stay on the slow side. So the read is held to what its split makes it: no faster
  than the busier side allows (both sides at once), no slower than both sides in turn; and
  within slow_disk.expected's range, SLOW to PEER + SLOW. (The first guest run, with the
  brief's "reads avoid the slow side" asserted, measured 3.79 and 3.66 MiB/s at 4 and
  2 MiB/s: 95% of the bytes from the fast side in one replicate, 53% from the slow side in
  the other.)
* raidz and dRAID reads skip parity, whose place follows the block's offset: between
  d × SLOW and d × PEER.
* The guard: no healthy disk is ever named, by either rule. Whether the byte counters name
  the slow one is printed, not asserted: OpenZFS paces every member's writes to the
  slowest, so the counters move together (study/builtin/slow_guard.py; the first run named
  it in 0 of 2 replicates everywhere). Its disk_wait rule (guards/member_latency.py) must
  name it on the mirror's and raidz's streaming writes, by majority over the replicates: it
  holds each write about twice as long as its peers (three runs: 1.43-2.24x, healthy
  members at most 1.24x). dRAID's is printed, not asserted: one replicate at 1.32x (a peer
  that waited long too) left it unnamed in one run of three. A cold read's waits are
  recorded and not judged (its span's writes are only the pool's own). No cap outlives
  the run.
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
from poolbench.study.builtin import slow_disk
from poolbench.system import throttle

from .studykit import leftovers, poolbench, sh

pytestmark = pytest.mark.openzfs
PEER, SLOW = 4, 2  # MiB/s: low enough that the emulated guest's loop disks reach them
CGROUP = Path("/sys/fs/cgroup")
CONFIG = "backend=zfs layout="
LAYOUTS = ("mirror:2", "raidz1:3", "draid1:2d:3c:0s")  # the study's own on three disks
SIZE = 12.0  # MiB per window
TOL = 1.15  # over a cap: the throttle's 0.1 s slices let a little through
MiB = 1 << 20
Rows = dict[tuple[str, str], list[dict[str, Any]]]


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


def _rows(db: Path) -> Rows:
    out: Rows = {}
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
                  "--fraction", f"{SLOW}/{PEER}", "--layouts", ",".join(LAYOUTS),
                  "--workloads", "seq-write,seq-read", "--size", f"{SIZE:g}M",
                  "--min-window", "0", "--replicates", "2", "--max-replicates", "2",
                  "--db", str(db), "--scratch-dir", str(scratch), "--seed", "1")  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    print(p.stdout[-4000:])
    assert leftovers(scratch) == []
    assert throttle.caps() == before
    rows = _rows(db)
    out = Path(os.environ.get("OZVM_OUT", "/tmp")) / "slow-disk-figures.json"
    out.write_text(json.dumps({" ".join(k): v for k, v in rows.items()}))
    check(rows)


def figure(rows: Rows, layout: str, level: int, wl: str) -> float:
    return mean(r["value"] for r in rows[(f"{CONFIG}{layout} slow_member={level}", wl)])


def check(rows: Rows) -> None:
    """Everything the caps say of the stored rows (kept apart from the run so the rule can
    be read, and tried on a run's recorded rows)."""
    pct = 100 * SLOW // PEER
    for (config, wl), reps in rows.items():
        slow_dev = reps[0].get("slow_member", {}).get("device")
        for r in reps:
            held(r, slow_dev, f"{config} {wl}")
    for layout in LAYOUTS:
        d = 1.0 if layout.startswith("mirror") else 2.0  # raidz1:3, draid1:2d:3c: 2 data disks
        healthy, slow = (
            lambda wl, lvl=lvl, lay=layout: figure(rows, lay, lvl, wl) for lvl in (100, pct)
        )
        # a healthy figure the caps bound: a mirror reads from both sides, raidz writes d
        bound = 2 * PEER if layout.startswith("mirror") else d * PEER
        assert healthy("seq-read" if layout.startswith("mirror") else "seq-write") <= bound * TOL
        # writes wait for the slow member: its rate × data disks, from half of it to 15% over
        w = slow("seq-write")
        assert 0.5 * d * SLOW <= w <= d * SLOW * TOL, (layout, w)
        assert w < 0.75 * healthy("seq-write"), (layout, w, healthy("seq-write"))
        exp = slow_disk.expected(layout, 3, "seq-read", SLOW, PEER, "openzfs")
        assert exp is not None and exp.mib_s is not None and exp.high_mib_s is not None
        assert exp.mib_s * 0.85 <= slow("seq-read") <= exp.high_mib_s * TOL, (layout, exp)
    _mirror_reads(rows[(f"{CONFIG}mirror:2 slow_member={pct}", "seq-read")])
    _guard(rows, pct)


def held(r: dict[str, Any], slow_dev: str | None, what: str) -> None:
    """The throttle held in this window: no member moved its bytes faster than its cap
    (the window lasted at least the longest member's bytes / cap, 15% off for the
    throttle's slices)."""
    elapsed = SIZE / r["value"]
    need = max(
        (m["read_bytes"] + m["write_bytes"]) / MiB / (SLOW if name == slow_dev else PEER)
        for name, m in r["members"].items()
    )
    assert elapsed >= 0.85 * need, (what, elapsed, need, r["members"])


def _mirror_reads(reps: list[dict[str, Any]]) -> None:
    """A mirror read is what its split between the sides and their caps make it: no faster
    than the busier side allows (both sides at once), no slower than both in turn (a
    stream that stays on one side, then the other)."""
    for r in reps:
        device = r["slow_member"]["device"]
        by = {n: m["read_bytes"] / MiB for n, m in r["members"].items()}
        t_slow = by.pop(device) / SLOW
        t_fast = sum(by.values()) / PEER
        elapsed = SIZE / r["value"]
        print(f"mirror read: slow side {t_slow * SLOW:.1f} MiB, {elapsed:.2f} s")
        assert 0.85 * max(t_slow, t_fast) <= elapsed <= TOL * (t_slow + t_fast), r["members"]


def _guard(rows: Rows, pct: int) -> None:
    """No healthy disk is ever flagged; whether the slow one is, is recorded (OpenZFS paces
    every member to it: study/builtin/slow_guard.py)."""
    for layout in LAYOUTS:
        healthy, slow = (f"{CONFIG}{layout} slow_member={lvl}" for lvl in (100, pct))
        device = rows[(slow, "seq-write")][0]["slow_member"]["device"]
        for wl in ("seq-write", "seq-read"):
            assert slow_members.named(rows[(healthy, wl)]) == [], (layout, wl)
            for r in rows[(slow, wl)]:
                flagged = set((r.get("members_slow") or {}).get("slow") or {})
                assert flagged <= {device}, (layout, wl, r)
            print(layout, wl, "named:", slow_members.named(rows[(slow, wl)]))
    _latency(rows, pct)


def _latency(rows: Rows, pct: int) -> None:
    """The disk_wait rule names the throttled disk on the mirror's and raidz's writes (a
    majority of the replicates), and never a healthy disk anywhere."""
    for layout in LAYOUTS:
        for wl in ("seq-write", "seq-read"):
            reps = rows[(f"{CONFIG}{layout} slow_member={pct}", wl)]
            place = reps[0]["slow_member"]["position"]
            parts = slow_members.latency_parts(reps)
            flagged = [{d["position"] for d in p["slow"].values()} for p in parts]
            need = slow_members.needed(len(parts))
            named = {x for x in set().union(*flagged) if sum(x in f for f in flagged) >= need}
            print(layout, wl, "disk_wait flagged:", flagged, "of", len(reps),
                  [p["slow"] for p in parts])  # fmt: skip
            assert named <= {place}, (layout, wl, parts)
            if wl == "seq-read":  # recorded, not judged
                assert all("not_judged" in r["members_slow"]["latency"] for r in reps), reps
            if wl == "seq-write" and not layout.startswith("draid"):
                assert len(parts) == len(reps) and named == {place}, (layout, parts)
