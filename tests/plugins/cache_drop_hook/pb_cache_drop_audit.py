"""Records every write-open of /proc/sys/vm/drop_caches with the test running at the time
(PYTEST_CURRENT_TEST), in the file named by POOLBENCH_TEST_CACHE_DROPS: installed in the test
process by tests/plugins/cache_guard.py and in every Python it starts (poolbench's CLI run by
a test) by this directory's sitecustomize.py."""

from __future__ import annotations

import os
import sys
from typing import Any

DROP_CACHES = "/proc/sys/vm/drop_caches"
LOG_ENV = "POOLBENCH_TEST_CACHE_DROPS"


def _writes(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR))


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or len(args) < 3 or not isinstance(args[0], str | bytes | os.PathLike):
        return
    try:
        path = os.fsdecode(args[0])
    except (TypeError, ValueError):
        return
    if path != DROP_CACHES or not _writes(args[1], args[2]):
        return
    log = os.environ.get(LOG_ENV)
    if log:
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        with open(log, "a") as fh:
            fh.write(f"{test}\n")


def install() -> None:
    if os.environ.get(LOG_ENV):
        sys.addaudithook(_hook)
