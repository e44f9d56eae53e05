"""The answer every report ends with (DESIGN.md §3 rule 6): computed from known inputs, and
the same to the printed digit in the terminal, `report --json` and the HTML page.

A planted store (through Store.add_measurement, values chosen on purpose):
- seq-write: a clear winner (raidz1 ashift=12 at 400 MiB/s, every other configuration far
  below at ±1% noise) and a factor effect (ashift 12 vs 9: +33.3% within raidz1, +30.0%
  within raidz2);
- seq-read: a tie (all four about 500 MiB/s at ±5% noise).
Pure: no root, no pools.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console
from rich.table import Table
from rich.text import Text

from poolbench.cli import report_cmd
from poolbench.report import html, layout, report_json, terminal
from poolbench.report.data import RunData, load_run
from poolbench.report.tables import choose_baseline
from poolbench.report.verdict import Verdict, ratio_text, verdict
from poolbench.stats.compare import holm, ratio_ci
from poolbench.stats.power import noncentrality
from poolbench.store.db import Store
from report_store import SEQ_READ, SEQ_WRITE, K, _add, _machine, _study
from report_store import build as build_report_store

ROOT = Path(__file__).resolve().parent.parent
MiB = 1024**2

WRITE = {
    K("raidz1", 9): [300.0, 303.0, 297.0],
    K("raidz1", 12): [400.0, 404.0, 396.0],
    K("raidz2", 9): [200.0, 202.0, 198.0],
    K("raidz2", 12): [260.0, 263.0, 257.0],
}
READ = {
    K("raidz1", 9): [500.0, 525.0, 475.0],
    K("raidz1", 12): [505.0, 480.0, 530.0],
    K("raidz2", 9): [495.0, 520.0, 470.0],
    K("raidz2", 12): [510.0, 485.0, 535.0],
}


def _plant(db: Path) -> Store:
    store = Store(db)
    study = _study("verdict", {"layout": ["raidz1", "raidz2"], "ashift": [9, 12]},
                   ["seq-write", "seq-read"])  # fmt: skip
    run = store.start_run("study", "verdict", ["poolbench", "run", "v.toml"],
                          {"machine": _machine(), "study": study})  # fmt: skip
    for wdef, figures in ((SEQ_WRITE, WRITE), (SEQ_READ, READ)):
        for cfg, values in figures.items():
            data = 3 if "raidz1" in cfg else 2  # data disks of 4: what the pool reports
            _add(store, run, cfg, wdef, values, pool={"usable_bytes": data * 480 * MiB})
    store.finish_run(run, "finished")
    return store


@pytest.fixture
def run(tmp_path: Path) -> RunData:
    return load_run(_plant(tmp_path / "v.db"), "1")


def _terminal(run: RunData, width: int = 200, baseline: str | None = None) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    base = choose_baseline(run, baseline) if baseline else None
    terminal.render_run(console, run, base)
    return buf.getvalue()


def _html_text(page: str) -> str:
    class Collect(HTMLParser):
        parts: list[str] = []

        def handle_data(self, data: str) -> None:
            self.parts.append(data)

    p = Collect()
    p.parts = []
    p.feed(page)
    return " ".join(" ".join(p.parts).split())


def _reference(
    values: dict[str, list[float]], wanted: list[tuple[str, str]]
) -> dict[tuple[str, str], str]:
    """What each wanted (base, config) comparison must print, computed here: every distinct
    pair once in one Holm family, Fieller's interval at the level Holm tests it at."""
    pairs = list(dict.fromkeys(frozenset(p) for p in wanted))
    p_values = [ratio_ci(*(values[c] for c in sorted(p)), first_stage=3).p_value for p in pairs]
    tests = dict(zip(pairs, holm(p_values), strict=True))
    out = {}
    for a, b in wanted:
        rejected, level = tests[frozenset((a, b))]
        r = ratio_ci(values[a], values[b], 1 - level, first_stage=3)
        out[(a, b)] = ratio_text(dataclasses.replace(r, significant=rejected))
    return out


def _wanted(v: Verdict, workload: str) -> list[tuple[str, str]]:
    rk = next(rk for rk in v.rankings if rk.workload == workload)
    wanted = [(rk.best.config, s.config) for s in rk.standings[1:]]
    return wanted + [(e.partner, e.config) for e in v.effects if e.workload == workload]


