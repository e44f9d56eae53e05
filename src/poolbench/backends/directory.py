"""An existing directory on a mounted filesystem, measured as it is.

Nothing is created or destroyed. The directory is the layout when it is an absolute path
(`layout = "/srv/data"`), else the first device of the spec. The block devices under it come
from the device guard's resolution (mountinfo, btrfs members, ZFS pool members).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from poolbench.backends._common import files_under, page_record
from poolbench.backends.base import Availability, Pool, PoolSpec, file_system_silent
from poolbench.errors import PoolbenchError, UsageError
from poolbench.guards import cache
from poolbench.guards.devices import mount_of, resolve
from poolbench.guards.geometry import Found
from poolbench.records.cache_drop import PageCacheDrop
from poolbench.safety.journal import Journal
from poolbench.system.runner import Runner


def directory_of(spec: PoolSpec) -> Path:
    if spec.layout.startswith("/"):
        return Path(spec.layout)
    if spec.devices:
        return Path(spec.devices[0])
    raise UsageError(
        "The directory backend needs a directory.",
        'Give it as the layout, e.g. layout = ["/srv/data"].',
    )


class DirectoryDescription(TypedDict):
    """A directory's `Pool.described` (the guards' `pool`): the mount it is on, and how its
    devices were found (guards/devices.Target)."""

    directory: str
    mountpoint: str
    fstype: str
    source: str
    major_minor: str
    target: Mapping[str, object]


class DirectoryBackend:
    name = "directory"

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def check(self) -> Availability:
        return Availability(True, "", "", "directory")

    def validate(self, spec: PoolSpec) -> None:
        if spec.pool_options or spec.fs_options:
            raise UsageError(
                "The directory backend measures a filesystem as it is; it takes no options "
                f"({', '.join([*spec.pool_options, *spec.fs_options])}).",
                "Remove those factors for the directory backend.",
            )
        d = directory_of(spec)
        if not d.is_dir():
            raise UsageError(f"{d} is not an existing directory.", "Create it or fix the path.")
        if not os.access(d, os.W_OK):
            raise UsageError(f"{d} is not writable.", "Run as a user who may write there.")

    def create(self, spec: PoolSpec, journal: Journal) -> Pool:
        self.validate(spec)
        d = directory_of(spec)
        target = resolve(d, self.runner)
        described = self._describe(d, target.as_dict())
        return Pool(spec, d, list(target.devices), dict(described))

    @staticmethod
    def _describe(d: Path, target: Mapping[str, object]) -> DirectoryDescription:
        m = mount_of(d)
        return {"directory": str(d), "mountpoint": m.mountpoint, "fstype": m.fstype,
                "source": m.source, "major_minor": m.major_minor, "target": target}  # fmt: skip

    def write_model(self, pool: Pool, block: int | None) -> Found:
        return None, "the directory backend has no write model"

    def stopped_answering(self, pool: Pool, failure: PoolbenchError) -> str | None:
        return file_system_silent(pool, failure)

    def verify(self, pool: Pool) -> list[str]:
        d = pool.mountpoint
        if not d.is_dir():
            return [f"{d} is not a directory any more"]
        m = mount_of(d)
        was = pool.described.get("major_minor")
        if was and m.major_minor != was:
            return [f"{d} is now on {m.source} ({m.fstype}), not on the filesystem it was on"]
        return []

    def drop_cache(self, pool: Pool) -> PageCacheDrop:
        """The page cache is all there is to drop (a ZFS directory keeps its ARC: noted)."""
        files = files_under(pool.mountpoint)
        res = page_record(cache.drop(self.runner, files))
        res["files_checked"] = len(files)
        if pool.described.get("fstype") in ("zfs", "fuse.zfs", "fuse"):
            note = "ZFS's ARC is not emptied for a directory poolbench did not build."
            res["detail"] = f"{res['detail']} {note}".strip()
            res["verified"] = False
        return res

    def destroy(self, pool: Pool, journal: Journal) -> None:
        """Nothing: poolbench did not create it."""
