"""Forms do what their fields say, and every form post ends on a URL that works on reload:
post/redirect/get with a flash message saying what happened, or the form page at its own URL."""

from __future__ import annotations

import itertools
import math
from urllib.parse import urlencode, urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from httpx import Response

from app.models import Role
from tests.support.lead_runs import FIRST, QRELS, QUERIES
from tests.support.service import ORIGIN, Account, login

SQLITE = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def flash_of(client: TestClient, url: str, status: int = 200) -> tuple[str, str] | None:
    """GET ``url`` (which must answer ``status``) and return its flash message (kind, text)."""
    page = client.get(url)
    assert page.status_code == status, page.text[:300]
    flash = BeautifulSoup(page.text, "html.parser").select_one("#flash [data-flash]")
    return None if flash is None else (str(flash["data-flash"]), flash.get_text(strip=True))


def see_other(response: Response) -> str:
    """A post answered the browser with 303 to a GET URL (path and query)."""
    assert response.status_code == 303, response.text[:300]
    parts = urlsplit(response.headers["location"])
    return parts.path + (f"?{parts.query}" if parts.query else "")


def post(client: TestClient, url: str, data: dict[str, str], **files: tuple[str, str]) -> Response:
    return client.post(url, data=data, files=files or None, headers=ORIGIN, follow_redirects=False)


@pytest.fixture
def golden_url(client: TestClient, accounts: dict[Role, Account]) -> str:
    login(client, accounts[Role.LEAD].email)
    created = post(
        client,
        "/golden-sets",
        {"name": "help", "min_grade": ""},  # an empty optional number is its default
        qrels=("q.txt", QRELS),
        queries=("q.tsv", QUERIES),
    )
    url = see_other(created)
    assert flash_of(client, url) == ("ok", "Golden set `help` imported: 3 queries, 4 judgments.")
    assert flash_of(client, url) is None  # once
    imported = post(
        client, f"{url}/runs", {"name": "bm25", "format": "", "order": ""}, run=("r", FIRST)
    )
    assert see_other(imported) == url
    assert flash_of(client, url) == ("ok", "Run `bm25` imported: 3 queries, 8 lines.")
    return url


def expected_errors(k: str, depth: str, gain: str, cost: str) -> set[str]:
    """The fields the page must refuse, worked out independently of the app."""
    bad: set[str] = set()

    def whole(text: str, default: int) -> int | None:
        if not text:
            return default
        if not text.lstrip("-").isdigit() or not 1 <= int(text) <= 100_000:
            return None
        return int(text)

    k_value, depth_value = whole(k, 10), whole(depth, 50)
    if k_value is None:
        bad.add("k")
    if depth_value is None:
        bad.add("depth")
    if k_value is not None and depth_value is not None and k_value > depth_value:
        bad.add("k")
    if gain not in ("", "exp", "linear"):
        bad.add("gain")
    if cost:
        try:
            number = float(cost)
        except ValueError:
            bad.add("cost_ms")
        else:
            if not math.isfinite(number) or not 0 <= number < 1e6:
                bad.add("cost_ms")
    return bad


@SQLITE
def test_every_combination_of_the_controls_answers_a_page(
    client: TestClient, golden_url: str
) -> None:
    ks = ["", "5", "0", "abc", "100001", "60"]
    depths = ["", "20", "0", "-3", "1.5"]
    gains = ["", "exp", "linear", "bogus"]
    costs = ["", "0", "2.5", "-1", "nan", "1e9", "x"]
    seen = set()
    for k, depth, gain, cost in itertools.product(ks, depths, gains, costs):
        query = urlencode({"k": k, "depth": depth, "gain": gain, "cost_ms": cost})
        response = client.get(f"{golden_url}?{query}")
        where = query
        assert response.headers["content-type"].startswith("text/html"), where
        soup = BeautifulSoup(response.text, "html.parser")
        assert soup.select_one("header.top nav") is not None, where
        bad = expected_errors(k, depth, gain, cost)
        shown = {e["id"].removesuffix("-error") for e in soup.select(".field-error")}
        assert shown == bad, where
        if bad:
            assert response.status_code == 422, where
            assert response.headers["x-error-code"].startswith("invalid_"), where
            # What is shown is said, and it is computable: k at most depth.
            note = soup.select_one("#shown-values")
            assert note is not None, where
            header = [th.get_text() for th in soup.select("#runs-table thead th")]
            k_shown, depth_shown = int(header[1][2:]), int(header[2][2:])
            assert k_shown <= depth_shown, where
            assert f"k {k_shown}, depth {depth_shown}" in note.get_text(), where
            # The entered value stays in its field, next to its message.
            for name in bad - {"gain"}:
                field = soup.select_one(f'input[name="{name}"]')
                assert field["aria-invalid"] == "true", where
                assert field["value"] == {"k": k, "depth": depth, "cost_ms": cost}[name], where
        else:
            assert response.status_code == 200, where
            header = [th.get_text() for th in soup.select("#runs-table thead th")]
            assert header[1] == f"R@{k or 10}", where
            assert header[2] == f"R@{depth or 50}", where
            has_cost = any(th.startswith("cost@") for th in header)
            assert has_cost == bool(cost), where
        seen.add(response.status_code)
    assert seen == {200, 422}


