"""A test outside the machine's chain that drops the page cache fails, with how to fix it
(tests/plugins/cache_guard.py); a machine test may, and a look at the file is no drop. The
inner tests really drop the page cache ("1": the page cache only), so this is a machine test:
it must not do what it forbids. Only a parallel session has a chain beside it: a serial one
(the OpenZFS guest tier) lets every test drop the cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.plugins import cache_guard, lock

CONFTEST = """
from tests.plugins.tiers import machine_fixture

pytest_plugins = ["tests.plugins.tiers", "tests.plugins.cache_guard"]

@machine_fixture(slow=False, root=False)
def disk():
    yield "disk"
"""

TESTS = """
import subprocess, sys
from pathlib import Path

DROP = "/proc/sys/vm/drop_caches"

def test_drops_in_its_process():
    Path(DROP).write_text("1")

def test_drops_through_a_python_it_runs():
    subprocess.run([sys.executable, "-c", f"open({DROP!r}, 'w').write('1')"], check=True)

def test_only_looks_at_it():
    assert Path(DROP).stat().st_mode & 0o200  # write-only: nothing to read

def test_a_machine_test_may(disk):
    Path(DROP).write_text("1")
"""


@pytest.fixture
def inner(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> pytest.Pytester:
    """The inner suite, with a lock file of its own (this session's lock is never released)."""
    lock.for_inner_session(monkeypatch, tmp_path / "machine.lock")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=TESTS)
    return pytester


@pytest.mark.untimed
@pytest.mark.usefixtures("machine")
def test_a_test_beside_the_chain_that_drops_the_cache_fails_and_says_how_to_fix_it(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_guard, "_in_parallel", lambda _config: True)  # as a worker is
    result = inner.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=2)
    failed = {line.split("::")[1] for line in result.outlines if line.startswith("FAILED")}
    assert failed == {"test_drops_in_its_process", "test_drops_through_a_python_it_runs"}
    text = result.stdout.str()
    assert "dropped the machine's page cache (1 write(s) to /proc/sys/vm/drop_caches" in text
    assert 'usefixtures("machine")' in text


@pytest.mark.untimed
@pytest.mark.usefixtures("machine")
def test_a_serial_session_lets_every_test_drop_the_cache(inner: pytest.Pytester) -> None:
    result = inner.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
