"""Content negotiation: which of the media types the service can answer in a request's
``Accept`` header prefers (RFC 9110 section 12.5.1), for the error answers that are a page for
people and the JSON error body for programs.

Owns the parsing of ``Accept`` and the rule that ``/api/`` paths always answer JSON; never
reads a request body, and is shared by the exception handlers (app.errors) and the refusals
written before a request reaches the app (app.http.protocol).

Policy: a media range is ``type/subtype``, ``type/*`` or ``*/*`` (a bare ``*``, which some old
clients send, counts as ``*/*``), with an optional ``q`` between 0 and 1; ``q=0`` means "not
acceptable". A range with an unreadable ``q`` (``q=high``, ``q=2``, ``q=nan``) or an unreadable
type is ignored, as if it were absent. Other parameters (``charset=utf-8``) are ignored. An
offered type's quality is the ``q`` of the most specific range that matches it; between equal
qualities the more specific match wins, and then the service's own order. Work is bounded: only
the first ``MAX_ACCEPT_CHARS`` characters and ``MAX_RANGES`` ranges are read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

HTML = "text/html"
JSON = "application/json"
#: Characters of an Accept header read (a browser's is under 200); the rest is ignored.
MAX_ACCEPT_CHARS = 4096
#: Media ranges read from an Accept header; the rest are ignored.
MAX_RANGES = 64
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")


@dataclass(frozen=True)
class MediaRange:
    """One element of an Accept header: ``kind/subtype`` (either may be ``*``) and its q."""

    kind: str
    subtype: str
    q: float

    @property
    def specificity(self) -> int:
        """2 for ``text/html``, 1 for ``text/*``, 0 for ``*/*``."""
        return (self.kind != "*") + (self.subtype != "*")

    def matches(self, media_type: str) -> bool:
        kind, _, subtype = media_type.partition("/")
        return self.kind in ("*", kind) and self.subtype in ("*", subtype)


def _quality(text: str) -> float | None:
    """A q value, or None when it is not a number from 0 to 1."""
    text = text.strip()
    if not text or len(text) > 8:
        return None
    try:
        q = float(text)
    except ValueError:
        return None
    return q if math.isfinite(q) and 0.0 <= q <= 1.0 else None


def _media_range(element: str) -> MediaRange | None:
    media, *params = element.split(";")
    media = media.strip().lower()
    if media == "*":
        media = "*/*"
    kind, slash, subtype = media.partition("/")
    if not slash or not _TOKEN.fullmatch(kind) or not _TOKEN.fullmatch(subtype):
        return None
    if kind == "*" and subtype != "*":
        return None  # "*/json" is no media range
    q = 1.0
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            parsed = _quality(value)
            if parsed is None:
                return None
            q = parsed
            break  # what follows q are accept-extensions, not media type parameters
    return MediaRange(kind, subtype, q)


def parse_accept(header: str | None) -> list[MediaRange]:
    """The readable media ranges of an Accept header, in its order (bounded work)."""
    if not header:
        return []
    elements = header[:MAX_ACCEPT_CHARS].split(",", MAX_RANGES)[:MAX_RANGES]
    return [r for r in map(_media_range, elements) if r is not None]


def quality(ranges: Sequence[MediaRange], media_type: str) -> tuple[float, int]:
    """``media_type``'s quality under ``ranges`` and the specificity of the range that gave it
    (the most specific match); ``(0.0, -1)`` when no range matches."""
    best: MediaRange | None = None
    for media_range in ranges:
        if media_range.matches(media_type) and (
            best is None or media_range.specificity > best.specificity
        ):
            best = media_range
    return (0.0, -1) if best is None else (best.q, best.specificity)


def preferred(header: str | None, offers: Sequence[str]) -> str | None:
    """The offer the Accept header prefers: ``offers[0]`` when the header says nothing
    readable (absent, empty, every range malformed); None when it refuses every offer."""
    ranges = parse_accept(header)
    if not ranges:
        return offers[0]
    scored = [(quality(ranges, offer), -index, offer) for index, offer in enumerate(offers)]
    (q, _), _, offer = max(scored)
    return offer if q > 0 else None


def is_api_path(path: str) -> bool:
    """The JSON API's paths, which answer JSON whatever the Accept header says."""
    return path.startswith("/api/") or path == "/api" or path == "/openapi.json"


def wants_json(path: str, accept: str | None) -> bool:
    """Whether an error answer should be the JSON body rather than a page: always on the
    API's paths; elsewhere when the client prefers JSON to HTML, or accepts neither (it is
    no browser)."""
    return is_api_path(path) or preferred(accept, (HTML, JSON)) != HTML
