"""The ARC emptied for a cold read: `zpool export` + `zpool import -d DIR`, where DIR holds
only links to this pool's own members (never a scan of /dev), with the members' page cache
dropped in between; each step checked."""

from __future__ import annotations

import time
from pathlib import Path

from poolbench.backends import zvol
from poolbench.backends._common import mount_at, page_record, wait_for
from poolbench.backends.base import Pool
from poolbench.guards import cache
from poolbench.records.cache_drop import ExportImportDrop
from poolbench.system.runner import Runner
from poolbench.zfs import ops, pools


def drop_cache(
    runner: Runner, pool: Pool, link_dir: Path, mountinfo: Path, cachefile: str = "none"
) -> ExportImportDrop:
    """Export and import the pool (which evicts its ARC), and drop the page cache of its
    member files/devices in between; verify each step. The import gives the pool its own
    `cachefile` again: an import without one would put it in the system's, from which the
    machine imports pools at boot. The ARC's data size is checked once
    the pool is exported (OpenZFS; zfs-fuse where it publishes /zfs-kstat); where it
    cannot be seen the drop is never "verified" (None): the device byte check decides."""
    name = pool.spec.name
    if runner.dry_run:
        pools.export(runner, name)
        ops.import_pool(runner, str(link_dir), name, cachefile)
        return {"method": "export-import", "verified": False, "detail": "dry run"}
    t0 = time.monotonic()
    guid = pool.described.get("guid") or pools.pool_guid(runner, name)
    backing = [Path(p) for p in pool.described.get("leaves", [])]
    stats = cache.arcstats_path(pool.described.get("dialect") or "openzfs")
    arc_before = cache.read_arcstats(stats)
    pools.export(runner, name)
    exported = pools.pool_guid(runner, name) is None and wait_for(
        lambda: mount_at(pool.mountpoint, mountinfo) is None
    )
    arc_exported = cache.read_arcstats(stats)
    arc_ok, arc_said = cache.arc_after_export(
        arc_exported, len(pools.imported(runner)) if arc_exported else 0
    )
    page = cache.drop(runner, backing)
    ops.import_pool(runner, str(link_dir), name, cachefile)
    now = pools.pool_guid(runner, name)
    mounted = wait_for(lambda: mount_at(pool.mountpoint, mountinfo) is not None)
    problems = _drop_problems(pool, exported, guid, now, mounted, page, arc_ok, arc_said)
    if pool.described.get("zvol") and not zvol.node_back(name):
        problems.append(f"the zvol's device {zvol.node(name)} did not come back")
    # False: a step failed; True: every step and the ARC checked out; None: the steps
    # did, but the ARC could not tell (zfs-fuse; other pools' data): the read decides.
    verified = False if problems else (True if arc_ok else None)
    return {
        "method": "export-import",
        "exported": exported,
        "imported_guid": now,
        "guid": guid,
        "mounted": mounted,
        "import_dir": str(link_dir),
        "arc_bytes_before": (arc_before or {}).get("size"),
        "arc_bytes_exported": (arc_exported or {}).get("size"),
        "arc_data_bytes_exported": (arc_exported or {}).get("data_size"),
        "arc": arc_said,
        "member_page_cache": page_record(page),
        "seconds": round(time.monotonic() - t0, 3),
        "verified": verified,
        "detail": "; ".join(problems),
    }  # fmt: skip


def _drop_problems(
    pool: Pool, exported: bool, guid: object, now: object, mounted: bool,
    page: cache.CacheDrop, arc_ok: bool | None, arc_said: str,
) -> list[str]:  # fmt: skip
    """What went wrong in an export/import cache drop (empty: every step checked out)."""
    problems = []
    if not exported:
        problems.append("the pool was still listed or mounted after the export")
    if now != guid:
        problems.append(f"after the import the pool's GUID is {now}, not {guid}")
    if not mounted:
        problems.append(f"the dataset is not mounted at {pool.mountpoint} after the import")
    if page.verified is False:
        problems.append(f"page cache of the members: {page.detail}")
    if arc_ok is False:
        problems.append(arc_said)
    return problems
