"""System checks: a bad JOBQUEUE setting fails ``check``/``runworker`` at startup."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from . import conf
from .errors import ConfigurationError


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        conf.validate(getattr(settings, "JOBQUEUE", None))
    except ConfigurationError as exc:
        return [Error(str(exc), id="django_jobqueue.E001", hint="See the settings reference.")]
    return []
