"""A journal's entries in words, for the line poolbench prints when a stop signal makes it
tear them down ("tearing down pool pb1a2b3ct4, 4 loop devices, 4 caps, ...") and for the
line that says a second signal is ignored until that is done."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from poolbench.safety.journal import Entry

# (entry kinds, one, several): the order the words are said in
_WORDS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("postgres",), "a PostgreSQL server", "{} PostgreSQL servers"),
    (("md",), "an md array", "{} md arrays"),
    (("mount",), "a mount", "{} mounts"),
    (("throttle",), "a disk cap", "{} disk caps"),
    (("param",), "a module parameter", "{} module parameters"),
    (("setting",), "a kernel setting", "{} kernel settings"),
    (("partition_table",), "a partition table", "{} partition tables"),
    (("path", "dir"), "a file or directory", "{} files and directories"),
)


def describe(entries: Sequence[Entry]) -> str:
    """What a teardown of `entries` undoes: its pools by name, the rest counted by kind."""
    pools = sorted({str(e.get("name")) for e in entries if e["kind"] in ("pool", "pool_intent")})
    words = [f"pool{'s' if len(pools) > 1 else ''} {', '.join(pools)}"] if pools else []
    loops = {str(e.get("backing_file")) for e in entries if e["kind"] in ("loop", "loop_intent")}
    if loops:
        words.append("a loop device" if len(loops) == 1 else f"{len(loops)} loop devices")
    for kinds, one, several in _WORDS:
        n = sum(e["kind"] in kinds for e in entries)
        if n:
            words.append(one if n == 1 else several.format(n))
    return ", ".join(words) or "nothing"