@SQLITE
@pytest.mark.parametrize(
    ("tolerance", "refused"),
    [("", False), ("0", False), ("0.05", False), ("-0.1", True), ("1", True), ("x", True)],
)
def test_the_depth_advisor_tolerance_field(
    client: TestClient, golden_url: str, tolerance: str, refused: bool
) -> None:
    query = urlencode({"cost_ms": "3.1", "tolerance": tolerance})
    response = client.get(f"{golden_url}?{query}")
    soup = BeautifulSoup(response.text, "html.parser")
    shown = {e["id"].removesuffix("-error") for e in soup.select(".field-error")}
    field = soup.select_one('input[name="tolerance"]')
    advice = soup.select_one("#depth-advice p").get_text()
    if refused:
        assert response.status_code == 422
        assert shown == {"tolerance"}
        assert field["value"] == tolerance
        # The default is what is used, and the page says so.
        assert "within 0.01 R" in advice
        assert "tolerance 0.01" in soup.select_one("#shown-values").get_text()
    else:
        assert response.status_code == 200
        assert shown == set()
        assert f"within {float(tolerance or 0.01):g} R" in advice


@SQLITE
def test_create_triage_uses_the_depth_and_k_shown(
    client: TestClient, golden_url: str, accounts: dict[Role, Account]
) -> None:
    page = BeautifulSoup(client.get(f"{golden_url}?k=3&depth=4").text, "html.parser")
    form = page.select_one('#runs-table form[action*="/triages"]')
    assert form is not None
    fields = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
    assert fields == {"k": "3", "depth": "4"}
    created = post(client, urlsplit(form["action"]).path, fields)
    triage_url = see_other(created)
    assert triage_url.startswith("/triages/")
    kind, text = flash_of(client, triage_url) or ("", "")
    assert kind == "ok"
    assert text.startswith("Triage created: depth 4, k 3, ")
    triage = client.get(f"/api/v1{triage_url}", headers=accounts[Role.LEAD].headers).json()
    assert (triage["depth"], triage["k"]) == (4, 3)
    assert text == f"Triage created: depth 4, k 3, {triage['misses']} misses."
    assert flash_of(client, triage_url) is None
    # The same again: refused, back on the page with the values entered and the reason.
    again = post(client, urlsplit(form["action"]).path, fields)
    back = see_other(again)
    assert back == f"{golden_url}?k=3&depth=4"
    assert again.headers["x-error-code"] == "triage_exists"
    kind, text = flash_of(client, back) or ("", "")
    assert kind == "error"
    assert text.startswith("Triage not created:")


