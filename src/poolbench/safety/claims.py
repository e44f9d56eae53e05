"""Claims: the only way a backend receives a device.

A device is claimed only when the user named it explicitly, the name resolves to a real block
device (symlinks and /dev/disk/by-id resolved; one device reached by two names is one device,
and naming it twice is refused), and the inventory finds it free. A device in use is refused
with every reason and the exact per-device override, `--destroy-data-on ID`, where ID is the
serial or by-id path (the /dev path only for devices that have neither, such as loop
devices). An override still needs an interactive confirmation that lists what will be
destroyed, unless `--yes`. Nothing overrides live use, the root device or poolbench's own
store and scratch devices.

Between planning and the first write a device may change (someone mounts it), so a claim set
is checked again right before the first destructive command: `ClaimSet.recheck()`, done
automatically by `GuardedRunner` (safety/guarded.py), which also refuses any mutating command
that names a /dev path that is not claimed.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from poolbench.errors import Refused, UsageError
from poolbench.safety.blockdevice import PROTECTED, BlockDevice, Inventory, Reason, ReasonJson
from poolbench.safety.inventory import Paths, scan
from poolbench.system.runner import Runner

if TYPE_CHECKING:
    from poolbench.store.db import Store

_ISSUER = object()  # only this module makes Claims

# major:minor of what a name resolves to, or an OSError / UsageError saying why not.
Resolver = Callable[[str], str]
Confirm = Callable[[str], bool]


class ClaimRefused(Refused):
    """Named devices may not be used. `refusals` maps each device path to its reasons."""

    def __init__(self, problem: str, fix: str, refusals: dict[str, list[Reason]]) -> None:
        self.refusals = refusals
        super().__init__(problem, fix)


class DeviceChanged(Refused):
    """A claimed device changed between planning and the first destructive command."""


class ClaimJson(TypedDict):
    """One claimed device as `disks --claim --json` prints it and the run's metadata keeps it
    (`claims`, read back by records/run_metadata.py)."""

    path: str
    name: str
    given: str
    serial: str | None
    by_id: list[str]
    model: str | None
    size_bytes: int
    logical_sector: int | None
    physical_sector: int | None
    rotational: bool
    loop_backing_file: str | None
    overridden: list[ReasonJson]


class OverrideJson(TypedDict):
    device: str
    ident: str
    confirmed_by: str
    reasons: list[str]


class ClaimsJson(TypedDict):
    """`disks --claim --json`; the run's metadata `claims`."""

    claims: list[ClaimJson]
    overrides: list[OverrideJson]


@dataclass(frozen=True)
class Claim:
    """One device a backend may write to. Issued by `claim_devices` only."""

    path: str  # /dev/NAME, what backends pass to zpool, mkfs, mdadm
    name: str  # kernel name
    dev: str  # major:minor at claim time
    given: str  # the name the user typed
    override_id: str  # the ID --destroy-data-on must name for this device
    serial: str | None
    by_id: tuple[str, ...]
    model: str | None
    size_bytes: int
    logical_sector: int | None
    physical_sector: int | None
    rotational: bool
    loop_backing_file: str | None
    overridden: tuple[Reason, ...] = ()  # reasons the user chose to destroy
    _issuer: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._issuer is not _ISSUER:
            raise TypeError("a Claim is issued by poolbench.safety.claims.claim_devices only")

    def as_dict(self) -> ClaimJson:
        return {
            "path": self.path,
            "name": self.name,
            "given": self.given,
            "serial": self.serial,
            "by_id": list(self.by_id),
            "model": self.model,
            "size_bytes": self.size_bytes,
            "logical_sector": self.logical_sector,
            "physical_sector": self.physical_sector,
            "rotational": self.rotational,
            "loop_backing_file": self.loop_backing_file,
            "overridden": [r.as_dict() for r in self.overridden],
        }


@dataclass(frozen=True)
class Override:
    device: str
    ident: str  # the --destroy-data-on value
    reasons: tuple[Reason, ...]
    confirmed_by: str  # "--yes" or "interactive"


