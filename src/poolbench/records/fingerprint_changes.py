"""What changed between two fingerprints, in words a history shows beside a point and names
at a step ("ZFS zfs-2.2.6-1 → zfs-2.3.3-1", "disk serial WD-1 → serial WD-9"). Pure.

Fill and fragmentation change with every run: they are not changes here but the covariates a
history plots (and the change-point method tells a drift along them from a step). The
poolbench version is a change (a new release may measure differently); the path and host are
the series' identity, never a change within it.
"""

from __future__ import annotations

from dataclasses import dataclass

from poolbench.records.fingerprint import Disk, Fingerprint

GiB = 1 << 30


@dataclass(frozen=True)
class Change:
    field: str  # "ZFS", "kernel", "pool property ashift", "disk serial X", …
    before: str
    after: str

    def text(self) -> str:
        if self.before == "(none)":
            return f"{self.field} {self.after} added"
        if self.after == "(none)":
            return f"{self.field} {self.before} removed"
        return f"{self.field} {self.before} → {self.after}"


def _value(v: object) -> str:
    return "(unknown)" if v is None else str(v)


def _gib(v: int | None) -> str:
    return "(unknown)" if v is None else f"{v / GiB:.1f} GiB"


def _scalars(a: Fingerprint, b: Fingerprint) -> list[Change]:
    pairs = [
        ("ZFS", a.zfs, b.zfs), ("kernel", a.kernel, b.kernel), ("fio", a.fio, b.fio),
        ("poolbench", a.poolbench, b.poolbench), ("layout", a.pool.layout, b.pool.layout),
        ("filesystem", a.pool.stack, b.pool.stack),
        ("RAM", _gib(a.ram_bytes), _gib(b.ram_bytes)),
        ("ARC max", _gib(a.arc_max_bytes), _gib(b.arc_max_bytes)),
    ]  # fmt: skip
    return [Change(f, _value(x), _value(y)) for f, x, y in pairs if x != y]


def _mapping(kind: str, a: dict[str, str], b: dict[str, str]) -> list[Change]:
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key, "(none)"), b.get(key, "(none)")
        if x != y:
            out.append(Change(f"{kind} {key}", x, y))
    return out


def _disks(a: tuple[Disk, ...], b: tuple[Disk, ...]) -> list[Change]:
    """Disks known by serial: a serial gone and another come is a replacement; the same
    serial with another firmware an update. Disks without serials (loop devices) only count."""
    sa = {d.serial: d for d in a if d.serial}
    sb = {d.serial: d for d in b if d.serial}
    out = [Change(f"disk serial {s} firmware", _value(sa[s].firmware), _value(sb[s].firmware))
           for s in sorted(set(sa) & set(sb)) if sa[s].firmware != sb[s].firmware]  # fmt: skip
    gone, new = sorted(set(sa) - set(sb)), sorted(set(sb) - set(sa))
    for old, fresh in zip(gone, new, strict=False):
        out.append(Change("disk", f"serial {old}", f"serial {fresh}"))
    out += [Change("disk", f"serial {s}", "(none)") for s in gone[len(new) :]]
    out += [Change("disk", "(none)", f"serial {s}") for s in new[len(gone) :]]
    if len(a) != len(b) and not (sa or sb):
        out.append(Change("disks", str(len(a)), str(len(b))))
    # A rate cap, per disk (by serial, else by name: loop devices have no serial)
    na, nb = {d.serial or d.name: d for d in a}, {d.serial or d.name: d for d in b}
    for key in sorted(set(na) & set(nb)):
        for kind, x, y in (("read", na[key].cap_read_bps, nb[key].cap_read_bps),
                           ("write", na[key].cap_write_bps, nb[key].cap_write_bps)):  # fmt: skip
            if x != y:
                out.append(Change(f"disk {na[key].ident} {kind} cap", _rate(x), _rate(y)))
    return out


def _rate(bps: int | None) -> str:
    return "(none)" if bps is None else f"{bps / (1 << 20):g} MiB/s"


def changes(before: Fingerprint | None, after: Fingerprint | None) -> tuple[Change, ...]:
    """What differs from `before` to `after` (module doc); () when either is unknown."""
    if before is None or after is None:
        return ()
    return tuple(
        _scalars(before, after)
        + _mapping("pool property", before.pool.properties, after.pool.properties)
        + _mapping("dataset property", before.pool.dataset_properties,
                   after.pool.dataset_properties)
        + _disks(before.disks, after.disks)
    )  # fmt: skip
