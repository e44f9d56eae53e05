"""The tiers come from the fixtures a test uses (tests/plugins/tiers.py, docs/testing.md): a
small suite collected by an inner pytest gets its markers, its group, its root skip and its
place in the chain from its fixtures and markers alone, whatever its files are called."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest
from tests.plugins import lock, tiers

CONFTEST = """
import pytest
from tests.plugins.tiers import machine_fixture

pytest_plugins = ["tests.plugins.tiers"]

@machine_fixture(slow=True)
def pool():
    yield "pool"

@machine_fixture(slow=False)
def loop():
    yield "loop"

@machine_fixture(slow=False, root=False)
def inventory():
    yield "inventory"

@pytest.fixture
def lab(pool):  # a plain fixture on a machine one: its tests are machine tests too
    yield pool
"""

A_MODULE = """
import pytest

pytestmark = pytest.mark.untimed

def test_through_lab(lab): pass
def test_loop_only(loop): pass
def test_pure(): pass
"""

ANOTHER = """
import pytest

@pytest.fixture
def lab():  # the same name as the machine one, and nothing of the machine's
    yield "paper"

def test_own_lab(lab): pass
def test_inventory(inventory): pass
@pytest.mark.root
def test_root_only(): pass
"""


def _markers(item: pytest.Item) -> set[str]:
    return {m.name for m in item.iter_markers()} & {"machine", "slow", "root", "untimed"}


@pytest.fixture
def suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> pytest.Pytester:
    lock.for_inner_session(monkeypatch, tmp_path / "machine.lock")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_zz_first=A_MODULE, test_aa_second=ANOTHER)
    return pytester


def test_a_tests_tier_follows_its_fixtures_not_its_name(suite: pytest.Pytester) -> None:
    items = {item.name: item for item in suite.inline_genitems()[0]}
    assert {name: _markers(item) for name, item in items.items()} == {
        "test_through_lab": {"machine", "slow", "root", "untimed"},
        "test_loop_only": {"machine", "root", "untimed"},
        "test_pure": {"untimed"},  # marked, but no machine fixture: beside the chain
        "test_own_lab": set(),  # another module's `lab`
        "test_inventory": {"machine"},  # a machine fixture any user may use
        "test_root_only": {"root"},
    }
    group = {n: i.get_closest_marker("xdist_group") for n, i in items.items()}
    assert {n for n, g in group.items() if g is not None and g.args == ("machine",)} == {
        "test_through_lab", "test_loop_only", "test_inventory",
    }  # fmt: skip


def test_in_parallel_the_chain_starts_with_the_untimed_tests(suite: pytest.Pytester) -> None:
    items = suite.inline_genitems()[0]
    items.sort(key=tiers._chain_position)
    assert [i.name for i in items] == [
        "test_through_lab", "test_loop_only",  # untimed machine tests
        "test_inventory",  # timed
        "test_own_lab", "test_root_only", "test_pure",  # beside the chain, as collected
    ]  # fmt: skip


def test_without_root_every_root_test_is_skipped_with_one_reason(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers, "IS_ROOT", False)
    result = suite.runpytest_inprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, skipped=3)
    skipped = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert skipped and all(line.endswith(tiers.ROOT_REASON) for line in skipped), skipped


def test_the_fast_tier_skips_its_machine_tests_while_another_session_holds_the_lock(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only fast machine tests selected: the lock held elsewhere is not waited for; each
    machine test is skipped with that reason, the pure ones run."""
    monkeypatch.setattr(tiers, "IS_ROOT", True)
    with open(lock.MACHINE_LOCK, "a+") as other:  # another session's hold
        fcntl.flock(other, fcntl.LOCK_EX)
        result = suite.runpytest_inprocess("-rs", "-p", "no:cacheprovider", "-m", "not slow")
    result.assert_outcomes(passed=3, skipped=2, deselected=1)  # the slow one deselected
    skipped = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert skipped and all(line.endswith(tiers.BUSY_REASON) for line in skipped), skipped
    assert lock._held == []  # nothing taken, nothing left open
