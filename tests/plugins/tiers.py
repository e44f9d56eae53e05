"""The suite's tiers, chosen by what a test uses (docs/testing.md).

A test is in the **machine** tier when it uses a fixture made with `machine_fixture`, directly
or through another fixture: loop devices, pools, mounts, blkio caps, a zfs-fuse or PostgreSQL
daemon, a timed disk. Those tests need root (unless the fixture says `root=False`), run one
after another on one worker in parallel (`xdist_group("machine")`), hold the machine lock,
and (`slow=True`) are left out of the fast tier. Nothing here names a test or a module:
renaming one cannot move it to another tier.

Markers a test or module sets itself: `slow` (long, but on no disk of the machine: a browser,
the type checker, a simulation), `root` (needs root for something no machine fixture makes),
`untimed` (a machine test whose figures are bytes, counts and outcomes, not speeds: it runs
early in the chain), `campaign` (skipped unless POOLBENCH_CAMPAIGN=1: a costly scenario
beside a cheaper real one the default tier keeps). `machine` is set here only, from the
fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from tests.plugins import lock

IS_ROOT = os.geteuid() == 0
ROOT_REASON = "needs root (loop devices, mounts, pools, caps, daemons): run the suite as root"
CAMPAIGN_ENV = "POOLBENCH_CAMPAIGN"
CAMPAIGN_REASON = (
    "a campaign test (costly or long; the default tier keeps a cheaper real one of its "
    f"kind): set {CAMPAIGN_ENV}=1 to run it (docs/testing.md)"
)
BUSY_REASON = (
    "the machine is busy: another test session holds its lock (fast tier: not waited for; "
    "the whole suite waits and runs this)"
)
MACHINE_GROUP = "machine"
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Tier:
    slow: bool  # left out of the fast tier (`-m "not slow"`)
    root: bool = True  # skipped with ROOT_REASON where the suite does not run as root


# Keyed by the fixture's own function, not its name: two modules' fixtures of one name (each
# has its `lab`) are told apart, and a pure module's `lab` is never taken for a machine one.
_TIERS: dict[Callable[..., Any], Tier] = {}


def machine_fixture(*, slow: bool, root: bool = True, scope: str = "function") -> Callable[[F], F]:
    """`@machine_fixture(slow=...)` in place of `@pytest.fixture`, for a fixture that makes or
    changes something of the machine's (loop devices, pools, mounts, caps, daemons) or times
    its disks. Every test that uses it, directly or through other fixtures, is a machine test.
    """

    def register(fn: F) -> F:
        _TIERS[fn] = Tier(slow, root)
        return pytest.fixture(scope=scope)(fn)  # type: ignore[call-overload, no-any-return]

    return register


def tier_of(item: pytest.Item) -> Tier | None:
    """The machine tier the item's fixtures put it in (slow if any of them is), or None."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    found = [
        _TIERS[defs[-1].func]  # the definition the test gets (an override wins)
        for name in getattr(item, "fixturenames", ())
        if (defs := info.name2fixturedefs.get(name)) and defs[-1].func in _TIERS
    ]
    if not found:
        return None
    return Tier(slow=any(t.slow for t in found), root=any(t.root for t in found))


def is_machine(item: pytest.Item) -> bool:
    return item.get_closest_marker("machine") is not None


def _chain_position(item: pytest.Item) -> int:
    """In parallel the machine's worker starts with the untimed tests: the other worker's
    fast tests take a core for the first minutes, and a loaded machine makes zfs-fuse write
    more transaction groups (more metadata bytes) and later. Timed ones come after."""
    if not is_machine(item):
        return 2
    return 0 if item.get_closest_marker("untimed") else 1


def _zfs_fuse_died() -> bool:
    """The rerun condition (pytest-rerunfailures, evaluated after a failed attempt): only a
    failure during which the daemon died is attempted again, and only once."""
    from tests.plugins.zfs_fuse import zpool_answers

    return not zpool_answers()


