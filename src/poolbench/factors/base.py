"""The trial factor protocol: what one factor does at each stage of a trial.

A trial is: the study checked (`check_study`, `check`) → its disks made (`disks`: the
configuration's [disks]; `workloads`: its [workloads]) → `before_pool` (the disks made, no
pool yet) → the pool built and verified → `after_pool` (before any workload: the system
around the pool, the pool's data) → the workloads, each followed by `after_measurement` (what
the pool says of the factor once the measurement's writes are synced) → teardown. A factor
acts only where it has something to do; every other stage is the protocol's default, which
does nothing. Whatever a factor changes outside its pool is journaled before it is changed,
so the trial's teardown undoes it (on error, Ctrl-C and in `poolbench cleanup` too). What a
factor did is its section of every measurement of the trial (Findings.other, under
`section`); what it reads back after a measurement is that measurement's (its `pool`
section, under `section`).

A factor is its module: factors/registry.py finds every module of this package that exports
a `FACTOR`, and applies them in the order their `order` declares. The module's `specs` are
its pure half (its level keys, accepted levels, description, untimed work), which study/
validates and estimates with. Nothing here is imported at run time but pure packages (the
stages' types are for the type checker), so study/ can take the specs without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from poolbench.factors.specs import Spec

if TYPE_CHECKING:
    from poolbench.backends.base import Backend, Pool
    from poolbench.records.sections import FactorSection
    from poolbench.safety.journal import Journal
    from poolbench.study.model import Disks, Workloads
    from poolbench.system.runner import Runner

Levels = Mapping[str, str]


@dataclass(frozen=True)
class Preflight:
    """One configuration as a factor checks it before anything is built: the study's
    disks, the configuration's levels, its backend and that backend's ZFS dialect."""

    disks: Disks
    levels: Levels
    backend: str
    dialect: str


@dataclass(frozen=True)
class BeforePool:
    """A trial whose disks are made and whose pool is not built yet."""

    journal: Journal
    disks: Disks
    devices: Sequence[str]
    levels: Levels


@dataclass(frozen=True)
class AfterPool:
    """A trial whose pool is built and verified, before its first workload: the working
    set (bytes), the most streams a workload writes with, and the run's seed."""

    runner: Runner
    journal: Journal
    backend: Backend
    pool: Pool
    levels: Levels
    working_set: int | None
    streams: int
    seed: int


@dataclass(frozen=True)
class AfterMeasurement:
    """A measurement just taken on the trial's pool, its writes synced into the pool's own
    accounting (ZFS: a txg)."""

    runner: Runner
    backend: Backend
    pool: Pool
    levels: Levels


@runtime_checkable
class Factor(Protocol):
    """One trial factor. `specs`: the levels it owns (the first is its name); `order`: its
    place among the factors a trial applies (lower first; each factor's says why it stands
    where it does); `section`: the key of what it did in Findings.other ('' when it records
    nothing itself)."""

    specs: tuple[Spec, ...]
    order: int
    section: str
    # Factors whose `after_pool` this one does instead when both are active (aging: fill)
    replaces: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        """The level keys it owns; the first is its name."""
        return tuple(s.key for s in self.specs)

    def check_study(self, disks: Disks, configs: Sequence[Levels]) -> None:
        """Refuse, before anything is built, a study no configuration of which can run."""
        return None

    def check(self, at: Preflight) -> None:
        """Refuse, before anything is built, a configuration this factor cannot apply."""
        return None

    def disks(self, disks: Disks, levels: Levels) -> Disks:
        """The study's [disks] as this configuration makes them."""
        return disks

    def workloads(self, workloads: Workloads, levels: Levels) -> Workloads:
        """The study's [workloads] as this configuration measures them."""
        return workloads

    def before_pool(self, at: BeforePool) -> FactorSection | None:
        """Act on the trial's disks before the pool is built; its section, or None."""
        return None

    def after_pool(self, at: AfterPool) -> FactorSection | None:
        """Act on the built pool (or its host) before the workloads; its section, or None."""
        return None

    def after_measurement(self, at: AfterMeasurement) -> FactorSection | None:
        """Read back what the pool says of this factor after each measurement: its part of
        the measurement's `pool` section (under `section`), or None."""
        return None

    def postgres_settings(self, levels: Levels) -> Mapping[str, str]:
        """The PostgreSQL settings this factor gives every cluster a pgbench workload makes
        (asked of every factor, active or not: a setting's default is recorded too)."""
        return {}
