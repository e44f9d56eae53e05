"""`report --json` carries everything the terminal report prints (issue 38).

The terminal report of stored runs — a real demo run (tests/data/demo-run.sql: raidz1 vs
raidz2 on four zfs-fuse disks capped at 20 MiB/s, with its warnings and the planner's
predictions beside the figures) and the planted runs of tests/report_store.py and
test_report_latency.py — is read line by line as a pipe receives it (no colour; 2000
columns, so no column is left out). Every table is cut into cells at its column gaps, and
every line and every cell is mapped to its JSON path: the same text, and each figure printed
(means, interval ends, device MiB/s, write amplification, p99, ratios, changes, usable
space) equal to the JSON number at the printed precision. A line the JSON cannot account
for fails the test, and so does a JSON changed in one figure (the last test)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.test_report_latency import _run as latency_run
from tests.test_report_predicted import _store as bench_and_study

from poolbench.cli import report_cmd
from poolbench.report.layout import factor_header
from poolbench.store.db import Store
from poolbench.store.queries import FailedTrial, add_failed_trial
from report_store import build

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "tests" / "data" / "demo-run.sql"
WIDE = {"COLUMNS": "2000"}  # no table drops a column, no line wraps but a table's title
Json = dict[str, Any]
MiB = 1024**2
UNITS = {"K": 1024, "M": MiB, "G": 1024**3, "T": 1024**4}


# -- reading the terminal ----------------------------------------------------------------
class Lines:
    """The report's lines in order; each taken once (blank lines are layout)."""

    def __init__(self, text: str) -> None:
        self.lines = [line.rstrip() for line in text.splitlines()]
        self.i = 0

    def _skip_blank(self) -> None:
        while self.i < len(self.lines) and not self.lines[self.i]:
            self.i += 1

    def peek(self) -> str:
        self._skip_blank()
        return self.lines[self.i] if self.i < len(self.lines) else ""

    def take(self) -> str:
        line = self.peek()
        assert self.i < len(self.lines), "the report ended early"
        self.i += 1
        return line

    def text(self, expected: str) -> None:
        """Lines whose words, joined again, are `expected` (rich wraps at spaces)."""
        got = self.take().strip()
        while got != expected:
            assert expected.startswith(got + " "), (got, expected)
            got += " " + self.take().strip()

    def done(self) -> None:
        self._skip_blank()
        assert self.i == len(self.lines), self.lines[self.i :]


def table(lines: Lines, title: str, nrows: int) -> list[dict[str, str]]:
    """A table after its title: header lines, the rule, `nrows` rows; each row as
    {header: cell}, columns cut where every line of the table has two spaces or more."""
    lines.text(title)
    head: list[str] = []
    while not set(lines.peek().strip()) <= {"─"}:
        head.append(lines.take())
    lines.take()  # the rule under the header
    rows = [lines.take() for _ in range(nrows)]
    width = max(len(x) for x in head + rows)
    block = [x.ljust(width) for x in head + rows]
    gap = [all(x[c] == " " for x in block) for c in range(width)] + [True, True]
    spans, start = [], None
    for c in range(width + 1):
        if not gap[c] and start is None:
            start = c
        elif gap[c] and start is not None and (gap[c + 1] or c == width):
            spans.append((start, c))
            start = None
    headers = [" ".join(x[a:b].strip() for x in head if x[a:b].strip()) for a, b in spans]
    return [{h: x.ljust(width)[a:b].strip() for h, (a, b) in zip(headers, spans, strict=True)}
            for x in rows]  # fmt: skip


# -- figures at their printed precision ----------------------------------------------------
def same(printed: str, value: float | None) -> None:
    """`printed` is `value` rounded to the digits printed."""
    assert value is not None, printed
    text = printed.replace(",", "")
    digits = len(text.split(".")[1]) if "." in text else 0
    assert abs(float(text) - value) <= 0.5 * 10**-digits + 1e-9 * abs(value), (printed, value)


