"""What the store knows about one finished study run, typed: the input of a study's notes.

`study_facts(store, run_id)` reads the run's metadata and measurements once and returns a
StudyFacts: per configuration its factor levels (from the study file recorded with the run,
not by re-splitting keys), its figures, and what the engine recorded beside them (usable
space, compressratio, fill reached, resilver time), plus the member disks' sector sizes. Notes
are pure functions of these facts: no SQL, JSON or /sys in them, unit-tested without root.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from poolbench.records.measurement import Measurement
from poolbench.records.run_metadata import Device, RunMetadata
from poolbench.records.sections import Age, Fill, L2arcReads, Resilver, SlowMember
from poolbench.store.factrows import FactRow, section, study_extras

if TYPE_CHECKING:
    from poolbench.store.db import Store

# The guards key where the engine records each trial's member disks (probes.device_info):
# name, logical_sector, physical_sector, ... per disk the pool was built on.
MEMBER_DISKS = "member_disks"


@dataclass(frozen=True)
class DiskSectors:
    """One member disk's sector sizes as the kernel reports them (512e: 512 / 4096)."""

    name: str
    logical: int
    physical: int

    @property
    def is_512e(self) -> bool:
        return self.logical == 512 and self.physical >= 4096


@dataclass(frozen=True)
class Expansion:
    """One RAIDZ expansion (the expand workload): the trial's replicate, the vdev's width
    before, the pool's allocated bytes it reflowed, the seconds it took, and USED + AVAIL
    before and after as ZFS reported them."""

    replicate: int
    width_before: int
    allocated_bytes: int
    seconds: float
    usable_before: int | None
    usable_after: int | None


@dataclass(frozen=True)
class ZvolSpace:
    """What a zvol target was charged (guards pool.zvol, read after each measurement): its
    volblocksize, and per reading the bytes it references (parity and padding, deflated as
    `zfs list` shows them) and the logical bytes written to it."""

    volblocksize: int
    readings: tuple[tuple[int, int], ...]  # (referenced, logicalreferenced)

    @property
    def charged_per_byte(self) -> float | None:
        """referenced ÷ logicalreferenced of the fullest reading (None: under 1 MiB written)."""
        ref, logical = max(self.readings, key=lambda x: x[1], default=(0, 0))
        return ref / logical if logical >= 1 << 20 else None


