"""The one layout grammar: `poolbench plan --layout`, study files and the ZFS backend (pure).

A layout is one or more top-level groups joined by ``+``::

    raidz2                        every disk given (--disks, or a study's [disks])
    raidz1:3 + mirror:2           the first 3 disks, then the next 2
    raidz1:3x1G,2x1536M + mirror:2x4TB      the devices' sizes written in the layout
    draid2:4d:1s:7                dRAID: parity 2, 4 data disks per group, 1 spare, 7 children

Each group is ``TYPE[:MEMBERS]``. TYPE is ``stripe`` (one top-level vdev per device, what
`zpool create pool a b c` builds), ``mirror``, ``raidz``/``raidz1``, ``raidz2``, ``raidz3`` or
``draid[P][:Nd][:Nc][:Ns]`` (as `zpool create` spells dRAID, options in any order: data disks
per redundancy group, children, distributed spares). MEMBERS is either

* a WIDTH, plain ASCII digits: that many of the given disks, taken in order; a lone group
  without MEMBERS takes every disk; or
* SIZES in the one size grammar (poolbench.units): ``COUNTxSIZE`` or ``SIZE`` items joined by
  commas (a lone bare number is a width; one device of N bytes is ``1xN``).

A layout uses widths or sizes, not both; widths need disks. dRAID defaults are OpenZFS's
(`draid_config_by_type`, cmd/zpool/zpool_vdev.c): parity 1, spares 0, data disks
min(8, children − parity − spares).

Vdev classes use zpool's own class words, a class word and a space before the part::

    raidz2:6x4T + log mirror:2x100G       a mirrored SLOG
    raidz2:6x4T + special mirror:2x500G   metadata (and small blocks) on their own vdev
    raidz2:6x4T + dedup mirror:2x500G     the dedup table on its own vdev
    mirror:2x4T + spare 1x4T              a hot spare
    raidz1:4x4T + cache 1x1T              an L2ARC device
    raidz2:6 + log mirror:2 + spare 1     widths: the disks of --disks, in the order written

``log``, ``special`` and ``dedup`` take ``stripe`` or ``mirror`` (or bare MEMBERS: single
disks) and nothing else: `zpool create` refuses them as raidz or dRAID ("unsupported 'log'
device", construct_spec() in cmd/zpool/zpool_vdev.c). ``spare`` and ``cache`` take MEMBERS
only: each member is one device. The data vdevs stay in `Layout.vdevs`; the class vdevs are
in `Layout.classes`, so every model of the data vdevs reads the layout as before.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from poolbench import is_digits
from poolbench.errors import UsageError
from poolbench.units import format_sizes, parse_sizes

__all__ = [
    "ClassVdev",
    "Layout",
    "VdevSpec",
    "draid_shape",
    "format_devices",
    "parse_devices",
    "parse_layout",
]

VdevKind = Literal["disk", "mirror", "raidz", "draid"]

# OpenZFS limits (include/sys/fs/zfs.h, include/sys/vdev_draid.h, cmd/zpool/zpool_vdev.c).
VDEV_RAIDZ_MAXPARITY = 3
VDEV_DRAID_MAXPARITY = 3
VDEV_RAIDZ_MAX_CHILDREN = 255
VDEV_DRAID_MAX_CHILDREN = 255
DRAID_MAX_SPARES = 100  # "An arbitrary limit of 100 distributed spares" (draid_config_by_type)
DRAID_DEFAULT_MAX_DATA = 8  # "limit a redundancy group to 8 data disks" (same function)
CLASS_WORDS = ("log", "special", "dedup", "spare", "cache")
ALLOC_CLASSES = ("log", "special", "dedup")  # top-level vdevs with metaslabs of their own

format_devices = format_sizes  # the planner's historic names for the units functions

LAYOUT_HELP = (
    "Write TYPE[:MEMBERS] parts joined by '+': TYPE is stripe, mirror, raidz1, raidz2, raidz3 "
    "or draidP[:Nd][:Ns]; MEMBERS a width (raidz1:3 + mirror:2, disks from --disks) or sizes "
    "(raidz2:6x4T, mirror:2x4TB). Classes: '+ log mirror:2x100G', '+ special mirror:2x500G', "
    "'+ spare 1x4T', '+ cache 1x1T'."
)


def parse_devices(text: str, *, context: str = "") -> tuple[int, ...]:
    """``3x1G,2x1536M`` → a tuple of sizes in bytes (units.parse_sizes)."""
    return parse_sizes(text, what=f"'{context}'" if context else "devices")


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

    def head(self) -> str:
        """The TYPE of this vdev in the grammar (dRAID with its data disks and spares)."""
        if self.kind == "disk":
            return "stripe"
        if self.kind == "mirror":
            return "mirror"
        if self.kind == "raidz":
            return f"raidz{self.parity}"
        return f"draid{self.parity}:{self.draid_data}d:{self.draid_spares}s"

    def spec(self) -> str:
        """This vdev in the grammar, with its devices' sizes."""
        return f"{self.head()}:{format_sizes(self.devices)}"


