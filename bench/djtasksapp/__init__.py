"""Django Tasks (``django.tasks``) for django_jobqueue\x27s backend in the benchmark."""
