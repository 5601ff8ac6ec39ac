"""credential generation: a user's password generation, and the one each browser session was
started with. A password change or reset moves the user's; a session of another generation is
refused on use, so a login checked against the old password that starts its session after the
change committed never logs in (the race of a login in flight with an admin's reset). An
account event counts the API tokens a reset revoked.

Added with ALTER TABLE (no batch copy), so SQLite keeps the credential triggers of
``account_life_cycle`` on ``user_account``.

Revision ID: 3f8d2a7c9b14
Revises: 7e2f9c4a1d58
Create Date: 2026-12-07 19:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3f8d2a7c9b14"
down_revision: str | Sequence[str] | None = "7e2f9c4a1d58"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "user_account",
        sa.Column("credential_generation", sa.Integer(), server_default="0", nullable=False),
    )
    op.add_column(
        "user_session",
        sa.Column("credential_generation", sa.Integer(), server_default="0", nullable=False),
    )
    op.add_column(
        "account_event",
        sa.Column("tokens_revoked", sa.Integer(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN (SQLite 3.35 and later): no batch copy, the triggers stay.
    op.drop_column("account_event", "tokens_revoked")
    op.drop_column("user_session", "credential_generation")
    op.drop_column("user_account", "credential_generation")
