"""The layout grammar of `poolbench plan --layout` (pure).

A layout is one or more top-level groups joined by ``+``::

    raidz1:3x1G,2x1536M + mirror:2x4TB + draid2:4d:1s:7x8T

Each group is ``TYPE:DEVICES``; TYPE is ``stripe``, ``mirror``, ``raidz``/``raidz1``,
``raidz2``, ``raidz3`` or ``draidP[:Dd][:Cc][:Ss]`` (as `zpool create` spells dRAID: parity,
data disks per redundancy group, children, distributed spares); DEVICES is a comma list of
``COUNTxSIZE`` or ``SIZE``. A ``stripe`` group gives one top-level vdev per device (that is
what `zpool create pool a b c` builds); every other group is one top-level vdev.

Sizes are bytes, or a number with a unit: ``K M G T P`` (also ``KiB``…) are powers of 1024,
``KB MB GB TB PB`` are powers of 1000 (what disk vendors print).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from poolbench.errors import UsageError

VdevKind = Literal["disk", "mirror", "raidz", "draid"]

_BINARY = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_DECIMAL = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")

# OpenZFS limits the planner enforces (include/sys/fs/zfs.h, include/sys/vdev_draid.h).
VDEV_RAIDZ_MAXPARITY = 3
VDEV_DRAID_MAXPARITY = 3
VDEV_DRAID_MAX_CHILDREN = 255
DRAID_MAX_SPARES = 100  # "An arbitrary limit of 100 distributed spares" (draid_config_by_type)


def parse_size(text: str) -> int:
    """Parse ``4T``, ``1536M``, ``4TB``, ``1.5T``, ``123`` into bytes (rounded down).

    Binary units: K M G T P (or KiB…PiB); decimal units: KB MB GB TB PB; ``B`` is bytes.
    """
    m = _SIZE_RE.match(text)
    if not m:
        raise UsageError(
            f"'{text}' is not a size.",
            "Write a number of bytes or a number with a unit, e.g. 4T (TiB), 4TB (10^12), "
            "1536M (MiB).",
        )
    number, unit = m.group(1), m.group(2)
    key = unit.upper()
    if key.endswith("IB") and len(key) == 3:
        key = key[0]
    if key == "B":
        key = ""
    if key in _BINARY:
        factor = _BINARY[key]
    elif key in _DECIMAL:
        factor = _DECIMAL[key]
    else:
        raise UsageError(
            f"Unknown size unit '{unit}' in '{text}'.",
            "Use K M G T P (powers of 1024) or KB MB GB TB PB (powers of 1000).",
        )
    value = int(Fraction(number) * factor)
    if value <= 0:
        raise UsageError(f"Size '{text}' is zero.", "Give every device a positive size.")
    return value


def format_size(nbytes: int) -> str:
    """Shortest exact spelling of a device size for layout strings: 4T, 1536M, 4TB, 123."""
    options = [str(nbytes)]
    for table in (_BINARY, _DECIMAL):
        for unit, factor in table.items():
            if unit and nbytes % factor == 0:
                options.append(f"{nbytes // factor}{unit}")
    return min(options, key=len)


@dataclass(frozen=True)
class VdevSpec:
    """One top-level vdev: its kind, parity, member device sizes (bytes) and dRAID shape."""

    kind: VdevKind
    devices: tuple[int, ...]
    parity: int = 0
    draid_data: int = 0  # data disks per redundancy group (dRAID only)
    draid_spares: int = 0  # distributed spares (dRAID only)

    @property
    def width(self) -> int:
        return len(self.devices)

    @property
    def failures_tolerated(self) -> int:
        """Member failures this vdev survives (before any distributed spare is used)."""
        if self.kind == "mirror":
            return self.width - 1
        if self.kind in ("raidz", "draid"):
            return self.parity
        return 0

    @property
    def type_name(self) -> str:
        if self.kind == "disk":
            return "disk"
        if self.kind == "mirror":
            return f"mirror-{self.width}"
        if self.kind == "raidz":
            return f"raidz{self.parity}"
        return f"draid{self.parity}:{self.draid_data}d:{self.width}c:{self.draid_spares}s"

    def spec(self) -> str:
        """This vdev in the layout grammar."""
        if self.kind == "disk":
            head = "stripe"
        elif self.kind == "mirror":
            head = "mirror"
        elif self.kind == "raidz":
            head = f"raidz{self.parity}"
        else:
            head = f"draid{self.parity}:{self.draid_data}d:{self.draid_spares}s"
        return f"{head}:{format_devices(self.devices)}"


@dataclass(frozen=True)
class Layout:
    vdevs: tuple[VdevSpec, ...]

    def spec(self) -> str:
        """The layout in the grammar; consecutive single disks merge into one ``stripe``."""
        parts: list[str] = []
        disks: list[int] = []
        for v in self.vdevs:
            if v.kind == "disk":
                disks.append(v.devices[0])
                continue
            if disks:
                parts.append(f"stripe:{format_devices(tuple(disks))}")
                disks = []
            parts.append(v.spec())
        if disks:
            parts.append(f"stripe:{format_devices(tuple(disks))}")
        return " + ".join(parts)

    @property
    def disk_count(self) -> int:
        return sum(v.width for v in self.vdevs)

    @property
    def failures_tolerated(self) -> int:
        """Any N member failures the pool always survives: the weakest top-level vdev's."""
        return min(v.failures_tolerated for v in self.vdevs)


