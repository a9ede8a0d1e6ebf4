#!/usr/bin/env bash
# Runs the whole test suite from scratch: its own virtualenv, install, lint, type
# check, migrations check, then pytest on PostgreSQL, the SQLite-marked tests on SQLite,
# the database tier on MariaDB/MySQL, the benchmark's short form, and the tests that
# can differ under Django 6 in a second virtualenv.
# PostgreSQL comes from DATABASE_URL (default: the local server, user postgres);
# MariaDB/MySQL from MYSQL_DATABASE_URL (default: the local server, user root).
#
# The suite is cut into units (a few minutes each, one pytest process or one check,
# every one on databases of its own), and as many run at once as the machine has cores
# (SLOTS), each slot taking the next unit from one queue: never more heavy processes
# than cores, so the timing-sensitive tests never meet an oversubscribed machine. Each
# unit writes its own log; when all are done the logs are printed in order, each whole,
# and the script fails if any unit failed, naming it. SLOTS=1 runs the units one after
# another.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${TEST_VENV:-.venv}"
VENV6="${TEST_VENV_DJANGO6:-.venv-django6}"
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/jobqueue}"
MYSQL_DATABASE_URL="${MYSQL_DATABASE_URL:-mysql://root@127.0.0.1:3306/jobqueue}"
# --- the legs ------------------------------------------------------------------------

leg_checks() {
  echo "== ruff"
  ruff check .
  ruff format --check .
  echo "== mypy"
  mypy django_jobqueue bench
  echo "== migrations up to date"
  DATABASE_URL="sqlite:///unused.sqlite3" DJANGO_SETTINGS_MODULE=tests.settings python -m django makemigrations --check --dry-run
}

# A database URL with its database's name suffixed: a part of a leg, or a leg, running
# beside another gets databases of its own (pytest-django creates "test_" + the name).
suffixed() {
  python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path=p.path + sys.argv[2])))' "$1" "$2"
}

# The PostgreSQL tiers, in five units (each one pytest process on databases of its own,
# see "the units" below), grouped so that each unit is a few minutes and the tiers that
# start processes or wait on timers stay together:
# - the database tier (tests/db, less its big cleanup);
# - the other in-process tiers;
# - the fault campaigns and the browser;
# - the real concurrency tier (runworker children and their chaos campaign's CI form),
#   PgBouncer, the durable steps, the per-key fairness and the shards (several queue
#   databases on two clusters of their own, ports 5512-5513; the chaos campaign over
#   both among its tests);
# - the admin on 500,000 jobs and the big cleanup (the two heaviest writers).
# A tier in none of the lists runs with the in-process tiers, and the log says so: a
# tier that starts processes or waits on timers belongs in one of the other units.
INPROCESS=(tests/unit tests/workflows tests/admin tests/security tests/model tests/fuzz
  tests/conformance tests/partitions testproject)
