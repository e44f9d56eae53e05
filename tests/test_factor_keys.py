"""Each trial factor has one home (issue 40): its level key is spelled in factors/ (the pure
half in factors/specs.py, the acting half in its own module), in the built-in studies that vary
it (study/builtin/) and nowhere else. Validation (study/model.py), estimation
(study/estimate.py) and consistency (study/consistency.py) iterate factors/specs.py; the trial
loop, its dry run and its pgbench clusters iterate factors/registry.py.

What is left is listed below with its reason: either a word that is a factor's key by
coincidence (a plan's `fill` ratio, a bench's `compressibility` option), or a reader of a
factor's untyped section that its typed section will replace. The typed sections
(records/sections.py) name the sections they decode. A listed file that no longer
spells a key fails the test, so the list only shrinks.

study/ is pure: from factors/ it imports only specs.py, which imports no I/O package."""

from __future__ import annotations

import ast
from pathlib import Path

from poolbench.factors import registry, specs

SRC = Path(__file__).resolve().parent.parent / "src" / "poolbench"
HOMES = ("factors/", "study/builtin/", "records/sections.py")  # the last: typed sections
KEYS = {s.key for s in specs.SPECS}

# file -> (the keys it still spells, why)
LEFT: dict[str, tuple[set[str], str]] = {
    "cli/bench_cmd.py": (
        {"fill"},
        "the measured pool's own fill (its fingerprint), not the factor",
    ),
    "cli/fleet_bench.py": ({"compressibility"}, "the bench's [workloads] option of that name"),
    "cli/plan_data.py": ({"compressibility"}, "the plan's data model field"),
    "cli/plan_data_options.py": ({"compressibility"}, "the plan's data model field"),
    "cli/plan_data_show.py": ({"compressibility", "fill"}, "the plan's data model fields"),
    "planner/dataspace.py": ({"compressibility"}, "the plan's data model field"),
    "planner/resilience.py": ({"fill"}, "the plan's fill ratio"),
    "planner/special.py": ({"fill"}, "the special vdev's fill ratio"),
    "records/run_metadata.py": ({"compressibility"}, "the bench's stored option of that name"),
    "report/data.py": ({"compressibility"}, "the stored study's [workloads] setting"),
    "report/header.py": ({"vdev_source"}, "the stored study's [disks] setting"),
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


def test_the_specs_and_the_registry_name_the_same_keys_in_the_same_order() -> None:
    assert [s.key for s in specs.SPECS] == list(registry.KEYS)


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("poolbench"):
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("poolbench")}
    return out


def test_study_takes_only_the_pure_half_of_the_factors() -> None:
    from_factors = {
        name
        for path in (SRC / "study").rglob("*.py")
        for name in _imports(path)
        if name.startswith("poolbench.factors")
    }
    assert from_factors == {"poolbench.factors.specs"}
    packages = {name.split(".")[1] for name in _imports(SRC / "factors" / "specs.py")}
    assert packages <= {"errors", "units", "workloads"}, "specs.py stays pure"
