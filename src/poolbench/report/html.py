"""`poolbench report RUN --html FILE`: one self-contained page that works offline.

No CDN, no external file, no network: styles and a small self-check script are inline, the
charts are inline SVG generated here. A Content-Security-Policy forbids every load and every
script except that one inline script (by hash), as a second wall behind escaping.

Everything that comes from the store — names, configurations, warnings, metadata, the study
file, commands — is escaped: `svg.fmt` escapes every argument unless it is `Safe` markup we
built ourselves, so a pool called `<img src=x onerror=alert(1)>` prints as that text.

Chart ids (stable, for tests and links): `chart-bar-<workload>` per workload,
`chart-recordsize-<workload>` when configurations differ by the `recordsize` factor,
`chart-record-<family>` when workloads of one family differ by application record size
(the mirror study's iozone set), `chart-fill-<workload>` when a factor is `fill`,
`chart-space` when the pool descriptions carry `usable_bytes`, `chart-latency-<workload>`
per random or synchronous workload whose runs recorded completion latency (p50/p90/p99/p99.9
per configuration), `chart-qd-<workload base>` when workloads sweep the queue depth
(report/qdcurve.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
from collections import defaultdict

from poolbench.errors import UsageError
from poolbench.planner.performance import DiskSpeed
from poolbench.report import header, predicted, qdcurve, verdict_html
from poolbench.report.costs import POOL_FACTORS, predicted_usable
from poolbench.report.data import Cell, RunData, fmt_value
from poolbench.report.metrics import LATENCY, latency_matters
from poolbench.report.svg import (
    Bar,
    LatencyRow,
    Point,
    Safe,
    bar_chart,
    fmt,
    join,
    latency_chart,
    line_chart,
)
from poolbench.report.tables import (
    Baseline,
    Footnotes,
    WorkloadTable,
    short_change,
    tables,
)
from poolbench.report.verdict import verdict
from poolbench.units import parse_size

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;
padding:0 16px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin:20px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;white-space:nowrap}
.sig{font-weight:bold;white-space:nowrap}.nsd{color:#777}.warn{color:#a15c00}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;overflow:auto;font-size:12px;
white-space:pre-wrap;word-break:break-all}
dl.hdr{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dl.hdr dt{font-weight:bold}
dl.hdr dd{margin:0}
svg.chart{display:block;margin:6px 0 14px;max-width:100%;height:auto}
svg .ct{font:bold 13px sans-serif}svg .lbl,svg .val{font:12px sans-serif}
svg .tick{font:11px sans-serif;fill:#555}svg .axis{font:12px sans-serif;fill:#333}
svg .grid{stroke:#e5e5e5}svg .frame{fill:none;stroke:#ccc}
svg .err{stroke:#222;stroke-width:1.5;fill:none}
svg path.series{fill:none;stroke-width:2}svg path.err[stroke]{stroke-width:1.2}
#pb-selfcheck{color:#777;font-size:12px}
"""

# Runs after load: counts the charts that really rendered (non-empty box) and records script
# errors, into #pb-selfcheck — visible to a reader and to a headless-browser test.
SCRIPT = """
(function(){
  var errors = [];
  window.addEventListener('error', function(e){ errors.push(String(e.message || e.type)); }, true);
  window.addEventListener('load', function(){
    var out = document.getElementById('pb-selfcheck');
    var ok = [], bad = [];
    document.querySelectorAll('svg.chart').forEach(function(s){
      var b = s.getBBox();
      (b.width > 0 && b.height > 0 ? ok : bad).push(s.id);
    });
    out.setAttribute('data-rendered', ok.join(' '));
    out.setAttribute('data-failed', bad.join(' '));
    out.setAttribute('data-errors', String(errors.length));
    out.textContent = 'self-check: ' + ok.length + ' chart(s) rendered' +
      (bad.length ? ', not rendered: ' + bad.join(' ') : '') +
      (errors.length ? '; script errors: ' + errors.join('; ') : '; no script errors');
  });
})();
"""


