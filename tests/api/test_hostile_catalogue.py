"""The hostile-upload catalogue (tests/support/hostile_cases.py) through every import path: the
API, the HTML forms and the ``import-golden-set`` / ``import-run`` commands on SQLite and
PostgreSQL, and ``misstriage evaluate``.

A refused file answers 4xx (exit 2 on the command line), never a 5xx or a traceback, with one
message under 1 KB naming the file and the line, and leaves every table's row count as it
was. An odd but valid file (a byte-order mark, CRLF, several gzip members) is imported with
the numbers it must give. Each test walks the whole catalogue and lists every case that
failed, so one run shows them all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy.engine import Engine

from app.cli import main as cli_main
from app.models import Role
from app.settings import get_settings
from tests.support.hostile_cases import CASES, CORPUS, GOOD, QRELS, QUERIES, RUN, Case, lookup
from tests.support.service import TEST_SECRET, Account, login, row_counts

DB = pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
ORIGIN = {"Origin": "http://testserver"}
#: A run of 250 equal characters in an answer is an echoed value (the cases' long values are
#: runs of one character).
ECHO = re.compile(r"(\S)\1{249}")
ACCEPTED_STATUS = {200, 201, 303}


def test_the_catalogue_covers_every_class_and_file_kind() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) >= 60
    assert len(set(ids)) == len(ids)
    assert {c.target for c in CASES} == {"qrels", "queries", "corpus", "manifest", "run"}
    assert sum(c.refused for c in CASES) >= 60


def where(case: Case) -> str:
    return f"{case.name}, line {case.line}: " if case.line else f"{case.name}: "


def message_problems(case: Case, message: str) -> list[str]:
    """What is wrong with a refusal's message (empty when it is right)."""
    found = []
    if len(message.encode()) >= 1024:
        found.append(f"message of {len(message.encode())} bytes")
    if ECHO.search(message):
        found.append("the offending value echoed")
    if case.problem not in message:
        found.append(f"no {case.problem!r} in {message[:300]!r}")
    if case.line is not None and f"line {case.line}: " not in message:
        found.append(f"line {case.line} not named in {message[:300]!r}")
    if case.name not in message:
        found.append(f"file {case.name} not named in {message[:300]!r}")
    if "Traceback" in message:
        found.append("a traceback")
    return found


def accepted_problems(case: Case, document: dict[str, Any]) -> list[str]:
    assert case.accept is not None
    return [
        f"{path} = {lookup(document, path)!r}, expected {value!r}"
        for path, value in case.accept.items()
        if lookup(document, path) != value
    ]


def write(tmp: Path, case: Case) -> Path:
    folder = tmp / case.id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / case.name
    path.write_bytes(case.content)
    return path


def good_files(case: Case) -> dict[str, tuple[str, bytes]]:
    """The good files beside the case's bad one, as multipart fields."""
    files = {"qrels": ("good.qrels", QRELS.encode())}
    if case.target == "manifest":
        files["corpus"] = ("good-corpus.jsonl", CORPUS.encode())
    files[case.target] = (case.name, case.content)
    return files


def import_good(client: TestClient, headers: dict[str, str]) -> int:
    response = client.post(
        "/api/v1/golden-sets",
        headers=headers,
        data={"name": "good"},
        files={
            "qrels": ("good.qrels", QRELS),
            "queries": ("good.tsv", QUERIES),
            "corpus": ("good.jsonl", CORPUS),
        },
    )
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def post_case(
    client: TestClient,
    case: Case,
    index: int,
    golden_id: int,
    *,
    prefix: str,
    headers: dict[str, str],
) -> Response | str:
    """Upload the case where it belongs (``prefix`` "/api/v1" for the API, "" for the form);
    an exception escaping the app (a 500 the test client re-raises) is returned as text, so
    that one bad case does not hide the others."""
    try:
        if case.target == "run":
            return client.post(
                f"{prefix}/golden-sets/{golden_id}/runs",
                headers=headers,
                data={"name": f"run-{index}", **case.form},
                files={"run": (case.name, case.content)},
                follow_redirects=False,
            )
        return client.post(
            f"{prefix}/golden-sets",
            headers=headers,
            data={"name": f"golden-{index}", **case.form},
            files=good_files(case),
            follow_redirects=False,
        )
    except Exception as exc:  # the failure is reported with the case, not raised
        return f"raised {type(exc).__name__}: {str(exc)[:200]}"


def report(failures: list[str]) -> None:
    assert not failures, f"{len(failures)} cases failed:\n" + "\n".join(failures)