def test_a_clear_winner_is_ranked_with_its_holm_intervals(run: RunData) -> None:
    v = verdict(run)
    write = next(rk for rk in v.rankings if rk.workload == "seq-write")
    assert [s.config for s in write.standings] == [
        K("raidz1", 12), K("raidz1", 9), K("raidz2", 12), K("raidz2", 9)
    ]  # fmt: skip
    assert not write.tied and write.to_decide is None
    # Every comparison the workload's answer shows — three against the best, four factor
    # pairs, five distinct pairs — is one Holm family, computed here from the values alone.
    wanted = _wanted(v, "seq-write")
    assert len(wanted) == 7 and len({frozenset(p) for p in wanted}) == 5
    expected = _reference(WRITE, wanted)
    got = [s.ratio for s in write.standings[1:]]
    assert [ratio_text(r) for r in got] == [expected[p] for p in wanted[:3]]
    assert [round(r.ratio, 4) for r in got if r] == [0.75, 0.65, 0.5]
    assert all(r is not None and r.significant for r in got)
    assert ratio_text(got[0]).startswith("-25.0% [") and ratio_text(got[2]).startswith("-50.0% [")
    # What each buys: raidz2 keeps 2 of 4 disks' worth, survives two failures.
    assert write.standings[0].cost.usable_bytes == 3 * 480 * MiB
    assert write.standings[0].cost.failures_survived == 1
    assert write.standings[3].cost.failures_survived == 2


def test_one_pair_has_one_interval_wherever_it_is_shown(run: RunData) -> None:
    """raidz1 ashift=9 against the best (raidz1 ashift=12) is also the ashift effect within
    raidz1, the other way round: one test, and Fieller's interval inverts exactly."""
    v = verdict(run)
    vs_best = v.ratio("seq-write", K("raidz1", 12), K("raidz1", 9))
    effect = v.ratio("seq-write", K("raidz1", 9), K("raidz1", 12))
    assert vs_best is not None and effect is not None
    assert vs_best.confidence == effect.confidence and vs_best.p_value == effect.p_value
    assert effect.low == pytest.approx(1 / vs_best.high) and effect.high == pytest.approx(
        1 / vs_best.low
    )


def test_a_tie_is_said_plainly_with_the_replicates_that_would_decide_it(run: RunData) -> None:
    v = verdict(run)
    read = next(rk for rk in v.rankings if rk.workload == "seq-read")
    assert len(read.tied) == 4 and "no decision at this noise" in read.tie_text()
    assert [ratio_text(s.ratio) for s in read.standings[1:]] == [
        _reference(READ, _wanted(v, "seq-read"))[(read.best.config, s.config)]
        for s in read.standings[1:]
    ]
    widest = max(max(abs(s.ratio.low - 1), abs(s.ratio.high - 1))
                 for s in read.standings[1:] if s.ratio)  # fmt: skip
    assert f"±{math.ceil(widest * 100 - 1e-9)}%" in read.tie_text()
    d = read.to_decide
    assert d is not None and d.replicates is not None
    # From the observed CV with the power function: n = 2 (λ·cv / δ)², λ the noncentrality
    # of Hsu's df (stage one of 3: df 2) at Holm's first level of the family of five pairs.
    best = read.standings[0]
    other = next(s for s in read.standings if s.label == d.other)
    assert d.change == pytest.approx(abs(other.figure.center / best.figure.center - 1))
    lam = noncentrality(2, 0.05 / 5, 0.8)
    assert d.replicates == math.ceil(2 * (lam * d.cv / d.change) ** 2 - 1e-9)


def test_a_factor_effect_needs_no_baseline(run: RunData) -> None:
    v = verdict(run)
    ashift = [e for e in v.effects if e.workload == "seq-write" and e.factor == "ashift"]
    assert [(e.base, e.level, e.context) for e in ashift] == [
        ("9", "12", "layout=raidz1"), ("9", "12", "layout=raidz2")
    ]  # fmt: skip
    expected = _reference(WRITE, _wanted(v, "seq-write"))
    assert [ratio_text(e.ratio) for e in ashift] == [
        expected[(e.partner, e.config)] for e in ashift
    ]
    assert ratio_text(ashift[0].ratio).startswith("+33.3% [")
    assert ratio_text(ashift[1].ratio).startswith("+30.0% [")
    # The table that compares against ashift=9 prints the very same intervals.
    out = _terminal(run, baseline="ashift=9")
    table = out.split("\nThe answer")[0]
    assert all(ratio_text(e.ratio) in table for e in ashift)
    # ... and so does the page's table, in the same words.
    page = html.render(run, choose_baseline(run, "ashift=9"))
    tables = _html_text(page.split('id="workloads"')[1])
    assert all(ratio_text(e.ratio) in tables for e in ashift)


def _texts(v: Verdict) -> Iterator[str]:
    """Every number-bearing text the verdict prints."""
    for rk in v.rankings:
        for i, s in enumerate(rk.standings):
            yield rk.figure_text(i)
            yield ratio_text(s.ratio)
    for e in v.effects:
        yield ratio_text(e.ratio)


