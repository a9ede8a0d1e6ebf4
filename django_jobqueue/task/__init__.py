"""Defining and submitting work: the registry of kinds, function and class tasks
(``definition``), enqueue and its options, merge decisions, periodic and cron
schedules, and limits per kind."""