@SQLITE
def test_create_triage_with_reviewers_per_miss(
    client: TestClient, golden_url: str, accounts: dict[Role, Account]
) -> None:
    """A lead sets double review on the page, without the API: the form's reviewers per miss
    become the triage's overlap (every miss); a value outside 1..3 creates nothing."""
    page = BeautifulSoup(client.get(golden_url).text, "html.parser")
    form = page.select_one('#runs-table form[action*="/triages"]')
    assert form is not None
    choice = form.select_one('select[name="reviewers"]')
    assert choice is not None
    assert [o["value"] for o in choice.select("option")] == ["1", "2", "3"]
    assert choice.select_one("option[selected]")["value"] == "1"
    action = urlsplit(form["action"]).path
    refused = post(client, action, {"k": "10", "depth": "50", "reviewers": "4"})
    assert refused.headers["x-error-code"] == "invalid_overlap"
    kind, text = flash_of(client, see_other(refused)) or ("", "")
    assert (kind, text) == (
        "error",
        "Triage not created: reviewers must be between 1 and 3, not 4.",
    )
    lead = accounts[Role.LEAD].headers
    run_id = action.split("/")[2]
    listed = client.get(f"/api/v1/runs/{run_id}/triages", headers=lead).json()
    assert (listed["items"] if isinstance(listed, dict) else listed) == []

    triage_url = see_other(post(client, action, {"k": "10", "depth": "50", "reviewers": "2"}))
    triage = client.get(f"/api/v1{triage_url}", headers=lead).json()
    assert triage["overlap"] == {"reviewers": 2, "fraction": 1.0, "seed": 0}
    assert flash_of(client, triage_url) == (
        "ok",
        f"Triage created: depth 50, k 10, {triage['misses']} misses, 2 reviewers per miss.",
    )
    facts = BeautifulSoup(client.get(triage_url).text, "html.parser").select_one("p.facts")
    assert facts is not None
    assert "; double review: 2 reviewers on every miss." in facts.get_text()

    # a reproducible sample: the share of misses (percent) and the seed, from the same form
    assert form.select_one('input[name="share"]') is not None
    assert form.select_one('input[name="seed"]') is not None
    for bad in ({"share": "0"}, {"share": "101"}, {"seed": "-1"}, {"share": "half"}):
        refused = post(client, action, {"k": "10", "depth": "100", "reviewers": "2", **bad})
        assert refused.headers["x-error-code"] == "invalid_overlap", bad
    sampled_url = see_other(
        post(
            client,
            action,
            {"k": "10", "depth": "100", "reviewers": "2", "share": "50", "seed": "7"},
        )
    )
    sampled = client.get(f"/api/v1{sampled_url}", headers=lead).json()
    assert sampled["overlap"] == {"reviewers": 2, "fraction": 0.5, "seed": 7}
    assert flash_of(client, sampled_url) == (
        "ok",
        f"Triage created: depth 100, k 10, {sampled['misses']} misses, 2 reviewers per miss "
        "on 50% of them (seed 7).",
    )


@SQLITE
def test_k_above_depth_is_refused_on_every_face(
    client: TestClient, golden_url: str, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD]
    runs = client.get(f"/api/v1{golden_url}/runs", headers=lead.headers).json()
    run_id = (runs["items"] if isinstance(runs, dict) else runs)[0]["id"]
    # The page: 422, the message next to k.
    page = client.get(f"{golden_url}?k=20&depth=10")
    assert page.status_code == 422
    message = BeautifulSoup(page.text, "html.parser").select_one("#k-error")
    assert message is not None
    assert "k (20) is larger than depth (10)" in message.get_text()
    # The create-triage form: back to the page, nothing created.
    refused = post(client, f"/runs/{run_id}/triages", {"k": "20", "depth": "10"})
    assert refused.headers["x-error-code"] == "k_above_depth"
    # The page it comes back to refuses the values too, next to the field.
    kind, text = flash_of(client, see_other(refused), status=422) or ("", "")
    assert kind == "error"
    assert "k (20) is larger than depth (10)" in text
    # The API: metrics, per-query rows and triage creation.
    for response in (
        client.get(f"/api/v1/runs/{run_id}/metrics?k=20&depth=10", headers=lead.headers),
        client.get(f"/api/v1/runs/{run_id}/queries?k=20&depth=10", headers=lead.headers),
        client.post(
            f"/api/v1/runs/{run_id}/triages", json={"k": 20, "depth": 10}, headers=lead.headers
        ),
    ):
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "k_above_depth"
    triages = client.get(f"/api/v1/runs/{run_id}/triages", headers=lead.headers)
    listed = triages.json()
    assert (listed["items"] if isinstance(listed, dict) else listed) == []
    # k equal to depth is fine.
    assert client.get(f"{golden_url}?k=10&depth=10").status_code == 200