@dataclass(frozen=True)
class ClassVdev:
    """A top-level vdev of a class other than the data (normal) class: a log, special or
    dedup vdev (stripe member or mirror), a hot spare or a cache device (one disk each)."""

    cls: str  # one of CLASS_WORDS
    vdev: VdevSpec

    def head(self) -> str:
        return self.cls if self.cls in ("spare", "cache") else f"{self.cls} {self.vdev.head()}"


@dataclass(frozen=True)
class Layout:
    vdevs: tuple[VdevSpec, ...]  # the data (normal class) vdevs
    classes: tuple[ClassVdev, ...] = ()  # log, special, dedup, spare and cache, as written

    def spec(self) -> str:
        """The layout with sizes; consecutive single disks merge into one ``stripe``."""
        return " + ".join(_join(h, format_sizes(d)) for h, d in self._groups())

    def widths(self) -> str:
        """The layout with widths, as a study file writes it (``raidz1:3+mirror:2``)."""
        return "+".join(_join(h, str(len(d))) for h, d in self._groups())

    def _groups(self) -> list[tuple[str, tuple[int, ...]]]:
        out: list[tuple[str, tuple[int, ...]]] = []
        heads = [(v.head(), v) for v in self.vdevs] + [(c.head(), c.vdev) for c in self.classes]
        for head, v in heads:
            merge = head.endswith("stripe") or head in ("spare", "cache")
            if merge and out and out[-1][0] == head:
                out[-1] = (head, out[-1][1] + v.devices)
            else:
                out.append((head, v.devices))
        return out

    def of_class(self, *classes: str) -> tuple[VdevSpec, ...]:
        return tuple(c.vdev for c in self.classes if c.cls in classes)

    @property
    def disk_count(self) -> int:
        """Every device the pool is built on: data vdevs and class vdevs alike."""
        return sum(v.width for v in self.vdevs) + sum(c.vdev.width for c in self.classes)

    @property
    def failures_tolerated(self) -> int:
        """Any N member failures the pool always survives: the weakest top-level vdev's.
        A special or dedup vdev holds pool metadata, so losing it loses the pool and it
        counts; a log, spare or cache device does not."""
        vdevs = self.vdevs + self.of_class("special", "dedup")
        return min(v.failures_tolerated for v in vdevs)


def _join(head: str, members: str) -> str:
    """``mirror:2x4T``, ``log mirror:2x100G``, ``spare 1x4T`` (spare/cache take no TYPE)."""
    return f"{head} {members}" if head in ("spare", "cache") else f"{head}:{members}"


@dataclass(frozen=True)
class _Part:
    """One ``+`` part before disks are assigned: its type, options and members."""

    text: str
    kind: str  # stripe | mirror | raidzN | draidN
    opts: tuple[str, ...]  # dRAID ":Nd" ":Nc" ":Ns" fields
    width: int | None  # a WIDTH member
    sizes: tuple[int, ...] | None  # SIZES members
    cls: str = ""  # a class word (log, special, dedup, spare, cache), or "" for data


