"""carried labels: a triage of a run in a series carries the final labels of its series'
latest earlier triage (``miss.carried_from``, ``triage.carried_from_id``)

Revision ID: 9a4e6c2d7b15
Revises: f3c8d2a61b07
Create Date: 2026-12-03 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "9a4e6c2d7b15"
down_revision: str | Sequence[str] | None = "f3c8d2a61b07"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("triage", schema=None) as batch_op:
        batch_op.add_column(sa.Column("carried_from_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            "fk_triage_carried_from_id_triage",
            "triage",
            ["carried_from_id"],
            ["id"],
            ondelete="SET NULL",
        )
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.add_column(sa.Column("carried_from", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            "fk_miss_carried_from_triage", "triage", ["carried_from"], ["id"], ondelete="SET NULL"
        )


def downgrade() -> None:
    with op.batch_alter_table("miss", schema=None) as batch_op:
        batch_op.drop_constraint("fk_miss_carried_from_triage", type_="foreignkey")
        batch_op.drop_column("carried_from")
    with op.batch_alter_table("triage", schema=None) as batch_op:
        batch_op.drop_constraint("fk_triage_carried_from_id_triage", type_="foreignkey")
        batch_op.drop_column("carried_from_id")
