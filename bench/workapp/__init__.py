"""The workload measures' tasks (bench/workloads.py), in an app of their own: a worker
that knows an ``async def`` kind runs an event loop and claims for it, so the plain
drains' settings (``settings_jobqueue``) leave these out."""
