"""run series: a run may belong to a series (one configuration, commit after commit) and carry
its provenance (commit, branch, time, free key-values)

Revision ID: f3c8d2a61b07
Revises: e5b7a1c9d402
Create Date: 2026-12-02 21:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f3c8d2a61b07"
down_revision: str | Sequence[str] | None = "e5b7a1c9d402"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("series", sa.String(length=200), nullable=True))
        batch_op.add_column(
            sa.Column("meta", sa.JSON(), server_default=sa.text("'{}'"), nullable=False)
        )
        # A series page reads its runs in import order.
        batch_op.create_index("ix_run_series", ["golden_set_id", "series", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_index("ix_run_series")
        batch_op.drop_column("meta")
        batch_op.drop_column("series")
