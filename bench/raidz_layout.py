"""Where a streamed file's raidz blocks really are, and what that predicts for reading it back.

The speed model lays a file's blocks back to back (planner/performance.py `raidz_work`). This
checks that against the pool: on loop devices capped as in bench/validate_speed.py it writes a
file the way poolbench's `seq-write` does (fio, 1 MiB records, fsync at the end), exports and
imports the pool (cold), reads it back with fio at the cap, then reads every L0 block pointer
of the file with `zdb -ddddd` and lays each block on the members with `raidz_columns` (the
raidz map, parity swap included). From the real offsets it reports:

- runs: how often the first column's member changes between consecutive blocks of a vdev;
- bound(k): the read speed, in disks, if the members work through the file in windows of k
  blocks (time = Σ over windows of the busiest member's data sectors; k = all: whole file);
- the back-to-back model's figure and the measured read, in disks of the cap.

Needs root, fio, zfs-fuse, cgroup v1 blkio. Hold the shared lock:

    flock /tmp/poolbench-heavy.lock python bench/raidz_layout.py --layouts raidz1:4,raidz3:5
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from validate_speed import ASHIFT, LAYOUTS, Env, MiB, capped_env, throttle

from poolbench.planner.layout import parse_layout
from poolbench.planner.performance import vdev_multipliers
from poolbench.planner.raidz_work import raidz_columns

POOL = "pbdiag14"
# zdb -ddddd prints each block pointer as "… L0 VDEV:OFFSET:ASIZE LSIZEL/PSIZEP …" (hex).
BP = re.compile(r"^\s*([0-9a-f]+)\s+L0\s+(\d+):([0-9a-f]+):([0-9a-f]+)\s+([0-9a-f]+)L/([0-9a-f]+)P")


def vdev_words(layout: str, loops: list[str]) -> list[str]:
    words, i = [], 0
    for part in layout.split("+"):
        kind, width = part.split(":")
        words += [kind, *loops[i : i + int(width)]]
        i += int(width)
    return words


def run(env: Env, argv: list[str], check: bool = True) -> str:
    res = env.runner.run(argv, check=False, timeout=900)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {res.stderr[-2000:]}")
    return res.stdout


def fio(env: Env, path: Path, rw: str, size: str) -> float:
    """One fio job over `path` in 1 MiB records; MiB/s as fio reports it."""
    argv = ["fio", "--name=diag", f"--filename={path}", f"--rw={rw}", "--bs=1M",
            f"--size={size}", "--ioengine=psync", "--output-format=json"]  # fmt: skip
    if rw == "write":
        argv += ["--end_fsync=1", "--refill_buffers=1", "--fallocate=none"]
    job = json.loads(run(env, argv))["jobs"][0]
    return float(job["read" if rw == "read" else "write"]["bw_bytes"]) / MiB


def blocks(env: Env, links: Path, obj: int) -> list[tuple[int, int, int, int]]:
    """(file offset, vdev, vdev offset, asize) of every L0 block of `obj`, in file order."""
    out = run(env, ["zdb", "-e", "-p", str(links), "-ddddd", f"{POOL}/", str(obj)], check=False)
    if "L0" not in out:
        out = run(env, ["zdb", "-e", "-p", str(links), "-ddddd", POOL, str(obj)])
    found = [
        (int(m[1], 16), int(m[2]), int(m[3], 16), int(m[4], 16))
        for m in map(BP.match, out.splitlines())
        if m
    ]
    if not found:
        raise RuntimeError(f"no L0 block pointers in zdb's output:\n{out[-2000:]}")
    return sorted(found)


def gaps(bps: list[tuple[int, int, int, int]]) -> list[tuple[int, int]]:
    """(block index, sectors) wherever a block does not start where the vdev's previous block
    of the file ended: the room other allocations (metadata, a metaslab's end) took."""
    end: dict[int, int] = {}
    out = []
    for i, (_, vd, off, asize) in enumerate(bps):
        if vd in end and off != end[vd]:
            out.append((i, (off - end[vd]) >> ASHIFT))
        end[vd] = off + asize
    return out


def windowed_time(loads: list[list[int]], k: int) -> float:
    """Sector-times to read blocks in order with at most k blocks in flight (prefetch): each
    member serves its parts in block order; block i is issued when block i - k is done."""
    free = [0.0] * len(loads[0])
    done: list[float] = []
    for i, row in enumerate(loads):
        issue = done[i - k] if i >= k else 0.0
        for m, n in enumerate(row):
            if n:
                free[m] = max(free[m], issue) + n
        done.append(max(free[m] for m, n in enumerate(row) if n))
    return max(done)


def analyse(layout: str, bps: list[tuple[int, int, int, int]], recordsize: int) -> dict[str, Any]:
    spec = parse_layout(layout, (768 * MiB,) * sum(int(p.split(":")[1]) for p in layout.split("+")))
    widths = [v.width for v in spec.vdevs]
    parities = [v.parity for v in spec.vdevs]
    base = [sum(widths[:i]) for i in range(len(widths))]
    loads: list[list[int]] = []
    runs, last = 0, {}
    for _, vd, off, _ in bps:
        blk = raidz_columns(widths[vd], parities[vd], ASHIFT, off, recordsize)
        row = [0] * sum(widths)
        for m, n in enumerate(blk.read):
            row[base[vd] + m] = n
        loads.append(row)
        first = (off >> ASHIFT) % widths[vd]
        runs += 1 if last.get(vd) != first else 0
        last[vd] = first
    data = sum(map(sum, loads))
    out: dict[str, Any] = {"blocks": len(bps), "runs": runs, "gaps": gaps(bps)}
    for k in (16, 64, 256):
        out[f"window_{k}"] = round(data / windowed_time(loads, k), 2)
    for k in (1, 8, 32, 128, 256, len(loads)):
        busy = sum(
            max(map(sum, zip(*loads[i : i + k], strict=True))) for i in range(0, len(loads), k)
        )
        out[f"bound_{k if k < len(loads) else 'all'}"] = round(data / busy, 2)
    out["model"] = round(sum(vdev_multipliers(v, recordsize, ASHIFT, "transfer")[0]
                             for v in spec.vdevs), 2)  # fmt: skip
    return out


def one(env: Env, layout: str, args: argparse.Namespace) -> dict[str, Any]:
    n = sum(int(p.split(":")[1]) for p in layout.split("+"))
    links = env.work / "links"
    links.mkdir(exist_ok=True)
    for old in links.iterdir():
        old.unlink()
    for dev in env.loops[:n]:
        (links / Path(dev).name).symlink_to(dev)
    mnt = env.work / "mnt"
    run(env, ["zpool", "create", "-f", "-o", f"ashift={ASHIFT}", "-m", str(mnt), POOL,
              *vdev_words(layout, env.loops[:n])])  # fmt: skip
    result: dict[str, Any] = {"layout": layout}
    try:
        for cycle in range(args.cycles):  # a later cycle rewrites: the layout a replicate reads
            f = mnt / "diag.0"
            f.unlink(missing_ok=True)
            w = fio(env, f, "write", args.size)
            obj = f.stat().st_ino
            run(env, ["zpool", "export", POOL])
            bps = blocks(env, links, obj)
            run(env, ["zpool", "import", "-d", str(links), POOL])
            r = fio(env, f, "read", args.size)
            got = analyse(layout, bps, 128 * 1024)
            got["bps"] = bps
            got.update(write_mibs=round(w, 1), read_mibs=round(r, 1),
                       read_disks=round(r / args.mibps, 2), cycle=cycle)  # fmt: skip
            result[f"cycle{cycle}"] = got
            print(layout, json.dumps({k: v for k, v in got.items() if k != "bps"}), flush=True)
    finally:
        destroy(env)
    return result


def destroy(env: Env) -> None:
    """Destroy the pool before its loops go; a busy mount can refuse once, so try again."""
    for _ in range(10):
        res = env.runner.run(["zpool", "destroy", "-f", POOL], check=False, timeout=120)
        listed = env.runner.run(["zpool", "list", "-H", POOL], check=False, mutates=False)
        if listed.returncode != 0:
            return
        print(f"zpool destroy {POOL}: {res.stderr.strip()}; trying again", file=sys.stderr)
        time.sleep(2)
    raise RuntimeError(f"could not destroy {POOL}: destroy it by hand before its loops go")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layouts", default="raidz1:4,raidz3:5,2xraidz1:3")
    ap.add_argument("--mibps", type=int, default=20)
    ap.add_argument("--size", default="128M")
    ap.add_argument("--cycles", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    names = args.layouts.split(",")
    results = []
    db = Path("/nonexistent/pbdiag.db")  # no poolbench store here: nothing for its cleanup
    with capped_env(max(LAYOUTS[x][1] for x in names), db) as env:
        throttle(env, args.mibps * MiB, 0)
        for name in names:
            results.append(one(env, LAYOUTS[name][0], args))
            if args.json:
                args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
