"""The workflow graph's layout, without a database: longest-path layers (every edge
points down), a node per step for a small workflow, and a drawing bounded by the node
cap however wide or long the workflow (a 10,000-member chord, a 1,000-step chain, a
wide DAG of distinct steps), with summaries that count every step they stand for."""

from __future__ import annotations

import itertools
import random
import uuid
from collections import Counter

from django_jobqueue.admin.graph import MAX_LAYERS, MAX_PER_LAYER, NODE_CAP, layers, layout
from django_jobqueue.store.graphs import Step


def steps(n: int, status: str = "completed", prefix: str = "s") -> list[Step]:
    return [
        Step(id=uuid.uuid4(), kind="k", name=f"{prefix}{i}", status=status, join_when="",
             parents_open=0)
        for i in range(n)
    ]  # fmt: skip


def drawn(all_steps: list[Step], edges: list[tuple[uuid.UUID, uuid.UUID]]) -> dict[str, object]:
    return layout(
        all_steps, edges, step_url=lambda s: f"/job/{s.id}/", group_url=lambda st, k: f"?{st}"
    )


def shown(g: dict[str, object]) -> int:
    """How many steps the drawing stands for: one per step node, the count of a summary."""
    total = 0
    for n in g["nodes"]:  # type: ignore[attr-defined]
        total += sum(b["count"] for b in n["bars"]) if n["summary"] else 1
    return total


def test_a_diamond_is_four_nodes_in_three_rows_with_every_edge_pointing_down() -> None:
    a, b, c, d = steps(4)
    edges = [(a.id, b.id), (a.id, c.id), (b.id, d.id), (c.id, d.id), (a.id, d.id)]
    assert layers([a.id, b.id, c.id, d.id], edges) == {a.id: 0, b.id: 1, c.id: 1, d.id: 2}
    g = drawn([a, b, c, d], edges)
    ys = {n["label"]: n["y"] for n in g["nodes"]}  # type: ignore[attr-defined]
    assert ys["s0"] < ys["s1"] == ys["s2"] < ys["s3"]
    assert len(g["edges"]) == 5  # type: ignore[arg-type]
    assert all(not n["summary"] for n in g["nodes"])  # type: ignore[attr-defined]


def test_a_chord_of_10000_members_is_one_summary_above_its_callback() -> None:
    members = steps(10_000) + steps(5, "dead", prefix="d")
    callback = steps(1, "cancelled", prefix="cb")[0]
    g = drawn([*members, callback], [(m.id, callback.id) for m in members])
    nodes = g["nodes"]  # type: ignore[assignment]
    assert len(nodes) == 2
    summary = next(n for n in nodes if n["summary"])
    assert summary["label"] == "10,005 steps"
    assert Counter({b["status"]: b["count"] for b in summary["bars"]}) == Counter(
        completed=10_000, dead=5
    )
    assert summary["y"] < next(n for n in nodes if not n["summary"])["y"]
    assert len(g["edges"]) == 1  # type: ignore[arg-type]


def test_a_chain_of_1000_steps_keeps_its_ends_and_summarises_its_middle() -> None:
    chain = steps(1000)
    g = drawn(chain, [(a.id, b.id) for a, b in itertools.pairwise(chain)])
    nodes = g["nodes"]  # type: ignore[assignment]
    assert len(nodes) == MAX_LAYERS
    labels = [n["label"] for n in nodes]
    assert labels[0] == "s0"
    assert labels[-1] == "s999"
    assert shown(g) == 1000


def test_a_wide_dag_of_distinct_steps_stays_under_the_cap_and_counts_every_step() -> None:
    rng = random.Random(19)
    rows = [steps(rng.randint(1, 60), rng.choice(["completed", "dead", "waiting"]), f"r{r}-")
            for r in range(40)]  # fmt: skip
    edges = [
        (rng.choice(upper).id, s.id) for upper, lower in itertools.pairwise(rows) for s in lower
    ]
    every = [s for row in rows for s in row]
    g = drawn(every, edges)
    nodes = g["nodes"]  # type: ignore[assignment]
    assert len(nodes) <= NODE_CAP
    assert max(Counter(n["y"] for n in nodes).values()) <= MAX_PER_LAYER
    assert shown(g) == len(every)


def test_a_cycle_written_around_enqueue_is_drawn_not_looped_over() -> None:
    a, b, c = steps(3)
    placed = layers([a.id, b.id, c.id], [(a.id, b.id), (b.id, c.id), (c.id, b.id)])
    assert placed[a.id] == 0
    assert placed[b.id] == placed[c.id] > 0
    assert len(drawn([a, b, c], [(a.id, b.id), (b.id, c.id), (c.id, b.id)])["nodes"]) == 3  # type: ignore[arg-type]
