"""One disk's screen as poolbench keeps it: what the kernel says of the disk, each test's
replicate figures and how they were measured, the sustained write's rate over time and its
knee. JSON in and out: the store keeps it as a JSON column (store/screens.py) and
`disks --screen --json` prints it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from poolbench.engine.screen.knee import Interval, Knee
from poolbench.stats.summary import Summary, summarize
from poolbench.store.screens import DiskScreenJson, FigureJson


@dataclass(frozen=True)
class Figure:
    test: str
    unit: str
    values: tuple[float, ...]  # one per run, in the order measured
    how: str

    @property
    def summary(self) -> Summary:
        return summarize(self.values)

    @property
    def mean(self) -> float:
        return self.summary.mean if self.values else math.nan

    def interval_text(self) -> str:
        s = self.summary
        if s.n < 2:
            return f"{s.mean:.1f} {self.unit} (one run: no interval)"
        return f"{s.mean:.1f} {self.unit} (95% CI {s.ci_low:.1f}-{s.ci_high:.1f}, n={s.n})"


@dataclass
class DiskScreen:
    device: str  # /dev/NAME as given (resolved)
    name: str  # kernel name
    serial: str | None
    model: str | None
    size_bytes: int
    logical_sector: int | None
    physical_sector: int | None
    rotational: bool
    zoned: str | None
    write_cache: str | None
    figures: dict[str, Figure] = field(default_factory=dict)
    series: list[Interval] = field(default_factory=list)  # the sustained write
    knee: Knee | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> DiskScreenJson:
        return {
            "device": self.device, "name": self.name, "serial": self.serial,
            "model": self.model, "size_bytes": self.size_bytes,
            "logical_sector": self.logical_sector, "physical_sector": self.physical_sector,
            "rotational": self.rotational, "zoned": self.zoned, "write_cache": self.write_cache,
            "figures": {k: _figure_json(f) for k, f in self.figures.items()},
            "series": [[x.start_s, x.seconds, x.start_bytes, x.bytes] for x in self.series],
            "knee": None if self.knee is None else {
                "at_bytes": self.knee.at_bytes, "at_s": self.knee.at_s,
                "before_bps": self.knee.before_bps, "after_bps": self.knee.after_bps,
                "fall": self.knee.fall,
            },
            "warnings": self.warnings,
        }  # fmt: skip

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, d: DiskScreenJson) -> DiskScreen:
        knee = d.get("knee")
        return cls(
            d["device"], d["name"], d.get("serial"), d.get("model"), int(d["size_bytes"]),
            d.get("logical_sector"), d.get("physical_sector"), bool(d.get("rotational")),
            d.get("zoned"), d.get("write_cache"),
            figures={
                k: Figure(k, f["unit"], tuple(float(v) for v in f["values"]), f["how"])
                for k, f in (d.get("figures") or {}).items()
            },
            series=[Interval(float(a), float(b), int(c), int(e)) for a, b, c, e in
                    d.get("series") or []],
            knee=None if not knee else Knee(knee["at_bytes"], knee["at_s"],
                                             knee["before_bps"], knee["after_bps"]),
            warnings=list(d.get("warnings") or []),
        )  # fmt: skip

    @classmethod
    def loads(cls, text: str) -> DiskScreen:
        return cls.from_json(json.loads(text))


def _figure_json(f: Figure) -> FigureJson:
    out: FigureJson = {"unit": f.unit, "values": list(f.values), "how": f.how}
    if f.values:
        s = f.summary
        out["mean"] = s.mean
        out["ci95"] = [s.ci_low, s.ci_high] if s.n >= 2 else None
        out["n"] = s.n
    return out
