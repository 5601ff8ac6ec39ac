"""miss summary index with resolution: closure counts from the index alone with double review

Revision ID: 7a41c2e9b8d3
Revises: 65d586f440e5
Create Date: 2026-12-01 07:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "7a41c2e9b8d3"
down_revision: str | Sequence[str] | None = "65d586f440e5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # closure_report groups by state, category and resolution: with resolution outside the
    # index, every page scanned the triage's misses (31 ms on PostgreSQL, 90 ms on SQLite at
    # 100,000 misses; 11 and 13 ms from the index).
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_index("ix_miss_summary")
        batch_op.create_index(
            "ix_miss_summary", ["triage_id", "state", "category", "resolution"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_index("ix_miss_summary")
        batch_op.create_index("ix_miss_summary", ["triage_id", "state", "category"], unique=False)
