"""The locks of the review queues (a triage's misses: app/services/queue; a detector run's
pairs: app/services/dedup/pairs.py) and of the writes to a golden set's clusters, and the one
order every transaction takes them in, so that no two transactions wait on each other in a
circle (PostgreSQL ends one of them with "deadlock detected" after a second):

1. **The person's lock on their queue**: a transaction advisory lock, keyed (triage id,
   person id) on a triage's misses and (-detector run id, person id) on a detector run's
   pairs (ids are positive: the two never share a key). A step that starts from a miss or a
   pair takes it in the statement that finds the queue (``person_on_miss``,
   ``person_on_pair``), before any row's lock. A person's steps in one queue (claims,
   renewals, labels, skips, releases, undos) therefore run one after the other whatever
   arrives at once (two tabs, a retried request).
2. **The queue's rows**: a miss or a pair ``FOR UPDATE`` (``SKIP LOCKED`` when picking the
   next one), one at a time, then what the step writes beside it (its event, a skip, a
   review).
3. **The golden set's row**, last: the miss queue's first labels freeze its causes.

A write to a golden set's clusters (a detector run's apply, an import of cluster ids) takes
no person's lock and no queue row: it takes the golden set's row first
(``golden_set_for_clusters``: ``FOR NO KEY UPDATE``, which rows inserted beside it do not
wait for), then writes the detector run and switches the golden set's clustering (its rows
written before, in transactions of their own), having read the detector run again under
that lock; the runs' cluster figures are measured again after, one transaction a run, each
taking the golden set's row the same way. Two of them on one golden set run one after
the other, each on what the other left, and nothing they wait for is held by a transaction
that waits for them.

A write of figures computed from a golden set's clusters (a run's import: its cluster traces
and ranks) takes the golden set's row ``FOR SHARE`` (``golden_set_for_cluster_figures``),
last: after the rows of its own new run, which no other transaction sees or waits for, and
before nothing but reading the golden set's clustering again and committing. A write to the
clusters in flight holds the row, so the import waits for it and then finds the clustering it
computed with gone; one that comes after waits for the import to commit, then measures the
new run with the rest.

SQLite: ``BEGIN IMMEDIATE`` (``app.db.writing``) holds the whole database for each writer;
the functions here then only find what they would lock.
"""

from __future__ import annotations

from sqlalchemy import Connection, Table, bindparam, func, select

from app.models import DocPair, GoldenSet, Miss, Triage

_MISS: Table = Miss.__table__  # type: ignore[attr-defined]
_TRIAGE: Table = Triage.__table__  # type: ignore[attr-defined]
_PAIR: Table = DocPair.__table__  # type: ignore[attr-defined]
_GOLDEN: Table = GoldenSet.__table__  # type: ignore[attr-defined]

_P_TRIAGE = bindparam("p_triage", type_=_MISS.c.triage_id.type)
_P_USER = bindparam("p_user", type_=_MISS.c.lease_holder_id.type)
_P_MISS = bindparam("p_miss", type_=_MISS.c.id.type)
_P_RUN = bindparam("p_run", type_=_PAIR.c.detector_run_id.type)
_P_PAIR = bindparam("p_pair", type_=_PAIR.c.id.type)
_P_GOLDEN = bindparam("p_golden", type_=_GOLDEN.c.id.type)


def _postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


# --- 1. the person's lock: a triage's misses ----------------------------------------------

_REVIEWERS = select(_TRIAGE.c.reviewers).where(_TRIAGE.c.id == _P_TRIAGE).scalar_subquery()
_LOCK_TRIAGE = select(func.pg_advisory_xact_lock(_P_TRIAGE, _P_USER), _REVIEWERS.label("reviewers"))
_TRIAGE_REVIEWERS = select(_REVIEWERS.label("reviewers"))
_MISS_TRIAGE = select(_MISS.c.triage_id).where(_MISS.c.id == _P_MISS)
_LOCK_FOR_MISS = select(
    _MISS.c.triage_id, func.pg_advisory_xact_lock(_MISS.c.triage_id, _P_USER)
).where(_MISS.c.id == _P_MISS)


def person_on_triage(conn: Connection, *, triage_id: int, user_id: int) -> int | None:
    """Take the person's lock on the triage's misses for the transaction and answer how many
    reviewers the triage asks for per sampled miss (None: no such triage)."""
    params = {"p_triage": triage_id, "p_user": user_id}
    if _postgres(conn):
        found = conn.execute(_LOCK_TRIAGE, params).first()
        value = None if found is None else found[1]
    else:
        value = conn.execute(_TRIAGE_REVIEWERS, params).scalar()
    return None if value is None else int(value)


def person_on_miss(conn: Connection, *, miss_id: int, user_id: int) -> int | None:
    """``person_on_triage`` on the triage of ``miss_id``, found and locked in one statement;
    answers that triage's id (None: no such miss)."""
    params = {"p_miss": miss_id, "p_user": user_id}
    triage_id = conn.execute(_LOCK_FOR_MISS if _postgres(conn) else _MISS_TRIAGE, params).scalar()
    return None if triage_id is None else int(triage_id)


# --- 1. the person's lock: a detector run's pairs -----------------------------------------

_LOCK_RUN = select(func.pg_advisory_xact_lock(-_P_RUN, _P_USER))
_PAIR_RUN = select(_PAIR.c.detector_run_id).where(_PAIR.c.id == _P_PAIR)
_LOCK_FOR_PAIR = select(
    _PAIR.c.detector_run_id, func.pg_advisory_xact_lock(-_PAIR.c.detector_run_id, _P_USER)
).where(_PAIR.c.id == _P_PAIR)


def person_on_detector_run(conn: Connection, *, detector_run_id: int, user_id: int) -> None:
    """Take the person's lock on the detector run's pairs for the transaction."""
    if _postgres(conn):
        conn.execute(_LOCK_RUN, {"p_run": detector_run_id, "p_user": user_id})


def person_on_pair(conn: Connection, *, pair_id: int, user_id: int) -> int | None:
    """``person_on_detector_run`` on the detector run of ``pair_id``, found and locked in one
    statement; answers that run's id (None: no such pair)."""
    params = {"p_pair": pair_id, "p_user": user_id}
    run_id = conn.execute(_LOCK_FOR_PAIR if _postgres(conn) else _PAIR_RUN, params).scalar()
    return None if run_id is None else int(run_id)


# --- a write to a golden set's clusters ----------------------------------------------------

_LOCK_GOLDEN = select(_GOLDEN.c.id).where(_GOLDEN.c.id == _P_GOLDEN).with_for_update(key_share=True)
_SHARE_GOLDEN = select(_GOLDEN.c.id).where(_GOLDEN.c.id == _P_GOLDEN).with_for_update(read=True)


def golden_set_for_clusters(conn: Connection, *, golden_set_id: int) -> bool:
    """Take the golden set's row for a write to its clusters (before anything else the
    transaction locks or writes); False when there is no such golden set."""
    return conn.execute(_LOCK_GOLDEN, {"p_golden": golden_set_id}).first() is not None


def golden_set_for_cluster_figures(conn: Connection, *, golden_set_id: int) -> bool:
    """Take the golden set's row ``FOR SHARE`` for a write of figures computed from its
    clusters (last, before reading its clustering again and committing): no write to its
    clusters commits until this transaction ends. False when there is no such golden set."""
    return conn.execute(_SHARE_GOLDEN, {"p_golden": golden_set_id}).first() is not None
