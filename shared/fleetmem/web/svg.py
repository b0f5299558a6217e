"""Charts and graphs drawn on the server as inline SVG: no script runs in the console.

Every text that goes into the SVG is escaped here (the templates mark the result safe).
"""

from __future__ import annotations

import math
import re
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


#: Graph labels are monospace (`.graph text` in console.css), so a label's width follows from its
#: length: LABEL_PX per line, CHAR_W a character (monospace fonts advance 0.6 em; a little more here).
LABEL_PX = 12
CHAR_W = 0.62 * LABEL_PX
LINE_H = 15
#: A label is broken into lines of at most LABEL_CHARS characters; past LABEL_LINES lines the last
#: one ends with "…" (the whole label is always in the node's <title> and in the table beside it).
LABEL_CHARS = 24
LABEL_LINES = 4
#: Pieces a label is best broken after.
_PIECES = re.compile(r"[^/\-_. ]*[/\-_. ]?")


def label_lines(label: str, width: int = LABEL_CHARS, most: int = LABEL_LINES) -> list[str]:
    """`label` in lines of at most `width` characters, broken after a "/", "-", "_", "." or space
    where one falls (a longer run is cut), at most `most` lines (the last ending "…" when cut)."""
    lines: list[str] = []
    line = ""
    for piece in (p for p in _PIECES.findall(label) if p):
        while len(piece) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(piece[:width])
            piece = piece[width:]
        if len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    if line or not lines:
        lines.append(line)
    if len(lines) > most:
        lines = lines[:most]
        lines[-1] = lines[-1][: width - 1] + "…"
    return lines


def _label(
    label: str, x: float, y: float, anchor: str, *, below: bool | None, cls: str = "label"
) -> tuple[str, tuple[float, float, float, float]]:
    """A <text> of `label`'s lines anchored at (x, y): under it (`below`), over it, or centred on it
    (None); and its box (left, top, right, bottom)."""
    lines = label_lines(label)
    height = len(lines) * LINE_H
    top = y if below else y - height if below is False else y - height / 2
    width = max(len(line) for line in lines) * CHAR_W
    left = x if anchor == "start" else x - width if anchor == "end" else x - width / 2
    spans = "".join(
        f'<tspan x="{x:.1f}" y="{top + (i + 1) * LINE_H - 4:.1f}">{escape(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    return f'<text class="{cls}" text-anchor="{anchor}">{spans}</text>', (left, top, left + width, top + height)


def neighbourhood(center: str, nodes: Sequence[tuple[str, str, str]], *, href: str, radius: int = 140) -> Markup:
    """A star graph: `center` in the middle, each (slug, relation, direction) around it as a link
    to `href` with the slug appended (direction "out": a link of the page, "in": a backlink).

    Labels are never clipped: each is broken into lines (`label_lines`), set beside its node away
    from the centre, and the viewBox is the box around every node and label."""
    title = escape(f"Links of {center}")
    edges: list[str] = []
    marks: list[str] = []
    boxes: list[tuple[float, float, float, float]] = []
    for i, (slug, relation, direction) in enumerate(nodes):
        angle = 2 * math.pi * i / max(len(nodes), 1) - math.pi / 2
        dx, dy = math.cos(angle), math.sin(angle)
        x, y = radius * dx, radius * dy
        edges.append(f'<line class="edge {escape(direction)}" x1="0" y1="0" x2="{x:.1f}" y2="{y:.1f}"/>')
        if dx > 0.3:
            text, box = _label(slug, x + 14, y, "start", below=None)
        elif dx < -0.3:
            text, box = _label(slug, x - 14, y, "end", below=None)
        else:
            text, box = _label(slug, x, y + 14 if dy > 0 else y - 14, "middle", below=dy > 0)
        arrow = "→" if direction == "out" else "←"
        marks.append(
            f'<a href="{escape(href + slug)}"><title>{escape(f"{arrow} {relation}: {slug}")}</title>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="8"/>{text}</a>'
        )
        boxes.append(box)
        boxes.append((x - 8, y - 8, x + 8, y + 8))
    text, box = _label(center, 0, 18, "middle", below=True, cls="center")
    marks.append(f'<circle class="center" cx="0" cy="0" r="12"/>{text}')
    boxes += [box, (-12, -12, 12, 12)]
    pad = 8
    left = min(b[0] for b in boxes) - pad
    top = min(b[1] for b in boxes) - pad
    width = max(b[2] for b in boxes) + pad - left
    height = max(b[3] for b in boxes) + pad - top
    return Markup(  # noqa: S704  (every text in it went through escape above)
        f'<svg class="graph" viewBox="{left:.1f} {top:.1f} {width:.1f} {height:.1f}" width="{width:.0f}" '
        f'height="{height:.0f}" role="img" aria-label="{title}"><title>{title}</title>'
        + "".join(edges)
        + "".join(marks)
        + "</svg>"
    )
