"""The benchmark's django-tasks-db tasks."""
