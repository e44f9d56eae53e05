"""The `prefetch` trial factor: OpenZFS's predictive prefetch on or off for one trial.

When ZFS sees a file read in order it reads ahead of the application (dmu_zfetch.c: streams
of up to 8 MiB ahead by default, 64 MiB as they prove right); `zfs_prefetch_disable=1`
turns that off for every pool of the host, leaving the prefetch that is never wrong (zfs
send's) alone. Database and VM hosts often set it, on the folklore that read-ahead wastes
their random reads; the prefetch study measures what it costs a streaming read and saves a
random one, on the user's own disks.

The parameter is the host's, not the pool's, so it is set after the pool is built and just
before the workloads, journaled first (safety/journal.py `param_set`): the trial's teardown
puts the host's own value back on success, on error and on Ctrl-C, and `poolbench cleanup`
after a crash. It is read back before the trial goes on, and again after each measurement,
so a measurement carries what the host did while it ran (`PrefetchReading`, its `pool`
section under `prefetch`), not what was asked. zfs-fuse has no such parameter: refused there
before anything is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from poolbench import capabilities
from poolbench.errors import PoolbenchError, UsageError
from poolbench.factors.base import AfterMeasurement, AfterPool, Factor, Levels, Preflight
from poolbench.factors.specs import Spec, one_of
from poolbench.records.sections import PrefetchReadingRecord, PrefetchSetRecord
from poolbench.safety.journal import Journal
from poolbench.system import modparams

KEY = "prefetch"
LEVELS = ("on", "off")
PARAM = "zfs_prefetch_disable"
CAPABILITY = "prefetch-tunable"


def disable_value(level: str) -> int:
    """zfs_prefetch_disable for a level: prefetch `off` is the parameter at 1."""
    return 1 if level == "off" else 0


@dataclass(frozen=True)
class PrefetchReading:
    """The host's prefetch while one measurement ran: the level asked for and
    zfs_prefetch_disable as read back right after it (None: the parameter was gone)."""

    level: str
    disable: int | None

    @property
    def as_asked(self) -> bool:
        return self.disable == disable_value(self.level)

    def to_json(self) -> PrefetchReadingRecord:
        return PrefetchReadingRecord(level=self.level, disable=self.disable)

    @classmethod
    def decode(cls, guards: Mapping[str, object]) -> PrefetchReading | None:
        """The reading in a stored measurement's guards (its `pool` section), or None."""
        pool = guards.get("pool")
        got = pool.get(KEY) if isinstance(pool, dict) else None
        if not isinstance(got, dict):
            return None
        disable = got.get("disable")
        return cls(str(got.get("level", "")), disable if isinstance(disable, int) else None)


def check(backend: str, dialect: str, levels: Levels) -> None:
    """Refuse, before anything is built, prefetch asked of what has no such parameter."""
    if KEY not in levels:
        return
    if backend != "zfs":
        raise UsageError(
            f"prefetch={levels[KEY]} is OpenZFS's read-ahead; the {backend} backend's pools "
            "are read ahead by the kernel's page cache, which this factor does not change.",
            'Run the prefetch factor on ZFS only (backend = ["zfs"]).',
        )
    if dialect == "zfs-fuse":
        raise capabilities.unsupported(
            CAPABILITY,
            f"prefetch={levels[KEY]} sets OpenZFS's zfs_prefetch_disable, but this machine's "
            "ZFS is zfs-fuse (pool version 23), whose read-ahead lives inside its daemon with "
            "no parameter to change; nothing was created.",
            "Run the study on OpenZFS.",
        )


def apply(journal: Journal, level: str, root: Path = modparams.PARAMETERS) -> PrefetchSetRecord:
    """The host's prefetch at `level` (journaled before it is written), read back."""
    want = disable_value(level)
    if journal.runner.dry_run:
        return PrefetchSetRecord(level=level, disable=want, set="not in a dry run")
    was = modparams.read(PARAM, root)
    if was is None:
        raise capabilities.unsupported(
            CAPABILITY,
            f"The trial turns prefetch {level}, but {root / PARAM} cannot be read: the "
            "OpenZFS module is not loaded, or this ZFS is not OpenZFS.",
            "Run the study on OpenZFS with its module loaded.",
        )
    if was != want:
        journal.param_set(PARAM, was, want, was, str(root))
        try:
            modparams.write(PARAM, want, root)
        except OSError as exc:
            raise PoolbenchError(
                f"Setting {PARAM} to {want} failed: {exc.strerror or exc}.",
                "Run as root on OpenZFS.",
            ) from exc
    now = modparams.read(PARAM, root)
    if now != want:
        raise PoolbenchError(
            f"{PARAM} reads {now} after poolbench wrote {want} for prefetch {level}; nothing "
            "was measured with it.",
            "Check that nothing else on this host sets ZFS module parameters meanwhile.",
        )
    restored = "after the trial (its journal), also on error, Ctrl-C and cleanup"
    kept = "the host's own value, left as it was"
    return PrefetchSetRecord(level=level, disable=now, host_had=was,
                             set=restored if was != want else kept)  # fmt: skip


def read_back(level: str, root: Path = modparams.PARAMETERS) -> PrefetchReading:
    return PrefetchReading(level, modparams.read(PARAM, root))


class Prefetch(Factor):
    """The host's predictive prefetch set for the trial's workloads, read back after each."""

    specs = (
        Spec(KEY, "OpenZFS: predictive prefetch during each trial (zfs_prefetch_disable), "
             "restored after: on | off", one_of(*LEVELS)),
    )  # fmt: skip
    # the host's read-ahead as the workloads meet it: after the pool's data is laid down
    # and its members slowed, before the workloads
    order = 65
    section = KEY

    def check(self, at: Preflight) -> None:
        check(at.backend, at.dialect, at.levels)

    def after_pool(self, at: AfterPool) -> PrefetchSetRecord | None:
        return apply(at.journal, str(at.levels[KEY]))

    def after_measurement(self, at: AfterMeasurement) -> PrefetchReadingRecord | None:
        if at.runner.dry_run:
            return None
        return read_back(str(at.levels[KEY])).to_json()


FACTOR = Prefetch()