@SQLITE
def test_failed_imports_come_back_to_their_page(client: TestClient, golden_url: str) -> None:
    # A run that cannot be read: back to the golden-set page, the name kept, the reason said.
    bad = post(
        client,
        f"{golden_url}/runs",
        {"name": "broken", "format": "trec", "order": "rank"},
        run=("r.trec", "q1 Q0\n"),
    )
    assert see_other(bad) == golden_url
    assert bad.headers["x-error-code"]
    page = BeautifulSoup(client.get(golden_url).text, "html.parser")
    flash = page.select_one("#flash [data-flash]")
    assert flash is not None
    assert flash["data-flash"] == "error"
    assert flash.get_text().startswith("Run not imported:")
    assert "r.trec" in flash.get_text()
    form = page.select_one('form[action$="/runs"]')
    assert form.select_one('input[name="name"]')["value"] == "broken"
    assert form.select_one('select[name="format"] option[selected]')["value"] == "trec"
    assert form.select_one('select[name="order"] option[selected]')["value"] == "rank"
    assert flash_of(client, golden_url) is None
    # An unknown format or order is refused the same way, not a raw 422.
    unknown = post(client, f"{golden_url}/runs", {"name": "x", "order": "zzz"}, run=("r", FIRST))
    assert see_other(unknown) == golden_url
    assert "order must be one of" in (flash_of(client, golden_url) or ("", ""))[1]
    # The golden-set form posts to its own page's URL and answers there.
    out_of_range = post(
        client, "/golden-sets", {"name": "g2", "min_grade": str(2**31)}, qrels=("q", QRELS)
    )
    assert out_of_range.status_code == 422
    soup = BeautifulSoup(out_of_range.text, "html.parser")
    # the bounds of the service and the API (32-bit integers)
    assert (
        "min_grade must be between -2147483648 and 2147483647"
        in soup.select_one(".error").get_text()
    )
    assert soup.select_one('input[name="name"]')["value"] == "g2"
    assert client.get("/golden-sets").status_code == 200  # the URL works on reload


@SQLITE
def test_settings_and_token_forms_redirect_with_a_message(
    client: TestClient, golden_url: str
) -> None:
    saved = post(client, f"{golden_url}/settings", {"causes": "stale, synonyms", "webhook_url": ""})
    assert see_other(saved) == golden_url
    assert flash_of(client, golden_url) == (
        "ok",
        "Settings saved: causes stale, synonyms; webhook off.",
    )
    created = post(client, "/tokens", {"name": "ci"})
    assert created.status_code == 201  # the secret is shown once, never put in a cookie
    secret = BeautifulSoup(created.text, "html.parser").select_one("code")
    assert secret is not None
    token_id = client.get("/api/v1/tokens").json()
    items = token_id["items"] if isinstance(token_id, dict) else token_id
    ci = next(t for t in items if t["name"] == "ci")
    revoked = post(client, f"/tokens/{ci['id']}/revoke", {})
    assert see_other(revoked) == "/tokens"
    assert flash_of(client, "/tokens") == ("ok", "Token `ci` revoked.")
    # A flash cookie nobody signed is ignored.
    client.cookies.set("misstriage_flash", "forged.value")
    assert flash_of(client, "/tokens") is None


@SQLITE
def test_link_controls_refuse_bad_values_as_pages(client: TestClient, golden_url: str) -> None:
    """The run page and the comparison take k and depth from links: a bad one is the error
    page naming the field (never a silent clamp), a good one the page."""
    run = BeautifulSoup(client.get(golden_url).text, "html.parser").select_one(
        '#runs-table a[href*="/runs/"]'
    )
    run_path = urlsplit(run["href"]).path
    for query, code, words in (
        ("k=0", "invalid_k", "k must be between 1 and 100000, not 0"),
        ("depth=abc", "invalid_depth", "Depth must be a whole number, not 'abc'."),
        ("k=20&depth=10", "invalid_k", "k (20) is larger than depth (10)"),
        ("gain=cubic", "invalid_gain", "Gain must be one of exp, linear"),
    ):
        page = client.get(f"{run_path}?{query}")
        assert page.status_code == 422, query
        assert page.headers["x-error-code"] == code, query
        alert = BeautifulSoup(page.text, "html.parser").select_one('[role="alert"]')
        assert words in alert.get_text(), query
    assert client.get(f"{run_path}?k=5&depth=5&gain=").status_code == 200
    run_id = run_path.rsplit("/", 1)[1]
    compare = f"{golden_url}/compare?a={run_id}&b={run_id}"
    itself = client.get(f"{compare}&depth=")
    assert itself.status_code == 422
    assert itself.headers["x-error-code"] == "same_run"
    refused = client.get(f"{compare}&depth=0")
    assert refused.status_code == 422
    assert refused.headers["x-error-code"] == "invalid_depth"
