"""A resilver under load: a foreground workload that runs while the pool resilvers (the
resilver study's `load` factor), and the same workload alone on the healthy pool afterwards.

The foreground is ONE continuous fio run (time-based, far longer than any resilver) started
just before `zpool replace` and stopped through fio's trigger file once the resilver is
finished (fio ends its jobs and still writes its JSON and logs). Its completion-latency
histogram log (one row per LOG_MS interval, Unix-epoch timestamps) is read back over the
resilver's own window, [replace started, resilver finished] (workloads/histlog.py): the rate
and p99 are those of the log over exactly that window (an interval across its edge counted
for its part inside). A window the log covers for less than MIN_INTERVALS intervals gives no
figure, and says so. Then, on the healthy pool, the
same workload alone for as long as the window lasted (whole-run figures from fio's JSON). Each
phase starts after the pool's cache was emptied (export/import), so neither reads what the
other left in the ARC. A stated rate (`seq-read@20M`) caps the foreground with fio's `rate`
(bytes/s, MiB here); without one it runs flat out.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import NotRequired, TypedDict

from poolbench.errors import PoolbenchError
from poolbench.system import watchdog
from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiojob, histlog
from poolbench.workloads.fioparse import FioResult, percentile_from_bins
from poolbench.workloads.workload import Workload

__all__ = ["Foreground", "finish"]

LOG_MS = 250  # fio's histogram log interval
MIN_INTERVALS = 4  # a window the log covers for less than this many intervals: no figure
TAIL_S = 2 * LOG_MS / 1000  # fio runs on this long after the resilver: its log covers the end
# Longer than any resilver: fio stops on the trigger, never on its runtime (a day; fio keeps
# its log rows in memory until it ends, about 60 KiB a second at LOG_MS).
RUNTIME_S = 86_400
START_WAIT_S = 30.0  # how long the resilver waits for fio's jobs to start
STOP_WAIT_S = 60.0  # how long fio may take to stop on its trigger before it is killed
MiB = 1 << 20


def _job(fg: Foreground, runtime_ms: int, logs: Path | None) -> str:
    job = fiojob.render(fg.w, replace(fg.params, runtime_s=1, min_window_s=0.0))
    # to the ms: alone runs exactly as long as the resilver's window did
    job = re.sub(r"(?m)^runtime=1$", f"runtime={runtime_ms}ms", job, count=1)
    extra = "" if fg.rate is None else f"rate={fg.rate}\n"  # bytes per second, per job
    if logs is not None:
        extra += (f"write_hist_log={logs}\nlog_hist_msec={LOG_MS}\nlog_hist_coarseness=0\n"
                  "log_unix_epoch=1\n")  # fmt: skip
    return job.replace("[global]\n", f"[global]\n{extra}", 1)


class Foreground:
    """The foreground workload: `start` runs it in a thread until `stop`; `during` reads its
    log over a window; `alone` runs it again for a given time."""

    def __init__(self, runner: Runner, w: Workload, params: fiojob.JobParams,
                 rate: int | None) -> None:  # fmt: skip
        self.runner, self.w, self.params, self.rate = runner, w, params, rate
        self.jobs = Path(params.directory) / "jobs"
        self.logs = self.jobs / "load-during"  # fio adds _clat_hist.N.log
        self.trigger = self.jobs / "load-during.stop"
        self.result: FioResult | None = None
        self.started_s: float | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            self.result = fio.run_job(
                self.runner, _job(self, RUNTIME_S * 1000, self.logs), self.jobs / "load-during.fio",
                self.w.direction,
                # --aux-path: where a triggered stop leaves fio's verify state, not our cwd
                extra_args=(f"--trigger-file={self.trigger}", f"--aux-path={self.jobs}"),
            )  # fmt: skip
        except BaseException as exc:  # handed to the caller by stop()
            self._error = exc

    def start(self) -> None:
        """Start fio and wait (up to START_WAIT_S) until its job processes run, so the
        resilver starts under load even where starting fio takes seconds (an emulated
        guest); `started_s` says how long that took."""
        self.trigger.unlink(missing_ok=True)
        self._thread = threading.Thread(target=self._run, name="resilver-load", daemon=True)
        t0 = time.monotonic()
        self._thread.start()
        job = self.jobs / "load-during.fio"
        while not self.runner.dry_run and self._thread.is_alive():
            if fio.jobs_started(job) or time.monotonic() - t0 > START_WAIT_S:
                break
            time.sleep(0.05)
        self.started_s = round(time.monotonic() - t0, 3)

    def stop(self, quiet: bool = False) -> None:
        """Stop fio (its trigger file); kill it if it does not end. Its error, if it failed,
        is raised here (unless `quiet`: the caller is already handling an error of its own)."""
        if self._thread is None:
            return
        if not self.runner.dry_run:
            if not quiet:  # fio logs no partial interval at its end: one more past the window
                time.sleep(TAIL_S)
            self.trigger.touch()
        self._thread.join(STOP_WAIT_S)
        if self._thread.is_alive():
            fio.kill_strays(self.jobs / "load-during.fio")
            self._thread.join(watchdog.KILL_GRACE_S)
        if self._thread.is_alive():  # killed, yet asleep in the kernel (a pool that hangs)
            raise PoolbenchError(
                f"The foreground fio ({self.jobs / 'load-during.fio'}) did not stop "
                f"{STOP_WAIT_S:.0f} s after its trigger, nor when killed: it waits in the "
                "kernel for I/O that does not return, and was left behind.",
                "See whether the pool still answers (`zpool status -x`).",
            )
        with contextlib.suppress(FileNotFoundError):
            self.trigger.unlink()
        if self._error is not None and not quiet:
            raise self._error

    def during(self, start_ms: int, end_ms: int) -> PhaseJson:
        """The foreground's figures over [start_ms, end_ms] from its histogram log(s)."""
        got = [histlog.window(histlog.parse(p.read_text()), self.w.direction, start_ms, end_ms)
               for p in sorted(self.jobs.glob(f"{self.logs.name}_clat_hist.*.log"))]  # fmt: skip
        win = histlog.merged(got) if got else histlog.Window(start_ms, end_ms, 0, 0.0, 0, 0)
        return window_figures(win, self.w.unit)

    def alone(self, seconds: float) -> PhaseJson:
        r = fio.run_job(self.runner, _job(self, max(1000, round(seconds * 1000)), None),
                        self.jobs / "load-alone.fio", self.w.direction)  # fmt: skip
        return result_figures(r, self.w.unit)


