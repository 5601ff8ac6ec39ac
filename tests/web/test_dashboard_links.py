"""The dashboard builds its repeated links once per page (app/web/dashboard.py): each link of
the residue, the skips and the live leases is the one the route itself would build, and leads
to the query, document or miss it names, ids with a slash, a "#", a "%" or accents included
(each id one percent-encoded path segment, a slash as %2F: app.http.links)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.main import create_app
from app.models import Miss, Role
from app.services.imports import golden_sets, runs
from app.services.triage import triages
from app.settings import Settings
from tests.support.service import ORIGIN, Account, get, login

#: (query id, document id): ids a path must quote, slashes included.
ODD_IDS = [("q/1", "doc#1"), ("q%2?", "dé-2"), ("plain", "a/b/c")]


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _odd_triage(engine: Engine, tmp: Path) -> tuple[int, int, int]:
    """A triage whose three misses carry ``ODD_IDS``; the run retrieves none of them."""
    qrels = tmp / "odd.qrels"
    qrels.write_text("".join(f"{q}\t0\t{d}\t1\n" for q, d in ODD_IDS), encoding="utf-8")
    run = tmp / "odd.jsonl"
    run.write_text(
        "".join(f'{{"qid": "{q}", "docs": ["noise-{i}"]}}\n' for i, (q, _) in enumerate(ODD_IDS)),
        encoding="utf-8",
    )
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(session=session, name="odd", qrels=qrels)
        stored = runs.import_run(
            session=session, golden=golden, name="run", path=run, source_name="odd.jsonl"
        )
        triage = triages.create_triage(
            session=session, run=stored, golden=golden, depth=10, k=1, user=None
        )
    assert triage.misses == len(ODD_IDS)
    assert triage.id is not None
    assert stored.id is not None
    assert golden.id is not None
    return triage.id, stored.id, golden.id


def _hrefs(cell: Tag) -> dict[str, str]:
    return {str(a["class"][0]): str(a["href"]) for a in cell.select("a[class]")}


def test_repeated_links_are_the_routes_own(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    triage_id, run_id, golden_id = _odd_triage(engine, tmp_path)
    reviewer = accounts[Role.REVIEWER].headers
    # one miss skipped, one leased by the reviewer: each list has a row
    skipped = client.post(f"/api/v1/triages/{triage_id}/claim", headers=reviewer).json()
    answer = client.post(
        f"/api/v1/misses/{skipped['id']}/skip", headers=reviewer, json={"reason": "odd ids"}
    )
    assert answer.status_code == 200, answer.text
    leased = client.post(f"/api/v1/triages/{triage_id}/claim", headers=reviewer).json()
    assert leased["id"] != skipped["id"]

    login(client, accounts[Role.LEAD].email)
    soup = get(client, f"/triages/{triage_id}", mode)
    app = client.app

    def query_url(qid: str) -> str:
        return str(app.url_path_for("query_page", run_id=run_id, qid=quote(qid, safe="")))  # type: ignore[attr-defined]

    def doc_url(doc_id: str) -> str:
        segment = quote(doc_id, safe="")
        return str(
            app.url_path_for("document_page", golden_set_id=golden_id, doc_id=segment)  # type: ignore[attr-defined]
        )

    residue = {int(tr["data-miss"]): tr for tr in soup.select("#residue tbody tr[data-miss]")}
    with Session(engine) as session:
        by_id = {
            m.id: (m.qid, m.doc_id)
            for m in session.exec(select(Miss).where(Miss.triage_id == triage_id))
        }
    assert set(residue) == set(by_id)
    for miss_id, tr in residue.items():
        qid, doc_id = by_id[miss_id]
        assert _hrefs(tr) == {
            "query-link": query_url(qid),
            "doc-link": doc_url(doc_id),
            "miss-link": str(app.url_path_for("miss_page", miss_id=miss_id)),  # type: ignore[attr-defined]
        }
        assert tr.select_one(".query-link").get_text() == qid
        assert tr.select_one(".doc-link").get_text() == doc_id

    [skip_row] = soup.select("#skipped tbody tr[data-miss]")
    assert skip_row.a["href"] == app.url_path_for("miss_page", miss_id=skipped["id"])  # type: ignore[attr-defined]

    [lease_row] = soup.select("#leases tbody tr")
    qid, doc_id = by_id[leased["id"]]
    assert _hrefs(lease_row) == {"query-link": query_url(qid), "doc-link": doc_url(doc_id)}
    release = app.url_path_for("release_lease_form", triage_id=triage_id, miss_id=leased["id"])  # type: ignore[attr-defined]
    assert lease_row.form["action"] == release

    # each link leads to the page of what it names
    for miss_id, tr in residue.items():
        qid, doc_id = by_id[miss_id]
        pages = {
            cls: BeautifulSoup(client.get(href).text, "html.parser")
            for cls, href in _hrefs(tr).items()
        }
        assert pages["query-link"].select_one("h1#query")["data-qid"] == qid
        assert pages["doc-link"].select_one("h1#document")["data-doc"] == doc_id
        assert pages["miss-link"].h1.get_text().startswith(f"{qid} / {doc_id}:")
    released = client.post(str(lease_row.form["action"]), headers=ORIGIN, follow_redirects=False)
    assert released.status_code == 303
    assert get(client, f"/triages/{triage_id}", mode).select_one("#leases td.empty") is not None


def test_links_follow_the_root_path(
    settings: Settings, engine: Engine, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    """Links are kept per application by root path (app/web/render.py): the same application
    served under /tool links under /tool, served at the root it does not, again and again."""
    triage_id, _, _ = _odd_triage(engine, tmp_path)
    found = {}
    app = create_app(settings, engine)
    for root in ("/tool", "", "/tool"):
        with TestClient(app, base_url="http://testserver", root_path=root) as client:
            login(client, accounts[Role.LEAD].email)
            for _ in range(2):
                soup = get(client, f"{root}/triages/{triage_id}", "page")
                links = {
                    "crumbs": [a["href"] for a in soup.select("nav.crumbs a")],
                    "residue": [a["href"] for a in soup.select("#residue a")],
                    "style": [link["href"] for link in soup.select("link[rel=stylesheet]")],
                }
                assert found.setdefault(root, links) == links
    assert found["/tool"] == {
        part: [f"/tool{href}" for href in hrefs] for part, hrefs in found[""].items()
    }
    assert all(href.startswith("/") for hrefs in found[""].values() for href in hrefs)