@DB
def test_api(client: TestClient, accounts: dict[Role, Account], engine: Engine) -> None:
    headers = accounts[Role.LEAD].headers
    golden_id = import_good(client, headers)
    failures: list[str] = []
    for index, case in enumerate(CASES):
        before = row_counts(engine)
        response = post_case(client, case, index, golden_id, prefix="/api/v1", headers=headers)
        if isinstance(response, str):
            failures.append(f"{case.id}: {response}")
            continue
        problems: list[str] = []
        if case.refused:
            if response.status_code not in (400, 413, 422):
                problems.append(f"status {response.status_code}: {response.text[:300]}")
            else:
                error = response.json()["error"]
                problems += message_problems(case, error["message"])
                if not error["message"].startswith(where(case)):
                    problems.append(f"message does not start {where(case)!r}")
                if error["details"]["line"] != case.line:
                    problems.append(f"details.line {error['details']['line']}")
            if row_counts(engine) != before:
                problems.append("rows written")
        elif response.status_code != 201:
            problems.append(f"status {response.status_code}: {response.text[:300]}")
        else:
            problems += accepted_problems(case, response.json())
        if problems:
            failures.append(f"{case.id}: {'; '.join(problems)}")
    report(failures)


@DB
def test_html_forms(client: TestClient, accounts: dict[Role, Account], engine: Engine) -> None:
    """The forms answer a page of the product: a 4xx status, or a redirect to the form's page
    with the error as its message; the message names file and line, no traceback, nothing
    echoed, nothing written."""
    golden_id = import_good(client, accounts[Role.LEAD].headers)
    login(client, accounts[Role.LEAD].email)
    failures: list[str] = []
    for index, case in enumerate(CASES):
        before = row_counts(engine)
        response = post_case(client, case, index, golden_id, prefix="", headers=ORIGIN)
        if isinstance(response, str):
            failures.append(f"{case.id}: {response}")
            continue
        problems: list[str] = []
        if case.refused:
            redirected = response.status_code == 303
            if redirected:
                # post/redirect/get: the form's page again, with the error as its message
                response = client.get(response.headers["location"])
                if response.status_code != 200:
                    problems.append(f"after the redirect, status {response.status_code}")
            soup = BeautifulSoup(response.text, "html.parser")
            text = soup.get_text(" ")
            if redirected:
                flash = soup.select_one('#flash [data-flash="error"]')
                if flash is None:
                    problems.append("redirected without an error message")
                else:
                    text = flash.get_text(" ")
            elif response.status_code not in (400, 413, 422):
                problems.append(f"status {response.status_code}")
            if "Traceback" in response.text:
                problems.append("a traceback in the page")
            if ECHO.search(text):
                problems.append("the offending value echoed in the page")
            if len(response.content) > 200_000:
                problems.append(f"a page of {len(response.content)} bytes")
            if case.name not in text:
                problems.append(f"file {case.name} not named in the page")
            if case.line is not None and f"line {case.line}" not in text:
                problems.append(f"line {case.line} not named in the page")
            if row_counts(engine) != before:
                problems.append("rows written")
        elif response.status_code not in ACCEPTED_STATUS:
            problems.append(f"status {response.status_code}")
        if problems:
            failures.append(f"{case.id}: {'; '.join(problems)}")
    report(failures)


@pytest.fixture
def run_cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``misstriage`` in this process (the catalogue is too long for a process a case): the
    settings come from the environment as for a user; the database is migrated already by
    the fixture, so the commands' own migration step is skipped."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("MISSTRIAGE_ENVIRONMENT", "test")
    monkeypatch.setenv("MISSTRIAGE_SECRET_KEY", TEST_SECRET)
    monkeypatch.setattr("app.cli.service.upgrade", lambda settings: None)
    get_settings.cache_clear()

    def run(*args: str | Path) -> Result:
        return CliRunner().invoke(cli_main, [str(a) for a in args])

    yield run
    get_settings.cache_clear()


def cli_problems(case: Case, result: Result) -> list[str]:
    problems: list[str] = []
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        problems.append(f"raised {type(result.exception).__name__}: {result.exception}")
    if "Traceback" in result.output or "Traceback" in result.stderr:
        problems.append("a traceback")
    if case.refused:
        if result.exit_code != 2:
            problems.append(f"exit {result.exit_code}: {result.stderr[:300]!r}")
        lines = result.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("misstriage: error: "):
            problems.append(f"stderr is not one error line: {result.stderr[:300]!r}")
        problems += message_problems(case, result.stderr.strip())
    elif result.exit_code != 0:
        problems.append(f"exit {result.exit_code}: {result.stderr[:300]!r}")
    return problems