FAULTS=(tests/chaos tests/browser)
CONCURRENCY=(tests/concurrency tests/pgbouncer tests/steps tests/fairness tests/shards)
BIG_CLEANUP=tests/db/test_cleanup.py::test_a_big_cleanup_never_makes_a_busy_worker_wait_on_a_lock
HEAVY=(tests/scale "$BIG_CLEANUP")
leg_pg_db() {
  echo "== pytest (PostgreSQL: tests/db)"
  pytest tests/db --deselect "$BIG_CLEANUP" "$@"
}
leg_pg_rest() {
  local tier inprocess=("${INPROCESS[@]}")
  for tier in tests/*/; do
    tier="${tier%/}"
    compgen -G "$tier/test_*.py" >/dev/null || continue
    case " tests/db ${INPROCESS[*]} ${FAULTS[*]} ${CONCURRENCY[*]} ${HEAVY[*]} " in
      *" $tier "*) ;;
      *) echo "== $tier is in no unit's list (scripts/test.sh): run with the in-process tiers"
        inprocess+=("$tier") ;;
    esac
  done
  echo "== pytest (PostgreSQL: ${inprocess[*]})"
  pytest "${inprocess[@]}" "$@"
}
leg_pg_faults() {
  echo "== pytest (PostgreSQL: ${FAULTS[*]})"
  pytest "${FAULTS[@]}" "$@"
}
leg_pg_concurrency() {
  echo "== pytest (PostgreSQL: ${CONCURRENCY[*]})"
  pytest "${CONCURRENCY[@]}" "$@"
}
leg_pg_heavy() {
  echo "== pytest (PostgreSQL: ${HEAVY[*]})"
  pytest "${HEAVY[@]}" "$@"
}

# The security tier's role matrix, CSRF and redirect checks ask Django's permissions,
# middleware and URL checks, which no database changes: they run on PostgreSQL (in the
# whole suite) and are left out of the SQLite and MariaDB legs. So is its coverage
# test: it resolves the pages' URLs and reads the admin's declared actions (URL names
# and Python, the same on every database), and on each leg it built a hostile world of
# its own (up to 10 s on MariaDB) for those two checks alone. Its injection, XSS and
# redaction tests read stored values through each database: those run on every leg.
SECURITY_ANY_DATABASE=(tests/security/test_roles.py tests/security/test_csrf.py
  tests/security/test_redirects.py tests/security/test_coverage.py)
SECURITY_EACH_DATABASE=(tests/security/test_control_characters.py tests/security/test_injection.py tests/security/test_xss.py
  tests/security/test_redaction.py)
leg_sqlite_db() {
  echo "== pytest (SQLite: tests/db)"
  pytest -m sqlite tests/db "$@"
}
leg_sqlite_rest() {
  echo "== pytest (SQLite: the other tiers' tests marked sqlite)"
  local ignore=(--ignore tests/db) module
  for module in "${SECURITY_ANY_DATABASE[@]}"; do ignore+=(--ignore "$module"); done
  pytest -m sqlite "${ignore[@]}" "$@"
}

# The package as users get it: build the sdist and the wheel (python -m build), check
# them (twine check), install the wheel alone (not editable) into a fresh virtualenv,
# and from there, outside the checkout (so nothing imports its sources): the wheel's
# package data (templates, migrations, py.typed) present, __version__ its metadata's,
# then the demo (migrate, enqueue the example jobs, a worker until they settle) and a
# smoke test of one job of our own, on SQLite. A unit of its own.
leg_wheel() {
  echo "== wheel (python -m build, twine check, the wheel alone in a fresh virtualenv)"
  local work
  work="$(mktemp -d "${TMPDIR:-/tmp}/jobqueue-wheel.XXXXXX")"
  python -m build --sdist --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 \
    || { cat "$work/build.log"; return 1; }
  python -m twine check --strict "$work"/dist/*
  local wheel
  wheel="$(ls "$work"/dist/*.whl)"
  python - "$wheel" <<'EOF_WHEEL'
import pathlib, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
needed = ["django_jobqueue/py.typed", "django_jobqueue/migrations/0001_initial.py",
          "django_jobqueue/templates/admin/django_jobqueue/app_index.html"]
# PostgreSQL's functions' source files, which its migrations run: every one of them.
needed += [str(p) for p in pathlib.Path("django_jobqueue/store/dialects/postgresql/sql").glob("*.sql")]
missing = [n for n in needed if n not in names]
assert not missing, f"the wheel lacks {missing}"
print(f"   the wheel holds {len(names)} files, package data included")
EOF_WHEEL
  python -m venv "$work/venv"
  "$work/venv/bin/python" -m pip install --quiet "$wheel[metrics]"
  cp -r testproject "$work/testproject"
  (
    cd "$work"
    unset DATABASE_URL
    export DJANGO_SETTINGS_MODULE=testproject.settings SQLITE_PATH="$work/demo.sqlite3"
    export JOBQUEUE_LOG_LEVEL=WARNING
    venv/bin/python - <<'EOF_SMOKE'
import importlib.metadata, pathlib, django
django.setup()
import django_jobqueue
where = pathlib.Path(django_jobqueue.__file__).resolve()
assert "site-packages" in where.parts, f"imported {where}, not the installed wheel"
assert django_jobqueue.__version__ == importlib.metadata.version("django-jobqueue")
for part in ("py.typed", "migrations/0001_initial.py", "templates/admin"):
    assert (where.parent / part).exists(), f"installed package lacks {part}"
print(f"   django_jobqueue {django_jobqueue.__version__} from {where.parent}")
EOF_SMOKE
    venv/bin/python testproject/manage.py migrate --verbosity 0
    venv/bin/python testproject/manage.py demo
    venv/bin/python - <<'EOF_ONE'
import django
django.setup()
from django_jobqueue import Status
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from testproject.shop import tasks
handle = tasks.send_receipt.enqueue(order_id=1, email="smoke@example.com")
run_jobs()
assert Job.objects.get(id=handle.id).status == Status.COMPLETED, "the smoke job did not complete"
print("   smoke test: one job enqueued and run from the installed wheel: completed")
EOF_ONE
  )
  rm -rf "$work"
}

# MariaDB/MySQL: the partitioned journal's refusal (the journal stays one table there), the conformance matrix (every claim rule × every way a job becomes
# claimable, tests/conformance: it runs on every leg, the SQLite one by its marker), the
# database and admin tiers, the durable steps (tests/steps: in-process
# and runworker children; its chaos campaign is PostgreSQL's), the per-key limits and
# fairness (tests/fairness: claims, debounce, the starvation test, four runworker
# processes per key), the security tests that read through the database (their
# PostgreSQL-only tests skip), and
# four runworker processes draining 2,000 jobs, a SIGKILLed worker's job recovered, and a
# runworker's live progress read while its jobs run.
# An unreachable server fails the leg here, saying so, rather than skipping it.
mysql_reachable() {
  python -c '
import os, sys
import dj_database_url, MySQLdb
s = dj_database_url.parse(os.environ["DATABASE_URL"])
try:
    MySQLdb.connect(host=s["HOST"] or "127.0.0.1", port=int(s["PORT"] or 3306),
                    user=s["USER"] or "root", password=s["PASSWORD"] or "").close()
except Exception as exc:
    sys.exit(f"== FAILED: MariaDB/MySQL is not reachable at MYSQL_DATABASE_URL: {exc}")
'
}
MYSQL_REST=(tests/conformance tests/workflows tests/admin tests/steps "${SECURITY_EACH_DATABASE[@]}"
  tests/partitions/test_other_databases.py
  tests/concurrency/test_drain.py tests/concurrency/test_crash_recovery.py
  tests/concurrency/test_progress.py tests/fairness)
leg_mysql_db() {
  echo "== pytest (MariaDB/MySQL: tests/db)"
  mysql_reachable
  pytest tests/db "$@"
}
leg_mysql_rest() {
  echo "== pytest (MariaDB/MySQL: ${MYSQL_REST[*]})"
  mysql_reachable
  pytest "${MYSQL_REST[@]}" "$@"
}

# The benchmark's short form (about a minute), so it never rots: it fails only when a
# measure cannot run, never on speed (it shares the machine with another unit, so its
# figures are not ones to compare). BENCH=0 skips it.
leg_bench() {
  if [ "${BENCH:-1}" = "0" ]; then
    echo "== benchmark skipped (BENCH=0)"
    return 0
  fi
  echo "== benchmark (python -m bench --quick)"
  python -m bench --quick --json "${TMPDIR:-/tmp}/jobqueue-bench-quick.json"
  echo "== paired pickup, this checkout against itself (python -m bench.pickup_pair)"
  python -m bench.pickup_pair . . --jobs 20 --rounds 1
}

# Under Django 6 run the tests whose outcome can depend on Django's version, and only
# those: the Django Tasks backend (core django.tasks instead of the backport: its unit,
# database and worker tests), the admin (templates, changelists, actions and filters
# are Django's), the system checks and settings, the unit tier (it imports every
# module, and is quick), migrations (makemigrations --check under Django 6), the
# example project, and on SQLite the store's modules (DJANGO6_SQLITE below), where it
# leaves the most to the ORM (on PostgreSQL claims, settlements, turns and bulk
# inserts are the store's own SQL, sent as written under any Django). Not re-run under
# Django 6: the PostgreSQL flavour of the database tier and the security, concurrency,
# chaos, fuzz, model, browser, scale and PgBouncer tiers, which test the queue's own SQL,
# processes and faults (the legs above run them all; re-running the database tier on
# PostgreSQL here cost four to five minutes).
# The unit tier's scans of the package's source (module and function sizes, the import
# graph) read files, not Django: they run once, in the PostgreSQL leg.
DJANGO6_SOURCE_ONLY=(tests/unit/test_sizes.py tests/unit/test_layering.py)
# The Django 6 virtualenv holds the Sentry SDK's previous generation (2.x: runs are
# transactions), the main one its newest (3.x: segment spans): the Sentry tests run in
# both, so that both stay spoken.
SENTRY_PREVIOUS="sentry-sdk>=2,<3"
DJANGO6_POSTGRES=(tests/unit tests/admin tests/db/test_django_tasks_backend.py
  tests/db/test_django_tasks_retries.py tests/db/test_django_tasks_suite.py
  tests/db/test_checks_database.py tests/db/test_example_project.py testproject
  tests/concurrency/test_django_tasks_workers.py tests/db/test_sentry.py)
# On SQLite the store leaves the most to the ORM (querysets, JSON fields, bulk_create,
# transactions and savepoints, aggregates): under Django 6 its modules that go through
# each of those run, the dialect's conformance tests first, and the workflows' joins.
# The rest of the database tier's SQLite tests (commands, health, signals, metrics, logs,
# periodic schedules, progress, the testing kit: our code above the store) ran under
# Django 5.2 in the SQLite leg; here they cost three minutes of a unit, mostly in
# waits for worker threads, for no call into Django that the modules below do not make.
DJANGO6_SQLITE=(tests/db/test_dialect_storage.py tests/db/test_dialect_claiming.py
  tests/db/test_claim.py tests/db/test_lifecycle.py tests/db/test_atomic.py
  tests/db/test_bulk.py tests/db/test_stored_values.py tests/db/test_merge.py
  tests/db/test_stats.py tests/db/test_history.py tests/db/test_cancel_requeue.py
  tests/workflows/test_joins.py tests/workflows/test_chord_write.py
  tests/workflows/test_batches.py)
# The Django 6 virtualenv gets the package (its requirements were installed at the
# start); the first Django 6 unit to start does it, under a lock, the other waits.
django6_package() {
  (
    flock 9
    if [ ! -e "$LOGS/django6-package" ]; then
      # With the mysql extra: the unit tier imports MySQLdb (its driver's error classes);
      # by now the main install has seen to mysqlclient's build dependencies.
      "$VENV6/bin/python" -m pip install --quiet -e ".[dev,mysql]" "django>=6.1,<7" "$SENTRY_PREVIOUS"
      touch "$LOGS/django6-package"
    fi
  ) 9>"$LOGS/django6-package.lock"
}
leg_django6_postgres() {
  django6_package
  echo "== migrations up to date (Django $("$VENV6/bin/python" -c 'import django; print(django.get_version())'))"
  DATABASE_URL="sqlite:///unused.sqlite3" DJANGO_SETTINGS_MODULE=tests.settings "$VENV6/bin/python" -m django makemigrations --check --dry-run
  echo "== pytest (Django 6, PostgreSQL: unit tier, admin, Django Tasks backend and workers, checks, example project)"
  local ignore=() module
  for module in "${DJANGO6_SOURCE_ONLY[@]}"; do ignore+=(--ignore "$module"); done
  "$VENV6/bin/python" -m pytest "${DJANGO6_POSTGRES[@]}" "${ignore[@]}" "$@"
}
leg_django6_sqlite() {
  django6_package
  echo "== pytest (Django 6, SQLite: the store through the ORM: ${DJANGO6_SQLITE[*]})"
  "$VENV6/bin/python" -m pytest -m sqlite "${DJANGO6_SQLITE[@]}" "$@"
}


# "test.sh --leg NAME [pytest args]": one unit, in a process of its own (so that set -e
# holds in it: bash ignores it inside a function whose status is being tested), with
# the environment the full run set up and databases of its own: PostgreSQL's and
# MariaDB's names suffixed with the unit's name (pytest-django creates "test_" + the
# name), SQLite's test file in the logs' directory.
if [ "${1:-}" = "--leg" ]; then
  leg="$2"
  shift 2
  case "$leg" in
    mysql_*) DATABASE_URL="$(suffixed "$MYSQL_DATABASE_URL" "_$leg")" ;;
    sqlite_*|django6_sqlite) DATABASE_URL="sqlite:///unused.sqlite3" ;;
    *) DATABASE_URL="$(suffixed "$DATABASE_URL" "_$leg")" ;;
  esac
  export DATABASE_URL SQLITE_TEST_PATH="$LOGS/$leg.sqlite3"
  # On the way out, the CPU the unit's processes took (user, system; its children's
  # included).
  trap 'echo "== unit $leg CPU (user, system: the shell, then its children)"; times' EXIT
  "leg_$leg" "$@"
  exit
fi
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/jobqueue-test.XXXXXX")"
export LOGS VENV6 MYSQL_DATABASE_URL

STARTED=$SECONDS
SELF="$PWD/scripts/test.sh"

# Django 6.x (core django.tasks) needs Python >= 3.12. A machine without such a Python
# fails here, loudly: the Django 6 legs are part of the suite, not an extra.
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

# The package's requirements with the given extras, one a line, read from pyproject.toml.
requirements() {
  "$PY6" - "$@" <<'EOF'
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
print("\n".join([*project["dependencies"], *(r for e in sys.argv[1:] for r in extras[e])]))
EOF
}
# The Django 6 virtualenv's requirements install while the main one does (the package
# itself joins later, in the first Django 6 unit: two editable installs of one checkout
# at once would race on its egg-info). It leaves a file saying how it went.
(
  if {
    [ -x "$VENV6/bin/python" ] || "$PY6" -m venv "$VENV6"
    "$VENV6/bin/python" -m pip install --quiet --upgrade pip
    requirements dev >"$LOGS/django6-requirements.txt"
    "$VENV6/bin/python" -m pip install --quiet -r "$LOGS/django6-requirements.txt" "django>=6.1,<7" "$SENTRY_PREVIOUS"
  } >"$LOGS/django6-install.log" 2>&1; then
    touch "$LOGS/django6-installed"
  else
    touch "$LOGS/django6-install-failed"
  fi
) &

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e ".[dev,bench]"
export PATH="$PWD/$VENV/bin:$PATH"

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
echo "== installed in $((SECONDS - STARTED)) s; legs' logs in $LOGS"

# --- running them ----------------------------------------------------------------------

# --- the units, from one queue, in as many slots as cores ------------------------------
# Every unit is one pytest process (or one check), and SLOTS of them (default: the
# machine's cores) run at once, each taking the next unit from one queue, longest first,
# until none is left: never more heavy processes at once than cores, so no test meets an
# oversubscribed machine (its children, runworker processes and the database server
# share the cores with it, as they would on a developer's machine). SLOTS=1 runs the
# units one after another. Each unit writes its own log; when all are done the logs are
# printed in the order below, each whole, and the script fails if any unit failed,
# naming it.
UNITS=(pg_concurrency pg_faults mysql_rest pg_db mysql_db pg_rest sqlite_db pg_heavy
  django6_postgres sqlite_rest django6_sqlite wheel bench checks)
SLOTS="${SLOTS:-$(nproc)}"
ARGS=("$@")

# Runs one unit into its log; says how it went and how long it took.
run_unit() {
  local name="$1" started=$SECONDS
  if bash "$SELF" --leg "$name" "${ARGS[@]}" >"$LOGS/$name.log" 2>&1; then
    echo "== unit $name: ok in $((SECONDS - started)) s"
  else
    echo "== unit $name: FAILED in $((SECONDS - started)) s" | tee -a "$LOGS/$name.log"
    touch "$LOGS/$name.failed"
  fi
}
# The Django 6 units wait for their virtualenv's requirements, installing since the start.
django6_ready() {
  while [ ! -e "$LOGS/django6-installed" ] && [ ! -e "$LOGS/django6-install-failed" ]; do sleep 1; done
  [ -e "$LOGS/django6-installed" ] && return 0
  { echo "== installing the Django 6 virtualenv failed"; cat "$LOGS/django6-install.log"; } >"$LOGS/$1.log"
  echo "== unit $1: FAILED" | tee -a "$LOGS/$1.log"
  touch "$LOGS/$1.failed"
  return 1
}
printf '%s\n' "${UNITS[@]}" >"$LOGS/queue"
# The next unit off the queue (nothing when it is empty), one slot at a time.
next_unit() {
  (
    flock 9
    head -n 1 "$LOGS/queue"
    sed -i 1d "$LOGS/queue"
  ) 9>"$LOGS/queue.lock"
}
slot() {
  local unit
  while unit="$(next_unit)" && [ -n "$unit" ]; do
    case "$unit" in django6_*) django6_ready "$unit" || continue ;; esac
    run_unit "$unit"
  done
}
echo "== $((${#UNITS[@]})) units in $SLOTS slots"
pids=()
for _ in $(seq 1 "$SLOTS"); do
  slot &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
FAILED=()
for unit in "${UNITS[@]}"; do
  cat "$LOGS/$unit.log"
  if [ -e "$LOGS/$unit.failed" ]; then FAILED+=("$unit"); fi
done
echo "== browser screenshots: $SCREENSHOTS_DIR"
echo "== all units done in $((SECONDS - STARTED)) s"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "== FAILED: ${FAILED[*]} (logs in $LOGS)" >&2
  exit 1
fi