def test_terminal_json_and_html_agree_to_the_printed_digit(run: RunData, tmp_path: Path) -> None:
    v = verdict(run)
    out = " ".join(_terminal(run).split())
    doc: Any = report_json.report(run, None)
    page = _html_text(html.render(run, None))
    for text in _texts(v):
        assert text in out and text in page, text
    # The JSON's comparisons are the very texts and numbers printed.
    texts = {c["text"] for c in doc["comparisons"]}
    assert texts == {ratio_text(s.ratio) for rk in v.rankings for s in rk.standings if s.ratio} | {
        ratio_text(e.ratio) for e in v.effects
    }
    for c in doc["comparisons"]:
        if c["ci_low"] is not None:
            low = f"{(c['ci_low'] - 1) * 100:+.1f}%"
            assert low in c["text"] and c["text"] in out and c["text"] in page
    for rk in doc["verdict"]["rankings"]:
        assert rk["sentence"] in out and rk["sentence"] in page
    for step in doc["verdict"]["next_steps"]:
        assert step in out and step in page
    cost = "costs 480M of usable space (-33.3%, 0.9 disk) and survives 2 disk failures instead of 1"
    assert cost in out and cost in page
    # The report's last lines are the answer's next steps.
    last = _terminal(run).rstrip().split("\nNext:\n")[1]
    assert all(ln.startswith("• ") for ln in last.splitlines())


def _paths(x: Any, prefix: str) -> Iterator[str]:
    """Every key path of the document; comparison and figure objects under their own
    names (they are documented once), `levels` left opaque (its keys are the factors)."""
    if isinstance(x, list):
        for item in x:
            yield from _paths(item, prefix + "[]")
        return
    if not isinstance(x, dict):
        return
    for k, v in x.items():
        path = f"{prefix}.{k}" if prefix else k
        yield path
        if k == "levels":
            continue
        if path == "comparisons":
            for item in v:
                yield from _paths(item, "comparison")
        elif k in ("change", "vs_best", "comparison"):
            yield from _paths(v, "comparison")
        elif k in ("figure", "p99"):  # a p99 beside a figure is a figure object too
            yield from _paths(v, "figure")
        else:
            yield from _paths(v, path)


def test_report_json_keys_are_the_documented_ones(tmp_path: Path) -> None:
    doc_text = (ROOT / "docs" / "export.md").read_text()
    section = doc_text.split("# `poolbench report RUN --json`")[1]
    documented = re.findall(r"^- `([^`]+)` —", section, re.M)
    # a key the docs say appears "only when" something happened is absent otherwise
    only_when = set(re.findall(r"^- `([^`]+)` — only when", section, re.M))
    store = _plant(tmp_path / "cli.db")
    r = CliRunner().invoke(report_cmd.report, ["1", "--json", "--baseline", "layout=raidz1",
                                               "--db", str(store.path)])  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert set(_paths(doc, "")) == set(documented) - only_when
    # their presence: tests/test_screen_study.py (not_screened), tests/test_report_json.py
    # (a table of predictions, failed trials)
    table_or_failure = {k for k in documented if k.startswith(("predicted.", "failed_trials[]."))}
    assert only_when == {"run.not_screened"} | table_or_failure
    assert len(table_or_failure) == 5 + 17
    assert len(documented) == len(set(documented))


def _cells_over_two_lines(console: Console, table: Table) -> list[str]:
    bad = []
    for col in table.columns:
        for cell in col.cells:
            text = cell if isinstance(cell, Text) else Text(str(cell))
            width = col.width or console.width
            if len(text.wrap(console, width, overflow="fold")) > 2:
                bad.append(text.plain)
    return bad


@pytest.mark.parametrize("which", ["planted", "parity", "parity-baseline"])
def test_80_columns_no_line_wider_and_no_cell_over_two_lines(
    which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if which == "planted":
        run, baseline = load_run(_plant(tmp_path / "v.db"), "1"), None
    else:
        run = load_run(build_report_store(tmp_path / "r.db"), "1")
        baseline = "layout=raidz1" if which == "parity-baseline" else None
    fitted: list[Table] = []
    real_fit = layout.fit

    def spy(console: Console, title: Text, columns: Any) -> tuple[Table, list[str]]:
        table, hidden = real_fit(console, title, columns)
        fitted.append(table)
        return table, hidden

    monkeypatch.setattr(layout, "fit", spy)
    buf = io.StringIO()
    console = Console(file=buf, width=80, color_system=None, force_terminal=False)
    terminal.render_run(console, run, choose_baseline(run, baseline) if baseline else None)
    lines = buf.getvalue().splitlines()
    assert max(len(ln) for ln in lines) <= 80
    assert len(fitted) >= 4  # two workload tables and two rankings
    for table in fitted:
        assert _cells_over_two_lines(console, table) == []
    text = buf.getvalue()
    assert text.count("sparse files") == 1
    assert "no disk figures known" not in text
    assert lines[-1].strip() and "The answer" in text
    tail = text.split("\nNext:\n")[1]
    assert "--disk-speed-from" in tail  # the planner's hint is the last next step
