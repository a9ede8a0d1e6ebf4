"""Tasks of the conformance matrix (tests/conformance): a subject whose run ends the way a
cell needs (completes, fails once, sleeps, waits for an event) and a parent for its joins.
Neither has a limit of its own: each rule of the matrix sets its own in the settings."""

from __future__ import annotations

from datetime import timedelta

from django_jobqueue import Backoff, Context, task

# The name a waiting subject waits for (its key is the subject's own id).
EVENT = "tests.matrix.event"
# Long enough that nothing a cell does outlasts it: a retry, a sleep or a wait ends only
# when the cell says so (it moves the job's time, or emits the event).
LATER = timedelta(hours=1)


@task(
    takes_context=True,
    kind="tests.matrix.subject",
    max_failures=None,
    backoff=Backoff(base=LATER, cap=LATER),
)
def subject(ctx: Context, how: str = "") -> str:
    """``how``: "" completes; "fail" fails its first run (a retry an hour later);
    "sleep" sleeps an hour (``ctx.sleep``); "wait" waits for ``EVENT``, keyed by its id."""
    if how == "fail" and ctx.failure_count == 0:
        raise RuntimeError("the matrix's planned failure")
    if how == "sleep":
        ctx.sleep(LATER)
    if how == "wait":
        ctx.wait_for(EVENT, key=str(ctx.job_id), timeout=LATER)
    return how


@task(kind="tests.matrix.parent")
def parent() -> str:
    """A workflow step's parent, of a kind no rule of the matrix limits."""
    return "parent"