def _per_s(io_bytes: float, ios: float, seconds: float, unit: str) -> float:
    return round((io_bytes / MiB if unit == "MiB/s" else ios) / seconds, 3)


class PhaseJson(TypedDict):
    """One phase's figures in the resilver section's `load` (`during`: over the resilver's
    window from fio's histogram log; `alone`: a whole fio run). Read back by the study's
    notes (study/builtin/resilver_load.py)."""

    window_s: NotRequired[float]
    intervals: NotRequired[int]
    interval_ms: NotRequired[int]
    seconds: NotRequired[float]
    unit: str
    fio_late_s: NotRequired[float]  # fio's first I/O came this late into the window
    # Always written, last (after fio_late_s: the stored order), hence not required while
    # the window's part is assembled.
    value: NotRequired[float | None]  # MiB/s or IOPS (`unit`); None: no figure, `why`
    p99_ms: NotRequired[float | None]
    why: NotRequired[str]
    fio_start_s: NotRequired[float]


class LoadJson(TypedDict):
    """The `load` part of the resilver section: the foreground during it and alone."""

    workload: str
    rate: str
    during: PhaseJson
    alone: PhaseJson
    how: str


def window_figures(win: histlog.Window, unit: str) -> PhaseJson:
    """The window's figure (MiB/s or IOPS over the part of it fio's log covers) and p99; no
    figure, with the reason, when the log covers less than MIN_INTERVALS intervals of it."""
    window_s = (win.end_ms - win.start_ms) / 1000
    out: PhaseJson = {"window_s": round(window_s, 3), "intervals": win.intervals,
                      "interval_ms": LOG_MS, "seconds": round(win.seconds, 3),
                      "unit": unit}  # fmt: skip
    # fio writes its first row one interval after its I/O began
    if win.first_ms is not None and win.first_ms - LOG_MS > win.start_ms:
        out["fio_late_s"] = round((win.first_ms - LOG_MS - win.start_ms) / 1000, 3)
    if win.seconds * 1000 < MIN_INTERVALS * LOG_MS:
        late = f"; fio's first I/O {out['fio_late_s']} s into it" if "fio_late_s" in out else ""
        out["value"], out["p99_ms"] = None, None
        out["why"] = (
            f"too short to measure: fio's log covered {win.seconds:.2f} s of the resilver's "
            f"{window_s:.2f} s window ({win.intervals} of its {LOG_MS} ms intervals{late}), "
            f"less than {MIN_INTERVALS} intervals"
        )
        return out
    out["value"] = _per_s(win.io_bytes, win.ios, win.seconds, unit)
    out["p99_ms"] = win.p99_ms()
    return out


def result_figures(r: FioResult, unit: str) -> PhaseJson:
    """A whole fio run's figure (over fio's runtime) and p99 (its clat histogram)."""
    if r.runtime_s <= 0:
        return {"value": None, "unit": unit, "p99_ms": None, "why": "fio ran for no time"}
    p99 = None
    if r.latency is not None and r.latency.bins:
        got = percentile_from_bins(r.latency.bins, 99.0)
        p99 = None if got is None else got / 1e6
    return {"value": _per_s(r.io_bytes, r.total_ios, r.runtime_s, unit), "unit": unit,
            "p99_ms": p99, "seconds": round(r.runtime_s, 3)}  # fmt: skip


def finish(fg: Foreground, start_ms: int, end_ms: int, drop: Callable[[], object]) -> LoadJson:
    """After the resilver ran over [start_ms, end_ms] (epoch ms) and `fg.stop()` ended the
    foreground: its figures over that window, then the same workload alone on the healthy pool
    for as long (after `drop` emptied its cache); the `load` section of the resilver."""
    during = fg.during(start_ms, end_ms)
    if fg.started_s is not None:
        during["fio_start_s"] = fg.started_s
    drop()
    alone = fg.alone((end_ms - start_ms) / 1000)
    return {
        "workload": fg.w.name,
        "rate": "flat out" if fg.rate is None else f"{fg.rate / MiB:g} MiB/s (fio rate)",
        "during": during,
        "alone": alone,
        "how": f"one continuous fio run from just before `zpool replace` until the resilver "
        f"finished, its rate and p99 from fio's latency-histogram log ({LOG_MS} ms intervals) "
        "over exactly the resilver's window; then alone on the healthy pool "
        "for as long (fio's whole-run figures); each phase after an export/import (cold ARC)",
    }


def now_ms() -> int:
    """Wall-clock ms, as fio's log timestamps (log_unix_epoch)."""
    return int(time.time() * 1000)
