"""``manage.py demo``: enqueue one job of each example task, run a worker until they all
settle, then print how each ended and its journal."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from django_jobqueue import JobHandle, enqueue
from django_jobqueue.worker.loop import Worker
from testproject.shop.tasks import ExportOrders, charge_card, import_legacy, send_receipt

TERMINAL = {"completed", "dead", "cancelled"}


class Command(BaseCommand):
    help = "Run the example jobs through a worker and print their outcomes and journals."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--timeout", type=float, default=60.0)

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            jobs: list[tuple[str, JobHandle]] = [
                ("succeeds", send_receipt.enqueue(order_id=1, email="ada@example.com")),
                ("fails twice, then succeeds", charge_card.enqueue(order_id=1)),
                ("pauses with carry until done", enqueue(ExportOrders(pages=3))),
                ("fails permanently", import_legacy.enqueue("orders-1999.xls")),
            ]
        worker = Worker(concurrency=2, poll_interval=0.5)
        thread = threading.Thread(target=worker.run, name="demo-worker")
        thread.start()
        deadline = time.monotonic() + options["timeout"]
        try:
            while time.monotonic() < deadline:
                if all(handle.refresh().status in TERMINAL for _, handle in jobs):
                    break
                time.sleep(0.2)
        finally:
            worker.stop()
            thread.join()
        unsettled = [h for _, h in jobs if h.status not in TERMINAL]
        self.stdout.write("")
        for label, handle in jobs:
            job = handle.job
            retries = sum(1 for e in handle.journal() if e.outcome == "retried")
            pauses = sum(1 for e in handle.journal() if e.outcome == "paused")
            summary = job.status
            if retries:
                summary += f" after {retries} retries"
            if pauses:
                summary += f" after {pauses} pauses"
            self.stdout.write(self.style.MIGRATE_HEADING(f"{job.kind}  ({label})"))
            self.stdout.write(f"  outcome: {summary}; result={job.result!r}; carry={job.carry!r}")
            for entry in handle.journal():
                parts = [f"  run {entry.run_no}: {entry.outcome:<10}"]
                if entry.note:
                    parts.append(entry.note.splitlines()[0])
                if entry.attachment:
                    parts.append(f"attachment={entry.attachment!r}")
                self.stdout.write("  ".join(parts).rstrip())
        if unsettled:
            raise CommandError(f"{len(unsettled)} job(s) did not settle within the timeout")
