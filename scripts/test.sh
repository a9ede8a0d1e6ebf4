#!/usr/bin/env bash
# Runs the whole test suite from scratch: its own virtualenv, install, lint, type
# check, migrations check, then pytest on PostgreSQL and the SQLite-marked tests on SQLite.
# PostgreSQL comes from DATABASE_URL (default: the local server, user postgres).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${TEST_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e ".[dev]"
export PATH="$PWD/$VENV/bin:$PATH"
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/jobqueue}"

echo "== ruff"
ruff check .
ruff format --check .
echo "== mypy"
mypy django_jobqueue
echo "== migrations up to date"
DJANGO_SETTINGS_MODULE=tests.settings python -m django makemigrations --check --dry-run

echo "== pytest (PostgreSQL)"
pytest "$@"
echo "== pytest (SQLite)"
DATABASE_URL="sqlite:///unused.sqlite3" pytest -m sqlite "$@"
