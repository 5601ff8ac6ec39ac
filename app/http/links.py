"""A name people gave (a series, a query or document id, a run's name) inside a URL: one rule
for the pages' links, the Jinja filter ``segment`` and the API's paths.

A name is one path segment, every character but the unreserved ones percent-encoded
(``feature/login`` is ``feature%2Flogin``, ``a?b#c`` is ``a%3Fb%23c``, ``%`` is ``%25``,
non-Latin letters their UTF-8 bytes). Starlette neither encodes path parameters nor accepts a
``/`` in a plain one, so the value is encoded here and the route takes it as ``{name:path}``
(the server decodes ``%2F`` to ``/`` before routing). The same encoding serves a query
parameter's value.

Browsers (the WHATWG URL parser) drop the segments ``.`` and ``..`` and their encodings
(``%2e``, ``.%2E``, ...) before sending a request, so a name that is one of those cannot
travel as a path segment from a page: ``in_path`` says so, and the pages link such a name
through the route's query-parameter form instead. Other HTTP clients (httpx, curl, urllib3)
drop only the plain segments: ``path_segment`` writes those names ``%2E`` and ``%2E%2E``,
which the server decodes back (the API's paths).
"""

from __future__ import annotations

from urllib.parse import quote

#: The names a browser removes from a path whatever their encoding.
DOT_SEGMENTS = frozenset({".", ".."})


def path_segment(name: object) -> str:
    """``name`` percent-encoded as one URL path segment (or a query parameter's value):
    only ASCII letters, digits and ``-._~`` are kept as they are, but for the names ``.``
    and ``..``, written ``%2E`` and ``%2E%2E``, which HTTP clients (httpx, curl, urllib3)
    send as they are where they drop a plain dot segment; browsers drop those too."""
    text = str(name)
    if text in DOT_SEGMENTS:
        return "%2E" * len(text)
    return quote(text, safe="")


def in_path(name: object) -> bool:
    """Whether a browser keeps ``name`` as a path segment (not ``.`` or ``..``)."""
    return str(name) not in DOT_SEGMENTS
