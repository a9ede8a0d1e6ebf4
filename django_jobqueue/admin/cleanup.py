"""The clean-up form: finished jobs before a date-time, of some statuses and a kind.

Two steps: the form, then a page that shows how many jobs it will delete (counted by
``store.cleanup(dry_run=True)``) and asks to confirm; the deletion itself runs in
short batches through ``store.cleanup``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.contrib import messages
from django.contrib.admin.models import DELETION
from django.contrib.admin.widgets import AdminSplitDateTime
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.admin.common import local, log
from django_jobqueue.models import TERMINAL, Job

if TYPE_CHECKING:
    from django_jobqueue.admin.common import JobPages


class CleanupForm(forms.Form):
    finished_before = forms.SplitDateTimeField(
        widget=AdminSplitDateTime,
        help_text="Jobs that finished before this date and time (your time zone).",
    )
    statuses = forms.MultipleChoiceField(
        choices=[(s, s) for s in TERMINAL],
        initial=list(TERMINAL),
        widget=forms.CheckboxSelectMultiple,
        help_text="Only finished jobs are ever deleted.",
    )
    kind = forms.ChoiceField(required=False, help_text="Only this kind (all kinds if empty).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        kinds = store.distinct_values(Job, "kind")
        cast(forms.ChoiceField, self.fields["kind"]).choices = [
            ("", "all kinds"),
            *((k, k) for k in kinds),
        ]

    def clean_finished_before(self) -> Any:
        value = self.cleaned_data["finished_before"]
        if value > timezone.now():
            raise forms.ValidationError("Choose a moment in the past: jobs finish before now.")
        return value

    def options(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "finished_before": data["finished_before"],
            "status": list(data["statuses"]),
            "kind": data["kind"] or None,
        }


def view(modeladmin: JobPages) -> Callable[[HttpRequest], HttpResponse]:
    def cleanup_view(request: HttpRequest) -> HttpResponse:
        if not modeladmin.has_cleanup_permission(request):
            raise PermissionDenied
        form = CleanupForm(request.POST or None)
        context: dict[str, Any] = {
            **modeladmin.admin_site.each_context(request),
            "title": "Clean up finished jobs",
            "opts": modeladmin.opts,
            "form": form,
            "media": modeladmin.media + form.media,
            "count": None,
        }
        if request.method != "POST" or not form.is_valid():
            return TemplateResponse(request, "django_jobqueue/admin/cleanup.html", context)
        options = form.options()
        # The confirmation names the choice it counted: a choice edited after the count
        # is counted again rather than deleted unseen.
        counted = repr(sorted((k, str(v)) for k, v in options.items()))
        if request.POST.get("confirm") != counted:
            context["count"] = store.cleanup(**options, dry_run=True)
            context["counted"] = counted
            return TemplateResponse(request, "django_jobqueue/admin/cleanup.html", context)
        deleted = store.cleanup(**options)
        summary = (
            f"Cleaned up {deleted} finished jobs ({', '.join(options['status'])}"
            f"{', kind ' + options['kind'] if options['kind'] else ''}) that finished before "
            f"{local(options['finished_before'])}"
        )
        log(request, what=f"clean-up of {deleted} jobs", flag=DELETION, message=summary + ".")
        messages.success(request, summary + ".")
        return HttpResponseRedirect(reverse("admin:django_jobqueue_job_changelist"))

    return cleanup_view
