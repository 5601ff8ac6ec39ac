"""Requests that leave the product (tracker APIs, webhooks) go only where they should: no
server-side request forgery.

A URL is checked twice. When it is configured (a webhook URL, an export target, a tracker's
base URL) ``check_url`` refuses a bad scheme, credentials in the URL, and a host that resolves
to a local-network address. When a request is sent, ``client`` connects through a network
backend that resolves the host itself, checks **every** address it gets, and opens the socket
to the checked address: a name whose DNS answer changed since it was configured (or changes
between a check and a connect) cannot reach the local network. Redirects are not followed.

``MISSTRIAGE_ALLOW_LOCAL_NETWORK=true`` turns the address checks off (like GitLab's "allow
requests to the local network" switch): for a tracker inside the company network, and tests.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Networks a request from the server must not reach (besides what ``ipaddress`` itself calls
#: private, loopback, link-local, multicast, reserved or unspecified).
_REFUSED_NETWORKS = [
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",  # "this network"; 0.0.0.0 reaches the local host on Linux
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT (RFC 6598)
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, the cloud metadata address 169.254.169.254
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "ff00::/8",
        "64:ff9b::/96",  # NAT64: embeds an IPv4 address
        "64:ff9b:1::/48",
        "2002::/16",  # 6to4: embeds an IPv4 address
    )
]


class AddressRefused(Exception):
    """A URL or address this server must not send to; ``code`` is the API error code."""

    def __init__(self, message: str, *, code: str = "url_refused") -> None:
        super().__init__(message)
        self.message, self.code = message, code


def refusal(address: str) -> str | None:
    """Why ``address`` (an IP literal) is refused, or None when it is a public address."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or _ipv4_compatible(ip)
        if embedded is not None:
            return refusal(str(embedded))
    if any(ip in network for network in _REFUSED_NETWORKS):
        return "a local-network address"
    if (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    ):
        return "not a public address"
    return None


def _ipv4_compatible(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    # ::a.b.c.d (deprecated IPv4-compatible form): the kernel may route it as IPv4.
    value = int(ip)
    if value >> 32 == 0 and value > 1:
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    return None


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver, as the socket would use it:
    it also reads 2130706433, 0x7f.1 and 017700000001 as 127.0.0.1)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def checked_addresses(host: str, port: int) -> list[str]:
    """The addresses of ``host``, all of them public; AddressRefused otherwise."""
    try:
        addresses = resolve(host.strip("[]"), port)
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        message = f"{_short(host)} does not resolve ({exc})"
        raise AddressRefused(message, code="url_unresolvable") from None
    for address in addresses:
        reason = refusal(address)
        if reason is not None:
            raise AddressRefused(
                f"{_short(host)} resolves to {address}, {reason}; set "
                "MISSTRIAGE_ALLOW_LOCAL_NETWORK=true "
                "to allow requests to the local network"
            )
    return addresses


def check_url(url: str, *, allow_local: bool, must_resolve: bool = False) -> None:
    """Refuse (AddressRefused) a URL that is not http(s), carries credentials, or whose host
    resolves to a local-network address. A name that does not resolve now passes unless
    ``must_resolve``: the send-time check still stands between it and the network."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise AddressRefused(f"{_short(url)} is not a URL", code="bad_url") from None
    if parts.scheme not in ("http", "https"):
        raise AddressRefused("only http and https URLs are allowed", code="bad_url")
    if not parts.hostname:
        raise AddressRefused(f"{_short(url)} names no host", code="bad_url")
    if parts.username is not None or parts.password is not None:
        raise AddressRefused(
            "credentials in a URL are not allowed (they would be stored and shown)",
            code="bad_url",
        )
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise AddressRefused("a URL must not contain spaces or control characters", code="bad_url")
    if allow_local:
        return
    name = parts.hostname.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        raise AddressRefused(
            f"{_short(parts.hostname)} is the local host; set MISSTRIAGE_ALLOW_LOCAL_NETWORK=true "
            "to allow requests to the local network"
        )
    try:
        checked_addresses(parts.hostname, port)
    except AddressRefused as exc:
        if exc.code == "url_unresolvable" and not must_resolve:
            return
        raise


class _GuardedBackend(httpcore.SyncBackend):
    """Resolves, checks every address, and connects to a checked one (not to the name)."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        last: Exception | None = None
        for address in checked_addresses(host, port):
            try:
                return super().connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore.ConnectError as exc:
                last = exc
        raise last or httpcore.ConnectError(f"no address for {host}")


def client(*, allow_local: bool) -> httpx.Client:
    """An HTTP client for requests that leave the product: no redirects followed, no proxy
    from the environment, and (unless ``allow_local``) every connection checked."""
    if allow_local:
        return httpx.Client(follow_redirects=False)
    transport = httpx.HTTPTransport()
    # TLS still verifies the certificate against the URL's host name: httpcore passes the
    # origin's host as server_hostname, whatever address the socket was opened to.
    transport._pool = httpcore.ConnectionPool(  # httpx has no public hook for this
        ssl_context=httpx.create_ssl_context(),
        max_connections=100,  # httpx's default limits
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        network_backend=_GuardedBackend(),
    )
    return httpx.Client(transport=transport, follow_redirects=False, trust_env=False)


def _short(value: str) -> str:
    return value if len(value) <= 100 else value[:100] + "…"
