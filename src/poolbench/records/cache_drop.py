"""What a backend's cache drop before a cold read returns: the guards' `cache` section.

Each stack empties its caches its own way (backends/*.drop_cache), so each has its own
record; all share `method`, `verified` and `detail`, which the session reads
(CacheFinding.from_json keeps the rest, in this order, under `more`). A dry run returns
those three only. TypedDicts, not dataclasses: the record is the stored JSON itself, key
for key and in the order written here, so old stores and new ones read alike.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class StripeCacheFlush(TypedDict):
    """md raid4/5/6's stripe cache shrunk and restored (backends/md.py), under `below`."""

    method: str  # "stripe_cache_size"
    size: NotRequired[int]  # stripe_cache_size before, and restored
    kept_at_most: NotRequired[int]  # stripes md keeps through the shrink
    verified: bool
    detail: str


class PageCacheDrop(TypedDict):
    """guards/cache.py's drop of the page cache (CacheDrop.as_dict), and for a directory
    poolbench did not build (backends/directory.py) the files it checked."""

    method: str  # "drop_caches", "fadvise", "none", "dry-run"
    resident_before: int | None
    resident_after: int | None
    file_bytes: int
    verified: bool | None  # None: nothing the page cache check could prove (empty files)
    detail: str
    files_checked: NotRequired[int]


class RemountDrop(TypedDict):
    """A filesystem unmounted and mounted again (backends/_common.remount_cold: btrfs, md)."""

    method: str  # "umount-mount"
    unmounted: NotRequired[bool]
    mounted: NotRequired[bool]
    page_cache_drop: NotRequired[str]  # guards/cache.py's method while it was unmounted
    after_check: NotRequired[str]
    files_checked: NotRequired[int]
    resident_before: NotRequired[int | None]
    resident_after: NotRequired[int | None]
    file_bytes: NotRequired[int]
    seconds: NotRequired[float]
    verified: bool
    detail: str
    below: NotRequired[StripeCacheFlush]  # the cache under the filesystem (md's)


class ExportImportDrop(TypedDict):
    """A ZFS pool exported and imported, which evicts its ARC (backends/zfs/coldcache.py)."""

    method: str  # "export-import"
    exported: NotRequired[bool]
    imported_guid: NotRequired[int | None]
    guid: NotRequired[int | None]
    mounted: NotRequired[bool]
    import_dir: NotRequired[str]
    arc_bytes_before: NotRequired[int | None]
    arc_bytes_exported: NotRequired[int | None]
    arc_data_bytes_exported: NotRequired[int | None]
    arc: NotRequired[str]  # what the ARC's counters said after the export
    member_page_cache: NotRequired[PageCacheDrop]
    seconds: NotRequired[float]
    verified: bool | None  # None: every step did, but the ARC could not tell (zfs-fuse)
    detail: str


# What Backend.drop_cache returns.
CacheDropRecord = RemountDrop | ExportImportDrop | PageCacheDrop
