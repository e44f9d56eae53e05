"""The `dedup` trial factor: ZFS deduplication off or on for one configuration, and what the
dedup table costs.

`on`: `zfs set dedup=on` on the pool's root dataset after the pool is built, before any data
(every block written from then on is looked up in, and counted into, the dedup table, the
DDT), read back before the trial goes on. `off` is ZFS's default, read back the same way.
After each measurement the pool is read back (its writes synced): the DDT's entries, their
size on disk and in core (`zpool status -D`), the blocks and logical bytes they are
referenced by, and the pool's dedupratio: that measurement's `pool` section, under `dedup`
(`DedupReading`, the typed section a study's notes decode). The DDT's in-core size is what
deduplication asks of RAM: the figure the dedup study scales to a user's pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from poolbench.errors import PoolbenchError, UsageError
from poolbench.factors.base import AfterMeasurement, AfterPool, Factor, Levels, Preflight
from poolbench.factors.specs import Spec, one_of
from poolbench.records.sections import DedupReadingRecord, DedupSetRecord
from poolbench.zfs import ops
from poolbench.zfs.errors import ZfsCommandError

if TYPE_CHECKING:
    from poolbench.system.runner import Runner

KEY = "dedup"
LEVELS = ("off", "on")


@dataclass(frozen=True)
class DedupReading:
    """The pool's deduplication after one measurement: the level asked for, the pool's
    dedupratio, and its dedup table (DDT): entries, bytes on disk and in core in all, and
    the blocks and logical bytes the entries are referenced by."""

    level: str
    ratio: float | None
    entries: int
    disk_bytes: int
    core_bytes: int
    referenced_blocks: int
    referenced_bytes: int
    # why the table could not be read ('' when it was): the measurement stands without it
    unread: str = ""

    @property
    def core_bytes_per_entry(self) -> float | None:
        return self.core_bytes / self.entries if self.entries else None

    @property
    def entries_per_block(self) -> float | None:
        """DDT entries per block referenced: the unique share of what was written."""
        return self.entries / self.referenced_blocks if self.referenced_blocks else None

    def to_json(self) -> DedupReadingRecord:
        return DedupReadingRecord(
            level=self.level, ratio=self.ratio, entries=self.entries,
            disk_bytes=self.disk_bytes, core_bytes=self.core_bytes,
            referenced_blocks=self.referenced_blocks, referenced_bytes=self.referenced_bytes,
            unread=self.unread,
        )  # fmt: skip

    @classmethod
    def decode(cls, guards: Mapping[str, object]) -> DedupReading | None:
        """The reading in a stored measurement's guards (its `pool` section), or None."""
        pool = guards.get("pool")
        got = pool.get(KEY) if isinstance(pool, dict) else None
        if not isinstance(got, dict):
            return None
        ratio = got.get("ratio")
        return cls(
            level=str(got.get("level", "")),
            ratio=float(ratio) if isinstance(ratio, int | float) else None,
            **{f: int(got.get(f) or 0) for f in _COUNTS},
            unread=str(got.get("unread") or ""),
        )


_COUNTS = ("entries", "disk_bytes", "core_bytes", "referenced_blocks", "referenced_bytes")


def ratio(text: str | None) -> float | None:
    """dedupratio as ZFS prints it: "1.77x" (zfs-fuse), "1.77" (OpenZFS -p)."""
    try:
        return float(text.strip().rstrip("x")) if text else None
    except ValueError:
        return None


def check(backend: str, levels: Levels) -> None:
    if KEY in levels and backend != "zfs":
        raise UsageError(
            f"dedup={levels[KEY]} is a ZFS property; the {backend} backend has no inline "
            "deduplication to turn on or off.",
            'Run the dedup factor on ZFS only (backend = ["zfs"]).',
        )


def _set(runner: Runner, name: str, level: str) -> str | None:
    """The pool's root dataset set to `level` (`off` is ZFS's default: left as it is), and
    the value it reads back."""
    if level == "on":
        ops.set_property(runner, name, KEY, level)
    return ops.dataset_value(runner, name, KEY)


def apply(at: AfterPool) -> DedupSetRecord | None:
    """The pool's root dataset at the configuration's level, read back."""
    name, level = at.pool.spec.name, at.levels[KEY]
    if at.runner.dry_run:  # the set printed; a pool not built has nothing to read back
        if level == "on":
            ops.set_property(at.runner, name, KEY, level)
        return None
    got = _set(at.runner, name, level)
    if got != level:
        raise PoolbenchError(
            f"The pool {name} reads dedup={got} after poolbench asked for dedup={level}; "
            "nothing was measured on it.",
            "Check that this ZFS supports deduplication (pool version 21 or later).",
        )
    return DedupSetRecord(level=level, set="zfs set dedup=on" if level == "on" else "default")


def read_back(at: AfterMeasurement) -> DedupReading:
    """What the pool says of deduplication now (its writes synced by the caller). A table
    that cannot be read or parsed (`zpool status -D` failing, a wording this parse does not
    know) is said in the reading, not raised: the measurement just taken, and the trial,
    stand without it."""
    name, level = at.pool.spec.name, at.levels[KEY]
    avail = at.backend.check()
    said = ratio(ops.pool_prop(at.runner, name, "dedupratio", avail.dialect))
    try:
        t = ops.dedup_table(at.runner, name, avail.dialect, avail.version)
    except (ZfsCommandError, ValueError) as e:
        why = e.problem if isinstance(e, ZfsCommandError) else str(e)
        return DedupReading(level, said, 0, 0, 0, 0, 0, unread=why.splitlines()[0])
    return DedupReading(level, said, t.entries, t.disk_bytes, t.core_bytes,
                        t.referenced_blocks, t.referenced_bytes)  # fmt: skip


class Dedup(Factor):
    """The pool's root dataset deduplicated or not; its dedup table read after each
    measurement."""

    specs = (
        Spec(KEY, "ZFS: deduplication of everything the trial writes, off | on (its table's "
             "entries and RAM read back after each measurement)", one_of(*LEVELS)),
    )  # fmt: skip
    # after the ARC's ceiling, before the pool's data is laid down (a fill is deduplicated
    # as the user's data would be)
    order = 35
    section = KEY

    def check(self, at: Preflight) -> None:
        check(at.backend, at.levels)

    def after_pool(self, at: AfterPool) -> DedupSetRecord | None:
        return apply(at)

    def after_measurement(self, at: AfterMeasurement) -> DedupReadingRecord | None:
        if at.runner.dry_run:  # a pool not built: no table to read
            return None
        return read_back(at).to_json()


FACTOR = Dedup()