def same_figure(printed: str, figure: Json) -> None:
    """'56.4 ± 1.2' (mean ± half the interval), '200 (180–≥ 236)' (latency), '56.4'."""
    m = re.fullmatch(r"(\S+) ± (\S+)", printed)
    if m:
        same(m[1], figure["center"])
        same(m[2], (figure["ci_high"] - figure["ci_low"]) / 2)
        return
    m = re.fullmatch(r"(\S+) \((\S+)–(≥ )?(\S+)\)", printed)
    if m:
        same(m[1], figure["center"])
        same(m[2], figure["ci_low"])
        same(m[4], figure["ci_high"])
        assert bool(m[3]) == figure["open_high"]
        return
    same(printed, figure["center"])
    assert figure["ci_low"] is None


def same_change(printed: str, c: Json | None) -> None:
    """'-32.8% [-34.3%, -31.2%]', 'n.s. [-11.4%, +17.1%]': the ratio and its interval."""
    if c is None or c["text"] != printed or c["undetermined"]:
        return  # "best", "baseline", a reason: compared as text by the caller
    pcts = re.findall(r"[-+]?[\d.]+(?=%)", printed)
    ends = [c["ci_low"], c["ci_high"]]
    want = ends if printed.startswith("n.s.") else [c["ratio"], *ends]
    assert len(pcts) == len(want), printed
    for got, ratio in zip(pcts, want, strict=True):
        same(got, (ratio - 1) * 100)


def same_bytes(printed: str, n: int | None, source: str | None) -> None:
    """'944.5M', '1.4G (plan)', '–'."""
    if n is None:
        assert printed == "–"
        return
    plan = printed.endswith(" (plan)")
    assert plan == (source == "planner"), printed
    m = re.fullmatch(r"([\d.]+)([KMGT]?)(?: \(plan\))?", printed)
    assert m, printed
    same(m[1], n / UNITS.get(m[2], 1))


# -- the report, section by section --------------------------------------------------------
def factors(doc: Json) -> list[str]:
    """The factors that vary: each gets a column."""
    levels = [r["levels"] for t in doc["tables"] for r in t["rows"]]
    names = list(dict.fromkeys(k for lv in levels for k in lv))
    return [k for k in names if len({lv.get(k, "–") for lv in levels}) > 1]


def factor_cell(row: dict[str, str], name: str) -> str:
    for split in (False, True):
        h = factor_header(name, split).replace("\n", " ")
        if h in row:
            return row.pop(h)
    raise AssertionError((name, row))


def config_cells(doc: Json, row: dict[str, str], levels: dict[str, str], label: str) -> None:
    names = factors(doc)
    for name in names:
        assert factor_cell(row, name) == levels.get(name, "–")
    if not names and "configuration" in row:
        assert row.pop("configuration") == label


def check_workload_tables(lines: Lines, doc: Json, footnotes: dict[int, set[str]]) -> None:
    for t in doc["tables"]:
        title = t["title"] + (f"; change against {doc['baseline']}" if doc["baseline"] else "")
        for r, row in zip(t["rows"], table(lines, title, len(t["rows"])), strict=True):
            config_cells(doc, row, r["levels"], r["label"])
            assert row.pop(t["statistic"]) == r["figure_text"]
            same_figure(r["figure_text"], r["figure"])
            if doc["baseline"]:
                assert row.pop("change") == r["change_text"]
                same_change(r["change_text"], r["change"])
            assert row.pop("runs") == str(r["runs"]) == str(r["figure"]["n"])
            if t["metric"] == "value":
                assert row.pop("device MiB/s") == r["device_text"]
                if r["device_mib_s"] is not None:
                    same(r["device_text"], r["device_mib_s"])
                amp = row.pop("write amp. (model)", None)
                if amp is not None:
                    assert amp == (r["write_amplification_text"] or "")
                    _same_amplification(amp, r)
            if t["p99_statistic"] is not None:
                assert row.pop(f"p99 µs {t['p99_statistic']}") == r["p99_text"]
                if r["p99"] is not None:
                    same_figure(r["p99_text"], r["p99"])
            for n in re.findall(r"⚠(\d+)", row.pop("notes")):
                footnotes.setdefault(int(n), set()).add(json.dumps(r["notes"]))
            assert row == {}, row  # every column mapped
        for legend in t["legends"]:
            lines.text(legend)


def _same_amplification(printed: str, r: Json) -> None:
    if not printed:
        assert r["write_amplification"] is None
        return
    m = re.fullmatch(r"([\d.]+)× \(([\d.]+|\?)\)", printed)
    assert m, printed
    same(m[1], r["write_amplification"])
    if m[2] == "?":
        assert r["write_amplification_model"] is None
    else:
        same(m[2], r["write_amplification_model"])


