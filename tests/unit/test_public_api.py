"""The public API, pinned: ``django_jobqueue.__all__`` is exactly this list, and every
public name is importable from where the docs say it is (``django_jobqueue``,
``django_jobqueue.testing``, ``django_jobqueue.backend``, ``django_jobqueue.metrics``).
Moving code between internal modules must leave all of this as it is; a name added
or removed here is a change of the public API, and the docs change with it."""

from __future__ import annotations

import importlib
import inspect
import re
import tomllib
from pathlib import Path

import pytest

import django_jobqueue

DOCS = Path(__file__).resolve().parents[2] / "docs"

# As it stood before the packages of issue 18, plus the typed errors that issue added
# (InvalidFilter, KeyContended, UnknownFilter), and issue 19's workflows (Batch, Signature,
# Workflow, WorkflowHandle, chain, chord, group, workflow and their errors), and issue 22's
# durable steps (emit and the errors InvalidEvent, InvalidStep, StepError), and issue 34's
# explanations (Explanation, Why: ``JobHandle.explain()``), and issue 35's streams (Stream,
# StreamItem: ``JobHandle.stream()``; InvalidStreamItem, StreamFull), workflow results
# (WorkflowResultError, WorkflowNotFinished, WorkflowFailed, NoWorkflowOutput) and child
# workflows (ChildDepthExceeded, ChildFailed).
PUBLIC = [
    "Backoff",
    "Batch",
    "ChildDepthExceeded",
    "ChildFailed",
    "ClaimLost",
    "ConfigurationError",
    "Context",
    "DuplicateKind",
    "DuplicateStep",
    "EmptyWorkflow",
    "EnqueueError",
    "Explanation",
    "HistoryPage",
    "InvalidArguments",
    "InvalidEvent",
    "InvalidFilter",
    "InvalidJoin",
    "InvalidLimit",
    "InvalidMarker",
    "InvalidOption",
    "InvalidPayload",
    "InvalidProgress",
    "InvalidStep",
    "InvalidStreamItem",
    "InvalidTransition",
    "JobHandle",
    "JobNotFound",
    "JobQueueError",
    "KeyContended",
    "Merge",
    "MergeError",
    "NoWorkflowOutput",
    "Outcome",
    "Pause",
    "Pending",
    "Permanent",
    "Priority",
    "Progress",
    "RateLimited",
    "SettleError",
    "Signature",
    "SoftTimeLimitExceeded",
    "Status",
    "StepDivergence",
    "StepError",
    "Stream",
    "StreamFull",
    "StreamItem",
    "Task",
    "UnknownFilter",
    "UnknownKind",
    "UnknownStep",
    "Why",
    "Workflow",
    "WorkflowCycle",
    "WorkflowError",
    "WorkflowFailed",
    "WorkflowHandle",
    "WorkflowNotFinished",
    "WorkflowNotFound",
    "WorkflowResultError",
    "cancel",
    "chain",
    "chord",
    "cleanup",
    "clear_limit",
    "emit",
    "enqueue",
    "enqueue_many",
    "group",
    "history",
    "job",
    "job_enqueued",
    "job_finished",
    "job_started",
    "limits",
    "mark",
    "pause_queue",
    "periodic",
    "requeue",
    "resume_queue",
    "run_now",
    "set_limit",
    "stats",
    "task",
    "workflow",
]

# Module -> the names its docs import from it.
DOCUMENTED = {
    "django_jobqueue.testing": [
        "CapturedJob",
        "TooManyJobs",
        "assert_enqueued",
        "assert_not_enqueued",
        "assert_workflow",
        "captured_jobs",
        "run_jobs",
    ],
    "django_jobqueue.backend": ["JobQueueBackend", "JobQueueTask", "LeaseExpired", "tier"],
    "django_jobqueue.metrics": ["view"],
    "django_jobqueue.streams": ["astream_response", "stream_response"],
}


def test_all_is_exactly_the_pinned_list_in_order() -> None:
    assert django_jobqueue.__all__ == PUBLIC


def test_every_name_of_all_is_importable_from_the_package() -> None:
    namespace: dict[str, object] = {}
    exec("from django_jobqueue import *", namespace)  # a fixed import line, nothing read
    assert sorted(n for n in namespace if n != "__builtins__") == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(django_jobqueue, name) is namespace[name]


def test_the_new_errors_are_job_queue_errors_and_keep_their_builtin_category() -> None:
    assert issubclass(django_jobqueue.KeyContended, django_jobqueue.EnqueueError)
    assert issubclass(django_jobqueue.KeyContended, RuntimeError)
    assert issubclass(django_jobqueue.InvalidFilter, django_jobqueue.JobQueueError)
    assert issubclass(django_jobqueue.InvalidFilter, ValueError)
    assert issubclass(django_jobqueue.UnknownFilter, django_jobqueue.InvalidFilter)
    assert issubclass(django_jobqueue.UnknownFilter, TypeError)


@pytest.mark.parametrize(("module", "names"), sorted(DOCUMENTED.items()))
def test_each_documented_name_is_importable_from_its_module(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    missing = [n for n in names if not hasattr(imported, n)]
    assert missing == [], f"{module} lacks {missing}"
    declared = getattr(imported, "__all__", None)
    if declared is not None:
        assert sorted(declared) == sorted(names), f"{module}.__all__ is not the pinned list"
    for name in names:
        value = getattr(imported, name)
        assert inspect.isclass(value) or callable(value), f"{module}.{name}"


def test_the_testing_docs_import_exactly_the_pinned_names() -> None:
    """The import block at the top of testing-your-code.md is what users copy: it must
    name what the test kit has, so the pin above follows the docs."""
    text = next(DOCS.rglob("testing-your-code.md")).read_text()
    block = re.search(r"from django_jobqueue\.testing import \((.*?)\)", text, re.S)
    assert block is not None
    shown = [n.strip() for n in block.group(1).split(",") if n.strip()]
    assert sorted(shown) == sorted(DOCUMENTED["django_jobqueue.testing"])


def test_version_and_classifiers_come_from_pyproject() -> None:
    """One source of the version (pyproject.toml, read back through the installed
    metadata), and a classifier for every supported Django and Python."""
    project = tomllib.loads(
        (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    )["project"]
    assert django_jobqueue.__version__ == project["version"]
    classifiers = set(project["classifiers"])
    for django_version in ("5.2", "6.0", "6.1"):
        assert f"Framework :: Django :: {django_version}" in classifiers
    for python in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {python}" in classifiers
    assert {"build>=1.2", "twine>=5.1"} <= set(project["optional-dependencies"]["dev"])
