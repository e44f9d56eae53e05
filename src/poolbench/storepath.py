"""Where the result store is when no --db names one: the one rule every layer asks.

$POOLBENCH_DB, else the XDG data directory (~/.local/share/poolbench/results.db). A set but
empty POOLBENCH_DB is refused (it is almost always a broken script: `POOLBENCH_DB=$UNSET_VAR`),
not taken as "the default store"; the store, the traces and histograms beside it and the
inventory's protected paths all ask here, so no caller can read the variable another way.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from poolbench.errors import EXIT_INPUT, PoolbenchError

ENV = "POOLBENCH_DB"


class EmptyStorePath(PoolbenchError):
    """POOLBENCH_DB is set to nothing (or blanks)."""

    exit_code = EXIT_INPUT


def xdg_default() -> Path:
    """The store when POOLBENCH_DB is unset."""
    return Path(platformdirs.user_data_dir("poolbench")) / "results.db"


def default_store() -> Path:
    """$POOLBENCH_DB, else `xdg_default()`; raises EmptyStorePath for a set but empty one."""
    env = os.environ.get(ENV)
    if env is None:
        return xdg_default()
    if not env.strip():
        raise EmptyStorePath(
            f'{ENV} is set but empty ({ENV}="").',
            f"Set it to the path of a result store, or unset it to use the default "
            f"{xdg_default()}.",
        )
    return Path(env)
