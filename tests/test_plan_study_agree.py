"""`plan --disks 6x4TB` and `study capacity --disks 6x4TB --dry-run` describe the same disks
(4 × 10^12 bytes each), end to end as a user runs them. The dry run needs zfs-fuse to answer
(root), so this lives apart from the pure planner CLI tests; run it under the heavy lock:
    flock /tmp/poolbench-heavy.lock python -m pytest tests/test_plan_study_agree.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.conftest import poolbench

pytestmark = pytest.mark.untimed


def test_plan_and_study_dry_run_describe_the_same_disk_size(zfs_fuse: None, tmp_path: Path) -> None:
    planned = poolbench("plan", "--disks", "6x4TB", "--top", "1", "--json")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["disks"] == [4 * 10**12] * 6
    dry = poolbench(
        "study", "capacity", "--disks", "6x4TB", "--dry-run", "--db", str(tmp_path / "r.db"),
        "--scratch-dir", str(tmp_path / "scratch"), "--seed", "1",
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    m = re.search(r"disks: 6 sparse files as loop devices of 4TB = ([\d,]+) bytes each", dry.stdout)
    assert m, dry.stdout
    assert int(m.group(1).replace(",", "")) == 4 * 10**12
    assert not (tmp_path / "scratch").exists()
