"""The qd-curve chart (report/qdcurve.py): one line per configuration and job count, each
point a queue depth at (mean IOPS, latency). The points are computed here from the stored
values (Little's law: outstanding I/Os / IOPS, as no percentile was recorded) and the page is
opened in headless Chromium, whose self-check must count the chart as rendered."""

from __future__ import annotations

import re
import shutil
from html import escape
from pathlib import Path

import pytest

from poolbench.records.latency import Latency
from poolbench.report import html, qdcurve
from poolbench.report.data import load_run
from poolbench.report.tables import choose_baseline
from poolbench.store.db import Store
from report_store import _add, _machine, _study

QD_TEXT = """name = "qd-curve"
[disks]
count = 2
size = "512M"
[factors]
layout = ["mirror:2", "stripe:2"]
[workloads]
names = ["rand-read-4k-qd1-j1", "rand-read-4k-qd8-j1", "rand-read-4k-qd32-j1"]
"""
DEPTHS = (1, 8, 32)
IOPS = {"mirror:2": (1000.0, 4000.0, 5000.0), "stripe:2": (1200.0, 5000.0, 6400.0)}


def _wdef(qd: int) -> dict[str, object]:
    return {
        "name": f"rand-read-4k-qd{qd}-j1",
        "family": "random",
        "direction": "read",
        "unit": "IOPS",
        "fio": {"rw": "randread", "bs": "4096", "ioengine": "psync"},
        "iodepth": qd,
        "jobs": 1,
    }


def _run(db: Path) -> Store:
    store = Store(db)
    names = [f"rand-read-4k-qd{d}-j1" for d in DEPTHS]
    meta = {
        "machine": _machine(),
        "study": _study("qd-curve", {"layout": list(IOPS)}, names),
        "study_text": QD_TEXT,
        "seed": 42,
        "planned_trials": [],
    }
    run_id = store.start_run("study", "qd-curve", ["poolbench", "study", "qd-curve"], meta)
    for layout, values in IOPS.items():
        for qd, v in zip(DEPTHS, values, strict=True):
            # two replicates 2% apart: the mean is v
            _add(store, run_id, f"layout={layout}", _wdef(qd), [v * 0.99, v * 1.01])
    store.finish_run(run_id, "finished")
    return store


def test_points_are_mean_iops_and_littles_law_latency(tmp_path: Path) -> None:
    run = load_run(_run(tmp_path / "r.db"), "latest")
    fams = qdcurve.families(run)
    assert list(fams) == ["rand-read-4k"]
    series, all_p99 = qdcurve.curve_points(run, fams["rand-read-4k"])
    assert not all_p99  # no percentile recorded: the mean latency, labelled so
    for layout, values in IOPS.items():
        pts = series[f"{run.label(f'layout={layout}')}, 1 job(s)"]
        assert [round(p.x, 6) for p in pts] == [round(v, 6) for v in values]
        want = [round(qd / v * 1000, 6) for qd, v in zip(DEPTHS, values, strict=True)]
        assert [round(p.y, 6) for p in pts] == want
    page = html.render(run, choose_baseline(run))
    assert 'id="chart-qd-rand-read-4k"' in page
    assert (
        "mean latency (ms, Little&#x27;s law)" in page or "mean latency (ms, Little's law)" in page
    )
    # The x axis labels only its ends (the smallest and largest IOPS).
    svg = page[page.index('id="chart-qd-rand-read-4k"') :].split("</svg>")[0]
    assert ">1,000<" in svg and ">6,400<" in svg and ">4,000<" not in svg


@pytest.mark.skipif(
    not (shutil.which("chromium") or shutil.which("chromium-browser")),
    reason="chromium is not installed (Debian: apt-get install chromium)",
)
@pytest.mark.slow  # a browser
def test_qd_chart_renders_in_chromium(tmp_path: Path) -> None:
    from test_report_html import _check_page

    run = load_run(_run(tmp_path / "r.db"), "latest")
    page = tmp_path / "qd.html"
    page.write_text(html.render(run, choose_baseline(run)))
    bars = {f"chart-bar-rand-read-4k-qd{d}-j1" for d in DEPTHS}
    dom = _check_page(page, tmp_path, bars | {"chart-qd-rand-read-4k"})
    assert re.search(r"rand-read-4k: latency against IOPS as the queue deepens", dom)


def _lat(
    percentiles: dict[str, float] | None = None, bins: dict[int, int] | None = None
) -> Latency:
    """A replicate's stored latency with only what the chart reads (no completion count)."""
    return Latency("read", 0, 0.0, 0.0, 0.0, 0.0, percentiles or {}, bins or {})


def test_recorded_p99_replaces_littles_law(tmp_path: Path) -> None:
    run = load_run(_run(tmp_path / "r.db"), "latest")
    for (_cfg, w), cell in run.cells.items():
        qd = int(w.split("-qd")[1].split("-")[0])
        cell.clats = [_lat(percentiles={"99": qd * 1e6}), _lat(percentiles={"99": qd * 1.2e6})]
    series, all_p99 = qdcurve.curve_points(run, qdcurve.families(run)["rand-read-4k"])
    assert all_p99
    # No histograms stored: the geometric mean of the runs' p99s, qd · √(1 · 1.2) ms (was the
    # arithmetic mean, qd · 1.1 ms, a figure of no distribution).
    for pts in series.values():
        assert [round(p.y, 6) for p in pts] == [round(qd * 1.2**0.5, 6) for qd in DEPTHS]
    label = "p99 latency, geometric mean of the runs' p99s (ms, 95% CI)"
    assert escape(label) in html.render(run, choose_baseline(run))
    # With histograms: the p99 of all I/Os of both runs. 99 I/Os at 1 ms and 1 at 9 ms in
    # one run, 100 at 2 ms in the other: of the 200, the 198th is at 2 ms.
    for cell in run.cells.values():
        cell.clats = [_lat(bins={1000000: 99, 9000000: 1}), _lat(bins={2000000: 100})]
    series, all_p99 = qdcurve.curve_points(run, qdcurve.families(run)["rand-read-4k"])
    assert all_p99 and all(p.y == 2.0 for pts in series.values() for p in pts)
    assert "p99 latency of all I/Os (ms, 95% CI)" in html.render(run, choose_baseline(run))
    # Two runs: Woodruff's upper end (t at 1 df) passes the slowest completion, so the
    # interval is open above and no whisker is drawn to a bound that is not an end.
    assert all(p.low is None and p.high is None for pts in series.values() for p in pts)
    # Three runs that agree on their tail: 2,951 of 3,000 completions at 1 ms, 34 at 2 ms, the
    # 2,970th (99%) at 2 ms in every leave-one-run-out too: the interval is [2, 2] ms.
    for cell in run.cells.values():
        cell.clats = [
            _lat(bins={1000000: 985 - j, 2000000: 10 + j, 6000000: 5}) for j in range(2)
        ] + [_lat(bins={1000000: 982, 2000000: 13, 6000000: 5})]
        cell.values = cell.values[:2] + [cell.values[0]]
    series, _ = qdcurve.curve_points(run, qdcurve.families(run)["rand-read-4k"])
    assert all((p.y, p.low, p.high) == (2.0, 2.0, 2.0) for pts in series.values() for p in pts)
    # One replicate without a percentile: the chart falls back to Little's law for that cell.
    next(iter(run.cells.values())).clats[1] = None
    assert not qdcurve.curve_points(run, qdcurve.families(run)["rand-read-4k"])[1]
