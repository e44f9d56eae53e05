"""How faithfully a replay reproduced its trace: recorded vs achieved, each figure with a
stated tolerance, and a warning naming what differs and why (pure).

Both sides are `tracestats.summarize` of a list of I/Os (blkparse's queue events; fio's
per-I/O log of the replay), so they are counted the same way. Count and bytes must match
exactly: a replay that issued other I/Os is not a replay of this trace. Histograms are
compared bucket by bucket as shares of their total (percentage points); the rate as a ratio.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TypedDict

from poolbench.workloads.tracestats import TraceSummary, TraceSummaryJson, shares

# Percentage points a histogram's bucket may move (share of the total), and the rate's
# relative tolerance. Sizes and the mix follow from the I/Os fio issued (exact when the
# count is); locality from their order (psync at depth 1 keeps it); the inter-arrival
# buckets from fio's clock, which stamps completions in whole milliseconds.
MIX_PTS = 1.0
SIZES_PTS = 1.0
LOCALITY_PTS = 5.0
GAPS_PTS = 15.0
RATE_RATIO = 0.15

DIFFERENT_IOS = "fio replayed other I/Os than the trace holds (an I/O error, or I/Os lost)"
FLAT_OUT = "ran flat out (as-fast-as-possible mode): the recording's timing is not kept"
FIO_TIMING = (
    "fio's timed replay did not keep the recorded spacing (its replay timing is known to "
    "drift: fio issue #1537)"
)


@dataclass(frozen=True)
class Check:
    """One figure (or one histogram bucket) recorded vs achieved; `group` names the figure
    a bucket belongs to (a warning names the figure once, with its buckets)."""

    group: str
    what: str
    recorded: str
    achieved: str
    tolerance: str
    ok: bool


class CheckJson(TypedDict):
    group: str
    what: str
    recorded: str
    achieved: str
    tolerance: str
    ok: bool


class FidelityJson(TypedDict):
    """A replay's fidelity record as stored (the guards' `replay` section)."""

    mode: str
    faithful: bool
    checks: list[CheckJson]
    note: str
    busy_share: float | None
    target_late_share: float | None
    recorded: TraceSummaryJson
    achieved: TraceSummaryJson


@dataclass
class Fidelity:
    mode: str  # timed / fast
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    note: str = ""
    busy: float | None = None  # share of the replay with an I/O in flight
    late: float | None = None  # share of the replay's delay its slow I/Os account for

    @property
    def faithful(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self, recorded: TraceSummary, achieved: TraceSummary) -> FidelityJson:
        doc = {
            "mode": self.mode,
            "faithful": self.faithful,
            "checks": [asdict(c) for c in self.checks],
            "note": self.note,
            "busy_share": None if self.busy is None else round(self.busy, 4),
            "target_late_share": None if self.late is None else round(self.late, 4),
            "recorded": recorded.to_json(),
            "achieved": achieved.to_json(),
        }
        plain: FidelityJson = json.loads(json.dumps(doc))  # JSON values only, as stored
        return plain


def from_json(doc: Mapping[str, object]) -> Fidelity:
    """A stored fidelity record (`to_json`) back as a `Fidelity`, for the reports."""
    checks = doc.get("checks")
    rows = [c for c in checks if isinstance(c, Mapping)] if isinstance(checks, list) else []
    return Fidelity(
        str(doc.get("mode", "?")),
        [
            Check(
                str(c.get("group", "")),
                str(c.get("what", "")),
                str(c.get("recorded", "")),
                str(c.get("achieved", "")),
                str(c.get("tolerance", "")),
                c.get("ok") is True,
            )
            for c in rows
        ],  # fmt: skip
        note=str(doc.get("note", "")),
    )


def _hist_checks(group: str, rec: dict[str, int], got: dict[str, int], pts: float) -> list[Check]:
    """One check per bucket: its share of the total, recorded vs achieved."""
    a, b = shares(rec), shares(got)
    out = []
    for k in dict.fromkeys([*rec, *got]):
        ra, ga = a.get(k, 0.0), b.get(k, 0.0)
        if rec.get(k, 0) or got.get(k, 0):
            ok = abs(ra - ga) <= pts
            out.append(
                Check(group, f"{group} {k}", f"{ra:.1f}%", f"{ga:.1f}%", f"±{pts:g} pts", ok)
            )
    return out


def _checks(rec: TraceSummary, got: TraceSummary) -> list[Check]:
    rate_ok = rec.iops <= 0 or abs(got.iops / rec.iops - 1) <= RATE_RATIO
    mix_ok = abs(rec.read_share - got.read_share) <= MIX_PTS
    return [
        Check("I/O count", "I/O count", str(rec.ios), str(got.ios), "exact", rec.ios == got.ios),
        Check("bytes", "bytes", str(rec.bytes), str(got.bytes), "exact", rec.bytes == got.bytes),
        Check("read share", "read share", f"{rec.read_share:.1f}%", f"{got.read_share:.1f}%",
              f"±{MIX_PTS:g} pts", mix_ok),
        *_hist_checks("size", rec.sizes, got.sizes, SIZES_PTS),
        *_hist_checks("locality", rec.locality, got.locality, LOCALITY_PTS),
        *_hist_checks("gap", rec.gaps, got.gaps, GAPS_PTS),
        Check("rate", "rate (IOPS)", f"{rec.iops:.1f}", f"{got.iops:.1f}",
              f"±{RATE_RATIO:.0%}", rate_ok),
    ]  # fmt: skip


# A replay slower than its trace is the target's doing when its I/Os outlasting the recorded
# gaps account for at least this share of the delay; otherwise fio issued late (its timing).
TARGET_SHARE = 0.5


def _why(check: Check, mode: str, rec: TraceSummary, got: TraceSummary, late: float | None) -> str:
    if check.group not in ("gap", "rate"):
        return DIFFERENT_IOS
    if mode == "fast":
        return FLAT_OUT
    if rec.iops > 0 and got.iops < rec.iops * (1 - RATE_RATIO):
        rates = f"{got.iops:.1f} IOPS achieved, {rec.iops:.1f} recorded"
        if late is None or late >= TARGET_SHARE:
            held = (f"; I/Os slower than the recorded gaps make {late:.0%} of the delay"
                    if late is not None else "")  # fmt: skip
            return f"the target could not keep the trace's rate ({rates}{held})"
        return (
            f"the replay ran slower than recorded ({rates}) but I/Os slower than the recorded "
            f"gaps make only {late:.0%} of the delay: {FIO_TIMING}"
        )
    return FIO_TIMING


GROUP_TEXT = {"size": "I/O sizes", "locality": "locality", "gap": "inter-arrival times"}


def compare(
    rec: TraceSummary, got: TraceSummary, mode: str,
    busy: float | None = None, late: float | None = None,
) -> Fidelity:  # fmt: skip
    """Recorded vs achieved; one warning per figure beyond its tolerance, with why. `busy`:
    the share of the replay the target had an I/O in flight; `late`: the share of the
    replay's delay its own slow I/Os account for (both from fio's per-I/O latencies)."""
    result = Fidelity(mode, _checks(rec, got), busy=busy, late=late)
    bad: dict[str, list[Check]] = {}
    for c in result.checks:
        if not c.ok:
            bad.setdefault(c.group, []).append(c)
    for group, checks in bad.items():
        diffs = ", ".join(
            (f"{c.what.removeprefix(group).strip()} " if group in GROUP_TEXT else "")
            + f"{c.recorded} recorded, {c.achieved} achieved"
            for c in checks
        )
        result.warnings.append(
            f"replay fidelity: {GROUP_TEXT.get(group, 'the ' + checks[0].what)} outside "
            f"tolerance ({checks[0].tolerance}): {diffs}; {_why(checks[0], mode, rec, got, late)}"
        )
    if mode == "timed" and result.faithful:
        result.note = (
            "throttled by the recording's timing: the IOPS figure is the trace's own rate on "
            "every layout that keeps up; compare the latency"
        )
    elif mode == "fast":
        result.note = "ran flat out: the IOPS figure is what the layout sustains"
    return result


def lines(f: Fidelity) -> list[str]:
    """The fidelity as a table under 80 columns, one row per figure or bucket."""
    out = [f"{'replay fidelity (' + f.mode + ')':<26} {'recorded':>12} {'achieved':>12}  "
           f"{'tolerance':<11} ok"]  # fmt: skip
    for c in f.checks:
        out.append(
            f"{c.what[:26]:<26} {c.recorded:>12} {c.achieved:>12}  {c.tolerance:<11} "
            + ("yes" if c.ok else "NO")
        )
    return out
