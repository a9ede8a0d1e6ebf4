"""The benchmark's django_jobqueue tasks (autodiscovered from tasks.py)."""
