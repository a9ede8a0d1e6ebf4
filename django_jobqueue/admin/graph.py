"""A workflow's graph laid out for SVG on the server: no JavaScript, nothing to build.

Steps are put in layers by their longest path from a root (a step sits one layer
below its deepest parent), so every edge points down. The drawing stays readable and
bounded however large the workflow: in a layer wider than ``MAX_PER_LAYER``, steps
that share their parents and children (the members of a fan-out or a chord's header)
become one summary node with their counts by status, and whatever is still too wide
becomes one "more steps" node; past ``MAX_LAYERS`` layers, the middle ones become one
summary node. So a drawing never has more than ``NODE_CAP`` nodes.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django_jobqueue.admin.common import COLOURS
from django_jobqueue.store.graphs import Step

MAX_PER_LAYER = 12
MAX_LAYERS = 25
HEAD_LAYERS = 12  # past MAX_LAYERS: the first layers shown, then one summary, then the last
NODE_CAP = MAX_PER_LAYER * MAX_LAYERS

NODE_W = 168
NODE_H = 44
H_GAP = 20
V_GAP = 48
MARGIN = 12
LABEL_CHARS = 24

# The order statuses are counted in on a summary node (the order of the lifecycle).
STATUS_ORDER = ("waiting", "pending", "claimed", "completed", "dead", "cancelled")


@dataclass
class Node:
    """One node of the drawing: a step, or a summary of several (``ids``: their
    positions in the steps given to ``layout``)."""

    key: str
    layer: int
    ids: list[int]
    members: list[Step]
    summary: str = ""  # why several steps are one node ("" for a step)
    order: float = 0.0
    x: float = 0.0
    y: float = 0.0
    parents: set[str] = field(default_factory=set)


def layers(ids: Sequence[Hashable], edges: Sequence[tuple[Hashable, Hashable]]) -> dict[Any, int]:
    """Each step's layer: 0 for a root, else one more than its deepest parent's (Kahn's
    order; steps on a cycle, which enqueue refuses, go below everything else)."""
    children: dict[Any, list[Any]] = defaultdict(list)
    indegree: Counter[Any] = Counter()
    for parent, child in edges:
        children[parent].append(child)
        indegree[child] += 1
    layer = dict.fromkeys(ids, 0)
    ready = [i for i in ids if indegree[i] == 0]
    seen = 0
    while ready:
        nxt = []
        for node in ready:
            seen += 1
            for child in children[node]:
                layer[child] = max(layer[child], layer[node] + 1)
                indegree[child] -= 1
                if indegree[child] == 0:
                    nxt.append(child)
        ready = nxt
    if seen < len(ids):
        bottom = max(layer.values(), default=0) + 1
        for i in ids:
            if indegree[i] > 0:
                layer[i] = bottom
    return layer


def _node(key: str, number: int, ids: list[int], steps: Sequence[Step], summary: str) -> Node:
    return Node(key, number, ids, [steps[i] for i in ids], summary=summary)


def _collapse_layer(
    number: int, ids: list[int], signature: dict[int, Any], steps: Sequence[Step]
) -> list[Node]:
    """A layer's nodes, at most ``MAX_PER_LAYER``: the largest groups of steps with the
    same parents and children summarised first, then the rest of an overlong layer."""
    if len(ids) <= MAX_PER_LAYER:
        return [_node(f"s{i}", number, [i], steps, "") for i in ids]
    groups: dict[Any, list[int]] = defaultdict(list)
    for i in ids:
        groups[signature[i]].append(i)
    units = list(groups.values())
    collapsed: set[int] = set()
    width = len(ids)
    for u in sorted(range(len(units)), key=lambda u: -len(units[u])):
        if width <= MAX_PER_LAYER or len(units[u]) < 2:
            break
        collapsed.add(u)
        width -= len(units[u]) - 1
    nodes: list[Node] = []
    for u, unit in enumerate(units):
        if u in collapsed:
            nodes.append(_node(f"group-{number}-{u}", number, unit, steps, "same parents"))
        else:
            nodes.extend(_node(f"s{i}", number, [i], steps, "") for i in unit)
    if len(nodes) > MAX_PER_LAYER:
        rest = [i for n in nodes[MAX_PER_LAYER - 1 :] for i in n.ids]
        nodes = [*nodes[: MAX_PER_LAYER - 1], _node(f"more-{number}", number, rest, steps, "more")]
    return nodes


def _nodes(steps: Sequence[Step], edges: Sequence[tuple[int, int]]) -> list[Node]:
    layer = layers(range(len(steps)), edges)
    parents_of: dict[int, list[int]] = defaultdict(list)
    children_of: dict[int, list[int]] = defaultdict(list)
    for parent, child in edges:
        parents_of[child].append(parent)
        children_of[parent].append(child)
    signature = {
        i: (tuple(sorted(parents_of[i])), tuple(sorted(children_of[i]))) for i in range(len(steps))
    }
    by_layer: dict[int, list[int]] = defaultdict(list)
    for i in range(len(steps)):
        by_layer[layer[i]].append(i)
    numbers = sorted(by_layer)

    def row(n: int) -> list[Node]:
        return _collapse_layer(n, by_layer[n], signature, steps)

    if len(numbers) <= MAX_LAYERS:
        return [node for n in numbers for node in row(n)]
    tail = MAX_LAYERS - HEAD_LAYERS - 1
    middle = numbers[HEAD_LAYERS:-tail]
    inside = [i for n in middle for i in by_layer[n]]
    summary = f"layers {middle[0] + 1}–{middle[-1] + 1}"
    nodes = [node for n in numbers[:HEAD_LAYERS] for node in row(n)]
    nodes.append(_node("middle", middle[0], inside, steps, summary))
    return nodes + [node for n in numbers[-tail:] for node in row(n)]


def _link(nodes: list[Node], edges: Sequence[tuple[int, int]]) -> set[tuple[str, str]]:
    """The drawing's edges: one between two nodes when any of their steps are joined."""
    where = {i: n.key for n in nodes for i in n.ids}
    drawn = set()
    for parent, child in edges:
        a, b = where[parent], where[child]
        if a != b:
            drawn.add((a, b))
    by_key = {n.key: n for n in nodes}
    for a, b in drawn:
        by_key[b].parents.add(a)
    return drawn


