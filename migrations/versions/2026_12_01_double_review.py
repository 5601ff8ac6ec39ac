"""double review: overlap per triage, reviews per reviewer, resolution, adjudicators

Revision ID: 5c0e7a9d2f16
Revises: 3b4109e9f450
Create Date: 2026-12-01 05:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = "5c0e7a9d2f16"
down_revision: str | Sequence[str] | None = "3b4109e9f450"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing triages and misses had one reviewer each: the defaults say so.
    with op.batch_alter_table("triage", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("reviewers", sa.Integer(), nullable=False, server_default=sa.text("1"))
        )
        batch_op.add_column(
            sa.Column("overlap_fraction", sa.Float(), nullable=False, server_default=sa.text("1.0"))
        )
        batch_op.add_column(
            sa.Column("overlap_seed", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("reviewers", sa.Integer(), nullable=False, server_default=sa.text("1"))
        )
        batch_op.add_column(sa.Column("resolution", sa.String(length=16), nullable=True))
    with op.batch_alter_table("user_account", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("adjudicator", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "review",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("miss_id", sa.Integer(), nullable=False),
        sa.Column("triage_id", sa.Integer(), nullable=False),
        sa.Column("reviewer_id", sa.Integer(), nullable=True),
        sa.Column("category", sa.String(length=100), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("lease_expires_at", app.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", app.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("labelled_at", app.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["miss_id"], ["miss.id"], name=op.f("fk_review_miss_id_miss"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["reviewer_id"],
            ["user_account.id"],
            name=op.f("fk_review_reviewer_id_user_account"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["triage_id"],
            ["triage.id"],
            name=op.f("fk_review_triage_id_triage"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review")),
        sa.UniqueConstraint("miss_id", "reviewer_id", name=op.f("uq_review_miss_id_reviewer_id")),
    )
    with op.batch_alter_table("review", schema=None) as batch_op:
        batch_op.create_index("ix_review_triage", ["triage_id", "reviewer_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("review", schema=None) as batch_op:
        batch_op.drop_index("ix_review_triage")
    op.drop_table("review")
    with op.batch_alter_table("user_account", schema=None) as batch_op:
        batch_op.drop_column("adjudicator")
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_column("resolution")
        batch_op.drop_column("reviewers")
    with op.batch_alter_table("triage", schema=None) as batch_op:
        batch_op.drop_column("overlap_seed")
        batch_op.drop_column("overlap_fraction")
        batch_op.drop_column("reviewers")
