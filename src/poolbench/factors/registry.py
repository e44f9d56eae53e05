"""Factor name → factor, in the order a trial applies them; and each stage of a trial over
the factors a configuration has. The trial loop, its dry run and its checks call these and
name no factor.

The factors are found, not listed: every module of this package but HELPERS exports its
factor as `FACTOR` (poolbench/discovery.py), and each declares its place in a trial as
`order` (lower first), so a new factor is its module alone. Two factors that own one level
key, or declare one place, are refused. Their specs (the pure half: keys, accepted levels,
descriptions, untimed work) are gathered here for study/'s validation and estimate."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeGuard

from poolbench import discovery
from poolbench.factors.base import (
    AfterMeasurement,
    AfterPool,
    BeforePool,
    Factor,
    Levels,
    Preflight,
)
from poolbench.factors.specs import Basis, Spec

if TYPE_CHECKING:
    from poolbench.records.sections import FactorSection
    from poolbench.safety.journal import Journal
    from poolbench.study.model import Disks, Workloads

HELPERS = ("base", "registry", "specs")  # the modules of this package that are no factor


def _is_factor(value: object) -> TypeGuard[Factor]:
    return isinstance(value, Factor)


FOUND = discovery.members("poolbench.factors", "FACTOR", _is_factor, HELPERS)
_ORDERED = sorted(FOUND.members, key=lambda f: f.order)
discovery.by_name(_ORDERED, lambda f: (f"order {f.order}",))  # one factor per place
discovery.by_name(_ORDERED, lambda f: f.keys)  # one factor per level key
# In the order a trial applies them (each factor's `order` says why it stands there).
FACTORS: dict[str, Factor] = {f.keys[0]: f for f in _ORDERED}
# Every level key a factor owns: what the backends are not asked to take.
KEYS: tuple[str, ...] = tuple(k for f in FACTORS.values() for k in f.keys)
# The pure half: what a study file may give each key, for study/ (model.py, estimate.py).
SPECS: tuple[Spec, ...] = tuple(s for f in FACTORS.values() for s in f.specs)


def untimed_mib(levels: Mapping[str, object], basis: Basis) -> float:
    """The untimed work (MiB) a configuration's factors add to each of its trials."""
    return sum(s.untimed_mib(levels, basis) for s in SPECS if s.key in levels)


def active(levels: Levels) -> list[Factor]:
    """The factors the configuration has a level of, in the order a trial applies them."""
    return [f for f in FACTORS.values() if any(k in levels for k in f.keys)]


def check_study(disks: Disks, configs: Sequence[Levels]) -> None:
    for f in FACTORS.values():  # every factor: a study may be refused for lacking one
        f.check_study(disks, configs)


def check(disks: Disks, levels: Levels, backend: str, dialect: str) -> None:
    """Refuse, before anything is built, a configuration an active factor cannot apply."""
    at = Preflight(disks, levels, backend, dialect)
    for f in active(levels):
        f.check(at)


def shape(disks: Disks, workloads: Workloads, levels: Levels) -> tuple[Disks, Workloads]:
    """The study's [disks] and [workloads] as this configuration makes and measures them."""
    for f in active(levels):
        disks = f.disks(disks, levels)
        workloads = f.workloads(workloads, levels)
    return disks, workloads


def before_pool(
    journal: Journal, disks: Disks, devices: Sequence[str], levels: Levels
) -> dict[str, FactorSection]:
    """Every active factor's act on the trial's disks (journaled: undone at teardown);
    their sections by name."""
    at = BeforePool(journal, disks, devices, levels)
    return _sections((f.section, f.before_pool(at)) for f in active(levels))


def after_pool(at: AfterPool) -> dict[str, FactorSection]:
    """Every active factor's act on the built pool, in order (one that another active
    factor `replaces` left to it); their sections by name."""
    return _sections((f.section, f.after_pool(at)) for f in acting(at.levels))


def after_measurement(at: AfterMeasurement) -> dict[str, FactorSection]:
    """What the pool says of each active factor after a measurement (its part of the
    measurement's `pool` section), by section name."""
    return _sections((f.section, f.after_measurement(at)) for f in active(at.levels))


def acting(levels: Levels) -> list[Factor]:
    """The active factors whose `after_pool` runs: one that another active factor
    `replaces` is left to that one."""
    now = active(levels)
    replaced = {name for f in now for name in f.replaces}
    return [f for f in now if f.keys[0] not in replaced]


def postgres_settings(levels: Levels) -> dict[str, str]:
    """The settings every PostgreSQL cluster of the configuration starts with."""
    return {k: v for f in FACTORS.values() for k, v in f.postgres_settings(levels).items()}


def _sections(
    done: Iterable[tuple[str, FactorSection | None]],
) -> dict[str, FactorSection]:
    return {name: section for name, section in done if section is not None}
