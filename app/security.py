"""Secrets at rest: password hashes (argon2id), API tokens and session ids (sha256); and
secrets in view: a URL that carries one, as pages and answers show it."""

from __future__ import annotations

import hashlib
import secrets
import urllib.parse

from argon2 import Parameters, PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from itsdangerous import BadSignature, URLSafeSerializer

_hasher = PasswordHasher()
#: Checked against when no account matches, so that the answer takes as long as a real check
#: (made at the first such login: a process that never needs it never pays for it).
_dummy_hash: str | None = None
TOKEN_PREFIX = "mt_"
MIN_PASSWORD_LENGTH = 8
#: Longer passwords are refused: argon2 would hash them, but nobody types them.
MAX_PASSWORD_LENGTH = 1000


def use_hash_parameters(parameters: Parameters) -> None:
    """Hash new passwords with ``parameters`` from now on (hashes made with others still
    verify). For the test suite, which creates accounts by the thousand: argon2's CHEAPEST
    profile there, the library's defaults everywhere else."""
    global _hasher, _dummy_hash
    _hasher = PasswordHasher.from_parameters(parameters)
    _dummy_hash = None


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """Whether ``password`` is the one hashed; one longer than any password may be (every
    form and field that takes a password reaches here) is refused before it is hashed."""
    if len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def verify_nobody(password: str) -> None:
    """Spend the time of a real check where no account matches (the response time then does
    not reveal which accounts exist)."""
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = _hasher.hash("misstriage-timing-equaliser")
    verify_password(_dummy_hash, password)


def needs_rehash(password_hash: str) -> bool:
    return _hasher.check_needs_rehash(password_hash)


def new_token() -> str:
    """A new API token: ``mt_`` and 43 URL-safe characters (256 random bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    """sha256 of a high-entropy secret (tokens, session ids): enough, and fast to look up."""
    return hashlib.sha256(secret.encode()).hexdigest()


def new_session_id() -> str:
    return secrets.token_urlsafe(32)


class CookieSigner:
    """Signs the session id placed in the cookie, so a forged cookie fails before any query."""

    def __init__(self, secret_key: str) -> None:
        self._serializer = URLSafeSerializer(secret_key, salt="misstriage-session")

    def sign(self, session_id: str) -> str:
        return str(self._serializer.dumps(session_id))

    def unsign(self, cookie: str) -> str | None:
        try:
            value = self._serializer.loads(cookie)
        except BadSignature:
            return None
        return value if isinstance(value, str) else None


#: What stands for the part of a URL a page does not show.
ELIDED = "\N{HORIZONTAL ELLIPSIS}"


def shown_url(url: str) -> str:
    """A URL that may carry its secret in its path or query (a webhook's: Slack, Teams and
    Discord put the token there), as a page shows it: scheme, host and port, the rest elided
    ("https://hooks.example.com/…"). Credentials in the authority are dropped too."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return ELIDED
    if ":" in host:
        host = f"[{host}]"
    rest = parts.path not in ("", "/") or parts.query or parts.fragment
    return f"{parts.scheme}://{host}{port}/{ELIDED if rest else ''}"
