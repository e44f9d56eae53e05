"""Factor name → factor, in the order a trial applies them; and each stage of a trial over
the factors a configuration has. The trial loop, its dry run and its checks call these and
name no factor. A plain dict, as backends/registry.py is."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from poolbench.backends.base import Backend, Pool
from poolbench.factors import (
    aging,
    arc_max,
    compressibility,
    fill,
    full_page_writes,
    load,
    slow_member,
    vdev_source,
)
from poolbench.factors.base import AfterPool, BeforePool, Factor, Levels, Preflight
from poolbench.records.jsontypes import JsonObject
from poolbench.safety.journal import Journal
from poolbench.study.model import Disks, Workloads
from poolbench.system.runner import Runner

# In the order a trial applies them: the ARC's ceiling before the pool's data is laid down.
FACTORS: dict[str, Factor] = {
    f.keys[0]: f
    for f in (
        vdev_source.FACTOR,
        compressibility.FACTOR,
        arc_max.FACTOR,
        fill.FACTOR,
        aging.FACTOR,
        slow_member.FACTOR,
        load.FACTOR,
        full_page_writes.FACTOR,
    )
}
# Every level key a factor owns: what the backends are not asked to take.
KEYS: tuple[str, ...] = tuple(k for f in FACTORS.values() for k in f.keys)


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


def disks_for(disks: Disks, levels: Levels) -> Disks:
    """The study's [disks] as this configuration makes them."""
    for f in active(levels):
        disks = f.disks(disks, levels)
    return disks


def workloads_for(workloads: Workloads, levels: Levels) -> Workloads:
    """The study's [workloads] as this configuration measures them."""
    for f in active(levels):
        workloads = f.workloads(workloads, levels)
    return workloads


def before_pool(
    journal: Journal, disks: Disks, devices: Sequence[str], levels: Levels
) -> JsonObject:
    """Every active factor's act on the trial's disks (journaled: undone at teardown);
    their sections by name."""
    at = BeforePool(journal, disks, devices, levels)
    return _sections((f.section, f.before_pool(at)) for f in active(levels))


def after_pool(at: AfterPool) -> JsonObject:
    """Every active factor's act on the built pool, in order (one that another active
    factor `replaces` left to it); their sections by name."""
    return _sections((f.section, f.after_pool(at)) for f in acting(at.levels))


def acting(levels: Levels) -> list[Factor]:
    """The active factors whose `after_pool` runs: one that another active factor
    `replaces` is left to that one."""
    now = active(levels)
    replaced = {name for f in now for name in f.replaces}
    return [f for f in now if f.keys[0] not in replaced]


def dry_run(runner: Runner, backend: Backend, pool: Pool, levels: Levels) -> None:
    """--dry-run: the commands the factors that act after the pool is built would run."""
    for f in acting(levels):
        f.dry_run(runner, backend, pool, levels)


def postgres_settings(levels: Levels) -> dict[str, str]:
    """The settings every PostgreSQL cluster of the configuration starts with."""
    return {k: v for f in FACTORS.values() for k, v in f.postgres_settings(levels).items()}


def _sections(done: Iterable[tuple[str, JsonObject | None]]) -> JsonObject:
    return {name: section for name, section in done if section is not None}