@dataclass
class ClaimSet:
    claims: tuple[Claim, ...]
    overrides: tuple[Override, ...]
    protect: Mapping[str, Path] = field(default_factory=dict)
    paths: Paths = field(default_factory=Paths)
    rechecked: bool = False

    @property
    def device_paths(self) -> list[str]:
        return [c.path for c in self.claims]

    def recheck(self, runner: Runner, resolve: Resolver | None = None) -> None:
        """Look again, right before the first destructive command; raise if anything changed."""
        inv = scan(runner, protect=self.protect, paths=self.paths)
        resolve = resolve or resolve_dev
        problems: list[str] = []
        for c in self.claims:
            d = inv.get(c.name)
            try:
                now = resolve(c.path)
            except (OSError, UsageError) as exc:
                now = f"unresolvable ({exc})"
            if d is None or d.dev != c.dev or now != c.dev:
                problems.append(f"{c.path} is no longer the device claimed ({c.dev})")
                continue
            if (d.serial, d.loop_backing_file, d.size_bytes) != (
                c.serial,
                c.loop_backing_file,
                c.size_bytes,
            ):
                problems.append(f"{c.path} now carries a different disk or backing file")
                continue
            accepted = {r.key for r in c.overridden}
            new = [r for r in d.reasons if r.key not in accepted]
            if new:
                problems.append(f"{c.path} is now in use: " + "; ".join(r.detail for r in new))
        if problems:
            raise DeviceChanged(
                "A claimed device changed since it was checked; nothing was written to any "
                "device:\n  " + "\n  ".join(problems),
                "Find out who is using it ('poolbench disks'), then start again.",
            )
        self.rechecked = True

    def record_overrides(self, store: Store, run_id: int) -> None:
        for o in self.overrides:
            claim = next(c for c in self.claims if c.path == o.device)
            store.add_device_override(
                run_id,
                device=o.device,
                ident=o.ident,
                serial=claim.serial,
                model=claim.model,
                size_bytes=claim.size_bytes,
                reasons=[r.detail for r in o.reasons],
                confirmed_by=o.confirmed_by,
            )

    def as_dict(self) -> ClaimsJson:
        return {
            "claims": [c.as_dict() for c in self.claims],
            "overrides": [
                {"device": o.device, "ident": o.ident, "confirmed_by": o.confirmed_by,
                 "reasons": [r.detail for r in o.reasons]}
                for o in self.overrides
            ],
        }  # fmt: skip


def resolve_dev(given: str) -> str:
    """major:minor of the block device `given` names (symlinks followed)."""
    real = os.path.realpath(given)
    st = os.stat(real)  # FileNotFoundError for a typo
    if not stat.S_ISBLK(st.st_mode):
        raise UsageError(
            f"{given} is not a block device"
            + (f" (it resolves to {real})" if real != given else "")
            + ".",
            "Name a disk, partition or loop device; see 'poolbench disks'.",
        )
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def _describe(d: BlockDevice) -> str:
    bits = [_size(d.size_bytes)]
    if d.model:
        bits.append(d.model)
    if d.serial:
        bits.append(f"serial {d.serial}")
    if d.loop_backing_file:
        bits.append(f"loop over {d.loop_backing_file}")
    return f"{d.path} ({', '.join(bits)})"


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _named_path(dev_root: Path, given: str) -> str:
    # A bare kernel name ("sdb") means /dev/sdb; anything else is a path as typed.
    return given if "/" in given else str(dev_root / given)


def _match_override(ident: str, d: BlockDevice, resolve: Resolver) -> bool | str:
    """True if `ident` names device `d`; a message if it names it the wrong way."""
    if d.serial and ident == d.serial:
        return True
    if ident in d.by_id or any(os.path.basename(b) == ident for b in d.by_id):
        return True
    try:
        same = resolve(ident) == d.dev
    except (OSError, UsageError):
        same = False
    if not same:
        return False
    if d.serial or d.by_id:
        return (
            f"--destroy-data-on {ident}: name this disk by its stable ID, "
            f"'--destroy-data-on {d.override_id}', not by a kernel name that can change "
            "between boots."
        )
    return True


