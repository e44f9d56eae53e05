"""Who served a cached-by-design read (iozone's reread), from the device bytes (pure).

A reread is meant to measure the cache: a warm pass reads the file, the measured pass reads it
again. But a working set larger than the cache (poolbench's default is ≥ 2× RAM, so that cold
reads are cold) makes the warm pass evict its own start, and the measured pass then reads
everything from the disks again. Only the device counters tell which happened, so the label
follows them: "cache" when the devices served at most CACHED_AT_MOST of the bytes, "disks"
when they served at least DISKS_AT_LEAST (the same 10% slack as every device check: readahead
and metadata move bytes the other way), "partly cached" in between, "unverified" where no
device could be counted.
"""

from __future__ import annotations

from dataclasses import dataclass

CACHED_AT_MOST = 0.10
DISKS_AT_LEAST = 0.90


@dataclass(frozen=True)
class Served:
    by: str  # cache | disks | partly cached | unverified
    device_share: float | None  # device read bytes / application bytes
    warning: str

    @property
    def label(self) -> str:
        """The note a table shows for the figure."""
        return {
            "cache": "cached by design",
            "disks": "served by the disks",
            "partly cached": "partly cached",
        }.get(self.by, "cached by design, unverified")


def served(app_bytes: int, device_read_bytes: int | None) -> Served:
    if device_read_bytes is None or app_bytes <= 0:
        return Served("unverified", None, "")
    share = device_read_bytes / app_bytes
    if share <= CACHED_AT_MOST:
        return Served(
            "cache",
            share,
            f"the devices served only {share:.0%} of the bytes read: this figure measures the "
            "cache, as this cached test intends; it says nothing about the disks.",
        )
    if share >= DISKS_AT_LEAST:
        return Served(
            "disks",
            share,
            f"this cached test was served by the disks ({share:.0%} of the bytes read came "
            "from them): the warm pass did not leave the data in the cache (a working set "
            "larger than the cache evicts its own start), so the figure is a disk read, not a "
            "cached one. For a cached figure use a working set well below RAM (--size).",
        )
    return Served(
        "partly cached",
        share,
        f"this cached test was only partly cached: {share:.0%} of the bytes read came from the "
        "disks, so the figure mixes cache and disk speed and measures neither.",
    )
