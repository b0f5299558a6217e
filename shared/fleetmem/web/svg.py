"""Charts and graphs drawn on the server as inline SVG: no script runs in the console.

Every text that goes into the SVG is escaped here (the templates mark the result safe).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from markupsafe import Markup


def bar_chart(points: Sequence[tuple[str, int]], *, label: str, width: int = 640, height: int = 160) -> Markup:
    """A bar per (label, value), with the values on the bars' titles; `label` names the chart."""
    n = max(len(points), 1)
    top = max([v for _, v in points] + [1])
    gap = 2
    bar = max((width - gap * n) / n, 1)
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height + 20}" role="img" aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>"
    ]
    for i, (name, value) in enumerate(points):
        h = 0 if value <= 0 else max(round(value / top * height), 2)
        x = i * (bar + gap)
        parts.append(
            f'<rect x="{x:.1f}" y="{height - h}" width="{bar:.1f}" height="{h}">'
            f"<title>{escape(name)}: {value}</title></rect>"
        )
    if points:
        parts.append(f'<text x="0" y="{height + 15}">{escape(points[0][0])}</text>')
        parts.append(f'<text x="{width}" y="{height + 15}" text-anchor="end">{escape(points[-1][0])}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704  (every text in it went through escape above)


def neighbourhood(center: str, nodes: Sequence[tuple[str, str, str]], *, href: str, size: int = 420) -> Markup:
    """A star graph: `center` in the middle, each (slug, relation, direction) around it as a link
    to `href` with the slug appended (direction "out": a link of the page, "in": a backlink)."""
    c = size / 2
    r = size / 2 - 60
    parts = [
        f'<svg class="graph" viewBox="0 0 {size} {size}" role="img" '
        f'aria-label="{escape(f"Links of {center}")}"><title>{escape(f"Links of {center}")}</title>'
    ]
    placed = []
    for i, (slug, relation, direction) in enumerate(nodes):
        angle = 2 * math.pi * i / max(len(nodes), 1) - math.pi / 2
        x, y = c + r * math.cos(angle), c + r * math.sin(angle)
        placed.append((slug, relation, direction, x, y))
        parts.append(f'<line class="edge {escape(direction)}" x1="{c:.1f}" y1="{c:.1f}" x2="{x:.1f}" y2="{y:.1f}"/>')
    for slug, relation, direction, x, y in placed:
        arrow = "→" if direction == "out" else "←"
        parts.append(
            f'<a href="{escape(href + slug)}"><circle cx="{x:.1f}" cy="{y:.1f}" r="8"/>'
            f'<text x="{x:.1f}" y="{y + 22:.1f}" text-anchor="middle">{escape(slug[:28])}</text>'
            f"<title>{escape(f'{arrow} {relation}: {slug}')}</title></a>"
        )
    parts.append(
        f'<circle class="center" cx="{c:.1f}" cy="{c:.1f}" r="12"/>'
        f'<text class="center" x="{c:.1f}" y="{c + 28:.1f}" text-anchor="middle">{escape(center[:32])}</text></svg>'
    )
    return Markup("".join(parts))  # noqa: S704  (every text in it went through escape above)