@pytest.hookimpl(tryfirst=True)  # before -m deselects, and before xdist reads the group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if getattr(config, "workerinput", {}).get("poolbench_dist") == "loadgroup":
        config.option.loadgroup = True  # read by pytest-xdist's worker right after this hook
    skip_root = pytest.mark.skip(reason=ROOT_REASON)
    campaign = os.environ.get(CAMPAIGN_ENV) == "1"
    for item in items:
        if item.get_closest_marker("campaign") and not campaign:
            item.add_marker(pytest.mark.skip(reason=CAMPAIGN_REASON))
        tier = tier_of(item)
        if tier is not None:
            item.add_marker(pytest.mark.machine)
            item.add_marker(pytest.mark.xdist_group(MACHINE_GROUP))
            if tier.root:
                item.add_marker(pytest.mark.root)
            if tier.slow:
                item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("root") and not IS_ROOT:
            item.add_marker(skip_root)
        if "zfs_fuse" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.flaky(reruns=1, condition=_zfs_fuse_died))
    if config.getoption("loadgroup", False) or config.getoption("dist", "no") == "loadgroup":
        items.sort(key=_chain_position)  # stable: each module's tests stay together


WAITS_FOR_LOCK = pytest.StashKey[bool]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """A session that selected slow machine tests waits for the machine lock; one that
    selected only fast ones (the fast tier) does not (see pytest_runtest_setup)."""
    slow = any(is_machine(i) and i.get_closest_marker("slow") for i in session.items)
    session.config.stash[WAITS_FOR_LOCK] = slow


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A machine test holds the machine lock (taken at the first one, kept to the end). In
    the fast tier, which must not wait minutes for another session's real-pool tests, a
    machine test finding the lock held elsewhere is skipped with that reason instead (the
    whole suite waits for it and runs them). In parallel, the tests beside the machine's
    chain run at a low CPU priority: the chain's length is the suite's, and its zfs-fuse, fio
    and poolbench processes (started from this worker, so inheriting its priority) should not
    wait for a core."""
    if is_machine(item) and IS_ROOT:  # only root builds pools (its lock file is root's)
        if item.config.stash.get(WAITS_FOR_LOCK, True):
            reporter = item.config.pluginmanager.get_plugin("terminalreporter")
            lock.take(reporter.write_line if reporter is not None else print)
        elif not lock.take_if_free():
            pytest.skip(BUSY_REASON)
    if IS_ROOT and os.environ.get("PYTEST_XDIST_WORKER"):
        os.setpriority(os.PRIO_PROCESS, 0, 0 if is_machine(item) else 15)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist turns `-n N` alone into --dist load
def pytest_cmdline_main(config: pytest.Config) -> None:
    """`-n N` distributes by group: the tests that use the machine's disks on one worker."""
    if config.getoption("numprocesses", None) and config.getoption("dist", "no") == "no":
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: no error where it is absent
def pytest_configure_node(node: Any) -> None:  # in the controller
    """A worker parses the command line again, so `-n N` without --dist would leave it
    believing the run is not grouped: it is told the controller's mode."""
    node.workerinput["poolbench_dist"] = node.config.getoption("dist")


def pytest_configure(config: pytest.Config) -> None:
    """In parallel (pytest-xdist), every machine test must run on one worker (`--dist
    loadgroup`): two workers building pools at once would break each other."""
    parallel = (config.getoption("numprocesses", None) or 0) != 0
    if not parallel or hasattr(config, "workerinput"):
        return
    if config.getoption("dist", "no") != "loadgroup":
        raise pytest.UsageError(
            "tests that build pools run one at a time on one worker: leave out --dist (-n 2 "
            "alone distributes by group), or give --dist loadgroup"
        )
    if IS_ROOT and lock.held_elsewhere():
        print(f"\nnote: another test session holds {lock.MACHINE_LOCK} (it builds pools here):")
        print("this session's machine tests wait for it, or in the fast tier are skipped")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    lock.release()
