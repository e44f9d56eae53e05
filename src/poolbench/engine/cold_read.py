"""Settle whether a cold read was cold, once it has run (pure).

The cache drop before a read proves what it can (the page cache by fincore, an export and
import by the pool's state), but the last word belongs to what happened during the read: on
OpenZFS the ARC's counters (guards/cache.ArcWindow), for a metadata read the device bytes.
Where neither the cache nor the devices can be seen (zfs-fuse keeps its cache in its daemon),
the record says so and is never "verified".
"""

from __future__ import annotations

from dataclasses import replace

from poolbench.guards import cache
from poolbench.records.findings import CacheFinding, DeviceFinding


def settle(
    record: CacheFinding,
    arc: cache.ArcSeen | None,
    device: DeviceFinding | None,
    meta_files: int | None = None,
) -> tuple[CacheFinding, list[str]]:
    """The cache record with what the read showed, and the warnings it earns.

    `arc`: ArcWindow.close() (None: not ZFS). `meta_files`: the number of files a cold
    metadata read touched (None: a data read)."""
    more = dict(record.more)
    verified = record.verified
    warnings: list[str] = []
    if meta_files is not None:
        read = device.read_bytes if device is not None and device.devices is not None else None
        meta_ok, said = cache.cold_stat_check(read, meta_files)
        more["metadata_read"] = said
        if meta_ok is False:
            warnings.append(said)
        # Empty files gave the page cache check nothing to prove: the device reads decide.
        verified = False if verified is False or meta_ok is False else meta_ok
    if arc is not None:
        more["arc_during_read"] = arc.to_json()
        if arc.observable:
            # The ARC's counters are the truth on OpenZFS; fincore never saw the ARC.
            if arc.warning:
                warnings.append(arc.warning)
                verified = False
            elif verified is not False and arc.served_fraction is not None:
                verified = True if meta_files is None else verified
        else:
            # zfs-fuse: never "verified"; the device byte check (its own warning) decides.
            more["arc"] = cache.UNOBSERVABLE
            verified = False if verified is False else None
    if verified is None and (device is None or device.devices is None) and meta_files is None:
        warnings.append(
            "unverified cold read: the cache cannot be observed and no device bytes were "
            "counted, so nothing shows the disks served it"
        )
    return replace(record, verified=verified, more=more), warnings
