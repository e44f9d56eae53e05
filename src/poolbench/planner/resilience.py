"""Resilience: failures tolerated, resilver time, and the risk during a resilver (pure).

Failures tolerated are exact (a mirror of W survives W − 1 member failures, raidzP and dRAID P
survive P, a plain disk none; the pool survives what its weakest top-level vdev survives).

Everything else here is a MODEL with stated inputs, labelled so wherever it is shown:

- resilver time: the failed member's share of allocated data (fill × member size) rebuilt at
  `resilver_bps` (default: half the disk's streaming write speed, since a resilver scan is
  not purely sequential). A dRAID rebuilds to its distributed spare space with every
  surviving child taking part, so its time divides by (C − S)/(D + P) (at least 1); without
  a distributed spare it resilvers like raidz.
- losing the pool during that window: each surviving member of the degraded vdev fails
  independently with p = 1 − exp(−λ·T), λ = −ln(1 − AFR)/8766 h; the vdev (and the pool) is
  lost if more further members fail than it still tolerates: a binomial tail.
- an unrecoverable read error (URE) while no redundancy is left (a 2-way mirror or raidz1
  after one failure) damages the blocks it hits — ZFS reports the affected files and keeps
  the pool — with probability 1 − exp(−bits read × URE rate).

Class vdevs: a special or dedup vdev holds pool metadata (the dedup table), so losing it
loses the pool: it is a top-level vdev of the risk like a data vdev (the model gives it the
same disk figures; an SSD special vdev resilvers faster than that). A log, spare or cache
device loses no data by failing alone; `class_notes` says what each one does and risks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from poolbench.planner.layout import Layout, VdevSpec
from poolbench.planner.performance import DiskSpeed

HOURS_PER_YEAR = 8766.0


@dataclass(frozen=True)
class RiskInputs:
    afr: float = 0.015  # annualised failure rate per disk (Backblaze fleet ~1.4-1.7 %)
    ure_per_bit: float = 1e-15  # enterprise/NAS spec sheets; consumer disks state 1e-14
    fill: float = 0.8  # fraction of the pool allocated when the disk fails
    resilver_fraction: float = 0.5  # resilver rate as a fraction of streaming write speed


@dataclass(frozen=True)
class VdevRisk:
    spec: VdevSpec
    failures_tolerated: int
    resilver_hours: float
    p_loss_during_resilver: float
    p_data_error_during_resilver: float
    cls: str = ""  # "special" / "dedup" for a class vdev, "" for a data vdev

    @property
    def label(self) -> str:
        return f"{self.cls} {self.spec.type_name}" if self.cls else self.spec.type_name

    def as_dict(self) -> dict[str, object]:
        return {
            "type": self.spec.type_name,
            "class": self.cls or "data",
            "failures_tolerated": self.failures_tolerated,
            "model": True,
            "resilver_hours": round(self.resilver_hours, 2),
            "p_pool_loss_during_resilver": self.p_loss_during_resilver,
            "p_damaged_files_during_resilver": self.p_data_error_during_resilver,
        }


@dataclass(frozen=True)
class PoolRisk:
    failures_tolerated: int
    vdevs: tuple[VdevRisk, ...]
    inputs: RiskInputs

    @property
    def worst(self) -> VdevRisk:
        return max(self.vdevs, key=lambda v: (v.p_loss_during_resilver, v.resilver_hours))

    def as_dict(self) -> dict[str, object]:
        return {
            "failures_tolerated": self.failures_tolerated,
            "model": True,
            "inputs": {
                "afr": self.inputs.afr,
                "ure_per_bit": self.inputs.ure_per_bit,
                "fill": self.inputs.fill,
                "resilver_fraction_of_write_speed": self.inputs.resilver_fraction,
            },
            "vdevs": [v.as_dict() for v in self.vdevs],
        }


def binomial_tail(n: int, p: float, k: int) -> float:
    """P(X > k) for X ~ Binomial(n, p).

    Each term is taken through its logarithm (lgamma, log1p): C(n, i) of a 10,000-way
    mirror is a number of thousands of digits that no float holds, though the probability
    is an ordinary one. The smaller side is summed (the tail, or 1 − the head) so a tiny
    tail keeps its digits."""
    if k >= n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    log_n = math.lgamma(n + 1)

    def term(i: int) -> float:
        log_c = log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1)
        return math.exp(log_c + i * log_p + (n - i) * log_q)

    if k + 1 > n * p:  # the tail is the smaller side: terms fall away from the mean
        return min(1.0, sum(term(i) for i in range(k + 1, n + 1)))
    return max(0.0, 1.0 - sum(term(i) for i in range(k + 1)))


def resilver_hours(spec: VdevSpec, disk: DiskSpeed, inputs: RiskInputs) -> float:
    member = min(spec.devices)
    rate = disk.write_bps * inputs.resilver_fraction
    hours = inputs.fill * member / rate / 3600
    if spec.kind == "draid" and spec.draid_spares > 0:
        speedup = (spec.width - spec.draid_spares) / (spec.draid_data + spec.parity)
        hours /= max(1.0, speedup)
    return hours


def vdev_risk(spec: VdevSpec, disk: DiskSpeed, inputs: RiskInputs) -> VdevRisk:
    tolerated = spec.failures_tolerated
    hours = resilver_hours(spec, disk, inputs)
    if tolerated == 0:
        # Nothing to resilver from: the first failure already loses the vdev.
        return VdevRisk(spec, 0, 0.0, 1.0, 0.0)
    lam = -math.log(1 - inputs.afr) / HOURS_PER_YEAR
    p = 1 - math.exp(-lam * hours)
    survivors = spec.width - 1
    p_loss = binomial_tail(survivors, p, tolerated - 1)
    p_ure = 0.0
    if tolerated == 1:
        # Every surviving block must be read once without its redundancy.
        if spec.kind == "mirror":
            bytes_read = inputs.fill * min(spec.devices)
        else:
            bytes_read = inputs.fill * min(spec.devices) * survivors
        p_ure = 1 - math.exp(-bytes_read * 8 * inputs.ure_per_bit)
    return VdevRisk(spec, tolerated, hours, p_loss, p_ure)


def pool_risk(layout: Layout, disk: DiskSpeed, inputs: RiskInputs | None = None) -> PoolRisk:
    inputs = inputs or RiskInputs()
    risks = [vdev_risk(v, disk, inputs) for v in layout.vdevs]
    risks += [
        replace(vdev_risk(c.vdev, disk, inputs), cls=c.cls)
        for c in layout.classes
        if c.cls in ("special", "dedup")
    ]
    return PoolRisk(layout.failures_tolerated, tuple(risks), inputs)


def class_notes(layout: Layout) -> list[str]:
    """What each class of the layout does to the pool's resilience, in one line each."""
    classes = {c.cls for c in layout.classes}
    raidz = any(v.kind in ("raidz", "draid") for v in layout.vdevs)
    notes = []
    for cls in ("special", "dedup"):
        if cls in classes:
            weakest = min(v.failures_tolerated for v in layout.of_class(cls))
            notes.append(
                f"The {cls} vdev holds the pool's "
                + ("metadata (and small blocks with special_small_blocks)" if cls == "special"
                   else "dedup table")  # fmt: skip
                + f": if it fails, the pool is lost. It survives {weakest} member "
                "failure(s); give it the data vdevs' redundancy."
                + (" It cannot be removed from this pool: `zpool remove` of a top-level "
                   "vdev is refused while any data vdev is raidz or dRAID." if raidz else "")
            )  # fmt: skip
    if "log" in classes:
        single = any(v.kind == "disk" for v in layout.of_class("log"))
        notes.append(
            "The log vdev holds sync writes until their transaction group is written (a few "
            "seconds): losing it alone loses nothing, losing it in the same crash or power cut "
            "loses those writes" + (" (this one is a single device: mirror it if that matters)"
                                    if single else "") + ". It can be removed (`zpool remove`)."
        )  # fmt: skip
    if "spare" in classes:
        notes.append(
            "A hot spare adds no redundancy until it replaces a failed member (on OpenZFS the "
            "event daemon, zed, starts that): the resilver onto it still reads the survivors. "
            "It counts in no space figure."
        )
    if "cache" in classes:
        notes.append(
            "A cache (L2ARC) device holds copies of data: losing it loses nothing. It counts "
            "in no space figure; its headers take ARC memory."
        )
    return notes