def _place(nodes: list[Node]) -> tuple[float, float]:
    """Rows top to bottom (layers renumbered densely), each ordered by its parents' mean
    position (fewer crossings) and centred; returns the drawing's width and height."""
    rows: dict[int, list[Node]] = defaultdict(list)
    for n in nodes:
        rows[n.layer].append(n)
    ordered = [rows[k] for k in sorted(rows)]
    position: dict[str, float] = {}
    for row in ordered:
        for i, n in enumerate(row):
            known = [position[p] for p in n.parents if p in position]
            n.order = sum(known) / len(known) if known else float(i)
        row.sort(key=lambda n: n.order)
        for i, n in enumerate(row):
            position[n.key] = float(i)
    widest = max((len(r) for r in ordered), default=1)
    width = MARGIN * 2 + widest * NODE_W + (widest - 1) * H_GAP
    for depth, row in enumerate(ordered):
        span = len(row) * NODE_W + (len(row) - 1) * H_GAP
        left = (width - span) / 2
        for i, n in enumerate(row):
            n.x = round(left + i * (NODE_W + H_GAP), 1)
            n.y = MARGIN + depth * (NODE_H + V_GAP)
    height = MARGIN * 2 + len(ordered) * NODE_H + max(len(ordered) - 1, 0) * V_GAP
    return width, height


def _label(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else f"{text[: LABEL_CHARS - 1]}…"


def _drawn(n: Node, step_url: Callable[[Step], str], group_url: Callable[[str, str], str]) -> Any:
    if not n.summary:
        (s,) = n.members
        return {
            "x": n.x,
            "y": n.y,
            "summary": False,
            "status": s.status,
            "fill": COLOURS.get(s.status, "#57606a"),
            "label": _label(s.name or s.kind),
            "sub": s.status,
            "title": f"{s.name} ({s.kind}): {s.status}",
            "url": step_url(s),
        }
    counts = Counter(m.status for m in n.members)
    kinds = {m.kind for m in n.members}
    kind = next(iter(kinds)) if len(kinds) == 1 else ""
    ordered = sorted(counts.items(), key=lambda kv: _rank(kv[0]))
    bars, left = [], 0.0
    for status, count in ordered:
        w = (NODE_W - 8) * count / len(n.members)
        bars.append(
            {
                "x": round(4 + left, 1),
                "w": round(w, 1),
                "status": status,
                "fill": COLOURS.get(status, "#57606a"),
                "count": count,
                "url": group_url(status, kind),
            }
        )
        left += w
    text = ", ".join(f"{c:,} {s}" for s, c in ordered)
    return {
        "x": n.x,
        "y": n.y,
        "summary": True,
        "status": "",
        "label": f"{len(n.members):,} steps",
        "sub": _label(kind or f"{len(kinds)} kinds") if n.summary == "same parents" else n.summary,
        "title": f"{len(n.members):,} steps ({n.summary}): {text}",
        "bars": bars,
        "bar_y": NODE_H - 12,
        "url": group_url("", kind),
    }


def _rank(status: str) -> int:
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


def layout(
    steps: Sequence[Step],
    edges: Sequence[tuple[uuid.UUID, uuid.UUID]],
    *,
    step_url: Callable[[Step], str],
    group_url: Callable[[str, str], str],
) -> dict[str, Any]:
    """The template's drawing: nodes (a step's with its link and colour, a summary's
    with a bar of its counts by status) and edges as paths, and the canvas size."""
    # Positions, not UUIDs, from here on: a UUID hashes and compares in Python, and a
    # chord's fan-in sorts ten thousand of them.
    index = {s.id: i for i, s in enumerate(steps)}
    pairs = [(index[p], index[c]) for p, c in edges if p in index and c in index]
    nodes = _nodes(steps, pairs)
    drawn = _link(nodes, pairs)
    width, height = _place(nodes)
    by_key = {n.key: n for n in nodes}
    paths = []
    for a, b in sorted(drawn):
        p, c = by_key[a], by_key[b]
        x1, y1 = p.x + NODE_W / 2, p.y + NODE_H
        x2, y2 = c.x + NODE_W / 2, c.y
        bend = (y2 - y1) / 2
        paths.append(
            f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} "
            f"{x2:.1f},{y2:.1f}"
        )
    return {
        "width": round(width, 1),
        "height": round(height, 1),
        "node_w": NODE_W,
        "node_h": NODE_H,
        "nodes": [_drawn(n, step_url, group_url) for n in nodes],
        "edges": paths,
        "summarised": sum(len(n.members) for n in nodes if n.summary),
    }
