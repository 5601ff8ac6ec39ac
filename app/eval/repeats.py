"""Repeated documents within a query: the lines that repeat an earlier (qid, doc_id)."""

from __future__ import annotations

import polars as pl

#: Multiplier that spreads query hashes before they are mixed with document hashes.
_MIX = 0x9E3779B97F4A7C15
_LOW_32 = 0xFFFFFFFF


#: Rounds of ``exact_repeats`` before the rest is left to polars' distinct over both ids.
_ROUNDS = 16


def exact_repeats(rows: pl.DataFrame, key: pl.Expr, query: str = "qid") -> pl.Series:
    """``pos`` of the ``rows`` (in file order) that repeat the (``query``, doc_id) of an
    earlier one, the rows of one pair sharing ``key`` (a hash of it).

    Compared value by value, never as one key of both ids: polars' distinct over a struct
    copies each row's values into a row key, and rows that share one long id (a Parquet
    dictionary's value, held once) each became a copy of it. A round settles, in every
    ``key``, the rows equal to its first row (the first kept, the others repeats); rows of
    another pair that shares the hash go to the next round."""
    repeated: list[pl.Series] = []
    rest = rows.select(query, "doc_id", "pos", key.alias("_key"))
    for _ in range(_ROUNDS):
        if not rest.height:
            break
        first = pl.col(query).eq_missing(pl.col(query).first().over("_key")) & pl.col(
            "doc_id"
        ).eq_missing(pl.col("doc_id").first().over("_key"))
        flagged = rest.with_columns(
            first.alias("_same"), pl.int_range(pl.len()).over("_key").alias("_nth")
        )
        repeated.append(flagged.filter(pl.col("_same") & (pl.col("_nth") > 0)).get_column("pos"))
        rest = flagged.filter(~pl.col("_same")).drop("_same", "_nth")
    if rest.height:  # many pairs of one hash (made to collide): polars' own distinct
        repeated.append(
            rest.filter(~pl.struct(query, "doc_id").is_first_distinct()).get_column("pos")
        )
    return pl.concat(repeated).sort() if repeated else rows.get_column("pos").clear()


def repeated_lines(frame: pl.DataFrame) -> pl.Series:
    """Positions (``pos``) of the lines that repeat an earlier (qid, doc_id): the first wins.

    A 32-bit hash of the pair finds candidates cheaply (sorting hashes costs far less than a
    hash table of string pairs, and 32 bits take half the memory of 64: a run's peak memory is
    here); only rows whose hash repeats are compared exactly, so a hash collision can never
    drop a line (at seven million lines about six thousand pairs collide, and are compared).
    """
    key = (
        ((pl.col("qid").hash() * _MIX) ^ pl.col("doc_id").hash()) & pl.lit(_LOW_32, pl.UInt64)
    ).cast(pl.UInt32)
    import numpy as np  # here: a command that ranks no run does not load it

    keys = frame.lazy().select(key.alias("key")).collect(engine="streaming").to_series()
    # numpy's sort of 32-bit keys is several times quicker than polars' (SIMD); on a copy of
    # the keys (kept below), one copy only: the one to_numpy makes of a chunked column is
    # writeable and sorted in place, a view of polars' memory is read-only and sorted into one
    ordered = keys.to_numpy()
    if ordered.flags.writeable:
        ordered.sort()
    else:
        ordered = np.sort(ordered)
    # neighbours compared through two views of the sorted keys: no shifted copy
    repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    del ordered
    if not repeated.size:
        return pl.Series("pos", [], dtype=pl.UInt32)
    # the rows to compare exactly, found in the keys kept (not by hashing every line again)
    rows = keys.is_in(pl.Series(repeated).implode()).arg_true()
    del keys
    candidates = frame.select("qid", "doc_id", "pos")[rows].sort("pos")  # the first one is kept
    return exact_repeats(candidates, key)


def dropped_per_query(frame: pl.DataFrame, dropped: pl.Series) -> dict[str, int]:
    """The number of ``dropped`` lines (by ``pos``) of each query."""
    if not dropped.len():
        return {}  # nothing to look up seven million positions in
    return dict(
        frame.filter(pl.col("pos").is_in(dropped.implode())).group_by("qid").len().iter_rows()
    )
