"""``Celery(name)``: the app object of a Celery project (``proj/celery.py``), its
configuration, ``.task``, ``autodiscover_tasks()``, ``control.revoke`` and its
``beat_schedule``; and ``shared_task``.

Nothing here reads a model or a setting at import time: ``proj/__init__.py`` imports
the app before Django's apps are loaded. What needs them (the modules to discover,
the beat schedules) is done when the installed apps' tasks modules have been imported
(``registry.when_ready``).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

from django_jobqueue.contrib.celery.config import Conf, apps
from django_jobqueue.contrib.celery.exceptions import DifferentHere
from django_jobqueue.contrib.celery.task import Task, make
from django_jobqueue.contrib.celery.task import Task as BaseTask
from django_jobqueue.task.registry import registry


class Control:
    """``app.control``: ``revoke`` (a job's cancel; ``terminate`` where the pool can)."""

    def revoke(self, task_id: Any, destination: Any = None, terminate: bool = False,
               signal: Any = None, **ignored: Any) -> None:  # fmt: skip
        from django_jobqueue.contrib.celery.result import revoke

        for one in task_id if isinstance(task_id, list | tuple) else [task_id]:
            revoke(one, terminate=terminate)


class Celery:
    """A Celery app: ``broker``/``backend`` are accepted and unused (the database is
    both); ``include`` modules are imported with the tasks modules."""

    def __init__(self, main: str | None = None, *, broker: Any = None, backend: Any = None,
                 include: list[str] | None = None, set_as_current: bool = True,
                 **ignored: Any) -> None:  # fmt: skip
        self.main = main
        self.conf = Conf()
        self.control = Control()
        self._modules: list[str] = list(include or [])
        self.finalized = False
        self.tasks: dict[str, BaseTask] = {}
        if set_as_current:
            apps.append(self)
        registry.when_ready(self.finalize)

    # ``class MyTask(app.Task)``: the base of class-based tasks.
    Task = BaseTask

    def config_from_object(self, obj: str | object, silent: bool = False, force: bool = False,
                           namespace: str | None = None) -> None:  # fmt: skip
        """Read settings from ``obj`` when asked for (``"django.conf:settings"`` with
        ``namespace="CELERY"``: ``CELERY_TASK_ROUTES`` is ``conf.task_routes``)."""
        self.conf.from_object(obj, namespace)

    def autodiscover_tasks(self, packages: Any = None, related_name: str = "tasks",
                           force: bool = False) -> None:  # fmt: skip
        """Import each package's ``related_name`` module with the installed apps' tasks
        modules (Django's installed apps' ``tasks.py`` are always imported)."""
        if callable(packages):
            packages = packages()
        for package in packages or ():
            self._modules.append(f"{package}.{related_name}")
        if related_name != "tasks" and not packages:
            from django.apps import apps

            self._later(lambda: [self._import_each(f"{c.name}.{related_name}", quiet=True)
                                 for c in apps.get_app_configs()])  # fmt: skip

    def _later(self, fn: Callable[[], Any]) -> None:
        if self.finalized:
            fn()
        else:
            registry.when_ready(fn)

    @staticmethod
    def _import_each(module: str, *, quiet: bool = False) -> None:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not (quiet and exc.name == module):
                raise

    def finalize(self) -> None:
        """Import the modules to discover and register the beat schedule (called when
        the installed apps' tasks modules are imported; again, it changes nothing)."""
        from django_jobqueue.contrib.celery.beat import register_beat

        self.conf.checked()
        for module in self._modules:
            self._import_each(module)
        register_beat(self.conf["beat_schedule"], timezone=self.conf["timezone"])
        self.finalized = True

    def task(self, *args: Any, **options: Any) -> Any:
        """``@app.task`` or ``@app.task(bind=True, ...)``: a task (see ``shared_task``)."""

        def decorate(fun: Callable[..., Any]) -> BaseTask:
            task = make(fun, app=self, options=options)
            self.tasks[task.name] = task
            return task

        if len(args) == 1 and callable(args[0]) and not options:
            return decorate(args[0])
        if args:
            raise TypeError("app.task() takes the function, or only keyword options")
        return decorate

    def register_task(self, task: BaseTask | type[BaseTask], **options: Any) -> BaseTask:
        """A class-based task (``class MyTask(Task): def run(self, ...)``)."""
        instance = task() if isinstance(task, type) else task
        fun = type(instance).run
        return make(fun, app=self, options={"bind": True, "name": instance.name or
                                            f"{fun.__module__}.{type(instance).__name__}",
                                            "base": type(instance), **options})  # fmt: skip

    def send_task(self, name: str, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        from django_jobqueue.contrib.celery.canvas import Signature

        return Signature(name, args or (), kwargs or {}, options).apply_async()

    def signature(self, name: str, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        from django_jobqueue.contrib.celery.canvas import Signature

        return Signature(name, args or (), kwargs or {}, options)

    def AsyncResult(self, task_id: Any, **ignored: Any) -> Any:
        from django_jobqueue.contrib.celery.result import AsyncResult

        return AsyncResult(task_id)

    def GroupResult(self, id: Any = None, results: Any = None, **ignored: Any) -> Any:
        from django_jobqueue.contrib.celery.result import GroupResult

        return GroupResult(id, results)

    def set_current(self) -> None:
        apps.append(self)

    def __repr__(self) -> str:
        return f"<Celery {self.main}>"


def current_app() -> Celery:
    """The app made last (one with default settings if none was)."""
    if not apps:
        Celery("default")
    current: Celery = apps[-1]
    return current


def shared_task(*args: Any, **options: Any) -> Any:
    """``@shared_task`` or ``@shared_task(bind=True, autoretry_for=..., ...)``: a task of
    whichever app is current when it is called."""

    def decorate(fun: Callable[..., Any]) -> Task:
        return make(fun, app=None, options=options)

    if len(args) == 1 and callable(args[0]) and not options:
        return decorate(args[0])
    if args:
        raise TypeError("shared_task() takes the function, or only keyword options")
    return decorate


def warn(message: str) -> None:
    warnings.warn(message, DifferentHere, stacklevel=3)


from django_jobqueue.contrib.celery import builtins as _builtins  # noqa: E402, F401 - registers celery.starmap/map
