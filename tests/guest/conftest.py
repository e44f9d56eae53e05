"""The OpenZFS guest tier: tests marked ``openzfs`` run only inside the QEMU guest that
``vm/run-openzfs-tier.sh`` boots (real OpenZFS 2.3 kernel module, scratch disks). Everywhere
else they are skipped with that reason, so the default suite never builds or boots the VM.

The guest's init sets ``POOLBENCH_OPENZFS_GUEST=1`` and ``OZVM_DISKS`` (the scratch disks,
space-separated, e.g. ``/dev/vdb /dev/vdc``); ``OZVM_OUT`` is a directory the host sees.
"""

from __future__ import annotations

import os

import pytest

IN_OPENZFS_GUEST = os.environ.get("POOLBENCH_OPENZFS_GUEST") == "1"
SKIP_REASON = "runs in the OpenZFS guest tier: vm/run-openzfs-tier.sh"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "openzfs: needs real OpenZFS 2.x; runs only in the guest tier (vm/)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Called with every collected item of the session, so this also covers `openzfs` tests
    # outside tests/guest/ whenever this directory is collected too (e.g. `pytest -m openzfs`).
    if IN_OPENZFS_GUEST:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if item.get_closest_marker("openzfs") is not None:
            item.add_marker(skip)