def check_footnotes(lines: Lines, doc: Json, used: dict[int, set[str]]) -> None:
    """'⚠n text' for every warning; each row's notes are exactly the texts it points to."""
    printed: dict[int, str] = {}
    while re.match(r"⚠\d+ ", lines.peek()):
        n, text = lines.take().split(" ", 1)
        printed[int(n[1:])] = text
    assert sorted(printed) == list(range(1, len(printed) + 1))
    rows = [r for t in doc["tables"] for r in t["rows"]]
    assert {w for r in rows for w in r["notes"]} == set(printed.values())
    for r in rows:  # a row's ⚠ numbers name exactly its notes
        mine = {n for n, docs in used.items() if json.dumps(r["notes"]) in docs}
        assert {printed[n] for n in mine} == set(r["notes"]), r["config"]


def check_predicted(lines: Lines, doc: Json) -> None:
    p = doc["predicted"]
    if p is None:
        return
    first = factors(doc)[0] if len(factors(doc)) == 1 else "configuration"
    for r, row in zip(p["rows"], table(lines, p["heading"], len(p["rows"])), strict=True):
        assert row.pop(first) == r["short_label"]
        assert row.pop("workload") == r["workload"]
        assert row.pop("measured") == r["measured_text"]
        same(r["measured_text"].removesuffix(f" {r['unit']}"), r["measured"])
        assert row.pop("predicted") == r["predicted_text"]
        if r["predicted"] is not None:
            same(r["predicted_text"], r["predicted"])
        assert row.pop("measured ÷ predicted") == r["ratio_text"]
        if r["ratio"] is not None:
            same(r["ratio_text"], r["ratio"])
        assert row.pop("basis") == f"{r['tag']} †{r['note']}"
        assert p["notes"][r["note"] - 1] == r["basis"]
        assert row == {}, row
    for i, note in enumerate(p["notes"], 1):
        lines.text(f"†{i} {note}")


def check_verdict(lines: Lines, doc: Json) -> None:
    v = doc["verdict"]
    lines.text(f"The answer (run {doc['run']['id']})")
    if v["how"] is not None:
        lines.text(v["how"])
    levels = {r["config"]: r["levels"] for t in doc["tables"] for r in t["rows"]}
    for rk in v["rankings"]:
        ranked = rk["ranked"]
        if len(ranked) > 1:
            better = "higher" if rk["higher_is_better"] else "lower"
            title = f"{rk['workload']} ({rk['unit']}), {better} is better"
            for s, row in zip(ranked, table(lines, title, len(ranked)), strict=True):
                _ranked_row(doc, row, s, levels[s["config"]], rk["exact"])
            for s in ranked:
                if s["vs_best"] is not None and s["vs_best"]["undetermined"]:
                    lines.text(f"{s['label']}: {s['vs_best']['undetermined']}")
        lines.text(f"→ {rk['sentence']}")
    for heading, items in (("What each choice costs and buys:",
                            [lc["sentence"] for lc in v["level_changes"]]),
                           ("Next:", v["next_steps"])):  # fmt: skip
        if items:
            lines.text(heading)
            for item in items:
                lines.text(f"• {item}")


def _ranked_row(doc: Json, row: dict[str, str], s: Json, levels: Json, exact: bool) -> None:
    assert row.pop("#") == str(s["rank"])
    config_cells(doc, row, levels, s["label"])
    assert row.pop("exact" if exact else "mean ± 95% CI") == s["figure_text"]
    if not exact:
        same_figure(s["figure_text"], s["figure"])
    assert row.pop("vs best") == s["vs_best_text"]
    same_change(s["vs_best_text"], s["vs_best"])
    if "usable" in row:
        same_bytes(row.pop("usable"), s["usable_bytes"], s["usable_source"])
    if "survives failures" in row:
        f = s["failures_survived"]
        assert row.pop("survives failures") == ("–" if f is None else str(f))
    assert row == {}, row


