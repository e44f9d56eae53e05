"""`poolbench demo`: the embedded default — a real study on sparse-file disks."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from poolbench.cli.common import (
    MAX_ID,
    WholeNumber,
    a_path,
    db_option,
    min_window_option,
    open_store,
    override_min_window,
)
from poolbench.cli.study_exec import execute_study
from poolbench.engine import trial_loop
from poolbench.engine.study_lifecycle import StudyRequest
from poolbench.engine.zfs_daemon import larger_arc, zfs_available
from poolbench.errors import UsageError
from poolbench.store.db import resume_command
from poolbench.study.model import parse
from poolbench.system import throttle
from poolbench.system.runner import LocalRunner

# The demo's disks are capped where this kernel can cap a loop device (system/throttle.py):
# then layouts differ by their structure, not by this machine's jitter, the planner knows
# the disks' speed, and the answer can be checked against it (raidz1 of 4 writes with 3 data
# disks, raidz2 with 2: about 55 against 37 MiB/s at 19 MiB/s a disk; docs/planner.md).
# 19, so that every window moves less than 80 MiB/s (4 x 19 = 76 at the most): a round of
# the steady-state rule then lasts 2 s or more (8 MiB quanta, below), long enough to hold
# 12 quanta or more of every stream. Faster disks make one-second rounds of 10-14 quanta,
# where one quantum more or less is 7-10% of a round, and a raidz1 read, whose rate swings
# with where the small transaction groups put its parity (5% a second, 3.3% over two,
# measured), broke the rule's 10% slope in 3 of 15 windows at 28 MiB/s (1 of 3 at 32: its
# write's range too). docs/demo.md has the runs.
CAP_MIB_S = 19

# The ARC of the zfs-fuse daemon the demo starts for itself (--max-arc-size, zfs-fuse's
# smallest). zfs-fuse admits a stream of writes half its ARC at a time (engine/quanta.py),
# and the steady-state rule needs rounds of ten such quanta and three rounds a window
# (stats/steady.py): at its default ARC of 100 MiB that is 1.5 GiB a window; at 16 MiB,
# 8 MiB quanta, 240 MiB. A daemon that already runs (the user's) is used as it is.
DEMO_ARC_MIB = 16

ZFS_DEMO = """
name = "demo-zfs"
description = "raidz1 vs raidz2 on 4 sparse-file disks{capped}"
replicates = 3
max_replicates = 5
ci_target = 10.0

[disks]
count = 4
size = "512M"
source = "loop"{cap}

[factors]
backend = ["zfs"]
layout = ["raidz1", "raidz2"]
ashift = [12]

[workloads]
names = ["seq-write", "seq-read"]
size = "{size}"
"""

BTRFS_DEMO = """
name = "demo-btrfs"
description = "btrfs raid1 vs raid10 vs raid5 on 4 sparse-file disks{capped} (no ZFS here)"
replicates = 3
max_replicates = 5
ci_target = 10.0

[disks]
count = 4
size = "512M"
source = "loop"{cap}

[factors]
backend = ["btrfs"]
layout = ["raid1", "raid10", "raid5"]

[workloads]
names = ["seq-write", "seq-read"]
size = "{size}"
"""


# The working set on capped disks: every window must hold three rounds of the steady-state
# rule after its last second (a write's closing fsync, left out of the rounds), a round
# being ceil(10 quanta / rate) seconds: 1 s at 80 MiB/s or more, 2 s from 40 to 80 MiB/s
# (8 MiB quanta), 3 s from 26.7 to 40. 576 MiB lasts at least 7.6 s at the most any layout
# can move, 4 x 19 = 76 MiB/s (a cold read of all four disks, never repeated to fill its
# window): seven one-second samples, as three rounds of 2 s and the last second need. The
# planner's rates: raidz1 writes 55.3 (2 s rounds), raidz2 36.8 (3 s: ten samples needed,
# 576 MiB make 15 or more), reads 55.3-76 MiB/s. See docs/demo.md.
CAPPED_SIZE_MIB = 576


def demo_text(zfs: bool, capped: bool) -> str:
    """The demo's study file: capped disks and a working set whose every window lasts the
    minimum at their speed, or (no cap here) the sparse files as fast as this machine's
    disk is."""
    text = ZFS_DEMO if zfs else BTRFS_DEMO
    if capped:
        return text.format(capped=f" capped at {CAP_MIB_S} MiB/s each",
                           cap=f"\ncap = {CAP_MIB_S}", size=f"{CAPPED_SIZE_MIB}M")  # fmt: skip
    return text.format(capped="", cap="", size="128M")


@click.command()
@click.option("--dry-run", is_flag=True, help="Print the plan and every command; change nothing.")
@click.option("--scratch-dir", callback=a_path, default=None)
@click.option(
    "--resume",
    type=WholeNumber(1, MAX_ID),
    default=None,
    metavar="RUN",
    help="Finish an interrupted demo run: only its missing measurements, then its answer.",
)
@min_window_option
@db_option
def demo(
    dry_run: bool,
    scratch_dir: Path | None,
    resume: int | None,
    min_window: float | None,
    db: Path | None,
) -> None:
    """Run a short real study on sparse-file disks: the embedded default.

    Uses the best ZFS available (OpenZFS, else zfs-fuse — its daemon started for the demo,
    with a 16 MiB ARC, and stopped afterwards), else btrfs on loop devices: raidz1 vs raidz2
    on 4 disks capped at 19 MiB/s each where the kernel can cap a loop device (cgroup v1
    blkio), streaming write and cold read, 3+ replicates each, then the answer beside the
    planner's prediction.

    Example: sudo poolbench demo
    """
    console = Console()
    runner = LocalRunner(dry_run=dry_run)
    no_cap = throttle.unavailable()
    if resume is not None:  # zfs-fuse started as the demo starts it, if none answers
        request = _resumed(resume, db, scratch_dir)
        console.print(f"poolbench demo: {request.study.description}; resuming run {resume}.")
        with zfs_available(runner, DEMO_ARC_MIB):
            execute_study(request, dry_run=dry_run, console=console)
        return
    with zfs_available(runner, DEMO_ARC_MIB) as zfs:
        text = demo_text(zfs or dry_run, capped=not no_cap)
        study = override_min_window(parse(text, "demo"), min_window)
        # What sparse-file disks can and cannot show is said once, in the report's header.
        console.print(f"poolbench demo: {study.description}.")
        for note in (
            f"the disks run uncapped, at this machine's own speed: {no_cap}. Layouts may "
            "then differ by this machine's jitter more than by their structure." if no_cap else "",
            "" if dry_run or not zfs else larger_arc(DEMO_ARC_MIB),
        ):  # fmt: skip
            if note:
                console.print(f"note: {note}", markup=False, highlight=False)
        request = StudyRequest(study, text, db, scratch_dir=scratch_dir, command="demo")
        execute_study(request, dry_run=dry_run, console=console)


def _resumed(run_id: int, db: Path | None, scratch_dir: Path | None) -> StudyRequest:
    """A stored demo run, to finish as `run --resume` would (its study, seed and window)."""
    store = open_store(db, "read")
    try:
        study, text, seed = trial_loop.load_resume(store, run_id)
        path = store.path
    finally:
        store.close()
    if study.name not in ("demo-zfs", "demo-btrfs"):
        raise UsageError(
            f"Run {run_id} is not a demo run (its study is '{study.name}').",
            f"Resume it with: {resume_command(path, run_id)}",
        )
    return StudyRequest(study, text, db, run_id, seed, scratch_dir, command="demo")
