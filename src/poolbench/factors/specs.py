"""The pure half of every trial factor: its key, what a study file may give as its level, the
sentence that says so, and the untimed work it adds to a trial for the estimate. study/
validates and estimates with these and never imports the engine-acting half (the factor
modules beside this one, which run commands, touch the journal and build pools): this module
imports only pure packages, so study/ stays pure (tests/test_factor_keys.py holds it).

One `Spec` per level key, in the registry's order (registry.py holds the same keys:
tests/test_factor_keys.py checks that they match)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from poolbench.errors import UsageError
from poolbench.units import MiB, parse_size
from poolbench.workloads.library import parse_load

VDEV_SOURCE = "vdev_source"
COMPRESSIBILITY = "compressibility"
ARC_MAX = "arc_max"
FILL = "fill"
AGING = "aging"
FRAG_TARGET = "frag_target"
SLOW_MEMBER = "slow_member"
LOAD = "load"
FULL_PAGE_WRITES = "full_page_writes"

AGING_FILL = 80  # the fill level aging works at without a fill factor (factors/aging.py)
# aging refills the deleted share (factors/aging.py DELETE_SHARE) and overwrites part of the
# rest each round: about 0.4 of the fill level per round, on top of the fill
AGING_REWRITE_PER_ROUND = 0.4
ARC_MAX_LEAST = 64 * MiB

Levels = Mapping[str, object]


@dataclass(frozen=True)
class Basis:
    """What a configuration's untimed work is measured in (MiB): the raw space of the
    study's disks, and one resilver's foreground run with its cache drops."""

    raw_mib: float
    resilver_run_mib: float


def _none(_levels: Levels, _basis: Basis) -> float:
    return 0.0


@dataclass(frozen=True)
class Spec:
    key: str
    description: str
    valid: Callable[[object], bool]
    # MiB of untimed work the level adds to each trial of the configuration (the estimate)
    untimed_mib: Callable[[Levels, Basis], float] = _none


def _int_in(low: int, high: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and low <= v <= high


def _one_of(*allowed: str) -> Callable[[object], bool]:
    return lambda v: str(v) in allowed


def _size_at_least(v: object) -> bool:
    try:
        return parse_size(str(v)) >= ARC_MAX_LEAST
    except UsageError:
        return False


def _is_load(v: object) -> bool:
    if str(v) == "none":
        return True
    try:
        parse_load(str(v))
    except UsageError:
        return False
    return True


def _prefill_mib(levels: Levels, basis: Basis) -> float:
    """The pool filled (a share of the raw space) before the workloads, once more in part for
    every aging round: asked of the fill factor, which aging works through."""
    level = levels.get(FILL, AGING_FILL if levels.get(AGING) is not None else None)
    if level is None:
        return 0.0
    rewrites = 1 + AGING_REWRITE_PER_ROUND * int(str(levels.get(AGING) or 0))
    return int(str(level)) / 100 * basis.raw_mib * rewrites


def _aging_alone_mib(levels: Levels, basis: Basis) -> float:
    """Aging without a fill factor fills the pool itself (at AGING_FILL)."""
    return 0.0 if FILL in levels else _prefill_mib(levels, basis)


def _load_mib(levels: Levels, basis: Basis) -> float:
    """A resilver's foreground: as long again as the resilver, then once alone."""
    return 0.0 if str(levels.get(LOAD, "none")) == "none" else 2 * basis.resilver_run_mib


SPECS: tuple[Spec, ...] = (
    Spec(VDEV_SOURCE, "overrides [disks] vdev_source per configuration: whole | partition | "
         "slice", _one_of("whole", "partition", "slice")),
    Spec(COMPRESSIBILITY, "overrides [workloads] compressibility per configuration: 0..99 "
         "percent", _int_in(0, 99)),
    Spec(ARC_MAX, "OpenZFS: the ARC's ceiling (zfs_arc_max) during each trial, restored "
         "after: a size of at least 64M", _size_at_least),
    Spec(FILL, "percent of the pool's usable space filled (incompressible, untimed) before "
         "the workloads run: 1..95", _int_in(1, 95), _prefill_mib),
    Spec(AGING, "rounds of file deletions, overwrites and creations that age the pool at its "
         "fill level (80% without a fill factor) before the workloads run: 0..50",
         _int_in(0, 50), _aging_alone_mib),
    Spec(FRAG_TARGET, "with aging, OpenZFS: more rounds (at most 10) until the pool's "
         "fragmentation property reaches this percent: 1..100", _int_in(1, 100)),
    Spec(SLOW_MEMBER, "one member's speed as a percent of its peers' (blkio throttle; 100: "
         "none slow): 1..100", _int_in(1, 100)),
    Spec(LOAD, "the resilver's foreground workload: none, or a fio workload (seq-read, "
         "rand-read-4k, rand-write-4k) with an optional rate, seq-read@20M", _is_load,
         _load_mib),
    Spec(FULL_PAGE_WRITES, "PostgreSQL (pgbench workloads): on | off", _one_of("on", "off")),
)  # fmt: skip
BY_KEY: dict[str, Spec] = {s.key: s for s in SPECS}


def untimed_mib(levels: Levels, basis: Basis) -> float:
    """The untimed work (MiB) a configuration's factors add to each of its trials."""
    return sum(s.untimed_mib(levels, basis) for s in SPECS if s.key in levels)
