"""Side-by-side benchmark of django_jobqueue, django-tasks-db and pgqueuer.

Run ``python -m bench`` from the repository root (``--quick`` for a smoke run).
Nothing here is part of the installed package; see bench/README.md.
"""
