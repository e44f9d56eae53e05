"""Benchmark: does poolbench report what raw fio reports for the identical job? Target ≥ 0.98.

Runs on a private tmpfs (so the device is RAM and any overhead poolbench adds would show) and
alternates, in one process, `poolbench bench` with raw `fio` running the very job files
poolbench stored for that run (same options, same data pattern, same fsync). Prints the ratio
of means per workload. Needs root (mount). Record the figures in docs/overhead.md.

Run: sudo .venv/bin/python bench/fio_overhead.py [rounds]
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOADS = ("seq-write", "seq-read")
SIZE = "512M"


def poolbench_round(target: Path, db: Path) -> tuple[dict[str, float], dict[str, str]]:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "poolbench",
            "bench",
            str(target),
            "--size",
            SIZE,
            "--workloads",
            ",".join(WORKLOADS),
            "--min-runs",
            "3",
            "--max-runs",
            "3",
            "--json",
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(p.stdout)
    means = {r["workload"]: r["mean"] for r in out["results"]}
    con = sqlite3.connect(db)
    jobs = {
        w: j
        for w, j in con.execute(
            "SELECT workload, job_file FROM measurements WHERE run_id = ?", (out["run_id"],)
        )
    }
    return means, jobs


def raw_fio(job: str, workdir: Path) -> float:
    lines = [
        f"directory={workdir}" if line.startswith("directory=") else line
        for line in job.splitlines()
    ]
    path = workdir / "job.fio"
    path.write_text("\n".join(lines) + "\n")
    p = subprocess.run(
        ["fio", "--output-format=json", str(path)], capture_output=True, text=True, check=True
    )
    data = json.loads(p.stdout[p.stdout.index("{") :])
    job0 = data["jobs"][0]
    sec = "write" if job0["write"]["io_bytes"] else "read"
    return job0[sec]["io_bytes"] / (job0[sec]["runtime"] / 1000) / 2**20


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    base = Path(tempfile.mkdtemp(prefix="pb-overhead-"))
    mnt = base / "tmpfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200m", "pbov", str(mnt)], check=True)
    pb: dict[str, list[float]] = {w: [] for w in WORKLOADS}
    raw: dict[str, list[float]] = {w: [] for w in WORKLOADS}
    try:
        for _ in range(rounds):
            means, jobs = poolbench_round(mnt, base / "r.db")
            for w in WORKLOADS:
                pb[w].append(means[w])
            work = mnt / "raw"
            work.mkdir()
            for _rep in range(3):
                for w in WORKLOADS:  # write first: it leaves the file the read needs
                    if w == "seq-write":
                        # poolbench writes a fresh file (it deletes the old one first).
                        (work / "data.0").unlink(missing_ok=True)
                    raw[w].append(raw_fio(jobs[w], work))
            subprocess.run(["rm", "-rf", str(work)], check=True)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        subprocess.run(["rm", "-rf", str(base)], check=False)
    print(f"{'workload':<10} {'poolbench MiB/s':>16} {'raw fio MiB/s':>14} {'ratio':>6}")
    for w in WORKLOADS:
        a, b = statistics.mean(pb[w]), statistics.mean(raw[w])
        print(f"{w:<10} {a:>16,.0f} {b:>14,.0f} {a / b:>6.3f}")


if __name__ == "__main__":
    main()
