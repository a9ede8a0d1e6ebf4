"""A child that does one client-side action for one system and prints its result.

``python -m bench.agent SLUG ACTION JSON-KWARGS``; the last stdout line is
``{"result": ...}``. Enqueueing runs here, not in the harness, because each Django
system needs its own settings and Django sets up only once per process; pgqueuer's
side runs here too, so that every system's enqueue is timed the same way.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

ACTIONS = (
    "install",
    "enqueue_each",
    "enqueue_bulk",
    "enqueue_requests",
    # the raw limit only (bench/limit.py)
    "enqueue_copy",
    "preload",
    "stamp_series",
    # django_jobqueue's paired pickup (bench/pickup_pair.py)
    "stamp_pairs",
    # django_jobqueue's workflow measures only (bench/workflows.py)
    "chord_write",
    "preload_chord",
    "enqueue_chain",
    # its durable-steps measure (bench/steps.py)
    "preload_steps",
    # the workload measures (bench/workloads.py)
    "preload_work",
)


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[2] not in ACTIONS:
        sys.stderr.write(f"usage: python -m bench.agent SLUG {{{','.join(ACTIONS)}}} JSON\n")
        return 2
    slug, action, params = argv[1], argv[2], json.loads(argv[3])
    if os.environ.get("DJANGO_SETTINGS_MODULE"):
        import django

        django.setup()
    module = importlib.import_module(f"bench.clients.{slug}")
    result = getattr(module, action)(**params)
    sys.stdout.write(json.dumps({"result": result}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
