"""The report's dependency-free SVG line charts."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from kitbench.reading import svg

NS = "{http://www.w3.org/2000/svg}"


def test_a_chart_is_well_formed_xml_with_every_label_escaped() -> None:
    chart = svg.line_chart(
        "<b>t</b> & co",
        [
            svg.Series("a<script>", [(1, 2), (10, 20)], [(1, 1, 3), (10, 15, 25)]),
            svg.Series("b", [(1, 5), (10, 4)], dashed=True),
        ],
        "size & <x>",
        "GB/s",
        log_x=True,
        markers=[svg.Marker(3, "<here>")],
    )
    root = ET.fromstring(chart)  # raises on any unescaped text
    assert root.tag == f"{NS}svg" and root.findtext(f"{NS}title") == "<b>t</b> & co"
    assert len(root.findall(f".//{NS}polyline")) == 2 and len(root.findall(f".//{NS}polygon")) == 1
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert "a<script>" in texts and "<here>" in texts and "size & <x>" in texts
    assert "<script>" not in chart


def test_points_a_log_axis_cannot_place_are_left_out() -> None:
    chart = svg.line_chart(
        "t", [svg.Series("s", [(0, 1), (-1, 2), (1, math.nan), (1, 1), (100, 4)])], "x", "y", log_x=True, log_y=True
    )
    line = ET.fromstring(chart).find(f".//{NS}polyline")
    assert line is not None and len(line.attrib["points"].split()) == 2


def test_nothing_to_draw_says_so() -> None:
    assert "no points to draw" in svg.line_chart("t", [svg.Series("s", [])], "x", "y")
    one = ET.fromstring(svg.line_chart("t", [svg.Series("s", [(2, 3)])], "x", "y", x_ticks=[2]))
    assert one.find(f".//{NS}polyline") is not None


def test_a_line_of_a_million_points_is_drawn_with_at_most_max_points() -> None:
    """13 records with 1.5-million-point loss curves once made a 214 MB page."""
    curve = [(float(i), 1.0 / (i + 1)) for i in range(1_000_000)]
    chart = svg.line_chart("loss", [svg.Series("run", curve)], "step", "loss")
    drawn = chart.split('points="')[1].split('"')[0].split()
    assert len(drawn) <= svg.MAX_POINTS + 1 and len(chart) < 60_000
    ends = svg.line_chart("loss", [svg.Series("run", [curve[0], curve[-1]])], "step", "loss")
    assert [drawn[0], drawn[-1]] == ends.split('points="')[1].split('"')[0].split()  # first and last kept


def test_twelve_series_are_drawn_twelve_ways() -> None:
    """A suite's loss chart: 2 models x 3 loops x 2 devices. Each series a colour of its own; past the
    palette a colour comes back dotted."""
    series = [svg.Series(f"s{i}", [(1.0, 1.0 + i), (2.0, 2.0 + i)]) for i in range(14)]
    chart = svg.line_chart("loss", series, "epoch", "loss")
    drawn = re.findall(r'<polyline class="line (s\d+)" fill="none"([^>]*) points', chart)
    assert len({colour for colour, _ in drawn[:12]}) == 12
    assert drawn[12][0] == drawn[0][0] and 'stroke-dasharray="1 3"' in drawn[12][1]
