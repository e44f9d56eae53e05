"""OpenZFS module parameters poolbench changes for a study (the ARC's ceiling and floor).

The l2arc study needs a working set larger than the ARC, so it lowers `zfs_arc_max` for its
trials. A parameter is a file under /sys/module/zfs/parameters holding one number; changing
it is a write to that file (never a shell `echo`). Every change is journaled before it is
made (safety/journal.py `param_set`), so teardown, Ctrl-C and `poolbench cleanup` put the
value back. `root` is injectable: tests point it at a directory of their own.
"""

from __future__ import annotations

from pathlib import Path

from poolbench import is_digits

PARAMETERS = Path("/sys/module/zfs/parameters")
ARC_MAX = "zfs_arc_max"
ARC_MIN = "zfs_arc_min"


def read(name: str, root: Path = PARAMETERS) -> int | None:
    """The parameter's value, or None where it does not exist (no OpenZFS module)."""
    try:
        text = (root / name).read_text().strip()
    except OSError:
        return None
    return int(text) if is_digits(text) else None


def write(name: str, value: int, root: Path = PARAMETERS) -> None:
    """Set the parameter (root only); OSError when the kernel refuses it."""
    with open(root / name, "w") as fh:
        fh.write(f"{int(value)}\n")