@dataclass(frozen=True)
class ConfigFacts:
    key: str  # the configuration key as stored ("backend=zfs layout=raidz1 ashift=9")
    levels: Mapping[str, str]  # factor → level, from the recorded study file
    figures: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # workload → values
    usable_bytes: int | None = None  # zfs USED + AVAIL as the pool reported it
    zfs_version: str = ""
    compressratios: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # per workload
    fill: Fill | None = None
    resilvers: tuple[Resilver, ...] = ()
    # workload → percentile ("50", "99", "99.9") → completion latency in ns per replicate,
    # where fio recorded it (store 0005_latency); the notes' p99 (study/builtin/headline).
    latency: Mapping[str, Mapping[str, tuple[float, ...]]] = field(default_factory=dict)
    # workload → fio's completion-latency histogram (bin ns → completions) per replicate, in
    # replicate order, where every replicate stored one (json+): the pooled p99 of all I/Os
    # (stats.pooled) the notes print.
    latency_bins: Mapping[str, tuple[Mapping[int, int], ...]] = field(default_factory=dict)
    # CPU seconds per GiB moved (fio's + the filesystem's: guards/cpu.py), per workload,
    # and whose CPU counted as the filesystem's
    cpu_s_per_gib: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    cpu_scope: str = ""
    # Workloads whose queue depth was never reached: fio did each I/O inside its submit
    # call in some replicate (guards queue_depth.blocking_submit, workloads/fiodepth.py).
    blocking_submit: frozenset[str] = frozenset()
    # workload → bytes allocated on the data vdevs ("normal") and the special/dedup classes
    # after its last replicate (OpenZFS; guards pool.class_alloc): the special study's fill
    class_alloc: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    class_free: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # the same, free
    expansions: tuple[Expansion, ...] = ()
    zvol: ZvolSpace | None = None  # a zvol target: its space as ZFS charged it
    # pgbench workloads: device bytes written per transaction, per replicate, and the
    # workloads whose database RAM could cache in some replicate (labelled warm)
    bytes_per_txn: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    warm: frozenset[str] = frozenset()
    # the l2arc reads of each replicate, in replicate order (their intervals and steady
    # figures; a resilver's load is its Resilver's)
    l2arc: tuple[L2arcReads, ...] = ()
    ages: tuple[Age, ...] = ()  # one per trial of an aged configuration (aging factor)
    slow_member: SlowMember | None = None  # the member throttled on purpose (slow_member)
    # workload → per replicate whose window could judge its members (guards members_slow),
    # the places in the pool's order of those it found slow
    slow_flags: Mapping[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    # the same by the disk_wait rule (OpenZFS: guards members_slow.latency)
    latency_flags: Mapping[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    # Every stored measurement of the configuration, in the order stored: a study whose
    # factor reads the pool back (factors/) decodes that factor's typed section from these,
    # so a new factor and its study need no field here.
    rows: tuple[FactRow, ...] = ()

    def level(self, factor: str, default: str = "") -> str:
        return self.levels.get(factor, default)


@dataclass(frozen=True)
class StudyFacts:
    study: str
    disk_source: str  # loop | files | devices
    disk_count: int
    disk_bytes: int | None  # one disk (the smallest claimed device for real disks)
    configs: tuple[ConfigFacts, ...]  # in the study's configuration order
    # Every member disk once; None when the run did not record them (then nothing is known
    # about 512e, and a note must say so rather than guess).
    sectors: tuple[DiskSectors, ...] | None = None
    vdev_source: str = "whole"  # [disks] vdev_source: whole | partition | slice


def study_facts(store: Store, run_id: int) -> StudyFacts:
    """The facts of run `run_id`, read from `store`."""
    meta = RunMetadata.decode(store.run(run_id)["metadata"])
    rows = [_row(m) for m in store.measurement_records(run_id)]
    return facts_from_records(meta, rows)


def _row(m: Measurement) -> FactRow:
    """What the facts read of the stored record (its guards and latency as stored)."""
    clat = m.latency.to_json() if m.latency is not None else None  # store 0005_latency
    return FactRow(config=m.config, workload=m.workload, replicate=m.replicate, value=m.value,
                   guards=m.findings.to_json(), clat=clat)  # fmt: skip


def facts_from_records(meta: RunMetadata | object, rows: list[FactRow]) -> StudyFacts:
    """The facts from a run's metadata (the record, or the column as stored) and its
    measurements (guards already decoded)."""
    from poolbench.study.matrix import configs
    from poolbench.study.model import parse

    meta = meta if isinstance(meta, RunMetadata) else RunMetadata.decode(meta)
    study = parse(meta.study_text or "", "the recorded study")
    order = {c.key: dict(c.levels) for c in configs(study)}
    by_key: dict[str, list[FactRow]] = {}
    for r in rows:
        by_key.setdefault(str(r["config"]), []).append(r)
    keys = [k for k in order if k in by_key] + sorted(k for k in by_key if k not in order)
    claimed = [c for c in meta.claims if c.size_bytes is not None]
    return StudyFacts(
        study=study.name,
        disk_source=study.disks.source,
        disk_count=study.disks.n,
        disk_bytes=min((c.size_bytes for c in claimed if c.size_bytes is not None), default=None)
        if study.disks.source == "devices"
        else study.disks.size_bytes,
        configs=tuple(_config(k, order.get(k, {}), by_key[k]) for k in keys),
        sectors=_sectors(claimed, rows),
        vdev_source=study.disks.vdev_source,
    )


def _sectors(claimed: Iterable[Device], rows: Iterable[FactRow]) -> tuple[DiskSectors, ...] | None:
    """Each disk once: the claimed devices, and the members each trial recorded."""
    disks = list(claimed)
    recorded = bool(disks)
    for r in rows:
        members = r["guards"].get(MEMBER_DISKS)
        if isinstance(members, list):  # recorded, even if empty (members are plain files)
            recorded = True
            disks += [Device.decode(m) for m in members if isinstance(m, dict)]
    if not recorded:
        return None
    seen: dict[str, DiskSectors] = {}
    for d in disks:
        lo, ph, name = d.logical_sector, d.physical_sector, d.name
        if lo is not None and ph is not None and name not in ("", "?", *seen):
            seen[name] = DiskSectors(name, lo, ph)
    return tuple(seen.values())


def _config(key: str, levels: dict[str, str], rows: list[FactRow]) -> ConfigFacts:
    figures: dict[str, list[tuple[int, float]]] = {}
    ratios: dict[str, list[float]] = {}
    measured: list[int] = []  # the capacity workload's figure
    described: list[int] = []  # the pool as read back when it was built
    version, fill, resilvers = "", None, []
    latency: dict[str, dict[str, list[tuple[int, float]]]] = {}
    cpu: dict[str, list[float]] = {}
    scope = ""
    blocking: set[str] = set()
    for r in rows:
        g = r["guards"]
        pool = section(g, "pool")
        if section(g, "queue_depth").get("blocking_submit") is True:
            blocking.add(str(r["workload"]))
        figures.setdefault(r["workload"], []).append((int(r["replicate"]), float(r["value"])))
        measured += _ints(section(g, "capacity").get("usable_bytes"))
        described += _ints(pool.get("usable_bytes"))
        version = version or str(pool.get("zfs_version") or "")
        ratio = _ratio(pool.get("compressratio"))
        if ratio is not None:
            ratios.setdefault(r["workload"], []).append(ratio)
        fill = fill or Fill.decode(g)
        spent = section(g, "cpu")
        if isinstance(spent.get("s_per_gib"), int | float):
            cpu.setdefault(r["workload"], []).append(float(spent["s_per_gib"]))
            scope = scope or str(spent.get("fs_scope") or "")
        rs = Resilver.decode(g, int(r["replicate"]))
        resilvers += [rs] if rs else []
        _add_latency(latency, r["workload"], int(r["replicate"]), r.get("clat"))
    return ConfigFacts(
        key=key,
        levels=levels,
        figures={w: tuple(v for _r, v in sorted(vals)) for w, vals in figures.items()},
        usable_bytes=next(iter(measured + described), None),
        zfs_version=version,
        compressratios={w: tuple(v) for w, v in ratios.items()},
        fill=fill,
        resilvers=tuple(sorted(resilvers, key=lambda x: x.replicate)),
        latency={
            w: {q: tuple(v for _r, v in sorted(vals)) for q, vals in by_q.items()}
            for w, by_q in latency.items()
        },
        cpu_s_per_gib={w: tuple(v) for w, v in cpu.items()},
        blocking_submit=frozenset(blocking),
        cpu_scope=scope,
        class_alloc=_class_alloc(rows),
        class_free=_class_alloc(rows, "class_free"),
        expansions=tuple(sorted(_expansions(rows), key=lambda e: e.replicate)),
        zvol=_zvol_space(rows),
        latency_bins=_latency_bins(rows),
        rows=tuple(rows),
        **study_extras(rows),
    )


def _latency_bins(rows: list[FactRow]) -> dict[str, tuple[Mapping[int, int], ...]]:
    """Per workload, each replicate's clat histogram, when every replicate has one."""
    found: dict[str, list[tuple[int, Mapping[int, int] | None]]] = {}
    for r in rows:
        clat = r.get("clat")
        bins = clat.get("bins") if isinstance(clat, dict) else None
        parsed = None
        if isinstance(bins, dict) and bins:
            try:
                parsed = {int(k): int(v) for k, v in bins.items()}
            except (TypeError, ValueError):
                parsed = None
        found.setdefault(str(r["workload"]), []).append((int(r["replicate"]), parsed))
    out: dict[str, tuple[Mapping[int, int], ...]] = {}
    for w, reps in found.items():
        kept = [b for _r, b in sorted(reps, key=lambda x: x[0]) if b is not None]
        if len(kept) == len(reps):
            out[w] = tuple(kept)
    return out


def _zvol_space(rows: list[FactRow]) -> ZvolSpace | None:
    block, readings = 0, []
    for r in rows:
        got = section(r["guards"], "pool").get("zvol")
        if not isinstance(got, dict):
            continue
        ref, logical = got.get("referenced"), got.get("logicalreferenced")
        block = block or int(got.get("volblocksize") or 0)
        if isinstance(ref, int) and isinstance(logical, int):
            readings.append((ref, logical))
    return ZvolSpace(block, tuple(readings)) if block else None


def _expansions(rows: list[FactRow]) -> list[Expansion]:
    out = []
    for r in rows:
        e = section(r["guards"], "expand")
        if not isinstance(e.get("seconds"), int | float):
            continue
        before, after = e.get("usable_before"), e.get("usable_after")
        out.append(Expansion(
            int(r["replicate"]), int(e.get("width_before") or 0),
            int(e.get("allocated_bytes") or 0), float(e["seconds"]),
            before if isinstance(before, int) else None,
            after if isinstance(after, int) else None,
        ))  # fmt: skip
    return out


def _class_alloc(rows: list[FactRow], key: str = "class_alloc") -> dict[str, dict[str, int]]:
    """Per workload, the class allocation (`key` "class_free": free bytes) its last replicate
    read back (none: not recorded)."""
    out: dict[str, tuple[int, dict[str, int]]] = {}
    for r in rows:
        got = section(r["guards"], "pool").get(key)
        if not isinstance(got, dict):
            continue
        alloc = {str(k): int(v) for k, v in got.items() if isinstance(v, int)}
        rep = int(r["replicate"])
        if alloc and rep >= out.get(r["workload"], (-1, {}))[0]:
            out[r["workload"]] = (rep, alloc)
    return {w: a for w, (_rep, a) in out.items()}


def _add_latency(
    out: dict[str, dict[str, list[tuple[int, float]]]], workload: str, replicate: int, clat: Any
) -> None:
    """One measurement's completion-latency percentiles (fioparse.Latency.to_json)."""
    pct = clat.get("percentiles") if isinstance(clat, dict) else None
    for q, v in (pct or {}).items():
        if isinstance(v, int | float) and not isinstance(v, bool):
            out.setdefault(workload, {}).setdefault(str(q), []).append((replicate, float(v)))


def _ints(value: Any) -> list[int]:
    return [value] if isinstance(value, int) and not isinstance(value, bool) else []


def _ratio(value: Any) -> float | None:
    """compressratio as ZFS prints it: "1.52x" (zfs-fuse, OpenZFS without -p) or "1.52"."""
    try:
        return float(str(value).strip().rstrip("x")) if value not in (None, "") else None
    except ValueError:
        return None
