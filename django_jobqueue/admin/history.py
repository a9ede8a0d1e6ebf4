"""The dashboard's history panel: runs per slot (completed, retried, dead) and the p50
and p95 of their durations, over a chosen range (1 h, 6 h, 24 h, 7 d) and kind, from the
per-minute run history (``store.read_history``), with the deploy markers drawn across
both charts. Server-rendered SVG, as ``chart.py``: no JavaScript."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from django.utils.http import urlencode

from django_jobqueue import conf, store
from django_jobqueue.admin.chart import HEIGHT, LEFT, RIGHT, WIDTH, _nice
from django_jobqueue.formatting import fmt_seconds

# The ranges offered: (the query value, its length, the slot, the label format, how
# many slots between time labels).
RANGES: dict[str, tuple[timedelta, timedelta, str, int]] = {
    "1h": (timedelta(hours=1), timedelta(minutes=1), "%H:%M", 10),
    "6h": (timedelta(hours=6), timedelta(minutes=5), "%H:%M", 12),
    "24h": (timedelta(hours=24), timedelta(minutes=20), "%H:%M", 9),
    "7d": (timedelta(days=7), timedelta(hours=2), "%a %d", 12),
}
DEFAULT_RANGE = "6h"
PLOT_H = HEIGHT - 18
GROUP_NAMES = ("completed", "retried", "dead")  # bottom to top
QUANTILES = ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"))


def panel(request: HttpRequest, *, now: datetime) -> dict[str, Any]:
    """The history panel's context: the range and kind links, the two charts, the
    markers and a table per kind."""
    chosen = request.GET.get("history", DEFAULT_RANGE)
    if chosen not in RANGES:
        chosen = DEFAULT_RANGE
    length, step, fmt, label_every = RANGES[chosen]
    kind = request.GET.get("history_kind", "")
    h = store.read_history(since=now - length, until=now, step=step, kinds=[kind] if kind else None)
    every = store.read_history(since=now - length, until=now, step=length) if kind else h
    return {
        "days": conf.get().history_days,
        "range": chosen,
        "kind": kind,
        "ranges": [
            {"name": name, "url": _url(name, kind), "current": name == chosen} for name in RANGES
        ],
        "kinds": [
            {"name": k, "url": _url(chosen, k), "current": k == kind} for k in ["", *every.kinds]
        ],
        "counts": _counts_chart(h, fmt=fmt, label_every=label_every),
        "durations": _durations_chart(h, fmt=fmt, label_every=label_every),
        "markers": [_marker(m, h) for m in h.markers],
        "table": [
            {
                "kind": k,
                **s.counts,
                **{name: fmt_seconds(s.percentile(q)) for q, name in QUANTILES},
            }
            for k, s in h.kinds.items()
        ],
    }


def _url(chosen: str, kind: str) -> str:
    query = {"history": chosen, **({"history_kind": kind} if kind else {})}
    return f"?{urlencode(query)}#history"


def _x(h: store.History, at: datetime) -> float:
    """Where ``at`` falls across the plot."""
    span = h.step * len(h.slots)
    return round(LEFT + (WIDTH - LEFT - RIGHT) * ((at - h.since) / span), 1)


def _marker(m: Any, h: store.History) -> dict[str, Any]:
    at = timezone.localtime(m.at)
    x = _x(h, m.at)
    return {
        "x": x,
        # The label beside the line, on its left near the right edge.
        "label_x": x - 3 if x > WIDTH * 0.75 else x + 3,
        "anchor": "end" if x > WIDTH * 0.75 else "start",
        "label": m.label,
        "title": f"{m.label}: {at:%Y-%m-%d %H:%M:%S}{f' by {m.by}' if m.by else ''}",
    }


def _labels(h: store.History, fmt: str, every: int) -> list[dict[str, Any]]:
    width = (WIDTH - LEFT - RIGHT) / len(h.slots)
    return [
        {"x": round(_x(h, s.at) + width / 2, 1), "text": timezone.localtime(s.at).strftime(fmt)}
        for i, s in enumerate(h.slots)
        if i % every == 0
    ]


def _counts_chart(h: store.History, *, fmt: str, label_every: int) -> dict[str, Any]:
    """Stacked bars per slot: completed, retried (or recovered), dead."""
    scale = _nice(max((sum(s.counts.values()) for s in h.slots), default=0))
    width = (WIDTH - LEFT - RIGHT) / len(h.slots)
    bars = []
    for s in h.slots:
        y = float(PLOT_H)
        parts = []
        for name in GROUP_NAMES:
            tall = PLOT_H * s.counts[name] / scale
            y -= tall
            if tall:
                parts.append({"cls": name, "y": round(y, 1), "h": round(tall, 1)})
        at = timezone.localtime(s.at)
        bars.append(
            {
                "x": _x(h, s.at),
                "w": round(max(width - 1, 1), 1),
                "parts": parts,
                "title": f"{at:%Y-%m-%d %H:%M}: {s.counts['completed']} completed, "
                f"{s.counts['retried']} retried, {s.counts['dead']} dead",
            }
        )
    totals = {
        name: sum(s.counts[name] for s in h.slots) for name in ("completed", "retried", "dead")
    }
    return {**_frame(scale), "bars": bars, "labels": _labels(h, fmt, label_every), **totals}


def _durations_chart(h: store.History, *, fmt: str, label_every: int) -> dict[str, Any]:
    """The p50 and p95 of each slot's timed runs, as two lines (gaps where none ran)."""
    width = (WIDTH - LEFT - RIGHT) / len(h.slots)
    points = {name: [(s, s.percentile(q)) for s in h.slots] for q, name in QUANTILES[:2]}
    top = max((v for line in points.values() for _, v in line if v is not None), default=0.0)
    scale = _nice_seconds(top)
    dots = {
        name: [
            {
                "x": round(_x(h, s.at) + width / 2, 1),
                "y": round(PLOT_H - PLOT_H * min(v, scale) / scale, 1),
                "title": f"{timezone.localtime(s.at):%Y-%m-%d %H:%M}: {name} {fmt_seconds(v)}",
            }
            for s, v in line
            if v is not None
        ]
        for name, line in points.items()
    }
    return {
        **_frame(scale),
        "max_text": fmt_seconds(scale),
        # A line through each series' slots, and a dot on each (a lone slot has no line).
        "series": [
            {"name": name, "points": " ".join(f"{d['x']},{d['y']}" for d in ds), "dots": ds}
            for name, ds in dots.items()
        ],
        "labels": _labels(h, fmt, label_every),
    }


def _frame(scale: float) -> dict[str, Any]:
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "plot_h": PLOT_H,
        "left": LEFT,
        "label_y": HEIGHT - 4,
        "max": scale,
    }


def _nice_seconds(value: float) -> float:
    """The smallest of 1, 2, 5 × 10^k seconds at or above ``value`` (at least 1 ms)."""
    scale = 0.001
    while True:
        for m in (1, 2, 5):
            if m * scale >= value:
                return m * scale
        scale *= 10
