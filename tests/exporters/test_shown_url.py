"""A URL that may carry its secret (a webhook's) is shown by its scheme, host and port alone,
in pages, API answers and dry runs; a tracker's request URL carrying no secret is shown whole."""

from __future__ import annotations

import pytest

from app.exporters.base import Draft
from app.exporters.github import GitHubExporter
from app.exporters.webhook import WebhookExporter
from app.security import shown_url

ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.slack.com/services/T0/B0/XXXX", f"https://hooks.slack.com/{ELLIPSIS}"),
        ("https://h.test/?token=abc", f"https://h.test/{ELLIPSIS}"),
        ("https://h.test/#frag", f"https://h.test/{ELLIPSIS}"),
        ("http://127.0.0.1:8800/hook", f"http://127.0.0.1:8800/{ELLIPSIS}"),
        ("https://user:pw@h.test/", "https://h.test/"),
        ("https://h.test", "https://h.test/"),
        ("http://[::1]:9/x", f"http://[::1]:9/{ELLIPSIS}"),
        ("http://h.test:99999/x", ELLIPSIS),
    ],
)
def test_shown_url_keeps_the_host_and_elides_the_rest(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def draft() -> Draft:
    return Draft(triage_id=1, category="not-indexed", title="t", body="b", labels=[], count=1)


def test_a_webhook_dry_run_shows_its_url_elided_and_a_tracker_its_whole() -> None:
    hook = WebhookExporter("s" * 32).create("https://h.test/hook?token=secret", draft())
    assert hook.redacted()["url"] == f"https://h.test/{ELLIPSIS}"
    assert "secret" not in str(hook.redacted())
    issue = GitHubExporter("https://api.github.com", "tok").create("acme/search", draft())
    assert issue.redacted()["url"] == "https://api.github.com/repos/acme/search/issues"
