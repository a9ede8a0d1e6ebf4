"""A Prometheus metrics view: run counters and durations from the run tally that every
settlement adds to (never a scan of the journal, so a scrape costs the same however
long the journal grows, and cleanups never make them fall), backlog and worker gauges
from ``gauges()`` (``stats()`` without the journal). Needs ``prometheus-client`` (the
``metrics`` extra).

Mount it in your URLconf::

    import django_jobqueue.metrics

    urlpatterns = [path("metrics/", django_jobqueue.metrics.view)]

Every scrape reads the database, never this process's memory, so the numbers are the
same whichever web process answers and count every worker process's runs. Access:
the session of a staff user who may view jobs (``django_jobqueue.view_job``), or
``Authorization: Bearer <JOBQUEUE["METRICS_TOKEN"]>``.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

try:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.exposition import choose_encoder
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - exercised by a test that hides the package
    raise ImproperlyConfigured(
        "django_jobqueue.metrics needs prometheus-client: "
        "pip install 'django-jobqueue[metrics]' (or prometheus-client)"
    ) from exc

from django_jobqueue import conf, routing, store
from django_jobqueue.store import dialects
from django_jobqueue.task.registry import registry

if TYPE_CHECKING:
    from django_jobqueue.store.snapshot import Gauges

PREFIX = "jobqueue"
# What a session user needs to read the metrics: the permission to view jobs in the admin.
VIEW_PERMISSION = "django_jobqueue.view_job"


class JobQueueCollector(Collector):
    """Reads the queue's numbers from the database on every ``collect()``."""

    def collect(self) -> Iterator[Metric]:
        if not routing.several():
            yield from self._runs()
            yield from self._backlog()
            return
        yield from self._each_database()

    def _each_database(self) -> Iterator[Metric]:
        """With several queue databases: every sample once per database, labelled with
        its alias (``database``), and ``jobqueue_database_up`` saying which answered (a
        database that is down costs its own samples, not the scrape)."""
        merged: dict[str, Metric] = {}
        up = GaugeMetricFamily(
            f"{PREFIX}_database_up",
            "1 for each queue database this scrape read, 0 for one it could not reach.",
            labels=["database"],
        )
        for alias in routing.each():
            try:
                with routing.using(routing.read_alias()):  # its READ replica, if any
                    families = [*self._runs(), *self._backlog()]
            except Exception as exc:
                if not dialects.for_alias(alias).is_connection_error(exc):
                    raise
                up.add_metric([alias], 0)
                continue
            up.add_metric([alias], 1)
            for family in families:
                into = merged.setdefault(
                    family.name,
                    Metric(family.name, family.documentation, family.type, family.unit),
                )
                into.samples += [
                    s._replace(labels={**s.labels, "database": alias}) for s in family.samples
                ]
        yield from merged.values()
        yield up

    def _runs(self) -> Iterator[Metric]:
        runs = CounterMetricFamily(
            f"{PREFIX}_runs",
            "Runs that ended, by kind and journal outcome (those of cleaned-up jobs included).",
            labels=["kind", "outcome"],
        )
        durations: dict[str, list[Any]] = {}
        bounds = store.DURATION_BUCKETS
        for total in store.run_totals():
            runs.add_metric([total.kind, total.outcome], total.runs)
            buckets, timed, seconds = durations.setdefault(total.kind, [[0] * len(bounds), 0, 0.0])
            for index, count in enumerate(total.buckets):
                buckets[index] += count
            durations[total.kind][1] = timed + total.timed
            durations[total.kind][2] = seconds + total.seconds
        yield runs
        histogram = HistogramMetricFamily(
            f"{PREFIX}_run_duration_seconds",
            "How long runs took, by kind (runs with a recorded duration).",
            labels=["kind"],
        )
        for kind, (buckets, timed, seconds) in sorted(durations.items()):
            histogram.add_metric(
                [kind],
                [*[(_le(b), n) for b, n in zip(bounds, buckets, strict=True)], ("+Inf", timed)],
                seconds,
            )
        yield histogram

    def _backlog(self) -> Iterator[Metric]:
        # The run statistics are the counters' business: the gauges never read the journal.
        snapshot = store.gauges()
        known = registry.kinds()
        yield from _jobs(snapshot, known)
        yield from _workers(snapshot)


