"""The one size grammar, and the one `--disks` grammar (pure).

A size is a whole number of bytes, written as ASCII digits with an optional unit
(case-insensitive)::

    123          bytes (also 123B)
    4K 512M 4T   binary: K M G T P = 2^10 ... 2^50 (also KiB MiB GiB TiB PiB)
    4KB 500GB    decimal: KB MB GB TB PB = 10^3 ... 10^15 (what disk vendors print)
    1.5G         a decimal fraction is fine when it comes to a whole number of bytes

Refused, each with a sentence that says how to write it instead: an empty text, signs
(`-1G`, `+1G`), exponents (`1e3`), `inf`/`nan`, digits that are not ASCII (`²`, `١٢`: Python's
int() would take them, zpool would not), a fraction that is not a whole number of bytes
(`1.1T`), zero, and anything above 2^63 − 1 bytes (the largest file offset Linux has).

`--disks` is either sizes, ``COUNTxSIZE`` or ``SIZE`` items joined by commas (``5x512M``,
``2x4TB,3x2T``: that many disks of that size each, in that order), or a comma list of device
paths (``/dev/sdb,/dev/sdc``), never both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import groupby

from poolbench import is_digits
from poolbench.errors import UsageError

KiB, MiB, GiB, TiB, PiB = (1 << (10 * i) for i in range(1, 6))

BINARY_UNITS = {"": 1, "K": KiB, "M": MiB, "G": GiB, "T": TiB, "P": PiB}
DECIMAL_UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}
MAX_BYTES = (1 << 63) - 1  # loff_t: no file, device or pool member can be larger
MAX_DISKS = 10_000  # per --disks / layout text: far beyond any pool, small enough to plan

# ASCII only (re.ASCII makes \d and \s mean [0-9] and ASCII whitespace). At most 20 integer
# and 18 fraction digits: nothing longer can be a size below MAX_BYTES that means anything.
_SIZE_RE = re.compile(r"\s*([0-9]{1,20})(?:\.([0-9]{1,18}))?\s*([A-Za-z]{0,3})\s*", re.ASCII)
_COUNT_RE = re.compile(r"\s*([0-9]{1,6})\s*[xX*]\s*(.*)", re.ASCII | re.DOTALL)

SIZE_HELP = (
    "Write a whole number of bytes, or a number with a unit: K M G T P (or KiB ... PiB) are "
    "powers of 1024, KB MB GB TB PB powers of 1000 (e.g. 512M, 4T = 4 TiB, 4TB = 4×10^12)."
)


def shown(text: str, limit: int = 40) -> str:
    """User text as an error quotes it: whole when short, else its start and "..." (a
    120,000-digit size is not echoed back)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unit_factor(unit: str) -> int | None:
    key = unit.upper()
    if key == "B":
        key = ""
    if len(key) == 3 and key.endswith("IB"):  # KiB, MiB, ...: binary
        key = key[0]
    return BINARY_UNITS.get(key, DECIMAL_UNITS.get(key))


def parse_size(text: str, *, what: str = "size", minimum: int = 1) -> int:
    """A size in bytes; raises UsageError naming `what` (e.g. "--size", "disk size").

    `minimum` is the smallest accepted value (1 byte unless the caller needs more).
    """
    if not isinstance(text, str) or not text.isascii():
        raise UsageError(
            f"The {what} '{shown(text)}' is not a size: only ASCII digits and units are "
            "understood.",
            SIZE_HELP,
        )
    m = _SIZE_RE.fullmatch(text)
    factor = _unit_factor(m.group(3)) if m else None
    if m is None or factor is None:
        raise UsageError(f"The {what} '{shown(text)}' is not a size.", SIZE_HELP)
    whole, frac = m.group(1), m.group(2) or ""
    value = (int(whole) + Fraction(int(frac or "0"), 10 ** len(frac))) * factor
    if value.denominator != 1:
        floor = value.numerator // value.denominator
        raise UsageError(
            f"The {what} '{shown(text)}' is {float(value):.1f} bytes, not a whole number of bytes.",
            f"Write a whole number of bytes (e.g. {floor}) or a value that comes out whole "
            "(1.5G is fine, 1.1T is not).",
        )
    n = int(value)
    if n > MAX_BYTES:
        raise UsageError(
            f"The {what} '{shown(text)}' is larger than any device can be (2^63 − 1 bytes).",
            "Check the number and the unit.",
        )
    if n < minimum:
        least = format_size(minimum)
        raise UsageError(
            f"The {what} '{shown(text)}' is {'zero' if n == 0 else f'{n} bytes'}; it must be at "
            f"least {least}.",
            f"Give a {what} of {least} or more.",
        )
    return n


# The largest special_small_blocks OpenZFS takes (2.3.2 in the guest: "must be zero or a
# power of 2 from 512B to 16M")
MAX_SPECIAL_SMALL = 16 << 20


def parse_special_small(text: str) -> int:
    """A ZFS special_small_blocks value in bytes: 0, or a power of two from 512 to 16M."""
    try:
        n = parse_size(text, what="special_small_blocks", minimum=0)
    except UsageError:
        n = -1
    if n != 0 and (n < 512 or n > MAX_SPECIAL_SMALL or n & (n - 1)):
        raise UsageError(
            f"special_small_blocks={text} is not possible: it must be 0 or a power of two "
            "from 512 to 16M.",
            "Use e.g. 0, 16K or 64K (blocks of that size or smaller go to the special vdev).",
        )
    return n


