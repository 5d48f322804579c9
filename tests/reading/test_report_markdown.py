"""The report as Markdown: the HTML page's tables, no charts, and its own syntax escaped in record text."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kitbench.reading import report

KEPT = Path(__file__).resolve().parents[2] / "docs" / "records"


def test_markdown_has_the_same_tables_and_no_plots() -> None:
    html_page = report.build([str(KEPT)]).text
    md = report.build([str(KEPT)], "markdown").text
    assert md.startswith(report.MARKER) and "<svg" not in md
    html_headers = re.findall(r'<tr><th scope="col">(.*?)</th>', html_page)
    lines = md.splitlines()
    md_headers = [lines[at - 1].split(" | ")[0][2:] for at, line in enumerate(lines) if line.startswith("|---")]
    assert md_headers == html_headers and len(md_headers) >= 9
    assert "chart(s) in the HTML report" in md


def test_markdown_escapes_its_own_syntax_in_record_text(tmp_path: Path) -> None:
    record = json.loads((KEPT / "h100-fnn.json").read_text())
    record["environment"]["cpu"] = "@octocat see http://evil.example/x and www.evil.example $e^x$ ~~gone~~ | ![i](u)"
    (tmp_path / "r.json").write_text(json.dumps(record))
    page = report.build([str(tmp_path / "r.json")], "markdown").text
    assert "octocat" in page and "evil" in page
    for raw in ("@octocat", "http://", "www.evil", "$e^x$", "~~gone", "| ![i]", "[i](u)"):
        assert raw not in page, raw
