"""Each trial factor has one home (issue 40): its level key is spelled in its own module of
factors/ (with its specs, the pure half), in the built-in studies that vary it (study/builtin/)
and nowhere else. Validation (study/model.py) and estimation (study/estimate.py) iterate the
specs factors/registry.py gathers; the trial loop, its dry run and its pgbench clusters
iterate its factors; consistency (study/consistency.py) names the keys of its cross-factor
rules from factors/specs.py.

What is left is listed below with its reason: either a word that is a factor's key by
coincidence (a plan's `fill` ratio, a bench's `compressibility` option), or a reader of a
factor's untyped section that its typed section will replace. The typed sections
(records/sections.py) name the sections they decode. A listed file that no longer
spells a key fails the test, so the list only shrinks.

From factors/ study/ takes only specs.py (pure: it imports no I/O package) and the
registry's gathered specs; the registry loads the factor modules (whose acting stages study/
never calls) and imports nothing of I/O at run time itself."""

from __future__ import annotations

import ast
from pathlib import Path

from poolbench.factors import registry

SRC = Path(__file__).resolve().parent.parent / "src" / "poolbench"
HOMES = ("factors/", "study/builtin/", "records/sections.py")  # the last: typed sections
KEYS = set(registry.KEYS)

# file -> (the keys it still spells, why)
LEFT: dict[str, tuple[set[str], str]] = {
    "cli/bench_cmd.py": (
        {"fill"},
        "the measured pool's own fill (its fingerprint), not the factor",
    ),
    "cli/fleet_bench.py": ({"compressibility"}, "the bench's [workloads] option of that name"),
    "engine/subject.py": ({"compressibility"}, "the bench's option of that name, as recorded"),
    "fleet/run.py": ({"compressibility"}, "the fleet bench's option of that name, as recorded"),
    "backends/zfs/backend.py": ({"dedup"}, "the dedup allocation class (a vdev), not the factor"),
    "backends/zfs/readback.py": ({"dedup"}, "the dedup allocation class (a vdev), not the factor"),
    "backends/zfs/validate.py": ({"dedup"}, "the dedup allocation class (a vdev), not the factor"),
    "cli/plan_show.py": ({"dedup"}, "the dedup allocation class (a vdev), not the factor"),
    "planner/capacity.py": ({"dedup"}, "the dedup allocation class (a vdev), not the factor"),
    "planner/layout.py": ({"dedup"}, "the dedup allocation class (a vdev), not the factor"),
    "zfs/parse.py": ({"dedup"}, "the dedup allocation class (a vdev), not the factor"),
    "cli/plan_data.py": ({"compressibility"}, "the plan's data model field"),
    "cli/plan_data_show.py": ({"fill"}, "the special vdev's fill ratio"),
    "planner/dataspace.py": ({"compressibility"}, "the plan's data model field"),
    "planner/resilience.py": (
        {"fill", "dedup"},
        "the plan's fill ratio; the dedup allocation class (a vdev), not the factor",
    ),
    "planner/special.py": ({"fill"}, "the special vdev's fill ratio"),
    "records/run_metadata.py": ({"compressibility"}, "the bench's stored option of that name"),
    "records/stored_study.py": (
        {"compressibility", "vdev_source"},
        "the stored study's [workloads] and [disks] settings, decoded for the reports",
    ),
    "report/history.py": ({"fill"}, "the measured pool's fill (its fingerprint)"),
    "report/html_charts.py": ({"fill"}, "the measured pool's fill (its fingerprint)"),
    "report/layout.py": (
        {"compressibility", "vdev_source"},
        "the column headings of every factor name, backend options too, in one table",
    ),
}


def _spelled() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(HOMES):
            continue
        tree = ast.parse(path.read_text())
        keys = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in KEYS}
        if keys:
            found[rel] = keys
    return found


def test_no_factor_key_is_spelled_outside_its_homes_but_the_listed() -> None:
    spelled = _spelled()
    unlisted = {f: k - LEFT.get(f, (set(), ""))[0] for f, k in spelled.items()}
    assert {f: k for f, k in unlisted.items() if k} == {}
    stale = {f: want - spelled.get(f, set()) for f, (want, _why) in LEFT.items()}
    assert {f: k for f, k in stale.items() if k} == {}, "no longer spelled: shrink LEFT"


def test_each_factor_declares_a_spec_for_every_key_it_owns() -> None:
    assert [s.key for s in registry.SPECS] == list(registry.KEYS)
    assert all(s.description for s in registry.SPECS)


def _imports(path: Path, runtime: bool = False) -> set[str]:
    """The poolbench names `path` imports (`runtime`: not those under `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text())
    if runtime:
        tree.body = [n for n in tree.body if not _type_checking(n)]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("poolbench"):
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("poolbench")}
    return out


def _is_typed_section(name: str) -> bool:
    """`poolbench.factors.MODULE.NAME` is a frozen dataclass a stored section decodes into."""
    import dataclasses
    import importlib

    module, _, attr = name.rpartition(".")
    value = getattr(importlib.import_module(module), attr, None)
    return (
        isinstance(value, type)
        and dataclasses.is_dataclass(value)
        and value.__dataclass_params__.frozen  # type: ignore[attr-defined]
        and callable(getattr(value, "decode", None))
    )


def _type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"


def test_study_takes_only_the_pure_half_of_the_factors() -> None:
    from_factors = {
        name
        for path in (SRC / "study").rglob("*.py")
        for name in _imports(path)
        if name.startswith("poolbench.factors")
    }
    pure = {"poolbench.factors.specs", "poolbench.factors.registry"}
    # besides, a factor module's typed section, which a built-in study's notes decode
    sections = {name for name in from_factors - pure if _is_typed_section(name)}
    assert from_factors - sections == pure
    packages = {name.split(".")[1] for name in _imports(SRC / "factors" / "specs.py")}
    assert packages <= {"errors", "units", "workloads"}, "specs.py stays pure"
    # the registry and the protocol it iterates import I/O types only for the type checker
    for module in ("registry.py", "base.py"):
        runtime = {n.split(".")[1] for n in _imports(SRC / "factors" / module, runtime=True)}
        assert runtime <= {"factors", "discovery"}, module