VDEV_TYPES = ("stripe", "mirror", "raidz1", "raidz2", "raidz3", "draid1", "draid2", "draid3")
_TYPE_RE = re.compile(r"(stripe|mirror|raidz[123]?|draid[123]?)", re.ASCII)
_OPT_RE = re.compile(r"[0-9]{1,6}[cdsCDS]", re.ASCII)


def _split_part(text: str, layout: str) -> _Part:
    word, _, rest = text.partition(" ")
    if word.lower() in CLASS_WORDS:
        return _class_part(word.lower(), rest.strip(), text, layout)
    fields = [f.strip() for f in text.split(":")]
    head = fields[0].lower()
    if not _TYPE_RE.fullmatch(head):
        near = difflib.get_close_matches(head, VDEV_TYPES, n=1, cutoff=0.6)
        hint = f" Did you mean '{near[0]}'?" if near else ""
        raise UsageError(f"Layout '{layout}': '{fields[0]}' is not a vdev type.{hint}", LAYOUT_HELP)
    kind = {"raidz": "raidz1", "draid": "draid1"}.get(head, head)
    opts = tuple(f for f in fields[1:] if _OPT_RE.fullmatch(f))
    members = [f for f in fields[1:] if f not in opts]
    if len(members) > 1 or (members and not members[0]):
        raise UsageError(f"Layout '{layout}': '{text}' is not TYPE[:MEMBERS].", LAYOUT_HELP)
    width, sizes = _members(members[0] if members else "", text, layout)
    return _Part(text, kind, opts, width, sizes)


def _members(text: str, part: str, layout: str) -> tuple[int | None, tuple[int, ...] | None]:
    """(width, sizes) of MEMBERS: plain digits are a width, anything else sizes."""
    if not text:
        return None, None
    if is_digits(text):
        return _width(text, part, layout), None
    return None, parse_sizes(text, what=f"layout part '{part}'")


def _class_part(word: str, rest: str, text: str, layout: str) -> _Part:
    """``log mirror:2x100G``, ``special 1x500G``, ``spare 1x4T``, ``cache 2``."""
    if not rest:
        raise UsageError(
            f"Layout '{layout}': '{text}' names the {word} class but no devices.",
            f"Write e.g. '{word} mirror:2x100G'" if word in ALLOC_CLASSES else
            f"Write e.g. '{word} 1x4T'.",
        )  # fmt: skip
    typed = _TYPE_RE.fullmatch(rest.split(":")[0].strip().lower()) is not None
    if not typed:  # bare MEMBERS: single disks, as `zpool create ... log sdb` takes them
        width, sizes = _members(rest, text, layout)
        return _Part(text, "stripe", (), width, sizes, word)
    if word in ("spare", "cache"):
        raise UsageError(
            f"Layout '{layout}': '{text}': a {word} device is one disk; it takes no vdev type.",
            f"Write its devices only: '{word} 1x4T' (or a width, '{word} 1').",
        )
    part = _split_part(rest, layout)
    if part.kind not in ("stripe", "mirror"):
        raise UsageError(
            f"Layout '{layout}': '{text}': a {word} vdev is a single disk or a mirror; "
            f"zpool create refuses {part.kind} there.",
            f"Write '{word} mirror:2x...' or '{word} 1x...'.",
        )
    return _Part(text, part.kind, (), part.width, part.sizes, word)


def _width(digits: str, part: str, layout: str) -> int:
    n = int(digits[:7])
    if len(digits) > 6 or n > 10_000:
        raise UsageError(
            f"Layout '{layout}': '{part}' asks for {digits} disks.",
            "Give a width of at most a few hundred disks; one device of N bytes is 1xN.",
        )
    if n == 0:
        raise UsageError(
            f"Layout '{layout}': '{part}' has a width of 0.", "Give each vdev 1 or more disks."
        )
    return n


