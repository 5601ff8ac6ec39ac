"""The password policy for new passwords (NIST SP 800-63B): a minimum length and not one of
the common passwords bundled in ``app/data`` (source and licence in its README)."""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

from app.security import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH
from app.services.errors import Invalid

COMMON_PASSWORDS = Path(__file__).resolve().parents[2] / "data" / "common-passwords.txt.gz"


@lru_cache(maxsize=1)
def common_passwords() -> frozenset[str]:
    with gzip.open(COMMON_PASSWORDS, "rt", encoding="utf-8") as lines:
        return frozenset(line.strip().lower() for line in lines if line.strip())


def check_new_password(password: str) -> None:
    """Raise ``Invalid`` (code ``weak_password``) unless ``password`` may be set. Common
    passwords are compared regardless of case and surrounding spaces."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise Invalid(
            f"the password needs at least {MIN_PASSWORD_LENGTH} characters",
            code="weak_password",
        )
    if len(password) > MAX_PASSWORD_LENGTH:
        raise Invalid(
            f"the password can have at most {MAX_PASSWORD_LENGTH} characters",
            code="weak_password",
        )
    if password.strip().lower() in common_passwords():
        raise Invalid(
            "this password is in a list of common passwords: choose another one",
            code="weak_password",
        )
