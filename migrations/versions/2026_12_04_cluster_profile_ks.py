"""cluster profile ks: a log run imported as its per-query cluster profile (the output of
docs/sql/unique_clusters.sql) is exact at its imported ks only
(``run_cluster_totals.exact_ks``; null: any k)

Revision ID: 4c7d1e2b9a36
Revises: 9a4e6c2d7b15
Create Date: 2026-12-04 02:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "4c7d1e2b9a36"
down_revision: str | Sequence[str] | None = "9a4e6c2d7b15"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run_cluster_totals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("exact_ks", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run_cluster_totals", schema=None) as batch_op:
        batch_op.drop_column("exact_ks")
