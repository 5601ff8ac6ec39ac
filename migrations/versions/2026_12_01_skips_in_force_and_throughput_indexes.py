"""skips in force as rows; reviewer throughput from covering indexes; live leases by index

Revision ID: 9e3c51d7a0b4
Revises: 7a41c2e9b8d3
Create Date: 2026-12-01 08:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = "9e3c51d7a0b4"
down_revision: str | Sequence[str] | None = "7a41c2e9b8d3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The dashboard folded every skip event of a triage to find the skips in force (56,000
    # events at 100,000 misses: 94 ms on PostgreSQL, 187 ms on SQLite); the rows are kept by
    # skip and take-back from now on.
    op.create_table(
        "miss_skip",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("miss_id", sa.Integer(), nullable=False),
        sa.Column("triage_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", app.models.base.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["miss_id"], ["miss.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["triage_id"], ["triage.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["user_account.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("miss_id", "user_id"),
    )
    with op.batch_alter_table("miss_skip", schema=None) as batch_op:
        batch_op.create_index(
            "ix_miss_skip_triage", ["triage_id", "user_id", "miss_id"], unique=False
        )
    # A skip is in force when it is the last skip or take-back of its (miss, reviewer), in
    # the order the events were written.
    op.execute(
        """
        INSERT INTO miss_skip (miss_id, triage_id, user_id, reason, at)
        SELECT e.miss_id, e.triage_id, e.user_id, e.note, e.at
        FROM label_event e
        WHERE e.action = 'skip'
          AND NOT EXISTS (
            SELECT 1 FROM label_event later
            WHERE later.miss_id = e.miss_id
              AND later.action IN ('skip', 'take_back')
              AND later.id > e.id
              AND (later.user_id = e.user_id
                   OR (later.user_id IS NULL AND e.user_id IS NULL))
          )
        ORDER BY e.id
        """
    )
    # Throughput per reviewer from the indexes alone (index-only scans), not the tables.
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_index("ix_miss_labelled_by")
        batch_op.create_index(
            "ix_miss_labelled_by",
            ["triage_id", "labelled_by_id", "state", "reviewers", "resolution", "labelled_at"],
            unique=False,
        )
    with op.batch_alter_table("review", schema=None) as batch_op:
        batch_op.drop_index("ix_review_triage")
        batch_op.create_index(
            "ix_review_triage",
            ["triage_id", "reviewer_id", "labelled_at", "category"],
            unique=False,
        )
        batch_op.create_index("ix_review_lease", ["triage_id", "lease_expires_at"], unique=False)
    # The live leases (a lease running past now) from a range of an index, not a filter over
    # every open miss.
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.create_index("ix_miss_lease", ["triage_id", "lease_expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_index("ix_miss_lease")
    with op.batch_alter_table("review", schema=None) as batch_op:
        batch_op.drop_index("ix_review_lease")
        batch_op.drop_index("ix_review_triage")
        batch_op.create_index("ix_review_triage", ["triage_id", "reviewer_id"], unique=False)
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_index("ix_miss_labelled_by")
        batch_op.create_index("ix_miss_labelled_by", ["triage_id", "labelled_by_id"], unique=False)
    with op.batch_alter_table("miss_skip", schema=None) as batch_op:
        batch_op.drop_index("ix_miss_skip_triage")
    op.drop_table("miss_skip")
