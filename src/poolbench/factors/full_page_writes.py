"""The `full_page_writes` trial factor: PostgreSQL's setting for every cluster a pgbench
workload makes in the configuration (`off` is safe where the filesystem never tears a page:
ZFS's copy-on-write). engine/pgbench_run.py starts each cluster with the settings the
factors give (registry.postgres_settings)."""

from __future__ import annotations

from collections.abc import Mapping

from poolbench.factors.base import Factor, Levels
from poolbench.factors.specs import Spec, one_of

KEY = "full_page_writes"
DEFAULT = "on"  # PostgreSQL's own default, stated so every cluster records what it ran with


class FullPageWrites(Factor):
    specs = (Spec(KEY, "PostgreSQL (pgbench workloads): on | off", one_of("on", "off")),)
    order = 80  # acts only inside a pgbench workload: last
    section = ""  # the pgbench section records the settings the cluster ran with

    def postgres_settings(self, levels: Levels) -> Mapping[str, str]:
        return {KEY: str(levels.get(KEY, DEFAULT))}


FACTOR = FullPageWrites()
