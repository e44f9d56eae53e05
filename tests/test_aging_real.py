"""The aging recipe on real pools, small and in-process: a zfs-fuse mirror and a btrfs raid1,
each on 2 × 128 MiB loop disks (btrfs's smallest), built by their backends, aged one round
to 30% by factors/aging.age_pool (the step a study's trial runs before its workloads), torn
down by the journal. The recorded age is checked against what the recipe must reach: the
rounds asked, its own live bytes exactly the fill level of the room statfs offered, and the
room the files took by statfs within a few percent of it (the stack's metadata on top).
The study around it (`poolbench study aging`) is checked by its dry run and the in-process
tests of tests/test_aging_study.py."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from poolbench.backends import registry, sources
from poolbench.backends.base import PoolSpec
from poolbench.factors import aging
from poolbench.records import sections
from poolbench.safety.journal import Journal
from poolbench.system.runner import LocalRunner

pytestmark = pytest.mark.untimed
MiB = 1 << 20
FILL = 30


def _age(backend_name: str, layout: str) -> sections.AgeRecord:
    runner = LocalRunner()
    journal = Journal(runner)
    backend = registry.make(backend_name, runner)
    base = Path(tempfile.mkdtemp(prefix="pbaging-", dir="/var/tmp"))  # not tmpfs: loop disks
    try:
        devs = sources.provide(runner, journal, source="loop", scratch=base / "disks",
                               sizes=[128 * MiB] * 2).devices  # fmt: skip
        spec = PoolSpec(backend_name, layout, tuple(devs), f"pbag{secrets.token_hex(3)}", base)
        pool = backend.create(spec, journal)
        return aging.age_pool(backend, pool, {"aging": "1", "fill": str(FILL)}, 4 * MiB, 9)
    finally:
        left = journal.teardown()
        shutil.rmtree(base, ignore_errors=True)
        assert left == [], left


def _check(age: dict[str, Any], tolerance: float) -> None:
    assert (age["rounds"], age["rounds_asked"], age["fill_percent_asked"]) == (1, 1, FILL)
    assert age["live_bytes"] == age["usable_bytes"] * FILL // 100  # the recipe's own count
    # statfs: the room the files took, their metadata included; btrfs's f_bavail is itself
    # an estimate (unallocated space over the profile's copies), hence its wider tolerance
    assert abs(age["achieved_percent"] - FILL) <= tolerance, age
    assert age["operations"]["delete"] > 0 and age["operations"]["overwrite"] > 0
    assert age["bytes_written"] > age["live_bytes"]
    assert 64 * MiB <= age["usable_bytes"] <= 128 * MiB  # a 2-way mirror of 128 MiB disks


def test_aging_a_zfs_fuse_mirror_reaches_its_fill(zfs_fuse: None) -> None:
    age = _age("zfs", "mirror:2")
    _check(dict(age), tolerance=4)  # measured 40.9 at 40%
    assert age["frag_percent"] is None and "zfs-fuse (pool version 23)" in age["frag_how"]


@pytest.mark.usefixtures("machine")  # btrfs on loop devices made here
@pytest.mark.slow
def test_aging_a_btrfs_raid1_reaches_its_fill() -> None:
    age = _age("btrfs", "raid1")
    _check(dict(age), tolerance=8)  # measured 35.4 at 40%
    assert age["frag_percent"] is None and age["frag_how"].startswith("none: btrfs has no")
