"""Which layouts can these disks make, and which are worth it? (pure)

`search()` enumerates, for a list of whole disks:

- a stripe of all disks;
- 2-way and 3-way mirrors (disks paired largest with largest; a remainder left out);
- raidz1/2/3 at every width w ≥ parity + 2 with as many vdevs of that width as fit
  (n // w vdevs; the smallest disks left out), disks grouped largest-first so each vdev's
  members are as close in size as possible;
- dRAID1/2/3 (OpenZFS 2.1+) with 0-2 distributed spares and several data widths;
- for mixed sizes, *tiered partition plans*: every disk is cut at the sizes of the smaller
  disks, so tier 1 is the size all disks share, tier 2 the part the larger disks have beyond
  it, …; each tier with enough members becomes a vdev of the same redundancy, either in the
  same pool (``+``) or as a second pool. This is what a builder with 3 TB and 2 TB disks does
  by hand (a 2 TB partition on every disk in one raidz, the 1 TB leftovers in another).

Each candidate is scored by the capacity model (usable bytes, exact), the failures it
tolerates, and the predicted speed; the Pareto front over those three comes first, ordered
by the chosen objective.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from poolbench.errors import UsageError
from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import ClassVdev, Layout, VdevSpec
from poolbench.planner.performance import DiskSpeed, Speed, predict
from poolbench.planner.rules import RuleSet
from poolbench.planner.space import MiB, whole_disk_partition_bytes

Objective = Literal["space", "speed", "balanced"]

PARTITION_ALIGN = MiB


@dataclass(frozen=True)
class Candidate:
    name: str
    pools: tuple[Layout, ...]  # the main pool, and a second pool of leftovers if any
    partitioned: bool
    usable_bytes: int
    size_bytes: int
    failures_tolerated: int
    speed: Speed
    speed_score: float
    disks_used: int
    pareto: bool = False

    def spec(self) -> str:
        return "  |  ".join(p.spec() for p in self.pools)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "layout": [p.spec() for p in self.pools],
            "partitioned": self.partitioned,
            "usable_bytes": self.usable_bytes,
            "size_bytes": self.size_bytes,
            "failures_tolerated": self.failures_tolerated,
            "disks_used": self.disks_used,
            "pareto": self.pareto,
            "speed_score": round(self.speed_score, 3),
            "predicted": self.speed.as_dict(),
        }


def _chunks(disks: list[int], width: int, count: int) -> list[tuple[int, ...]]:
    return [tuple(disks[i * width : (i + 1) * width]) for i in range(count)]


def _whole_disk_layouts(disks: list[int], rules: RuleSet) -> list[tuple[str, Layout]]:
    """disks sorted largest first."""
    n = len(disks)
    out: list[tuple[str, Layout]] = [
        (f"stripe of {n}", Layout(tuple(VdevSpec("disk", (d,)) for d in disks)))
    ]
    for w in (2, 3):
        k = n // w
        if k >= 1:
            vdevs = tuple(VdevSpec("mirror", c) for c in _chunks(disks, w, k))
            out.append((f"{k} x {w}-way mirror", Layout(vdevs)))
    for parity in (1, 2, 3):
        for w in range(parity + 2, min(n, 255) + 1):
            k = n // w
            vdevs = tuple(VdevSpec("raidz", c, parity=parity) for c in _chunks(disks, w, k))
            out.append((f"{k} x raidz{parity} of {w}", Layout(vdevs)))
    if rules.draid:
        for parity in (1, 2, 3):
            for spares in (0, 1, 2):
                avail = n - spares - parity
                if avail < 2 or n < 5:
                    continue
                datas = {d for d in (2, 3, 4, 6, 8, 10, 12, 16) if d <= avail} | {min(avail, 8)}
                for d in sorted(datas):
                    spec = VdevSpec(
                        "draid", tuple(disks), parity=parity, draid_data=d, draid_spares=spares
                    )
                    out.append((f"draid{parity}:{d}d:{n}c:{spares}s", Layout((spec,))))
    return out


def _tiers(disks: list[int], whole_disk: bool) -> list[tuple[int, int]]:
    """[(partition bytes, members)] from the smallest disk's size upwards, with 1 MiB
    partition alignment; on whole disks, within the space `zpool create` would give the
    data partition (1 MiB start, 8 MiB reserve)."""
    room = [whole_disk_partition_bytes(d) if whole_disk else d for d in disks]
    tiers = []
    prev = 0
    for size in sorted(set(room)):
        part = (size - prev) // PARTITION_ALIGN * PARTITION_ALIGN
        members = sum(1 for r in room if r >= size)
        tiers.append((part, members))
        prev = size
    return tiers


def _tier_vdevs(kind: str, parity: int, part: int, members: int) -> tuple[VdevSpec, ...]:
    """The vdevs one tier of `members` equal partitions makes at this redundancy: a raidzP of
    all of them if there are parity + 2 or more, else (parity + 1)-way mirrors."""
    if kind == "raidz" and members >= parity + 2:
        return (VdevSpec("raidz", (part,) * members, parity=parity),)
    width = parity + 1 if kind == "raidz" else 2
    return tuple(VdevSpec("mirror", (part,) * width) for _ in range(members // width))


def _tiered_layouts(disks: list[int], whole_disk: bool) -> list[tuple[str, list[Layout], Layout]]:
    """(name, pools, tier-1 layout); the tiers share spindles, so speed is tier 1's."""
    tiers = _tiers(disks, whole_disk)
    if len(tiers) < 2:
        return []
    out: list[tuple[str, list[Layout], Layout]] = []
    kinds: list[tuple[str, int]] = [("mirror", 1), ("raidz", 1), ("raidz", 2), ("raidz", 3)]
    for kind, parity in kinds:
        groups = [
            Layout(vd)
            for part, members in tiers
            if part >= 64 * MiB and (vd := _tier_vdevs(kind, parity, part, members))
        ]
        if len(groups) < 2:
            continue
        label = "mirrors" if kind == "mirror" else f"raidz{parity}"
        one_pool = Layout(tuple(v for g in groups for v in g.vdevs))
        out.append((f"tiered {label}, one pool", [one_pool], groups[0]))
        out.append((f"tiered {label}, leftovers as 2nd pool", [groups[0], *groups[1:]], groups[0]))
    return out