def _jobs(snapshot: Gauges, known: list[str]) -> Iterator[Metric]:
    """The job gauges; every kind this process knows is present, at zero if it has none."""
    pending = GaugeMetricFamily(
        f"{PREFIX}_pending_jobs",
        "Jobs runnable now (pending and due), by kind and queue.",
        labels=["kind", "queue"],
    )
    seen = {(row.kind, row.queue): row.count for row in snapshot.pending}
    for kind in known:
        seen.setdefault((kind, registry.get(kind).queue), 0)
    for (kind, queue), count in sorted(seen.items()):
        pending.add_metric([kind, queue], count)
    yield pending

    oldest = GaugeMetricFamily(
        f"{PREFIX}_oldest_pending_seconds",
        "How long the longest-waiting runnable job of each kind has been due.",
        labels=["kind"],
    )
    for kind, seconds in sorted(snapshot.oldest_pending_seconds.items()):
        oldest.add_metric([kind], max(seconds, 0.0))
    yield oldest

    yield GaugeMetricFamily(
        f"{PREFIX}_scheduled_jobs",
        "Pending jobs not yet due (delayed, paused, backing off).",
        value=snapshot.scheduled,
    )
    yield GaugeMetricFamily(
        f"{PREFIX}_waiting_steps",
        "Workflow steps waiting for their parents (never claimed, not backlog).",
        value=snapshot.waiting,
    )
    for name, by_kind, what in (
        ("claimed_jobs", snapshot.claimed_by_kind, "Jobs claimed by a worker now, by kind."),
        ("dead_jobs", snapshot.dead, "Dead jobs the database holds, by kind."),
    ):
        gauge = GaugeMetricFamily(f"{PREFIX}_{name}", what, labels=["kind"])
        counts = {**dict.fromkeys(known, 0), **by_kind}
        for kind, count in sorted(counts.items()):
            gauge.add_metric([kind], count)
        yield gauge
    yield GaugeMetricFamily(
        f"{PREFIX}_cancelled_jobs",
        "Cancelled jobs the database holds.",
        value=snapshot.cancelled,
    )


def _workers(snapshot: Gauges) -> Iterator[Metric]:
    """Workers by state, paused queues and unserved kinds."""
    workers = GaugeMetricFamily(
        f"{PREFIX}_workers",
        "Workers by state: alive (a heartbeat within a minute, not stopped) or gone.",
        labels=["state"],
    )
    states = {"alive": 0, "gone": 0}
    for w in snapshot.workers:
        states[w.state] += 1
    for state, count in states.items():
        workers.add_metric([state], count)
    yield workers

    paused = GaugeMetricFamily(
        f"{PREFIX}_queue_paused", "1 for each paused queue.", labels=["queue"]
    )
    for row in snapshot.paused_queues:
        paused.add_metric([row.queue], 1)
    yield paused

    unserved = GaugeMetricFamily(
        f"{PREFIX}_unserved_kind",
        "1 for each kind with runnable jobs that no live worker serves.",
        labels=["kind"],
    )
    for kind in snapshot.unserved_kinds:
        unserved.add_metric([kind], 1)
    yield unserved


def _le(bound: float) -> str:
    return repr(float(bound))


def exposition(accept: str | None = None) -> tuple[bytes, str]:
    """The metrics as text, in the format ``accept`` asks for (Prometheus text by
    default, OpenMetrics on request), and its content type."""
    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(JobQueueCollector())
    encoder, content_type = choose_encoder(accept or "")
    return encoder(collectors), content_type


def _allowed(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read the metrics; else the 401 or 403 to answer."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, given = header.partition(" ")
        token = conf.get().metrics_token
        if scheme.lower() != "bearer" or token is None:
            return _unauthorized(
                "only a bearer token is accepted here, and only when "
                'JOBQUEUE["METRICS_TOKEN"] is set'
            )
        if hmac.compare_digest(given.strip().encode(), token.encode()):
            return None
        return _unauthorized("invalid bearer token")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return _unauthorized("log in as a staff user, or send a bearer token")
    # The admin's own rule for seeing jobs: staff, and the permission to view them (a
    # staff user the admin refuses everywhere reads no numbers here either).
    if not (user.is_active and user.is_staff and user.has_perm(VIEW_PERMISSION)):
        return HttpResponse(
            f"the job queue's metrics are for staff users with the {VIEW_PERMISSION} permission\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    return None


def _unauthorized(reason: str) -> HttpResponse:
    response = HttpResponse(f"{reason}\n", status=401, content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = 'Bearer realm="jobqueue metrics"'
    return response


@never_cache
@require_GET
def view(request: HttpRequest) -> HttpResponse:
    """The Prometheus metrics, for a staff user who may view jobs or a bearer of
    ``METRICS_TOKEN``."""
    refused = _allowed(request)
    if refused is not None:
        return refused
    body, content_type = exposition(request.headers.get("Accept"))
    return HttpResponse(body, content_type=content_type)