def parse_layout(text: str, disks: Sequence[int] | None = None, *, what: str = "--disks") -> Layout:
    """Parse a layout; `disks` (sizes in bytes, in order) supply groups written with widths.

    Raises UsageError naming the bad part and the fix.
    """
    if not text or not text.strip():
        raise UsageError("The layout is empty.", "Example: --layout 'raidz2:6x4T'.")
    if len(text) > 10_000 or not text.isascii():
        raise UsageError("The layout is not ASCII text of a sensible length.", LAYOUT_HELP)
    parts = []
    for raw in text.split("+"):
        if not raw.strip():
            raise UsageError(
                f"Empty part in layout '{text}'.", "Join vdevs with '+': raidz1:3 + mirror:2."
            )
        parts.append(_split_part(raw.strip(), text))
    sized = [p for p in parts if p.sizes is not None]
    if sized and len(sized) != len(parts):
        raise UsageError(
            f"Layout '{text}' mixes device sizes and widths.",
            "Write every part with sizes (raidz1:3x4T + mirror:2x1T) or every part with "
            "widths and give the disks separately (raidz1:3 + mirror:2 --disks 3x4T,2x1T).",
        )
    if sized and disks is not None:
        raise UsageError(
            f"Layout '{text}' names its devices' sizes, and {what} names disks too.",
            f"Give one: the layout with widths (raidz1:3) and {what}, or only the layout.",
        )
    if all(p.cls for p in parts):
        raise UsageError(
            f"Layout '{text}' has no data vdevs, only {parts[0].cls} devices.",
            "Start with the data vdevs: raidz2:6x4T + log mirror:2x100G.",
        )
    vdevs: list[VdevSpec] = []
    classes: list[ClassVdev] = []
    for p, devices in zip(parts, _assign(parts, text, disks, what), strict=True):
        group = _group(p, devices, text)
        if p.cls:
            classes.extend(ClassVdev(p.cls, v) for v in group)
        else:
            vdevs.extend(group)
    return Layout(tuple(vdevs), tuple(classes))


def parse_class(cls: str, text: str, option: str) -> tuple[ClassVdev, ...]:
    """`plan --slog mirror:2x100G` / `--special mirror:2x500G`: class vdevs written with
    sizes (the data disks come from --disks), added to every layout the search tries."""
    where = f"{option} '{text}'"
    part = _class_part(cls, text.strip(), f"{cls} {text.strip()}", where)
    if part.sizes is None:
        raise UsageError(
            f"{where} gives no device sizes.", f"Write sizes, e.g. {option} mirror:2x100G."
        )
    return tuple(ClassVdev(cls, v) for v in _group(part, part.sizes, where))


def _assign(
    parts: list[_Part], text: str, disks: Sequence[int] | None, what: str
) -> list[tuple[int, ...]]:
    """Each part's member sizes: its own SIZES, or the next WIDTH disks of `disks`."""
    if all(p.sizes is not None for p in parts):
        return [p.sizes or () for p in parts]
    if disks is None:
        raise UsageError(
            f"Layout '{text}' gives widths, not sizes, so it needs disks.",
            f"Give the disks with {what} (e.g. 6x4TB), or write sizes in the layout "
            "(raidz2:6x4TB).",
        )
    if len(parts) > 1 and any(p.width is None for p in parts):
        bare = next(p for p in parts if p.width is None)
        raise UsageError(
            f"Layout '{text}': with several vdevs each needs a width ('{bare.text}' has none).",
            "Write e.g. raidz1:3+raidz1:3.",
        )
    widths = [p.width if p.width is not None else len(disks) for p in parts]
    if sum(widths) > len(disks):
        raise UsageError(
            f"Layout '{text}' needs {sum(widths)} disks but {what} has {len(disks)}.",
            "Add disks or use a narrower layout.",
        )
    out, start = [], 0
    for w in widths:
        out.append(tuple(disks[start : start + w]))
        start += w
    return out


