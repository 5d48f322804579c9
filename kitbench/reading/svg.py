"""Line charts as inline SVG text, with no dependency: the report draws every plot
itself so that a page built on a bare Python is never missing one.

Colours are CSS classes (``s0`` .. ``s11``, ``axis``, ``band``) that the page styles,
so one chart reads in light and dark mode and in print. Every label is escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape as _html_escape
from typing import TypeVar

# Control characters that a record could carry into a label (ESC, C1, line separators, bidi overrides,
# as kitbench.errors.clean shows them escaped): a label shows them as a space, never raw.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escape(text: str) -> str:
    return _html_escape(CONTROL.sub(" ", text))


WIDTH, HEIGHT = 560, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 150, 28, 44  # the right margin holds the legend
PALETTE = 12  # distinct colours: a suite's loss chart has 12 series (2 models, 3 loops, 2 devices)


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]
    band: list[tuple[float, float, float]] = field(default_factory=list)  # (x, low, high), drawn shaded
    dashed: bool = False


@dataclass
class Marker:
    """A vertical line at ``x`` with a short label, e.g. where the accelerator starts to win."""

    x: float
    label: str


def _ticks(low: float, high: float, log: bool) -> list[float]:
    if log:
        first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
        step = max(1, (last - first) // 6)
        return [10.0**e for e in range(first, last + 1, step)]
    if high <= low:
        return [low]
    raw = (high - low) / 5
    unit = 10 ** math.floor(math.log10(raw))
    step = next(m * unit for m in (1, 2, 5, 10) if m * unit >= raw)
    start = math.floor(low / step) * step
    return [start + i * step for i in range(math.ceil((high - start) / step - 1e-9) + 1)]


def _label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        exponent = math.floor(math.log10(abs(value)))
        mantissa = value / 10**exponent
        return f"1e{exponent}" if math.isclose(mantissa, 1) else f"{mantissa:.3g}e{exponent}"
    return f"{value:.4g}"


MAX_POINTS = 2 * WIDTH  # per line: two to a pixel column; a 1.5-million-step loss curve is not 30 MB of SVG

T = TypeVar("T")


def _thinned(points: list[T]) -> list[T]:
    """At most about MAX_POINTS of ``points``, evenly spaced, the last one kept."""
    if len(points) <= MAX_POINTS:
        return points
    step = -(-len(points) // MAX_POINTS)
    return points[::step] + ([points[-1]] if (len(points) - 1) % step else [])


def line_chart(
    title: str,
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
    markers: Sequence[Marker] = (),
    x_ticks: Sequence[float] = (),
) -> str:
    """One chart as an ``<svg>`` element; points that a log axis cannot place are left out.
    ``x_ticks`` replaces the computed ticks, for counts such as world sizes."""

    def usable(x: float, y: float) -> bool:
        return math.isfinite(x) and math.isfinite(y) and (x > 0 or not log_x) and (y > 0 or not log_y)

    xs = [x for s in series for x, y in s.points if usable(x, y)]
    ys = [y for s in series for x, y in s.points if usable(x, y)]
    ys += [v for s in series for x, lo, hi in s.band for v in (lo, hi) if usable(x, v)]
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
    ]
    if not xs:
        out.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">no points to draw</text></svg>')
        return "".join(out)
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if not log_y:
        y0 = min(0.0, y0)
    if x0 == x1:
        x0, x1 = (x0 / 2, x1 * 2) if log_x else (x0 - 1, x1 + 1)
    if y0 == y1:
        y0, y1 = (y0 / 2, y1 * 2) if log_y else (y0 - 1, y1 + 1)
    xt, yt = sorted(x_ticks) or _ticks(x0, x1, log_x), _ticks(y0, y1, log_y)
    x0, x1 = min(x0, xt[0]), max(x1, xt[-1])
    y0, y1 = min(y0, yt[0]), max(y1, yt[-1])
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def scale(v: float, low: float, high: float, log: bool) -> float:
        if log:
            v, low, high = math.log10(v), math.log10(low), math.log10(high)
        return (v - low) / (high - low)

    def px(x: float) -> float:
        return round(_LEFT + scale(x, x0, x1, log_x) * plot_w, 1)

    def py(y: float) -> float:
        return round(_TOP + (1 - scale(y, y0, y1, log_y)) * plot_h, 1)

    out.append(f'<text class="title" x="{_LEFT}" y="16">{escape(title)}</text>')
    out.append(f'<g class="axis"><rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none"/>')
    for t in xt:
        if x0 <= t <= x1:
            out.append(
                f'<line x1="{px(t)}" x2="{px(t)}" y1="{_TOP + plot_h}" y2="{_TOP + plot_h + 4}"/>'
                f'<text x="{px(t)}" y="{_TOP + plot_h + 16}" text-anchor="middle">{_label(t)}</text>'
            )
    for t in yt:
        if y0 <= t <= y1:
            out.append(
                f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{py(t)}" y2="{py(t)}"/>'
                f'<text x="{_LEFT - 6}" y="{py(t) + 4}" text-anchor="end">{_label(t)}</text>'
            )
    out.append(
        f'<text x="{_LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text transform="translate(14 {_TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">'
        f"{escape(y_label)}</text></g>"
    )
    for i, s in enumerate(series):
        colour = f"s{i % PALETTE}"
        # Past the palette a colour comes back, dotted: no two series drawn alike.
        dash = ' stroke-dasharray="5 3"' if s.dashed else ' stroke-dasharray="1 3"' if i >= PALETTE else ""
        band = _thinned([(x, lo, hi) for x, lo, hi in s.band if usable(x, lo) and usable(x, hi)])
        if band:
            edge = [f"{px(x)},{py(hi)}" for x, _, hi in band] + [f"{px(x)},{py(lo)}" for x, lo, _ in reversed(band)]
            out.append(f'<polygon class="band {colour}" points="{" ".join(edge)}"/>')
        points = [f"{px(x)},{py(y)}" for x, y in _thinned([(x, y) for x, y in s.points if usable(x, y)])]
        if points:
            out.append(
                f'<polyline class="line {colour}" fill="none"{dash} points="{" ".join(points)}">'
                f"<title>{escape(s.name)}</title></polyline>"
            )
            if len(points) <= 24:
                out += [
                    f'<circle class="dot {colour}" cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="2.5"/>'
                    for p in points
                ]
        ly = _TOP + 6 + 16 * i
        lx = WIDTH - _RIGHT + 8
        out.append(
            f'<line class="line {colour}"{dash} x1="{lx}" x2="{lx + 18}" y1="{ly}" y2="{ly}"/>'
            f'<text class="legend" x="{lx + 22}" y="{ly + 4}">{escape(s.name[:22])}</text>'
        )
    for m in markers:
        if x0 <= m.x <= x1 and (m.x > 0 or not log_x):
            out.append(
                f'<g class="marker"><line x1="{px(m.x)}" x2="{px(m.x)}" y1="{_TOP}" y2="{_TOP + plot_h}" '
                f'stroke-dasharray="2 3"/><text x="{px(m.x) + 3}" y="{_TOP + 12}">{escape(m.label)}</text></g>'
            )
    out.append("</svg>")
    return "".join(out)
