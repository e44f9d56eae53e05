"""What this machine offers a built-in study: the ZFS dialect in use and whether the kernel
has md. Read-only (the backends' own checks, through a dry-run runner that still runs
read-only probes); the CLI turns the answer into a study Context."""

from __future__ import annotations

from dataclasses import dataclass

from poolbench.backends.md import MdBackend
from poolbench.backends.zfs import ZfsBackend
from poolbench.system.runner import LocalRunner


@dataclass(frozen=True)
class Offers:
    dialect: str  # zfs-fuse | openzfs: the study's levels follow it
    has_md: bool
    md_reason: str  # why md is missing, for the study's pre-notes


def probe() -> Offers:
    runner = LocalRunner(dry_run=True)  # read-only probes still run
    zfs = ZfsBackend(runner).check()
    md = MdBackend(runner).check()
    return Offers(dialect=zfs.dialect or "openzfs", has_md=md.ok, md_reason=md.reason)
