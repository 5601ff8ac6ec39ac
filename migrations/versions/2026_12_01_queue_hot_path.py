"""the queue's hot path: "my current miss" by a partial index; the auth generation row

Revision ID: b7f2c4e81d09
Revises: 9e3c51d7a0b4
Create Date: 2026-12-01 09:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b7f2c4e81d09"
down_revision: str | Sequence[str] | None = "9e3c51d7a0b4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # claim and the review page look up the caller's open lease first: the queue index
    # scanned every open miss of the triage (0.76 ms at 5,000 open; 0.067 ms with this one)
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.create_index(
            "ix_miss_holder",
            ["triage_id", "lease_holder_id", "position"],
            unique=False,
            postgresql_where=sa.text("state = 'open'"),
            sqlite_where=sa.text("state = 'open'"),
        )
    # app processes cache token look-ups and drop the cache when this row's generation moves
    op.create_table(
        "auth_generation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute("INSERT INTO auth_generation (id, generation) VALUES (1, 0)")


def downgrade() -> None:
    op.drop_table("auth_generation")
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_miss_holder",
            postgresql_where=sa.text("state = 'open'"),
            sqlite_where=sa.text("state = 'open'"),
        )