Chosen = dict[str, tuple[str, BlockDevice]]  # kernel name -> (as given, device)


def claim_devices(
    runner: Runner,
    names: Sequence[str],
    *,
    overrides: Sequence[str] = (),
    yes: bool = False,
    confirm: Confirm | None = None,
    protect: Mapping[str, Path] | None = None,
    paths: Paths | None = None,
    resolve: Resolver | None = None,
    inventory: Inventory | None = None,
) -> ClaimSet:
    """Claim the devices the user named, or raise saying exactly why not and what to type."""
    paths = paths or Paths()
    resolve = resolve or resolve_dev
    if not names:
        raise UsageError("No devices named.", "Name the devices to use; see 'poolbench disks'.")
    inv = inventory or scan(runner, protect=protect, paths=paths)
    chosen = _choose(names, inv, paths, resolve)
    _refuse_overlaps(chosen, inv)
    overridden = _overridden(overrides, chosen, resolve)
    _refuse_in_use(chosen, overridden)
    to_destroy = [(name, d) for name, (_, d) in chosen.items() if d.reasons]
    confirmed_by = _confirm_destruction(to_destroy, yes, confirm)
    claims = tuple(_claim(given, d) for given, d in chosen.values())
    ovr = tuple(
        Override(d.path, overridden[name], tuple(d.reasons), confirmed_by) for name, d in to_destroy
    )
    return ClaimSet(claims, ovr, dict(protect or {}), paths)


def _choose(names: Sequence[str], inv: Inventory, paths: Paths, resolve: Resolver) -> Chosen:
    """Each name resolved to one inventory device; unknown, duplicate or empty ones refused."""
    chosen: Chosen = {}
    for given in names:
        path = _named_path(paths.dev_root, given)
        try:
            majmin = resolve(path)
        except FileNotFoundError:
            raise _no_such_device(given, inv) from None
        except OSError as exc:
            raise UsageError(
                f"Cannot look at {given}: {exc.strerror or exc}.", "Run poolbench as root."
            ) from None
        d = inv.by_dev(majmin)
        if d is None:
            raise UsageError(
                f"{given} is a block device ({majmin}) that the inventory does not know.",
                "See 'poolbench disks'.",
            )
        if d.name in chosen:
            first = chosen[d.name][0]
            how = "given twice" if first == given else f"and {first} are the same device"
            raise UsageError(
                f"{given} {how} ({d.path}). Each device may be named once.",
                "Remove the duplicate; 'poolbench disks' lists every device once.",
            )
        if d.size_bytes == 0:
            raise UsageError(f"{given} ({d.path}) has no medium (size 0).", "Name another.")
        chosen[d.name] = (given, d)
    return chosen


def _overridden(overrides: Sequence[str], chosen: Chosen, resolve: Resolver) -> dict[str, str]:
    """Kernel name -> the override naming it; each override must name one of the devices,
    the stable way."""
    overridden: dict[str, str] = {}
    for ident in overrides:
        hits = []
        for name, (_, d) in chosen.items():
            m = _match_override(ident, d, resolve)
            if isinstance(m, str):
                raise UsageError(m, "")
            if m:
                hits.append(name)
        if not hits:
            raise UsageError(
                f"--destroy-data-on {ident} matches none of the devices named "
                f"({', '.join(g for g, _ in chosen.values())}).",
                "Use the exact ID that the refusal message or 'poolbench disks' shows.",
            )
        for name in hits:
            overridden[name] = ident
    return overridden


