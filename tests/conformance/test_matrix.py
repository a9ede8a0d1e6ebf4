"""The conformance matrix: every claim rule × every way a job becomes claimable, on the
database of the leg (the suite runs it on PostgreSQL, SQLite and MariaDB), each cell a
test of its own (``test_cell[<rule>-<way>]``). It is the one place a claim rule or a
database is proved.

A cell brings a subject job (``tests.matrix.subject``) to the moment before it becomes
claimable (the way's ``prepare``), sets up what the rule bounds (the rule's
``arrange``: a job of the key claimed by another worker, a paused queue, ...), makes
the subject claimable and has the bound worker take a turn (the way's ``trigger``),
checks that the rule held (``held``: with ``max_in_flight_per_key=1`` and key a's
place taken, the subject of key a is not claimed), then frees the place and checks
that the subject is claimed now (``free``, ``freed``). The workers take their turns as
the worker loop does (``harness.MatrixWorker``: the claim built by
``worker.claiming.claim_request`` from the limits in force, sent to ``store.exchange``
with the settlements) and run jobs through the run pipeline; nothing sleeps: a cell
moves a job's time (``visible_at``) or emits its event instead of waiting.

Extending it (a change to the claim, the turn or the join release is proved here):

- **A new claim rule**: one ``Rule`` in ``rules.RULES``: the settings that set it, the
  subject's enqueue options, and its four steps. It then runs against every way on
  every database; a cell that fails is a bug, unless the rule cannot hold on that path.
- **A new way a job becomes claimable**: one ``Way`` in ``ways.WAYS``: ``prepare``
  and ``trigger``. A way a database does not have (the PostgreSQL turn) runs what that
  database does instead, and checks which path it took.
- **A new setting a claim obeys**: ``test_every_claim_setting_has_a_rule...`` fails
  until a rule sets it (it reads ``store.limits.PER_KEY``).
- **A new database**: a leg in ``scripts/test.sh`` that runs ``tests/conformance``.
- **A change to how a worker asks for a claim** (the claim request, ``store.exchange``'s
  arguments): ``harness.MatrixWorker.wanted`` and ``turn`` are the matrix's only
  callers, so the cells stay as they are.
- **Two ways a claim is sent**: in a turn, built as the turn begins (``in_a_turn``), or
  made ready by an idle worker before its wait and sent when the wait ends
  (``made_ready``: ``worker.turn.Turns._make_ready``), after the event that made the
  subject claimable. Each cell runs both, but where the worker the rule binds is not
  idle at the trigger (``NOT_IDLE``: it holds a run, so it makes no claim ready). A
  claim made ready for two slots starts at a slot where they prefer two priority
  tiers (``READY_SLOT``), so that the one scan a caught-up claim tries first is proved.
- **A cell that fails on a real bug**: keep it, add it to ``KNOWN`` below with the
  bug named (an ``xfail(strict=True)``: it fails the run once the bug is fixed, so the
  entry goes with the fix).
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from django_jobqueue.store.limits import PER_KEY
from tests.conformance.rules import RULES, Rule
from tests.conformance.ways import WAYS, Cell, Way
from tests.helpers import is_mysql, is_postgres

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def database() -> str:
    return "postgresql" if is_postgres() else "mysql" if is_mysql() else "sqlite"


# (rule, way, database) -> why the cell fails: each a bug or a limit of that path, named.
# Empty: every cell holds on every database. (The two PostgreSQL cells that were here,
# fair and the priority floor for a step released in a turn, failed because the
# one-statement turn claimed on a snapshot in which the step it released was still
# waiting; such claims now settle and release first: ``joining.orders_candidates``.)
KNOWN: dict[tuple[str, str, str], str] = {}

# The rules and ways whose bound worker holds a run at the trigger: the worker's own
# cap (it runs the job that fills it) and the release in its own turn (it ran the parent,
# and the turn settles it). A worker running something makes no claim ready.
NOT_IDLE = {"worker_cap", "released_in_a_turn"}

SENT = ["in_a_turn", "made_ready"]
# The slot a made-ready claim starts at (unless its rule sets one): with the default
# ratio of 4, slot 4 prefers NORMAL and below, so a room of two is a claim of two tiers,
# which PostgreSQL tries in one scan first when the claimer is caught up (as an idle
# worker's claim made ready is: ``ClaimingStatements._every_tier``).
READY_SLOT = 3
CELLS = [
    pytest.param(rule, way, sent, id=f"{rule.name}-{way.name}-{sent}")
    for rule in RULES
    for way in WAYS
    for sent in SENT
    if sent == "in_a_turn" or not {rule.name, way.name} & NOT_IDLE
]


@pytest.mark.parametrize(("rule", "way", "sent"), CELLS)
def test_cell(rule: Rule, way: Way, sent: str, request: pytest.FixtureRequest) -> None:
    known = KNOWN.get((rule.name, way.name, database()))
    if known is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=known))
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, **rule.settings}):
        cell = Cell(using=rule.using, room=rule.room)
        way.prepare(cell)
        rule.arrange(cell)
        if sent == "made_ready":
            if cell.me.slot == 0:  # a rule that sets no slot: one whose room spans two tiers
                cell.me.slot = READY_SLOT
            cell.me.ready_room = cell.room
            cell.me.idle()  # the claim made ready before the event the trigger brings
            assert cell.me.made is not None, "the worker made no claim ready"
        rule.held(cell, way.trigger(cell))
        assert cell.me.sent_ready == (sent == "made_ready"), "the trigger's claim was not"
        if rule.free is not None and rule.freed is not None:
            rule.freed(cell, rule.free(cell))


def test_every_claim_setting_has_a_rule_and_every_rule_a_name_of_its_own() -> None:
    """A limit the store learns to apply (``store.limits.PER_KEY`` and the kind's own
    two), the worker's caps and its priority ratio: each set by some rule of the
    matrix, so a new one cannot land unproved."""
    set_by_rules = set()
    for rule in RULES:
        set_by_rules |= set(rule.settings) - {"LIMITS"}
        for limits in rule.settings.get("LIMITS", {}).values():
            set_by_rules |= set(limits)
    wanted = {"max_in_flight", "rate_limit", *PER_KEY, "KIND_CONCURRENCY", "PRIORITY_RATIO"}
    assert wanted <= set_by_rules
    assert len({r.name for r in RULES}) == len(RULES)
    assert len({w.name for w in WAYS}) == len(WAYS)
    assert {r.name for r in RULES} | {w.name for w in WAYS} >= NOT_IDLE
