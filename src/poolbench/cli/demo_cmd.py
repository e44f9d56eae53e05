"""`poolbench demo`: the embedded default — a real study on sparse-file disks."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from poolbench.cli.common import db_option, min_window_option, override_min_window
from poolbench.cli.study_exec import execute_study
from poolbench.engine.zfs_daemon import zfs_available
from poolbench.study.model import parse
from poolbench.system.runner import LocalRunner

ZFS_DEMO = """
name = "demo-zfs"
description = "raidz1 vs raidz2, ashift 9 vs 12, on 4 sparse-file disks"
replicates = 3
max_replicates = 4
ci_target = 10.0

[disks]
count = 4
size = "512M"
source = "loop"

[factors]
backend = ["zfs"]
layout = ["raidz1", "raidz2"]
ashift = [9, 12]

[workloads]
names = ["seq-write", "seq-read"]
size = "128M"
"""

BTRFS_DEMO = """
name = "demo-btrfs"
description = "btrfs raid1 vs raid10 vs raid5 on 4 sparse-file disks (no ZFS on this machine)"
replicates = 3
max_replicates = 4
ci_target = 10.0

[disks]
count = 4
size = "512M"
source = "loop"

[factors]
backend = ["btrfs"]
layout = ["raid1", "raid10", "raid5"]

[workloads]
names = ["seq-write", "seq-read"]
size = "128M"
"""


@click.command()
@click.option("--dry-run", is_flag=True, help="Print the plan and every command; change nothing.")
@click.option("--scratch-dir", type=click.Path(path_type=Path), default=None)
@min_window_option
@db_option
def demo(
    dry_run: bool, scratch_dir: Path | None, min_window: float | None, db: Path | None
) -> None:
    """Run a short real study on sparse-file disks: the embedded default.

    Uses the best ZFS available (OpenZFS, else zfs-fuse — its daemon started for the demo and
    stopped afterwards), else btrfs on loop devices: raidz1 vs raidz2 and ashift 9 vs 12,
    streaming write and cold read, 3+ replicates each, then the result table.

    Example: sudo poolbench demo
    """
    console = Console()
    runner = LocalRunner(dry_run=dry_run)
    with zfs_available(runner) as zfs:
        text = ZFS_DEMO if zfs or dry_run else BTRFS_DEMO
        study = override_min_window(parse(text, "demo"), min_window)
        # What sparse-file disks can and cannot show is said once, in the report's header.
        console.print(f"poolbench demo: {study.description}.")
        execute_study(study, text, db=db, dry_run=dry_run, scratch_dir=scratch_dir, console=console)
