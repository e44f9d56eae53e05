"""The HTML report in a real browser: headless Chromium (Debian package `chromium`), offline.

Two reports are opened: the fixed study store (every chart kind, hostile names in the run
name, a factor level, a device model, a warning, the study file and a command) and a real
`poolbench bench` run measured with fio on a directory whose name is a script payload. For
each, Chromium dumps the DOM after load: the page's own self-check script has written which
charts rendered (a non-empty SVG box) and whether any script error happened; Chromium's
stderr log (--enable-logging=stderr) must contain no console message at all (a script error
or a Content-Security-Policy violation would be one); and the payloads must be text, with
the document title not changed by them. A screenshot is taken of each report.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from poolbench.report import html
from poolbench.report.data import load_run
from poolbench.report.tables import choose_baseline
from poolbench.store.db import Store
from report_store import HOSTILE, HOSTILE_LEVEL, build

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--proxy-server=127.0.0.1:9",
    "--hide-scrollbars",  # no network, even by accident
]


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _open(page: Path, tmp: Path) -> tuple[str, str]:
    """(DOM after load, console messages Chromium logged)."""
    p = _chromium(tmp, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri())
    assert p.returncode == 0, p.stderr[-2000:]
    console = [line for line in p.stderr.splitlines() if ":CONSOLE" in line]
    return p.stdout, "\n".join(console)


def _screenshot(page: Path, tmp: Path) -> Path:
    shot = tmp / f"{page.stem}.png"
    p = _chromium(tmp, "--window-size=1280,2000", f"--screenshot={shot}", page.as_uri())
    assert p.returncode == 0 and shot.exists(), p.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2000) and len(data) > 50_000  # not a blank page
    return shot


def _selfcheck(dom: str) -> dict[str, str]:
    m = re.search(r'<p id="pb-selfcheck"([^>]*)>([^<]*)</p>', dom)
    assert m, "the self-check paragraph is missing"
    attrs = dict(re.findall(r'data-([a-z]+)="([^"]*)"', m.group(1)))
    attrs["text"] = m.group(2)
    return attrs


def _check_page(page: Path, tmp: Path, charts: set[str]) -> str:
    dom, console = _open(page, tmp)
    assert console == "", f"console messages:\n{console}"
    check = _selfcheck(dom)
    assert check["errors"] == "0" and check["failed"] == "", check
    assert set(check["rendered"].split()) == charts, check["text"]
    # The payloads are text: no element was created from them, the title is ours.
    assert "<img" not in dom and "onload=" not in re.sub(r"&lt;svg/onload=", "", dom)
    title = re.search(r"<title>([^<]*)</title>", dom)
    assert title and title.group(1).startswith("poolbench — ")
    assert "pwned" not in title.group(1).split("—")[0]
    _screenshot(page, tmp)
    return dom


@pytest.mark.slow  # a browser
def test_study_report_in_chromium(tmp_path: Path) -> None:
    store = build(tmp_path / "results.db")
    run = load_run(store, "2")
    page = tmp_path / "curves.html"
    page.write_text(html.render(run, choose_baseline(run)))
    charts = {
        "chart-bar-iozone-write-64k",
        "chart-bar-iozone-write-1m",
        "chart-recordsize-iozone-write-64k",
        "chart-recordsize-iozone-write-1m",
        "chart-fill-iozone-write-64k",
        "chart-fill-iozone-write-1m",
        "chart-record-iozone-write",
        "chart-space",
    }
    dom = _check_page(page, tmp_path, charts)
    escaped = HOSTILE.replace("<", "&lt;").replace(">", "&gt;")
    assert escaped in dom and HOSTILE_LEVEL.replace("<", "&lt;").replace(">", "&gt;") in dom
    # The parity run: bars per workload and usable space per layout.
    run1 = load_run(store, "1")
    page1 = tmp_path / "parity.html"
    page1.write_text(html.render(run1, choose_baseline(run1)))
    dom1 = _check_page(
        page1, tmp_path, {"chart-bar-seq-write", "chart-bar-seq-read", "chart-space"}
    )
    assert "-30.0% [" in dom1 and "no significant difference" in dom1


@pytest.mark.slow  # a browser
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (Debian: fio)")
@pytest.mark.usefixtures("machine")  # it drops the page cache: the machine's chain
def test_real_bench_run_report_in_chromium(tmp_path: Path) -> None:
    from poolbench.cli.bench_cmd import bench

    target = tmp_path / HOSTILE
    target.mkdir()
    db = tmp_path / "real.db"
    r = CliRunner().invoke(
        bench,
        [
            str(target),
            "--size",
            "16M",
            "--workloads",
            "seq-write,seq-read",
            "--min-runs",
            "2",
            "--max-runs",
            "2",
            "--db",
            str(db),
        ],
    )
    assert r.exit_code == 0, r.output
    store = Store(db)
    run = load_run(store, "latest")
    assert run.name.endswith(HOSTILE) and len(run.measurements) == 4 and run.commands
    page = tmp_path / "bench.html"
    page.write_text(html.render(run, choose_baseline(run)))
    dom = _check_page(page, tmp_path, {"chart-bar-seq-write", "chart-bar-seq-read"})
    assert HOSTILE.replace("<", "&lt;").replace(">", "&gt;") in dom
    assert "fio" in dom and "Commands run" in dom


@pytest.mark.slow  # a browser
def test_latency_chart_in_chromium(tmp_path: Path) -> None:
    """The completion-latency chart (p50/p90/p99/p99.9 per configuration, log axis) renders."""
    from test_report_latency import _run

    store = Store(tmp_path / "lat.db")
    _run(store)
    run = load_run(store, "1")
    page = tmp_path / "latency.html"
    page.write_text(html.render(run, choose_baseline(run)))
    dom = _check_page(
        page,
        tmp_path,
        {"chart-bar-rand-read-4k", "chart-bar-seq-write", "chart-latency-rand-read-4k"},
    )
    assert "completion latency (log scale)" in dom and "p99.9 µs" in dom
