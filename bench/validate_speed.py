"""Validate the planner's speed model on disks whose speed is known exactly.

Each "disk" is a loop device (--direct-io=on) over a sparse file on a private tmpfs, capped in
the ROOT blkio cgroup (cgroup v1) so every bio that reaches it is throttled, whoever submits
it (a child cgroup would miss zfs-fuse's and the kernel's own writeback). Two passes per layout:

- stream: throughput cap only (MIBPS per disk): `seq-write`, `seq-read` (1 MiB records,
  recordsize 128K, cold reads by export/import in the engine);
- random: IOPS cap (IOPS per disk; the throughput cap stays but does not bind at 4 KiB):
  `rand-read-4k`, `rand-write-4k` with JOBS concurrent jobs, recordsize 4K and
  primarycache=metadata, so every data read reaches a disk and no read-modify-write hides.

Measurements go through poolbench's own CLI (`python -m poolbench run STUDY --disks /dev/loop…`,
the safety layer included) and are read back with `poolbench export --json`; predictions come
from the planner (planner/performance.py, planner/capacity.py). For each layout it prints
predicted, measured and measured/predicted, and the device write amplification (device bytes
written / application bytes) beside the planner's allocation table for the record size.

Needs root, fio and zfs-fuse. Hold the shared lock:

    flock /tmp/poolbench-heavy.lock python bench/validate_speed.py --layouts raidz2:4,mirror:2

Everything it makes (tmpfs, loops, caps, pools, a zfs-fuse daemon it started) is removed on
exit, on error and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.performance import DiskSpeed, Prediction, predict_detailed
from poolbench.planner.rules import V23
from poolbench.planner.space import psize_to_asize
from poolbench.system.runner import LocalRunner

MiB = 1 << 20
BLKIO = Path("/sys/fs/cgroup/blkio")
DISK_SIZE = "768M"
ASHIFT = 12
# Study layout (poolbench run's grammar) and how many disks it takes.
LAYOUTS: dict[str, tuple[str, int]] = {
    "stripe:4": ("stripe:4", 4),
    "mirror:2": ("mirror:2", 2),
    "mirror:3": ("mirror:3", 3),
    "2xmirror:2": ("mirror:2+mirror:2", 4),
    "raidz1:4": ("raidz1:4", 4),
    "raidz1:6": ("raidz1:6", 6),
    "raidz2:4": ("raidz2:4", 4),
    "raidz2:6": ("raidz2:6", 6),
    "raidz3:5": ("raidz3:5", 5),
    "raidz3:6": ("raidz3:6", 6),
    "2xraidz1:3": ("raidz1:3+raidz1:3", 6),
}
PASSES = {
    "stream": (("seq-write", "seq-read"), "128K", "all"),
    "random": (("rand-read-4k", "rand-write-4k"), "4K", "metadata"),
}
# (workload) -> (Prediction attribute, unit divisor to compare with the stored value)
FIGURE = {
    "seq-write": ("write_bps", MiB),
    "seq-read": ("read_bps", MiB),
    "rand-read-4k": ("read_iops", 1),
    "rand-write-4k": ("write_iops", 1),
}
STREAM_TOL, RANDOM_TOL = 0.15, 0.25


@dataclass
class Env:
    runner: LocalRunner
    work: Path
    loops: list[str] = field(default_factory=list)
    majmin: dict[str, str] = field(default_factory=dict)
    daemon_pid: int | None = None
    tmpfs: bool = False


def _on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # the same cleanup as Ctrl-C


def throttle(env: Env, bps: int, iops: int) -> None:
    """Cap every loop in the root blkio cgroup (0 = no limit)."""
    for dev in env.loops:
        mm = env.majmin[dev]
        for kind, value in (("bps", bps), ("iops", iops)):
            for rw in ("read", "write"):
                (BLKIO / f"blkio.throttle.{rw}_{kind}_device").write_text(f"{mm} {value}\n")


def zpool_answers(env: Env) -> bool:
    return env.runner.run(["zpool", "list", "-H"], check=False, mutates=False).returncode == 0


def start_zfs_fuse(env: Env) -> None:
    """Use a running zfs-fuse; otherwise start one and remember its pid (stopped at exit)."""
    if zpool_answers(env):
        return
    pidfile = env.work / "zfs-fuse.pid"
    env.runner.run(["zfs-fuse", "--pidfile", str(pidfile)], reap_group=False)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip() and zpool_answers(env)):
        if time.monotonic() > deadline:
            raise RuntimeError("started zfs-fuse but it did not answer within 30 s")
        time.sleep(0.2)
    env.daemon_pid = int(pidfile.read_text().strip())


def make_disks(env: Env, n: int) -> None:
    ram = env.work / "ram"
    ram.mkdir()
    env.runner.run(["mount", "-t", "tmpfs", "-o", "size=3g", "pbvalidate", str(ram)])
    env.tmpfs = True
    for i in range(n):
        img = ram / f"d{i}.img"
        env.runner.run(["truncate", "-s", DISK_SIZE, str(img)])
        dev = env.runner.run(["losetup", "--find", "--show", "--direct-io=on", str(img)])
        name = dev.stdout.strip()
        env.loops.append(name)
        st = os.stat(name)
        env.majmin[name] = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def teardown(env: Env, db: Path) -> None:
    """Best effort, every step on its own: caps to 0, leftover pools, loops, tmpfs, daemon."""
    try:
        throttle(env, 0, 0)
    except OSError as exc:
        print(f"warning: could not reset a throttle: {exc}", file=sys.stderr)
    if db.exists():
        poolbench(env, ["cleanup", "--db", str(db)], check=False)
    for dev in env.loops:
        env.runner.run(["losetup", "--detach", dev], check=False)
    if env.tmpfs:
        env.runner.run(["umount", str(env.work / "ram")], check=False)
    if env.daemon_pid is not None:
        os.kill(env.daemon_pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{env.daemon_pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)


@contextmanager
def capped_env(n: int, db: Path) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="pbvalidate-", dir="/var/tmp"))
    env = Env(LocalRunner(), work)
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        start_zfs_fuse(env)
        make_disks(env, n)
        yield env
    finally:
        teardown(env, db)
        signal.signal(signal.SIGTERM, old)
        env.runner.run(["rm", "-rf", str(work)], check=False)


def poolbench(env: Env, args: list[str], check: bool = True) -> str:
    res = env.runner.run([sys.executable, "-m", "poolbench", *args], check=False, timeout=900)
    if check and res.returncode != 0:
        raise RuntimeError(f"poolbench {' '.join(args)} failed:\n{res.stderr[-3000:]}")
    return res.stdout


def study_text(name: str, layout: str, pass_name: str, args: argparse.Namespace) -> str:
    workloads, recordsize, cache = PASSES[pass_name]
    return "\n".join(
        [
            f'name = "validate-{name.replace(":", "-")}-{pass_name}"',
            "replicates = 2",
            "max_replicates = 2",
            "ci_target = 10.0",
            "seed = 1",
            "[factors]",
            'backend = ["zfs"]',
            f'layout = ["{layout}"]',
            f"ashift = [{ASHIFT}]",
            f'recordsize = ["{recordsize}"]',
            f'primarycache = ["{cache}"]',
            "[workloads]",
            "names = [" + ", ".join(f'"{w}"' for w in workloads) + "]",
            f'size = "{args.size}"',
            f"runtime = {args.runtime}",
            f"jobs = {args.jobs if pass_name == 'random' else 1}",
            "",
        ]
    )


def measure(env: Env, name: str, pass_name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One pass of one layout through `poolbench run`; per workload: mean value, device
    bytes / application bytes, and the warnings poolbench attached."""
    layout, n = LAYOUTS[name]
    study = env.work / f"{name.replace(':', '-')}-{pass_name}.toml"
    study.write_text(study_text(name, layout, pass_name, args))
    poolbench(env, ["run", str(study), "--disks", ",".join(env.loops[:n]), "--db", str(args.db)])
    doc = json.loads(poolbench(env, ["export", "latest", "--json", "--db", str(args.db)]))
    out: dict[str, Any] = {}
    for wl in PASSES[pass_name][0]:
        rows = [m for m in doc["measurements"] if m["workload"] == wl]
        app = sum(int(m["app_bytes"]) for m in rows)
        dev = sum(int(m["device_bytes"] or 0) for m in rows)
        out[wl] = {
            "values": [float(m["value"]) for m in rows],
            "mean": sum(float(m["value"]) for m in rows) / len(rows),
            "device_per_app": dev / app if app else None,
            "member_read_shares": _member_read_shares(rows, "read_bytes"),
            "member_request_shares": _member_read_shares(rows, "read_ios"),
            "device_reads_per_read": _device_reads_per_read(rows),
            "warnings": sorted({w for m in rows for w in _warnings(m)}),
        }
    return out


