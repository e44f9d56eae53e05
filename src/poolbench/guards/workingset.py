"""Working set against RAM, and free space, decided before any I/O."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from poolbench.errors import UsageError
from poolbench.system.probes import arc_max_bytes, ram_bytes

__all__ = ["WorkingSet", "choose"]

MiB = 1024 * 1024
COLD_FACTOR = 2  # working set ≥ 2× RAM by default (DESIGN.md §3 rule 1)
# Room kept free beyond the data files: metadata, the job files, and a filesystem that
# behaves differently when nearly full (which would measure fullness, not the layout).
FREE_MARGIN = 0.10


@dataclass(frozen=True)
class WorkingSet:
    size_bytes: int
    ram_bytes: int
    arc_max_bytes: int | None
    free_bytes: int
    default_rule: bool  # chosen by the ≥ 2× RAM rule, not by --size
    ratio_to_ram: float
    needed_bytes: int = 0  # free space the run needs: its files plus FREE_MARGIN

    def space_text(self, directory: Path) -> str:
        """What a bench of a filesystem that holds data must be told before it writes."""
        return (
            f"needs {self.needed_bytes / MiB:,.0f} MiB free (working set "
            f"{self.size_bytes / MiB:,.0f} MiB + {FREE_MARGIN:.0%} headroom), "
            f"{self.free_bytes / MiB:,.0f} MiB free; writes only in {directory}, removed "
            "afterwards"
        )

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @property
    def below_cold_rule(self) -> bool:
        return self.ratio_to_ram < COLD_FACTOR


def choose(
    target: Path | None, requested: int | None, extra_files_bytes: int = 0,
    ram: int | None = None,
) -> WorkingSet:  # fmt: skip
    """Pick the working set and refuse up front if the target cannot hold it. None: a dry
    run's pool, not built, has no free space to read (the study's own check said whether the
    working set fits its layout); its free space is said to be 0."""
    ram = ram if ram is not None else ram_bytes()
    arc = arc_max_bytes()
    cache = max(ram, arc or 0)
    size = requested if requested is not None else COLD_FACTOR * cache
    size -= size % MiB
    needed = int((size + extra_files_bytes) * (1 + FREE_MARGIN))
    if target is None:
        return WorkingSet(size, ram, arc, 0, requested is None, size / cache, needed)
    st = os.statvfs(target)
    free = st.f_bavail * st.f_frsize
    if needed > free:
        how = "the default of 2× RAM" if requested is None else "--size"
        raise UsageError(
            f"Not enough free space on {target}: the working set ({size / MiB:.0f} MiB, from "
            f"{how}) plus {FREE_MARGIN:.0%} headroom needs {needed / MiB:.0f} MiB, but only "
            f"{free / MiB:.0f} MiB is free.",
            "Free space there, or pass a smaller --size (reads stay cold because poolbench "
            "drops and verifies the caches, but a working set below 2× RAM is noted).",
        )
    return WorkingSet(size, ram, arc, free, requested is None, size / cache, needed)
