"""The HTML report's frame: the inline style, the self-check script and the page around the
sections, with a Content-Security-Policy that allows only that script (by hash)."""

from __future__ import annotations

import base64
import hashlib

from poolbench.report import header
from poolbench.report.data import RunData
from poolbench.report.svg import Safe, fmt, join

# Fits a narrow window without scrolling the page sideways: a table wider than the column
# scrolls inside its own box (display:block + overflow-x), a chart scales down to the column
# (max-width:100%, its SVG sized to its own labels by svg.py), and a long word (a path, a
# configuration) breaks rather than widen the page.
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;
padding:0 16px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin:20px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px;display:block;max-width:100%;
overflow-x:auto}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;white-space:nowrap}
.sig{font-weight:bold;white-space:nowrap}.nsd{color:#777}.warn{color:#a15c00}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;overflow:auto;font-size:12px;
white-space:pre-wrap;word-break:break-all}
dl.hdr{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 12px}
dl.hdr dt{font-weight:bold}dl.hdr dd{margin:0}
h1,h2,h3,p,li,dd{overflow-wrap:anywhere}
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


def page(run: RunData, body: list[Safe]) -> Safe:
    """The self-contained page of a run's report."""
    return document(f"poolbench — {header.title(run)}", body)


def document(title: str, body: list[Safe]) -> Safe:
    """A self-contained page: a CSP that allows only the page's own script, by hash."""
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
            fmt("<title>{}</title>", title),
            fmt("<style>{}</style>", Safe(CSS)),
            Safe(f"<script>{SCRIPT}</script>"),
            Safe("</head><body>"),
            join(body, "\n"),
            Safe("</body></html>\n"),
        ],
        "\n",
    )
