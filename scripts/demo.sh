#!/usr/bin/env bash
# Runs the example project on SQLite from scratch: its own virtualenv, install,
# migrate, enqueue the example jobs, run a worker until they settle, print outcomes.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${DEMO_VENV:-.venv-demo}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# The example project mounts the Prometheus metrics view, hence the metrics extra.
"$VENV/bin/python" -m pip install --quiet ".[metrics]"
export DJANGO_SETTINGS_MODULE=testproject.settings
unset DATABASE_URL
export SQLITE_PATH="${SQLITE_PATH:-$(mktemp -d)/demo.sqlite3}"
export JOBQUEUE_LOG_LEVEL="${JOBQUEUE_LOG_LEVEL:-WARNING}"
"$VENV/bin/python" testproject/manage.py migrate --verbosity 0
"$VENV/bin/python" testproject/manage.py demo
cat <<HINT

To browse these jobs in the admin (docs/howto/admin.md):
  SQLITE_PATH=$SQLITE_PATH DJANGO_SETTINGS_MODULE=testproject.settings $VENV/bin/python testproject/manage.py createsuperuser
  SQLITE_PATH=$SQLITE_PATH DJANGO_SETTINGS_MODULE=testproject.settings $VENV/bin/python testproject/manage.py runserver
and open http://127.0.0.1:8000/admin/django_jobqueue/job/
HINT
