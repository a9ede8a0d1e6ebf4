#!/usr/bin/env bash
# Runs the whole test suite from scratch: its own virtualenv, install, lint, type
# check, migrations check, then pytest on PostgreSQL, the SQLite-marked tests on SQLite,
# and the database tier on MariaDB/MySQL.
# PostgreSQL comes from DATABASE_URL (default: the local server, user postgres);
# MariaDB/MySQL from MYSQL_DATABASE_URL (default: the local server, user root).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${TEST_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e ".[dev,bench]"
export PATH="$PWD/$VENV/bin:$PATH"
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/jobqueue}"
MYSQL_DATABASE_URL="${MYSQL_DATABASE_URL:-mysql://root@127.0.0.1:3306/jobqueue}"

# The MariaDB leg's driver, mysqlclient, compiles against the system's client library:
# its build dependencies are installed here when missing (and we may); without them the
# install below fails, and so does this script.
if ! pkg-config --exists libmariadb 2>/dev/null && ! pkg-config --exists mysqlclient 2>/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing mysqlclient's build dependencies (pkg-config, libmariadb-dev)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pkg-config libmariadb-dev >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pkg-config libmariadb-dev >/dev/null; }
  else
    echo "== FAILED: mysqlclient needs pkg-config and libmariadb-dev (or libmysqlclient-dev); install them" >&2
    exit 1
  fi
fi
"$VENV/bin/python" -m pip install --quiet -e ".[mysql]"

# The browser tier (tests/browser) drives the system's Chromium through Playwright
# (installed above with the dev extra; Playwright's own browser download is not used).
# Installed here when missing and we may; otherwise those tests skip, saying why.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing chromium for the browser tests"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
      || echo "   could not install chromium: the browser tests will be skipped"
  else
    echo "== no chromium and no way to install it (not root, or no apt-get): the browser tests will be skipped"
  fi
fi
# The PgBouncer tests (tests/pgbouncer) start Debian's pgbouncer on a free local port in
# front of the test database; installed here when missing and we may, else they skip.
if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing pgbouncer for the PgBouncer tests"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; } \
      || echo "   could not install pgbouncer: the PgBouncer tests will be skipped"
  else
    echo "== no pgbouncer and no way to install it (not root, or no apt-get): the PgBouncer tests will be skipped"
  fi
fi
export SCREENSHOTS_DIR="${SCREENSHOTS_DIR:-${TMPDIR:-/tmp}/jobqueue-screenshots}"

echo "== ruff"
ruff check .
ruff format --check .
echo "== mypy"
mypy django_jobqueue bench
echo "== migrations up to date"
DATABASE_URL="sqlite:///unused.sqlite3" DJANGO_SETTINGS_MODULE=tests.settings python -m django makemigrations --check --dry-run

echo "== pytest (PostgreSQL)"
pytest "$@"
echo "== pytest (SQLite)"
DATABASE_URL="sqlite:///unused.sqlite3" pytest -m sqlite "$@"
# MariaDB/MySQL: the database, admin and security tiers (their PostgreSQL-only tests skip), and
# four runworker processes draining 2,000 jobs and a SIGKILLed worker's job recovered.
# An unreachable server fails the leg here, saying so, rather than skipping it.
echo "== pytest (MariaDB/MySQL: database, admin and security tiers, drain and crash recovery)"
DATABASE_URL="$MYSQL_DATABASE_URL" python -c '
import os, sys
import dj_database_url, MySQLdb
s = dj_database_url.parse(os.environ["DATABASE_URL"])
try:
    MySQLdb.connect(host=s["HOST"] or "127.0.0.1", port=int(s["PORT"] or 3306),
                    user=s["USER"] or "root", password=s["PASSWORD"] or "").close()
except Exception as exc:
    sys.exit(f"== FAILED: MariaDB/MySQL is not reachable at MYSQL_DATABASE_URL: {exc}")
'
DATABASE_URL="$MYSQL_DATABASE_URL" pytest tests/db tests/admin tests/security tests/concurrency/test_drain.py \
  tests/concurrency/test_crash_recovery.py "$@"
echo "== browser screenshots: $SCREENSHOTS_DIR"

# The benchmark's short form (about a minute), so it never rots: it fails only when a
# measure cannot run, never on speed. BENCH=0 skips it.
if [ "${BENCH:-1}" != "0" ]; then
  echo "== benchmark (python -m bench --quick)"
  python -m bench --quick --json "${TMPDIR:-/tmp}/jobqueue-bench-quick.json"
fi

# Django 6.x (core django.tasks) needs Python >= 3.12: run the unit, database and admin
# tiers on PostgreSQL, the Django Tasks backend's worker tests, and the SQLite-marked
# tests of the unit and database tiers again under the newest Django (the fuzz, chaos,
# browser and scale campaigns ran above; they do not depend on Django's version). A machine without such a Python fails here, loudly: this leg
# is part of the suite, not an extra.
find_py312() {
  for py in python3.13 python3.12; do
    if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$py"; return 0
    fi
  done
  if command -v pyenv >/dev/null 2>&1; then
    for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[2-9]\.' | sort -V -r); do
      echo "$(pyenv prefix "$v")/bin/python3"; return 0
    done
  fi
  return 1
}
if ! PY6="$(find_py312)"; then
  echo "== FAILED: the Django 6 leg needs Python >= 3.12 (python3.12/3.13 on PATH, or pyenv); none found" >&2
  exit 1
fi
VENV6="${TEST_VENV_DJANGO6:-.venv-django6}"
[ -x "$VENV6/bin/python" ] || "$PY6" -m venv "$VENV6"
"$VENV6/bin/python" -m pip install --quiet --upgrade pip
"$VENV6/bin/python" -m pip install --quiet -e ".[dev]" "django>=6.1,<7"
echo "== pytest (Django $("$VENV6/bin/python" -c 'import django; print(django.get_version())'), PostgreSQL: unit, database and admin tiers, Django Tasks workers)"
"$VENV6/bin/python" -m pytest tests/unit tests/db tests/admin tests/concurrency/test_django_tasks_workers.py "$@"
echo "== pytest (Django 6, SQLite: unit and database tiers)"
DATABASE_URL="sqlite:///unused.sqlite3" "$VENV6/bin/python" -m pytest -m sqlite tests/unit tests/db "$@"