def _score(
    name: str,
    pools: list[Layout],
    partitioned: bool,
    speed_layout: Layout,
    ashift: int,
    rules: RuleSet,
    disk: DiskSpeed,
    whole_disk: bool,
) -> Candidate | None:
    usable = size = 0
    for p in pools:
        try:
            wd = whole_disk and not partitioned
            plan = plan_pool(p, ashift, rules, whole_disk=wd, with_blocks=False)
        except UsageError:  # a candidate the model refuses (too small, …) is skipped
            return None
        usable += plan.usable_bytes
        size += plan.size_bytes
    speed = predict(speed_layout, disk)
    # A tiered plan cuts the disks tier 1 uses; a whole-disk plan uses its members.
    # (--slog/--special devices are extra to --disks: not counted)
    used = speed_layout.disk_count if partitioned else sum(len(p.vdevs and
        [d for v in p.vdevs for d in v.devices]) for p in pools)  # fmt: skip
    return Candidate(
        name=name,
        pools=tuple(pools),
        partitioned=partitioned,
        usable_bytes=usable,
        size_bytes=size,
        failures_tolerated=min(p.failures_tolerated for p in pools),
        speed=speed,
        speed_score=speed.score(disk),
        disks_used=used,
    )


def pareto_front(cands: list[Candidate]) -> set[int]:
    """Indices of candidates no other beats on all of (usable, failures, speed score)."""
    keys = [(c.usable_bytes, c.failures_tolerated, c.speed_score) for c in cands]
    order = sorted(range(len(keys)), key=lambda i: keys[i], reverse=True)
    front: list[int] = []
    for i in order:
        ki = keys[i]
        dominated = False
        for j in front:
            kj = keys[j]
            if kj[0] >= ki[0] and kj[1] >= ki[1] and kj[2] >= ki[2] and kj != ki:
                dominated = True
                break
        if not dominated:
            front.append(i)
    return set(front)


