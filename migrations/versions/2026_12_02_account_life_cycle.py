"""account life cycle: forced password change, the account audit trail, credential triggers

Revision ID: d81f3a6c5e92
Revises: c4a9e2f17b30
Create Date: 2026-12-02 12:00:00

The triggers move ``auth_generation`` (the row every app process reads at most once a second
to drop its cached token look-ups, app/services/accounts/auth_cache.py) when a credential
changes in SQL, by hand or by the app: a user's role, activity, password, forced change or
adjudicator flag, a user deleted, a token revoked, re-pointed or deleted. Never on a token's
``last_used_at`` (written once a minute per token in use). SQLite drops a table's triggers
when a batch migration copies the table: a later migration that rebuilds ``user_account`` or
``api_token`` on SQLite must create them again (``create_triggers``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = "d81f3a6c5e92"
down_revision: str | Sequence[str] | None = "c4a9e2f17b30"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Columns of user_account whose change withdraws or changes what a credential allows.
USER_COLUMNS = ("role", "is_active", "password_hash", "must_change_password", "adjudicator")
#: Columns of api_token whose change withdraws or moves a token (never last_used_at).
TOKEN_COLUMNS = ("revoked_at", "token_hash", "user_id")
FUNCTION = "misstriage_bump_auth_generation"
#: (trigger, table, event, columns compared): every trigger this migration makes.
TRIGGERS = (
    ("trg_user_account_credentials", "user_account", "UPDATE", USER_COLUMNS),
    ("trg_user_account_deleted", "user_account", "DELETE", ()),
    ("trg_api_token_credentials", "api_token", "UPDATE", TOKEN_COLUMNS),
    ("trg_api_token_deleted", "api_token", "DELETE", ()),
)


def _sqlite_trigger(name: str, table: str, event: str, columns: tuple[str, ...]) -> str:
    if columns:
        when = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in columns)
        head = f"AFTER UPDATE OF {', '.join(columns)} ON {table} FOR EACH ROW WHEN {when}"
    else:
        head = f"AFTER {event} ON {table} FOR EACH ROW"
    return (
        f"CREATE TRIGGER {name} {head} BEGIN "
        "INSERT OR IGNORE INTO auth_generation (id, generation) VALUES (1, 0); "
        "UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; "
        "END"
    )


def _postgres_trigger(name: str, table: str, event: str, columns: tuple[str, ...]) -> str:
    if columns:
        when = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in columns)
        head = f"AFTER UPDATE OF {', '.join(columns)} ON {table} FOR EACH ROW WHEN ({when})"
    else:
        # one move per statement, however many rows it deletes
        head = f"AFTER {event} ON {table} FOR EACH STATEMENT"
    return f"CREATE TRIGGER {name} {head} EXECUTE FUNCTION {FUNCTION}()"


def create_triggers() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in TRIGGERS:
            op.execute(_sqlite_trigger(*trigger))
        return
    op.execute(
        f"""
        CREATE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO auth_generation (id, generation) VALUES (1, 1)
            ON CONFLICT (id) DO UPDATE SET generation = auth_generation.generation + 1;
            RETURN NULL;
        END
        $$
        """
    )
    for trigger in TRIGGERS:
        op.execute(_postgres_trigger(*trigger))


def drop_triggers() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for name, table, _event, _columns in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + ("" if sqlite else f" ON {table}"))
    if not sqlite:
        op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")


def upgrade() -> None:
    with op.batch_alter_table("user_account", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "must_change_password", sa.Boolean(), server_default=sa.false(), nullable=False
            )
        )
    op.create_table(
        "account_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", app.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("email", sa.String(length=320), server_default="", nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("via", sa.String(length=8), nullable=False),
        sa.Column("before", sa.String(length=32), nullable=True),
        sa.Column("after", sa.String(length=32), nullable=True),
        sa.Column("sessions_ended", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["actor_id"],
            ["user_account.id"],
            name=op.f("fk_account_event_actor_id_user_account"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user_account.id"],
            name=op.f("fk_account_event_user_id_user_account"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_account_event")),
    )
    with op.batch_alter_table("account_event", schema=None) as batch_op:
        batch_op.create_index("ix_account_event_user", ["user_id", "id"], unique=False)
    create_triggers()


def downgrade() -> None:
    drop_triggers()
    with op.batch_alter_table("account_event", schema=None) as batch_op:
        batch_op.drop_index("ix_account_event_user")
    op.drop_table("account_event")
    with op.batch_alter_table("user_account", schema=None) as batch_op:
        batch_op.drop_column("must_change_password")
