"""``misstriage backup``: a consistent copy of the database while the service keeps running.

SQLite: the online backup API (``sqlite3.Connection.backup``) copies every page in one step
inside one read transaction, so the copy is a snapshot of a committed state even while app
processes write (WAL lets them go on meanwhile). The copy is switched to a rollback journal,
so it is one self-contained file, and checked (``PRAGMA integrity_check``) before it is given
its final name.

PostgreSQL: ``pg_dump --format=custom`` (also a consistent snapshot, taken without blocking
writers), run when a ``pg_dump`` is found (``--pg-dump``, the PATH, or the Debian/Ubuntu
``/usr/lib/postgresql/*/bin``). Without one, the command prints the ``pg_dump`` command to run
and exits 1. The password never goes on a command line: it is passed in ``PGPASSWORD``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from sqlalchemy.engine import URL


def _fail(message: str) -> NoReturn:
    click.echo(f"misstriage: error: {message}", err=True)
    sys.exit(1)


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def _partial(output: Path) -> Path:
    """Where the backup is written until it is complete (never mistaken for a backup): made
    anew, empty, readable and writable by its owner alone (a backup holds password hashes and
    reviewers' notes), before anything is written to it."""
    partial = output.with_name(output.name + ".partial")
    partial.unlink(missing_ok=True)
    os.close(os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return partial


def backup_sqlite(database: Path, output: Path) -> dict[str, int]:
    """Copy the SQLite database at ``database`` to ``output`` with the online backup API;
    returns the row count of every table of the copy. Raises ``RuntimeError`` when the copy
    fails its integrity check."""
    partial = _partial(output)
    source = sqlite3.connect(database, timeout=30)
    try:
        target = sqlite3.connect(partial)
        try:
            # pages=-1: everything in one step, i.e. one read transaction: a snapshot. (In
            # several steps a write in between would make SQLite restart the copy.)
            source.backup(target, pages=-1)
            target.execute("PRAGMA journal_mode=DELETE")
            (verdict,) = target.execute("PRAGMA integrity_check").fetchone()
            if verdict != "ok":
                raise RuntimeError(f"the copy failed its integrity check: {verdict}")
            tables = [
                name
                for (name,) in target.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
            counts = {
                name: int(target.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0])
                for name in tables
            }
        finally:
            target.close()
    finally:
        source.close()
    with partial.open("rb") as written:
        os.fsync(written.fileno())
    partial.replace(output)
    return counts


def find_pg_dump(explicit: str | None) -> Path | None:
    """``explicit`` if given (None when it is not an executable), else ``pg_dump`` on the
    PATH, else the newest one of the Debian/Ubuntu PostgreSQL packages."""
    if explicit is not None:
        path = Path(explicit)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which("pg_dump")
    if found:
        return Path(found)
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_dump"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
    )
    return candidates[-1] if candidates else None


def libpq_url(url: URL) -> tuple[str, str | None]:
    """The URL for libpq (``postgresql://``, no driver, no password) and the password."""
    from sqlalchemy.engine import URL

    password = url.password
    # Built anew: URL.set(password=None) leaves the password in place ("not given").
    plain = URL.create(
        "postgresql",
        username=url.username,
        host=url.host,
        port=url.port,
        database=url.database,
        query=url.query,
    )
    return plain.render_as_string(hide_password=False), (
        None if password is None else str(password)
    )


def pg_dump_command(pg_dump: str, dbname: str, output: Path) -> list[str]:
    """The pg_dump invocation: custom format (compressed; ``pg_restore`` picks tables)."""
    return [pg_dump, "--format=custom", "--file", str(output), "--dbname", dbname]


def backup_postgres(url: URL, output: Path, pg_dump: Path | None) -> None:
    """Run pg_dump into ``output``; without pg_dump, say which command to run and exit 1."""
    dbname, password = libpq_url(url)
    if pg_dump is None:
        shown = shlex.join(pg_dump_command("pg_dump", dbname, output))
        _fail(
            "pg_dump was not found (install the PostgreSQL client of the server's major "
            "version, or pass --pg-dump PATH). Back the database up with:\n"
            f"  PGPASSWORD=... {shown}\n"
            "and restore it with: pg_restore --clean --if-exists --dbname DATABASE_URL FILE"
        )
    partial = _partial(output)  # pg_dump writes into it, keeping its mode
    env = dict(os.environ)
    if password is not None:
        env["PGPASSWORD"] = password
    done = subprocess.run(
        pg_dump_command(str(pg_dump), dbname, partial),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        _fail(f"pg_dump failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    partial.replace(output)


def _checked(output: Path) -> Path:
    """``output``, its folder made; exit 1 if the file exists (a backup is never replaced)."""
    if output.exists():
        _fail(f"{output} exists already; choose another --output")
    output.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return output


@click.command()
@click.option(
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The backup file (default: misstriage-<UTC time>.db in a backups/ folder beside "
    "the SQLite database; var/backups/misstriage-<UTC time>.dump for PostgreSQL). "
    "An existing file is never overwritten.",
)
@click.option(
    "--pg-dump",
    "pg_dump",
    metavar="PATH",
    help="PostgreSQL: the pg_dump to run (default: found on PATH or in /usr/lib/postgresql).",
)
def backup(output: Path | None, pg_dump: str | None) -> None:
    """Back the database up while the service runs (SQLite: online backup API; PostgreSQL:
    pg_dump, custom format). Prints the backup's path on stdout."""
    from sqlalchemy.engine import make_url

    from app.db import normalise_url
    from app.settings import get_settings

    try:
        settings = get_settings()
    except ValueError as exc:
        click.echo(f"misstriage: error: {exc}", err=True)
        sys.exit(2)
    # every file this command makes (the copy, SQLite's journal, pg_dump's) is its owner's alone
    os.umask(0o077)
    url = make_url(normalise_url(settings.database_url))
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        _fail(f"cannot back up a {backend} database")
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            _fail("an in-memory SQLite database has nothing to back up")
        database = Path(url.database)
        if not database.is_file():
            _fail(f"no database at {database}")
        output = _checked(output or database.parent / "backups" / f"misstriage-{_stamp()}.db")
        try:
            counts = backup_sqlite(database, output)
        except (sqlite3.Error, RuntimeError) as exc:
            output.with_name(output.name + ".partial").unlink(missing_ok=True)
            _fail(f"backup of {database} failed: {exc}")
        rows = sum(counts.values())
        click.echo(
            f"backed up {database} to {output}: {len(counts)} tables, {rows} rows, integrity ok",
            err=True,
        )
    else:
        output = _checked(output or Path("var") / "backups" / f"misstriage-{_stamp()}.dump")
        backup_postgres(url, output, find_pg_dump(pg_dump))
        click.echo(f"backed up the PostgreSQL database to {output} (pg_dump)", err=True)
    click.echo(str(output))
