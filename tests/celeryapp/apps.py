from django.apps import AppConfig


class CeleryAppConfig(AppConfig):
    name = "tests.celeryapp"
    label = "celeryapp"
    default_auto_field = "django.db.models.BigAutoField"
