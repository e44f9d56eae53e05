"""What a built-in study is built for, and its options as the user gave them (pure).

The CLI hands over text (`--disks 5x512M`, `--levels 9,12`) and what this machine offers (the
ZFS dialect, whether the kernel has md); everything here is parsing and checking, no I/O.
Sizes go through the one size parser imported below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from poolbench import is_digits, units
from poolbench.errors import UsageError
from poolbench.units import parse_size

__all__ = ["Context", "parse_disks"]


@dataclass(frozen=True)
class Context:
    """What a study is built for: the disks and what this machine offers."""

    disk_count: int
    disk_size: str  # for sparse files; ignored for devices
    devices: tuple[str, ...] = ()  # real devices (the safety layer claims them)
    dialect: str = "openzfs"  # zfs-fuse | openzfs (the ZFS in use; levels come from it)
    has_md: bool = True
    md_reason: str = ""
    options: dict[str, str] = field(default_factory=dict)  # study options, raw text
    # What building the study changed about the request (disks left unused, a working set
    # raised or cut, a default dropped on this ZFS): said before the plan, never silent.
    said: list[str] = field(default_factory=list, compare=False)

    def announce(self, line: str) -> None:
        if line not in self.said:
            self.said.append(line)

    @property
    def n(self) -> int:
        return len(self.devices) or self.disk_count

    @property
    def disk_bytes(self) -> int:
        return parse_size(self.disk_size)

    def opt_list(self, key: str, default: Sequence[str]) -> list[str]:
        raw = self.options.get(key)
        if raw is None:
            return list(default)
        items = [x.strip() for x in raw.split(",") if x.strip()]
        if not items:
            raise UsageError(f"--{key} is empty.", f"Give a list, e.g. --{key} 1,2.")
        return items

    def opt_ints(self, key: str, default: Sequence[int]) -> list[int]:
        out = []
        for x in self.opt_list(key, [str(d) for d in default]):
            if not is_digits(x) or len(x) > 9:
                shown = x if len(x) <= 40 else x[:37] + "..."
                raise UsageError(
                    f"--{key}: '{shown}' is not a whole number of at most 9 digits.",
                    f"e.g. --{key} 1,2,6",
                )
            out.append(int(x))
        return out

    def opt_int(self, key: str, default: int) -> int:
        """One whole number (--replicates 3)."""
        raw = self.options.get(key)
        if raw is None:
            return default
        if not is_digits(raw.strip()) or len(raw.strip()) > 9:
            shown = raw if len(raw) <= 40 else raw[:37] + "..."
            raise UsageError(
                f"--{key}: '{shown}' is not a whole number of at most 9 digits.", f"e.g. --{key} 3"
            )
        return int(raw)


def parse_disks(text: str | None, default: tuple[int, str]) -> tuple[int, str, tuple[str, ...]]:
    """`--disks 5x512M` (count, size) or `--disks /dev/sdb,/dev/sdc` (devices), through the
    one `--disks` grammar (units.parse_disks: limits, strict sizes); None keeps the study's
    default disks. Returns (count, size, devices)."""
    count, size = default
    if text is None:  # '' is not "the default": units.parse_disks refuses it as empty
        return count, size, ()
    disks = units.parse_disks(text)
    if disks.devices:
        return count, size, disks.devices
    if len(set(disks.sizes)) != 1:
        raise UsageError(
            f"--disks '{text}' names disks of different sizes.",
            "A study's sparse-file disks are all one size: e.g. --disks 5x512M.",
        )
    return len(disks.sizes), units.format_size(disks.sizes[0]), ()
