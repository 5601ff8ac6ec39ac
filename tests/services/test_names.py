"""Names that leave the product (golden-set, run and token names, causes, export targets)
refuse control, separator and bidirectional-control characters at every face: the API (422,
code ``control_character``), the form page (a message in the page), the CLI (an error line,
no traceback). Other Unicode is accepted everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.models import Role
from app.services.errors import Invalid
from app.services.names import check_name
from tests.support.cli import service_cli as cli
from tests.support.samples import QRELS, QUERIES, RUN, import_golden
from tests.support.service import ORIGIN, Account, WriteFile, login, row_counts

HOSTILE = {
    "bell": "a\x07b",
    "escape (terminal)": "run\x1b[31mred",
    "newline (header split)": "bm25\r\nX-Injected: 1",
    "tab": "a\tb",
    "NUL-free C0 unit separator": "a\x1fb",
    "DEL": "a\x7fb",
    "C1 NEL": "a\x85b",
    "C1 CSI": "a\x9bb",
    "line separator": "a\u2028b",
    "paragraph separator": "a\u2029b",
    "right-to-left override": "evil\u202etxt.exe",
    "left-to-right isolate": "a\u2066b\u2069",
    "right-to-left mark": "a\u200fb",
    "arabic letter mark": "a\u061cb",
}
WELCOME = ["café", "検索", "Ærøskøbing run", "emoji 🔎 ok", "a-b_c.d (v2)", "x" * 100]


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_check_name_refuses(value: str) -> None:
    with pytest.raises(Invalid) as refused:
        check_name(value, what="a name", max_length=200)
    assert refused.value.code == "control_character"
    assert refused.value.status == 422
    assert refused.value.details["character"].startswith("U+")
    assert len(refused.value.message) < 200


@pytest.mark.parametrize("value", WELCOME)
def test_check_name_accepts_unicode(value: str) -> None:
    assert check_name(f"  {value}\n", what="a name", max_length=200) == value


def test_api_refuses_every_kind_of_name(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    lead = accounts[Role.LEAD]
    golden = import_golden(client, lead, name="検索 help")
    assert golden["name"] == "検索 help"
    before = row_counts(engine)
    for label, value in HOSTILE.items():
        answers = {
            "golden set": client.post(
                "/api/v1/golden-sets",
                headers=lead.headers,
                data={"name": value},
                files={"qrels": ("qrels.txt", QRELS), "queries": ("queries.jsonl", QUERIES)},
            ),
            "run": client.post(
                f"/api/v1/golden-sets/{golden['id']}/runs",
                headers=lead.headers,
                data={"name": value},
                files={"run": ("bm25.trec", RUN)},
            ),
            "cause": client.put(
                f"/api/v1/golden-sets/{golden['id']}/causes",
                headers=lead.headers,
                json={"causes": ["not-indexed", value]},
            ),
            "token": client.post("/api/v1/tokens", headers=lead.headers, json={"name": value}),
        }
        for kind, answer in answers.items():
            assert answer.status_code == 422, (label, kind, answer.text)
            error = answer.json()["error"]
            assert error["code"] == "control_character", (label, kind, error)
            assert value not in error["message"]
    assert row_counts(engine) == before
    run = client.post(
        f"/api/v1/golden-sets/{golden['id']}/runs",
        headers=lead.headers,
        data={"name": "BM25 «français»"},
        files={"run": ("bm25.trec", RUN)},
    )
    assert run.status_code == 201, run.text
    assert run.json()["name"] == "BM25 «français»"
    token = client.post("/api/v1/tokens", headers=lead.headers, json={"name": "ノート"})
    assert (token.status_code, token.json()["name"]) == (201, "ノート")


def test_form_page_says_what_is_wrong(client: TestClient, accounts: dict[Role, Account]) -> None:
    login(client, accounts[Role.LEAD].email)
    golden = import_golden(client, accounts[Role.LEAD])
    answer = client.post(
        f"/golden-sets/{golden['id']}/settings",
        headers=ORIGIN,
        data={"causes": "not-indexed, bad\u202ecause", "webhook_url": ""},
        follow_redirects=False,
    )
    # post/redirect/get: back to the golden set's page, which says what was wrong
    assert answer.status_code == 303
    page = client.get(answer.headers["location"])
    assert "text/html" in page.headers["content-type"]
    flash = BeautifulSoup(page.text, "html.parser").select_one('#flash [data-flash="error"]')
    assert flash is not None
    text = flash.get_text()
    assert "must not contain control characters" in text
    assert "U+202E" in text


def test_cli_refuses_a_name_without_traceback(database_url: str, write_file: WriteFile) -> None:
    qrels: Path = write_file("qrels.txt", QRELS)
    refused = cli(database_url, "import-golden-set", "--name", "a\x1b[2Jb", "--qrels", qrels)
    assert refused.returncode == 2  # bad input
    assert "must not contain control characters" in refused.stderr
    assert "U+001B" in refused.stderr
    assert "Traceback" not in refused.stderr
    accepted = cli(database_url, "import-golden-set", "--name", "検索", "--qrels", qrels)
    assert accepted.returncode == 0, accepted.stderr
