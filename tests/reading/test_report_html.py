"""The report as an HTML page: short cells kept on one line, and a real headless browser renders and prints it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kitbench.reading import report

KEPT = Path(__file__).resolve().parents[2] / "docs" / "records"


def test_short_cells_never_break_mid_word() -> None:
    """ "residen t", "tutor ial": a table squeezed to the page broke words. Short cells keep their line; long
    ones (hashes, command lines) wrap, between words first."""
    page = report.build([str(KEPT)]).text
    assert "td{font-variant-numeric:tabular-nums;white-space:nowrap}" in page and "anywhere" not in page
    assert "<td>fnn/resident</td>" in page and "<td>tutorial</td>" in page
    assert re.search(r'<td class="w">[0-9a-f]{64}</td>', page)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (.ci/run installs Debian's package)")
def test_a_real_browser_renders_the_page_without_errors(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    page = tmp_path / "report.html"
    built = report.build([str(KEPT)])  # its sections and charts: test_report checks them against the records
    assert built.sections and "<svg" in built.text
    report.write(page, built.text)
    common = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [*common, f"--screenshot={shot}", "--window-size=1200,2400", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not re.search(r"Uncaught|ERR_|Failed to load|CONSOLE", done.stderr), done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0
    for section in built.sections:
        assert f'<section id="{section}">' in dom.stdout
    assert dom.stdout.count("<svg") == built.text.count("<svg")
    pdf = tmp_path / "report.pdf"  # printable: the print stylesheet gives a PDF of several pages
    printed = subprocess.run(
        [*common, "--no-pdf-header-footer", f"--print-to-pdf={pdf}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert printed.returncode == 0 and pdf.read_bytes()[:5] == b"%PDF-"
    assert len(re.findall(rb"/Type\s*/Page\b", pdf.read_bytes())) > 2
