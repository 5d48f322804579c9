"""The report's document as GitHub-flavoured Markdown (the same tables, no charts), and the one escape
for record text in every Markdown kitbench writes."""

from __future__ import annotations

from kitbench.reading import svg
from kitbench.reading.report_sections import Section

_CONTROL = svg.CONTROL  # C0, C1, DEL, line separators, bidi overrides: text from records is data
_MD_ESCAPES = (
    ("&", "&amp;"),
    ("<", "&lt;"),
    (">", "&gt;"),
    ("|", "\\|"),
    ("`", "\\`"),
    ("*", "\\*"),
    ("_", "\\_"),
    ("[", "\\["),
    ("]", "\\]"),
    ("~", "\\~"),
    ("$", "\\$"),
    ("#", "\\#"),
    ("://", "&#58;//"),
    ("@", "&#64;"),
    ("www.", "www&#46;"),
)


def md_cell(text: str) -> str:
    """Text from records as Markdown that GitHub shows as it is, the one escape for every Markdown kitbench
    writes: no column break, code span, HTML, line break, emphasis, strike-through, math ($...$), image,
    @mention, bare link (http://, www.) or emoji code."""
    text = _CONTROL.sub(" ", text).replace("\\", "\\\\")
    for char, entity in _MD_ESCAPES:
        text = text.replace(char, entity)
    return text.strip() or " "


def render(sections: list[Section], summary: str) -> str:
    out = [
        "# kitbench report",
        "",
        f"{md_cell(summary)}. Every number is read from the records listed under Records.",
        "",
    ]
    for s in sections:
        out += [f"## {s.title}", "", md_cell(s.intro), ""]
        for t in s.tables:
            if t.caption:
                out += [md_cell(t.caption), ""]
            out.append("| " + " | ".join(md_cell(c) for c in t.header) + " |")
            out.append("|" + "---|" * len(t.header))
            out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in t.rows]
            out.append("")
        if s.charts:
            out += [f"{len(s.charts)} chart(s) in the HTML report (`--format html`).", ""]
        out += [f"> {md_cell(n)}" for n in s.notes] + ([""] if s.notes else [])
    return "\n".join(out)
