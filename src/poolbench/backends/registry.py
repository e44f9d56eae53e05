"""Backend name → factory(runner). A plain dict, no class hierarchy."""

from __future__ import annotations

from collections.abc import Callable

from poolbench.backends.base import Backend
from poolbench.backends.btrfs import BtrfsBackend
from poolbench.backends.directory import DirectoryBackend
from poolbench.backends.md import MdBackend
from poolbench.backends.zfs import ZfsBackend
from poolbench.errors import UsageError
from poolbench.system.runner import Runner

BACKENDS: dict[str, Callable[[Runner], Backend]] = {
    "zfs": ZfsBackend,
    "btrfs": BtrfsBackend,
    "md": MdBackend,
    "directory": DirectoryBackend,
}


def make(name: str, runner: Runner) -> Backend:
    try:
        factory = BACKENDS[name]
    except KeyError:
        raise UsageError(
            f"Unknown backend '{name}'.", f"Use one of {', '.join(BACKENDS)}."
        ) from None
    return factory(runner)
