"""One series over time, as `poolbench history` shows it (terminal, --json and HTML alike): a
row per run (date, mean and its 95% interval, replicates, fill, what changed since the
previous point) and the change-point method's answer (stats/changepoint, docs/statistics.md
§8): each step as a ratio with its interval and the fingerprint fields that changed there, a
drift told apart from a step, outlier runs, or why no step is reported. Pure: the store's
points in, the view out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypedDict

from poolbench.records.fingerprint_changes import changes
from poolbench.stats import summary
from poolbench.stats.changepoint import History, Point, detect
from poolbench.store.history import RunPoint, SeriesKey

# Fill is the drift's covariate when it moved this much over the series (5 points of 100);
# below that the runs' order is (a covariate that barely moves cannot carry a trend).
FILL_SPAN = 0.05


def date_text(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


class PointJson(TypedDict):
    """One run of a series in `history --json`."""

    run: int
    date: str
    n: int
    mean: float
    ci_low: float | None  # None with one replicate
    ci_high: float | None
    fill: float | None
    fragmentation: float | None
    changed: list[str]
    status: str


class StepJson(TypedDict):
    """A step of a series in `history --json`: after/before, its interval, what changed."""

    run: int
    date: str
    ratio: float
    low: float
    high: float
    changed: list[str]


class SeriesJson(TypedDict):
    """One series in `history NAME --json`."""

    name: str
    kind: str
    config: str | None
    workload: str
    host: str
    unit: str
    covariate: str
    points: list[PointJson]
    steps: list[StepJson]
    analysis: dict[str, object] | None  # stats/changepoint's History, as it writes it


class SeriesEntryJson(TypedDict):
    """One series the store holds (`history --json` without a name)."""

    name: str
    kind: str
    config: str | None
    workload: str
    host: str
    runs: int
    first: str
    last: str


@dataclass(frozen=True)
class Row:
    run_id: int
    date: str
    n: int
    mean: float
    low: float  # nan with one replicate
    high: float
    fill: float | None
    fragmentation: float | None
    changed: tuple[str, ...]  # since the previous point
    status: str


@dataclass(frozen=True)
class StepView:
    """A step before row `index`: after/before with its interval, and what changed there."""

    index: int
    date: str
    ratio: float
    low: float
    high: float
    changed: tuple[str, ...]

    def text(self, workload: str) -> str:
        what = f"after {', '.join(self.changed)}" if self.changed else "nothing recorded changed"
        return (f"{workload} {_pct(self.ratio)} [{_pct(self.low)}, {_pct(self.high)}] from "
                f"{self.date} ({what})")  # fmt: skip


@dataclass(frozen=True)
class SeriesView:
    key: SeriesKey
    unit: str
    rows: tuple[Row, ...]
    steps: tuple[StepView, ...]
    covariate: str  # "fill" or "run order": what a drift is measured along
    history: History | None  # None: fewer than two points

    def lines(self) -> list[str]:
        out = [f"{self.key.text()}  ({self.unit}, {len(self.rows)} runs)",
               f"  {'date (UTC)':<16}  {'mean':>9}  {'95% CI':>21}  {'n':>2}  {'fill':>6}  "
               "changed since the previous point"]  # fmt: skip
        for r in self.rows:
            ci = "" if math.isnan(r.low) else f"[{r.low:.1f}, {r.high:.1f}]"
            fill = "" if r.fill is None else f"{r.fill * 100:.1f}%"
            out.append(f"  {r.date:<16}  {r.mean:>9.1f}  {ci:>21}  {r.n:>2}  {fill:>6}  "
                       + ("; ".join(r.changed) or "-"))  # fmt: skip
        out += ["  " + line for line in self.verdict()]
        return out

    def verdict(self) -> list[str]:
        h = self.history
        if h is None:
            return ["one run: a history needs two at least"]
        out = [f"step: {s.text(self.key.workload)}" for s in self.steps]
        if h.drift is not None:
            out.append(f"{h.drift.text()} (along {self.covariate}), told apart from a step")
        out += [f"outlier run: {self.rows[o.index].date} ({_pct(o.ratio)} from its level)"
                for o in h.outliers]  # fmt: skip
        if not self.steps:
            out.append(f"no step: {h.reason}")
        out.append(f"run-to-run variation beyond each run's own interval: "
                   f"{h.between_run_cv * 100:.1f}%")  # fmt: skip
        return out

    def as_json(self) -> SeriesJson:
        k = self.key
        return {
            "name": k.name, "kind": k.kind, "config": k.config or None, "workload": k.workload,
            "host": k.host, "unit": self.unit, "covariate": self.covariate,
            "points": [_row_json(r) for r in self.rows],
            "steps": [{"run": self.rows[s.index].run_id, "date": s.date, "ratio": s.ratio,
                       "low": s.low, "high": s.high, "changed": list(s.changed)}
                      for s in self.steps],
            "analysis": None if self.history is None else self.history.as_dict(),
        }  # fmt: skip


def _pct(r: float) -> str:
    return f"{(r - 1) * 100:+.1f}%"


def _nan_none(x: float) -> float | None:
    return None if math.isnan(x) else x


def _row_json(r: Row) -> PointJson:
    return {"run": r.run_id, "date": r.date, "n": r.n, "mean": r.mean,
            "ci_low": _nan_none(r.low), "ci_high": _nan_none(r.high), "fill": r.fill,
            "fragmentation": r.fragmentation, "changed": list(r.changed),
            "status": r.status}  # fmt: skip


def _row(p: RunPoint, prev: RunPoint | None) -> Row:
    s = summary.summarize(p.values)
    fp = p.fingerprint
    changed = changes(prev.fingerprint if prev else None, fp)
    return Row(p.run_id, date_text(p.started_at), s.n, s.mean, s.ci_low, s.ci_high,
               fp.fill if fp else None, fp.pool.fragmentation if fp else None,
               tuple(c.text() for c in changed), p.status)  # fmt: skip


def _covariate(points: Sequence[RunPoint]) -> list[float] | None:
    fills = [p.fingerprint.fill if p.fingerprint else None for p in points]
    known = [f for f in fills if f is not None]
    if len(known) < len(fills) or not known or max(known) - min(known) < FILL_SPAN:
        return None
    return known


def _step_changes(rows: Sequence[Row], index: int, outliers: set[int]) -> tuple[str, ...]:
    """What changed from the last point of the old level (outlier runs skipped) to the first
    of the new: every change recorded on the way, once."""
    start = index - 1
    while start > 0 and start in outliers:
        start -= 1
    said: dict[str, None] = {}
    for r in rows[start + 1 : index + 1]:
        said.update(dict.fromkeys(r.changed))
    return tuple(said)


def view(key: SeriesKey, points: Sequence[RunPoint]) -> SeriesView:
    """The series' rows and the change-point method's answer on them (module doc)."""
    rows = tuple(_row(p, points[i - 1] if i else None) for i, p in enumerate(points))
    fills = _covariate(points)
    covariate = "fill" if fills else "run order"
    if len(points) < 2:
        return SeriesView(key, points[0].unit if points else "", rows, (), covariate, None)
    pts = [Point.from_values(p.values, label=r.date, covariate=fills[i] if fills else None)
           for i, (p, r) in enumerate(zip(points, rows, strict=True))]  # fmt: skip
    h = detect(pts)
    outliers = {o.index for o in h.outliers}
    steps = tuple(StepView(s.index, s.label, s.ratio, s.low, s.high,
                           _step_changes(rows, s.index, outliers)) for s in h.steps)  # fmt: skip
    return SeriesView(key, points[0].unit, rows, steps, covariate, h)


def select(
    series: dict[SeriesKey, list[RunPoint]], name: str, workload: str | None = None,
    config: str | None = None, host: str | None = None,
) -> list[tuple[SeriesKey, list[RunPoint]]]:  # fmt: skip
    """The series named `name` (a bench target or --record-as name, or a study), narrowed by
    workload, configuration and host; oldest series first. UsageError when none matches."""
    from poolbench.errors import UsageError

    want = {"name": name, "workload": workload, "config": config, "host": host}
    found = [(k, p) for k, p in sorted(series.items())
             if all(v is None or getattr(k, f) == v for f, v in want.items())]  # fmt: skip
    if not found:
        names = sorted({k.name for k in series})
        asked = " ".join(f"{f}={v!r}" for f, v in want.items() if v is not None)
        raise UsageError(
            f"No series in the store matches {asked}.",
            "`poolbench history` without a name lists the series it holds"
            + (f" ({', '.join(names[:8])}{', …' if len(names) > 8 else ''})." if names
               else "; it holds none yet: run `poolbench bench PATH` first."),
        )  # fmt: skip
    return found


def listing(series: dict[SeriesKey, list[RunPoint]]) -> list[SeriesEntryJson]:
    """One entry per series: what selects it, how many runs, the first and last date."""
    return [{"name": k.name, "kind": k.kind, "config": k.config or None,
             "workload": k.workload, "host": k.host, "runs": len(p),
             "first": date_text(p[0].started_at), "last": date_text(p[-1].started_at)}
            for k, p in sorted(series.items())]  # fmt: skip


def regression(v: SeriesView, fraction: float) -> StepView | None:
    """The series' newest level fell by `fraction` or more: its last step (the one whose new
    level holds the newest runs) is a ratio of 1 − fraction or less. None otherwise: no step,
    a smaller one, or a last step up (a recovery)."""
    if not v.steps or v.steps[-1].ratio > 1 - fraction:
        return None
    return v.steps[-1]
