"""The command line with what an outside probe tried after issue 13: ids beyond the database's
integers in options, digits that ``str.isdigit`` accepts and ``int`` refuses, ports out of
range, and a database that cannot be used at all. One line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DataError

from app.cli import _database_error
from app.exporters.base import _retry_after
from tests.support.cli import Done, misstriage

HUGE = str(10**30)


def assert_one_line(done: Done, status: int, *words: str) -> None:
    assert done.returncode == status, (done.returncode, done.stderr)
    output = done.stderr + done.stdout
    assert "Traceback" not in output
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    assert lines, output
    assert len(lines[-1]) < 1024
    for word in words:
        assert word in done.stderr, done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["triage", "--run", HUGE],
        ["triage", "--run", str(2**31)],
        ["export", "--triage", HUGE, "--tracker", "github", "--target", "a/b", "--dry-run"],
        ["serve", "--port", "70000"],
        ["serve", "--port", HUGE],
        ["demo", "--port", "-1"],
    ],
    ids=["triage-huge", "triage-int32", "export-huge", "serve-port", "serve-huge", "demo-port"],
)
def test_numbers_beyond_their_range_are_usage_errors(args: list[str], tmp_path: Path) -> None:
    # refused while the options are read, before any database is opened
    done = misstriage(*args, database_url=f"sqlite:///{tmp_path / 'unused.db'}")
    assert_one_line(done, 2, "Invalid value")


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # found by name, or not
@pytest.mark.parametrize("ref", [HUGE, "²", "\u0661\u0662"])
def test_a_golden_set_reference_that_is_no_id_is_looked_up_by_name(
    ref: str, database_url: str, tmp_path: Path
) -> None:
    run = tmp_path / "r.trec"
    run.write_text("q1 Q0 d1 1 1.0 x\n")
    done = misstriage(
        "import-run", "--golden-set", ref, "--name", "r", "--run", run, database_url=database_url
    )
    assert_one_line(done, 1, "no golden set named")


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("sqlite:////nonexistent-folder/x.db", 1),
        ("postgresql+psycopg://nobody@127.0.0.1:1/x", 1),
        ("not a url", 2),
        ("postgresql+nodriver://x/y", 2),
        ("NOT_A_DB", 1),  # replaced by a file that is not a database
    ],
)
def test_a_database_that_cannot_be_used_is_one_line(url: str, status: int, tmp_path: Path) -> None:
    if url == "NOT_A_DB":
        garbage = tmp_path / "garbage.db"
        garbage.write_text("this is not a database\n" * 100)
        url = f"sqlite:///{garbage}"
    done = misstriage("create-token", "--email", "a@example.com", database_url=url)
    assert_one_line(done, status, "the database cannot be used")


@pytest.mark.parametrize(
    "headers",
    [{"retry-after": "²"}, {"retry-after": "\u0661"}, {"x-ratelimit-reset": "²"}],
)
def test_a_trackers_retry_header_in_other_digits_is_no_crash(headers: dict[str, str]) -> None:
    response = httpx.Response(429, headers={k: v.encode() for k, v in headers.items()})
    wait = _retry_after(response)
    assert wait is None or wait >= 0


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_value_the_database_refuses_is_bad_input_in_one_line(engine: Engine) -> None:
    """A value no check caught and PostgreSQL refuses (a NUL byte in text, a number out of
    its range): every command says so in one line and exits 2 (bad input); another
    DataError (a division by zero) stays an error of the program."""

    def refusal(sql: str, value: str) -> DataError:
        with pytest.raises(DataError) as caught, engine.begin() as connection:
            connection.execute(text(sql), {"value": value})
        return caught.value

    said = (2, "refused a value of the input")
    assert _database_error(refusal("SELECT CAST(:value AS text)", "a\x00b")) == said
    assert _database_error(refusal("SELECT CAST(:value AS integer)", "99999999999")) == said
    assert _database_error(refusal("SELECT 1 / CAST(:value AS integer)", "0")) is None
    assert _database_error(ValueError("a bug")) is None
