"""How long `poolbench run --dry-run` takes for studies of 1,000 to 10,000 trials.

Issue 13's target: a 10,000-trial study's dry run finishes in at most 5 s. The dry run is the
command a user runs first on a big study, so it must not take longer than reading its output.
Each figure is the whole command as a user runs it (a new interpreter, imports included), with
its output going to pipes as a user's `> plan.txt` would. Only the backend's availability probe
is replaced by a fixed answer (no zfs daemon is needed: the figure is poolbench's own work).

Issue 39: a dry run takes as long whatever max_replicates is (`cap_figures`: the same small
study at a cap of 3 and of 1,000; it used to take 196 s at 1,000).

Run: PYTHONPATH=src python bench/dryrun_scale.py [--json]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECORDSIZES = ["16K", "32K", "64K", "128K", "256K", "512K", "1M", "2M", "4M", "8M"]


def study_text(configs_wanted: int, replicates: int) -> str:
    """A study of `configs_wanted` configurations (layouts x ashifts x recordsizes x ...)."""
    layouts = ["raidz1", "raidz2", "mirror:2+mirror:2", "raidz3", "mirror"]
    compressions = [f"gzip-{i}" for i in range(1, 10)] + ["off", "lz4", "zstd"]
    n_comp = max(1, configs_wanted // (len(layouts) * 5 * len(RECORDSIZES)))
    return (
        f'name = "scale"\nseed = 1\nreplicates = {replicates}\nmax_replicates = {replicates}\n'
        '[disks]\ncount = 5\nsize = "1G"\n'
        f'[factors]\nbackend = ["zfs"]\nlayout = {json.dumps(layouts)}\n'
        f"ashift = [9, 10, 11, 12, 13]\nrecordsize = {json.dumps(RECORDSIZES)}\n"
        f"compression = {json.dumps(compressions[:n_comp])}\n"
        '[workloads]\nsize = "64M"\n'
    )


# The child process: the real `poolbench` entry point with the availability probe answered.
DRIVER = """
import sys
from unittest import mock
from poolbench.backends.base import Availability
from poolbench.backends.zfs import OPENZFS, ZfsBackend
from poolbench.cli.main import main
avail = Availability(True, "", "zfs-2.3.0", OPENZFS)
with mock.patch.object(ZfsBackend, "check", lambda self: avail):
    main(sys.argv[1:])
"""


def time_dry_run(text: str, tmp: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds of the whole command (interpreter start and imports included; CPU
    time does not depend on what else the machine runs), and the trials the plan lists."""
    study = tmp / "study.toml"
    study.write_text(text)
    argv = ["run", str(study), "--dry-run", "--db", str(tmp / "none" / "r.db")]
    argv += ["--scratch-dir", str(tmp / "scratch")]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", DRIVER, *argv], capture_output=True, text=True, env=env, check=False
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    assert p.returncode == 0 and "dry run: nothing was changed" in p.stderr, p.stderr[-2000:]
    assert not (tmp / "none").exists() and not (tmp / "scratch").exists()
    trials = sum(1 for line in p.stdout.splitlines() if ". replicate " in line)
    return seconds, cpu, trials


def cap_study_text(max_replicates: int) -> str:
    """Two configurations, 3 replicates each at stage one, up to `max_replicates`."""
    return (
        f'name = "cap"\nseed = 1\nreplicates = 3\nmax_replicates = {max_replicates}\n'
        '[disks]\ncount = 3\nsize = "1G"\n'
        '[factors]\nbackend = ["zfs"]\nlayout = ["raidz1", "mirror"]\n'
        '[workloads]\nnames = ["seq-write"]\nsize = "64M"\n'
    )


def cap_figures(caps: tuple[int, ...] = (3, 1000)) -> list[dict[str, float]]:
    """Wall and CPU seconds of the dry run of the same study at each cap."""
    rows = []
    for cap in caps:
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu, _ = time_dry_run(cap_study_text(cap), Path(tmp))
        rows.append({"max_replicates": cap, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
    return rows


def main_bench() -> list[dict[str, float]]:
    """The figures for docs/dryrun-scale.md."""
    rows = []
    for configs_wanted, replicates in ((500, 2), (1000, 2), (2500, 2), (2500, 4)):
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu, trials = time_dry_run(study_text(configs_wanted, replicates), Path(tmp))
        rows.append(
            {
                "trials": trials,
                "configurations": trials // replicates,
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
            }
        )
    return rows


if __name__ == "__main__":
    results = main_bench()
    caps = cap_figures()
    if "--json" in sys.argv:
        print(json.dumps({"scale": results, "caps": caps}, indent=2))
    else:
        for c in caps:
            print(
                f"max_replicates {c['max_replicates']:>5}: {c['wall_s']:.2f} s wall, "
                f"{c['cpu_s']:.2f} s CPU"
            )
        for r in results:
            print(
                f"{r['trials']:>6} trials ({r['configurations']} configurations): "
                f"{r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} s CPU"
            )
