"""The vocabulary of a trial factor's pure half: a `Spec` per level key (its key, what a study
file may give as its level, the sentence that says so, the untimed work it adds to a trial for
the estimate), the `Basis` that work is measured against, and the keys and figures study/'s
cross-factor rules name (study/consistency.py: a frag_target needs aging, a fill and an aged
pool need room, a slice needs block devices). Each factor module declares its own specs with
these; factors/registry.py gathers them for study/ (validation, the estimate).

This module imports only pure packages, so every factor module can take it before anything
else (tests/test_factor_keys.py holds it pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

VDEV_SOURCE = "vdev_source"
FILL = "fill"
AGING = "aging"
FRAG_TARGET = "frag_target"

AGING_FILL = 80  # the fill level aging works at without a fill factor (factors/aging.py)
# aging refills the deleted share (factors/aging.py DELETE_SHARE) and overwrites part of the
# rest each round: about 0.4 of the fill level per round, on top of the fill
AGING_REWRITE_PER_ROUND = 0.4

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


def int_in(low: int, high: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and low <= v <= high


def one_of(*allowed: str) -> Callable[[object], bool]:
    return lambda v: str(v) in allowed
