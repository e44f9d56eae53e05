"""What a filesystem moves a stream in, for the steady-state rule's rounds (stats/steady.py):
a round must hold stats.steady.QUANTA_PER_ROUND of them, so the rule judges the stream, not
where a second's boundary fell among its quanta.

- zfs-fuse (pool v23, the OpenSolaris ARC of 2009): `arc_tempreserve_space` refuses a write
  once the dirty data would pass half the ARC's target size `c` ("we try to keep the cache
  less than half full of dirty blocks so that our sync times don't grow too large"), and the
  writer waits for the next transaction group. A writer faster than the disks is admitted
  c/2 at a time: 50 MiB quanta here with a 100 MiB ARC (52, 49, 50, 50, 0, 49, ... MiB in
  successive seconds), 16 MiB with 32. A streaming read crosses the same quanta as laid
  out, one transaction group's data after another (a raidz1 read moved 57-73 MiB a second
  with 50 MiB groups). `c` is read from the daemon's kstat mount; without it the quantum is
  unknown and the rule does not judge (not one-second rounds that would judge the quanta).
- OpenZFS (0.7 and later): the write throttle delays each write in proportion to the dirty
  data above zfs_delay_min_dirty_percent of zfs_dirty_data_max; transaction groups sync
  behind it (every zfs_txg_timeout = 5 s at the latest). The writer is paced write by write,
  not admitted in quanta: one-second rounds.
- btrfs, ext4, xfs (on md or not): the page cache; the kernel's balance_dirty_pages pauses
  each writer in proportion to its dirty backlog (pauses of at most 200 ms), again write by
  write: one-second rounds. btrfs's commit interval (30 s) bounds how long its metadata stays
  unwritten, not how the writer is admitted.

Where the quantum of a direction is None, rounds are one second. Read-only probe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from poolbench.guards.cache import FUSE_ARCSTATS


@dataclass(frozen=True)
class Quanta:
    """What the filesystem moves a stream in, in bytes, per direction (None: write by write);
    `known` False where it has quanta that could not be read."""

    write: int | None
    read: int | None
    basis: str
    known: bool = True

    def of(self, direction: str, streaming: bool) -> int | None:
        """The quantum for a workload: writes (and a mix) by `write`; a streaming read by
        `read`; a random read by none (it does not cross the layout in order)."""
        if direction in ("write", "mixed"):
            return self.write
        return self.read if streaming and direction == "read" else None

    def as_dict(self) -> dict[str, object]:
        mib = 1024 * 1024
        return {
            "write_mib": None if self.write is None else round(self.write / mib, 2),
            "read_mib": None if self.read is None else round(self.read / mib, 2),
            "basis": self.basis,
            "known": self.known,
        }


PER_WRITE = Quanta(None, None, "the writer is paced write by write: one-second rounds")


def of(flavour: str | None, fuse_arcstats: Path = FUSE_ARCSTATS) -> Quanta:
    """The quanta of the filesystem a workload runs on: `flavour` is cache.zfs_flavour's
    ('openzfs', 'zfs-fuse', None for any other)."""
    if flavour != "zfs-fuse":
        return PER_WRITE
    try:
        c = int((fuse_arcstats / "c").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        c = 0
    if c <= 0:
        return Quanta(
            None, None, "zfs-fuse admits writes half its ARC at a time, and its ARC's size "
            "could not be read (no /zfs-kstat): the rounds' length is unknown", known=False,
        )  # fmt: skip
    return Quanta(
        c // 2, c // 2, f"zfs-fuse admits a writer {c / 2**21:g} MiB at a time (half its ARC's "
        f"{c / 2**20:g} MiB) and lays a stream out one such transaction group after another",
    )  # fmt: skip
