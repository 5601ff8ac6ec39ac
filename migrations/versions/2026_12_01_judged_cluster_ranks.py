"""judged cluster ranks: cluster-recall at any k

Revision ID: 65d586f440e5
Revises: ded1bbf14be7
Create Date: 2026-12-01 06:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "65d586f440e5"
down_revision: str | Sequence[str] | None = "ded1bbf14be7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_judged_cluster",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("qid", sa.String(length=200), nullable=False),
        sa.Column("doc_id", sa.String(length=300), nullable=False),
        sa.Column("cluster_rank", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["run.id"],
            name=op.f("fk_run_judged_cluster_run_id_run"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "qid", "doc_id", name=op.f("pk_run_judged_cluster")),
    )
    with op.batch_alter_table("run_cluster_totals", schema=None) as batch_op:
        # Runs imported before have no cluster ranks: cluster-recall up to keep_depth only.
        batch_op.add_column(
            sa.Column("cluster_ranks", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("run_cluster_totals", schema=None) as batch_op:
        batch_op.drop_column("cluster_ranks")
    op.drop_table("run_judged_cluster")