def _members(m: dict[str, Any]) -> dict[str, dict[str, Any]]:
    g = m.get("guards")
    found = (json.loads(g) if isinstance(g, str) else g or {}).get("members")
    return found if isinstance(found, dict) else {}


def _member_read_shares(rows: list[dict[str, Any]], key: str) -> list[float]:
    """Each member's share of what the members read (bytes or requests; sorted): a random-read
    figure below "every member busy" with even shares is queueing, with uneven ones placement:
    an IOPS cap binds on the member with the largest share of the requests."""
    per: dict[str, int] = {}
    for m in rows:
        for name, d in _members(m).items():
            per[name] = per.get(name, 0) + int(d.get(key) or 0)
    total = sum(per.values())
    return sorted(round(v / total, 3) for v in per.values()) if total else []


def _device_reads_per_read(rows: list[dict[str, Any]]) -> float | None:
    """Read requests the members completed per application read. The IOPS cap counts
    requests, so a layout whose reads each cost more than one request (metadata, read-ahead,
    reconstruction) reaches its cap at fewer application reads."""
    device = sum(int(d.get("read_ios") or 0) for m in rows for d in _members(m).values())
    app = sum(int(m["ops"]) for m in rows)
    return round(device / app, 3) if device and app else None


def _warnings(m: dict[str, Any]) -> list[str]:
    w = m.get("warnings") or []
    return [str(x) for x in (json.loads(w) if isinstance(w, str) else w)]


