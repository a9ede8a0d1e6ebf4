"""Workflows: signatures composed into steps joined by edges (chain, group, chord, a
graph of named steps, an open batch), whose joins fire once, with the guarded
settlement of the parent that completes them (see ``store.joins``)."""

from __future__ import annotations

from django_jobqueue.workflows.batch import Batch
from django_jobqueue.workflows.graph import StepRef, Workflow, chain, chord, group
from django_jobqueue.workflows.handle import WorkflowHandle, workflow

__all__ = ["Batch", "StepRef", "Workflow", "WorkflowHandle", "chain", "chord", "group", "workflow"]
