"""Whether the path to the disks limits them together. Pure.

A screen measures every disk at once (engine/screen/run.py). One disk is then measured alone
on the same test: if it is clearly faster alone than with its peers, something they share
(an HBA, a SAS expander, a USB bridge, a controller's link) sets their pace together, and a
wide layout of them gets that shared rate, not the sum of what each disk can do alone.

The rule mirrors the slow-disk rule the other way round: limited when the disk's figure
alone is at least 1 / (1 − SLOW_FRACTION) (1.33) × the figure together and, with replicates,
the two 95% intervals do not overlap, so run-to-run noise does not call a path shared.

The figure together is each run's median disk, not the checked disk's own share: a shared
link or throttle splits its rate unevenly from run to run (one disk 12.8 MiB/s in one run,
16.7 in the next, the path's total steady at 40), and with two runs that spread alone
widens the interval past the disk's figure alone. The median of the disks at once keeps
the equal share a shared path gives, and, like the disk chosen to run alone, is never a
slow disk's own limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.engine.screen.records import Figure
from poolbench.guards.members import SLOW_FRACTION

ALONE_GAIN = 1 / (1 - SLOW_FRACTION)
# The test the alone check prefers: a shared path limits bytes per second first.
PREFERRED = ("seq-read", "seq-write", "rand-read-4k-qd32", "rand-write-4k-qd32")
PATH_RULE = (
    f"the disk alone at least {ALONE_GAIN:.2f} x the median disk's figure with every disk "
    "at once, run by run, the 95% intervals apart"
)


def check_test(tests: Sequence[str]) -> str | None:
    """The test the alone check runs, among the timed tests the screen runs."""
    for name in (*PREFERRED, *tests):
        if name in tests:
            return name
    return None


def check_disk(figures: Sequence[float]) -> int:
    """Which disk runs alone, by each disk's figure together: the median disk (the upper one
    of two), so a slow disk, its own limit, is not the one asked about the path."""
    order = sorted(range(len(figures)), key=lambda i: figures[i])
    return order[len(order) // 2]


def median_disk(figures: Sequence[float]) -> float:
    """One run's figure together: the median disk's (the upper one of two, as check_disk)."""
    return sorted(figures)[len(figures) // 2]


@dataclass(frozen=True)
class PathCheck:
    device: str
    test: str
    unit: str
    alone: tuple[float, ...]  # the disk's runs alone
    together: tuple[float, ...]  # each run with every disk at once: its median disk
    total: float  # the sum of every disk's mean together: what the path carried
    disks: int

    def _fig(self, values: tuple[float, ...]) -> Figure:
        return Figure(self.test, self.unit, values, "")

    @property
    def limited(self) -> bool:
        a, t = self._fig(self.alone).summary, self._fig(self.together).summary
        if a.mean < ALONE_GAIN * t.mean:
            return False
        return a.n < 2 or t.n < 2 or a.ci_low > t.ci_high

    def text(self) -> str:
        a, t = self._fig(self.alone).mean, self._fig(self.together).mean
        u = self.unit
        if not self.limited:
            return (
                f"no shared limit on the path: {self.device} gave {a:.1f} {u} on {self.test} "
                f"alone and {t:.1f} {u} on the median disk with all {self.disks} at once"
            )
        return (
            f"the path to these disks (HBA, expander, USB bridge or controller link) limits "
            f"them together: {self.device} gave {a:.1f} {u} on {self.test} alone but {t:.1f} "
            f"{u} on the median disk with all {self.disks} at once ({t / a:.0%}); all "
            f"{self.disks} together carried {self.total:.1f} {u}. A layout striped over "
            f"these disks gets about {self.total:.1f} {u} in all, not {self.disks} x "
            f"{a:.1f}: the wider the layout, the less each disk adds. The figures above are "
            "the disks at once, as a pool uses them"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "device": self.device, "test": self.test, "unit": self.unit,
            "alone": list(self.alone), "together": list(self.together), "total": self.total,
            "disks": self.disks, "limited": self.limited, "text": self.text(),
            "rule": PATH_RULE,
        }  # fmt: skip
