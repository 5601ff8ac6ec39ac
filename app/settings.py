"""One place for configuration: environment variables (and a .env file), validated once."""

from __future__ import annotations

import ipaddress
import logging
import os
from functools import lru_cache
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.eval.textio import DecompressionLimit

log = logging.getLogger(__name__)

DEVELOPMENT_SECRET = "misstriage-development-secret-not-for-production"
#: Results kept per query of an imported run beyond the judged ones (review context, and
#: how deep unique-clusters@k can look).
DEFAULT_KEEP_DEPTH = 200
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"
PUBLIC_URL_VARIABLE = "MISSTRIAGE_PUBLIC_URL"


class Settings(BaseSettings):
    """Every setting, with its environment variable. ``DATABASE_URL`` has no prefix (API.md;
    ``MISSTRIAGE_DATABASE_URL`` is read too); the others start with ``MISSTRIAGE_``."""

    # hide_input_in_errors: a refused value may hold a secret (a token in a URL).
    model_config = SettingsConfigDict(
        env_prefix="MISSTRIAGE_", env_file=".env", extra="ignore", hide_input_in_errors=True
    )

    environment: Literal["development", "production", "test"] = "development"
    #: ``DATABASE_URL`` (API.md), or ``MISSTRIAGE_DATABASE_URL`` as every other setting is
    #: named (the first found wins, in that order).
    database_url: str = Field(
        default="sqlite:///./var/misstriage.db",
        validation_alias=AliasChoices("DATABASE_URL", "MISSTRIAGE_DATABASE_URL"),
    )
    #: Signs session cookies. Outside development it must be set (and not the default).
    secret_key: str = DEVELOPMENT_SECRET
    #: Largest accepted upload, in bytes (a request body over it answers 413).
    upload_max_bytes: int = 2 * 1024**3
    #: Largest size a gzip upload may decompress to (default 4 x upload_max_bytes), and how
    #: many times its compressed size it may grow beyond 64 MiB: a decompression bomb stops.
    decompressed_max_bytes: int | None = None
    decompression_max_ratio: int = 100
    #: How long a claimed miss stays leased to its reviewer.
    lease_seconds: int = 600
    #: Threads per app process that run the queue's requests (claim, label, renew, release,
    #: skip), apart from the rest: a few threads keep the lock that Python's threads share
    #: from changing hands all the time under many reviewers (app/http/lanes.py).
    queue_threads: int = Field(default=4, ge=1, le=64)
    session_hours: int = 24 * 14
    #: Failed logins allowed within the window, then 429: per (email, client address) pair
    #: first, per email across all addresses only at a higher limit (so a stranger cannot keep
    #: a known user out by failing on purpose), and per address across all emails.
    login_failures_per_email_and_address: int = Field(default=5, ge=1)
    login_failures_per_email: int = Field(default=50, ge=1)
    login_failures_per_address: int = Field(default=20, ge=1)
    login_window_seconds: int = 15 * 60
    #: Reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed: addresses or
    #: CIDR networks, comma-separated. Default none: the peer's address is the client's.
    trusted_proxies: str = ""
    #: Seconds a request body may stall (no bytes arriving) before the answer is 408.
    body_timeout_seconds: float = Field(default=60.0, gt=0)
    #: The request's head, checked by ``misstriage serve``'s HTTP protocol (app/http/protocol.py)
    #: before the app or authentication sees it: the request target's bytes (over: 414), the
    #: request line and headers together (431), the number of headers (431), and the seconds
    #: from the connection (or the request's first byte) to the end of the headers (408).
    request_line_max_bytes: int = Field(default=8 * 1024, ge=1024)
    header_max_bytes: int = Field(default=64 * 1024, ge=4 * 1024)
    header_max_count: int = Field(default=100, ge=16)
    header_timeout_seconds: float = Field(default=15.0, gt=0)
    #: How many results per query a run keeps for review context.
    keep_depth: int = DEFAULT_KEEP_DEPTH
    #: Rows per batch when writing to SQLite.
    sqlite_batch_rows: int = 50_000
    #: Where people reach this service: links in exported issues point here. Unset,
    #: ``misstriage serve`` and ``demo`` make it the address they listen on (follow_listening).
    public_url: str = DEFAULT_PUBLIC_URL

    # Issue trackers (API.md): endpoints default to the public services; tests point them at a
    # local server. Secrets are SecretStr: never printed, logged or shown.
    github_api_url: str = "https://api.github.com"
    github_token: SecretStr | None = None
    gitlab_api_url: str = "https://gitlab.com"
    gitlab_token: SecretStr | None = None
    jira_api_url: str | None = None
    jira_email: str | None = None
    jira_token: SecretStr | None = None
    linear_api_url: str = "https://api.linear.app/graphql"
    linear_token: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    export_timeout_seconds: float = 10.0
    export_attempts: int = 4
    export_max_wait_seconds: float = 30.0
    #: How often each app process posts waiting webhook events; 0 turns the loop off.
    webhook_poll_seconds: float = 2.0
    #: How often each app process looks for a queued background job; 0: it runs none.
    job_poll_seconds: float = 1.0
    #: A running job whose process wrote no heartbeat for this long is failed (its process
    #: was killed or restarted); the heartbeat is written every 2 s.
    job_stale_seconds: float = Field(default=60.0, ge=5.0)
    #: A detection or an apply over a corpus of at least this many documents runs as a
    #: background job (202 and its job); over a smaller one inline.
    job_documents: int = Field(default=20_000, ge=1)
    #: Allow webhooks and tracker URLs that resolve to loopback, private, link-local (cloud
    #: metadata) and other non-public addresses (GitLab's "allow requests to the local
    #: network"). Off: such URLs are refused when configured and again before each request.
    allow_local_network: bool = False

    @field_validator("github_api_url", "gitlab_api_url", "jira_api_url", "linear_api_url")
    @classmethod
    def _tracker_url(cls, value: str | None) -> str | None:
        """http(s), a host, no credentials; the addresses are checked at each export and
        again as each connection opens (app.exporters.outbound)."""
        if value is not None:
            from app.exporters.outbound import AddressRefused, check_url

            try:
                check_url(value, allow_local=True)
            except AddressRefused as exc:
                raise ValueError(exc.message) from None
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: str) -> str:
        for item in filter(None, (part.strip() for part in value.split(","))):
            try:
                ipaddress.ip_network(item)  # host bits set (10.0.0.1/8) is refused
            except ValueError:
                raise ValueError(
                    f"MISSTRIAGE_TRUSTED_PROXIES: {item[:100]!r} is not an address or a "
                    "network (a network's host bits must be 0)"
                ) from None
        return value

    @property
    def trusted_proxy_list(self) -> list[str]:
        """MISSTRIAGE_TRUSTED_PROXIES as a list of addresses and networks."""
        return [p.strip() for p in self.trusted_proxies.split(",") if p.strip()]

    @model_validator(mode="after")
    def _secret_outside_development(self) -> Settings:
        if self.environment != "development" and (
            self.secret_key == DEVELOPMENT_SECRET or len(self.secret_key) < 32
        ):
            raise ValueError(
                "MISSTRIAGE_SECRET_KEY must be set to a random value of at least 32 "
                "characters outside development, e.g. the output of "
                "python -c 'import secrets; print(secrets.token_urlsafe())'"
            )
        return self

    def decompression_limit(self) -> DecompressionLimit:
        """The bound on every gzip file an import or ``evaluate`` reads."""
        return DecompressionLimit(
            max_bytes=self.decompressed_max_bytes or 4 * self.upload_max_bytes,
            max_ratio=self.decompression_max_ratio,
        )


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (tests build their own ``Settings`` and pass them in)."""
    return Settings()


def listening_url(host: str, port: int) -> str:
    """The URL a browser on this machine reaches a server listening on ``host:port`` by: a
    wildcard address (all interfaces) is reached on loopback; an IPv6 address is bracketed."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def follow_listening(host: str, port: int) -> str:
    """When MISSTRIAGE_PUBLIC_URL is set neither in the environment nor in ``.env``, make it
    the address the server is started on (in this process's environment, which uvicorn's
    worker processes inherit), so absolute links name the port actually served. Returns the
    public URL in force."""
    settings = Settings()
    if "public_url" in settings.model_fields_set:
        return settings.public_url
    url = listening_url(host, port)
    os.environ[PUBLIC_URL_VARIABLE] = url
    get_settings.cache_clear()
    return url
