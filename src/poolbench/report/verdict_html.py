"""The verdict on the HTML page: the same records and texts as the terminal's, escaped by
`svg.fmt`. Ids (stable, for tests and links): `answer`, `ranking-<workload>`,
`level-changes`, `next-steps`."""

from __future__ import annotations

import re
from collections.abc import Sequence

from poolbench.report.data import RunData, fmt_bytes
from poolbench.report.svg import Safe, fmt, join
from poolbench.report.verdict import Ranking, Verdict, ratio_text
from poolbench.report.verdict_text import HOW_VERDICT, level_changes, next_steps, ranking_sentence

HEAD = ("#", "configuration", "figure", "unit", "vs best", "usable", "survives failures")


def _id(workload: str) -> str:
    return "ranking-" + (re.sub(r"[^a-z0-9]+", "-", workload.lower()).strip("-") or "x")


def _row(rk: Ranking, i: int) -> Safe:
    s = rk.standings[i]
    c = s.cost
    usable = "–" if c.usable_bytes is None else fmt_bytes(c.usable_bytes)
    usable += " (planner)" if c.usable_source == "planner" else ""
    sig = s.ratio is not None and s.ratio.significant
    why = s.ratio.undetermined if s.ratio is not None and s.ratio.undetermined else ""
    return fmt(
        '<tr><td class="num">{}</td><td>{}</td><td class="num">{}</td><td>{}</td>'
        '<td class="{}" title="{}">{}</td><td class="num">{}</td><td class="num">{}</td></tr>',
        i + 1, s.label, rk.figure_text(i), rk.unit, "sig" if sig else "nsd", why,
        ratio_text(s.ratio), usable,
        "–" if c.failures_survived is None else c.failures_survived,
    )  # fmt: skip


def _ranking(rk: Ranking) -> list[Safe]:
    better = "higher" if rk.higher_better else "lower"
    out = [fmt("<h3>{} ({}), {} is better</h3>", rk.workload, rk.unit, better)]
    if len(rk.standings) > 1:
        head = join([fmt("<th>{}</th>", h) for h in HEAD])
        rows = join([_row(rk, i) for i in range(len(rk.standings))], "\n")
        out.append(fmt('<table id="{}"><tr>{}</tr>{}</table>', _id(rk.workload), head, rows))
    out.append(fmt('<p class="answer">{}</p>', ranking_sentence(rk)))
    return out


def _list(list_id: str, heading: str, items: Sequence[str]) -> list[Safe]:
    if not items:
        return []
    lis = join([fmt("<li>{}</li>", t) for t in items])
    return [fmt("<h3>{}</h3>", heading), fmt('<ul id="{}">{}</ul>', list_id, lis)]


def section(run: RunData, v: Verdict, extra: Sequence[str] = ()) -> list[Safe]:
    """The answer, first on the page: rankings, each choice's cost, the next steps."""
    body = [Safe('<h2 id="answer">The answer</h2>'), fmt('<p class="nsd">{}</p>', HOW_VERDICT)]
    for rk in v.rankings:
        body += _ranking(rk)
    changes = [lc.sentence() for lc in level_changes(v, run)]
    body += _list("level-changes", "What each choice costs and buys", changes)
    body += _list("next-steps", "Next", next_steps(v, run, extra))
    return body
