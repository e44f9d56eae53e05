"""The `load` trial factor: a foreground fio workload the pool serves while it resilvers
(`none`: an idle resilver), then once more alone on the healthy pool, so a study sees what
the resilver costs the foreground and what the foreground costs the resilver. The resilver
itself, its foreground run and their timing live in engine/pool_hooks.py and
engine/resilver_load.py; this module says which foreground a configuration has."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from poolbench.errors import UsageError
from poolbench.factors import specs
from poolbench.factors.base import Factor, Levels
from poolbench.factors.specs import Spec
from poolbench.workloads.library import parse_load

if TYPE_CHECKING:
    pass

KEY: Final = "load"  # Final: also the resilver section's key for its load (a TypedDict key)
NONE = "none"


def of(levels: Levels) -> str | None:
    """The configuration's foreground workload (`seq-read@20M`), or None: an idle resilver."""
    level = levels.get(KEY, NONE)
    return None if level == NONE else level


def _is_load(v: object) -> bool:
    if str(v) == NONE:
        return True
    try:
        parse_load(str(v))
    except UsageError:
        return False
    return True


def _untimed_mib(levels: specs.Levels, basis: specs.Basis) -> float:
    """A resilver's foreground: as long again as the resilver, then once alone."""
    return 0.0 if str(levels.get(KEY, NONE)) == NONE else 2 * basis.resilver_run_mib


class Load(Factor):
    """Acts inside the resilver workload (engine/pool_hooks.py asks `of`), not before it."""

    specs = (
        Spec(
            KEY,
            "the resilver's foreground workload: none, or a fio workload (seq-read, "
            "rand-read-4k, rand-write-4k) with an optional rate, seq-read@20M",
            _is_load,
            _untimed_mib,
        ),
    )
    order = 70  # acts inside the resilver workload, after every stage before the workloads
    section = ""  # recorded in the resilver's own section, under `load`


FACTOR = Load()