def _refuse_in_use(chosen: Chosen, overridden: Mapping[str, str]) -> None:
    """Every device in use and not (or not overridably) overridden, refused in one message."""
    refusals: dict[str, list[Reason]] = {}
    lines: list[str] = []
    for name, (given, d) in chosen.items():
        hard = [r for r in d.reasons if not r.overridable]
        soft = [r for r in d.reasons if r.overridable]
        if hard or (soft and name not in overridden):
            refusals[d.path] = list(d.reasons)
            lines += _refusal_lines(given, d, hard)
    if refusals:
        raise ClaimRefused(
            f"Refusing {len(refusals)} of the {len(chosen)} named devices; nothing was "
            "changed:\n  " + "\n  ".join(lines),
            "\nName free devices (see 'poolbench disks'), or add the override shown for each "
            "device whose data you mean to destroy.",
            refusals,
        )


def _refusal_lines(given: str, d: BlockDevice, hard: Sequence[Reason]) -> list[str]:
    label = _describe(d) + (f", named as {given}" if given != d.path else "")
    lines = [f"{label} is in use:"]
    lines += [f"    - {r.detail}" + ("" if r.overridable else "  [no override]") for r in d.reasons]
    if any(r.kind in PROTECTED or r.kind == "sibling" for r in hard):
        lines.append(
            "    Nothing overrides this: poolbench never writes to the device of the "
            "root filesystem, of its store or of its scratch directory (nor to a "
            "partition beside them, nor to a read-only device)."
        )
    elif hard:
        lines.append(
            "    Nothing overrides live use: end it first (unmount, swapoff, export or "
            "destroy the pool, stop the array or volume group), or name another device."
        )
    else:
        lines.append(f"    To destroy its data anyway: --destroy-data-on {d.override_id}")
    return lines


def _confirm_destruction(
    to_destroy: Sequence[tuple[str, BlockDevice]], yes: bool, confirm: Confirm | None
) -> str:
    """Ask before destroying data (unless --yes); returns how it was confirmed."""
    if not to_destroy or yes:
        return "--yes"
    text = "ALL DATA on these devices will be destroyed:\n" + "\n".join(
        f"  {_describe(d)}\n" + "\n".join(f"    - {r.detail}" for r in d.reasons)
        for _, d in to_destroy
    )
    if confirm is None:
        raise Refused(
            "Destroying data needs a confirmation, and there is no terminal to ask.\n" + text,
            "Run interactively, or add --yes if you are certain.",
        )
    if not confirm(text):
        raise Refused("Not confirmed; nothing was changed.", "")
    return "interactive"


def _claim(given: str, d: BlockDevice) -> Claim:
    return Claim(
        path=d.path,
        name=d.name,
        dev=d.dev,
        given=given,
        override_id=d.override_id,
        serial=d.serial,
        by_id=tuple(d.by_id),
        model=d.model,
        size_bytes=d.size_bytes,
        logical_sector=d.logical_sector,
        physical_sector=d.physical_sector,
        rotational=d.rotational,
        loop_backing_file=d.loop_backing_file,
        overridden=tuple(d.reasons),
        _issuer=_ISSUER,
    )


def _no_such_device(given: str, inv: Inventory) -> UsageError:
    known = [d.path for d in inv.devices.values() if d.size_bytes] + [
        b for d in inv.devices.values() for b in d.by_id
    ]
    close = difflib.get_close_matches(given, known, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    return UsageError(f"No device {given}.{hint}", "See 'poolbench disks' for what exists.")


def _refuse_overlaps(chosen: Mapping[str, tuple[str, BlockDevice]], inv: Inventory) -> None:
    """A partition and its disk, or a dm/md device and its member, are one device twice."""
    for given, d in chosen.values():
        under = {d.parent} if d.parent else set()
        todo = list(d.slaves)
        while todo:
            s = todo.pop()
            if s not in under:
                under.add(s)
                dev = inv.get(s)
                todo += dev.slaves if dev else []
        for other in under & set(chosen):
            raise UsageError(
                f"{given} ({d.path}) lies on {chosen[other][0]} ({inv.devices[other].path}), "
                "which is also named: the same disk twice.",
                "Name either the whole device or its part, not both.",
            )
