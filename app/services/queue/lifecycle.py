"""The miss's life cycle, written once: the stages a miss can be in, the steps that move it
and which stages keep its triage open. Every writer checks its step here, every reader counts
and filters by these stages (``tally``), and the SQL forms below are derived from the same
tables, so a page, an answer and a download can never count one thing two ways.

A miss is stored as ``Miss.state`` (open, disputed, labelled, carried, covered), its
``category`` and, with double review, how many blind labels are in (``Miss.reviewed``); its
stage follows from those alone (``stage_of``). Two things cross the stages without being
one: a **lease** (a person has the miss in front of them: open, reviewing or disputed) and a
**skip** (a reviewer passed it on: it goes to the others).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, and_, case, literal, or_

from app.models import OTHER, LabelAction, MissState, Role, User
from app.services.errors import Forbidden


class Stage(StrEnum):
    """Where a miss stands. Every miss of a triage is in exactly one."""

    #: On the review queue, no label in yet.
    OPEN = "open"
    #: Double review: some reviewers' blind labels are in, another reviewer's is wanted.
    REVIEWING = "reviewing"
    #: Every reviewer's label is in and they disagree (or one could not tell): it waits for
    #: an adjudicator.
    DISPUTED = "disputed"
    #: A final label in a named cause.
    FINAL = "final"
    #: A final label "other" (its note says what): it keeps the categories open.
    OTHER = "other"
    #: A named cause carried from the series' latest earlier triage (``Miss.carried_from``):
    #: the same (query, document) pair's final label there. In its cause, off the queue,
    #: counted apart from the labels given here; a lead sends it back to the queue.
    CARRIED = "carried"
    #: A copy of the document (same cluster) is in the candidates: the run delivered its
    #: evidence. Off the queue until a lead includes it.
    COVERED = "covered"


#: The stages in the order pages list them.
STAGES: tuple[Stage, ...] = tuple(Stage)
#: No final label yet: what the pages call "unlabelled".
UNLABELLED: frozenset[Stage] = frozenset({Stage.OPEN, Stage.REVIEWING, Stage.DISPUTED})
#: What keeps the triage's categories open: the residue, exactly.
KEEPS_OPEN: frozenset[Stage] = UNLABELLED | {Stage.OTHER}
#: A final label is in force.
LABELLED: frozenset[Stage] = frozenset({Stage.FINAL, Stage.OTHER})
#: In a named cause: a final label given here, or one carried from an earlier triage.
IN_NAMED_CAUSE: frozenset[Stage] = frozenset({Stage.FINAL, Stage.CARRIED})
#: Where each queue takes its misses from.
REVIEW_QUEUE: frozenset[Stage] = frozenset({Stage.OPEN, Stage.REVIEWING})
ADJUDICATION_QUEUE: frozenset[Stage] = frozenset({Stage.DISPUTED})
#: Misses someone can hold a lease on.
LEASABLE: frozenset[Stage] = REVIEW_QUEUE | ADJUDICATION_QUEUE


#: The steps that move a miss from one stage to another (its audit event's action), with the
#: stages each may start from and the stages it may end in. The other events (release,
#: skip, take back, a refused attempt) move no miss between stages.
TRANSITIONS: dict[LabelAction, tuple[frozenset[Stage], frozenset[Stage]]] = {
    LabelAction.LABEL: (frozenset({Stage.OPEN}), LABELLED),
    LabelAction.RELABEL: (LABELLED, LABELLED),
    LabelAction.REVIEW: (REVIEW_QUEUE, frozenset({Stage.REVIEWING})),
    LabelAction.AGREE: (REVIEW_QUEUE, LABELLED),
    LabelAction.DISPUTE: (REVIEW_QUEUE, frozenset({Stage.DISPUTED})),
    LabelAction.ADJUDICATE: (ADJUDICATION_QUEUE | LABELLED, LABELLED),
    LabelAction.UNDO: (LABELLED | frozenset({Stage.REVIEWING}), LABELLED | REVIEW_QUEUE),
    LabelAction.INCLUDE: (frozenset({Stage.COVERED}), frozenset({Stage.OPEN})),
    LabelAction.EXCLUDE: (frozenset({Stage.OPEN}), frozenset({Stage.COVERED})),
    LabelAction.REQUEUE: (frozenset({Stage.CARRIED}), frozenset({Stage.OPEN})),
}


def allowed(step: LabelAction, before: Stage, after: Stage) -> bool:
    """Whether ``step`` may move a miss from ``before`` to ``after``."""
    starts, ends = TRANSITIONS[step]
    return before in starts and after in ends


class IllegalStep(Exception):
    """A writer was about to make a move the life cycle does not have (a defect: the use
    cases check the stage before they write)."""


def check(step: LabelAction, before: Stage, after: Stage) -> None:
    if not allowed(step, before, after):
        raise IllegalStep(f"{step} does not move a miss from {before} to {after}")


def stage_of(state: str, category: str | None, reviewed: int) -> Stage:
    """The stage of a miss from its stored columns."""
    if state == MissState.COVERED.value:
        return Stage.COVERED
    if state == MissState.DISPUTED.value:
        return Stage.DISPUTED
    if state == MissState.CARRIED.value:
        return Stage.CARRIED
    if state == MissState.LABELLED.value:
        return Stage.OTHER if category == OTHER else Stage.FINAL
    return Stage.REVIEWING if reviewed > 0 else Stage.OPEN


def stored_state(stage: Stage) -> MissState:
    """The ``Miss.state`` a stage is stored as."""
    return _STORED[stage]


_STORED = {
    Stage.OPEN: MissState.OPEN,
    Stage.REVIEWING: MissState.OPEN,
    Stage.DISPUTED: MissState.DISPUTED,
    Stage.FINAL: MissState.LABELLED,
    Stage.OTHER: MissState.LABELLED,
    Stage.CARRIED: MissState.CARRIED,
    Stage.COVERED: MissState.COVERED,
}


# --- the same rules in SQL, for a table ``miss`` or an alias of it -----------------------


def stage_sql(miss: Any) -> ColumnElement[str]:
    """``stage_of`` as a SQL expression over a miss table (or alias)."""
    c = miss.c
    return case(
        (c.state == MissState.COVERED.value, literal(Stage.COVERED.value)),
        (c.state == MissState.DISPUTED.value, literal(Stage.DISPUTED.value)),
        (c.state == MissState.CARRIED.value, literal(Stage.CARRIED.value)),
        (
            and_(c.state == MissState.LABELLED.value, c.category == OTHER),
            literal(Stage.OTHER.value),
        ),
        (c.state == MissState.LABELLED.value, literal(Stage.FINAL.value)),
        (c.reviewed > 0, literal(Stage.REVIEWING.value)),
        else_=literal(Stage.OPEN.value),
    )


def in_stages(miss: Any, stages: frozenset[Stage]) -> ColumnElement[bool]:
    """A predicate: the miss is in one of ``stages``. Written over the stored columns (not
    the CASE), so the indexes on ``state`` and ``category`` serve it."""
    c = miss.c
    terms: list[ColumnElement[bool]] = []
    if Stage.COVERED in stages:
        terms.append(c.state == MissState.COVERED.value)
    if Stage.DISPUTED in stages:
        terms.append(c.state == MissState.DISPUTED.value)
    if Stage.CARRIED in stages:
        terms.append(c.state == MissState.CARRIED.value)
    if LABELLED.issubset(stages):
        terms.append(c.state == MissState.LABELLED.value)
    elif Stage.OTHER in stages:
        terms.append(and_(c.state == MissState.LABELLED.value, c.category == OTHER))
    elif Stage.FINAL in stages:
        named = or_(c.category.is_(None), c.category != OTHER)
        terms.append(and_(c.state == MissState.LABELLED.value, named))
    if REVIEW_QUEUE.issubset(stages):
        terms.append(c.state == MissState.OPEN.value)
    elif Stage.OPEN in stages:
        terms.append(and_(c.state == MissState.OPEN.value, c.reviewed == 0))
    elif Stage.REVIEWING in stages:
        terms.append(and_(c.state == MissState.OPEN.value, c.reviewed > 0))
    return or_(*terms) if terms else literal(False)


def keeps_open(miss: Any) -> ColumnElement[bool]:
    """The closure rule for one miss: it is in a stage of ``KEEPS_OPEN``."""
    return in_stages(miss, KEEPS_OPEN)


# --- who may take a step -------------------------------------------------------------------

NOT_HELD = "this miss is not leased to you"


def is_lead(user: User) -> bool:
    return Role(user.role).allows(Role.LEAD)


def check_adjudicator(user: User) -> None:
    if not user.adjudicates:
        raise Forbidden(
            "adjudication needs the lead role or the adjudicator flag",
            code="adjudicator_required",
        )
