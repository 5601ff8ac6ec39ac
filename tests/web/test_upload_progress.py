"""The server's progress of a form import: the form carries an id, the import reports the bytes
it reads under it, and only the user who uploaded can read it."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.models import Role
from app.web import progress
from tests.support.lead_runs import FIRST, QRELS
from tests.support.service import ORIGIN, Account, login


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_form_import_reports_what_the_server_read(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.LEAD].email)
    page = BeautifulSoup(client.get("/golden-sets").text, "html.parser")
    form = page.select_one('form[action$="/golden-sets"]')
    import_id = form.select_one('input[name="import_id"]')["value"]
    status_url = form.select_one("[data-upload-progress]")["data-progress-url"]
    assert status_url.endswith(f"/imports/{import_id}/progress")
    unknown = client.get(status_url)
    assert unknown.status_code == 200
    assert unknown.text == "The server is importing the file."
    created = client.post(
        "/golden-sets",
        data={"name": "g", "import_id": import_id},
        files={"qrels": ("q.txt", QRELS)},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert created.status_code == 303
    entry = progress._tracked[import_id]
    assert entry.total == len(QRELS.encode())
    assert entry.read == entry.total  # the reader reported every byte
    assert client.get(status_url).text == "The server has finished with the file."
    # A run import on the golden set's page, the same way.
    golden = BeautifulSoup(client.get(created.headers["location"]).text, "html.parser")
    run_id = golden.select_one('form[action$="/runs"] input[name="import_id"]')["value"]
    assert run_id != import_id
    client.post(
        f"{created.headers['location']}/runs",
        data={"name": "r", "import_id": run_id},
        files={"run": ("r.trec", FIRST)},
        headers=ORIGIN,
    )
    assert progress._tracked[run_id].read == len(FIRST.encode())
    # Someone else learns nothing; a malformed id is not tracked.
    login(client, accounts[Role.REVIEWER].email)
    assert client.get(status_url).text == "The server is importing the file."
    half = progress.Progress(user_id=1, total=2 * 1048576, read=1048576)
    assert progress.describe(half) == (
        "The server is reading the file: 1.0 MB of 2.0 MB (50%) so far."
    )
    half.read = half.total
    assert progress.describe(half) == "The server has read the file; ranking and saving it."
    with progress.tracking("../../x", 1, []) as callback:
        assert callback is None
