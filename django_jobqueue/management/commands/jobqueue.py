"""``manage.py jobqueue``: look at the queue and steer jobs from a shell.

Each subcommand is a module of its own in ``django_jobqueue.management.subcommands``
(its name, help, arguments and what it does); this command lists them and dispatches.
Every read and write goes through :mod:`django_jobqueue.store`, exactly as the admin's
do.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import conf, routing, store
from django_jobqueue.errors import ConfigurationError, QueueDatabaseUnavailable
from django_jobqueue.management.subcommands import ALL, BY_NAME


class Command(BaseCommand):
    help = f"Inspect and steer the job queue: {', '.join(s.NAME for s in ALL)}."

    def add_arguments(self, parser: ArgumentParser) -> None:
        # Before the subcommand (``jobqueue --database jobs_b list``): it is every one's.
        parser.add_argument(
            "--database",
            default=None,
            metavar="ALIAS",
            help="The queue database to work on (default: the one holding the job or "
            "workflow named; else, with several queue databases, each in turn).",
        )
        sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
        for subcommand in ALL:
            subcommand.arguments(sub.add_parser(subcommand.NAME, help=subcommand.HELP))

    def execute(self, *args: Any, **options: Any) -> str | None:
        chosen = BY_NAME.get(options.get("subcommand") or "")
        if chosen is not None and chosen.SKIP_CHECKS:
            options["skip_checks"] = True
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            conf.get()
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from exc
        chosen = BY_NAME[options["subcommand"]]
        failed: list[str] = []
        for alias, own in self._databases(options):
            if alias is None:  # one queue database: as it always ran
                chosen.run(self, own)
                continue
            self.stdout.write(f"== database {alias}")
            try:
                with store.on_database(alias):
                    chosen.run(self, own)
            except (CommandError, QueueDatabaseUnavailable) as exc:
                # Said, and the next database still gets its turn (health reports each).
                self.stderr.write(f"{alias}: {exc}")
                failed.append(alias)
        if failed:
            raise CommandError(f"{options['subcommand']} failed on {', '.join(failed)}")

    def _databases(self, options: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
        """Where the subcommand runs, with its options there: ``--database``'s; the
        database holding the job or workflow it names (the jobs it names by id: each
        database its own ids); each queue database in turn; with one database, that one
        (None: as it always did, not a word more)."""
        alias = options.get("database")
        if alias is not None:
            try:
                return [(routing.check(alias), options)]
            except ConfigurationError as exc:
                raise CommandError(f"--database: {exc}") from exc
        if not routing.several() or options["subcommand"] in HOME_ONLY:
            return [(None if not routing.several() else conf.get().database, options)]
        found = located(options)
        if found is not None:
            return [(found, options)]
        if options.get("job_ids"):
            return [
                (alias, {**options, "job_ids": ids}) for alias, ids in by_database(options).items()
            ]
        if options.get("json"):
            raise CommandError(
                "--json reads one queue database: name it with --database (the queue "
                f"databases: {', '.join(routing.aliases())})"
            )
        return [(alias, options) for alias in routing.aliases()]


# Subcommands about what lives on the schedules' home database only.
HOME_ONLY = {"schedules", "import-celery-beat", "celery-check"}


def located(options: dict[str, Any]) -> str | None:
    """The database holding the one job or workflow the options name (None: they name
    none, or no database holds it: each is then asked, and says so)."""
    for name, find in (
        ("job_id", store.database_of_job),
        ("workflow_id", store.database_of_workflow),
    ):
        value = options.get(name)
        if value is None:
            continue
        try:
            return find(store.as_uuid(value))
        except Exception:
            return None
    return None


def by_database(options: dict[str, Any]) -> dict[str, list[Any]]:
    """The jobs named by id, by the database holding each (one none holds: HOME's, whose
    run then says there is no such job)."""
    shares: dict[str, list[Any]] = {}
    for job_id in options["job_ids"]:
        try:
            alias = store.database_of_job(store.as_uuid(job_id))
        except Exception:
            alias = None
        shares.setdefault(alias or conf.get().database, []).append(job_id)
    return shares
