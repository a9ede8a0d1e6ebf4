from django.apps import AppConfig


class DjangoTasksAppConfig(AppConfig):
    name = "tests.djtasks"
    label = "djtasks"