def _objective_key(
    objective: Objective, best_usable: int, best_speed: float
) -> Callable[[Candidate], tuple[float, ...]]:
    def key(c: Candidate) -> tuple[float, ...]:
        if objective == "space":
            return (-c.usable_bytes, -c.failures_tolerated, -c.speed_score)
        if objective == "speed":
            return (-c.speed_score, -c.usable_bytes, -c.failures_tolerated)
        balanced = math.sqrt(
            (c.usable_bytes / best_usable if best_usable else 0.0)
            * (c.speed_score / best_speed if best_speed else 0.0)
        )
        return (-balanced, -c.failures_tolerated, -c.usable_bytes)

    return key


# The search's own bound: its work grows with the disks times their different sizes (each
# size is another tier cut from every larger disk, and every vdev of different disks is
# planned apart). 10,000 disks of one size or 200 of 200 sizes take about 2 s and 0.7 s on
# the 2-core development machine; 1,000 sizes took 7 s before this bound.
MAX_SEARCH_WORK = 100_000


def check_search_work(disks: list[int]) -> None:
    """Refuse a search whose disks × different sizes exceeds `MAX_SEARCH_WORK`."""
    sizes = len(set(disks))
    if len(disks) * sizes > MAX_SEARCH_WORK:
        raise UsageError(
            f"Searching {len(disks):,} disks of {sizes:,} different sizes is more than one "
            f"search does ({len(disks) * sizes:,} disk-sizes; at most {MAX_SEARCH_WORK:,}): "
            "each size cuts every larger disk into another tier.",
            "Group the disks into a few sizes (e.g. --disks 500x1TB,500x2TB, each disk "
            "counted at the size of its group's smallest), or evaluate one layout with "
            "--layout.",
        )


def search(
    disks: list[int],
    *,
    ashift: int,
    rules: RuleSet,
    disk_speed: DiskSpeed,
    min_failures: int = 0,
    objective: Objective = "balanced",
    whole_disk: bool = True,
    classes: tuple[ClassVdev, ...] = (),
) -> list[Candidate]:
    """All candidates meeting `min_failures`, the Pareto front first, each part ordered by
    the objective. Identical layouts (same spec) are listed once. `classes` (plan --slog,
    --special) are added to the main pool of every candidate: a special vdev counts in its
    SIZE and in the failures it survives."""
    check_search_work(disks)
    ordered = sorted(disks, reverse=True)
    raw: list[Candidate] = []
    seen: set[str] = set()
    plans: list[tuple[str, list[Layout], bool, Layout]] = [
        (name, [lay], False, lay) for name, lay in _whole_disk_layouts(ordered, rules)
    ]
    plans += [
        (name, pools, True, tier1) for name, pools, tier1 in _tiered_layouts(ordered, whole_disk)
    ]
    for name, pools, partitioned, speed_layout in plans:
        if classes:
            pools = [Layout(pools[0].vdevs, classes), *pools[1:]]
        key = "|".join(p.spec() for p in pools) + ("/p" if partitioned else "")
        if key in seen or min(p.failures_tolerated for p in pools) < min_failures:
            continue
        seen.add(key)
        cand = _score(name, pools, partitioned, speed_layout, ashift, rules, disk_speed, whole_disk)
        if cand is not None:
            raw.append(cand)
    if not raw:
        return []
    front = pareto_front(raw)
    best_usable = max(c.usable_bytes for c in raw)
    best_speed = max(c.speed_score for c in raw)
    order_key = _objective_key(objective, best_usable, best_speed)
    marked = [replace(c, pareto=i in front) for i, c in enumerate(raw)]
    on = sorted((c for c in marked if c.pareto), key=order_key)
    off = sorted((c for c in marked if not c.pareto), key=order_key)
    return on + off