@DB
def test_cli_imports(run_cli: Any, engine: Engine, tmp_path: Path) -> None:
    good = {kind: tmp_path / f"good-{kind}" for kind in GOOD}
    for kind, path in good.items():
        path.write_text(GOOD[kind])
    done = run_cli(
        "import-golden-set", "--name", "good", "--qrels", good["qrels"],
        "--queries", good["queries"], "--corpus", good["corpus"],
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    failures: list[str] = []
    for index, case in enumerate(CASES):
        bad = write(tmp_path, case)
        before = row_counts(engine)
        options = {"order": "--order", "min_grade": "--min-grade"}
        extra = [a for key, value in case.form.items() for a in (options[key], value)]
        if case.target == "run":
            result = run_cli(
                "import-run", "--golden-set", "good", "--name", f"run-{index}", "--run", bad,
                "--format", "json", *extra,
            )  # fmt: skip
        else:
            files = {"qrels": good["qrels"], case.target: bad}
            if case.target == "manifest":
                files["corpus"] = good["corpus"]
            args = [a for kind, path in files.items() for a in (f"--{kind}", path)]
            result = run_cli(
                "import-golden-set", "--name", f"golden-{index}", *args, "--format", "json",
                *extra,
            )  # fmt: skip
        problems = cli_problems(case, result)
        if case.refused and row_counts(engine) != before:
            problems.append("rows written")
        if not case.refused and not problems:
            problems += accepted_problems(case, json.loads(result.stdout))
        if problems:
            failures.append(f"{case.id}: {'; '.join(problems)}")
    report(failures)


EVALUATED = [c for c in CASES if c.evaluate and c.target != "manifest"]


def test_evaluate(tmp_path: Path) -> None:
    good = {kind: tmp_path / f"good-{kind}" for kind in GOOD}
    for kind, path in good.items():
        path.write_text(GOOD[kind])
    failures: list[str] = []
    for case in EVALUATED:
        files = {**good, case.target: write(tmp_path, case)}
        args = ["evaluate", "--qrels", str(files["qrels"]), "--queries", str(files["queries"])]
        args += ["--run", f"r={files['run']}"]
        if case.target == "corpus":
            args += ["--corpus", str(files["corpus"])]
        if "order" in case.form:
            args += ["--order", case.form["order"]]
        result = CliRunner().invoke(cli_main, args)
        problems = cli_problems(case, result)
        if problems:
            failures.append(f"{case.id}: {'; '.join(problems)}")
    report(failures)


@DB
def test_min_grade_beyond_its_column(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    """min_grade is stored in an integer column: 2**40 is refused before the database sees it,
    by the API and by the form."""
    files = {"qrels": ("good.qrels", QRELS.encode())}
    for value in (str(2**40), str(-(2**40))):
        response = client.post(
            "/api/v1/golden-sets",
            headers=accounts[Role.LEAD].headers,
            data={"name": "g", "min_grade": value},
            files=files,
        )
        assert response.status_code == 422, response.text
        assert "min_grade" in response.json()["error"]["message"]
    login(client, accounts[Role.LEAD].email)
    response = client.post(
        "/golden-sets",
        headers=ORIGIN,
        data={"name": "g", "min_grade": str(2**40)},
        files=files,
        follow_redirects=False,
    )
    assert response.status_code == 422
    assert "Traceback" not in response.text
    assert sum(row_counts(engine).values()) == 0


def multipart(fields: dict[str, bytes], file_field: str, filename: bytes, content: bytes) -> bytes:
    """A multipart body written by hand: clients percent-encode a NUL in a file name, an
    attacker's script does not."""
    parts = [
        b'--XX\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (k.encode(), v)
        for k, v in fields.items()
    ]
    parts.append(
        b'--XX\r\nContent-Disposition: form-data; name="%s"; filename="%s"\r\n'
        b"Content-Type: text/plain\r\n\r\n%s\r\n" % (file_field.encode(), filename, content)
    )
    return b"".join(parts) + b"--XX--\r\n"


@DB
def test_control_characters_in_a_file_name(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    """A NUL in an uploaded file's name used to reach PostgreSQL (a 500): shown and stored as
    ``?``, in the run's source name and in error messages."""
    headers = {
        **accounts[Role.LEAD].headers,
        "Content-Type": "multipart/form-data; boundary=XX",
    }
    golden_id = import_good(client, accounts[Role.LEAD].headers)
    body = multipart({"name": b"nul"}, "run", b"a\x00b\x01.trec", RUN.encode())
    response = client.post(f"/api/v1/golden-sets/{golden_id}/runs", headers=headers, content=body)
    assert response.status_code == 201, response.text
    assert response.json()["source_name"] == "a?b?.trec"
    before = row_counts(engine)
    body = multipart({"name": b"bad"}, "run", b"c\x00d.trec", b"q1 Q0 a 1 x t\n")
    response = client.post(f"/api/v1/golden-sets/{golden_id}/runs", headers=headers, content=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("c?d.trec, line 1: ")
    body = multipart({"name": b"g"}, "qrels", b"e\x00f.qrels", b"q1 0 a x\n")
    response = client.post("/api/v1/golden-sets", headers=headers, content=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("e?f.qrels, line 1: ")
    assert row_counts(engine) == before
    body = multipart({"name": b"g"}, "qrels", b"g\x00h.qrels", QRELS.encode())
    response = client.post("/api/v1/golden-sets", headers=headers, content=body)
    assert response.status_code == 201, response.text
    assert response.json()["report"]["judgments"]["source"] == "g?h.qrels"
