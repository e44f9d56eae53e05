"""Host side of the OpenZFS guest tier, cheap: the guest tests are skipped here with the
reason that says where they run, and the tier's scripts parse. Nothing here boots the VM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import IN_OPENZFS_GUEST, SKIP_REASON

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@pytest.mark.skipif(IN_OPENZFS_GUEST, reason="checks the host side")
def test_guest_tests_are_skipped_on_the_host_with_the_tier_reason() -> None:
    env = {k: v for k, v in os.environ.items() if k != "POOLBENCH_OPENZFS_GUEST"}
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         str(HERE / "test_openzfs_planner.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert SKIP_REASON in p.stdout
    assert " passed" not in p.stdout and " failed" not in p.stdout, p.stdout


@pytest.mark.parametrize("script", ["ozvm.sh", "run-openzfs-tier.sh", "guest/pytest.sh"])
def test_tier_scripts_parse(script: str) -> None:
    p = subprocess.run(["bash", "-n", str(ROOT / "vm" / script)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
