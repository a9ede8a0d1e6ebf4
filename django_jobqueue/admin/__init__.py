"""The Django admin for the queue: jobs, the journal, workflows, a dashboard and the
clean-up form.

Every action calls the storage layer (``django_jobqueue.store``); nothing here decides
what a job's state allows. See docs/howto/admin.md.
"""

from __future__ import annotations

from django.contrib import admin

from django_jobqueue.admin.jobs import JobAdmin
from django_jobqueue.admin.journal import JournalEntryAdmin
from django_jobqueue.admin.workflows import WorkflowAdmin
from django_jobqueue.models import Job, JournalEntry, Workflow

__all__ = ["JobAdmin", "JournalEntryAdmin", "WorkflowAdmin"]

admin.site.register(Job, JobAdmin)
admin.site.register(JournalEntry, JournalEntryAdmin)
admin.site.register(Workflow, WorkflowAdmin)