def check_report(text: str, doc: Json) -> None:
    """The whole terminal report, line by line, against the JSON document."""
    lines = Lines(text)
    lines.text(doc["title"])
    for h in doc["header"]:
        lines.text(f"{h['label']}: {h['text']}")
    _failed(lines, doc)
    used: dict[int, set[str]] = {}
    check_workload_tables(lines, doc, used)
    check_footnotes(lines, doc, used)
    for cell in doc["replay_fidelity"]:
        for line in cell:
            lines.text(line)
    check_predicted(lines, doc)
    check_verdict(lines, doc)
    lines.done()


def _failed(lines: Lines, doc: Json) -> None:
    failed = doc["failed_trials"]
    if not failed:
        return
    lines.text(f"{len(failed)} trial(s) failed (not measured)")
    cells = []
    while not lines.peek().startswith("Measure them with: "):
        line = lines.take()
        if "┃" in line or "│" in line:
            cells.append([c.strip() for c in re.split(r"[┃│]", line)[1:-1]])
    assert cells[0] == ["trial", "configuration", "replicate", "reason"]
    assert cells[1:] == [[str(f["trial"]), f["label"], str(f["replicate"]), f["reason"]]
                         for f in failed]  # fmt: skip
    hint = lines.take().removeprefix("Measure them with: ")
    assert f"measure the failed trials: {hint}" in doc["verdict"]["next_steps"]


# -- the runs --------------------------------------------------------------------------------
def both(db: Path, *args: str) -> tuple[str, Json]:
    """The command's terminal report and its JSON (in-process: the CLI as a pipe sees it)."""
    runner = CliRunner(env=WIDE)
    term = runner.invoke(report_cmd.report, [*args, "--db", str(db)])
    doc = runner.invoke(report_cmd.report, [*args, "--json", "--db", str(db)])
    assert term.exit_code == 0 and doc.exit_code == 0, term.output + doc.output
    return term.output, json.loads(doc.output)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(DEMO.read_text())
    return db


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("planted") / "r.db"
    build(db).close()
    return db


@pytest.mark.parametrize("args", [["1"], ["1", "--baseline", "layout=raidz2"]])
def test_the_demo_run_in_json_is_the_terminal_report(demo_db: Path, args: list[str]) -> None:
    text, doc = both(demo_db, *args)
    check_report(text, doc)
    # The figures a newcomer reads first are there, as numbers: the planner's prediction
    # beside each figure (the study's cap of 20 MiB/s: raidz1 of 4 writes through 3 data
    # disks, 58.2 MiB/s at ashift 12; raidz2 through 2, 38.8), and the device bytes.
    pred = {(r["short_label"], r["workload"]): r for r in doc["predicted"]["rows"]}
    assert round(pred[("raidz1", "seq-write")]["predicted"], 1) == 58.2
    assert round(pred[("raidz2", "seq-write")]["predicted"], 1) == 38.8
    assert "20 MiB/s" in doc["predicted"]["heading"]
    write = next(t for t in doc["tables"] if t["workload"] == "seq-write")
    assert all(r["write_amplification"] > 1.3 for r in write["rows"])


def test_planted_runs_in_json_are_the_terminal_report(planted: Path) -> None:
    """Four configurations of two factors, an unverified cell, a warning with markup, a
    baseline (the change column); twelve configurations with hostile names and curves."""
    for args in (["1", "--baseline", "layout=raidz1"], ["1"], ["2"], ["3", "--baseline",
                 "ashift=12"]):  # fmt: skip
        text, doc = both(planted, *args)
        check_report(text, doc)
        assert doc["predicted"] is None  # no disk figures: a next step says how
        assert any("--disk-speed-from" in s for s in doc["verdict"]["next_steps"])


def test_latency_beside_the_figure_and_latency_tables(tmp_path: Path) -> None:
    """Random reads carry p99 beside the figure; `--metric p99` tables of it."""
    db = tmp_path / "lat.db"
    store = Store(db)
    latency_run(store)
    store.close()
    for args in (["1"], ["1", "--metric", "value,p99"], ["1", "--baseline", "layout=raidz1",
                 "--metric", "p99"]):  # fmt: skip
        text, doc = both(db, *args)
        check_report(text, doc)
    text, doc = both(db, "1")
    rand = next(t for t in doc["tables"] if t["workload"] == "rand-read-4k")
    assert rand["p99_statistic"] == "all I/Os"
    assert all(r["p99"]["statistic"] == "of all I/Os" for r in rand["rows"])


