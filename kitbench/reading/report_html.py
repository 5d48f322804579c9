"""The report's document as one self-contained HTML page: inline CSS and SVG, no script, no network."""

from __future__ import annotations

import html

from kitbench import __version__
from kitbench.reading import svg
from kitbench.reading.report_sections import Section

_CONTROL = svg.CONTROL  # C0, C1, DEL, line separators, bidi overrides: text from records is data
_CSS = (
    """
:root{color-scheme:light dark;--fg:#1b1f24;--bg:#fff;--muted:#57606a;--rule:#d0d7de;--head:#f6f8fa;
--c0:#0969da;--c1:#cf222e;--c2:#1a7f37;--c3:#8250df;--c4:#bc4c00;--c5:#1b7c83;--c6:#bf3989;--c7:#6e7781;
--c8:#9a6700;--c9:#1f2f8f;--c10:#6f7f00;--c11:#7c3a1e}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--muted:#8d96a0;--rule:#30363d;--head:#161b22;
--c0:#58a6ff;--c1:#ff7b72;--c2:#3fb950;--c3:#d2a8ff;--c4:#ffa657;--c5:#39c5cf;--c6:#ff9bce;--c7:#8b949e;
--c8:#e3b341;--c9:#8c9eff;--c10:#b5cc3a;--c11:#d4926a}}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg);
margin:2em auto;max-width:1200px;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid var(--rule);padding-bottom:.2em;margin-top:1.6em}
p.lead,p.intro,nav{color:var(--muted)}nav a{margin-right:1em;color:var(--c0)}
.scroll{overflow-x:auto}table{border-collapse:collapse;margin:.6em 0;font-size:12.5px}
th,td{border:1px solid var(--rule);padding:3px 6px;text-align:left;vertical-align:top}
th{background:var(--head)}td{font-variant-numeric:tabular-nums;white-space:nowrap}td.w{white-space:normal;overflow-wrap:break-word;max-width:40em}
#machines table,#environments table{width:100%}
#machines td,#environments td{white-space:normal;overflow-wrap:break-word}
#environments table{table-layout:fixed}#environments th:first-child{width:16em}
caption{text-align:left;color:var(--muted);padding:.2em 0}.note{color:var(--c4)}
.charts{display:flex;flex-wrap:wrap;gap:12px}svg.chart{width:560px;max-width:100%;height:auto;
border:1px solid var(--rule);background:var(--bg)}
svg text{fill:var(--fg);font-size:11px}svg .title{font-weight:600;font-size:12px}
svg .axis rect,svg .axis line{stroke:var(--muted)}svg .axis .grid{stroke:var(--rule)}
svg .marker line{stroke:var(--fg)}svg .line{stroke-width:1.8}svg .band{stroke:none;opacity:.18}
"""
    + "".join(
        f"svg .s{i}{{stroke:var(--c{i});fill:var(--c{i})}}svg polyline.s{i}{{fill:none}}" for i in range(svg.PALETTE)
    )
    + """
@media print{body{margin:0;max-width:none;font-size:10px}nav{display:none}section{break-inside:avoid-page}
svg.chart{break-inside:avoid;width:48%}a{color:inherit;text-decoration:none}}
"""
)


_NOWRAP = 24


def _h(text: str) -> str:
    return html.escape(_CONTROL.sub(" ", text), quote=True)


def render(sections: list[Section], summary: str) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>kitbench report: {_h(summary)}</title><style>{_CSS}</style></head><body>",
        f'<header><h1>kitbench report</h1><p class="lead">{_h(summary)}. Built by kitbench {_h(__version__)} '
        "from the records listed at the end; every number is read from them.</p>",
        "<nav>" + "".join(f'<a href="#{s.key}">{_h(s.title)}</a>' for s in sections) + "</nav></header>",
    ]
    for s in sections:
        out.append(f'<section id="{s.key}"><h2>{_h(s.title)}</h2><p class="intro">{_h(s.intro)}</p>')
        for t in s.tables:
            out.append(
                '<div class="scroll"><table>'
                + (f"<caption>{_h(t.caption)}</caption>" if t.caption else "")
                + "<thead><tr>"
                + "".join(f'<th scope="col">{_h(c)}</th>' for c in t.header)
                + "</tr></thead><tbody>"
            )
            # Short cells (a number and its unit, "fnn/resident") never wrap: broken mid-word they misread.
            out += [
                "<tr>"
                + "".join(f"<td>{_h(c)}</td>" if len(c) <= _NOWRAP else f'<td class="w">{_h(c)}</td>' for c in row)
                + "</tr>"
                for row in t.rows
            ]
            out.append("</tbody></table></div>")
        if s.charts:
            out.append('<div class="charts">' + "".join(s.charts) + "</div>")
        out += [f'<p class="note">{_h(n)}</p>' for n in s.notes]
        out.append("</section>")
    out.append("</body></html>\n")
    return "\n".join(out)