def _group(p: _Part, devices: tuple[int, ...], layout: str) -> list[VdevSpec]:
    n = len(devices)
    if p.opts and not p.kind.startswith("draid"):
        raise UsageError(f"Layout '{layout}': only dRAID takes d/c/s counts ('{p.text}').")
    if n == 0:
        raise UsageError(f"Layout '{layout}': '{p.text}' has no disks.", "Give it disks.")
    if p.kind == "stripe":
        return [VdevSpec("disk", (d,)) for d in devices]
    if p.kind == "mirror":
        if n < 2:
            raise UsageError(
                f"Layout '{layout}': '{p.text}' is a mirror of {n} disk; a mirror needs at "
                "least 2.",
                "Add a disk, or use stripe for a single disk.",
            )
        return [VdevSpec("mirror", devices)]
    parity = int(p.kind[-1])
    if p.kind.startswith("raidz"):
        if not parity + 1 <= n <= VDEV_RAIDZ_MAX_CHILDREN:
            raise UsageError(
                f"Layout '{layout}': raidz{parity} of {n} disks is impossible; it needs at "
                f"least {parity + 1} and at most {VDEV_RAIDZ_MAX_CHILDREN}.",
                f"Give it {parity + 1} or more disks (zpool create refuses fewer), or split it.",
            )
        return [VdevSpec("raidz", devices, parity=parity)]
    where = f"Layout '{layout}'" + ("" if p.text == layout.strip() else f": '{p.text}'")
    data, spares = draid_shape(parity, p.opts, n, where)
    return [VdevSpec("draid", devices, parity=parity, draid_data=data, draid_spares=spares)]


def draid_shape(parity: int, opts: Sequence[str], children: int, where: str) -> tuple[int, int]:
    """(data disks per group, distributed spares) as `zpool create` settles them.

    Learnt from OpenZFS's draid_config_by_type (cmd/zpool/zpool_vdev.c): options in any
    order; :Nc must equal the children; data defaults to min(8, children − parity − spares).
    """
    data: int | None = None
    spares = 0
    for opt in opts:
        value, suffix = int(opt[:-1]), opt[-1].lower()
        if suffix == "c" and value != children:
            raise UsageError(
                f"{where} says {value} children but has {children} disks.",
                "Make :Nc match the number of disks, or drop it.",
            )
        if suffix == "d":
            data = value
        elif suffix == "s":
            spares = value
    if children > VDEV_DRAID_MAX_CHILDREN:
        raise UsageError(f"{where}: dRAID supports at most 255 disks, not {children}.",
                         "Split it into several dRAID vdevs.")  # fmt: skip
    if spares > DRAID_MAX_SPARES:
        raise UsageError(f"{where}: {spares} distributed spares; OpenZFS allows 100.",
                         "Use fewer spares.")  # fmt: skip
    available = children - spares - parity
    if data is None:
        if available < 1:
            raise UsageError(
                f"{where}: {spares} spares and parity {parity} leave no data disks of {children}.",
                "Add disks or use fewer spares.",
            )
        data = min(available, DRAID_DEFAULT_MAX_DATA)
    if data == 0:
        raise UsageError(f"{where} asks for 0 data disks per group.",
                         "Give at least 1 (:1d), or drop :Nd for OpenZFS's default.")  # fmt: skip
    if data > available:
        raise UsageError(
            f"{where}: {data} data disks per group is too many; with parity {parity} and "
            f"{spares} spares at most {max(available, 0)} of {children} disks are available.",
            "Lower the :Nd value or add disks.",
        )
    return data, spares


def check_widths(text: str) -> None:
    """What can be checked of a study's layout before its disks are known: the grammar, no
    sizes (a study's disks have one size, from [disks]), and every part with a width
    (`raidz3:3`, `draid1:0d:1s:6`). Bare types (`raidz2`) are checked when the disks are."""
    if len(text) > 10_000 or not text.isascii():
        raise UsageError("The layout is not ASCII text of a sensible length.", LAYOUT_HELP)
    parts = [_split_part(raw.strip(), text) for raw in text.split("+") if raw.strip()]
    if len(parts) != len(text.split("+")):
        raise UsageError(
            f"Empty part in layout '{text}'.", "Join vdevs with '+': raidz1:3 + mirror:2."
        )
    for p in parts:
        if p.sizes is not None:
            raise UsageError(
                f"Layout '{text}': '{p.text}' writes device sizes; a study's disks all have "
                "the size in [disks].",
                f"Write a width instead, e.g. {p.kind}:{len(p.sizes)}.",
            )
        if p.width is not None:
            _group(p, (1,) * p.width, text)
