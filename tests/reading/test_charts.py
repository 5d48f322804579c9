"""The report's SVG charts and compare --plot draw the same series of the same record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kitbench.reading import compare, inputs, report, svg

KEPT = Path(__file__).resolve().parents[2] / "docs" / "records"
# A report chart's title begins with what it shows, the plot's panel of the same is titled so.
PANELS = {"transfers": "tensor moves", "step time": "step time against batch size", "all-reduce": "DDP all-reduce"}

Drawn = dict[str, list[tuple[str, list[tuple[float, float]], bool]]]


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("h100-fnn", {"transfers"}),
        ("h200-suite", {"transfers"}),
        ("h200-sweep", {"step time"}),
        ("cpu-bench-sweep", {"step time"}),
        ("h200-ddp", {"all-reduce"}),
    ],
)
def test_the_report_and_the_plot_draw_the_same_series(
    name: str, kinds: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    from kitbench.reading import plots

    path = str(KEPT / f"{name}.json")
    in_report: Drawn = {}
    line_chart = svg.line_chart

    def spy(title: str, series: list[svg.Series], *args: Any, **kwargs: Any) -> str:
        kind = title.split(": ")[0]
        if kind in PANELS:
            in_report.setdefault(kind, []).extend((s.name, s.points, s.dashed) for s in series)
        return line_chart(title, series, *args, **kwargs)

    monkeypatch.setattr(svg, "line_chart", spy)
    report.build([path])

    plt = plots._pyplot()
    figures: list[Any] = []
    monkeypatch.setattr(plt, "close", figures.append)
    loaded = inputs.load([path])
    table = compare.rows(loaded)
    plots.comparison(loaded, table, tmp_path / "c.png")
    (fig,) = figures
    prefix = f"{plots._name(table[0])}: "
    in_plot: Drawn = {
        kind: [
            (
                line.get_label().removeprefix(prefix),
                [(float(x), float(y)) for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)],
                line.get_linestyle() == "--",
            )
            for axes in fig.axes
            if axes.get_title() == panel
            for line in axes.get_lines()
        ]
        for kind, panel in PANELS.items()
    }
    assert set(in_report) == kinds
    assert in_report == {kind: lines for kind, lines in in_plot.items() if lines}
