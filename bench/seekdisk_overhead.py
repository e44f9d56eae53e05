"""Benchmark: is the disk emulator ever the limit? (docs/emulated-disks.md, "Overhead")

Run as root, inside the machine lock:
    flock /var/lock/poolbench-suite.lock .venv/bin/python bench/seekdisk_overhead.py [--disks 6]

1. One disk that serves at once (the emulator's own speed: `--no-wait`): fio at queue depth 1
   on the loop device over it, 4K random, 128K and 1M sequential reads, 4 s each: requests
   per second through the whole path (fio, loop device, FUSE, emulator), and the emulator's
   own CPU time per request (its stats' cpu_s).
2. One hdd-7200 disk: 4K random reads at queue depth 1 (6 s) and 1M sequential reads (96 MiB
   at the outer zone): fio's figure against the model's, and how late the emulator's
   replies were (its sleeps' timing error).
3. N hdd-7200 disks at once (default 6): the same two runs on all of them together (one fio
   process per disk): each disk's figure against its model's, and the emulators' CPU
   (their cpu_s over the run's wall time).

Prints one table per part. Everything is made through the safety journal and torn down at
the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from poolbench.backends import sources
from poolbench.emulate import process as emulated
from poolbench.emulate.model import PRESETS, Geometry
from poolbench.safety.journal import Journal
from poolbench.system.runner import LocalRunner

GIB = 1 << 30
P = PRESETS["hdd-7200"]


def fio_argv(loop: str, kind: str) -> list[str]:
    base = ["fio", "--name=b", f"--filename={loop}", "--direct=1", "--ioengine=psync",
            "--output-format=json", "--randseed=7"]  # fmt: skip
    return (
        base
        + {
            "rand4k": ["--rw=randread", "--bs=4k", "--runtime=6", "--time_based"],
            "seq128k": ["--rw=read", "--bs=128k", "--runtime=4", "--time_based"],
            "seq1m": ["--rw=read", "--bs=1M", "--size=96M"],
            "fast4k": ["--rw=randread", "--bs=4k", "--runtime=4", "--time_based"],
            "fast1m": ["--rw=read", "--bs=1M", "--runtime=4", "--time_based"],
        }[kind]
    )


def run_all(
    loops: list[str], disks: list[emulated.EmulatedDisk], kind: str
) -> list[dict[str, float]]:
    """fio `kind` on every loop device at once; per disk: fio's figures and the emulator's."""
    before = [emulated.stats(d) for d in disks]
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(fio_argv(lp, kind), stdout=subprocess.PIPE, text=True) for lp in loops
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    wall = time.monotonic() - t0
    rows = []
    for out, d, b in zip(outs, disks, before, strict=True):
        a = emulated.stats(d)
        job = json.loads(out)["jobs"][0]["read"]
        n = float(a["requests"]) - float(b["requests"])  # type: ignore[arg-type]
        late = {k: int(v) - int(b["late_us"].get(k, 0)) for k, v in a["late_us"].items()}  # type: ignore[union-attr]
        on_time = sum(v for k, v in late.items() if k in ("<10", "<20", "<50", "<100"))
        rows.append({
            "iops": float(job["iops"]), "mb_s": float(job["bw_bytes"]) / 1e6,
            "requests": n,
            "model_iops": n / max(1e-9, float(a["service_s"]) - float(b["service_s"])),  # type: ignore[arg-type]
            "model_mb_s": (float(a["bytes_read"]) - float(b["bytes_read"]))  # type: ignore[arg-type]
            / max(1e-9, float(a["service_s"]) - float(b["service_s"])) / 1e6,  # type: ignore[arg-type]
            "cpu_us_per_req": (float(a["cpu_s"]) - float(b["cpu_s"])) / max(n, 1) * 1e6,  # type: ignore[arg-type]
            "cpu_share": (float(a["cpu_s"]) - float(b["cpu_s"])) / wall,  # type: ignore[arg-type]
            "late_100us": 1 - on_time / max(n, 1), "late_max_us": float(a["late_max_us"]),  # type: ignore[arg-type]
        })  # fmt: skip
    return rows


def make(
    journal: Journal, base: Path, count: int, wait: bool
) -> tuple[list[str], list[emulated.EmulatedDisk]]:
    disks = []
    for i in range(count):
        d = emulated.EmulatedDisk(base / f"seek{i}")
        journal.dir_created(str(d.mountpoint))
        d.mountpoint.mkdir(parents=True)
        journal.emulated_disk_intent(str(d.mountpoint))
        emulated.start(journal.runner, d, GIB, P.as_dict(), seed=i, wait=wait)
        disks.append(d)
    loops = sources.loop_devices(journal.runner, journal, [d.disk for d in disks])
    return loops, disks


def show(title: str, rows: list[dict[str, float]], model: bool = True) -> None:
    """One table; `model=False` (a disk serving at once) leaves out the model's columns."""
    print(f"\n{title}")
    head = "disk      fio IOPS   fio MB/s  CPU us/req  CPU share"
    print(head + ("  model IOPS model MB/s  late>100us  late max us" if model else ""))
    for i, r in enumerate(rows):
        line = (f"{i:<6} {r['iops']:>10.1f} {r['mb_s']:>10.1f} {r['cpu_us_per_req']:>11.0f}"
                f" {r['cpu_share']:>10.1%}")  # fmt: skip
        if model:
            line += (f" {r['model_iops']:>11.1f} {r['model_mb_s']:>10.1f} {r['late_100us']:>11.1%}"
                     f" {r['late_max_us']:>12.0f}")  # fmt: skip
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--disks", type=int, default=6)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pbbench-seek-", dir="/var/tmp"))
    journal = Journal(LocalRunner(), path=base / "journal")
    try:
        loops, disks = make(journal, base / "fast", 1, wait=False)
        for kind in ("fast4k", "seq128k", "fast1m"):
            rows = run_all(loops, disks, kind)
            show(f"1. the emulator's own speed ({kind}, serving at once, QD1)", rows, model=False)
        journal.teardown()
        loops, disks = make(journal, base / "one", 1, wait=True)
        expected = 1 / Geometry(P, GIB).expected_random_s(4096)
        print(f"\nmodel: 4K random QD1 over 1 GiB: {expected:.1f} IOPS expected")
        for kind in ("rand4k", "seq1m"):
            show(f"2. one hdd-7200 disk ({kind})", run_all(loops, disks, kind))
        journal.teardown()
        loops, disks = make(journal, base / "many", args.disks, wait=True)
        for kind in ("rand4k", "seq1m"):
            show(f"3. {args.disks} hdd-7200 disks at once ({kind})", run_all(loops, disks, kind))
    finally:
        left = journal.teardown()
        shutil.rmtree(base, ignore_errors=True)
        if left:
            print("left alone:", left)


if __name__ == "__main__":
    main()
