"""The HTML report fits the window: opened in headless Chromium at 900 and 1280 CSS pixels,
the page does not scroll sideways and no chart label is cut off (issue 29).

A planted store (no pools) holds the names that used to break the page: configurations like
`backend=zfs layout=raidz2:6 + log mirror:2 sync=always recordsize=1M`, a long workload name,
a write workload with clear differences (significant changes with their intervals beside the
bars), a read workload where every configuration ties (an "n.s." interval beside each bar)
and a command line with nowhere to break for 140 characters. The page is measured with
element boxes read by JavaScript (getBoundingClientRect, scrollWidth) over the DevTools
protocol (tests/chromium_cdp.py):

* `document.documentElement.scrollWidth` is at most the viewport width (a wide table may
  scroll inside its own container; the page may not), and no element sticks out past the
  window outside a container that scrolls;
* every `<text>` of every chart lies inside its `<svg>` box, to half a pixel;
* every table wider than its container sits in a container that scrolls.

A full-page screenshot at each width is kept beside the page in the test's tmp dir
(`layout-900.png`, `layout-1280.png`).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chromium_cdp import CHROMIUM, Browser
from poolbench.report import html
from poolbench.report.data import RunData, load_run
from poolbench.report.tables import choose_baseline
from poolbench.store.db import Store
from poolbench.system.runner import CallRecord
from report_store import SEQ_READ, SEQ_WRITE, STARTED, _add, _machine, _study

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)"
)
MiB = 1024**2
LAYOUTS = ["raidz2:6 + log mirror:2", "mirror:2 + mirror:2 + mirror:2 + special mirror:2"]
SYNC = ["always", "standard"]
RECORDSIZE = ["128K", "1M"]
LONG_WORKLOAD = {
    "name": "iozone-backwards-read-with-a-long-descriptive-name-1m",
    "family": "iozone",
    "direction": "read",
    "unit": "MiB/s",
    "fio": {"rw": "read", "bs": "1048576", "ioengine": "psync"},
}


def _configs() -> list[tuple[str, float]]:
    """(configuration key, seq-write mean): every factor varies, so every label is long."""
    out = []
    for li, layout in enumerate(LAYOUTS):
        for si, sync in enumerate(SYNC):
            for ri, rs in enumerate(RECORDSIZE):
                key = f"backend=zfs layout={layout} sync={sync} recordsize={rs}"
                out.append((key, 300.0 + 120 * li - 90 * si + 40 * ri))
    return out


def _plant(db: Path) -> RunData:
    store = Store(db)
    factors = {"layout": LAYOUTS, "sync": SYNC, "recordsize": RECORDSIZE}
    workloads = ["seq-write", "seq-read", LONG_WORKLOAD["name"]]
    meta = {"machine": _machine(), "study": _study("layout", factors, workloads)}
    run = store.start_run("study", "layout", ["poolbench", "run", "layout.toml"], meta)
    for i, (cfg, write) in enumerate(_configs()):
        pool = {"usable_bytes": (6 - i % 3) * 480 * MiB}
        _add(store, run, cfg, SEQ_WRITE, [write * f for f in (0.99, 1.0, 1.01)], pool=pool)
        # A tie: ±8% noise around the same mean, so every change is "n.s." (no
        # significant difference) with a wide interval, the longest text beside a bar.
        read = [500.0 * f for f in ((0.92, 1.0, 1.08) if i % 2 else (1.08, 0.92, 1.0))]
        _add(store, run, cfg, SEQ_READ, read, pool=pool)
        _add(store, run, cfg, LONG_WORKLOAD, [v * 0.5 for v in read], pool=pool)
    # A command line with nowhere to break (no space, no hyphen) for 140 characters: its
    # table must scroll in its own box, not widen the page.
    job = "/var/tmp/poolbench_" + "_".join(["layout_raidz2_6_log_mirror_2_sync_always"] * 3)
    store.add_commands(run, [CallRecord(("fio", f"--output={job}.json", job), STARTED, 2.5, 0)])
    store.finish_run(run, "finished")
    return load_run(store, str(run))


# Runs in the page: the facts the assertions need, as JSON.
MEASURE = """
(function(){
  var doc = document.documentElement;
  var clipped = [];
  document.querySelectorAll('svg').forEach(function(svg){
    var box = svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(function(t){
      var r = t.getBoundingClientRect();
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 ||
          r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5) {
        clipped.push({svg: svg.id, text: t.textContent,
                      box: [r.left, r.right, r.top, r.bottom],
                      svgBox: [box.left, box.right, box.top, box.bottom]});
      }
    });
  });
  var wideTables = [];
  document.querySelectorAll('table').forEach(function(t){
    var p = t.parentElement;
    if (t.getBoundingClientRect().width > p.clientWidth + 0.5 &&
        ['auto', 'scroll'].indexOf(getComputedStyle(p).overflowX) < 0) {
      wideTables.push(t.id || t.rows[0].textContent.slice(0, 60));
    }
  });
  // What sticks out of the window outside any scrolling container: the page's own overflow.
  var wide = [];
  document.querySelectorAll('body *').forEach(function(e){
    if (e.getBoundingClientRect().right <= window.innerWidth + 0.5) return;
    for (var a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (['auto', 'scroll'].indexOf(getComputedStyle(a).overflowX) >= 0) return;
    }
    wide.push(e.tagName + (e.id ? '#' + e.id : '') + ': ' + e.textContent.slice(0, 60));
  });
  var texts = 0;
  document.querySelectorAll('svg.chart text').forEach(function(){ texts++; });
  return JSON.stringify({scrollWidth: doc.scrollWidth, innerWidth: window.innerWidth,
    charts: document.querySelectorAll('svg.chart').length, texts: texts,
    clipped: clipped, wideTables: wideTables, wide: wide.slice(0, 10)});
})()
"""


def _measure(browser: Browser, page: Path, width: int, shot: Path) -> dict[str, Any]:
    browser.open(page, width)
    facts: dict[str, Any] = json.loads(browser.evaluate(MEASURE))
    browser.screenshot(shot)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    png_width, png_height = struct.unpack(">II", data[16:24])
    # The whole page was captured: as wide as the viewport (it does not scroll sideways),
    # taller than one screen.
    assert png_width == width and png_height > 900, (png_width, png_height)
    return facts


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Browser, Path]]:
    """The planted report, written once, and one Chromium for both widths."""
    tmp = tmp_path_factory.mktemp("layout")
    run = _plant(tmp / "layout.db")
    long_label = "layout=raidz2:6 + log mirror:2 sync=always recordsize=1M"
    assert long_label in {run.label(c) for c in run.configs}
    page = tmp / "layout.html"
    page.write_text(html.render(run, choose_baseline(run)))
    assert "n.s. [" in page.read_text()  # the tie is there, with its interval
    with Browser(tmp / "profile") as browser:
        yield browser, page


@pytest.mark.parametrize("width", [900, 1280])
def test_page_fits_the_window_and_no_label_is_cut(opened: tuple[Browser, Path], width: int) -> None:
    browser, page = opened
    facts = _measure(browser, page, width, page.parent / f"layout-{width}.png")
    assert facts["innerWidth"] == width  # the viewport is the one asked for
    # One bar chart per workload, the recordsize curves of each, the usable space.
    assert facts["charts"] == 3 + 3 + 1 and facts["texts"] > 100
    assert facts["scrollWidth"] <= width and facts["wide"] == [], facts["wide"]
    assert facts["clipped"] == [], json.dumps(facts["clipped"][:5], indent=1)
    assert facts["wideTables"] == [], facts["wideTables"]
