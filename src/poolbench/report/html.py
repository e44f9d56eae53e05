"""`poolbench report RUN --html FILE`: one self-contained page that works offline.

No CDN, no external file, no network: styles and a small self-check script are inline, the
charts are inline SVG generated here. A Content-Security-Policy forbids every load and every
script except that one inline script (by hash), as a second wall behind escaping.

Everything that comes from the store — names, configurations, warnings, metadata, the study
file, commands — is escaped: `svg.fmt` escapes every argument unless it is `Safe` markup we
built ourselves, so a pool called `<img src=x onerror=alert(1)>` prints as that text.

The charts are chosen and drawn in `html_charts` (ids listed there), the page's style and
self-check script are in `html_page`.
"""

from __future__ import annotations

import json
import shlex

from poolbench.planner.performance import DiskSpeed
from poolbench.report import header, html_page, predicted, replay_view, verdict_html
from poolbench.report.data import RunData, fmt_value
from poolbench.report.html_charts import extra_charts, latency_section, unique_id, workload_bars
from poolbench.report.svg import Safe, fmt, join
from poolbench.report.tables import Baseline, Footnotes, WorkloadTable, short_change, tables
from poolbench.report.verdict import verdict


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


def _commands(run: RunData) -> Safe:
    rows = [Safe("<tr><th>#</th><th>command</th><th>seconds</th><th>exit</th></tr>")]
    for i, c in enumerate(run.commands, 1):
        rows.append(
            fmt(
                '<tr><td class="num">{}</td><td><code>{}</code></td>'
                '<td class="num">{}</td><td class="num">{}</td></tr>',
                i,
                shlex.join(c.argv),
                f"{c.duration_s:.2f}",
                "" if c.returncode is None else c.returncode,
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
                m.config,
                m.workload,
                m.replicate + 1,
                fmt_value(m.value),
                m.unit,
                m.app_bytes,
                f"{m.seconds:.3f}",
                "" if m.device_bytes is None else m.device_bytes,
                fmt_value(m.device_mib_s),
                "; ".join(m.warnings),
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
        body.append(workload_bars(run, wt, unique_id("chart-bar", wt.workload, used)))
        body.append(_table(run, wt, baseline))
        body += latency_section(
            run, wt.workload, unique_id("chart-latency", wt.workload, used), notes
        )
    extra = extra_charts(run)
    if extra:
        body.append(Safe('<h2 id="curves">Across configurations</h2>'))
        for heading, chart in extra:
            body += [fmt("<h3>{}</h3>", heading), chart]
    body += _failed_trials(run)
    body += replay_view.html_section(run)  # how faithful each replayed trace was
    body += predicted.html_section(run, disk)  # the model beside the measured figures
    body.append(Safe('<h2 id="warnings">Warnings</h2>'))
    body.append(_warnings(notes))
    body += _records(run)
    return str(html_page.page(run, body))


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
                {
                    "argv": run.argv,
                    **{k: v for k, v in run.metadata.stored.items() if k != "study_text"},
                },
                indent=2,
                ensure_ascii=False,
            ),
        ),
    ]
    study_text = run.metadata.study_text
    if study_text:
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
