"""Server-side charts: inline SVG built here (no JavaScript, no external assets). Every label is escaped."""

from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 500, 170
LEFT, RIGHT, TOP, BOTTOM = 72, 12, 14, 28


def _fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10 or value == 0:
        return f"{value:.0f}"
    if value >= 0.01:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def bar_chart(
    *, title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float | None], str]], unit: str = ""
) -> SafeString:
    """Bars per label for one series, or lines for several (e.g. p50 and p95); gaps where a value is None."""
    values = [v for _, points, _ in series for v in points if v is not None]
    top = max(values, default=0) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    count = max(len(labels), 1)
    step = plot_w / count

    def y(value: float) -> float:
        return TOP + plot_h - (value / top) * plot_h

    parts = [
        f'<svg class="gw-chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}" stroke="#999"/>',
    ]
    for fraction in (0.5, 1.0):
        level = top * fraction
        parts.append(
            f'<line x1="{LEFT}" y1="{y(level):.1f}" x2="{WIDTH - RIGHT}" y2="{y(level):.1f}" stroke="#ddd"/>'
            f'<text x="{LEFT - 4}" y="{y(level) + 4:.1f}" text-anchor="end" font-size="10">'
            f"{escape(_fmt(level))}{escape(unit)}</text>"
        )
    every = max(1, count // 8)
    for index, label in enumerate(labels):
        if index % every == 0:
            x = LEFT + step * index + step / 2
            parts.append(
                f'<text x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="middle" font-size="10">{escape(label)}</text>'
            )
    if len(series) == 1:
        name, points, color = series[0]
        for index, value in enumerate(points):
            if not value:
                continue
            x = LEFT + step * index + step * 0.1
            parts.append(
                f'<rect x="{x:.1f}" y="{y(value):.1f}" width="{step * 0.8:.1f}" height="{TOP + plot_h - y(value):.1f}" '
                f'fill="{color}"><title>{escape(labels[index])}: {escape(_fmt(value))}{escape(unit)}</title></rect>'
            )
    else:
        for name, points, color in series:
            coords = [f"{LEFT + step * i + step / 2:.1f},{y(v):.1f}" for i, v in enumerate(points) if v is not None]
            if coords:
                parts.append(
                    f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(coords)}">'
                    f"<title>{escape(name)}</title></polyline>"
                )
            for i, v in enumerate(points):  # a dot per value, so a lone point shows too
                if v is not None:
                    parts.append(
                        f'<circle cx="{LEFT + step * i + step / 2:.1f}" cy="{y(v):.1f}" r="3" fill="{color}">'
                        f"<title>{escape(name)} {escape(labels[i])}: {escape(_fmt(v))}{escape(unit)}</title></circle>"
                    )
        legend = " ".join(f'<tspan fill="{color}">&#9632; {escape(name)}</tspan>' for name, _, color in series)
        parts.append(f'<text x="{WIDTH - RIGHT}" y="{TOP + 10}" text-anchor="end" font-size="11">{legend}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308  # every interpolated text above is escaped
