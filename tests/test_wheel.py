"""The wheel works without the checkout: built from the sources alone, installed with its
pinned dependencies into a fresh virtualenv with no index, and every command that reads
something of poolbench's own (the workload library, the built-in studies, the planner,
doctor's list) run from an empty directory with no checkout on disk (an empty tmpfs over it,
in the command's own mount namespace), poolbench imported from the virtualenv. Slow (the
wheel is built and installed once, about a minute); the dry run is a machine test (it needs
the zfs-fuse daemon)."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from tests.wheelkit import (
    CHECKOUTS,
    ROOT,
    Installed,
    installed_package_dir,
    run,
    shared_install,
    without_checkout,
)

from poolbench import __version__, capabilities
from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import rules_by_name
from poolbench.study.builtin import registry
from poolbench.workloads import library

pytestmark = pytest.mark.slow  # a build and an install, on no disk of the machine


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Installed]:
    return shared_install(tmp_path_factory)


def test_the_wheel_holds_every_module_and_the_type_marker(
    installed: tuple[Path, Installed],
) -> None:
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    src = ROOT / "src"
    modules = {str(p.relative_to(src)) for p in (src / "poolbench").rglob("*.py")}
    assert modules <= names, sorted(modules - names)[:5]
    assert "poolbench/py.typed" in names
    assert wheel.name == f"poolbench-{__version__}-py3-none-any.whl"


def test_it_runs_from_the_virtualenv_not_the_checkout(installed: tuple[Path, Installed]) -> None:
    _, inst = installed
    pkg = installed_package_dir(inst)
    assert pkg.is_relative_to(inst.venv) and not pkg.is_relative_to(ROOT)
    # where the commands below run, the checkout is not there, and this one still is outside
    assert ROOT in CHECKOUTS and (ROOT / "pyproject.toml").is_file()
    hidden = run(without_checkout(["ls", "-A", *map(str, CHECKOUTS)]), timeout=60).stdout
    assert [line for line in hidden.splitlines() if line and not line.endswith(":")] == []
    version = inst.poolbench("--version", hide_checkout=True).stdout.strip()
    assert version == f"poolbench, version {__version__}"


def test_plan_gives_the_planners_figures(installed: tuple[Path, Installed]) -> None:
    _, inst = installed
    doc = json.loads(inst.poolbench("plan", "--disks", "4x4T", "--json", hide_checkout=True).stdout)
    by_layout = {" + ".join(c["layout"]): c for c in doc["candidates"]}
    raidz1 = by_layout["raidz1:4x4T"]
    rules = rules_by_name(doc["zfs_rules"])
    layout = parse_layout("raidz1:4x4T")
    plan = plan_pool(layout, doc["ashift"], rules, doc["whole_disk"])
    assert raidz1["usable_bytes"] == plan.usable_bytes
    # three data disks of four, less ZFS's reservations: between 70% and 75% of the raw 16 TiB
    assert 0.70 < raidz1["usable_bytes"] / (4 * 4 * 2**40) < 0.75
    assert raidz1["failures_tolerated"] == 1


def test_doctor_study_list_and_workloads_read_the_installed_package(
    installed: tuple[Path, Installed],
) -> None:
    _, inst = installed
    # doctor exits 7 where the core is missing, so its code is not checked, but it always
    # prints its report: what it said is shown when it did not
    p = inst.poolbench("doctor", "--json", check=False, hide_checkout=True)
    assert p.stdout.startswith("{"), f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    doc = json.loads(p.stdout)
    assert [c["id"] for c in doc["capabilities"]] == [c.id for c in capabilities.CAPABILITIES]
    assert doc["poolbench"] == __version__
    listing = inst.poolbench("study", "--list", hide_checkout=True).stdout
    for name in registry.STUDIES:
        assert re.search(rf"│ {re.escape(name)}\s", listing), name
    assert "--print-toml > NAME.toml" in " ".join(listing.split())
    workloads = json.loads(inst.poolbench("workloads", "--json", hide_checkout=True).stdout)
    expected = library.catalogue(128 << 10) + [library.get(n) for n in library.SPECIAL]
    assert [w["name"] for w in workloads] == [w.name for w in expected]
    assert workloads[0]["fio"], workloads[0]  # the job definition came along
    toml = inst.poolbench("study", "parity", "--print-toml", hide_checkout=True).stdout
    assert 'name = "parity"' in toml and "raidz1:6" in toml


def test_a_study_dry_run_from_the_wheel(zfs_fuse: None, installed: tuple[Path, Installed]) -> None:
    """The dry run plans against this machine's ZFS (zfs-fuse here: its daemon must answer)."""
    _, inst = installed
    scratch = inst.cwd.parent / "scratch"
    p = inst.poolbench(
        "study",
        "parity",
        "--disks",
        "4x1G",
        "--dry-run",
        "--db",
        str(inst.cwd.parent / "r.db"),
        "--scratch-dir",
        str(scratch),
        hide_checkout=True,
    )
    assert "plan for study 'parity'" in p.stdout
    # raidz1 and raidz2 over the 4 disks (raidz3 needs 5), 3 replicates each at stage one
    assert "6 trials, 2 configurations × 3 replicates" in p.stdout, p.stdout
    assert "replicate 1: backend=zfs layout=raidz1:4 ashift=12" in p.stdout
    # the pool's own cache file in its scratch directory, never the system's (docs/long-runs.md)
    create = re.search(r"would run: zpool create (.*)", p.stdout + p.stderr)
    assert create is not None, p.stdout + p.stderr
    assert "-o ashift=12" in create[1], create[1]
    assert re.search(rf"-o cachefile={re.escape(str(scratch))}/pb\w+/pb\w+\.cache ", create[1])
    assert "dry run: nothing was changed" in p.stderr
    assert not scratch.exists() and list(inst.cwd.iterdir()) == []