def predicted(
    name: str, args: argparse.Namespace
) -> dict[str, tuple[Prediction, float, Prediction]]:
    """Per workload: the model's figure (its unit as stored), the planner's write
    amplification for the pass's record size (raw bytes on the members / block), and the
    figure with the queueing rule for `jobs` requests in flight (for comparison)."""
    layout, n = LAYOUTS[name]
    spec = parse_layout(layout, (768 * MiB,) * n)
    mib = args.mibps * MiB
    disk = DiskSpeed(mib, mib, args.iops, args.iops, "capped loop", "transfer")
    plan = plan_pool(spec, ASHIFT, V23)
    out = {}
    for workloads, recordsize, _ in PASSES.values():
        rs = 128 * 1024 if recordsize == "128K" else 4096
        # The plan's figure (every member busy) and the queueing rule for `jobs` in flight.
        pred = predict_detailed(spec, disk, recordsize=rs, ashift=ASHIFT)
        queued = predict_detailed(spec, disk, recordsize=rs, ashift=ASHIFT, outstanding=args.jobs)
        raw = sum(
            psize_to_asize(v.spec, rs, ASHIFT) * (v.spec.width if v.spec.kind == "mirror" else 1)
            for v in plan.vdevs
        ) / len(plan.vdevs)
        for wl in workloads:
            out[wl] = (pred, raw / rs, queued)
    return out


