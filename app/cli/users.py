"""``misstriage user``: an account's life cycle from the command line (role, deactivation,
reactivation, password reset), for whoever runs the service: the same rules and audit trail
as the admins' API and pages (app/services/accounts/life_cycle.py), the actor "the command
line"."""

from __future__ import annotations

import click

from app.cli.params import ROLES
from app.cli.service import database


@click.command("user")
@click.option("--email", required=True, help="The account's email.")
@click.option("--role", type=click.Choice(ROLES), help="Give it this role.")
@click.option("--deactivate", is_flag=True, help="Refuse its logins, sessions and tokens.")
@click.option("--reactivate", is_flag=True, help="Let it log in again (its tokens work again).")
@click.option(
    "--reset-password",
    is_flag=True,
    help="Print a temporary password alone on stdout; the next login must choose a new one.",
)
@click.option(
    "--revoke-tokens",
    is_flag=True,
    help="With --reset-password: also revoke the account's API tokens (the password leaked).",
)
def user(
    email: str,
    role: str | None,
    deactivate: bool,
    reactivate: bool,
    reset_password: bool,
    revoke_tokens: bool,
) -> None:
    """Change one account: exactly one of --role, --deactivate, --reactivate and
    --reset-password. Exit 1 for an unknown email or a change the rules refuse (the last
    active admin). --revoke-tokens, with --reset-password, revokes its API tokens too."""
    from app.models import AccountVia, Role
    from app.services.accounts import life_cycle
    from app.services.accounts import users as user_service

    chosen = [role is not None, deactivate, reactivate, reset_password]
    if sum(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --role, --deactivate, --reactivate, --reset-password"
        )
    if revoke_tokens and not reset_password:
        raise click.UsageError("--revoke-tokens goes with --reset-password")
    with database() as session:
        found = user_service.get_user_by_email(session=session, email=email)
        assert found.id is not None
        if reset_password:
            changed, temporary, revoked = life_cycle.reset_password(
                session=session,
                actor=None,
                user_id=found.id,
                via=AccountVia.CLI,
                revoke_tokens=revoke_tokens,
            )
            click.echo(temporary)
            tokens = (
                f"{revoked} API token{'s' if revoked != 1 else ''} revoked"
                if revoke_tokens
                else "API tokens keep working"
            )
            click.echo(
                f"{changed.email}: temporary password set; the next login must choose a new "
                f"one (browser sessions ended, {tokens})",
                err=True,
            )
            return
        changed = life_cycle.update_user(
            session=session,
            actor=None,
            user_id=found.id,
            via=AccountVia.CLI,
            role=None if role is None else Role(role),
            active=True if reactivate else False if deactivate else None,
        )
    state = "active" if changed.is_active else "deactivated"
    click.echo(f"{changed.email}: {changed.role}, {state}", err=True)
