"""cluster application: which application of its detector run a run's cluster figures were
measured with (a detector run applied again, at another threshold, keeps its id: a run that
keeps no rankings to be measured again with stays on the clusters it was measured with, and
names their threshold, not the one applied since). NULL: measured before this was recorded
(the detector run's applied clusters then).

Revision ID: 5b1e7d3a2c90
Revises: 3f8d2a7c9b14
Create Date: 2026-12-07 23:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5b1e7d3a2c90"
down_revision: str | Sequence[str] | None = "3f8d2a7c9b14"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "run_cluster_totals", sa.Column("detector_application", sa.Integer(), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("run_cluster_totals", "detector_application")