def row(
    name: str, wl: str, got: dict[str, Any], pred: tuple[Prediction, float, Prediction]
) -> dict[str, Any]:
    attr, unit = FIGURE[wl]
    p, amp, q = pred
    q_value = getattr(q, attr).value / unit
    figure = getattr(p, attr)
    value = figure.value / unit
    tol = STREAM_TOL if wl.startswith("seq") else RANDOM_TOL
    ratio = got["mean"] / value if value else None
    return {
        "layout": name,
        "workload": wl,
        "predicted": round(value, 1),
        "measured": round(got["mean"], 1),
        "ratio": round(ratio, 3) if ratio else None,
        "within": ratio is not None and abs(ratio - 1) <= tol,
        "ratio_queued": round(got["mean"] / q_value, 3) if q_value else None,
        "basis": figure.basis,
        "device_per_app": round(got["device_per_app"], 3) if got["device_per_app"] else None,
        # absent where the members recorded nothing (plain files, or an older store)
        "member_read_shares": got.get("member_read_shares", []),
        "member_request_shares": got.get("member_request_shares", []),
        "device_reads_per_read": got.get("device_reads_per_read"),
        "planner_write_amp": round(amp, 3) if wl.startswith(("seq-write", "rand-write")) else None,
        "warnings": got["warnings"],
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = f"{'layout':<11} {'workload':<14} {'pred':>8} {'meas':>8} {'ratio':>6} ok  "
    print(head + f"{'queued':>6} {'dev/app':>7} {'plan amp':>8}  model")
    for r in rows:
        ok = "yes" if r["within"] else "NO "
        amp = f"{r['planner_write_amp']:.3f}" if r["planner_write_amp"] else "-"
        dpa = f"{r['device_per_app']:.3f}" if r["device_per_app"] else "-"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "-"
        queued = (
            f"{r['ratio_queued']:.2f}"
            if r["ratio_queued"] and "rand-read" in r["workload"]
            else "-"
        )
        print(
            f"{r['layout']:<11} {r['workload']:<14} {r['predicted']:>8.1f} {r['measured']:>8.1f} "
            f"{ratio:>6} {ok} {queued:>6} {dpa:>7} {amp:>8}  {r['basis']}"
        )
        if "read" in r["workload"] and r["member_read_shares"]:
            shares = " ".join(f"{x:.3f}" for x in r["member_read_shares"])
            asks = " ".join(f"{x:.3f}" for x in r["member_request_shares"])
            per = r["device_reads_per_read"]
            print(f"{'':<11} member shares of the bytes read: {shares}; of the read requests: "
                  f"{asks}; device reads per application read: "
                  f"{per if per is not None else '-'}")  # fmt: skip
        for w in r["warnings"]:
            print(f"{'':<11} warning: {w[:150]}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help=", ".join(LAYOUTS))
    ap.add_argument("--passes", default="stream,random", help="stream, random or both")
    ap.add_argument("--mibps", type=int, default=20, help="throughput cap per disk, MiB/s")
    ap.add_argument("--iops", type=int, default=150, help="IOPS cap per disk (random pass)")
    ap.add_argument("--size", default="160M", help="working set per configuration")
    ap.add_argument("--runtime", type=int, default=6, help="seconds per random run")
    ap.add_argument("--jobs", type=int, default=8, help="concurrent jobs in the random pass")
    ap.add_argument("--db", type=Path, default=None, help="result store (default: temporary)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    args = ap.parse_args(argv)
    bad = [x for x in args.layouts.split(",") if x not in LAYOUTS]
    bad += [x for x in args.passes.split(",") if x not in PASSES]
    if bad:
        ap.error(f"unknown layout or pass: {', '.join(bad)}")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0 or not (BLKIO / "blkio.throttle.read_bps_device").exists():
        print("validate_speed needs root and cgroup v1 blkio (/sys/fs/cgroup/blkio).")
        return 2
    names = args.layouts.split(",")
    keep_db = args.db is not None
    args.db = args.db or Path(tempfile.mkdtemp(prefix="pbvalidate-db-", dir="/var/tmp")) / "r.db"
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    with capped_env(max(LAYOUTS[n][1] for n in names), args.db) as env:
        for name in names:
            preds = predicted(name, args)
            for pass_name in args.passes.split(","):
                bps, iops = args.mibps * MiB, (args.iops if pass_name == "random" else 0)
                throttle(env, bps, iops)
                try:
                    got = measure(env, name, pass_name, args)
                except RuntimeError as exc:  # one failed layout must not cost the others
                    print(f"{name} {pass_name}: FAILED: {exc}", flush=True)
                    continue
                new = [row(name, wl, got[wl], preds[wl]) for wl in PASSES[pass_name][0]]
                rows += new
                print(f"[{time.monotonic() - started:5.0f}s] {name} {pass_name}", flush=True)
                print_table(new)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=2))
    print(f"\ncaps: {args.mibps} MiB/s per disk (stream pass), {args.iops} IOPS per disk "
          f"(random pass, {args.jobs} jobs); working set {args.size}; ashift {ASHIFT}; "
          f"zfs-fuse; {time.strftime('%Y-%m-%d %H:%M %Z')}")  # fmt: skip
    print_table(rows)
    if not keep_db:
        LocalRunner().run(["rm", "-rf", str(args.db.parent)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
