"""Bulk writes inside the caller's transaction: COPY on PostgreSQL, executemany on SQLite."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import polars as pl
from psycopg.copy import QueuedLibpqWriter
from sqlmodel import Session, SQLModel

COPY_SLICE_ROWS = 200_000
#: SQLite: the page cache of a connection while it bulk-writes, in KiB (SQLite's default is
#: 2 MiB: rows inserted in any order but their keys' spill the indexes' pages again and again;
#: 800,000 golden queries took 25 s with it, 12 s with this).
SQLITE_BULK_CACHE_KIB = 256 << 10


def bulk_insert(
    session: Session, model: type[SQLModel], frame: pl.DataFrame, *, batch_rows: int = 50_000
) -> int:
    """Insert every row of ``frame`` (columns named as the table's) into ``model``'s table.

    Runs on the session's connection, so it commits or rolls back with everything else.
    """
    if frame.height == 0:
        return 0
    columns = frame.columns
    table = str(model.__tablename__)
    connection = session.connection()
    driver: Any = connection.connection.driver_connection
    if connection.dialect.name == "postgresql":
        names = ", ".join(f'"{c}"' for c in columns)
        statement = f'COPY "{table}" ({names}) FROM STDIN WITH (FORMAT csv)'
        # a thread of psycopg's sends each slice while the next is formatted
        with (
            driver.cursor() as cursor,
            cursor.copy(statement, writer=QueuedLibpqWriter(cursor)) as copy,
        ):
            for part in frame.iter_slices(COPY_SLICE_ROWS):
                copy.write(part.write_csv(include_header=False))
        return frame.height
    names = ", ".join(f'"{c}"' for c in columns)
    marks = ", ".join("?" for _ in columns)
    statement = f'INSERT INTO "{table}" ({names}) VALUES ({marks})'
    cursor = driver.cursor()
    try:
        (cache,) = cursor.execute("PRAGMA cache_size").fetchone()
        # a negative size is in KiB; a pooled connection gets its own size back after
        if cache >= 0 or -cache < SQLITE_BULK_CACHE_KIB:
            cursor.execute(f"PRAGMA cache_size = -{SQLITE_BULK_CACHE_KIB}")
        try:
            for part in frame.iter_slices(batch_rows):
                cursor.executemany(statement, part.iter_rows())
        finally:
            cursor.execute(f"PRAGMA cache_size = {int(cache)}")
    finally:
        cursor.close()
    return frame.height


@contextmanager
def copy_rows(
    session: Session, model: type[SQLModel], columns: Sequence[str]
) -> Iterator[Callable[[pl.DataFrame], None]]:
    """PostgreSQL: one COPY into ``model``'s table, open while the block runs, on the
    session's connection (it commits or rolls back with everything else). The callable
    yielded writes the rows of a frame (its ``columns``, named as the table's); a thread of
    psycopg's sends them while the caller goes on. An exception leaving the block ends the
    COPY with an error: none of its rows stays."""
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        raise ValueError("copy_rows needs PostgreSQL; bulk_insert writes on any database")
    driver: Any = connection.connection.driver_connection
    table = str(model.__tablename__)
    names = ", ".join(f'"{c}"' for c in columns)
    statement = f'COPY "{table}" ({names}) FROM STDIN WITH (FORMAT csv)'
    with (
        driver.cursor() as cursor,
        cursor.copy(statement, writer=QueuedLibpqWriter(cursor)) as copy,
    ):

        def write(frame: pl.DataFrame) -> None:
            for part in frame.select(columns).iter_slices(COPY_SLICE_ROWS):
                copy.write(part.write_csv(include_header=False))

        yield write
