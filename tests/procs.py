"""The processes a test looks for by what their command line holds (read from /proc)."""

from __future__ import annotations

import os
from pathlib import Path


def processes_matching(text: str) -> list[tuple[int, str]]:
    """(pid, command line with its arguments joined by spaces) of every process but this one
    whose command line holds `text`."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # it ended while the list was read
        if text in argv and int(p.name) != os.getpid():
            found.append((int(p.name), argv))
    return found
