"""A test outside the machine's chain must not drop the machine's page cache.

A cold read drops the whole page cache (a write of "3" to /proc/sys/vm/drop_caches, as root).
Outside the machine's chain such a test runs beside it, and its drop lands inside the chain's
own tests: a reread that must come from the cache, a lazy write that must still be dirty
(tests/test_amplification_real.py), a timed window. Eight tests did this unnoticed for many
rounds. In a parallel session (pytest-xdist), every write-open of drop_caches, by the test's
process or a Python it starts (the CLI), is recorded with the running test; a test that is
not a machine test and dropped the cache fails with how to fix it. A drop by a shell
(`echo 3 >`, `sysctl`) is not seen.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from tests.plugins.cache_drop_hook import pb_cache_drop_audit as audit
from tests.plugins.tiers import is_machine

HOOK_DIR = str(Path(__file__).parent / "cache_drop_hook")
LOG = pytest.StashKey[Path]()
BEFORE = pytest.StashKey[dict[str, str | None]]()


def pytest_configure(config: pytest.Config) -> None:
    fd, name = tempfile.mkstemp(prefix="pbtest-cache-drops-")
    os.close(fd)
    config.stash[LOG] = Path(name)
    config.stash[BEFORE] = {k: os.environ.get(k) for k in (audit.LOG_ENV, "PYTHONPATH")}
    os.environ[audit.LOG_ENV] = name  # this process's and its children's (each its own file)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if HOOK_DIR not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([HOOK_DIR, *filter(None, paths)])
    if not getattr(sys, "_pb_cache_drop_audit", False):  # an audit hook cannot be removed
        sys.addaudithook(audit._hook)
        sys._pb_cache_drop_audit = True  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    config.stash[LOG].unlink(missing_ok=True)
    for key, value in config.stash[BEFORE].items():  # an inner session (pytester) gives back
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _in_parallel(config: pytest.Config) -> bool:
    """Whether this session is a worker beside the machine's chain (pytest-xdist): a serial
    session (the OpenZFS guest tier, one module run alone) has no chain to disturb."""
    return hasattr(config, "workerinput")


def _dropped_by(config: pytest.Config, nodeid: str) -> int:
    log = config.stash[LOG]
    if not log.exists():
        return 0
    return sum(line == nodeid for line in log.read_text().splitlines())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.when == "setup" or not report.passed or is_machine(item):
        return
    if not _in_parallel(item.config):
        return
    # PYTEST_CURRENT_TEST names the test without the suffix xdist's grouping adds
    drops = _dropped_by(item.config, item.nodeid.split("@", 1)[0])
    if drops and (report.when == "call" or not getattr(item, "_pb_drop_reported", False)):
        item._pb_drop_reported = True  # type: ignore[attr-defined]
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} dropped the machine's page cache ({drops} write(s) to "
            f"{audit.DROP_CACHES}, by the test or a poolbench it ran) but is not a machine "
            "test: it runs beside the machine's chain, whose page-cache and timed tests then "
            "lose their cache under them. Give it the machine fixture (@pytest.mark."
            'usefixtures("machine")): docs/testing.md, "Tiers".'
        )
