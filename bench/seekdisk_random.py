"""Benchmark: the planner's random-read model on emulated disks that seek, on zfs-fuse.
(docs/planner.md, "Random reads on disks that seek".)

Run as root, inside the machine lock, with no zfs-fuse daemon running (it starts its own):
    flock /var/lock/poolbench-suite.lock .venv/bin/python bench/seekdisk_random.py \
        [--layouts disk,mirror:2,...] [--window 8] [--out table.json]

Per layout, on emulated hdd-7200 disks (docs/emulated-disks.md) of DISK_SIZE bytes:
- one pool (ashift 12, atime off, compression off, primarycache=metadata: the ARC keeps
  metadata only, so every data read reaches the disks) with two datasets, recordsize 4K and
  128K, each holding one file written once (1 MiB sequential writes, incompressible) sized
  so that every disk holds FILL_BYTES of it (the planner's allocation table: parity and
  padding included), then the pool is exported and imported (nothing of the data left in
  memory) and each file's metadata read in by a short unmeasured random read;
- random reads of whole records (4K on the 4K dataset, 128K on the 128K one) at QD 1, 4 and
  16: QD jobs of fio's psync engine, one read in flight each (zfs-fuse does each read inside
  the submit call, so iodepth queues nothing: the `--probe` window measures that);
- per window, from each disk emulator's stats: its reads, its busy time (the modelled
  service it gave) and how late its replies were (the host's contention, which the table
  flags: a window where more than LATE_LIMIT of the replies ended over 1 ms late is measured
  again, three windows at most, the least contended kept, and marked if it still is).

Predicted = `plan`'s random-read figure (predict(..., outstanding=QD)) for a disk whose
random IOPS are the single-disk pool's, measured here at QD 1 with the same record size, on
the same fill: so "disk" must come first. zfs-fuse is started with the vdev cache off
(`--vdev-cache-size 0`: v23 would otherwise read 64K for every read under 16K and serve
neighbours from it; OpenZFS 2.x has no vdev cache) and its block devices opened with O_DIRECT
(`--disable-block-cache`: otherwise the host's page cache of the loop devices serves reads).

Everything is made through the safety journal and torn down at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from poolbench.backends import sources
from poolbench.emulate import process as emulated
from poolbench.emulate.model import PRESETS, Geometry
from poolbench.planner.layout import parse_layout
from poolbench.planner.performance import DiskSpeed, predict
from poolbench.planner.space import psize_to_asize
from poolbench.safety.journal import Journal
from poolbench.system.runner import LocalRunner

MiB = 1 << 20
DISK_SIZE = 256 * MiB
FILL_BYTES = 48 * MiB  # per disk, per dataset: 19% of the stroke
ASHIFT = 12
POOL = "pbseekrand"
PARAMS = PRESETS["hdd-7200"]
RECORDS = (4096, 128 * 1024)
DEPTHS = (1, 4, 16)
# One disk with 16 reads in flight is busy 88-94% of a window on this host when it is not
# contended (the rest is the loop device's turnaround between requests): below this, the host
# was too slow to keep it fed, which the emulator's own timing does not show.
HOST_BOUND = 0.85
LATE_LIMIT = 0.02  # share of replies over 1 ms late that marks a window as contended
# Study grammar -> zpool words per vdev (width, type)
LAYOUTS = ("disk", "mirror:2", "mirror:3", "2xmirror:2", "3xmirror:2", "raidz1:3",
           "raidz1:4", "raidz1:6", "raidz2:6")  # fmt: skip


def vdevs(layout: str) -> list[tuple[str, int]]:
    if layout == "disk":
        return [("disk", 1)]
    count, _, shape = layout.rpartition("x")
    kind, width = shape.split(":")
    return [(kind, int(width))] * (int(count) if count else 1)


def plan_layout(layout: str) -> str:
    """The planner's spelling of a layout ('2xmirror:2' -> 'mirror:2+mirror:2')."""
    return "stripe:1" if layout == "disk" else "+".join(f"{k}:{w}" for k, w in vdevs(layout))


def file_bytes(layout: str, record: int) -> int:
    """The file that puts FILL_BYTES on every disk: each vdev holds its share of the
    records, and a record costs its vdev raw bytes (parity, padding, copies) spread evenly
    over its members (the planner's allocation: `psize_to_asize`, one side of a mirror)."""
    pool = parse_layout(plan_layout(layout), [DISK_SIZE] * 64)
    total = 0.0
    for v in pool.vdevs:
        raw = psize_to_asize(v, record, ASHIFT) * (v.width if v.kind == "mirror" else 1)
        total += FILL_BYTES * v.width * record / raw
    return int(total) // MiB * MiB


