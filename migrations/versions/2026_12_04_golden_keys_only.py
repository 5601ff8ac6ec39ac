"""golden keys only: golden_query and judgment lose their index on golden_set_id alone; their
unique keys (golden_set_id, qid[, doc_id]) lead with it and find a golden set's rows (a
golden set of 500,000 queries and 530,000 judgments imports with one index less a row)

Revision ID: 7e2f9c4a1d58
Revises: 4c7d1e2b9a36
Create Date: 2026-12-04 03:15:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "7e2f9c4a1d58"
down_revision: str | Sequence[str] | None = "4c7d1e2b9a36"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_golden_query_golden_set_id", table_name="golden_query")
    op.drop_index("ix_judgment_golden_set_id", table_name="judgment")


def downgrade() -> None:
    op.create_index("ix_judgment_golden_set_id", "judgment", ["golden_set_id"])
    op.create_index("ix_golden_query_golden_set_id", "golden_query", ["golden_set_id"])