def _chart_id(prefix: str, text: str, used: set[str]) -> str:
    """A stable, unique element id: prefix-<name in lowercase letters, digits and '-'>."""
    s = prefix + "-" + (re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x")
    base, i = s, 2
    while s in used:
        s, i = f"{base}-{i}", i + 1
    used.add(s)
    return s


def _size_bytes(text: str) -> float | None:
    """A size level in bytes by the one size grammar (4K = 4096, 4KB = 4000); None if not."""
    try:
        return float(parse_size(text))
    except UsageError:
        return None


def _size_text(n: float) -> str:
    for unit, size in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= size and n % size == 0:
            return f"{int(n // size)}{unit}"
    return f"{int(n)}"


def _percent(text: str) -> float | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%?", text.strip())
    return float(m.group(1)) if m else None


def _point(cell: Cell, x: float) -> Point:
    s = cell.summary
    ok = s.determined  # no interval (identical or < 2 replicates): the mean alone
    return Point(x, s.mean, s.ci_low if ok else None, s.ci_high if ok else None)


# -- sections ------------------------------------------------------------------------------
def _table(run: RunData, wt: WorkloadTable, baseline: Baseline | None) -> Safe:
    head = ["configuration", "mean ± 95% CI", "unit"]
    if baseline is not None:
        head.append(f"vs {baseline.label}")
    amps = any(r.cell.amplification is not None for r in wt.rows)
    head += ["runs", "device MiB/s", *(["write amp. (model)"] if amps else []), "values", "notes"]
    rows = [fmt("<tr>{}</tr>", join([fmt("<th>{}</th>", h) for h in head]))]
    for r in wt.rows:
        tds = [
            fmt("<td>{}</td>", run.label(r.cell.config)),
            fmt('<td class="num">{}</td>', r.figure_text),
            fmt("<td>{}</td>", r.cell.unit),
        ]
        if baseline is not None:
            sig = r.change is not None and r.change.significant
            tds.append(fmt('<td class="{}">{}</td>', "sig" if sig else "nsd", short_change(r)))
        dev = r.cell.device_mean
        tds += [
            fmt('<td class="num">{}</td>', r.cell.summary.n),
            fmt('<td class="num">{}</td>', "unverified" if dev is None else fmt_value(dev)),
            *([fmt('<td class="num">{}</td>', r.cell.amplification_text())] if amps else []),
            fmt('<td class="num">{}</td>', ", ".join(fmt_value(v) for v in r.cell.values)),
            fmt(
                '<td class="warn">{}</td>',
                join([fmt('<a href="#note-{}">⚠{}</a>', n, n) for n in r.notes], " "),
            ),
        ]
        rows.append(fmt("<tr>{}</tr>", join(tds)))
    return fmt("<table>{}</table>", join(rows, "\n"))


def _notes_cell(numbers: list[int]) -> Safe:
    links = [fmt('<a href="#note-{}">⚠{}</a>', n, n) for n in numbers]
    return fmt('<td class="warn">{}</td>', join(links, " "))


def _latency(run: RunData, workload: str, chart_id: str, notes: Footnotes) -> list[Safe]:
    """The workload's completion-latency chart and table (every percentile, per configuration,
    of all I/Os of the runs with its 95% CI; the geometric mean of the runs' percentiles for
    runs stored without histograms, footnoted), for random and synchronous workloads; the
    other workloads' latency is in the export."""
    cells = [c for c in (run.cell(cfg, workload) for cfg in run.configs) if c is not None]
    cells = [c for c in cells if any(c.has(m) for m in LATENCY.values())]
    if not cells or not latency_matters(cells[0].workload_def):
        return []  # shown where latency decides (random I/O, sync writes), as in the tables
    rows, trs = [], []
    for c in cells:
        figs = {k: c.figure(m) for k, m in LATENCY.items() if c.has(m)}
        marks = [
            (k, f.center, f.low if f.determined else None, f.high if f.determined else None)
            for k, f in figs.items()
        ]
        rows.append(LatencyRow(run.label(c.config), marks))
        warned = {notes.number(w) for m in LATENCY.values() for w in c.metric_warnings(m)}
        tds = [fmt("<td>{}</td>", run.label(c.config))]
        tds += [
            fmt('<td class="num">{}</td>', figs[k].text() if k in figs else "–") for k in LATENCY
        ]
        trs.append(fmt("<tr>{}</tr>", join([*tds, _notes_cell(sorted(warned))])))
    head = join(
        [fmt("<th>{}</th>", h) for h in ("configuration", *(f"{k} µs" for k in LATENCY), "notes")]
    )
    table = fmt("<table><tr>{}</tr>{}</table>", head, join(trs, "\n"))
    pooled = any(f.pooled for c in cells for m in LATENCY.values() if c.has(m)
                 for f in [c.figure(m)])  # fmt: skip
    what = ("percentiles of all I/Os of the runs" if pooled
            else "geometric mean of the runs' percentiles")  # fmt: skip
    title = f"{workload}: completion latency per configuration ({what}, 95% CI)"
    return [latency_chart(chart_id, title, rows), table]


def _bar_chart(run: RunData, wt: WorkloadTable, chart_id: str) -> Safe:
    bars = []
    for r in wt.rows:
        s = r.cell.summary
        ok = s.determined
        note = short_change(r) if r.role == "compared" else ""
        bars.append(
            Bar(
                run.label(r.cell.config),
                s.mean,
                s.ci_low if ok else None,
                s.ci_high if ok else None,
                note,
            )
        )
    return bar_chart(chart_id, f"{wt.workload}: mean with 95% CI", wt.unit, bars)


def _factor_curves(
    run: RunData, factor: str, workload: str, chart_id: str, parse: str
) -> Safe | None:
    series: dict[str, list[Point]] = defaultdict(list)
    ticks: dict[float, str] = {}
    unit = ""
    for cfg in run.configs:
        cell = run.cell(cfg, workload)
        level = run.levels(cfg).get(factor)
        if cell is None or level is None:
            continue
        x = _size_bytes(level) if parse == "size" else _percent(level)
        if x is None or x <= 0:
            return None
        ticks[x] = level
        unit = cell.unit
        series[run.label(run.without(cfg, factor))].append(_point(cell, x))
    if len(ticks) < 2:
        return None
    if parse == "size":
        title = f"{workload}: throughput against {factor}"
        x_label = f"{factor} (log scale)"
    else:
        title = f"{workload}: throughput as the pool fills"
        x_label = "fill level (%)"
    return line_chart(
        chart_id,
        title,
        x_label,
        unit,
        sorted(series.items()),
        log2_x=parse == "size",
        x_tick_text=ticks,
    )


_RECORD_NAME = re.compile(r"^(.*)-(\d+[kmgKMG])$")


def _record_families(run: RunData) -> dict[str, list[tuple[str, float]]]:
    """Workload family → [(workload, record bytes)] for families measured at ≥ 2 sizes."""
    fams: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for w in run.workloads:
        m = _RECORD_NAME.match(w)
        cell = next((c for c in (run.cell(cfg, w) for cfg in run.configs) if c), None)
        bs = cell.workload_def.get("fio", {}).get("bs") if cell else None
        if not m or bs is None:
            continue
        try:
            size = float(str(bs))
        except ValueError:
            size = _size_bytes(str(bs)) or 0.0
        if size > 0:
            fams[m.group(1)].append((w, size))
    return {f: v for f, v in fams.items() if len({s for _w, s in v}) >= 2}


def _record_curves(
    run: RunData, family: str, members: list[tuple[str, float]], chart_id: str
) -> Safe:
    series: dict[str, list[Point]] = defaultdict(list)
    unit = ""
    for cfg in run.configs:
        for w, size in members:
            cell = run.cell(cfg, w)
            if cell is not None:
                unit = cell.unit
                series[run.label(cfg)].append(_point(cell, size))
    ticks = {s: _size_text(s) for _w, s in members}
    return line_chart(
        chart_id,
        f"{family}: throughput against application record size",
        "record size (log scale)",
        unit,
        list(series.items()),
        log2_x=True,
        x_tick_text=ticks,
    )


def _space_chart(run: RunData) -> Safe | None:
    """Usable space per layout as the pool reported it (`usable_bytes` in its description),
    each beside the planner's prediction for the same layout, disks and ZFS version."""
    bars: list[Bar] = []
    seen: set[str] = set()
    for cfg in run.configs:
        cell = next((c for c in (run.cell(cfg, w) for w in run.workloads) if c), None)
        pool = cell.pool() if cell else {}
        usable = pool.get("usable_bytes")
        if not isinstance(usable, int | float) or usable <= 0:
            continue
        levels = run.levels(cfg)
        key = " ".join(f"{k}={levels[k]}" for k in POOL_FACTORS if k in levels) or cfg
        if key in seen:
            continue
        seen.add(key)
        label = run.label(key)
        predicted = predicted_usable(run, levels, str(pool.get("zfs_version") or ""))
        if predicted is None:
            bars.append(Bar(label, usable / 1024**3, None, None))
            continue
        diff = (usable - predicted) / predicted * 100
        bars.append(Bar(f"{label} (pool)", usable / 1024**3, None, None, f"{diff:+.2f}% vs plan"))
        bars.append(Bar(f"{label} (planner)", predicted / 1024**3, None, None, "predicted"))
    if not bars:
        return None
    return bar_chart(
        "chart-space", "usable space per layout: as the pool reports it, and as planned", "GiB",
        bars,
    )  # fmt: skip


def _charts(run: RunData) -> list[tuple[str, Safe]]:
    """Extra charts (beyond the per-workload bars), with their headings."""
    used: set[str] = set()
    out: list[tuple[str, Safe]] = []
    factors = run.factors()
    for factor, kind, prefix in (
        ("recordsize", "size", "chart-recordsize"),
        ("fill", "percent", "chart-fill"),
    ):
        if factor not in factors:
            continue
        for w in run.workloads:
            chart = _factor_curves(run, factor, w, _chart_id(prefix, w, used), kind)
            if chart is not None:
                out.append((f"{w} against {factor}", chart))
    for fam, members in _record_families(run).items():
        out.append(
            (
                f"{fam} against record size",
                _record_curves(run, fam, members, _chart_id("chart-record", fam, used)),
            )
        )
    for base, sweep in qdcurve.families(run).items():
        chart_id = _chart_id("chart-qd", base, used)
        out.append((f"{base}: queue-depth curve", qdcurve.chart(run, base, sweep, chart_id)))
    space = _space_chart(run)
    if space is not None:
        out.append(("usable space", space))
    return out


def _commands(run: RunData) -> Safe:
    rows = [Safe("<tr><th>#</th><th>command</th><th>seconds</th><th>exit</th></tr>")]
    for i, c in enumerate(run.commands, 1):
        rows.append(
            fmt(
                '<tr><td class="num">{}</td><td><code>{}</code></td>'
                '<td class="num">{}</td><td class="num">{}</td></tr>',
                i,
                shlex.join(c["argv"]),
                f"{float(c['duration_s']):.2f}",
                "" if c["returncode"] is None else c["returncode"],
            )
        )
    return fmt("<table>{}</table>", join(rows, "\n"))


def _measurements(run: RunData) -> Safe:
    head = (
        "configuration",
        "workload",
        "replicate",
        "value",
        "unit",
        "app bytes",
        "seconds",
        "device bytes",
        "device MiB/s",
        "warnings",
    )
    rows = [fmt("<tr>{}</tr>", join([fmt("<th>{}</th>", h) for h in head]))]
    for m in run.measurements:
        rows.append(
            fmt(
                "<tr><td>{}</td><td>{}</td><td class=num>{}</td><td class=num>{}</td><td>{}</td>"
                "<td class=num>{}</td><td class=num>{}</td><td class=num>{}</td>"
                "<td class=num>{}</td><td class=warn>{}</td></tr>",
                m["config"],
                m["workload"],
                int(m["replicate"]) + 1,
                fmt_value(m["value"]),
                m["unit"],
                m["app_bytes"],
                f"{float(m['seconds']):.3f}",
                "" if m["device_bytes"] is None else m["device_bytes"],
                fmt_value(m["device_mib_s"]),
                "; ".join(str(w) for w in m["warnings"]),
            )
        )
    return fmt("<table>{}</table>", join(rows, "\n"))


def render(run: RunData, baseline: Baseline | None, disk: DiskSpeed | None = None) -> str:
    notes = Footnotes()
    bases = {baseline.factor: baseline.level} if baseline and baseline.factor else {}
    answer = verdict(run, bases)
    wts = tables(run, baseline, notes, known=answer)
    used: set[str] = set()
    body: list[Safe] = [
        fmt("<h1>{}</h1>", header.title(run)),
        # The answer first, from the same Verdict the terminal ends with: one interval per
        # ratio, wherever it is shown.
        *verdict_html.section(run, answer, predicted.next_steps(run, disk)),
        Safe('<h2 id="how">What was measured, and how</h2>'),
        fmt(
            '<dl class="hdr">{}</dl>',
            join([fmt("<dt>{}</dt><dd>{}</dd>", k, v) for k, v in header.lines(run, baseline)]),
        ),
        Safe('<h2 id="workloads">Per workload</h2>'),
    ]
    for wt in wts:
        body.append(fmt("<h3>{} ({})</h3>", wt.workload, wt.unit))
        body.append(_bar_chart(run, wt, _chart_id("chart-bar", wt.workload, used)))
        body.append(_table(run, wt, baseline))
        body += _latency(run, wt.workload, _chart_id("chart-latency", wt.workload, used), notes)
    extra = _charts(run)
    if extra:
        body.append(Safe('<h2 id="curves">Across configurations</h2>'))
        for heading, chart in extra:
            body += [fmt("<h3>{}</h3>", heading), chart]
    body += _failed_trials(run)
    body += predicted.html_section(run, disk)  # the model beside the measured figures
    body.append(Safe('<h2 id="warnings">Warnings</h2>'))
    body.append(_warnings(notes))
    body += _records(run)
    return str(_page(run, body))


def _warnings(notes: Footnotes) -> Safe:
    if not notes.items:
        return Safe("<p>none</p>")
    return fmt(
        "<ol>{}</ol>",
        join(
            [
                fmt('<li id="note-{}" class="warn">{}</li>', i, t)
                for i, t in enumerate(notes.items, 1)
            ]
        ),
    )


def _records(run: RunData) -> list[Safe]:
    """The page's record of the run: every measurement, the metadata, the study file, every
    command run, and the self-check's slot."""
    body = [
        Safe('<h2 id="measurements">All measurements</h2>'),
        _measurements(run),
        Safe('<h2 id="metadata">Metadata</h2>'),
        fmt(
            "<pre>{}</pre>",
            json.dumps(
                {"argv": run.argv, **{k: v for k, v in run.metadata.items() if k != "study_text"}},
                indent=2,
                ensure_ascii=False,
            ),
        ),
    ]
    study_text = run.metadata.get("study_text")
    if isinstance(study_text, str) and study_text:
        body += [Safe('<h2 id="study">Study file</h2>'), fmt("<pre>{}</pre>", study_text)]
    body += [
        fmt('<h2 id="commands">Commands run ({})</h2>', len(run.commands)),
        _commands(run),
        Safe(
            '<p id="pb-selfcheck" data-rendered="" data-failed="" data-errors="">'
            "self-check did not run (scripts disabled?)</p>"
        ),
    ]
    return body


def _page(run: RunData, body: list[Safe]) -> Safe:
    """The self-contained page: a CSP that allows only the page's own script, by hash."""
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    csp = (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'"
    )
    return join(
        [
            Safe('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'),
            fmt('<meta http-equiv="Content-Security-Policy" content="{}">', csp),
            Safe('<meta name="viewport" content="width=device-width, initial-scale=1">'),
            fmt("<title>{}</title>", f"poolbench — {header.title(run)}"),
            fmt("<style>{}</style>", Safe(CSS)),
            Safe(f"<script>{SCRIPT}</script>"),
            Safe("</head><body>"),
            join(body, "\n"),
            Safe("</body></html>\n"),
        ],
        "\n",
    )


def _failed_trials(run: RunData) -> list[Safe]:
    """The trials that failed (torn down, not measured), each with its reason."""
    if not run.failed_trials:
        return []
    rows = [
        fmt(
            '<tr class="warn"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            f.trial_index,
            run.label(f.config),
            f.replicate + 1,
            f.reason,
        )  # fmt: skip
        for f in run.failed_trials
    ]
    return [
        fmt('<h2 id="failed-trials">Failed trials ({})</h2>', len(run.failed_trials)),
        fmt(
            "<table><tr><th>trial</th><th>configuration</th><th>replicate</th>"
            "<th>reason</th></tr>{}</table>",
            join(rows),
        ),
        fmt("<p>Measure them with: {}</p>", run.resume_hint),
    ]
