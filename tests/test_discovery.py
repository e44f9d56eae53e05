"""The registries find their members (poolbench/discovery.py): a trial factor or built-in study
is its module alone. Every module of factors/ and study/builtin/ is a member or a helper its
registry names; the factors keep the order a trial applied them in before they were found
rather than listed; a module that exports nothing, and two members of one name, are caught."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TypeGuard

import pytest

from poolbench import discovery
from poolbench.backends.base import Pool, PoolSpec
from poolbench.backends.md import MdBackend
from poolbench.engine.pool_hooks import PoolHooks
from poolbench.factors import registry as factors
from poolbench.factors.base import AfterMeasurement, Factor
from poolbench.factors.specs import Spec, one_of
from poolbench.records.jsontypes import JsonObject
from poolbench.study.builtin import registry as studies
from poolbench.system.runner import RecordingRunner
from poolbench.workloads.library import get

# The order of a trial's factor stages when the registry was a listed tuple (issue 40): the
# ARC's ceiling before the pool's data is laid down, the fill before the aging that replaces
# it, the slow member before the resilver's load.
TRIAL_ORDER = [
    "vdev_source", "compressibility", "arc_max", "fill", "aging", "slow_member", "load",
    "full_page_writes",
]  # fmt: skip


def test_every_module_of_factors_is_a_factor_or_a_named_helper() -> None:
    assert factors.FOUND.strays == ()
    assert len(factors.FOUND.members) == len(factors.FACTORS)


def test_every_module_of_the_builtin_studies_is_a_study_or_a_named_helper() -> None:
    assert studies.FOUND.strays == ()
    assert len(studies.FOUND.members) == len(studies.STUDIES)


def test_the_factors_apply_in_the_order_they_declare_which_is_the_trials_order() -> None:
    orders = [f.order for f in factors.FACTORS.values()]
    assert orders == sorted(orders)
    assert [f for f in factors.FACTORS if f in TRIAL_ORDER] == TRIAL_ORDER


def test_the_studies_are_listed_by_name() -> None:
    assert list(studies.STUDIES) == sorted(studies.STUDIES)


def _is_member(value: object) -> TypeGuard[str]:
    return isinstance(value, str)


@pytest.fixture
def package(tmp_path: Path) -> Iterator[Path]:
    """An importable package `pbdisc` in tmp_path (removed from sys.modules after)."""
    root = tmp_path / "pbdisc"
    root.mkdir()
    (root / "__init__.py").write_text("")
    sys.path.insert(0, str(tmp_path))
    yield root
    sys.path.remove(str(tmp_path))
    for name in [m for m in sys.modules if m == "pbdisc" or m.startswith("pbdisc.")]:
        del sys.modules[name]


def _module(root: Path, name: str, body: str) -> None:
    (root / f"{name}.py").write_text(body)


def test_a_module_that_exports_nothing_is_named_a_stray(package: Path) -> None:
    _module(package, "zeta", "MEMBER = 'zeta'\n")
    _module(package, "alpha", "MEMBER = 'alpha'\n")
    _module(package, "misspelt", "MEMBR = 'misspelt'\n")  # exports nothing
    _module(package, "wrong", "MEMBER = 1\n")  # not a member
    _module(package, "helper", "X = 1\n")
    found = discovery.members("pbdisc", "MEMBER", _is_member, ("helper",))
    assert found.members == ("alpha", "zeta")  # module-name order
    assert found.strays == ("misspelt", "wrong")


def test_two_members_of_one_name_are_refused() -> None:
    first, second = ("same", 1), ("same", 2)
    with pytest.raises(discovery.DuplicateMember, match=r"'same' is claimed by both \('same', 1\)"):
        discovery.by_name([first, second], lambda m: (m[0],))
    assert discovery.by_name([first, ("other", 3)], lambda m: (m[0],))["same"] is first


def test_two_factors_owning_one_key_or_one_place_are_refused() -> None:
    fill, aging = factors.FACTORS["fill"], factors.FACTORS["aging"]
    with pytest.raises(discovery.DuplicateMember, match="'fill' is claimed"):
        discovery.by_name([fill, fill], lambda f: f.keys)
    with pytest.raises(discovery.DuplicateMember, match="'order 40'"):
        discovery.by_name([fill, fill, aging], lambda f: (f"order {f.order}",))


# -- what a found factor reads back after each measurement ------------------------------------
class _ReadsBack(Factor):
    """A factor that reads the pool back after each measurement (as `dedup` does)."""

    specs = (Spec("readsback", "test", one_of("on")),)
    order = 1000
    section = "readsback"

    def after_measurement(self, at: AfterMeasurement) -> JsonObject | None:
        return {"pool": at.pool.spec.name, "level": at.levels["readsback"]}


def test_a_factor_reads_the_pool_back_into_each_measurements_pool_section(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PoolHooks.after (engine/session.py merges it into the measurement's `pool` section)
    asks the configuration's factors, and only those it has a level of."""
    monkeypatch.setitem(factors.FACTORS, "readsback", _ReadsBack())
    spec = PoolSpec("md", "raid5", ("/dev/loop1",), "pbrb", Path("/var/tmp/x"))
    pool = Pool(spec, Path("/mnt/x"), [])
    md = MdBackend(RecordingRunner())  # no accounting of its own: only the factor's reading
    said = PoolHooks(RecordingRunner(), md, pool, {"readsback": "on"}).after(get("seq-write"))
    assert said.to_json() == {"readsback": {"pool": "pbrb", "level": "on"}}
    assert PoolHooks(RecordingRunner(), md, pool, {}).after(get("seq-write")).to_json() == {}