def test_a_bench_run_and_predictions_from_a_measured_disk(tmp_path: Path) -> None:
    """A bench run's report (one target, no factors); a study's with the disk figures of a
    bench run by its model: predictions, "not predicted" rows (random writes under
    copy-on-write) and their notes."""
    db = tmp_path / "r.db"
    bench, study = bench_and_study(db)
    for args in ([str(bench)], [str(study), "--disk-speed-from", "model:capped25"]):
        text, doc = both(db, *args)
        check_report(text, doc)
    tags = {r["tag"] for r in doc["predicted"]["rows"]}
    assert "not predicted" in tags and len(doc["predicted"]["notes"]) > 1


def test_failed_trials_in_json_are_the_terminal_report(planted: Path, tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    db.write_bytes(planted.read_bytes())
    store = Store(db)
    config = "backend=zfs layout=raidz2 ashift=12"
    add_failed_trial(store, 1, FailedTrial(config, 3, 7, "pb1x", "zpool create: I/O error"))
    store.close()
    text, doc = both(db, "1")
    check_report(text, doc)
    assert doc["failed_trials"] == [{"trial": 7, "config": config,
                                     "label": "layout=raidz2 ashift=12", "replicate": 4,
                                     "reason": "zpool create: I/O error"}]  # fmt: skip


def _paths(x: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(x, list):
        for item in x:
            yield from _paths(item, prefix + "[]")
    elif isinstance(x, dict):
        for k, v in x.items():
            path = f"{prefix}.{k}" if prefix else k
            yield path
            if k != "levels":
                yield from _paths(v, path)


def test_the_keys_only_some_reports_have_are_documented_and_present(
    demo_db: Path, planted: Path, tmp_path: Path
) -> None:
    """docs/export.md's "only when" keys of the predicted table and of failed trials are
    exactly the ones a report with a table, or with a failed trial, carries."""
    doc_text = (ROOT / "docs" / "export.md").read_text()
    section = doc_text.split("# `poolbench report RUN --json`")[1].split("\n# ", 1)[0]
    documented = set(re.findall(r"^- `([^`]+)` —", section, re.M))
    _, demo = both(demo_db, "1")
    keys = {p for p in _paths(demo) if p.startswith("predicted.")}
    assert keys == {k for k in documented if k.startswith("predicted.")}
    db = tmp_path / "f.db"
    db.write_bytes(planted.read_bytes())
    store = Store(db)
    add_failed_trial(store, 1, FailedTrial("backend=zfs layout=raidz1 ashift=9", 0, 1, "p", "x"))
    store.close()
    _, failed = both(db, "1")
    keys = {p for p in _paths(failed) if p.startswith("failed_trials[].")}
    assert keys == {k for k in documented if k.startswith("failed_trials[].")}


MUTATIONS: list[tuple[str, Any]] = [
    ("a mean", lambda d: d["tables"][0]["rows"][0]["figure"].update(center=57.0)),
    ("an interval", lambda d: d["tables"][1]["rows"][1]["figure"].update(ci_high=80.0)),
    ("device MiB/s", lambda d: d["tables"][0]["rows"][1].update(device_mib_s=81.0)),
    (
        "a modelled amplification",
        lambda d: d["tables"][0]["rows"][0].update(write_amplification_model=1.5),
    ),
    ("a prediction", lambda d: d["predicted"]["rows"][2].update(predicted=40.0)),
    (
        "a ratio",
        lambda d: d["verdict"]["rankings"][0]["ranked"][1]["vs_best"].update(ci_low=0.6),
    ),  # fmt: skip
    (
        "usable space",
        lambda d: d["verdict"]["rankings"][1]["ranked"][0].update(usable_bytes=900 * MiB),
    ),  # fmt: skip
    ("a warning", lambda d: d["tables"][1]["rows"][1]["notes"].pop()),
    ("a next step", lambda d: d["verdict"]["next_steps"].append("rerun")),
    ("a header line", lambda d: d["header"].pop(2)),
]


@pytest.mark.parametrize("what", [m[0] for m in MUTATIONS])
def test_a_json_that_differs_from_the_terminal_is_caught(demo_db: Path, what: str) -> None:
    """The check itself: one figure or line changed in the JSON, and it fails."""
    text, doc = both(demo_db, "1")
    dict(MUTATIONS)[what](doc)
    with pytest.raises(AssertionError):
        check_report(text, doc)
