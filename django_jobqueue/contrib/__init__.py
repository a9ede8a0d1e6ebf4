"""Optional surfaces on top of the queue (``contrib.celery``: a Celery-compatible API)."""
