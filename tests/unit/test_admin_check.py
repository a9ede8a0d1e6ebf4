"""With the admin installed, leaving out rangefilter is a system check error naming it."""

from __future__ import annotations

from django.test import override_settings

from django_jobqueue.checks import check_admin_apps
from testproject.settings import INSTALLED_APPS


def test_the_admin_without_rangefilter_is_an_error_and_with_it_is_not() -> None:
    assert check_admin_apps() == []
    without = [a for a in INSTALLED_APPS if a != "rangefilter"]
    with override_settings(INSTALLED_APPS=without):
        [error] = check_admin_apps()
    assert error.id == "django_jobqueue.E002"
    assert "'rangefilter'" in error.msg
    with override_settings(INSTALLED_APPS=[a for a in without if a != "django.contrib.admin"]):
        assert check_admin_apps() == []