def format_size(nbytes: int) -> str:
    """Shortest exact spelling in the grammar: 4T, 1536M, 4TB, 123 (parse_size's inverse)."""
    options = [str(nbytes)]
    for table in (BINARY_UNITS, DECIMAL_UNITS):
        for unit, factor in table.items():
            if unit and nbytes and nbytes % factor == 0:
                options.append(f"{nbytes // factor}{unit}")
    return min(options, key=len)


def format_sizes(sizes: tuple[int, ...] | list[int]) -> str:
    """``(1G, 1G, 1G, 1536M)`` → ``3x1G,1536M`` (runs of equal sizes; parse_sizes' inverse)."""
    return _format_sizes(tuple(sizes))


@lru_cache(maxsize=1024)
def _format_sizes(sizes: tuple[int, ...]) -> str:
    """`format_sizes`, remembered: the planner's search writes the same member lists for
    every candidate it compares."""
    out: list[str] = []
    for size, run in groupby(sizes):
        n = sum(1 for _ in run)
        out.append(f"{n}x{format_size(size)}" if n > 1 else format_size(size))
    return ",".join(out)


def parse_count(text: str, *, what: str, least: int = 1, most: int = MAX_DISKS) -> int:
    """A count written in ASCII digits, from `least` to `most`."""
    t = text.strip()
    if not is_digits(t) or len(t) > 6:
        raise UsageError(
            f"The {what} '{shown(text)}' is not a count.",
            f"Write a whole number from {least} to {most}.",
        )
    n = int(t)
    if not least <= n <= most:
        raise UsageError(
            f"The {what} {n} is out of range.", f"Use a number from {least} to {most}."
        )
    return n


def parse_sizes(text: str, *, what: str = "--disks", limit: int = MAX_DISKS) -> tuple[int, ...]:
    """``3x1G,2x1536M,4T`` → one size per disk, in order; at most `limit` disks in all."""
    sizes: list[int] = []
    items = text.split(",")
    for i, item in enumerate(items):
        if not item.strip():
            raise UsageError(
                f"{what} '{shown(text)}' has an empty entry.",
                "Write disks as COUNTxSIZE or SIZE joined by commas, e.g. 2x4TB,3x2T.",
            )
        m = _COUNT_RE.fullmatch(item) if item.isascii() else None
        if m:
            count = parse_count(m.group(1), what=f"disk count in {what}")
            size = parse_size(m.group(2), what=f"disk size in {what}")
        else:
            count, size = 1, parse_size(item, what=f"disk size in {what}")
        _refuse_bare_bytes(item, items[i + 1 : i + 2], size, text, what)
        if len(sizes) + count > limit:
            raise UsageError(
                f"{what} '{shown(text)}' names more than {limit} disks.",
                f"Use at most {limit} disks.",
            )
        sizes.extend([size] * count)
    return tuple(sizes)


def _refuse_bare_bytes(item: str, after: list[str], size: int, text: str, what: str) -> None:
    """A disk written as a bare number under 1 MiB (`6x4`) is no disk anyone has: most
    often a decimal comma (`6x4,5T` for 4.5T), which ',' splits into two entries."""
    bare = (m.group(2) if (m := _COUNT_RE.fullmatch(item)) else item).strip()
    if not is_digits(bare) or size >= MiB:
        return
    nxt = after[0].strip() if after else ""
    guess = re.fullmatch(r"([0-9]+)([A-Za-z]+)", nxt, re.ASCII)
    hint = f" Did you mean {bare}.{guess.group(1)}{guess.group(2)}?" if guess else ""
    where = what if text in what else f"{what} '{shown(text)}'"
    raise UsageError(
        f"{where}: the entry '{shown(item.strip())}' gives a disk of {size} "
        f"byte{'s' if size != 1 else ''} (a size without a unit is bytes).{hint}",
        "Write disks as COUNTxSIZE or SIZE with a unit, joined by commas: e.g. 6x4.5T or "
        "2x4TB,3x2T (a decimal point is '.', a comma separates disks).",
    )


@dataclass(frozen=True)
class DiskList:
    """What `--disks` names: sparse-file sizes, or real devices (exactly one is non-empty)."""

    sizes: tuple[int, ...] = ()
    devices: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.sizes) or len(self.devices)


def parse_disks(text: str, *, what: str = "--disks", limit: int = MAX_DISKS) -> DiskList:
    """`--disks`: ``5x512M``, ``2x4TB,3x2T`` → sizes; ``/dev/sdb,/dev/sdc`` → device paths."""
    items = [t.strip() for t in text.split(",")]
    paths = [i for i in items if i.startswith("/")]
    if not paths:
        if not text.strip():
            raise UsageError(f"{what} is empty.", "Example: --disks 5x512M or /dev/sdb,/dev/sdc.")
        return DiskList(sizes=parse_sizes(text, what=what, limit=limit))
    if len(paths) != len(items):
        raise UsageError(
            f"{what} '{shown(text)}' mixes sizes and devices (or has an empty entry).",
            "Give either sizes (5x512M: sparse files) or device paths (/dev/sdb,/dev/sdc).",
        )
    if len(paths) > limit:
        raise UsageError(f"{what} names {len(paths)} devices.", f"Use at most {limit}.")
    if len(set(paths)) != len(paths):
        dup = next(p for p in paths if paths.count(p) > 1)
        raise UsageError(f"{what} names {dup} twice.", "Name each device once.")
    return DiskList(devices=tuple(paths))