def format_devices(devices: tuple[int, ...]) -> str:
    """``(1G, 1G, 1G, 1536M, 1536M)`` → ``3x1G,2x1536M`` (runs of equal sizes)."""
    out: list[str] = []
    i = 0
    while i < len(devices):
        j = i
        while j < len(devices) and devices[j] == devices[i]:
            j += 1
        n = j - i
        out.append(f"{n}x{format_size(devices[i])}" if n > 1 else format_size(devices[i]))
        i = j
    return ",".join(out)


def parse_devices(text: str, *, context: str) -> tuple[int, ...]:
    """``3x1G,2x1536M`` → a tuple of sizes in bytes."""
    sizes: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise UsageError(
                f"Empty device entry in '{context}'.", "Write devices as COUNTxSIZE,COUNTxSIZE."
            )
        m = re.match(r"^(\d+)\s*[xX\*]\s*(.+)$", item)
        if m:
            count = int(m.group(1))
            if count < 1 or count > 10_000:
                raise UsageError(
                    f"Device count {count} in '{context}' is out of range.",
                    "Use a count from 1 to 10000.",
                )
            sizes.extend([parse_size(m.group(2))] * count)
        else:
            sizes.append(parse_size(item))
    return tuple(sizes)


_RAIDZ_RE = re.compile(r"^raidz([123]?)$")
_DRAID_RE = re.compile(r"^draid([123]?)((?::\d+[cdsCDS])*)$")


def _parse_group(text: str) -> list[VdevSpec]:
    if ":" not in text:
        raise UsageError(
            f"Layout part '{text}' has no type.",
            "Write each part as TYPE:DEVICES, e.g. raidz2:6x4T or mirror:2x4TB.",
        )
    lowered = text.strip()
    # The dRAID type itself contains colons: split at the first ':' that starts devices.
    m = re.match(r"^(draid[123]?(?::\d+[cdsCDS])*):(.+)$", lowered)
    if m:
        head, dev_text = m.group(1), m.group(2)
    else:
        head, dev_text = lowered.split(":", 1)
    head = head.strip().lower()
    devices = parse_devices(dev_text, context=text)
    if head == "stripe":
        return [VdevSpec("disk", (d,)) for d in devices]
    if head == "mirror":
        if len(devices) < 2:
            raise UsageError(
                f"'{text}': a mirror needs at least 2 devices.",
                "Add devices, or use stripe: for a single disk.",
            )
        return [VdevSpec("mirror", devices)]
    rz = _RAIDZ_RE.match(head)
    if rz:
        parity = int(rz.group(1) or "1")
        if len(devices) < parity + 1:
            raise UsageError(
                f"'{text}': raidz{parity} needs at least {parity + 1} devices.",
                f"Give it {parity + 1} or more devices (zpool create refuses fewer).",
            )
        if len(devices) > 255:
            raise UsageError(f"'{text}': more than 255 devices in one raidz.", "Split it.")
        return [VdevSpec("raidz", devices, parity=parity)]
    dr = _DRAID_RE.match(head)
    if dr:
        return [_draid_spec(text, int(dr.group(1) or "1"), dr.group(2), devices)]
    raise UsageError(
        f"Unknown vdev type '{head}' in '{text}'.",
        "Use stripe, mirror, raidz1, raidz2, raidz3 or draidP:Dd:Ss.",
    )


def _draid_spec(text: str, parity: int, opts: str, devices: tuple[int, ...]) -> VdevSpec:
    # Mirrors draid_config_by_type() in cmd/zpool/zpool_vdev.c.
    children = len(devices)
    ndata: int | None = None
    nspares = 0
    for part in filter(None, opts.split(":")):
        value, suffix = int(part[:-1]), part[-1].lower()
        if suffix == "c" and value != children:
            raise UsageError(
                f"'{text}': says {value} children but lists {children} devices.",
                "Make the :Nc count match the device list, or drop it.",
            )
        if suffix == "d":
            ndata = value
        elif suffix == "s":
            nspares = value
    if ndata is None:
        if children <= nspares + parity:
            raise UsageError(
                f"'{text}': {nspares} spares and parity {parity} leave no data disks.",
                "Add devices or use fewer spares.",
            )
        ndata = min(children - nspares - parity, 8)
    if ndata == 0 or ndata + parity > children - nspares:
        raise UsageError(
            f"'{text}': {ndata} data disks per group is too many; at most "
            f"{max(children - nspares - parity, 0)} are available.",
            "Lower the :Dd value or add devices.",
        )
    if nspares > DRAID_MAX_SPARES:
        raise UsageError(f"'{text}': more than 100 distributed spares.", "Use fewer spares.")
    if children > VDEV_DRAID_MAX_CHILDREN:
        raise UsageError(f"'{text}': dRAID supports at most 255 disks.", "Split the vdev.")
    return VdevSpec("draid", devices, parity=parity, draid_data=ndata, draid_spares=nspares)


def parse_layout(text: str) -> Layout:
    """Parse a whole layout string; raises UsageError naming the bad part."""
    if not text or not text.strip():
        raise UsageError("The layout is empty.", "Example: --layout 'raidz2:6x4T'.")
    vdevs: list[VdevSpec] = []
    for part in text.split("+"):
        if not part.strip():
            raise UsageError(
                f"Empty part in layout '{text}'.", "Join vdevs with '+': raidz1:3x1G + mirror:2x2G."
            )
        vdevs.extend(_parse_group(part.strip()))
    return Layout(tuple(vdevs))