class Bench:
    def __init__(self, base: Path, window: float) -> None:
        self.base, self.seconds = base, window
        self.runner = LocalRunner()
        self.journal = Journal(self.runner, path=base / "journal")
        self.daemon: int | None = None

    def sh(self, argv: list[str], timeout: float = 300, check: bool = True) -> str:
        return self.runner.run(argv, timeout=timeout, check=check).stdout

    def start_zfs_fuse(self) -> None:
        if self.runner.run(["zpool", "list", "-H"], check=False, timeout=30).returncode == 0:
            sys.exit("a zfs-fuse daemon is running (someone else's?): this bench starts its own "
                     "with the vdev cache off; run it when none is")  # fmt: skip
        pidfile = self.base / "zfs-fuse.pid"
        self.runner.run(["zfs-fuse", "--pidfile", str(pidfile), "--disable-block-cache",
                         "--vdev-cache-size", "0"], reap_group=False, timeout=30)  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ok = self.runner.run(["zpool", "list", "-H"], check=False, timeout=30).returncode
            if ok == 0 and pidfile.exists() and pidfile.read_text().strip():
                self.daemon = int(pidfile.read_text())
                return
            time.sleep(0.2)
        sys.exit("zfs-fuse did not answer within 30 s")

    def stop_zfs_fuse(self) -> None:
        if self.daemon is None:
            return
        os.kill(self.daemon, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and Path(f"/proc/{self.daemon}").exists():
            state = Path(f"/proc/{self.daemon}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state in ("Z", "X"):
                break
            time.sleep(0.2)

    def teardown(self) -> list[str]:
        """Everything made, newest first. zfs-fuse may hold a loop device for a moment after
        the pool is gone, so an emulator it keeps busy is tried again (a layout's disks
        stay where they are until then: each layout has its own directory)."""
        left = self.journal.teardown()
        for _ in range(15):
            if not left:
                break
            time.sleep(2)
            left = self.journal.teardown()
        return left

    def disks(self, layout: str, n: int) -> tuple[list[str], list[emulated.EmulatedDisk]]:
        made = []
        for i in range(n):
            d = emulated.EmulatedDisk(self.base / layout.replace(":", "-") / f"seek{i}")
            self.journal.dir_created(str(d.mountpoint))
            d.mountpoint.mkdir(parents=True)
            self.journal.emulated_disk_intent(str(d.mountpoint))
            emulated.start(self.runner, d, DISK_SIZE, PARAMS.as_dict(), seed=i)
            made.append(d)
        return sources.loop_devices(self.runner, self.journal, [d.disk for d in made]), made

    def pool(self, layout: str, loops: list[str]) -> tuple[Path, Path]:
        words: list[str] = []
        it = iter(loops)
        for kind, width in vdevs(layout):
            members = [next(it) for _ in range(width)]
            words += members if kind == "disk" else [kind, *members]
        links = self.base / "links"
        shutil.rmtree(links, ignore_errors=True)
        links.mkdir()
        for dev in loops:
            (links / Path(dev).name).symlink_to(dev)
        mnt = self.base / "mnt"
        self.journal.pool_intent(POOL, loops)
        self.sh(["zpool", "create", "-f", "-o", f"ashift={ASHIFT}", "-m", str(mnt), POOL,
                 *words])  # fmt: skip
        self.journal.pool_created(POOL, loops, import_dir=str(links))
        self.sh(["zfs", "set", "atime=off", POOL])
        self.sh(["zfs", "set", "compression=off", POOL])
        self.sh(["zfs", "set", "primarycache=metadata", POOL])
        for rec in RECORDS:
            self.sh(["zfs", "create", "-o", f"recordsize={rec // 1024}K", f"{POOL}/r{rec}"])
        return mnt, links

    def fio(self, path: Path, args: list[str], timeout: float = 600) -> dict[str, Any]:
        argv = ["fio", "--name=r", f"--filename={path}", "--output-format=json", *args]
        doc: dict[str, Any] = json.loads(self.sh(argv, timeout=timeout))
        return doc

    def window(
        self,
        path: Path,
        size: int,
        record: int,
        depth: int,
        disks: list[emulated.EmulatedDisk],
        iodepth: bool = False,
        seconds: float | None = None,
    ) -> dict[str, Any]:
        """One timed random-read window and what every disk did in it."""
        jobs = ["--numjobs=1", "--ioengine=libaio", f"--iodepth={depth}"] if iodepth else [
            f"--numjobs={depth}", "--ioengine=psync"]  # fmt: skip
        before = [emulated.stats(d) for d in disks]
        t0 = time.monotonic()
        out = self.fio(path, ["--rw=randread", f"--bs={record}", f"--size={size}",
                              "--direct=1", "--norandommap", "--time_based",
                              f"--runtime={seconds or self.seconds:g}", "--group_reporting",
                              "--randseed=11", *jobs])  # fmt: skip
        wall = time.monotonic() - t0
        after = [emulated.stats(d) for d in disks]
        read = out["jobs"][0]["read"]
        per_disk = []
        for b, a in zip(before, after, strict=True):
            late = {k: int(v) - int(b["late_us"].get(k, 0)) for k, v in a["late_us"].items()}  # type: ignore[union-attr]
            n = sum(late.values())
            over_ms = sum(v for k, v in late.items() if k in (">=5000", "<5000", "<2000"))
            per_disk.append({
                "reads": int(a["reads"]) - int(b["reads"]),  # type: ignore[arg-type]
                "busy": (float(a["service_s"]) - float(b["service_s"])) / wall,  # type: ignore[arg-type]
                "late_ms_share": over_ms / n if n else 0.0,
            })  # fmt: skip
        ios = float(read["total_ios"])
        return {
            "iops": float(read["iops"]),
            "lat_ms": float(read["clat_ns"]["mean"]) / 1e6,
            "disk_reads_per_read": sum(d["reads"] for d in per_disk) / max(ios, 1.0),
            "busiest": max(d["busy"] for d in per_disk),
            "mean_busy": sum(d["busy"] for d in per_disk) / len(per_disk),
            "late_ms_share": max(d["late_ms_share"] for d in per_disk),
            "per_disk": per_disk,
        }

    def measured(
        self, path: Path, size: int, record: int, depth: int, disks: list[emulated.EmulatedDisk]
    ) -> dict[str, Any]:
        """A window, measured again (twice at most) while the emulators' replies say the host
        was contended: the least contended one is kept, and how many were made."""
        tries = [self.window(path, size, record, depth, disks)]
        while tries[-1]["late_ms_share"] > LATE_LIMIT and len(tries) < 3:
            tries.append(self.window(path, size, record, depth, disks))
        best = min(tries, key=lambda r: float(r["late_ms_share"]))
        best["windows"] = len(tries)
        return best

    def layout(self, layout: str, probe: bool) -> list[dict[str, Any]]:
        n = sum(w for _, w in vdevs(layout))
        loops, disks = self.disks(layout, n)
        mnt, links = self.pool(layout, loops)
        rows = []
        try:
            files = {}
            for rec in RECORDS:
                size = file_bytes(layout, rec)
                files[rec] = (mnt / f"r{rec}" / "data", size)
                self.fio(files[rec][0], ["--rw=write", "--bs=1M", f"--size={size}",
                                         "--refill_buffers", "--end_fsync=1"])  # fmt: skip
            self.sh(["zpool", "export", POOL])
            self.sh(["zpool", "import", "-d", str(links), POOL])
            for rec in RECORDS:
                path, size = files[rec]
                self.window(path, size, rec, 4, disks, seconds=3)  # metadata in, unmeasured
                for depth in DEPTHS:
                    row = self.measured(path, size, rec, depth, disks)
                    row.update(layout=layout, record=rec, depth=depth, file_bytes=size,
                               engine="psync jobs")  # fmt: skip
                    rows.append(row)
                    show(row)
                if probe and rec == 4096:
                    row = self.window(path, size, rec, 16, disks, iodepth=True)
                    row.update(layout=layout, record=rec, depth=16, file_bytes=size,
                               engine="libaio iodepth")  # fmt: skip
                    rows.append(row)
                    show(row)
        finally:
            left = self.teardown()
            if left:
                raise RuntimeError(f"not torn down: {left}")
        return rows


def show(r: dict[str, Any]) -> None:
    flag = " CONTENDED" if r["late_ms_share"] > LATE_LIMIT else ""
    print(f"{r['layout']:<11} {r['record'] // 1024:>4}K QD{r['depth']:<3} {r['engine']:<15}"
          f" {r['iops']:8.1f} IOPS  lat {r['lat_ms']:6.2f} ms  disk reads/read "
          f"{r['disk_reads_per_read']:5.2f}  busiest {r['busiest']:5.1%}"
          f"  mean {r['mean_busy']:5.1%}"
          f"  late>1ms {r['late_ms_share']:5.1%}{flag}", flush=True)  # fmt: skip


def predicted(rows: list[dict[str, Any]]) -> None:
    """`plan`'s figure for each row, and the same with the stack's turnaround.

    The planner's disk is one disk kept busy: the single-disk pool at the deepest queue, with
    the same record size (R). At queue depth 1 a read also waits for the host's own part
    (zfs-fuse, two FUSE hops, the loop device: about 1 ms here, tens of microseconds on
    OpenZFS on real disks), h = 1/(the single-disk pool at QD 1) − 1/R; with Q in flight a
    closed loop of Q readers overlaps it: X = P / (1 + P·h/Q) (Little's law)."""
    single = {(r["record"], r["depth"]): r["iops"] for r in rows
              if r["layout"] == "disk" and r["engine"] == "psync jobs"}  # fmt: skip
    for r in rows:  # the calibration: one disk with 16 in flight must be kept busy
        if r["layout"] == "disk" and r["depth"] == max(DEPTHS) and r["busiest"] < HOST_BOUND:
            print(f"warning: the single disk at QD {r['depth']} ({r['record'] // 1024}K) was "
                  f"busy {r['busiest']:.0%} of the window: the host, not the disk, set its "
                  "pace, and every prediction of this run rests on it",
                  file=sys.stderr)  # fmt: skip
    for r in rows:
        rec = r["record"]
        if (rec, 1) not in single or (rec, max(DEPTHS)) not in single:
            continue
        ref = single[(rec, max(DEPTHS))]
        turnaround = max(0.0, 1 / single[(rec, 1)] - 1 / ref)
        disk = DiskSpeed(1e8, 1e8, ref, ref, medium="media")
        pool = parse_layout(plan_layout(r["layout"]), [DISK_SIZE] * 64)
        p = predict(pool, disk, rec, ASHIFT, outstanding=r["depth"]).read_iops
        r["predicted"] = p
        r["ratio"] = r["iops"] / p
        r["with_turnaround"] = p / (1 + p * turnaround / r["depth"])
        r["ratio_turnaround"] = r["iops"] / r["with_turnaround"]
        r["turnaround_ms"] = turnaround * 1e3


def table(rows: list[dict[str, Any]]) -> None:
    print("| layout | record | QD | predicted IOPS | + turnaround | measured IOPS | measured / "
          "predicted (+ turnaround) | disk reads per read | busiest disk busy | replies > 1 ms "
          "late |\n|---|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    for r in rows:
        qd = f"{r['depth']}" + ("" if r["engine"] == "psync jobs" else " (libaio iodepth)")
        flag = " **contended**" if r["late_ms_share"] > LATE_LIMIT else ""
        flag += f" ({r['windows']} windows)" if r.get("windows", 1) > 1 else ""
        pred = (f"{r['predicted']:.1f} | {r['with_turnaround']:.1f} | {r['iops']:.1f} | "
                f"{r['ratio']:.2f} ({r['ratio_turnaround']:.2f})")  # fmt: skip
        print(f"| {r['layout']} | {r['record'] // 1024}K | {qd} | {pred} "
              f"| {r['disk_reads_per_read']:.2f} | {r['busiest']:.0%} "
              f"| {r['late_ms_share']:.1%}{flag} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--probe", default="mirror:2", help="layout that also runs libaio iodepth 16")
    ap.add_argument("--out", type=Path, default=Path("seekdisk_random.json"))
    ap.add_argument("--table-from", type=Path, help="print the table of an earlier run's JSON")
    args = ap.parse_args()
    if args.table_from:
        rows = json.loads(args.table_from.read_text())
        predicted(rows)
        table(rows)
        return
    base = Path(tempfile.mkdtemp(prefix="pbbench-seekrand-", dir="/var/tmp"))
    bench = Bench(base, args.window)
    rows: list[dict[str, Any]] = []
    g = Geometry(PARAMS, DISK_SIZE)
    for rec in RECORDS:
        print(f"model: one disk, {rec // 1024}K random over its first {FILL_BYTES // MiB} MiB: "
              f"{1 / g.expected_random_s(rec, 0, FILL_BYTES):.1f} IOPS")  # fmt: skip
    t0 = time.monotonic()
    try:
        bench.start_zfs_fuse()
        for layout in args.layouts.split(","):
            rows += bench.layout(layout, probe=layout == args.probe)
    finally:
        left = bench.teardown()
        bench.stop_zfs_fuse()
        shutil.rmtree(base, ignore_errors=True)
        if left:
            print("left alone:", left)
    predicted(rows)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"\n{time.monotonic() - t0:.0f} s; table:\n")
    table(rows)


if __name__ == "__main__":
    main()
