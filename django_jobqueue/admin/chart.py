"""A stacked bar chart of completed runs, failed runs that will be retried and runs
that left their job dead, drawn as SVG on the server: no
JavaScript, no CDN, nothing to build; it renders the same offline."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

WIDTH = 720
HEIGHT = 160
LEFT = 40  # room for the scale
RIGHT = 24  # room for the last time label
BOTTOM = 18  # room for the time labels


def chart(buckets: list[dict[str, Any]], *, label_every: int, fmt: str) -> dict[str, Any]:
    """Bars (x, y, height per series), a scale and time labels for ``buckets`` as
    ``store.throughput`` returns them (oldest first)."""
    n = max(len(buckets), 1)
    top = max((b["completed"] + b["failed"] for b in buckets), default=0)
    scale = _nice(top)
    plot_h = HEIGHT - BOTTOM
    step = (WIDTH - LEFT - RIGHT) / n
    bar_w = max(step - 1, 1)
    bars = []
    for i, b in enumerate(buckets):
        x = LEFT + i * step
        dead = b.get("dead", 0)
        done_h = plot_h * b["completed"] / scale
        fail_h = plot_h * (b["failed"] - dead) / scale
        dead_h = plot_h * dead / scale
        at = timezone.localtime(b["at"])
        bars.append(
            {
                "x": round(x, 1),
                "w": round(bar_w, 1),
                "done_y": round(plot_h - done_h, 1),
                "done_h": round(done_h, 1),
                "fail_y": round(plot_h - done_h - fail_h, 1),
                "fail_h": round(fail_h, 1),
                "dead_y": round(plot_h - done_h - fail_h - dead_h, 1),
                "dead_h": round(dead_h, 1),
                "title": (
                    f"{at:%Y-%m-%d %H:%M}: {b['completed']} completed, {b['failed']} failed "
                    f"({dead} left dead)"
                ),
                "label": at.strftime(fmt) if i % label_every == 0 else "",
                "label_x": round(x + bar_w / 2, 1),
            }
        )
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "plot_h": plot_h,
        "left": LEFT,
        "label_y": HEIGHT - 4,
        "max": scale,
        "mid": scale // 2 if scale >= 2 else None,
        "mid_y": plot_h / 2,
        "bars": bars,
        "total_completed": sum(b["completed"] for b in buckets),
        "total_failed": sum(b["failed"] for b in buckets),
        "total_dead": sum(b.get("dead", 0) for b in buckets),
        "total_retried": sum(b["failed"] - b.get("dead", 0) for b in buckets),
    }


def _nice(value: int) -> int:
    """The smallest of 1, 2, 5 × 10^k at or above ``value`` (at least 1)."""
    if value <= 1:
        return 1
    magnitude = 1
    while True:
        for m in (1, 2, 5):
            if m * magnitude >= value:
                return m * magnitude
        magnitude *= 10
