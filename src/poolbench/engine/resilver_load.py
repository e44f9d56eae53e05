"""A resilver under load: a foreground workload that runs while the pool resilvers (the
resilver study's `load` factor), and the same workload alone on the healthy pool afterwards.

The foreground runs as consecutive one-second fio slices in a thread of its own, from just
before `zpool replace` until the resilver is finished; a slice that ran mostly after the
resilver did is kept out of the "during" figure (it ran on a healthy pool). Once the pool is
healthy, the same number of slices run alone. Each phase starts after the pool's cache was
emptied (export/import), so neither reads what the other left in the ARC. A stated rate
(`seq-read@20M`) caps the foreground with fio's `rate` (bytes/s, MiB here); without one it
runs flat out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from poolbench.records.jsontypes import JsonObject
from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import Workload, parse_load

__all__ = ["Foreground", "Slice", "finish", "parse_load"]

SLICE_S = 1
MiB = 1 << 20


@dataclass(frozen=True)
class Slice:
    start: float  # monotonic seconds
    end: float
    io_bytes: int
    ios: int
    seconds: float  # fio's runtime
    bins: dict[int, int] = field(default_factory=dict)  # completion-latency histogram

    def as_dict(self) -> JsonObject:
        return {"io_bytes": self.io_bytes, "ios": self.ios, "seconds": round(self.seconds, 3)}


class Foreground:
    """The foreground workload as slices: `start` runs them in a thread until `stop`; `run`
    runs a given number of them here."""

    def __init__(self, runner: Runner, w: Workload, params: fiojob.JobParams,
                 rate: int | None) -> None:  # fmt: skip
        self.runner, self.w = runner, w
        self.params = replace(params, runtime_s=SLICE_S, min_window_s=0.0)
        self.rate = rate
        self.slices: list[Slice] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _one(self, i: int, tag: str) -> Slice:
        seed = ((self.params.randseed or 0) + i) & 0x7FFFFFFF
        job = fiojob.render(self.w, replace(self.params, randseed=seed))
        if self.rate is not None:  # fio's rate: bytes per second, per job
            job = job.replace("[global]\n", f"[global]\nrate={self.rate}\n", 1)
        path = Path(self.params.directory) / "jobs" / f"load-{tag}.{i}.fio"
        t0 = time.monotonic()
        r = fio.run_job(self.runner, job, path, self.w.direction)
        bins = dict(r.latency.bins) if r.latency is not None else {}
        return Slice(t0, time.monotonic(), r.io_bytes, r.total_ios, r.runtime_s, bins)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.slices.append(self._one(len(self.slices), "during"))
        except BaseException as exc:  # handed to the caller by stop()
            self._error = exc

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="resilver-load", daemon=True)
        self._thread.start()

    def stop(self, quiet: bool = False) -> list[Slice]:
        """Stop after the slice in progress; its error, if it failed, is raised here (unless
        `quiet`: the caller is already handling an error of its own)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._error is not None and not quiet:
            raise self._error
        return self.slices

    def run(self, n: int) -> list[Slice]:
        return [self._one(i, "alone") for i in range(n)]


def within(slices: Sequence[Slice], end: float) -> list[Slice]:
    """The slices run during the resilver that ended at `end`: those that ended by then, and
    the one in progress if at least half of its fio runtime (the end of its wall time, after
    fio started) fell before `end`. A slow foreground (large reads on slow disks) runs well
    past its 1 s; without the second rule a resilver shorter than one such slice would have
    no foreground figure at all."""
    return [s for s in slices if s.end - end <= s.seconds / 2]


def p99_ms(slices: Sequence[Slice]) -> float | None:
    """The p99 of every completion of the slices (their histograms merged), in ms."""
    merged: dict[int, int] = {}
    for s in slices:
        for k, v in s.bins.items():
            merged[k] = merged.get(k, 0) + v
    total = sum(merged.values())
    if total == 0:
        return None
    seen, rank = 0, 0.99 * total
    for k in sorted(merged):
        seen += merged[k]
        if seen >= rank:
            return k / 1e6
    return None  # unreachable: seen reaches total


def figures(slices: Sequence[Slice], unit: str) -> JsonObject:
    """The phase's figure (MiB/s or IOPS over fio's runtime of its slices) and p99."""
    seconds = sum(s.seconds for s in slices)
    if seconds <= 0:
        return {"slices": len(slices), "value": None, "unit": unit, "p99_ms": None}
    per_s = (sum(s.io_bytes for s in slices) / MiB if unit == "MiB/s"
             else sum(s.ios for s in slices)) / seconds  # fmt: skip
    return {"slices": len(slices), "value": round(per_s, 3), "unit": unit,
            "p99_ms": p99_ms(slices), "seconds": round(seconds, 3)}  # fmt: skip


def finish(
    fg: Foreground, slices: Sequence[Slice], end: float, drop: Callable[[], object]
) -> JsonObject:
    """After the resilver ended at `end` (and `fg.stop()` gave its `slices`): the slices run
    during it, then as many again alone on the healthy pool (after `drop` emptied its
    cache); the `load` section of the resilver."""
    during = within(slices, end)
    drop()
    alone = fg.run(max(1, len(during)))
    out: JsonObject = {
        "workload": fg.w.name,
        "rate": "flat out" if fg.rate is None else f"{fg.rate / MiB:g} MiB/s (fio rate)",
        "during": figures(during, fg.w.unit),
        "alone": figures(alone, fg.w.unit),
        "how": f"consecutive {SLICE_S} s fio slices from `zpool replace` until the resilver "
        "finished; then as many alone on the healthy pool; each phase after an export/import "
        "(cold ARC)",
    }
    if len(slices) > len(during):
        out["left_out"] = f"{len(slices) - len(during)} slice(s) run mostly after the resilver"
    return out
