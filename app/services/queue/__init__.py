"""The review work queue: the miss's life cycle and everything that moves a miss along it.

Owns the miss's stage (``lifecycle``: the stages, the steps between them, what keeps a
triage open, who may take which step), its leases (``leases``, the use cases, over
``claims``: how the next miss is found and leased on every queue), its labels (``labels``: a
reviewer's, an adjudicator's, a lead's, undo), skips (``skips``), misses covered by a
duplicate (``covered``), misses carrying an earlier triage's label (``carried``), the audit
trail (``trail``) and the counts of all of these (``tally``). ``rows`` holds the row shapes,
the reads a write makes and the locks it takes (in one order); ``store`` is every write of a
miss's label, reviews, lease on its row, skips and events. Never touches imports, exports or
pages: the triage package reads the tally, the faces call the use cases below.
"""

from app.services.queue.carried import requeue_carried
from app.services.queue.covered import include_covered
from app.services.queue.labels import LabelledAndNext, adjudicate, label, label_and_claim, undo
from app.services.queue.leases import claim, claim_adjudication, current, release, renew
from app.services.queue.skips import skip, take_back
from app.services.queue.tally import PersonTally, Reason, Tally, person_tally, triage_tally
from app.services.queue.trail import audit_page, audit_trail, who_did

__all__ = [
    "LabelledAndNext",
    "PersonTally",
    "Reason",
    "Tally",
    "adjudicate",
    "audit_page",
    "audit_trail",
    "claim",
    "claim_adjudication",
    "current",
    "include_covered",
    "label",
    "label_and_claim",
    "person_tally",
    "release",
    "renew",
    "requeue_carried",
    "skip",
    "take_back",
    "triage_tally",
    "undo",
    "who_did",
]
