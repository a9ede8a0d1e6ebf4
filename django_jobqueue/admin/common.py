"""What the admin's pages share: who acts, status and outcome badges, JSON and times.

Every value that came from a job (payload, notes, kinds) is escaped by ``format_html``
or the template engine; nothing here marks text from the database as safe.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, cast

from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString, mark_safe

from django_jobqueue.formatting import fmt_age, fmt_seconds
from django_jobqueue.redaction import redact
from django_jobqueue.validation import Undecodable

if TYPE_CHECKING:
    from django.contrib.admin import AdminSite
    from django.db.models.options import Options
    from django.forms import Media


class JobPages(Protocol):
    """What the dashboard and the cleanup page use of the jobs' ModelAdmin (``JobAdmin``,
    which imports them to route its URLs: typing them against it would be a circle)."""

    admin_site: AdminSite
    opts: Options[Any]

    @property
    def media(self) -> Media: ...

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool: ...

    def has_pause_permission(self, request: HttpRequest) -> bool: ...

    def has_cleanup_permission(self, request: HttpRequest) -> bool: ...


# Status and outcome colours: one palette for the changelists, the detail page and the
# dashboard (text stays black or white on each for contrast).
COLOURS = {
    "waiting": "#1b7c83",
    "pending": "#1f6feb",
    "claimed": "#8250df",
    "completed": "#1a7f37",
    "dead": "#cf222e",
    "cancelled": "#6e7781",
    "paused": "#bf8700",
    "retried": "#d1242f",
    "stale-recovered": "#bc4c00",
    "released": "#0969da",
    "merged": "#6e7781",
    "requeued": "#1f6feb",
    "run-now": "#1f6feb",
    # a pending job not yet runnable, by what it waits for (admin.job_page.state_word)
    "scheduled": "#57606a",
    "sleeping": "#0550ae",
    "waiting for event": "#9a6700",
    # a workflow's own statuses
    "running": "#8250df",
    "failed": "#cf222e",
}

# A JSON value longer than this many characters is shown folded.
FOLD_OVER = 1200


def actor(request: HttpRequest) -> str:
    """The operator, as the journal records them: the admin user's name."""
    user = request.user
    name = user.get_username() if user.is_authenticated else "anonymous"
    return f"admin:{name}"


def back_to(request: HttpRequest, fallback: str) -> str:
    """Where a POST's ``next`` asks to go back to, if it is a page of this site (never
    an open redirect), else ``fallback``."""
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


def log(request: HttpRequest, *, what: str, flag: int, message: str) -> None:
    """A Django ``LogEntry`` for an action on many jobs or on a queue (no one object)."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    from django_jobqueue.models import Job

    LogEntry.objects.create(
        user_id=cast(int, request.user.pk),
        content_type=ContentType.objects.get_for_model(Job),
        object_repr=what[:200],
        action_flag=flag,
        change_message=f"{message} By {actor(request)}.",
    )


def badge(value: str) -> SafeString:
    colour = COLOURS.get(value, "#57606a")
    return format_html(
        '<span class="jq-badge" style="background:{}">{}</span>', colour, value.replace("-", " ")
    )


def short_id(job_id: object) -> str:
    """The id as the changelists show it: its creation millisecond (the first 13
    characters of a UUIDv7) and its last 4 random digits, e.g. ``01a22a71-bb37…1924``.
    Jobs enqueued together share the millisecond, so the tail tells them apart; the
    search box finds the job from this form by a primary-key range."""
    text = str(job_id)
    return f"{text[:13]}…{text[-4:]}"


def pretty_json(value: Any) -> str:
    """A stored JSON value for display, fields named like secrets (``REDACT``) hidden;
    one that could not be decoded is said to be so, with why."""
    if isinstance(value, Undecodable):
        return undecodable(value)
    return json.dumps(redact(value), indent=2, sort_keys=True, ensure_ascii=False, default=str)


def undecodable(value: Undecodable) -> str:
    """How a stored value that cannot be decoded is shown (instead of failing the page)."""
    return f"(undecodable: {value.error})"


def json_block(value: Any) -> dict[str, Any]:
    """A JSON value for a template: its pretty text and whether to fold it."""
    text = pretty_json(value)
    return {"text": text, "folded": len(text) > FOLD_OVER, "size": len(text)}


def age(moment: datetime | None, *, now: datetime | None = None) -> str:
    """ "3m 5s ago" or "in 2h" relative to now."""
    if moment is None:
        return "-"
    delta = ((now or timezone.now()) - moment).total_seconds()
    return f"{fmt_age(delta)} ago" if delta >= 0 else f"in {fmt_age(-delta)}"


def duration(value: timedelta | None) -> str:
    return fmt_seconds(value.total_seconds()) if value is not None else "-"


def local(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    try:
        return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S")
    except OverflowError:  # a time near year 1 or 9999 (raw SQL) has no local form here
        return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def short_time(at: datetime | None) -> str:
    """A time as a list cell shows it: the clock alone today, else the date too."""
    shown = local(at)
    today = local(timezone.now())[:10]
    return shown[11:] if shown[:10] == today else shown[:16]


def moment(at: datetime | None) -> SafeString:
    """A list cell's time: short, its age under it, the whole moment on hover."""
    return format_html(
        '<span title="{}">{}</span><br><small class="quiet">{}</small>',
        local(at),
        short_time(at),
        age(at),
    )


def kind_cell(kind: str) -> SafeString:
    """A kind as a list cell shows it: its task's name, its module small under it
    (breakable at each dot), the whole kind on hover."""
    module, _, name = kind.rpartition(".")
    if not module:
        return format_html("{}", name)
    return format_html(
        '<span title="{}">{}</span><br><small class="quiet">{}</small>',
        kind,
        name,
        format_html_join(mark_safe(".<wbr>"), "{}", ((p,) for p in module.split("."))),
    )
