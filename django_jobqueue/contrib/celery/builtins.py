"""Celery's built-in tasks that ``starmap``, ``map`` and ``chunks`` run: one job
calling a registered task for each item, returning their results' list."""

from __future__ import annotations

from typing import Any

from django_jobqueue.contrib.celery.task import Task, make


def _task(name: str) -> Any:
    from django_jobqueue.task.registry import registry

    return registry.get(name).task  # type: ignore[attr-defined]


def _starmap(task: str, it: list[list[Any]]) -> list[Any]:
    target = _task(task)
    return [target(*args) for args in it]


def _map(task: str, it: list[Any]) -> list[Any]:
    target = _task(task)
    return [target(item) for item in it]


_BUILTINS = {
    "celery.starmap": make(_starmap, app=None, options={"name": "celery.starmap"}),
    "celery.map": make(_map, app=None, options={"name": "celery.map"}),
}


def get(name: str) -> Task:
    return _BUILTINS[name]
