"""one life cycle: labels in per miss, the causes frozen by the first label, one lease each

Revision ID: c4a9e2f17b30
Revises: b7f2c4e81d09
Create Date: 2026-12-02 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c4a9e2f17b30"
down_revision: str | Sequence[str] | None = "b7f2c4e81d09"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # How many reviewers' blind labels each miss has: an open miss with some waits for
    # another reviewer, a stage the tally reads from its index.
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("reviewed", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
    op.execute(
        """
        UPDATE miss SET reviewed = (
            SELECT count(*) FROM review
            WHERE review.miss_id = miss.id AND review.category IS NOT NULL
        )
        WHERE reviewers > 1
        """
    )
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_index("ix_miss_summary")
        batch_op.create_index(
            "ix_miss_summary",
            ["triage_id", "state", "category", "resolution", "reviewed"],
            unique=False,
        )
    # The causes are frozen by the first label of any kind (a blind review label included).
    with op.batch_alter_table("golden_set", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("causes_frozen", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    op.execute(
        """
        UPDATE golden_set SET causes_frozen = true
        WHERE EXISTS (
            SELECT 1 FROM miss
            JOIN triage ON triage.id = miss.triage_id
            JOIN run ON run.id = triage.run_id
            WHERE run.golden_set_id = golden_set.id
              AND (miss.category IS NOT NULL OR miss.reviewed > 0)
        )
        """
    )
    # The kept answers' key reads the newest event and those just below it, by id.
    with op.batch_alter_table("label_event", schema=None) as batch_op:
        batch_op.drop_index("ix_label_event_triage")
        batch_op.create_index("ix_label_event_triage", ["triage_id", "id"], unique=False)
    # One lease per person and triage: where older code left a reviewer holding several
    # (two tabs claiming at once), the one that runs longest stays.
    op.execute(
        """
        UPDATE miss SET lease_holder_id = NULL, lease_expires_at = NULL
        WHERE lease_holder_id IS NOT NULL
          AND EXISTS (
            SELECT 1 FROM miss other
            WHERE other.triage_id = miss.triage_id
              AND other.lease_holder_id = miss.lease_holder_id
              AND other.id <> miss.id
              AND (other.lease_expires_at > miss.lease_expires_at
                   OR (other.lease_expires_at = miss.lease_expires_at AND other.id < miss.id))
          )
        """
    )


def downgrade() -> None:
    with op.batch_alter_table("label_event", schema=None) as batch_op:
        batch_op.drop_index("ix_label_event_triage")
        batch_op.create_index("ix_label_event_triage", ["triage_id", "at"], unique=False)
    with op.batch_alter_table("golden_set", schema=None) as batch_op:
        batch_op.drop_column("causes_frozen")
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_index("ix_miss_summary")
        batch_op.create_index(
            "ix_miss_summary", ["triage_id", "state", "category", "resolution"], unique=False
        )
        batch_op.drop_column("reviewed")
