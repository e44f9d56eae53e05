"""The machine lock: two test sessions that build pools on one machine break each other (a
study's leftover check sees the other session's pools, both pick the same free loop device,
one stops the zfs-fuse daemon the other uses, one reads the device inventory while the other
changes it). A session takes this lock when its first machine test starts and holds it to
its end; a second such session waits for it (the fast tier skips its machine tests instead,
tests/plugins/tiers.py). Sessions that run no machine test take none.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

MACHINE_LOCK = Path("/var/lock/poolbench-suite.lock")
LOCK_HELD_ENV = "POOLBENCH_SUITE_LOCK_HELD"  # a pytest started by a test inherits the lock
_held: list[IO[str]] = []


def take(say: Callable[[str], None] = print) -> None:
    """Hold the lock from now to the end of the session (at once when free, else wait)."""
    if take_if_free():
        return
    say(f"waiting for {MACHINE_LOCK}: another test session is building pools here")
    fh = open(MACHINE_LOCK, "a+")  # noqa: SIM115  (held until the session ends)
    fcntl.flock(fh, fcntl.LOCK_EX)
    _keep(fh)


def take_if_free() -> bool:
    """Hold the lock from now to the end of the session if no other session holds it."""
    if _held or os.environ.get(LOCK_HELD_ENV):
        return True
    fh = open(MACHINE_LOCK, "a+")  # noqa: SIM115  (held until the session ends)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return False
    _keep(fh)
    return True


def _keep(fh: IO[str]) -> None:
    _held.append(fh)
    os.environ[LOCK_HELD_ENV] = str(os.getpid())


def held_elsewhere() -> bool:
    """Whether another session holds the lock now (asked without taking it)."""
    if _held or os.environ.get(LOCK_HELD_ENV):
        return False
    with open(MACHINE_LOCK, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


def release() -> None:
    while _held:
        _held.pop().close()  # closing the file releases the lock
        os.environ.pop(LOCK_HELD_ENV, None)


def for_inner_session(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """An inner session (pytester) takes a lock file of its own at `path`, and never
    releases this session's lock."""
    this = sys.modules[__name__]
    monkeypatch.setattr(this, "MACHINE_LOCK", path)
    monkeypatch.setattr(this, "_held", [])
    monkeypatch.delenv(LOCK_HELD_ENV, raising=False)
